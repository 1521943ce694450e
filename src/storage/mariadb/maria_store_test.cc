// The MariaDB store's own behaviour beyond the conformance suite: the
// database clock, opening a store with bad options, migrating twice,
// surviving a server restart, running a transaction again after InnoDB
// chose it as a deadlock's victim, and transactional enqueue from an
// application's own transaction (A6, the enqueue() procedure) with the lane
// lock it shares with the store. Starts its own throwaway server
// (scripts/mariadb_cluster.sh).
#include "storage/mariadb/maria_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "storage/mariadb/maria_conn.h"
#include "storage/mariadb/testing/test_server.h"
#include "taskengine/clock.h"
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

// --- A6: enqueue() from the application's own transaction ---------------------

JobDefinition WorkJob() {
  JobDefinition job;
  job.name = JobName("work");
  job.handler = "work";
  job.queue = "default";
  return job;
}

// A store on a fresh database with job "work", and an application's own
// connection to the same database with its own session settings (the
// server's default sql_mode, a time zone other than UTC).
struct A6 {
  FakeClock clock;
  std::unique_ptr<Store> store;
  MariaConn app;
  MariaConn watch;
};

void OpenA6(A6& a, MariaStoreOptions o = {}) {
  ASSERT_OK_AND_ASSIGN(std::string url, FreshDatabase(TestDatabaseName()));
  o.url = url;
  o.clock = &a.clock;
  ASSERT_OK_AND_ASSIGN(a.store, OpenMariaStore(o));
  ASSERT_OK(a.store->Migrate());
  ASSERT_OK(a.store->UpsertJob(WorkJob()));
  ASSERT_OK(a.app.Connect(url));
  ASSERT_OK(a.app.Exec("SET SESSION sql_mode = DEFAULT, time_zone = '+05:30'"));
  ASSERT_OK(a.watch.Connect(url));
}

// CALL enqueue(args, @id) on `app`: the new (or existing) execution's id.
Result<std::int64_t> Enqueue(MariaConn& app, const std::string& args) {
  TE_RETURN_IF_ERROR(app.Exec("CALL enqueue(" + args + ", @te_id)"));
  std::int64_t id = 0;
  TE_RETURN_IF_ERROR(
      app.Run("SELECT @te_id", SqlArgs(), [&](const Row& r) { id = r.Int(0); }).status());
  return id;
}

std::int64_t Count(MariaConn& conn, const std::string& where) {
  std::int64_t n = -1;
  EXPECT_OK(conn.RunText("SELECT COUNT(*) FROM executions WHERE " + where, SqlArgs(),
                         [&](const Row& r) { n = r.Int(0); }));
  return n;
}

