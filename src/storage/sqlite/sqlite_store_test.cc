// SQLite-specific behaviour the backend-neutral conformance suite cannot
// express: a full database, a schema newer than the binary, durability modes.
#include "storage/sqlite/sqlite_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <set>

#include "core/canonical_json.h"
#include "storage/sqlite/schema.h"
#include "testing_support/test_util.h"

namespace taskengine {
namespace {

JobDefinition Job() {
  JobDefinition j;
  j.name = JobName("fill");
  j.handler = "noop";
  return j;
}

AdmitRequest Request(int i) {
  AdmitRequest r;
  r.job = JobName("fill");
  r.payload_json = "{\"pad\":\"" + std::string(2000, 'x') + "\",\"i\":" + std::to_string(i) + "}";
  r.fingerprint = Sha256Hex(r.payload_json);
  r.idempotency_key = "k" + std::to_string(i);
  return r;
}

// RD13 at the store level: when the database cannot grow, admission answers
// kUnavailable with a clear message, nothing half-written remains, every
// acknowledged row is there, and admissions work again once space is freed.
TEST(SqliteStoreTest, FullDatabaseIsUnavailableAndRecovers) {
  TempDir dir;
  FakeClock clock;
  SqliteStoreOptions o;
  o.path = dir.File("full.db");
  o.clock = &clock;
  o.max_page_count = 64;  // 256 KiB with 4 KiB pages
  std::vector<ExecutionId> acknowledged;
  Status failure;
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(o));
    ASSERT_OK(store->Migrate());
    ASSERT_OK(store->UpsertJob(Job()));
    for (int i = 0; i < 1000; ++i) {
      auto r = store->Admit(Request(i));
      if (!r.ok()) {
        failure = r.status();
        break;
      }
      acknowledged.push_back(r->id);
    }
    ASSERT_FALSE(failure.ok()) << "the database never filled up";
    EXPECT_EQ(failure.code(), ErrorCode::kUnavailable);
    EXPECT_NE(failure.message().find("full"), std::string::npos) << failure.message();
    // The store keeps answering (reads, and writes that need no space).
    ASSERT_OK_AND_ASSIGN(Execution first, store->GetExecution(acknowledged.front()));
    EXPECT_EQ(first.status, ExecutionStatus::kQueued);
  }
  o.max_page_count = 0;  // space freed
  ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(o));
  for (ExecutionId id : acknowledged) EXPECT_OK(store->GetExecution(id));
  ExecutionFilter all;
  all.limit = 1000;
  ASSERT_OK_AND_ASSIGN(ExecutionPage page, store->ListExecutions(all));
  EXPECT_EQ(page.items.size(), acknowledged.size());  // nothing beyond the acknowledged
  ASSERT_OK_AND_ASSIGN(AdmitResult again, store->Admit(Request(5000)));
  EXPECT_EQ(again.outcome, AdmitOutcome::kCreated);
}

// D4: a database whose schema is newer than the binary is refused, unchanged.
TEST(SqliteStoreTest, NewerSchemaIsRefused) {
  TempDir dir;
  SqliteStoreOptions o;
  o.path = dir.File("newer.db");
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(o));
    ASSERT_OK(store->Migrate());
  }
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(o.path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 999", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(o));
  Status s = store->Migrate();
  EXPECT_EQ(s.code(), ErrorCode::kUnavailable);
  EXPECT_NE(s.message().find("newer"), std::string::npos) << s.message();
  ASSERT_OK_AND_ASSIGN(int version, store->SchemaVersion());
  EXPECT_EQ(version, 999);
}

// O1, version 8: lanes became (tenant, lane key). A database of version 7
// holds executions parked behind another tenant's member of the same key;
// the migration makes each tenant's oldest open member its lane's head.
TEST(SqliteStoreTest, O1_MigrationToPerTenantLanesUnparksOtherTenantsHeads) {
  TempDir dir;
  FakeClock clock;
  SqliteStoreOptions o;
  o.path = dir.File("lanes.db");
  o.clock = &clock;
  auto in_lane = [](int i, const std::string& tenant) {
    AdmitRequest r = Request(i);
    r.tenant = TenantId(tenant);
    r.lane_key = "orders";
    return r;
  };
  ExecutionId a1, a2, b1;
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(o));
    ASSERT_OK(store->Migrate());
    ASSERT_OK(store->UpsertJob(Job()));
    ASSERT_OK_AND_ASSIGN(AdmitResult r1, store->Admit(in_lane(1, "a")));
    ASSERT_OK_AND_ASSIGN(AdmitResult r2, store->Admit(in_lane(2, "a")));
    ASSERT_OK_AND_ASSIGN(AdmitResult r3, store->Admit(in_lane(3, "b")));
    a1 = r1.id, a2 = r2.id, b1 = r3.id;
  }
  {
    // Back to version 7: one lane per key, so b's member waited behind a's
    // (and no handler_started column, which version 9 adds, nor
    // job_definitions.seed_digest, which version 10 adds).
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(o.path.c_str(), &db), SQLITE_OK);
    const std::string downgrade =
        "ALTER TABLE executions DROP COLUMN handler_started;"
        "ALTER TABLE job_definitions DROP COLUMN seed_digest;"
        "DROP INDEX executions_lane_open;"
        "CREATE INDEX executions_lane_open ON executions(lane_key, id)"
        "  WHERE lane_key <> '' AND status IN (0, 1, 3, 4);"
        "UPDATE executions SET lane_parked = 1 WHERE id = " +
        std::to_string(b1.value) + "; PRAGMA user_version = 7;";
    ASSERT_EQ(sqlite3_exec(db, downgrade.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(o));
  ASSERT_OK(store->Migrate());
  ASSERT_OK_AND_ASSIGN(int version, store->SchemaVersion());
  EXPECT_EQ(version, sqlite::kSchemaVersion);
  ClaimRequest claim;
  claim.worker = WorkerId("w1");
  claim.slots = {{"default", 10}};
  ASSERT_OK_AND_ASSIGN(std::vector<Lease> leases, store->Claim(claim));
  std::set<std::int64_t> ids;
  for (const Lease& l : leases) ids.insert(l.id.value);
  EXPECT_EQ(ids, (std::set<std::int64_t>{a1.value, b1.value})) << "a2 still waits for a1";
  ASSERT_OK_AND_ASSIGN(LaneStatus lane, store->GetLane(TenantId("a"), "orders"));
  EXPECT_EQ(lane.head, a1);
  EXPECT_EQ(lane.queued, 1);
  EXPECT_NE(a2, ExecutionId());
}

TEST(SqliteStoreTest, UnopenablePathIsUnavailable) {
  SqliteStoreOptions o;
  o.path = "/nonexistent-dir/sub/te.db";
  auto store = OpenSqliteStore(o);
  EXPECT_EQ(store.status().code(), ErrorCode::kUnavailable) << store.status().ToString();
}

TEST(SqliteStoreTest, NormalSyncModeWorks) {
  TempDir dir;
  SqliteStoreOptions o;
  o.path = dir.File("normal.db");
  o.sync = SyncMode::kNormal;
  ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(o));
  ASSERT_OK(store->Migrate());
  ASSERT_OK(store->UpsertJob(Job()));
  ASSERT_OK_AND_ASSIGN(AdmitResult r, store->Admit(Request(1)));
  EXPECT_EQ(r.outcome, AdmitOutcome::kCreated);
}

}  // namespace
}  // namespace taskengine
