#include "api/store_authenticator.h"

#include <sodium.h>
#include <spdlog/spdlog.h>

#include <cstring>

namespace taskengine::api {
namespace {

constexpr std::size_t kSecretBytes = 32;
constexpr std::size_t kMaxPasswordBytes = 1024;
constexpr std::size_t kMaxUserBytes = 100;
// A session's last_seen_at is written at most this often.
constexpr Millis kSessionTouchMs = 1000;
// AuthenticateForCommit reads a remembered token again after this long, and
// remembers at most this many tokens (all are forgotten when one more comes).
constexpr Millis kRememberMs = 10'000;
constexpr std::size_t kMaxRemembered = 4096;
constexpr std::size_t kMaxSecret = 200;

void InitSodium() { TE_CHECK(sodium_init() >= 0); }

// Whether `secret` can be a bearer token at all (the store is not asked
// about anything else).
bool WellFormedSecret(std::string_view secret) {
  return secret.size() <= kMaxSecret && secret.rfind(kTokenPrefix, 0) == 0;
}

bool Contains(const std::vector<std::string>& v, std::string_view s) {
  for (const std::string& x : v) {
    if (x == s) return true;
  }
  return false;
}

}  // namespace

std::string RandomToken(std::size_t bytes) {
  InitSodium();
  std::vector<unsigned char> raw(bytes);
  randombytes_buf(raw.data(), raw.size());
  std::string out(sodium_base64_ENCODED_LEN(bytes, sodium_base64_VARIANT_URLSAFE_NO_PADDING), '\0');
  sodium_bin2base64(out.data(), out.size(), raw.data(), raw.size(),
                    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  out.resize(std::strlen(out.c_str()));
  sodium_memzero(raw.data(), raw.size());
  return out;
}

std::string NewTokenSecret() { return kTokenPrefix + RandomToken(kSecretBytes); }

std::string HashSecret(std::string_view secret) {
  InitSodium();
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, reinterpret_cast<const unsigned char*>(secret.data()), secret.size());
  char hex[crypto_hash_sha256_BYTES * 2 + 1];
  sodium_bin2hex(hex, sizeof(hex), digest, sizeof(digest));
  return std::string(hex);
}

Result<std::string> HashPassword(std::string_view password) {
  InitSodium();
  if (password.empty() || password.size() > kMaxPasswordBytes) {
    return InvalidArgument("a password must have 1.." + std::to_string(kMaxPasswordBytes) +
                           " bytes");
  }
  char out[crypto_pwhash_argon2id_STRBYTES];
  if (crypto_pwhash_argon2id_str(out, password.data(), password.size(),
                                 crypto_pwhash_argon2id_OPSLIMIT_INTERACTIVE,
                                 crypto_pwhash_argon2id_MEMLIMIT_INTERACTIVE) != 0) {
    return Internal("password hashing failed (out of memory)");
  }
  return std::string(out);
}

bool VerifyPassword(std::string_view encoded_hash, std::string_view password) {
  InitSodium();
  if (password.size() > kMaxPasswordBytes) return false;
  std::string hash(encoded_hash);  // NUL-terminated for libsodium
  return crypto_pwhash_str_verify(hash.c_str(), password.data(), password.size()) == 0;
}

Result<std::vector<std::string>> RoleScopes(std::string_view role) {
  if (role == "admin") return std::vector<std::string>{"admin"};
  if (role == "operator") return std::vector<std::string>{"operate", "dispatch"};
  if (role == "viewer") return std::vector<std::string>{"read"};
  return InvalidArgument("unknown role '" + std::string(role) + "' (admin, operator, viewer)");
}

std::string RoleOf(const std::vector<std::string>& scopes) {
  if (Contains(scopes, "admin")) return "admin";
  if (Contains(scopes, "operate")) return "operator";
  if (Contains(scopes, "read")) return "viewer";
  return "custom";
}

Principal PrincipalFrom(std::string name, const std::vector<std::string>& scopes,
                        const std::vector<std::string>& tenants) {
  Principal p;
  p.name = std::move(name);
  for (const std::string& s : scopes) {
    if (std::optional<Scope> scope = ParseScope(s)) p.scopes |= static_cast<std::uint8_t>(*scope);
  }
  for (const std::string& t : tenants) {
    if (t == "*") {
      p.all_tenants = true;
    } else {
      p.tenants.insert(t);
    }
  }
  if (p.all_tenants) p.tenants.clear();
  return p;
}

StoreAuthenticator::StoreAuthenticator(Store* store, StoreAuthenticatorOptions options)
    : store_(store),
      options_(options),
      clock_(options.clock != nullptr ? options.clock : SystemClock::Get()) {
  TE_CHECK(store_ != nullptr);
  TE_CHECK(options_.session_idle_ms > 0 && options_.session_absolute_ms > 0);
  InitSodium();
  static_assert(sizeof(memory_secret_) == crypto_generichash_KEYBYTES);
  randombytes_buf(memory_secret_, sizeof(memory_secret_));
}

StoreAuthenticator::~StoreAuthenticator() {
  sodium_memzero(memory_secret_, sizeof(memory_secret_));
}

const std::string& StoreAuthenticator::DummyHash() {
  std::call_once(dummy_once_, [this] {
    Result<std::string> h = HashPassword(RandomToken(16));
    TE_CHECK(h.ok());
    dummy_hash_ = std::move(h).value();
  });
  return dummy_hash_;
}

Result<std::optional<Principal>> StoreAuthenticator::Authenticate(const HttpRequest& request) {
  if (request.Header("authorization") != nullptr) {
    std::optional<std::string_view> token = BearerToken(request);
    if (!token) return std::optional<Principal>();
    return FromToken(*token, nullptr);
  }
  std::optional<std::string> session = CookieValue(request, kSessionCookie);
  if (!session) return std::optional<Principal>();
  return FromSession(*session);
}

StoreAuthenticator::MemoryKey StoreAuthenticator::KeyOf(std::string_view secret) const {
  MemoryKey key(crypto_generichash_BYTES, '\0');
  crypto_generichash(reinterpret_cast<unsigned char*>(key.data()), key.size(),
                     reinterpret_cast<const unsigned char*>(secret.data()), secret.size(),
                     memory_secret_, sizeof(memory_secret_));
  return key;
}

std::shared_ptr<const Principal> StoreAuthenticator::Recall(const MemoryKey& key, Millis now,
                                                            std::int64_t* touch) {
  MutexLock lock(memory_mu_);
  auto it = memory_.find(key);
  if (it == memory_.end() || now - it->second.read_at >= kRememberMs || now < it->second.read_at) {
    return nullptr;
  }
  Remembered& r = it->second;
  if (r.expires_at != 0 && now >= r.expires_at) {
    memory_.erase(it);
    return nullptr;
  }
  if (now - r.last_used_at >= options_.touch_interval_ms) {
    if (touch == nullptr) return nullptr;
    r.last_used_at = now;
    *touch = r.principal->token_id;
  }
  return r.principal;
}

Result<std::optional<Principal>> StoreAuthenticator::AuthenticateForCommit(
    const HttpRequest& request) {
  if (request.Header("authorization") == nullptr) return Authenticate(request);
  std::optional<std::string_view> secret = BearerToken(request);
  if (!secret || !WellFormedSecret(*secret)) return std::optional<Principal>();
  const MemoryKey key = KeyOf(*secret);
  std::int64_t touch = 0;
  std::shared_ptr<const Principal> principal = Recall(key, clock_->NowMillis(), &touch);
  if (principal == nullptr) return FromToken(*secret, &key);
  if (touch != 0) {
    Status touched = store_->TouchToken(touch);
    if (!touched.ok())
      spdlog::debug("auth: token {} last-used not recorded: {}", touch, touched.ToString());
  }
  return std::optional<Principal>(*principal);
}

std::optional<Principal> StoreAuthenticator::RememberedPrincipal(const HttpRequest& request) {
  std::optional<std::string_view> secret = BearerToken(request);
  if (!secret || !WellFormedSecret(*secret)) return std::nullopt;
  std::shared_ptr<const Principal> principal = Recall(KeyOf(*secret), clock_->NowMillis(), nullptr);
  if (principal == nullptr) return std::nullopt;
  return *principal;
}

Result<std::optional<Principal>> StoreAuthenticator::FromToken(std::string_view secret,
                                                               const MemoryKey* remember) {
  if (!WellFormedSecret(secret)) return std::optional<Principal>();
  const auto forget = [&] {
    if (remember == nullptr) return;
    MutexLock lock(memory_mu_);
    memory_.erase(*remember);
  };
  Result<ApiToken> token = store_->FindToken(HashSecret(secret));
  if (!token.ok()) {
    if (token.status().code() != ErrorCode::kNotFound) return token.status();
    forget();
    return std::optional<Principal>();
  }
  const Millis now = clock_->NowMillis();
  if (token->revoked_at != 0 || (token->expires_at != 0 && now >= token->expires_at)) {
    forget();
    return std::optional<Principal>();
  }
  Principal p = PrincipalFrom(token->principal, token->scopes, token->tenants);
  p.method = AuthMethod::kToken;
  p.credential_id = "token:" + std::to_string(token->id);
  p.token_id = token->id;
  Millis last_used_at = token->last_used_at;
  if (now - last_used_at >= options_.touch_interval_ms) {
    last_used_at = now;
    Status touched = store_->TouchToken(token->id);
    if (!touched.ok())
      spdlog::debug("auth: token {} last-used not recorded: {}", token->id, touched.ToString());
  }
  if (remember != nullptr) {
    Remembered r;
    r.principal = std::make_shared<const Principal>(p);
    r.expires_at = token->expires_at;
    r.read_at = now;
    r.last_used_at = last_used_at;
    MutexLock lock(memory_mu_);
    if (memory_.size() >= kMaxRemembered && memory_.count(*remember) == 0) memory_.clear();
    memory_[*remember] = std::move(r);
  }
  return std::optional<Principal>(std::move(p));
}

Result<std::optional<Principal>> StoreAuthenticator::FromSession(std::string_view session_id) {
  constexpr std::size_t kMaxSessionId = 100;
  if (session_id.empty() || session_id.size() > kMaxSessionId) return std::optional<Principal>();
  const std::string id_hash = HashSecret(session_id);
  Result<Session> session = store_->GetSession(id_hash);
  if (!session.ok()) {
    if (session.status().code() == ErrorCode::kNotFound) return std::optional<Principal>();
    return session.status();
  }
  const Millis now = clock_->NowMillis();
  const bool expired =
      now >= session->expires_at || now - session->last_seen_at >= options_.session_idle_ms;
  Result<User> user = expired ? Result<User>(NotFound("expired")) : store_->GetUser(session->user);
  if (!user.ok() && user.status().code() != ErrorCode::kNotFound) return user.status();
  if (!user.ok() || user->disabled) {
    Status deleted = store_->DeleteSession(id_hash);
    if (!deleted.ok()) spdlog::warn("auth: ended session not deleted: {}", deleted.ToString());
    return std::optional<Principal>();
  }
  Principal p = PrincipalFrom(user->name, user->scopes, user->tenants);
  p.method = AuthMethod::kSession;
  p.credential_id = "user:" + user->name;
  p.csrf_token = session->csrf_token;
  if (now - session->last_seen_at >= kSessionTouchMs) {
    Status touched = store_->TouchSession(id_hash);
    if (!touched.ok())
      spdlog::debug("auth: session last-seen not recorded: {}", touched.ToString());
  }
  return std::optional<Principal>(std::move(p));
}

Result<std::optional<LoginResult>> StoreAuthenticator::Login(std::string_view user_name,
                                                             std::string_view password) {
  Result<User> user = user_name.empty() || user_name.size() > kMaxUserBytes
                          ? Result<User>(NotFound("no such user"))
                          : store_->GetUser(user_name);
  if (!user.ok() && user.status().code() != ErrorCode::kNotFound) return user.status();
  // The same Argon2id work whether or not the user exists (no enumeration).
  const bool verified = VerifyPassword(user.ok() ? user->password_hash : DummyHash(), password);
  if (!user.ok() || !verified || user->disabled) {
    spdlog::info("auth: failed login");  // never the name or the password
    return std::optional<LoginResult>();
  }
  const Millis now = clock_->NowMillis();
  LoginResult out;
  out.session_id = RandomToken(kSecretBytes);
  out.csrf_token = RandomToken(kSecretBytes);
  out.expires_at = now + options_.session_absolute_ms;
  out.idle_timeout_ms = options_.session_idle_ms;
  out.secure_cookie = options_.secure_cookies;
  Session session;
  session.id_hash = HashSecret(out.session_id);
  session.user = user->name;
  session.csrf_token = out.csrf_token;
  session.expires_at = out.expires_at;
  TE_RETURN_IF_ERROR(store_->CreateSession(session));
  out.principal = PrincipalFrom(user->name, user->scopes, user->tenants);
  out.principal.method = AuthMethod::kSession;
  out.principal.credential_id = "user:" + user->name;
  out.principal.csrf_token = out.csrf_token;
  spdlog::info("auth: user {} logged in", user->name);
  return std::optional<LoginResult>(std::move(out));
}

Status StoreAuthenticator::Logout(const HttpRequest& request) {
  std::optional<std::string> session = CookieValue(request, kSessionCookie);
  if (!session || session->empty() || session->size() > 100) return Status::Ok();
  return store_->DeleteSession(HashSecret(*session));
}

}  // namespace taskengine::api
