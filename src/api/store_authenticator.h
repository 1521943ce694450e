// Users, API tokens and dashboard sessions kept in the Store (X1, X2;
// quality.md §3.2, §3.5).
//
// Bearer tokens: "te_" + 43 base64url characters (32 random bytes from
// libsodium). Only the hex SHA-256 of the whole secret is stored; a request's
// token is hashed and looked up by that hash, so the secret is never compared
// or kept in the clear (shown once, at creation). A token holds scopes, is
// bound to tenants (or "*" for all), may expire and may be revoked; either
// makes it answer 401 at once.
//
// Routes that confirm the token in their own commit (dispatch and a worker's
// finishes: RouteAccess::ConfirmedAtCommit) authenticate through
// AuthenticateForCommit, which answers from the tokens it read in the last
// 10 seconds instead of reading the store for every request: the admission
// or finish then checks, in its transaction, that the token is neither
// revoked nor expired (AdmitRequest::token_id, FinishRequest::token_id). A
// revocation therefore holds from the next
// request on for every route, from any process or node. The memory is keyed
// by a keyed BLAKE2b digest of the secret (a key made at startup; the
// secret itself is not kept), holds at most 4,096 tokens and only valid ones.
//
// Sessions: Login checks the password against the Argon2id hash
// (crypto_pwhash_str_verify; unknown and disabled users are verified against
// a dummy hash, so every failure costs the same and names nobody), then opens
// a NEW random session id (32 bytes) stored hashed, with a random CSRF token
// stored in the session row. A session ends after `session_idle_ms` without
// requests or `session_absolute_ms` after login, whichever comes first, and on
// Logout. The session's principal is the user as it is NOW (scopes, tenants,
// disabled), read on every request.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "api/auth.h"
#include "core/mutex.h"
#include "storage/store.h"
#include "taskengine/clock.h"

namespace taskengine::api {

inline constexpr char kSessionCookie[] = "te_session";
inline constexpr char kTokenPrefix[] = "te_";

struct StoreAuthenticatorOptions {
  // Not owned. Default: the system clock. Give the store the same clock: the
  // store stamps last_seen_at, this class compares it with now.
  Clock* clock = nullptr;
  // Default: 30 minutes without a request.
  Millis session_idle_ms = 30 * 60'000;
  // Default: 12 hours after login.
  Millis session_absolute_ms = 12 * 3'600'000;
  // Set the cookie's Secure attribute (TLS, or TLS in front). Default: false.
  bool secure_cookies = false;
  // A token's last_used_at is written at most this often. Default: 60 s.
  Millis touch_interval_ms = 60'000;
};

// Thread-safe.
class StoreAuthenticator final : public Authenticator {
 public:
  // `store` is not owned and must outlive this object.
  StoreAuthenticator(Store* store, StoreAuthenticatorOptions options);
  ~StoreAuthenticator() override;
  StoreAuthenticator(const StoreAuthenticator&) = delete;
  StoreAuthenticator& operator=(const StoreAuthenticator&) = delete;

  // A bearer token first (when the request has an Authorization header, only
  // it counts), else the te_session cookie.
  Result<std::optional<Principal>> Authenticate(const HttpRequest& request) override;
  // A bearer token from memory when it was read less than 10 s ago (and has
  // not expired since), else as Authenticate; sessions as Authenticate.
  Result<std::optional<Principal>> AuthenticateForCommit(const HttpRequest& request) override;
  // The bearer token's principal when AuthenticateForCommit would answer it
  // from memory and has no last use to record (TouchToken); else nullopt.
  std::optional<Principal> RememberedPrincipal(const HttpRequest& request) override;
  Result<std::optional<LoginResult>> Login(std::string_view user,
                                           std::string_view password) override;
  Status Logout(const HttpRequest& request) override;
  bool SecureCookies() const override { return options_.secure_cookies; }

  const StoreAuthenticatorOptions& options() const { return options_; }

 private:
  // A token's key in the memory: the 32 bytes of the keyed BLAKE2b-256 of
  // its secret.
  using MemoryKey = std::string;
  struct Remembered {
    std::shared_ptr<const Principal> principal;
    Millis expires_at = 0;    // 0: never
    Millis read_at = 0;       // when the store was last read for it
    Millis last_used_at = 0;  // as the store has it (TouchToken)
  };

  // What the memory answers for `key` at `now`: a principal, or nullptr when
  // the token is not there, is to be read again, or has expired (then it is
  // forgotten, and the store's read refuses it). With `touch`, an answer
  // whose last use is due to be recorded sets *touch to its token id and
  // counts it recorded; without, such an answer is not given.
  std::shared_ptr<const Principal> Recall(const MemoryKey& key, Millis now, std::int64_t* touch);
  MemoryKey KeyOf(std::string_view secret) const;

  // `remember`: the key under which to remember (or forget) what the store
  // answers; nullptr: leave the memory alone.
  Result<std::optional<Principal>> FromToken(std::string_view secret, const MemoryKey* remember);
  Result<std::optional<Principal>> FromSession(std::string_view session_id);
  // The hash unknown users are verified against (made once, lazily).
  const std::string& DummyHash();

  Store* const store_;
  const StoreAuthenticatorOptions options_;
  Clock* const clock_;
  unsigned char memory_secret_[32];  // the BLAKE2b key of MemoryKey
  Mutex memory_mu_;
  std::unordered_map<MemoryKey, Remembered> memory_ GUARDED_BY(memory_mu_);
  std::once_flag dummy_once_;
  std::string dummy_hash_;
};

// --- helpers shared with the CLI (token:create, user:add) ---

// `bytes` random bytes (libsodium), base64url without padding.
std::string RandomToken(std::size_t bytes);
// A new bearer secret: "te_" + RandomToken(32).
std::string NewTokenSecret();
// Lower-case hex SHA-256 of `secret` (what the store keeps for tokens and sessions).
std::string HashSecret(std::string_view secret);
// An Argon2id hash in libsodium's encoded form (interactive limits).
// kInternal when out of memory; kInvalidArgument for an empty password or one
// over 1024 bytes.
Result<std::string> HashPassword(std::string_view password);
// Whether `password` matches `encoded_hash` (false for a malformed hash).
bool VerifyPassword(std::string_view encoded_hash, std::string_view password);

// Dashboard roles -> scopes: admin -> {admin}, operator -> {operate, dispatch},
// viewer -> {read}. kInvalidArgument for another name.
Result<std::vector<std::string>> RoleScopes(std::string_view role);
// The role whose scopes `scopes` holds (the highest), or "custom".
std::string RoleOf(const std::vector<std::string>& scopes);

// The principal of a token or user record: scopes parsed (unknown ones
// ignored), "*" in `tenants` -> all tenants.
Principal PrincipalFrom(std::string name, const std::vector<std::string>& scopes,
                        const std::vector<std::string>& tenants);

}  // namespace taskengine::api
