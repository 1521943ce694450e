// user:add, user:list, token:create, token:list, token:revoke (X1, X4).
// Secrets (generated passwords, token secrets) are printed once and stored
// only as hashes; every change is audited with actor "cli:<unix user>".
#include <unistd.h>

#include <iostream>
#include <iterator>

#include "api/store_authenticator.h"
#include "cli.h"
#include "engine/engine_internal.h"
#include "server/operations.h"
#include "storage/store.h"

namespace taskengine::cli {
namespace {

constexpr std::size_t kGeneratedPasswordBytes = 18;  // 24 base64url characters
constexpr std::int64_t kMaxExpiryDays = 3650;

std::string Join(const std::vector<std::string>& v, const char* sep = ",") {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t comma = s.find(',', start);
    std::string part =
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!part.empty()) out.push_back(part);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// --tenant values, or {"*"} (every tenant) when none were given.
Result<std::vector<std::string>> TenantList(const std::vector<std::string>& given) {
  if (given.empty()) return std::vector<std::string>{"*"};
  for (const std::string& t : given) {
    if (t != "*" && !IsValidTenantId(t)) {
      return InvalidArgument("'" + t + "' is not a tenant id ([a-z0-9][a-z0-9_-]{0,49}) nor *");
    }
  }
  return given;
}

bool ValidLabel(const std::string& s) {
  if (s.empty() || s.size() > 100) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '@' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// "30d", "12h", "90m", "3600s" -> milliseconds.
Result<Millis> ParseExpiresIn(const std::string& text) {
  auto bad = [&] {
    return InvalidArgument("--expires-in='" + text +
                           "' must be a positive number with a unit s, m, h or d (e.g. 30d), at "
                           "most " +
                           std::to_string(kMaxExpiryDays) + " days");
  };
  if (text.size() < 2 || text.size() > 12) return bad();
  const char unit = text.back();
  const std::string digits = text.substr(0, text.size() - 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos) return bad();
  const std::int64_t n = std::stoll(digits);
  Millis unit_ms = 0;
  switch (unit) {
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
  if (n <= 0 || n > kMaxExpiryDays * 86'400'000 / unit_ms) return bad();
  return n * unit_ms;
}

Status Audit(Store& store, const std::string& action, const std::string& target,
             const nlohmann::json& before, const nlohmann::json& after) {
  AuditRecord r;
  r.actor = CliRequester();
  r.action = action;
  r.target = target;
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
                    const std::vector<std::string>& tenants) {
  for (const std::string& t : tenants) {
    TE_RETURN_IF_ERROR(ChangeGrant(store, true, principal, t, CliRequester()).status());
  }
  return Status::Ok();
}

// --- user:add, user:list ---

struct UserAddFlags {
  std::string name;
  std::string role;
  std::vector<std::string> tenants;
  bool password_stdin = false;
};

int RunUserAdd(const GlobalFlags& flags, const UserAddFlags& f) {
  auto scopes = api::RoleScopes(f.role);
  if (!scopes.ok()) return Fail(scopes.status());
  auto tenants = TenantList(f.tenants);
  if (!tenants.ok()) return Fail(tenants.status());
  std::string password;
  const bool generated = !f.password_stdin;
  if (f.password_stdin) {
    password.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    if (!password.empty() && password.back() == '\n') password.pop_back();
    if (!password.empty() && password.back() == '\r') password.pop_back();
    if (password.empty()) return Fail(InvalidArgument("--password-stdin: no password on stdin"));
  } else {
    password = api::RandomToken(kGeneratedPasswordBytes);
  }
  auto hash = api::HashPassword(password);
  if (!hash.ok()) return Fail(hash.status());

  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  Store& store = StoreOf(**engine);
  auto existing = store.GetUser(f.name);
  if (existing.ok()) return Fail(Conflict("user '" + f.name + "' already exists"));
  if (existing.status().code() != ErrorCode::kNotFound) return Fail(existing.status());
  User user;
  user.name = f.name;
  user.password_hash = *hash;
  user.scopes = *scopes;
  user.tenants = *tenants;
  Status s = store.UpsertUser(user);
  if (!s.ok()) return Fail(s);
  s = GrantTenants(store, user.name, user.tenants);
  if (!s.ok()) return Fail(s);
  nlohmann::json view = {
      {"name", user.name}, {"role", f.role}, {"scopes", user.scopes}, {"tenants", user.tenants}};
  s = Audit(store, "user.add", "user:" + user.name, nullptr, view);
  if (!s.ok()) return Fail(s);
  if (flags.json) {
    nlohmann::ordered_json out = {
        {"name", user.name}, {"role", f.role}, {"scopes", user.scopes}, {"tenants", user.tenants}};
    if (generated) out["password"] = password;
    PrintJson(out);
    return kExitOk;
  }
  std::cout << "created user " << user.name << " (role " << f.role << ", tenants "
            << Join(user.tenants) << ")" << std::endl;
  if (generated) {
    std::cout << "password: " << password << "\n(shown once: it is stored only as an Argon2id hash)"
              << std::endl;
  }
  return kExitOk;
}

int RunUserList(const GlobalFlags& flags) {
  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  auto users = StoreOf(**engine).ListUsers();
  if (!users.ok()) return Fail(users.status());
  if (flags.json) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const User& u : *users) {
      list.push_back({{"name", u.name},
                      {"role", api::RoleOf(u.scopes)},
                      {"scopes", u.scopes},
                      {"tenants", u.tenants},
                      {"disabled", u.disabled},
                      {"created_at", ShortTime(u.created_at)}});
    }
    PrintJson({{"users", std::move(list)}});
    return kExitOk;
  }
  Table table({"NAME", "ROLE", "SCOPES", "TENANTS", "DISABLED", "CREATED"});
  for (const User& u : *users) {
    table.Add({u.name, api::RoleOf(u.scopes), Join(u.scopes), Join(u.tenants),
               u.disabled ? "yes" : "no", ShortTime(u.created_at)});
  }
  table.Print(std::cout);
  return kExitOk;
}

// --- token:create, token:list, token:revoke ---

struct TokenCreateFlags {
  std::string name;
  std::string scopes;
  std::vector<std::string> tenants;
  std::string expires_in;
  std::string principal;
};

int RunTokenCreate(const GlobalFlags& flags, const TokenCreateFlags& f) {
  if (!ValidLabel(f.name)) {
    return Fail(InvalidArgument("--name must be 1..100 characters of [A-Za-z0-9._@-]"));
  }
  std::vector<std::string> scopes = SplitComma(f.scopes);
  if (scopes.empty()) {
    return Fail(
        InvalidArgument("--scopes needs at least one of read, dispatch, operate, admin, worker"));
  }
  for (const std::string& s : scopes) {
    if (!api::ParseScope(s)) {
      return Fail(
          InvalidArgument("unknown scope '" + s + "' (read, dispatch, operate, admin, worker)"));
    }
  }
  auto tenants = TenantList(f.tenants);
  if (!tenants.ok()) return Fail(tenants.status());
  Millis ttl = 0;
  if (!f.expires_in.empty()) {
    auto parsed = ParseExpiresIn(f.expires_in);
    if (!parsed.ok()) return Fail(parsed.status());
    ttl = *parsed;
  }
  const std::string principal = f.principal.empty() ? "token:" + f.name : f.principal;
  if (principal.size() > 200) return Fail(InvalidArgument("--principal is longer than 200 bytes"));

  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  Store& store = StoreOf(**engine);
  const std::string secret = api::NewTokenSecret();
  ApiToken token;
  token.name = f.name;
  token.secret_hash = api::HashSecret(secret);
  token.principal = principal;
  token.scopes = scopes;
  token.tenants = *tenants;
  token.expires_at = ttl == 0 ? 0 : (*engine)->clock()->NowMillis() + ttl;
  auto id = store.CreateToken(token);
  if (!id.ok()) return Fail(id.status());
  Status s = GrantTenants(store, principal, token.tenants);
  if (!s.ok()) return Fail(s);
  nlohmann::json view = {
      {"id", *id},        {"name", token.name},       {"principal", principal},
      {"scopes", scopes}, {"tenants", token.tenants}, {"expires_at", ShortTime(token.expires_at)}};
  s = Audit(store, "token.create", "token:" + std::to_string(*id), nullptr, view);
  if (!s.ok()) return Fail(s);
  if (flags.json) {
    PrintJson({{"id", *id},
               {"name", token.name},
               {"principal", principal},
               {"scopes", scopes},
               {"tenants", token.tenants},
               {"expires_at", token.expires_at == 0 ? "" : ShortTime(token.expires_at)},
               {"secret", secret}});
    return kExitOk;
  }
  std::cout
      << "created token " << *id << " '" << token.name << "' for " << principal << " (scopes "
      << Join(scopes) << ", tenants " << Join(token.tenants) << ", expires "
      << (token.expires_at == 0 ? "never" : ShortTime(token.expires_at)) << ")\n"
      << "secret: " << secret << "\n"
      << "(shown once: only its SHA-256 is stored; send it as 'Authorization: Bearer <secret>')"
      << std::endl;
  return kExitOk;
}

std::string TokenState(const ApiToken& t, Millis now) {
  if (t.revoked_at != 0) return "revoked";
  if (t.expires_at != 0 && now >= t.expires_at) return "expired";
  return "live";
}

int RunTokenList(const GlobalFlags& flags) {
  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  auto tokens = StoreOf(**engine).ListTokens();
  if (!tokens.ok()) return Fail(tokens.status());
  const Millis now = (*engine)->clock()->NowMillis();
  if (flags.json) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const ApiToken& t : *tokens) {
      list.push_back({{"id", t.id},
                      {"name", t.name},
                      {"principal", t.principal},
                      {"scopes", t.scopes},
                      {"tenants", t.tenants},
                      {"state", TokenState(t, now)},
                      {"created_at", ShortTime(t.created_at)},
                      {"expires_at", t.expires_at == 0 ? "" : ShortTime(t.expires_at)},
                      {"revoked_at", t.revoked_at == 0 ? "" : ShortTime(t.revoked_at)},
                      {"last_used_at", t.last_used_at == 0 ? "" : ShortTime(t.last_used_at)}});
    }
    PrintJson({{"tokens", std::move(list)}});
    return kExitOk;
  }
  Table table({"ID", "NAME", "PRINCIPAL", "SCOPES", "TENANTS", "STATE", "EXPIRES", "LAST USED"});
  for (const ApiToken& t : *tokens) {
    table.Add({std::to_string(t.id), t.name, t.principal, Join(t.scopes), Join(t.tenants),
               TokenState(t, now), t.expires_at == 0 ? "never" : ShortTime(t.expires_at),
               ShortTime(t.last_used_at)});
  }
  table.Print(std::cout);
  return kExitOk;
}

