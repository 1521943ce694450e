// user:add, user:list, user:disable, user:enable, token:create, token:list,
// token:revoke (X1, X4), over api/accounts.h as the admin API. Secrets
// (generated passwords, token secrets) are printed once and stored only as
// hashes; every change is audited with actor "cli:<unix user>".
#include <iostream>
#include <iterator>

#include "api/accounts.h"
#include "api/store_authenticator.h"
#include "cli.h"
#include "engine/engine_internal.h"
#include "server/operations.h"
#include "storage/store.h"
#include "views/views.h"

namespace taskengine::cli {
namespace {

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

api::AccountActor Actor() { return api::AccountActor{CliRequester(), ""}; }

// --- user:add, user:list ---

struct UserAddFlags {
  std::string name;
  std::string role;
  std::vector<std::string> tenants;
  bool password_stdin = false;
};

int RunUserAdd(const GlobalFlags& flags, const UserAddFlags& f) {
  api::NewUser in;
  in.name = f.name;
  in.role = f.role;
  in.tenants = f.tenants;
  if (f.password_stdin) {
    std::string password(std::istreambuf_iterator<char>(std::cin),
                         std::istreambuf_iterator<char>{});
    if (!password.empty() && password.back() == '\n') password.pop_back();
    if (!password.empty() && password.back() == '\r') password.pop_back();
    if (password.empty()) return Fail(InvalidArgument("--password-stdin: no password on stdin"));
    in.password = std::move(password);
  }
  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  auto created = api::CreateUser(StoreOf(**engine), in, Actor());
  if (!created.ok()) return Fail(created.status());
  const User& user = created->user;
  if (flags.json) {
    Json out = api::UserDocument(user);
    if (!created->password.empty()) out["password"] = created->password;
    PrintJson(out);
    return kExitOk;
  }
  std::cout << "created user " << user.name << " (role " << created->role << ", tenants "
            << Join(user.tenants) << ")" << std::endl;
  if (!created->password.empty()) {
    std::cout << "password: " << created->password
              << "\n(shown once: it is stored only as an Argon2id hash)" << std::endl;
  }
  return kExitOk;
}

int RunUserList(const GlobalFlags& flags) {
  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  auto users = StoreOf(**engine).ListUsers();
  if (!users.ok()) return Fail(users.status());
  if (flags.json) {
    Json list = Json::array();
    for (const User& u : *users) list.push_back(api::UserDocument(u));
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

int RunUserSetDisabled(const GlobalFlags& flags, const std::string& name, bool disabled) {
  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  auto user = api::SetUserDisabled(StoreOf(**engine), name, disabled, Actor());
  if (!user.ok()) return Fail(user.status());
  if (flags.json) {
    PrintJson(api::UserDocument(*user));
    return kExitOk;
  }
  std::cout << (disabled ? "disabled user " : "enabled user ") << user->name << std::endl;
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
  api::NewToken in;
  in.name = f.name;
  in.scopes = SplitComma(f.scopes);
  in.tenants = f.tenants;
  in.principal = f.principal;
  if (!f.expires_in.empty()) {
    auto lifetime = api::ParseLifetime(f.expires_in, "--expires-in");
    if (!lifetime.ok()) return Fail(lifetime.status());
    in.lifetime_ms = *lifetime;
  }
  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  const Millis now = (*engine)->clock()->NowMillis();
  auto created = api::CreateToken(StoreOf(**engine), in, now, Actor());
  if (!created.ok()) return Fail(created.status());
  const ApiToken& token = created->token;
  if (flags.json) {
    Json out = TokenToJson(token, now);
    out["secret"] = created->secret;
    PrintJson(out);
    return kExitOk;
  }
  std::cout
      << "created token " << token.id << " '" << token.name << "' for " << token.principal
      << " (scopes " << Join(token.scopes) << ", tenants " << Join(token.tenants) << ", expires "
      << (token.expires_at == 0 ? "never" : ShortTime(token.expires_at)) << ")\n"
      << "secret: " << created->secret << "\n"
      << "(shown once: only its SHA-256 is stored; send it as 'Authorization: Bearer <secret>')"
      << std::endl;
  return kExitOk;
}

int RunTokenList(const GlobalFlags& flags) {
  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  auto tokens = StoreOf(**engine).ListTokens();
  if (!tokens.ok()) return Fail(tokens.status());
  const Millis now = (*engine)->clock()->NowMillis();
  if (flags.json) {
    Json list = Json::array();
    for (const ApiToken& t : *tokens) list.push_back(TokenToJson(t, now));
    PrintJson({{"tokens", std::move(list)}});
    return kExitOk;
  }
  Table table({"ID", "NAME", "PRINCIPAL", "SCOPES", "TENANTS", "STATE", "EXPIRES", "LAST USED"});
  for (const ApiToken& t : *tokens) {
    table.Add({std::to_string(t.id), t.name, t.principal, Join(t.scopes), Join(t.tenants),
               std::string(TokenState(t, now)),
               t.expires_at == 0 ? "never" : ShortTime(t.expires_at), ShortTime(t.last_used_at)});
  }
  table.Print(std::cout);
  return kExitOk;
}

int RunTokenRevoke(const GlobalFlags& flags, std::int64_t id) {
  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  auto revoked = api::RevokeToken(StoreOf(**engine), id, Actor());
  if (!revoked.ok()) return Fail(revoked.status());
  const std::string name = revoked->token.name;
  if (flags.json) {
    PrintJson(
        {{"id", id}, {"name", name}, {"revoked", true}, {"was_revoked", revoked->was_revoked}});
    return kExitOk;
  }
  std::cout << (revoked->was_revoked ? "token " + std::to_string(id) + " was already revoked"
                                     : "revoked token " + std::to_string(id) + " '" + name + "'")
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

  for (const bool disabled : {true, false}) {
    auto name = std::make_shared<std::string>();
    CLI::App* verb = AddVerb(
        app, disabled ? "user:disable" : "user:enable",
        disabled ? "Disable a dashboard user: it cannot log in and its open sessions end at their "
                   "next request. Refused for the last enabled admin with every tenant. Audited."
                 : "Enable a disabled dashboard user again. Audited.");
    verb->add_option("name", *name, "User name (see user:list)")->required();
    verbs->push_back(
        {verb, [&flags, name, disabled] { return RunUserSetDisabled(flags, *name, disabled); }});
  }

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
