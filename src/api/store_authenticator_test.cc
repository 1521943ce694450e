// StoreAuthenticator's memory of tokens (AuthenticateForCommit) over a real
// SQLite store, with the store's calls counted (FaultInjectingStore): what it
// answers without reading the store, when it reads again, and that
// Authenticate never answers from it.
#include "api/store_authenticator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "storage/sqlite/sqlite_store.h"
#include "storage/testing/fault_injecting_store.h"
#include "taskengine/clock.h"
#include "testing_support/test_util.h"

namespace taskengine::api {
namespace {

using std::chrono::milliseconds;

class TokenMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SqliteStoreOptions o;
    o.path = dir_.File("te.db");
    o.clock = &clock_;
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> inner, OpenSqliteStore(o));
    ASSERT_OK(inner->Migrate());
    store_ = WrapStoreWithFaults(std::move(inner), faults_);
    StoreAuthenticatorOptions ao;
    ao.clock = &clock_;
    auth_ = std::make_unique<StoreAuthenticator>(store_.get(), ao);
  }

  // A new token's secret; its id in *id.
  std::string MakeToken(Millis expires_at = 0, std::int64_t* id = nullptr) {
    const std::string secret = NewTokenSecret();
    ApiToken t;
    t.name = "ci";
    t.secret_hash = HashSecret(secret);
    t.principal = "ci";
    t.scopes = {"dispatch"};
    t.tenants = {"acme"};
    t.expires_at = expires_at;
    Result<std::int64_t> created = store_->CreateToken(t);
    EXPECT_OK(created.status());
    if (id != nullptr) *id = created.ok() ? *created : 0;
    return secret;
  }

  static HttpRequest Bearer(const std::string& secret) {
    HttpRequest r;
    r.headers.emplace_back("authorization", "Bearer " + secret);
    return r;
  }

  int Reads() const { return faults_->Calls("FindToken"); }

  TempDir dir_;
  FakeClock clock_{1'700'000'000'000};
  std::shared_ptr<StoreFaults> faults_ = std::make_shared<StoreFaults>();
  std::unique_ptr<Store> store_;
  std::unique_ptr<StoreAuthenticator> auth_;
};

TEST_F(TokenMemoryTest, ARouteThatConfirmsAtCommitIsAnsweredFromMemoryFor10Seconds) {
  std::int64_t id = 0;
  const std::string secret = MakeToken(0, &id);
  ASSERT_OK_AND_ASSIGN(std::optional<Principal> first,
                       auth_->AuthenticateForCommit(Bearer(secret)));
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->token_id, id);
  EXPECT_EQ(first->name, "ci");
  EXPECT_EQ(first->credential_id, "token:" + std::to_string(id));
  EXPECT_EQ(first->method, AuthMethod::kToken);
  EXPECT_TRUE(first->HasScope(Scope::kDispatch));
  EXPECT_TRUE(first->MayAccessTenant(TenantId("acme")));
  EXPECT_FALSE(first->MayAccessTenant(TenantId("globex")));
  EXPECT_EQ(Reads(), 1);

  clock_.Advance(milliseconds(9'999));
  ASSERT_OK_AND_ASSIGN(std::optional<Principal> again,
                       auth_->AuthenticateForCommit(Bearer(secret)));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->token_id, id);
  EXPECT_EQ(again->tenants, first->tenants);
  EXPECT_EQ(Reads(), 1) << "read the store for a token it remembers";

  // Every other route reads the store, every time.
  ASSERT_OK_AND_ASSIGN(std::optional<Principal> now, auth_->Authenticate(Bearer(secret)));
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->token_id, id);
  EXPECT_EQ(Reads(), 2);

  clock_.Advance(milliseconds(1));
  ASSERT_OK(auth_->AuthenticateForCommit(Bearer(secret)).status());
  EXPECT_EQ(Reads(), 3) << "10 s after the read, the store is read again";
}

