#include "api/auth.h"

#include <sodium.h>

#include <cstring>

namespace taskengine::api {
namespace {

std::uint8_t Bit(Scope s) { return static_cast<std::uint8_t>(s); }

void Digest(std::string_view token, unsigned char out[crypto_hash_sha256_BYTES]) {
  crypto_hash_sha256(out, reinterpret_cast<const unsigned char*>(token.data()), token.size());
}

}  // namespace

std::string_view ToString(Scope scope) {
  switch (scope) {
    case Scope::kRead:
      return "read";
    case Scope::kDispatch:
      return "dispatch";
    case Scope::kOperate:
      return "operate";
    case Scope::kAdmin:
      return "admin";
    case Scope::kWorker:
      return "worker";
  }
  return "unknown";
}

std::optional<Scope> ParseScope(std::string_view name) {
  for (Scope s : {Scope::kRead, Scope::kDispatch, Scope::kOperate, Scope::kAdmin, Scope::kWorker}) {
    if (ToString(s) == name) return s;
  }
  return std::nullopt;
}

Principal Principal::Make(std::string name, std::initializer_list<Scope> scopes, bool all_tenants,
                          std::set<std::string> tenants) {
  Principal p;
  p.name = std::move(name);
  for (Scope s : scopes) p.scopes |= Bit(s);
  p.all_tenants = all_tenants;
  p.tenants = std::move(tenants);
  return p;
}

bool Principal::HasScope(Scope scope) const {
  if (scopes & Bit(scope)) return true;
  const bool admin = scopes & Bit(Scope::kAdmin);
  switch (scope) {
    case Scope::kRead:
      return admin || (scopes & (Bit(Scope::kOperate) | Bit(Scope::kDispatch)));
    case Scope::kDispatch:
    case Scope::kOperate:
      return admin;
    case Scope::kAdmin:
    case Scope::kWorker:
      return false;
  }
  return false;
}

bool Principal::MayAccessTenant(std::string_view tenant) const {
  if (all_tenants) return true;
  if (tenant.empty()) return false;
  return tenants.count(std::string(tenant)) > 0;
}

bool Principal::MayAccessTenant(const TenantId& tenant) const {
  return MayAccessTenant(std::string_view(tenant.value));
}

std::optional<std::string_view> BearerToken(const HttpRequest& request) {
  const std::string* header = request.Header("authorization");
  if (header == nullptr) return std::nullopt;
  std::string_view v(*header);
  constexpr std::string_view kScheme = "bearer";
  if (v.size() <= kScheme.size() || v[kScheme.size()] != ' ') return std::nullopt;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(v[i])) != kScheme[i]) return std::nullopt;
  }
  v.remove_prefix(kScheme.size());
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  if (v.empty()) return std::nullopt;
  return v;
}

void StaticTokenAuthenticator::Add(std::string_view token, Principal principal) {
  TE_CHECK(!token.empty());
  TE_CHECK(sodium_init() >= 0);
  Entry entry;
  Digest(token, entry.digest);
  for (Entry& e : entries_) {
    if (std::memcmp(e.digest, entry.digest, sizeof(entry.digest)) == 0) {
      e.principal = std::move(principal);
      return;
    }
  }
  entry.principal = std::move(principal);
  entries_.push_back(std::move(entry));
}

Result<std::optional<Principal>> StaticTokenAuthenticator::Authenticate(
    const HttpRequest& request) {
  std::optional<std::string_view> token = BearerToken(request);
  if (!token) return std::optional<Principal>();
  unsigned char digest[crypto_hash_sha256_BYTES];
  Digest(*token, digest);
  const Entry* match = nullptr;
  // Compare with every entry so the time taken does not depend on which matched.
  for (const Entry& e : entries_) {
    if (sodium_memcmp(e.digest, digest, sizeof(digest)) == 0) match = &e;
  }
  if (match == nullptr) return std::optional<Principal>();
  Principal p = match->principal;
  p.method = AuthMethod::kToken;
  return std::optional<Principal>(std::move(p));
}

std::optional<Principal> StaticTokenAuthenticator::RememberedPrincipal(const HttpRequest& request) {
  Result<std::optional<Principal>> p = Authenticate(request);
  return p.ok() ? std::move(*p) : std::nullopt;
}

Result<std::optional<LoginResult>> Authenticator::Login(std::string_view, std::string_view) {
  return std::optional<LoginResult>();
}

Status Authenticator::Logout(const HttpRequest&) { return Status::Ok(); }

Result<std::optional<Principal>> AnonymousAuthenticator::Authenticate(const HttpRequest&) {
  Principal p = Principal::Make("anonymous", {Scope::kAdmin, Scope::kWorker}, true);
  p.credential_id = "anonymous";
  return std::optional<Principal>(std::move(p));
}

std::optional<Principal> AnonymousAuthenticator::RememberedPrincipal(const HttpRequest& request) {
  Result<std::optional<Principal>> p = Authenticate(request);
  return p.ok() ? std::move(*p) : std::nullopt;
}

std::optional<std::string> CookieValue(const HttpRequest& request, std::string_view name) {
  for (const auto& [header, value] : request.headers) {
    if (header != "cookie") continue;
    std::string_view rest(value);
    while (!rest.empty()) {
      std::size_t semi = rest.find(';');
      std::string_view pair = rest.substr(0, semi);
      rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
      while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
      std::size_t eq = pair.find('=');
      if (eq == std::string_view::npos) continue;
      std::string_view key = pair.substr(0, eq);
      while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
      if (key != name) continue;
      std::string_view v = pair.substr(eq + 1);
      while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      return std::string(v);
    }
  }
  return std::nullopt;
}

}  // namespace taskengine::api