// The execution exists if and only if the application's transaction commits,
// admitted as Store::Admit would admit it: policy, idempotency by key and
// fingerprint, counters, the database's clock.
TEST(MariaStoreTest, A6_EnqueueCommitsWithTheApplication) {
  A6 a;
  ASSERT_NO_FATAL_FAILURE(OpenA6(a));
  ASSERT_OK(a.app.Exec("CREATE TABLE orders (id INT)"));

  ASSERT_OK(a.app.Exec("START TRANSACTION; INSERT INTO orders VALUES (1)"));
  ASSERT_OK(Enqueue(a.app, "'work', '{\"order\":1}', 'order-1', NULL, NULL, NULL, NULL, NULL"));
  ASSERT_OK(a.app.Exec("ROLLBACK"));
  EXPECT_EQ(Count(a.watch, "1"), 0) << "a rolled-back enqueue left an execution";

  ASSERT_OK(a.app.Exec("START TRANSACTION; INSERT INTO orders VALUES (1)"));
  ASSERT_OK_AND_ASSIGN(
      std::int64_t id,
      Enqueue(a.app, "'work', '{\"order\":1}', 'order-1', NULL, NULL, NULL, NULL, NULL"));
  EXPECT_EQ(Count(a.watch, "1"), 0) << "visible before the application committed";
  ASSERT_OK(a.app.Exec("COMMIT"));

  ASSERT_OK_AND_ASSIGN(Execution e, a.store->GetExecution(ExecutionId(id)));
  EXPECT_EQ(e.status, ExecutionStatus::kQueued);
  EXPECT_EQ(e.idempotency_key, "order-1");
  EXPECT_EQ(e.queue, "default");
  EXPECT_EQ(e.requester, "sql");
  EXPECT_EQ(e.payload_json, "{\"order\":1}");
  EXPECT_EQ(e.retry.max_attempts, WorkJob().retry.max_attempts);
  EXPECT_EQ(e.lease_ms, WorkJob().lease_ms);
  // The database's clock, in UTC milliseconds whatever the session's zone.
  std::int64_t db_now = 0;
  ASSERT_OK(a.watch
                .Run("SELECT CAST(FLOOR(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)", SqlArgs(),
                     [&](const Row& r) { db_now = r.Int(0); })
                .status());
  EXPECT_LT(std::llabs(db_now - e.queued_at), 5000);
  EXPECT_EQ(e.run_at, e.queued_at);

  // The same key and payload: the same execution, nothing added; another
  // payload: a duplicate-key error (SQLSTATE 23000, 1062).
  ASSERT_OK_AND_ASSIGN(
      std::int64_t again,
      Enqueue(a.app, "'work', '{\"order\":1}', 'order-1', NULL, NULL, NULL, NULL, NULL"));
  EXPECT_EQ(again, id);
  auto conflict =
      Enqueue(a.app, "'work', '{\"order\":2}', 'order-1', NULL, NULL, NULL, NULL, NULL");
  EXPECT_EQ(conflict.status().code(), ErrorCode::kConflict) << conflict.status().ToString();
  EXPECT_EQ(a.app.last_error(), 1062u);
  // The dispatcher's fingerprint shares keys with the API.
  AdmitRequest api;
  api.job = JobName("work");
  api.idempotency_key = "shared-key";
  api.payload_json = "{\"k\":1}";
  api.fingerprint = std::string(64, 'f');
  ASSERT_OK_AND_ASSIGN(AdmitResult via_api, a.store->Admit(api));
  ASSERT_OK_AND_ASSIGN(
      std::int64_t via_sql,
      Enqueue(a.app, "'work', '{\"k\":1}', 'shared-key', NULL, NULL, NULL, NULL, '" +
                         std::string(64, 'f') + "'"));
  EXPECT_EQ(via_sql, via_api.id.value);

  // What the dispatcher refuses, enqueue() refuses (SQLSTATE 22023), and
  // admits nothing.
  JobDefinition per_tenant = WorkJob();
  per_tenant.name = JobName("per-tenant");
  per_tenant.scope = JobScope::kPerTenant;
  per_tenant.queue = "other";
  ASSERT_OK(a.store->UpsertJob(per_tenant));
  JobDefinition off = WorkJob();
  off.name = JobName("off");
  off.enabled = false;
  ASSERT_OK(a.store->UpsertJob(off));
  const std::int64_t before = Count(a.watch, "1");
  const std::string big = "'{\"x\":\"" + std::string(300 * 1024, 'a') + "\"}'";
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"'nope', '{}', NULL, NULL, NULL, NULL, NULL, NULL", "no job named nope"},
      {"NULL, '{}', NULL, NULL, NULL, NULL, NULL, NULL", "no job named NULL"},
      {"'off', '{}', NULL, NULL, NULL, NULL, NULL, NULL", "job off is disabled"},
      {"'per-tenant', '{}', NULL, NULL, NULL, NULL, NULL, NULL", "a tenant is required"},
      {"'per-tenant', '{}', NULL, 'Bad Tenant!', NULL, NULL, NULL, NULL", "invalid tenant"},
      {"'work', '{}', NULL, 'acme', NULL, NULL, NULL, NULL", "it takes no tenant"},
      {"'work', '[1]', NULL, NULL, NULL, NULL, NULL, NULL", "a JSON object"},
      {"'work', '{', NULL, NULL, NULL, NULL, NULL, NULL", "a JSON object"},
      {"'work', NULL, NULL, NULL, NULL, NULL, NULL, NULL", "a JSON object"},
      {"'work', '{}', 'has space', NULL, NULL, NULL, NULL, NULL", "idempotency key"},
      {"'work', '{}', '" + std::string(201, 'k') + "', NULL, NULL, NULL, NULL, NULL",
       "idempotency key"},
      {"'work', '{}', NULL, NULL, NULL, '" + std::string(201, 'l') + "', NULL, NULL", "lane key"},
      {"'work', '{}', NULL, NULL, -5, NULL, NULL, NULL", "run_at is negative"},
      {"'work', " + big + ", NULL, NULL, NULL, NULL, NULL, NULL", "more than 262144"},
  };
  for (const auto& [args, message] : refused) {
    SCOPED_TRACE(args.substr(0, 80));
    auto r = Enqueue(a.app, args);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(a.app.last_error(), 1644u) << r.status().ToString();  // a SIGNAL
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr(message));
  }
  EXPECT_EQ(Count(a.watch, "1"), before);
  ASSERT_OK(Enqueue(a.app, "'per-tenant', '{}', NULL, 'acme', NULL, NULL, NULL, NULL"));
  // The payload limit is the engine's setting (A1).
  ASSERT_OK(a.store->SetPayloadLimit(512 * 1024));
  ASSERT_OK(Enqueue(a.app, "'work', " + big + ", NULL, NULL, NULL, NULL, NULL, NULL"));

  // Counted as the store counts (P8): every admission above, queued.
  ASSERT_OK_AND_ASSIGN(StoreStats stats, a.store->GetStats(TenantScope{}));
  EXPECT_EQ(stats.totals[static_cast<int>(ExecutionStatus::kQueued)], Count(a.watch, "1"));
  EXPECT_EQ(Count(a.watch, "1"), 4);  // order-1, shared-key, per-tenant and the big one
}

