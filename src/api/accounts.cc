#include "api/accounts.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "api/auth.h"
#include "api/store_authenticator.h"

namespace taskengine::api {
namespace {

constexpr std::size_t kGeneratedPasswordBytes = 18;  // 24 base64url characters
constexpr std::size_t kMaxTokenName = 100;

Status Audit(Store& store, const AccountActor& actor, std::string action, std::string target,
             const Json& before, const Json& after) {
  AuditRecord r;
  r.actor = actor.name;
  r.action = std::move(action);
  r.target = std::move(target);
  r.reason = actor.reason;
  if (!before.is_null()) r.before_json = before.dump();
  if (!after.is_null()) r.after_json = after.dump();
  Status s = store.AppendAudit(r);
  if (!s.ok()) {
    return Status(s.code(),
                  "the change was made but its audit record could not be written: " + s.message());
  }
  return Status::Ok();
}

// Grants the principal each of its tenants, so that the engine's grant checks
// (replays recheck the requester's grants, R1) agree with its tenant binding.
Status GrantTenants(Store& store, const std::string& principal,
                    const std::vector<std::string>& tenants, const AccountActor& actor) {
  for (const std::string& t : tenants) {
    TE_RETURN_IF_ERROR(ChangeGrant(store, true, principal, t, actor).status());
  }
  return Status::Ok();
}

bool IsTokenName(std::string_view s) {
  if (s.empty() || s.size() > kMaxTokenName) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '@' || c == '-';
  });
}

bool IsGlobalAdmin(const User& u) {
  return !u.disabled && std::find(u.scopes.begin(), u.scopes.end(), "admin") != u.scopes.end() &&
         std::find(u.tenants.begin(), u.tenants.end(), "*") != u.tenants.end();
}

}  // namespace

Result<GrantChange> ChangeGrant(Store& store, bool add, const std::string& principal,
                                const std::string& tenant, const AccountActor& actor) {
  if (principal.empty()) return InvalidArgument("the principal must not be empty");
  if (tenant != "*" && !IsValidTenantId(tenant)) {
    return InvalidArgument("'" + tenant +
                           "' is not a tenant id ([a-z0-9][a-z0-9_-]{0,49}) nor * (every tenant)");
  }
  TE_RETURN_IF_ERROR(add ? store.Grant(principal, tenant) : store.Revoke(principal, tenant));
  AuditRecord record;
  record.actor = actor.name;
  record.reason = actor.reason;
  record.tenant = tenant == "*" ? "" : tenant;
  record.action = add ? "grant.add" : "grant.revoke";
  record.target = "principal:" + principal;
  const std::string grant = nlohmann::json({{"principal", principal}, {"tenant", tenant}}).dump();
  (add ? record.after_json : record.before_json) = grant;
  Status audited = store.AppendAudit(record);
  if (!audited.ok()) {
    return Status(audited.code(),
                  std::string("the grant was ") + (add ? "added" : "revoked") +
                      " but its audit record could not be written: " + audited.message());
  }
  GrantChange change;
  change.principal = principal;
  change.tenant = tenant;
  change.added = add;
  TE_ASSIGN_OR_RETURN(change.effective, store.IsGranted(principal, tenant));
  return change;
}

Json UserDocument(const User& user) { return UserToJson(user, RoleOf(user.scopes)); }

Result<std::vector<std::string>> TenantsOrAll(const std::vector<std::string>& given) {
  if (given.empty()) return std::vector<std::string>{"*"};
  for (const std::string& t : given) {
    if (t != "*" && !IsValidTenantId(t)) {
      return InvalidArgument("'" + t + "' is not a tenant id ([a-z0-9][a-z0-9_-]{0,49}) nor *");
    }
  }
  return given;
}

Result<CreatedUser> CreateUser(Store& store, const NewUser& in, const AccountActor& actor) {
  TE_ASSIGN_OR_RETURN(std::vector<std::string> scopes, RoleScopes(in.role));
  TE_ASSIGN_OR_RETURN(std::vector<std::string> tenants, TenantsOrAll(in.tenants));
  if (in.password && in.password->size() < kMinPasswordBytes) {
    return InvalidArgument("the password must be at least " + std::to_string(kMinPasswordBytes) +
                           " bytes");
  }
  CreatedUser out;
  const std::string password = in.password ? *in.password : RandomToken(kGeneratedPasswordBytes);
  if (!in.password) out.password = password;
  TE_ASSIGN_OR_RETURN(std::string hash, HashPassword(password));

  Result<User> existing = store.GetUser(in.name);
  if (existing.ok()) return Conflict("user '" + in.name + "' already exists");
  if (existing.status().code() != ErrorCode::kNotFound) return existing.status();
  User user;
  user.name = in.name;
  user.password_hash = std::move(hash);
  user.scopes = std::move(scopes);
  user.tenants = std::move(tenants);
  TE_RETURN_IF_ERROR(store.UpsertUser(user));
  TE_RETURN_IF_ERROR(GrantTenants(store, user.name, user.tenants, actor));
  TE_ASSIGN_OR_RETURN(out.user, store.GetUser(user.name));
  out.user.password_hash.clear();
  out.role = in.role;
  TE_RETURN_IF_ERROR(
      Audit(store, actor, "user.add", "user:" + user.name, nullptr, UserDocument(out.user)));
  return out;
}