// A revoked token is remembered until the memory reads it again (the
// commit refuses its writes meanwhile: AdmitRequest::token_id); then it is
// forgotten and refused.
TEST_F(TokenMemoryTest, ARevokedTokenIsForgottenAtTheNextRead) {
  std::int64_t id = 0;
  const std::string secret = MakeToken(0, &id);
  ASSERT_OK(auth_->AuthenticateForCommit(Bearer(secret)).status());
  ASSERT_OK(store_->RevokeToken(id));
  ASSERT_OK_AND_ASSIGN(std::optional<Principal> now, auth_->Authenticate(Bearer(secret)));
  EXPECT_FALSE(now.has_value());
  clock_.Advance(milliseconds(10'000));
  ASSERT_OK_AND_ASSIGN(std::optional<Principal> later,
                       auth_->AuthenticateForCommit(Bearer(secret)));
  EXPECT_FALSE(later.has_value());
  const int reads = Reads();
  ASSERT_OK_AND_ASSIGN(later, auth_->AuthenticateForCommit(Bearer(secret)));
  EXPECT_FALSE(later.has_value());
  EXPECT_EQ(Reads(), reads + 1) << "a refused token stays in memory";
}

TEST_F(TokenMemoryTest, ARememberedTokenExpiresOnTime) {
  const std::string secret = MakeToken(clock_.NowMillis() + 5'000);
  ASSERT_OK_AND_ASSIGN(std::optional<Principal> p, auth_->AuthenticateForCommit(Bearer(secret)));
  EXPECT_TRUE(p.has_value());
  clock_.Advance(milliseconds(4'999));
  ASSERT_OK_AND_ASSIGN(p, auth_->AuthenticateForCommit(Bearer(secret)));
  EXPECT_TRUE(p.has_value());
  clock_.Advance(milliseconds(1));
  ASSERT_OK_AND_ASSIGN(p, auth_->AuthenticateForCommit(Bearer(secret)));
  EXPECT_FALSE(p.has_value()) << "answered from memory after the token expired";
}

TEST_F(TokenMemoryTest, OnlyTheSameSecretIsAnsweredFromMemory) {
  const std::string secret = MakeToken();
  ASSERT_OK(auth_->AuthenticateForCommit(Bearer(secret)).status());
  std::string other = secret;
  other.back() = other.back() == 'A' ? 'B' : 'A';
  for (const std::string& wrong : {other, secret.substr(0, secret.size() - 1), secret + "A"}) {
    ASSERT_OK_AND_ASSIGN(std::optional<Principal> p, auth_->AuthenticateForCommit(Bearer(wrong)));
    EXPECT_FALSE(p.has_value()) << wrong;
  }
  // Malformed ones never reach the store, nor the memory.
  const int reads = Reads();
  for (const std::string& malformed : {std::string("ci"), std::string(300, 'x')}) {
    ASSERT_OK_AND_ASSIGN(std::optional<Principal> p,
                         auth_->AuthenticateForCommit(Bearer(malformed)));
    EXPECT_FALSE(p.has_value());
  }
  EXPECT_EQ(Reads(), reads);
}

// The token's last_used_at is still written once per touch interval (60 s)
// when it is answered from memory.
TEST_F(TokenMemoryTest, ARememberedTokenIsStillTouched) {
  const std::string secret = MakeToken();
  ASSERT_OK(auth_->AuthenticateForCommit(Bearer(secret)).status());
  EXPECT_EQ(faults_->Calls("TouchToken"), 1);
  for (int i = 0; i < 12; ++i) {
    clock_.Advance(milliseconds(5'000));
    ASSERT_OK(auth_->AuthenticateForCommit(Bearer(secret)).status());
  }
  EXPECT_EQ(faults_->Calls("TouchToken"), 2);
  ASSERT_OK_AND_ASSIGN(std::vector<ApiToken> tokens, store_->ListTokens());
  ASSERT_EQ(tokens.size(), 1u);
  EXPECT_EQ(tokens[0].last_used_at, clock_.NowMillis());
}

// Sessions are never remembered: a session's principal is the user as it is
// now (store_authenticator.h).
TEST_F(TokenMemoryTest, ASessionIsReadEveryTime) {
  ASSERT_OK_AND_ASSIGN(std::string hash, HashPassword("correct horse"));
  User u;
  u.name = "alice";
  u.password_hash = hash;
  u.scopes = {"admin"};
  u.tenants = {"*"};
  ASSERT_OK(store_->UpsertUser(u));
  ASSERT_OK_AND_ASSIGN(std::optional<LoginResult> login, auth_->Login("alice", "correct horse"));
  ASSERT_TRUE(login.has_value());
  HttpRequest r;
  r.headers.emplace_back("cookie", std::string(kSessionCookie) + "=" + login->session_id);
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(std::optional<Principal> p, auth_->AuthenticateForCommit(r));
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->token_id, 0);
  }
  EXPECT_EQ(faults_->Calls("GetSession"), 3);
}

}  // namespace
}  // namespace taskengine::api