// O1 with enqueue(): an application's uncommitted lane member holds the
// lane's lock until its transaction ends, so the store's admission to the
// same lane waits, then sees the member and parks behind it.
TEST(MariaStoreTest, A6_TheStoreWaitsForAnApplicationsUncommittedLaneMember) {
  A6 a;
  ASSERT_NO_FATAL_FAILURE(OpenA6(a));
  ASSERT_OK(a.app.Exec("START TRANSACTION"));
  ASSERT_OK_AND_ASSIGN(
      std::int64_t head,
      Enqueue(a.app, "'work', '{\"n\":1}', NULL, NULL, NULL, 'orders', NULL, NULL"));
  AdmitRequest second;
  second.job = JobName("work");
  second.lane_key = "orders";
  second.payload_json = "{\"n\":2}";
  auto admitted = std::async(std::launch::async, [&] { return a.store->Admit(second); });
  EXPECT_EQ(admitted.wait_for(std::chrono::milliseconds(500)), std::future_status::timeout)
      << "the store admitted to a lane an uncommitted transaction was changing";
  ASSERT_OK(a.app.Exec("COMMIT"));
  ASSERT_OK_AND_ASSIGN(AdmitResult behind, admitted.get());

  a.clock.Set(std::numeric_limits<Millis>::max() / 4);  // ahead of the database's clock
  ClaimRequest claim;
  claim.worker = WorkerId("w1");
  claim.slots.push_back(QueueSlot{"default", 10});
  ASSERT_OK_AND_ASSIGN(std::vector<Lease> leases, a.store->Claim(claim));
  ASSERT_EQ(leases.size(), 1u) << "two members of one lane were due at once";
  EXPECT_EQ(leases[0].id.value, head);
  EXPECT_EQ(Count(a.watch, "lane_parked = 1 AND id = " + std::to_string(behind.id.value)), 1);
}

