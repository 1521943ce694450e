// Who may use taskengine (X1, X4): dashboard users, API tokens and tenant
// grants. The one place where they are created, changed and audited, for the
// CLI verbs (user:*, token:*, grant:*) and the admin API (/api/v1/users,
// /api/v1/tokens) alike. Secrets (generated passwords, token secrets) are
// returned once and stored only as hashes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "storage/store.h"
#include "taskengine/status.h"
#include "taskengine/types.h"
#include "views/views.h"

namespace taskengine::api {

inline constexpr std::size_t kMinPasswordBytes = 12;
inline constexpr std::size_t kMaxPrincipalBytes = 200;
inline constexpr std::size_t kMaxPasswordBytes = 1024;
inline constexpr std::int64_t kMaxTokenLifetimeDays = 3650;

// Who acts and why: recorded in the audit log with every change.
struct AccountActor {
  std::string name;    // the actor ("cli:alice", "bob")
  std::string reason;  // may be empty
};

// --- grants ---

// What a grant change did.
struct GrantChange {
  std::string principal;
  std::string tenant;  // a tenant id, or "*" for every tenant (global scope)
  bool added = false;  // added (else revoked)
  // After the change: whether the principal may act for `tenant` (also true
  // after revoking a tenant while a "*" grant remains). Always true for "*"
  // after an add.
  bool effective = false;
};

// Adds (or revokes) a grant, then appends its audit record (action
// "grant.add" / "grant.revoke", target "principal:<principal>", tenant
// `tenant` or empty for "*"). Idempotent. kInvalidArgument for an empty
// principal or a bad tenant. The store has no audited grant transaction yet,
// so the two writes are separate: if the audit append fails the grant stays
// changed and the error says so.
Result<GrantChange> ChangeGrant(Store& store, bool add, const std::string& principal,
                                const std::string& tenant, const AccountActor& actor);

// The tenants of a new user or token: `given`, or {"*"} (every tenant) when
// empty. kInvalidArgument naming the bad one otherwise.
Result<std::vector<std::string>> TenantsOrAll(const std::vector<std::string>& given);

// --- users ---

struct NewUser {
  std::string name;                     // [a-z0-9][a-z0-9._@-]{0,99}
  std::string role;                     // admin | operator | viewer
  std::vector<std::string> tenants;     // empty = every tenant
  std::optional<std::string> password;  // nullopt = generate one
};

struct CreatedUser {
  User user;             // as stored, without its password hash
  std::string role;      // as asked
  std::string password;  // the generated password; empty when one was given
};

// Creates the user (Argon2id hash of the password), grants it its tenants and
// audits "user.add". kInvalidArgument for a bad name, role or tenant, or a
// given password shorter than kMinPasswordBytes; kConflict when the name is
// taken.
Result<CreatedUser> CreateUser(Store& store, const NewUser& in, const AccountActor& actor);

// Disables (or enables) a user: a disabled user cannot log in, and its open
// sessions end at their next request. Audits "user.disable" / "user.enable"
// when the state changes (no change: no record). kNotFound for an unknown
// user; kConflict when disabling would leave no enabled admin with every
// tenant (nobody could manage users from the dashboard).
Result<User> SetUserDisabled(Store& store, std::string_view name, bool disabled,
                             const AccountActor& actor);

// The user as the API and `user:list --json` show it (never its hash):
// views.h's UserToJson with the role its scopes make.
Json UserDocument(const User& user);

// --- tokens ---

struct NewToken {
  std::string name;  // a label: 1..100 of [A-Za-z0-9._@-]
  std::vector<std::string> scopes;
  std::vector<std::string> tenants;  // empty = every tenant
  Millis lifetime_ms = 0;            // 0 = never expires
  std::string principal;             // empty = "token:<name>"
};

struct CreatedToken {
  ApiToken token;      // as stored (id set), without its secret hash
  std::string secret;  // shown once
};

// Creates the token (only the SHA-256 of its secret is stored), grants its
// principal the token's tenants and audits "token.create". kInvalidArgument
// for a bad name, scope, tenant, lifetime or principal.
Result<CreatedToken> CreateToken(Store& store, const NewToken& in, Millis now,
                                 const AccountActor& actor);

struct RevokedToken {
  ApiToken token;            // before the revocation
  bool was_revoked = false;  // already revoked: nothing changed, nothing audited
};

// Revokes a token: it answers 401 from the next request on. Idempotent.
// Audits "token.revoke". kNotFound for an unknown id.
Result<RevokedToken> RevokeToken(Store& store, std::int64_t id, const AccountActor& actor);

// A lifetime as operators type it: "3600s", "90m", "12h", "30d" (at most
// kMaxTokenLifetimeDays). kInvalidArgument naming `field` otherwise.
Result<Millis> ParseLifetime(std::string_view text, std::string_view field);

}  // namespace taskengine::api
