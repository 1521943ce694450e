// Users, tokens and grants (api/accounts.h) over a real SQLite store: what is
// stored (hashes only), what is audited, and what is refused without a change.
#include "api/accounts.h"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "api/store_authenticator.h"
#include "storage/sqlite/sqlite_store.h"
#include "taskengine/clock.h"
#include "testing_support/test_util.h"

namespace taskengine::api {
namespace {

class AccountsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SqliteStoreOptions o;
    o.path = dir_.File("te.db");
    o.clock = &clock_;
    ASSERT_OK_AND_ASSIGN(store_, OpenSqliteStore(o));
    ASSERT_OK(store_->Migrate());
  }

  std::vector<AuditRecord> Audit(const std::string& target) {
    AuditFilter filter;
    filter.target = target;
    Result<std::vector<AuditRecord>> records = store_->ListAudit(filter);
    EXPECT_OK(records.status());
    return records.ok() ? *records : std::vector<AuditRecord>{};
  }

  TempDir dir_;
  FakeClock clock_{1'700'000'000'000};
  std::unique_ptr<Store> store_;
  const AccountActor op_{"cli:op", "onboarding"};
};

TEST_F(AccountsTest, ChangeGrantAddsRevokesAndAudits) {
  Store& store = *store_;
  ASSERT_OK_AND_ASSIGN(GrantChange a, ChangeGrant(store, true, "alice", "acme", op_));
  EXPECT_TRUE(a.effective);
  ASSERT_OK_AND_ASSIGN(GrantChange all, ChangeGrant(store, true, "alice", "*", op_));
  EXPECT_TRUE(all.effective);
  ASSERT_OK_AND_ASSIGN(GrantChange r, ChangeGrant(store, false, "alice", "acme", op_));
  EXPECT_TRUE(r.effective) << "still granted through *";
  ASSERT_OK_AND_ASSIGN(GrantChange r2, ChangeGrant(store, false, "alice", "*", op_));
  EXPECT_FALSE(r2.effective);
  ASSERT_OK_AND_ASSIGN(bool granted, store.IsGranted("alice", "acme"));
  EXPECT_FALSE(granted);

  EXPECT_EQ(ChangeGrant(store, true, "alice", "Not A Tenant", op_).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(ChangeGrant(store, true, "", "acme", op_).status().code(), ErrorCode::kInvalidArgument);

  std::vector<AuditRecord> audit = Audit("principal:alice");
  ASSERT_EQ(audit.size(), 4u) << "refused changes write no record";
  EXPECT_EQ(audit[0].action, "grant.revoke");
  EXPECT_EQ(audit[0].tenant, "");
  EXPECT_EQ(audit[3].action, "grant.add");
  EXPECT_EQ(audit[3].tenant, "acme");
  EXPECT_EQ(audit[3].actor, "cli:op");
  EXPECT_EQ(audit[3].reason, "onboarding");
  EXPECT_EQ(nlohmann::json::parse(audit[3].after_json),
            nlohmann::json::parse(R"({"principal":"alice","tenant":"acme"})"));
}

TEST_F(AccountsTest, CreateUserStoresOnlyAHashAndAudits) {
  NewUser in;
  in.name = "alice";
  in.role = "operator";
  in.tenants = {"a", "b"};
  ASSERT_OK_AND_ASSIGN(CreatedUser created, CreateUser(*store_, in, op_));
  EXPECT_GE(created.password.size(), 20u) << "generated and returned once";
  EXPECT_TRUE(created.user.password_hash.empty()) << "never handed out";
  EXPECT_EQ(created.user.scopes, (std::vector<std::string>{"operate", "dispatch"}));
  ASSERT_OK_AND_ASSIGN(User stored, store_->GetUser("alice"));
  EXPECT_TRUE(VerifyPassword(stored.password_hash, created.password));
  EXPECT_EQ(stored.password_hash.find(created.password), std::string::npos);
  ASSERT_OK_AND_ASSIGN(bool granted, store_->IsGranted("alice", "b"));
  EXPECT_TRUE(granted) << "the engine's grant checks agree with the binding";

  std::vector<AuditRecord> audit = Audit("user:alice");
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_EQ(audit[0].action, "user.add");
  EXPECT_EQ(audit[0].reason, "onboarding");
  EXPECT_EQ(nlohmann::json::parse(audit[0].after_json)["role"], "operator");
  EXPECT_EQ(audit[0].after_json.find(created.password), std::string::npos);
  EXPECT_EQ(audit[0].after_json.find("argon2"), std::string::npos);

  in.password = "a long passphrase";
  EXPECT_EQ(CreateUser(*store_, in, op_).status().code(), ErrorCode::kConflict);
  ASSERT_OK_AND_ASSIGN(User unchanged, store_->GetUser("alice"));
  EXPECT_EQ(unchanged.password_hash, stored.password_hash) << "a refused create changes nothing";
}

TEST_F(AccountsTest, CreateUserRefusesBadInputWithoutAChange) {
  auto refused = [&](NewUser in) { return CreateUser(*store_, in, op_).status().code(); };
  EXPECT_EQ(refused({"bob", "root", {}, std::nullopt}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(refused({"bob", "viewer", {"NOT OK"}, std::nullopt}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(refused({"bob", "viewer", {}, std::string("short-11-ch")}),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(refused({"Bad Name", "viewer", {}, std::nullopt}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(refused({"", "viewer", {}, std::nullopt}), ErrorCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(std::vector<User> users, store_->ListUsers());
  EXPECT_TRUE(users.empty());
  ASSERT_OK_AND_ASSIGN(std::vector<AuditRecord> audit, store_->ListAudit(AuditFilter{}));
  EXPECT_TRUE(audit.empty());
}

TEST_F(AccountsTest, TheLastGlobalAdminCannotBeDisabled) {
  ASSERT_OK(CreateUser(*store_, {"root", "admin", {}, std::nullopt}, op_).status());
  ASSERT_OK(CreateUser(*store_, {"acme-admin", "admin", {"acme"}, std::nullopt}, op_).status());
  Result<User> refused = SetUserDisabled(*store_, "root", true, op_);
  EXPECT_EQ(refused.status().code(), ErrorCode::kConflict) << "a tenant admin cannot manage users";
  ASSERT_OK_AND_ASSIGN(User still, store_->GetUser("root"));
  EXPECT_FALSE(still.disabled);

  ASSERT_OK(CreateUser(*store_, {"second", "admin", {"*"}, std::nullopt}, op_).status());
  ASSERT_OK_AND_ASSIGN(User off, SetUserDisabled(*store_, "root", true, op_));
  EXPECT_TRUE(off.disabled);
  EXPECT_TRUE(off.password_hash.empty());
  EXPECT_EQ(SetUserDisabled(*store_, "second", true, op_).status().code(), ErrorCode::kConflict);
  ASSERT_OK(SetUserDisabled(*store_, "root", true, op_).status());  // no change, no record
  ASSERT_OK(SetUserDisabled(*store_, "root", false, op_).status());
  std::vector<AuditRecord> audit = Audit("user:root");
  ASSERT_EQ(audit.size(), 3u);
  EXPECT_EQ(audit[0].action, "user.enable");
  EXPECT_EQ(audit[1].action, "user.disable");
  EXPECT_EQ(nlohmann::json::parse(audit[1].before_json)["disabled"], false);
  EXPECT_EQ(nlohmann::json::parse(audit[1].after_json)["disabled"], true);
  EXPECT_EQ(SetUserDisabled(*store_, "nobody", true, op_).status().code(), ErrorCode::kNotFound);
}

TEST_F(AccountsTest, TokensStoreOnlyTheHashAndRevokeOnce) {
  NewToken in;
  in.name = "ci";
  in.scopes = {"read", "dispatch"};
  in.tenants = {"a"};
  in.lifetime_ms = 86'400'000;
  ASSERT_OK_AND_ASSIGN(CreatedToken created, CreateToken(*store_, in, clock_.NowMillis(), op_));
  EXPECT_EQ(created.secret.rfind("te_", 0), 0u);
  EXPECT_TRUE(created.token.secret_hash.empty());
  EXPECT_EQ(created.token.principal, "token:ci");
  EXPECT_EQ(created.token.expires_at, clock_.NowMillis() + 86'400'000);
  ASSERT_OK_AND_ASSIGN(ApiToken found, store_->FindToken(HashSecret(created.secret)));
  EXPECT_EQ(found.id, created.token.id);
  const std::string target = "token:" + std::to_string(created.token.id);
  ASSERT_EQ(Audit(target).size(), 1u);
  EXPECT_EQ(Audit(target)[0].after_json.find(created.secret), std::string::npos);

  ASSERT_OK_AND_ASSIGN(RevokedToken first, RevokeToken(*store_, created.token.id, op_));
  EXPECT_FALSE(first.was_revoked);
  ASSERT_OK_AND_ASSIGN(RevokedToken again, RevokeToken(*store_, created.token.id, op_));
  EXPECT_TRUE(again.was_revoked);
  EXPECT_EQ(Audit(target).size(), 2u) << "the second revoke changes nothing";
  EXPECT_EQ(RevokeToken(*store_, 999, op_).status().code(), ErrorCode::kNotFound);

  auto refused = [&](NewToken t) {
    return CreateToken(*store_, t, clock_.NowMillis(), op_).status().code();
  };
  EXPECT_EQ(refused({"x", {"root"}, {}, 0, ""}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(refused({"x", {}, {}, 0, ""}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(refused({"bad name", {"read"}, {}, 0, ""}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(refused({"x", {"read"}, {"NOT OK"}, 0, ""}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(refused({"x", {"read"}, {}, -1, ""}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(refused({"x", {"read"}, {}, 0, std::string(201, 'p')}), ErrorCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(std::vector<ApiToken> tokens, store_->ListTokens());
  EXPECT_EQ(tokens.size(), 1u);
}

TEST(ParseLifetimeTest, UnitsAndBounds) {
  EXPECT_EQ(*ParseLifetime("3600s", "f"), 3'600'000);
  EXPECT_EQ(*ParseLifetime("90m", "f"), 5'400'000);
  EXPECT_EQ(*ParseLifetime("12h", "f"), 43'200'000);
  EXPECT_EQ(*ParseLifetime("3650d", "f"), 3650LL * 86'400'000);
  for (const char* bad : {"", "d", "0d", "3651d", "3w", "-1d", "1.5d", "99999999999d"}) {
    Result<Millis> r = ParseLifetime(bad, "--expires-in");
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("--expires-in"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace taskengine::api