// The other way round: an enqueue() that waited for the store's change of
// its lane is refused (SQLSTATE 40001, 1213: run the transaction again) and
// admits nothing; run again, it parks behind the store's member.
TEST(MariaStoreTest, A6_AnEnqueueThatWaitedForTheStoresLaneChangeRunsAgain) {
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> armed{false};
  MariaStoreOptions o;
  o.before_commit_for_testing = [&](SqlSession&, int) -> Status {
    if (armed.exchange(false)) {
      entered.set_value();
      released.wait();
    }
    return Status::Ok();
  };
  A6 a;
  ASSERT_NO_FATAL_FAILURE(OpenA6(a, o));
  AdmitRequest first;
  first.job = JobName("work");
  first.lane_key = "orders";
  armed = true;
  auto admitted = std::async(std::launch::async, [&] { return a.store->Admit(first); });
  entered.get_future().wait();  // the store's admission holds the lane, uncommitted
  const std::string args = "'work', '{\"n\":2}', NULL, NULL, NULL, 'orders', NULL, NULL";
  auto enqueued = std::async(std::launch::async, [&] { return Enqueue(a.app, args); });
  EXPECT_EQ(enqueued.wait_for(std::chrono::milliseconds(500)), std::future_status::timeout);
  release.set_value();
  ASSERT_OK_AND_ASSIGN(AdmitResult head, admitted.get());
  Result<std::int64_t> refused = enqueued.get();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(a.app.last_error(), 1213u) << refused.status().ToString();
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("run the transaction again"));
  EXPECT_EQ(Count(a.watch, "1"), 1);

  ASSERT_OK_AND_ASSIGN(std::int64_t again, Enqueue(a.app, args));
  EXPECT_EQ(Count(a.watch, "lane_parked = 1 AND id = " + std::to_string(again)), 1);
  EXPECT_EQ(Count(a.watch, "lane_parked = 0 AND id = " + std::to_string(head.id.value)), 1);
}

// REPEATABLE READ: a transaction whose snapshot is older than its lane's
// last change would admit on a stale view of the lane; enqueue() refuses
// (40001, 1213) instead. Run again from a new snapshot, it parks behind the
// member the snapshot did not show.
TEST(MariaStoreTest, A6_ALaneSeenThroughAnOlderSnapshotRunsAgain) {
  A6 a;
  ASSERT_NO_FATAL_FAILURE(OpenA6(a));
  ASSERT_OK(a.app.Exec("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"));
  ASSERT_OK(a.app.Exec("START TRANSACTION"));
  EXPECT_EQ(Count(a.app, "1"), 0);  // the snapshot: no member yet
  AdmitRequest first;
  first.job = JobName("work");
  first.lane_key = "orders";
  ASSERT_OK_AND_ASSIGN(AdmitResult head, a.store->Admit(first));
  EXPECT_EQ(Count(a.app, "1"), 0);  // still the old snapshot
  const std::string args = "'work', '{\"n\":2}', NULL, NULL, NULL, 'orders', NULL, NULL";
  Result<std::int64_t> refused = Enqueue(a.app, args);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(a.app.last_error(), 1213u) << refused.status().ToString();
  ASSERT_OK(a.app.Exec("ROLLBACK"));
  EXPECT_EQ(Count(a.watch, "1"), 1);

  ASSERT_OK(a.app.Exec("START TRANSACTION"));
  ASSERT_OK_AND_ASSIGN(std::int64_t again, Enqueue(a.app, args));
  ASSERT_OK(a.app.Exec("COMMIT"));
  EXPECT_EQ(Count(a.watch, "lane_parked = 1 AND id = " + std::to_string(again)), 1);
  EXPECT_EQ(Count(a.watch, "lane_parked = 0 AND id = " + std::to_string(head.id.value)), 1);
  // Outside a lane the snapshot does not matter: an old one admits too.
  ASSERT_OK(a.app.Exec("START TRANSACTION"));
  EXPECT_EQ(Count(a.app, "1"), 2);
  ASSERT_OK(a.store->Admit(first).status());
  ASSERT_OK(Enqueue(a.app, "'work', '{}', 'k', NULL, NULL, NULL, NULL, NULL"));
  ASSERT_OK(a.app.Exec("COMMIT"));
  EXPECT_EQ(Count(a.watch, "1"), 4);
}
}  // namespace
}  // namespace taskengine::maria
