// Conformance cases for the audit log (X4: records appended from outside the
// store, read newest first with a target filter and a cursor) and for tenant
// grants (the authorization a replay rechecks, R1).
#include <string>
#include <vector>

#include "storage/testing/conformance.h"

namespace taskengine {
namespace {

AuditRecord MakeAudit(const std::string& action, const std::string& target) {
  AuditRecord r;
  r.actor = "admin";
  r.action = action;
  r.target = target;
  return r;
}

}  // namespace

// --- X4: the audit log ---

TEST_P(StoreConformance, X4_AppendAuditRoundTripsEveryField) {
  EXPECT_TRUE(Audit().empty());
  AuditRecord r;
  r.at = Now();
  r.actor = "cli:ops";
  r.tenant = "acme";
  r.action = "job.update";
  r.target = "job:resize";
  r.before_json = "{\"lease_ms\":30000}";
  r.after_json = "{\"lease_ms\":60000}";
  r.reason = "the sink got slower";
  ASSERT_OK(store().AppendAudit(r));

  const std::vector<AuditRecord> all = Audit();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_GT(all[0].id, 0);
  r.id = all[0].id;  // the store assigns ids
  EXPECT_EQ(DescribeAudit(all[0]), DescribeAudit(r));
}

TEST_P(StoreConformance, X4_AppendAuditRequiresActorActionAndTarget) {
  AuditRecord no_actor = MakeAudit("job.update", "job:resize");
  no_actor.actor = "";
  EXPECT_EQ(store().AppendAudit(no_actor).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(store().AppendAudit(MakeAudit("", "job:resize")).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(store().AppendAudit(MakeAudit("job.update", "")).code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(Audit().empty()) << "a rejected record is not appended";
}

TEST_P(StoreConformance, X4_ListAuditIsNewestFirstWithATargetFilterAndACursor) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK(store().AppendAudit(
        MakeAudit("action." + std::to_string(i), i % 2 == 0 ? "job:even" : "job:odd")));
    Advance(kSecond);
  }
  const std::vector<AuditRecord> all = Audit();
  ASSERT_EQ(all.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(all[i].action, "action." + std::to_string(4 - i)) << "newest first";
    if (i > 0) {
      EXPECT_LT(all[i].id, all[i - 1].id);
    }
  }

  const std::vector<AuditRecord> even = Audit("job:even");
  ASSERT_EQ(even.size(), 3u);
  EXPECT_EQ(even[0].action, "action.4");
  EXPECT_EQ(even[1].action, "action.2");
  EXPECT_EQ(even[2].action, "action.0");
  EXPECT_TRUE(Audit("job:none").empty());
  EXPECT_TRUE(Audit("job:eve").empty()) << "the target filter is exact";

  // Pages of two, following the cursor.
  AuditFilter filter;
  filter.limit = 2;
  std::vector<std::string> seen;
  for (int page = 0; page < 4; ++page) {
    ASSERT_OK_AND_ASSIGN(std::vector<AuditRecord> records, store().ListAudit(filter));
    EXPECT_LE(records.size(), 2u);
    if (records.empty()) break;
    for (const AuditRecord& r : records) seen.push_back(r.action);
    filter.before_id = records.back().id;
  }
  EXPECT_EQ(seen,
            (std::vector<std::string>{"action.4", "action.3", "action.2", "action.1", "action.0"}));

  // The cursor and the filter together.
  AuditFilter odd;
  odd.target = "job:odd";
  odd.limit = 1;
  odd.before_id = all[0].id;  // action.4
  ASSERT_OK_AND_ASSIGN(std::vector<AuditRecord> page, store().ListAudit(odd));
  ASSERT_EQ(page.size(), 1u);
  EXPECT_EQ(page[0].action, "action.3");
  odd.before_id = page[0].id;
  ASSERT_OK_AND_ASSIGN(page, store().ListAudit(odd));
  ASSERT_EQ(page.size(), 1u);
  EXPECT_EQ(page[0].action, "action.1");
  odd.before_id = page[0].id;
  ASSERT_OK_AND_ASSIGN(page, store().ListAudit(odd));
  EXPECT_TRUE(page.empty());
}

TEST_P(StoreConformance, X4_ListAuditLimitIsBounded) {
  ASSERT_OK(store().AppendAudit(MakeAudit("job.update", "job:resize")));
  for (int bad : {0, -1, 1001}) {
    AuditFilter filter;
    filter.limit = bad;
    EXPECT_EQ(store().ListAudit(filter).status().code(), ErrorCode::kInvalidArgument)
        << "limit " << bad << " is rejected, not clamped";
  }
  for (int good : {1, 1000}) {
    AuditFilter filter;
    filter.limit = good;
    ASSERT_OK_AND_ASSIGN(std::vector<AuditRecord> records, store().ListAudit(filter));
    EXPECT_EQ(records.size(), 1u) << "limit " << good;
  }
}

// --- tenant grants ---

TEST_P(StoreConformance, Grants_GrantRevokeAndIsGranted) {
  ASSERT_OK_AND_ASSIGN(bool before, store().IsGranted("alice", "acme"));
  EXPECT_FALSE(before);

  ASSERT_OK(store().Grant("alice", "acme"));
  ASSERT_OK_AND_ASSIGN(bool granted, store().IsGranted("alice", "acme"));
  EXPECT_TRUE(granted);
  ASSERT_OK_AND_ASSIGN(bool other_tenant, store().IsGranted("alice", "globex"));
  EXPECT_FALSE(other_tenant);
  ASSERT_OK_AND_ASSIGN(bool other_principal, store().IsGranted("bob", "acme"));
  EXPECT_FALSE(other_principal);

  ASSERT_OK(store().Grant("alice", "acme"));  // idempotent: still one grant
  ASSERT_OK_AND_ASSIGN(bool twice, store().IsGranted("alice", "acme"));
  EXPECT_TRUE(twice);
  ASSERT_OK(store().Revoke("alice", "acme"));
  ASSERT_OK_AND_ASSIGN(bool revoked, store().IsGranted("alice", "acme"));
  EXPECT_FALSE(revoked) << "one revoke undoes any number of grants";
}

TEST_P(StoreConformance, Grants_StarGrantsEveryTenant) {
  ASSERT_OK(store().Grant("root", "*"));
  for (const char* tenant : {"acme", "globex", "t-1"}) {
    ASSERT_OK_AND_ASSIGN(bool granted, store().IsGranted("root", tenant));
    EXPECT_TRUE(granted) << tenant;
  }
  ASSERT_OK_AND_ASSIGN(bool other, store().IsGranted("alice", "acme"));
  EXPECT_FALSE(other) << "the star is root's alone";

  ASSERT_OK(store().Grant("root", "acme"));
  ASSERT_OK(store().Revoke("root", "*"));
  ASSERT_OK_AND_ASSIGN(bool kept, store().IsGranted("root", "acme"));
  EXPECT_TRUE(kept) << "the tenant grant stands on its own";
  ASSERT_OK_AND_ASSIGN(bool gone, store().IsGranted("root", "globex"));
  EXPECT_FALSE(gone);
}

TEST_P(StoreConformance, Grants_InvalidTenantIsInvalidArgument) {
  for (const std::string& bad : {std::string(), std::string("Upper"), std::string("has space"),
                                 std::string("-lead"), std::string(51, 'a'), std::string("**")}) {
    SCOPED_TRACE("tenant '" + bad + "'");
    EXPECT_EQ(store().Grant("alice", bad).code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(store().Revoke("alice", bad).code(), ErrorCode::kInvalidArgument);
  }
  ASSERT_OK(store().Grant("alice", std::string(50, 'a')));  // the longest valid tenant
  ASSERT_OK_AND_ASSIGN(bool granted, store().IsGranted("alice", std::string(50, 'a')));
  EXPECT_TRUE(granted);
}

}  // namespace taskengine
