// The MariaDB store's own behaviour beyond the conformance suite: the
// database clock, opening a store with bad options, migrating twice,
// surviving a server restart, and running a transaction again after InnoDB
// chose it as a deadlock's victim. Starts its own throwaway server
// (scripts/mariadb_cluster.sh).
#include "storage/mariadb/maria_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "storage/mariadb/maria_conn.h"
#include "storage/mariadb/testing/test_server.h"
#include "testing_support/test_util.h"

namespace taskengine::maria {
namespace {

using storage_internal::Row;
using storage_internal::SqlArgs;
using storage_internal::SqlSession;
using testing::FreshDatabase;
using testing::SharedServer;
using testing::TestDatabaseName;
using testing::TestServer;

// The clock follows the server's clock: within a second of SYSDATE() read
// over another connection, and monotonic between samples.
TEST(MariaStoreTest, DatabaseClockFollowsTheServer) {
  TestServer& server = SharedServer();
  ASSERT_TRUE(server.started()) << server.url();
  ASSERT_OK_AND_ASSIGN(auto clock, OpenMariaClock(server.url(), std::chrono::milliseconds(50)));
  MariaConn conn;
  ASSERT_OK(conn.Connect(server.url()));
  Millis db = 0;
  ASSERT_OK(conn.Run("SELECT CAST(FLOOR(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)",
                     storage_internal::SqlArgs(),
                     [&](const storage_internal::Row& r) { db = r.Int(0); })
                .status());
  EXPECT_LT(std::llabs(clock->NowMillis() - db), 1000);
  ASSERT_OK(clock->Resample());
  std::this_thread::sleep_for(std::chrono::milliseconds(120));  // the sampler runs meanwhile
  const Millis a = clock->NowMillis();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GE(clock->NowMillis(), a);
  EXPECT_FALSE(OpenMariaClock("mysql://u@127.0.0.1:1/none").ok());
}

TEST(MariaStoreTest, RefusesBadOptions) {
  MariaStoreOptions o;
  EXPECT_EQ(OpenMariaStore(o).status().code(), ErrorCode::kInvalidArgument);
  o.url = "mysql://u@h:70000/db";
  EXPECT_EQ(OpenMariaStore(o).status().code(), ErrorCode::kInvalidArgument);
  o.url = SharedServer().url();
  o.pool_size = 0;
  EXPECT_EQ(OpenMariaStore(o).status().code(), ErrorCode::kInvalidArgument);
}

// Migrate is idempotent, and a second node migrating the same database finds
// it current.
TEST(MariaStoreTest, MigrateTwiceFromTwoStores) {
  ASSERT_OK_AND_ASSIGN(std::string url, FreshDatabase(TestDatabaseName()));
  MariaStoreOptions o;
  o.url = url;
  ASSERT_OK_AND_ASSIGN(auto a, OpenMariaStore(o));
  ASSERT_OK_AND_ASSIGN(auto b, OpenMariaStore(o));
  ASSERT_OK(a->Migrate());
  ASSERT_OK(b->Migrate());
  ASSERT_OK(a->Migrate());
  ASSERT_OK_AND_ASSIGN(int va, a->SchemaVersion());
  ASSERT_OK_AND_ASSIGN(int vb, b->SchemaVersion());
  EXPECT_GT(va, 0);
  EXPECT_EQ(va, vb);
}

// A server restart: calls answer unavailable while it is down and work again
// once it is back, through the same store object.
TEST(MariaStoreTest, SurvivesAServerRestart) {
  TestServer& server = SharedServer();
  ASSERT_OK_AND_ASSIGN(std::string url, FreshDatabase(TestDatabaseName()));
  MariaStoreOptions o;
  o.url = url;
  o.reconnect_backoff_min = std::chrono::milliseconds(10);
  o.reconnect_backoff_max = std::chrono::milliseconds(50);
  ASSERT_OK_AND_ASSIGN(auto store, OpenMariaStore(o));
  ASSERT_OK(store->Migrate());
  ASSERT_OK(store->AppendAudit(AuditRecord{0, 1, "a", "", "x", "t", "", "", "r"}));
  ASSERT_TRUE(server.Stop());
  auto down = store->ListAudit(AuditFilter{});
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), ErrorCode::kUnavailable) << down.status().message();
  ASSERT_TRUE(server.Start());
  Result<std::vector<AuditRecord>> back = Unavailable("not tried");
  for (int i = 0; i < 100 && !back.ok(); ++i) {
    back = store->ListAudit(AuditFilter{});
    if (!back.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_OK(back.status());
  EXPECT_EQ(back->size(), 1u);
}

// A deadlock with another transaction (error 1213, InnoDB rolls this one
// back) makes the store run its whole transaction again: the admission is
// committed once, with its counters, and answered as created.
//
// The other transaction (`other`) has written many rows, so InnoDB rolls
// back the store's lighter transaction. It holds the row of an execution
// admitted before (`held`) and asks for the rows the store's admission has
// just inserted, uncommitted; then, through the test seam, the store's
// transaction asks for `held`: a cycle.
TEST(MariaStoreTest, DeadlockVictimRunsAgainAndCommitsOnce) {
  ASSERT_OK_AND_ASSIGN(std::string url, FreshDatabase(TestDatabaseName()));
  MariaConn other;
  ASSERT_OK(other.Connect(url));
  MariaConn watch;
  ASSERT_OK(watch.Connect(url));

  std::atomic<bool> armed{false};
  std::vector<int> attempts;
  Status victim;  // what the store's statement met on its first attempt
  ExecutionId held;
  std::thread waiter;
  Status waiter_status;
  MariaStoreOptions o;
  o.url = url;
  o.before_commit_for_testing = [&](SqlSession& s, int attempt) -> Status {
    if (!armed) return Status::Ok();
    attempts.push_back(attempt);
    if (attempt > 0) return Status::Ok();
    waiter = std::thread([&] {
      waiter_status = other
                          .Run("SELECT id FROM executions WHERE id > ?1 ORDER BY id FOR UPDATE",
                               SqlArgs().Add(held.value), [](const Row&) {})
                          .status();
      (void)other.Exec("ROLLBACK");
    });
    // Until `other` asks for this transaction's rows (it may not have queued
    // its lock request yet; then this transaction's request below waits for
    // `held`, and the other's request closes the cycle).
    for (int i = 0; i < 2000; ++i) {
      std::int64_t asking = 0;
      TE_RETURN_IF_ERROR(watch
                             .Run("SELECT COUNT(*) FROM information_schema.processlist"
                                  " WHERE info LIKE 'SELECT id FROM executions WHERE id > %'",
                                  SqlArgs(), [&](const Row& r) { asking = r.Int(0); })
                             .status());
      if (asking > 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    victim = s.Run("SELECT id FROM executions WHERE id = ?1 FOR UPDATE", SqlArgs().Add(held.value),
                   [](const Row&) {})
                 .status();
    return victim;
  };
  ASSERT_OK_AND_ASSIGN(auto store, OpenMariaStore(o));
  ASSERT_OK(store->Migrate());
  JobDefinition job;
  job.name = JobName("work");
  job.handler = "work";
  job.queue = "default";
  ASSERT_OK(store->UpsertJob(job));
  AdmitRequest first;
  first.job = job.name;
  ASSERT_OK_AND_ASSIGN(AdmitResult before, store->Admit(first));
  held = before.id;

  // The other transaction: heavy, and holding `held`.
  ASSERT_OK(other.Exec("CREATE TABLE ballast (n BIGINT PRIMARY KEY)"));
  ASSERT_OK(other.Exec("START TRANSACTION; INSERT INTO ballast SELECT seq FROM seq_1_to_5000"));
  ASSERT_OK(other
                .Run("SELECT id FROM executions WHERE id = ?1 FOR UPDATE",
                     SqlArgs().Add(held.value), [](const Row&) {})
                .status());

  std::vector<AdmitRequest> batch(3);
  for (int i = 0; i < 3; ++i) {
    batch[i].job = job.name;
    batch[i].payload_json = "{\"i\":" + std::to_string(i) + "}";
  }
  armed = true;
  Result<std::vector<AdmitResult>> admitted = store->AdmitBatch(batch);
  armed = false;
  if (waiter.joinable()) waiter.join();
  ASSERT_OK(admitted.status());
  ASSERT_EQ(admitted->size(), 3u);

  // The first attempt was the deadlock's victim; the second committed.
  EXPECT_EQ(attempts, (std::vector<int>{0, 1}));
  EXPECT_EQ(victim.code(), ErrorCode::kUnavailable) << victim.ToString();
  EXPECT_NE(victim.message().find("1213"), std::string::npos) << victim.ToString();
  EXPECT_OK(waiter_status);

  // Once: the execution before and the three of the batch, each counted once.
  std::vector<std::int64_t> ids;
  ASSERT_OK(watch
                .Run("SELECT id FROM executions ORDER BY id", SqlArgs(),
                     [&](const Row& r) { ids.push_back(r.Int(0)); })
                .status());
  ASSERT_EQ(ids.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ((*admitted)[i].id.value, ids[i + 1]);
  std::int64_t queued = 0;
  ASSERT_OK(watch
                .Run("SELECT SUM(count) FROM status_counts WHERE status = 0", SqlArgs(),
                     [&](const Row& r) { queued = r.Int(0); })
                .status());
  EXPECT_EQ(queued, 4);
  ASSERT_OK_AND_ASSIGN(StoreStats stats, store->GetStats(TenantScope{}));
  std::int64_t counted = 0;
  for (const QueueStats& q : stats.queues) {
    counted += q.by_status[static_cast<int>(ExecutionStatus::kQueued)];
  }
  EXPECT_EQ(counted, 4);
}

}  // namespace
}  // namespace taskengine::maria
