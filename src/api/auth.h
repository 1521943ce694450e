// Authentication hook of the API (X1, X2). Every request goes through an
// Authenticator that turns credentials into a Principal: who it is, which
// scopes it holds and which tenants it may see. Routes declare the scope they
// need (403 when missing); by-id routes check the target's tenant against the
// principal and answer 404 for another tenant's id, exactly like a missing one.
//
// Part 3 implements tokens, users and sessions behind this interface;
// StaticTokenAuthenticator (a fixed map of bearer tokens) serves tests and
// simple deployments.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "api/http_types.h"
#include "taskengine/clock.h"
#include "taskengine/status.h"
#include "taskengine/types.h"

namespace taskengine::api {

// Token scopes (X1, quality.md §3.5).
enum class Scope : std::uint8_t {
  kRead = 1,      // see executions, jobs, stats of granted tenants
  kDispatch = 2,  // admit executions
  kOperate = 4,   // cancel, replay, approve
  kAdmin = 8,     // edit job definitions, read the audit log
  kWorker = 16,   // the remote worker protocol only
};

std::string_view ToString(Scope scope);
std::optional<Scope> ParseScope(std::string_view name);

// How a principal proved who it is. Sessions (the dashboard) need a CSRF
// token and a same-origin Origin on every mutation; bearer tokens do not.
enum class AuthMethod : std::uint8_t {
  kNone = 0,     // no credentials checked (auth disabled, or a test principal)
  kToken = 1,    // Authorization: Bearer
  kSession = 2,  // the te_session cookie
};

// An authenticated caller. Immutable value.
//
// Scope implication (HasScope): admin implies operate, dispatch and read;
// operate implies read; dispatch implies read (a dispatcher may follow the
// status URL it was given). worker implies nothing and nothing implies worker,
// so worker tokens never reach operator routes.
struct Principal {
  std::string name;               // the requester/actor recorded by the engine
  std::uint8_t scopes = 0;        // bit set of Scope values as held (before implication)
  bool all_tenants = false;       // global: every tenant and global executions
  std::set<std::string> tenants;  // when !all_tenants
  AuthMethod method = AuthMethod::kNone;
  // Stable id of the credential (e.g. "token:12", "user:alice"): the key of
  // per-principal rate limits. Empty: the name is used.
  std::string credential_id;
  // kSession only: the CSRF token bound to the session.
  std::string csrf_token;
  // kToken from the store: the token's id, which the writes of a route that
  // confirms its token at commit pass on (DispatchRequest::token_id,
  // FinishRequest::token_id). 0 for other principals.
  std::int64_t token_id = 0;

  static Principal Make(std::string name, std::initializer_list<Scope> scopes, bool all_tenants,
                        std::set<std::string> tenants = {});

  bool HasScope(Scope scope) const;
  // True when the principal may see `tenant`. An empty tenant (a global job's
  // execution) needs all_tenants.
  bool MayAccessTenant(const TenantId& tenant) const;
  bool MayAccessTenant(std::string_view tenant) const;
};

// A dashboard session just opened by Authenticator::Login.
struct LoginResult {
  Principal principal;
  std::string session_id;  // the cookie value; shown to the client once, stored hashed
  std::string csrf_token;  // echoed by the client in X-CSRF-Token on mutations
  Millis expires_at = 0;   // absolute timeout
  Millis idle_timeout_ms = 0;
  bool secure_cookie = false;  // set the cookie's Secure attribute
};

// Thread-safe.
class Authenticator {
 public:
  virtual ~Authenticator() = default;
  // The principal behind the request's credentials; nullopt when the request
  // carries none, or unknown, expired or malformed ones (-> 401). An error
  // status when the credentials could not be checked (e.g. kUnavailable ->
  // 503); never an error for bad credentials.
  virtual Result<std::optional<Principal>> Authenticate(const HttpRequest& request) = 0;
  // Authenticate for a route whose write confirms the principal's API token
  // in its own commit (RouteAccess::ConfirmedAtCommit: Principal::token_id
  // goes into DispatchRequest::token_id or FinishRequest::token_id): an
  // implementation may answer from a token it remembers instead of reading
  // the store. Default: Authenticate.
  virtual Result<std::optional<Principal>> AuthenticateForCommit(const HttpRequest& request) {
    return Authenticate(request);
  }
  // For the same routes, on a network thread (Router::TryInline): the
  // principal AuthenticateForCommit would answer, when it can be known
  // without blocking (no read or write of the store); nullopt otherwise,
  // bad credentials included (AuthenticateForCommit then decides). Default:
  // nullopt.
  virtual std::optional<Principal> RememberedPrincipal(const HttpRequest& request) {
    (void)request;
    return std::nullopt;
  }

  // Checks a user name and password and opens a new session. nullopt for
  // wrong credentials, unknown or disabled users alike (no enumeration); an
  // error status only when the check could not be made. Default: no users,
  // so always nullopt.
  virtual Result<std::optional<LoginResult>> Login(std::string_view user,
                                                   std::string_view password);
  // Ends the session of the request's cookie server-side (idempotent; ok when
  // there is none). Default: ok.
  virtual Status Logout(const HttpRequest& request);
  // Whether session cookies carry the Secure attribute. Default: false.
  virtual bool SecureCookies() const { return false; }
};

// Authentication disabled (`[http] auth = false`, loopback only): every
// request acts as the global principal "anonymous" with the admin and worker
// scopes. Thread-safe.
class AnonymousAuthenticator final : public Authenticator {
 public:
  Result<std::optional<Principal>> Authenticate(const HttpRequest& request) override;
  std::optional<Principal> RememberedPrincipal(const HttpRequest& request) override;
};

// The value of cookie `name` in the request's Cookie headers; nullopt when absent.
std::optional<std::string> CookieValue(const HttpRequest& request, std::string_view name);

// The bearer token of an `Authorization: Bearer <token>` header (scheme
// case-insensitive); nullopt when absent or another scheme.
std::optional<std::string_view> BearerToken(const HttpRequest& request);

// A fixed map of bearer token -> principal. Tokens are compared in constant
// time (sodium_memcmp over their SHA-256 digests, so neither the content nor
// the length of a stored token leaks through timing); every stored token is
// compared on every request. Thread-safe after construction (Add is not).
class StaticTokenAuthenticator final : public Authenticator {
 public:
  StaticTokenAuthenticator() = default;
  // REQUIRES: not called concurrently with Authenticate. Tokens must be
  // non-empty; adding a token again replaces its principal.
  void Add(std::string_view token, Principal principal);

  Result<std::optional<Principal>> Authenticate(const HttpRequest& request) override;
  // Authenticate's principal: it never blocks.
  std::optional<Principal> RememberedPrincipal(const HttpRequest& request) override;

 private:
  struct Entry {
    unsigned char digest[32];
    Principal principal;
  };
  std::vector<Entry> entries_;
};

}  // namespace taskengine::api
