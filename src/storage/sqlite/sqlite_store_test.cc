// SQLite-specific behaviour the backend-neutral conformance suite cannot
// express: a full database, a schema newer than the binary, durability modes.
#include "storage/sqlite/sqlite_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include "core/canonical_json.h"
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