Result<User> SetUserDisabled(Store& store, std::string_view name, bool disabled,
                             const AccountActor& actor) {
  Result<User> user = store.GetUser(name);
  if (!user.ok()) {
    if (user.status().code() == ErrorCode::kNotFound) {
      return NotFound("user '" + std::string(name.substr(0, 100)) + "' not found");
    }
    return user.status();
  }
  if (user->disabled == disabled) {
    user->password_hash.clear();
    return user;
  }
  if (disabled && IsGlobalAdmin(*user)) {
    TE_ASSIGN_OR_RETURN(std::vector<User> users, store.ListUsers());
    const bool another = std::any_of(users.begin(), users.end(), [&](const User& u) {
      return u.name != user->name && IsGlobalAdmin(u);
    });
    if (!another) {
      return Conflict("user '" + user->name +
                      "' is the last enabled admin with every tenant: disabling it "
                      "would leave nobody to manage users");
    }
  }
  User before = *user;
  before.password_hash.clear();
  user->disabled = disabled;
  TE_RETURN_IF_ERROR(store.UpsertUser(*user));
  user->password_hash.clear();
  TE_RETURN_IF_ERROR(Audit(store, actor, disabled ? "user.disable" : "user.enable",
                           "user:" + user->name, UserDocument(before), UserDocument(*user)));
  return user;
}

Result<CreatedToken> CreateToken(Store& store, const NewToken& in, Millis now,
                                 const AccountActor& actor) {
  if (!IsTokenName(in.name)) {
    return InvalidArgument("the token name must be 1..100 characters of [A-Za-z0-9._@-]");
  }
  if (in.scopes.empty()) {
    return InvalidArgument("a token needs at least one of read, dispatch, operate, admin, worker");
  }
  for (const std::string& s : in.scopes) {
    if (!ParseScope(s)) {
      return InvalidArgument("unknown scope '" + s.substr(0, 50) +
                             "' (read, dispatch, operate, admin, worker)");
    }
  }
  TE_ASSIGN_OR_RETURN(std::vector<std::string> tenants, TenantsOrAll(in.tenants));
  if (in.lifetime_ms < 0 || in.lifetime_ms > kMaxTokenLifetimeDays * 86'400'000) {
    return InvalidArgument("the lifetime must be at most " + std::to_string(kMaxTokenLifetimeDays) +
                           " days");
  }
  const std::string principal = in.principal.empty() ? "token:" + in.name : in.principal;
  if (principal.size() > kMaxPrincipalBytes) {
    return InvalidArgument("the principal is longer than " + std::to_string(kMaxPrincipalBytes) +
                           " bytes");
  }
  CreatedToken out;
  out.secret = NewTokenSecret();
  ApiToken& token = out.token;
  token.name = in.name;
  token.secret_hash = HashSecret(out.secret);
  token.principal = principal;
  token.scopes = in.scopes;
  token.tenants = std::move(tenants);
  token.created_at = now;
  token.expires_at = in.lifetime_ms == 0 ? 0 : now + in.lifetime_ms;
  TE_ASSIGN_OR_RETURN(token.id, store.CreateToken(token));
  token.secret_hash.clear();
  TE_RETURN_IF_ERROR(GrantTenants(store, principal, token.tenants, actor));
  TE_RETURN_IF_ERROR(Audit(store, actor, "token.create", "token:" + std::to_string(token.id),
                           nullptr, TokenToJson(token, now)));
  return out;
}

Result<RevokedToken> RevokeToken(Store& store, std::int64_t id, const AccountActor& actor) {
  TE_ASSIGN_OR_RETURN(std::vector<ApiToken> tokens, store.ListTokens());
  auto found =
      std::find_if(tokens.begin(), tokens.end(), [id](const ApiToken& t) { return t.id == id; });
  if (found == tokens.end()) return NotFound("token " + std::to_string(id) + " not found");
  RevokedToken out;
  out.token = *found;
  out.token.secret_hash.clear();
  out.was_revoked = found->revoked_at != 0;
  if (out.was_revoked) return out;
  TE_RETURN_IF_ERROR(store.RevokeToken(id));
  TE_RETURN_IF_ERROR(
      Audit(store, actor, "token.revoke", "token:" + std::to_string(id),
            {{"name", found->name}, {"principal", found->principal}, {"state", "live"}},
            {{"state", "revoked"}}));
  return out;
}

Result<Millis> ParseLifetime(std::string_view text, std::string_view field) {
  auto bad = [&] {
    return InvalidArgument(std::string(field) + "='" + std::string(text.substr(0, 20)) +
                           "' must be a positive number with a unit s, m, h or d (e.g. 30d), at "
                           "most " +
                           std::to_string(kMaxTokenLifetimeDays) + " days");
  };
  if (text.size() < 2 || text.size() > 12) return bad();
  const std::string_view digits = text.substr(0, text.size() - 1);
  if (digits.find_first_not_of("0123456789") != std::string_view::npos) return bad();
  Millis unit_ms = 0;
  switch (text.back()) {
    case 's':
      unit_ms = 1000;
      break;
    case 'm':
      unit_ms = 60'000;
      break;
    case 'h':
      unit_ms = 3'600'000;
      break;
    case 'd':
      unit_ms = 86'400'000;
      break;
    default:
      return bad();
  }
  const std::int64_t n = std::stoll(std::string(digits));
  if (n <= 0 || n > kMaxTokenLifetimeDays * 86'400'000 / unit_ms) return bad();
  return n * unit_ms;
}

}  // namespace taskengine::api