int RunTokenRevoke(const GlobalFlags& flags, std::int64_t id) {
  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  Store& store = StoreOf(**engine);
  auto tokens = store.ListTokens();
  if (!tokens.ok()) return Fail(tokens.status());
  const ApiToken* found = nullptr;
  for (const ApiToken& t : *tokens) {
    if (t.id == id) found = &t;
  }
  if (found == nullptr) return Fail(NotFound("no token " + std::to_string(id)));
  const bool was_revoked = found->revoked_at != 0;
  Status s = store.RevokeToken(id);
  if (!s.ok()) return Fail(s);
  if (!was_revoked) {
    s = Audit(store, "token.revoke", "token:" + std::to_string(id),
              {{"name", found->name}, {"principal", found->principal}, {"state", "live"}},
              {{"state", "revoked"}});
    if (!s.ok()) return Fail(s);
  }
  if (flags.json) {
    PrintJson({{"id", id}, {"name", found->name}, {"revoked", true}, {"was_revoked", was_revoked}});
    return kExitOk;
  }
  std::cout << (was_revoked ? "token " + std::to_string(id) + " was already revoked"
                            : "revoked token " + std::to_string(id) + " '" + found->name + "'")
            << std::endl;
  return kExitOk;
}

}  // namespace

void AddSecurityVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs) {
  auto uf = std::make_shared<UserAddFlags>();
  CLI::App* user_add = AddVerb(
      app, "user:add",
      "Create a dashboard user with a role (admin: everything; operator: operate and dispatch; "
      "viewer: read) and tenant grants (default: every tenant). The password is read from stdin "
      "with --password-stdin, else a random one is printed once. Stored as an Argon2id hash. "
      "Audited.");
  user_add->add_option("name", uf->name, "User name: [a-z0-9][a-z0-9._@-]{0,99}")->required();
  user_add->add_option("--role", uf->role, "admin | operator | viewer")
      ->required()
      ->check(CLI::IsMember({"admin", "operator", "viewer"}));
  user_add->add_option("--tenant", uf->tenants,
                       "A tenant the user may see (repeatable; * or none = every tenant)");
  user_add->add_flag(
      "--password-stdin", uf->password_stdin,
      "Read the password from stdin (a trailing newline is dropped) instead of generating one");
  verbs->push_back({user_add, [&flags, uf] { return RunUserAdd(flags, *uf); }});

  CLI::App* user_list =
      AddVerb(app, "user:list", "Dashboard users: role, scopes, tenants (never password hashes).");
  verbs->push_back({user_list, [&flags] { return RunUserList(flags); }});

  auto tf = std::make_shared<TokenCreateFlags>();
  CLI::App* token_create = AddVerb(
      app, "token:create",
      "Create an API bearer token and print its secret once (only its SHA-256 is stored). Scopes: "
      "read, dispatch, operate, admin, worker (worker tokens reach only the worker protocol). "
      "Audited.");
  token_create->add_option("--name", tf->name, "A label, e.g. billing-worker ([A-Za-z0-9._@-])")
      ->required();
  token_create->add_option("--scopes", tf->scopes, "Comma-separated scopes, e.g. read,dispatch")
      ->required();
  token_create->add_option("--tenant", tf->tenants,
                           "A tenant the token is bound to (repeatable; * or none = every tenant)");
  token_create->add_option("--expires-in", tf->expires_in,
                           "Lifetime, e.g. 3600s, 90m, 12h, 30d (default: never expires)");
  token_create->add_option(
      "--principal", tf->principal,
      "The identity calls are made as (requester, audit). Default: token:<name>");
  verbs->push_back({token_create, [&flags, tf] { return RunTokenCreate(flags, *tf); }});

  CLI::App* token_list = AddVerb(
      app, "token:list",
      "API tokens: id, name, principal, scopes, tenants, state (live, expired, revoked), last use. "
      "Never secrets.");
  verbs->push_back({token_list, [&flags] { return RunTokenList(flags); }});

  auto revoke_id = std::make_shared<std::int64_t>(0);
  CLI::App* token_revoke = AddVerb(
      app, "token:revoke",
      "Revoke an API token by id: it answers 401 from the next request on. Idempotent. Audited.");
  token_revoke->add_option("id", *revoke_id, "Token id (see token:list)")
      ->required()
      ->check(CLI::PositiveNumber);
  verbs->push_back(
      {token_revoke, [&flags, revoke_id] { return RunTokenRevoke(flags, *revoke_id); }});
}

}  // namespace taskengine::cli
