// PostgreSQL-specific behaviour the backend-neutral conformance suite cannot
// express: a server that stops mid-use and comes back (RD11 at the store
// level), a schema newer than the binary, schema isolation, option checks and
// the DatabaseClock.
//
// Each test starts its own throwaway cluster with scripts/pg_cluster.sh
// (postgresql-15 must be installed; TASKENGINE_SOURCE_DIR locates the script).
#include "storage/postgres/pg_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "storage/postgres/pg_conn.h"
#include "storage/postgres/pg_schema.h"
#include "storage/sql_statements.h"
#include "storage/store_rules.h"
#include "testing_support/script_server.h"
#include "testing_support/test_util.h"

namespace taskengine {
namespace {

constexpr const char* kPgBin = "/usr/lib/postgresql/15/bin";

// A throwaway cluster (scripts/pg_cluster.sh), stopped at the end.
class Cluster : public taskengine::testing::ScriptServer {
 public:
  Cluster() : ScriptServer("scripts/pg_cluster.sh") {}

  // Stops the server the hard way (RD11): no checkpoint, connections cut.
  bool StopImmediate() {
    const std::string as = ::geteuid() == 0 ? "runuser -u postgres -- " : "";
    return taskengine::testing::Shell(as + kPgBin + "/pg_ctl -D " + dir() +
                                      "/data -m immediate -w stop >/dev/null 2>&1") == 0;
  }
};

// One cluster for the whole binary (initdb takes seconds); each test uses a
// schema of its own. Stopped when the binary ends.
Cluster* shared_cluster = nullptr;

class ClusterEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    delete shared_cluster;
    shared_cluster = nullptr;
  }
};
const ::testing::Environment* const kClusterEnvironment =
    ::testing::AddGlobalTestEnvironment(new ClusterEnvironment);

Cluster& SharedCluster() {
  if (shared_cluster == nullptr) shared_cluster = new Cluster();
  return *shared_cluster;
}

JobDefinition Job() {
  JobDefinition j;
  j.name = JobName("work");
  j.handler = "noop";
  return j;
}

AdmitRequest Request(int i) {
  AdmitRequest r;
  r.job = JobName("work");
  r.payload_json = "{\"i\":" + std::to_string(i) + "}";
  char fp[65];
  std::snprintf(fp, sizeof fp, "%064x", static_cast<unsigned>(i));
  r.fingerprint = fp;
  r.idempotency_key = "k" + std::to_string(i);
  return r;
}

std::vector<LeaseRef> RefsOf(const std::vector<Lease>& leases) {
  std::vector<LeaseRef> refs;
  for (const Lease& l : leases) refs.push_back(LeaseRef{l.id, l.version});
  return refs;
}

// A success for each of `leases`.
std::vector<FinishRequest> SuccessesOf(const std::vector<LeaseRef>& leases) {
  std::vector<FinishRequest> out(leases.size());
  for (std::size_t i = 0; i < leases.size(); ++i) out[i].lease = leases[i];
  return out;
}

PostgresStoreOptions Options(const Cluster& cluster, Clock* clock, const std::string& schema) {
  PostgresStoreOptions o;
  o.url = cluster.url();
  o.schema = schema;
  o.clock = clock;
  o.pool_size = 3;
  o.reconnect_backoff_min = std::chrono::milliseconds(20);
  o.reconnect_backoff_max = std::chrono::milliseconds(200);
  return o;
}

TEST(PgStoreTest, OptionsAreChecked) {
  PostgresStoreOptions o;
  EXPECT_EQ(OpenPostgresStore(o).status().code(), ErrorCode::kInvalidArgument) << "no URL";
  o.url = "postgres://postgres@127.0.0.1:1/none";
  o.schema = "Bad-Name";
  EXPECT_EQ(OpenPostgresStore(o).status().code(), ErrorCode::kInvalidArgument);
  o.schema = "taskengine";
  o.pool_size = 0;
  EXPECT_EQ(OpenPostgresStore(o).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(IsValidPostgresSchemaName("taskengine"));
  EXPECT_TRUE(IsValidPostgresSchemaName("_t1"));
  EXPECT_FALSE(IsValidPostgresSchemaName("1t"));
  EXPECT_FALSE(IsValidPostgresSchemaName("a\"b"));
}

TEST(PgStoreTest, UnreachableServerIsUnavailable) {
  PostgresStoreOptions o;
  o.url = "postgres://postgres@127.0.0.1:1/none?connect_timeout=2";
  auto r = OpenPostgresStore(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable) << r.status().ToString();
}

// RD11 at the store level: the server stops (-m immediate) while the store is
// in use; every call answers kUnavailable (none crashes, none half-applies);
// after a restart the same store object serves again, with everything
// acknowledged before the stop.
TEST(PgStoreTest, ServerStopAnswersUnavailableAndRestartRecovers) {
  Cluster& cluster = SharedCluster();
  ASSERT_TRUE(cluster.started()) << cluster.url();
  FakeClock clock;
  ASSERT_OK_AND_ASSIGN(auto store, OpenPostgresStore(Options(cluster, &clock, "te_reconnect")));
  ASSERT_OK(store->Migrate());
  ASSERT_OK(store->UpsertJob(Job()));
  std::vector<ExecutionId> acknowledged;
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK_AND_ASSIGN(AdmitResult a, store->Admit(Request(i)));
    acknowledged.push_back(a.id);
  }
  ClaimRequest claim;
  claim.worker = WorkerId("w1");
  claim.slots.push_back(QueueSlot{"default", 1});
  ASSERT_OK_AND_ASSIGN(std::vector<Lease> leases, store->Claim(claim));
  ASSERT_EQ(leases.size(), 1u);
  const Lease lease = leases.front();

  // Calls race the stop on other threads: each answers ok or kUnavailable.
  std::atomic<bool> stop{false};
  std::atomic<int> unexpected{0};
  std::atomic<int> unavailable{0};
  std::thread load([&] {
    int i = 100;
    while (!stop.load()) {
      auto r = store->Admit(Request(i++));
      if (!r.ok()) {
        if (r.status().code() == ErrorCode::kUnavailable) {
          ++unavailable;
        } else {
          ++unexpected;
          ADD_FAILURE() << "admission during the stop: " << r.status().ToString();
        }
      }
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(cluster.StopImmediate());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  load.join();
  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_GT(unavailable.load(), 0) << "no call saw the server gone";

  // While it is down: every kind of call answers kUnavailable, none crashes.
  EXPECT_EQ(store->Admit(Request(1000)).status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(store->GetExecution(acknowledged.front()).status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(store->Heartbeat(LeaseRef{lease.id, lease.version}, 10).status().code(),
            ErrorCode::kUnavailable);
  EXPECT_EQ(store->Claim(claim).status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(store->SweepExpired(10).status().code(), ErrorCode::kUnavailable);

  // The backoff is by the store's clock: while it does not move, no call
  // tries to reconnect, however much real time passes.
  std::this_thread::sleep_for(std::chrono::milliseconds(250));  // > reconnect_backoff_max
  Status backing_off;
  for (int i = 0; i < 5; ++i) {  // past connections still found broken
    backing_off = store->GetExecution(acknowledged.front()).status();
  }
  EXPECT_EQ(backing_off.code(), ErrorCode::kUnavailable);
  EXPECT_NE(backing_off.message().find("reconnecting in"), std::string::npos)
      << backing_off.ToString();

  ASSERT_TRUE(cluster.Start());
  // The same store object reconnects on its own once its backoff has passed.
  Status last = Unavailable("not tried");
  for (int i = 0; i < 100 && !last.ok(); ++i) {
    clock.Advance(std::chrono::milliseconds(200));  // reconnect_backoff_max
    last = store->GetExecution(acknowledged.front()).status();
    if (!last.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_OK(last);
  // Every acknowledged admission is there; the lease carries on.
  for (ExecutionId id : acknowledged) {
    ASSERT_OK_AND_ASSIGN(Execution e, store->GetExecution(id));
    EXPECT_EQ(e.id, id);
  }
  ASSERT_OK(store->Heartbeat(LeaseRef{lease.id, lease.version}, 50));
  ASSERT_OK(store->Complete(LeaseRef{lease.id, lease.version}, "{}"));
  ASSERT_OK_AND_ASSIGN(AdmitResult again, store->Admit(Request(0)));
  EXPECT_EQ(again.outcome, AdmitOutcome::kDuplicate);
  // Every pooled connection works again (each was replaced after the stop).
  for (int i = 0; i < 10; ++i) ASSERT_OK(store->ListJobs());
  ASSERT_OK_AND_ASSIGN(StoreStats stats, store->GetStats());
  std::int64_t total = 0;
  for (std::int64_t n : stats.totals) total += n;
  ExecutionFilter all;
  all.limit = 1000;
  ASSERT_OK_AND_ASSIGN(ExecutionPage page, store->ListExecutions(all));
  EXPECT_EQ(total, static_cast<std::int64_t>(page.items.size()))
      << "counters were kept in the same transactions as the rows";
}

// D4: a database whose schema is newer than this binary is refused, unchanged.
TEST(PgStoreTest, NewerSchemaIsRefused) {
  Cluster& cluster = SharedCluster();
  ASSERT_TRUE(cluster.started()) << cluster.url();
  FakeClock clock;
  ASSERT_OK_AND_ASSIGN(auto store, OpenPostgresStore(Options(cluster, &clock, "te_newer")));
  ASSERT_OK(store->Migrate());
  ASSERT_OK_AND_ASSIGN(int version, store->SchemaVersion());
  EXPECT_GT(version, 0);
  pg::PgConn admin;
  ASSERT_OK(admin.Connect(cluster.url(), "te_newer"));
  ASSERT_OK(admin.Exec("UPDATE schema_version SET version = " + std::to_string(version + 1)));
  Status s = store->Migrate();
  EXPECT_EQ(s.code(), ErrorCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("newer"), std::string::npos) << s.message();
  ASSERT_OK_AND_ASSIGN(int after, store->SchemaVersion());
  EXPECT_EQ(after, version + 1);
}

// A connection closed and connected again prepares its statements anew: the
// names it prepared on the old session (by address and by text) are gone
// with it, as after a server restart.
TEST(PgStoreTest, ReconnectedConnectionPreparesItsStatementsAgain) {
  Cluster& cluster = SharedCluster();
  ASSERT_TRUE(cluster.started()) << cluster.url();
  pg::PgConn conn;
  static const char* const kByAddress = "SELECT $1::bigint + 1";
  const std::string by_text = "SELECT $1::bigint + 2";
  for (int session = 0; session < 2; ++session) {
    SCOPED_TRACE("session " + std::to_string(session));
    ASSERT_OK(conn.Connect(cluster.url(), ""));
    ASSERT_OK_AND_ASSIGN(pg::PgResult a, conn.Query(kByAddress, pg::Params().Add(40)));
    EXPECT_EQ(a.Int(0, 0), 41);
    ASSERT_OK_AND_ASSIGN(pg::PgResult b, conn.QueryText(by_text, pg::Params().Add(40)));
    EXPECT_EQ(b.Int(0, 0), 42);
    conn.Close();
  }
}

// A transaction's BEGIN goes with its first statement, and writes whose
// result is not read go with the next statement or the COMMIT: one round
// trip each, in order, and a failure anywhere leaves nothing written.
TEST(PgStoreTest, DeferredStatementsShareRoundTripsAndFailTheirTransaction) {
  Cluster& cluster = SharedCluster();
  ASSERT_TRUE(cluster.started()) << cluster.url();
  pg::PgConn conn;
  ASSERT_OK(conn.Connect(cluster.url(), ""));
  ASSERT_OK(conn.Exec("DROP TABLE IF EXISTS deferred_t; CREATE TABLE deferred_t (v bigint)"));
  static const char* const kInsert = "INSERT INTO deferred_t VALUES ($1)";
  static const char* const kInsertDouble = "INSERT INTO deferred_t VALUES ($1 * 2)";
  static const char* const kSum = "SELECT COALESCE(SUM(v), 0)::bigint, COUNT(*) FROM deferred_t";
  static const char* const kDivide = "SELECT 1 / $1::bigint";

  // Two statements new to the connection, and one of them twice, in one
  // pipeline.
  const std::uint64_t before = pg::RoundTripsOnThisThread();
  conn.DeferBegin("BEGIN");
  conn.QueryLater(kInsert, pg::Params().Add(1));
  conn.QueryLater(kInsertDouble, pg::Params().Add(2));
  conn.QueryLater(kInsert, pg::Params().Add(3));
  ASSERT_OK_AND_ASSIGN(pg::PgResult seen, conn.Query(kSum));  // sees its own transaction's rows
  EXPECT_EQ(seen.Int(0, 0), 8);
  conn.QueryLater(kInsert, pg::Params().Add(10));
  ASSERT_OK(conn.Commit());
  EXPECT_EQ(pg::RoundTripsOnThisThread() - before, 2u);
  ASSERT_OK_AND_ASSIGN(pg::PgResult committed, conn.Query(kSum));
  EXPECT_EQ(committed.Int(0, 0), 18);

  // A deferred statement that fails fails the COMMIT sent with it: nothing
  // of the transaction is written, and the connection goes on.
  conn.DeferBegin("BEGIN");
  conn.QueryLater(kInsert, pg::Params().Add(100));
  conn.QueryLater(kDivide, pg::Params().Add(0));
  conn.QueryLater(kInsert, pg::Params().Add(200));
  Status failed = conn.Commit();
  EXPECT_EQ(failed.code(), ErrorCode::kInvalidArgument) << failed.ToString();
  EXPECT_EQ(conn.last_sqlstate(), "22012");
  EXPECT_FALSE(conn.DropDeferredBegin());  // the BEGIN went out
  ASSERT_OK(conn.Exec("ROLLBACK"));
  ASSERT_OK_AND_ASSIGN(pg::PgResult after, conn.Query(kSum));
  EXPECT_EQ(after.Int(0, 0), 18);
  EXPECT_EQ(after.Int(0, 1), 4);

  // A failure in a statement whose result is read: the deferred writes
  // before it were sent with it, the ones after are dropped.
  conn.DeferBegin("BEGIN");
  conn.QueryLater(kInsert, pg::Params().Add(1000));
  EXPECT_EQ(conn.Query(kDivide, pg::Params().Add(0)).status().code(), ErrorCode::kInvalidArgument);
  conn.QueryLater(kInsert, pg::Params().Add(2000));
  EXPECT_FALSE(conn.DropDeferredBegin());
  ASSERT_OK(conn.Exec("ROLLBACK"));
  ASSERT_OK_AND_ASSIGN(pg::PgResult last, conn.Query(kSum));
  EXPECT_EQ(last.Int(0, 0), 18);

  // A BEGIN no statement carried is never sent; committing it sends nothing.
  const std::uint64_t idle = pg::RoundTripsOnThisThread();
  conn.DeferBegin("BEGIN");
  ASSERT_OK(conn.Commit());
  EXPECT_EQ(pg::RoundTripsOnThisThread(), idle);
  ASSERT_OK(conn.Exec("DROP TABLE deferred_t"));
}

// The store's hot transactions take two round trips each (BEGIN with the
// first read, the writes with COMMIT); a batch admission four (the job's
// policy, the ids, the INSERT whose answer tells duplicates, COMMIT).
TEST(PgStoreTest, HotTransactionsTakeFewRoundTrips) {
  Cluster& cluster = SharedCluster();
  ASSERT_TRUE(cluster.started()) << cluster.url();
  FakeClock clock;
  ASSERT_OK_AND_ASSIGN(auto store, OpenPostgresStore(Options(cluster, &clock, "te_trips")));
  ASSERT_OK(store->Migrate());
  ASSERT_OK(store->UpsertJob(Job()));
  ClaimRequest claim;
  claim.worker = WorkerId("w1");
  claim.slots.push_back(QueueSlot{"default", 10});
  // Every pooled connection connected and every statement prepared.
  for (int round = 0; round < 4; ++round) {
    std::vector<AdmitRequest> batch;
    for (int i = 0; i < 10; ++i) batch.push_back(Request(1000 * round + i));
    ASSERT_OK(store->AdmitBatch(batch));
    ASSERT_OK_AND_ASSIGN(std::vector<Lease> leases, store->Claim(claim));
    ASSERT_EQ(leases.size(), 10u);
    const std::vector<LeaseRef> refs = RefsOf(leases);
    for (const Status& s : store->MarkStarted(refs)) ASSERT_OK(s);
    for (const auto& r : store->FinishBatch(SuccessesOf(refs))) ASSERT_OK(r);
  }
  auto trips = [](auto&& call) {
    const std::uint64_t before = pg::RoundTripsOnThisThread();
    call();
    return pg::RoundTripsOnThisThread() - before;
  };
  std::vector<AdmitRequest> batch;
  for (int i = 0; i < 10; ++i) batch.push_back(Request(9000 + i));
  EXPECT_EQ(trips([&] { ASSERT_OK(store->AdmitBatch(batch)); }), 4u);
  std::vector<Lease> leases;
  EXPECT_EQ(trips([&] { ASSERT_OK_AND_ASSIGN(leases, store->Claim(claim)); }), 2u);
  ASSERT_EQ(leases.size(), 10u);
  const std::vector<LeaseRef> refs = RefsOf(leases);
  EXPECT_EQ(trips([&] {
              for (const Status& s : store->MarkStarted(refs)) ASSERT_OK(s);
            }),
            2u);
  EXPECT_EQ(trips([&] {
              for (const auto& r : store->FinishBatch(SuccessesOf(refs))) ASSERT_OK(r);
            }),
            2u);
  // Nothing due: the claim's read, then a COMMIT.
  EXPECT_EQ(trips([&] { ASSERT_OK(store->Claim(claim)); }), 2u);
  ASSERT_OK_AND_ASSIGN(StoreStats stats, store->GetStats());
  EXPECT_EQ(stats.totals[static_cast<int>(ExecutionStatus::kSucceeded)], 50);
}

// Two stores in two schemas of one database see nothing of each other, and
// the tables live in the configured schema (none in public).
TEST(PgStoreTest, SchemasIsolateStores) {
  Cluster& cluster = SharedCluster();
  ASSERT_TRUE(cluster.started()) << cluster.url();
  FakeClock clock;
  ASSERT_OK_AND_ASSIGN(auto a, OpenPostgresStore(Options(cluster, &clock, "te_a")));
  ASSERT_OK_AND_ASSIGN(auto b, OpenPostgresStore(Options(cluster, &clock, "te_b")));
  ASSERT_OK(a->Migrate());
  ASSERT_OK(b->Migrate());
  ASSERT_OK(a->UpsertJob(Job()));
  EXPECT_EQ(b->GetJob(JobName("work")).status().code(), ErrorCode::kNotFound);
  pg::PgConn admin;
  ASSERT_OK(admin.Connect(cluster.url(), ""));
  ASSERT_OK_AND_ASSIGN(pg::PgResult r,
                       admin.Exec("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"));
  EXPECT_EQ(r.Int(0, 0), 0);
  ASSERT_OK_AND_ASSIGN(pg::PgResult t,
                       admin.Exec("SELECT count(*) FROM pg_tables WHERE schemaname = 'te_a'"));
  EXPECT_GT(t.Int(0, 0), 10);
}

// Claims from many threads (each its own store, as nodes would be) never hand
// one execution to two claimers (L1), and every execution is claimed once.
TEST(PgStoreTest, ConcurrentClaimersNeverShareAnExecution) {
  Cluster& cluster = SharedCluster();
  ASSERT_TRUE(cluster.started()) << cluster.url();
  FakeClock clock;
  ASSERT_OK_AND_ASSIGN(auto setup, OpenPostgresStore(Options(cluster, &clock, "te_claimers")));
  ASSERT_OK(setup->Migrate());
  ASSERT_OK(setup->UpsertJob(Job()));
  std::vector<AdmitRequest> batch;
  for (int i = 0; i < 400; ++i) batch.push_back(Request(i));
  ASSERT_OK(setup->AdmitBatch(batch));
  constexpr int kNodes = 4;
  std::vector<std::vector<std::int64_t>> claimed(kNodes);
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::thread> nodes;
  for (int n = 0; n < kNodes; ++n) {
    nodes.emplace_back([&, n] {
      auto store = OpenPostgresStore(Options(cluster, &clock, "te_claimers"));
      if (!store.ok()) {
        ADD_FAILURE() << store.status().ToString();
        return;
      }
      ClaimRequest req;
      req.worker = WorkerId("node" + std::to_string(n));
      req.slots.push_back(QueueSlot{"default", 7});
      for (int empty = 0; empty < 3;) {
        auto leases = (*store)->Claim(req);
        if (!leases.ok()) {
          ADD_FAILURE() << leases.status().ToString();
          return;
        }
        if (leases->empty()) ++empty;
        std::vector<FinishRequest> done;
        for (const Lease& l : *leases) {
          claimed[n].push_back(l.id.value);
          FinishRequest f;
          f.lease = LeaseRef{l.id, l.version};
          done.push_back(f);
        }
        for (const auto& r : (*store)->FinishBatch(done)) {
          if (!r.ok()) ADD_FAILURE() << r.status().ToString();
        }
      }
    });
  }
  for (std::thread& t : nodes) t.join();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - started)
                      .count();
  std::printf("claimed and completed 400 executions on %d stores in %lld ms\n", kNodes,
              static_cast<long long>(ms));
  std::set<std::int64_t> unique;
  std::size_t total = 0;
  for (const auto& ids : claimed) {
    total += ids.size();
    unique.insert(ids.begin(), ids.end());
  }
  EXPECT_EQ(total, 400u);
  EXPECT_EQ(unique.size(), 400u) << "an execution was claimed twice";
  ASSERT_OK_AND_ASSIGN(StoreStats stats, setup->GetStats());
  EXPECT_EQ(stats.totals[static_cast<int>(ExecutionStatus::kSucceeded)], 400);
  EXPECT_EQ(stats.totals[static_cast<int>(ExecutionStatus::kQueued)], 0);
  EXPECT_EQ(stats.totals[static_cast<int>(ExecutionStatus::kRunning)], 0);
}

// A6: an application enqueues inside its own transaction with the SQL
// function in the engine's schema: the execution exists if and only if that
// transaction commits, and it is admitted as Store::Admit would.
TEST(PgStoreTest, TransactionalEnqueueCommitsWithTheApplication) {
  Cluster& cluster = SharedCluster();
  ASSERT_TRUE(cluster.started()) << cluster.url();
  FakeClock clock;
  ASSERT_OK_AND_ASSIGN(auto store, OpenPostgresStore(Options(cluster, &clock, "te_a6")));
  ASSERT_OK(store->Migrate());
  ASSERT_OK(store->UpsertJob(Job()));
  pg::PgConn app;  // the application's own connection, default search_path
  ASSERT_OK(app.Connect(cluster.url(), ""));
  ASSERT_OK(app.Exec("CREATE TABLE orders (id int)"));

  ASSERT_OK(
      app.Exec("BEGIN; INSERT INTO orders VALUES (1);"
               " SELECT te_a6.enqueue('work', '{\"order\":1}', 'order-1')"));
  ASSERT_OK(app.Exec("ROLLBACK"));
  ExecutionFilter all;
  ASSERT_OK_AND_ASSIGN(ExecutionPage none, store->ListExecutions(all));
  EXPECT_TRUE(none.items.empty()) << "a rolled-back enqueue left an execution";

  ASSERT_OK(app.Exec("BEGIN; INSERT INTO orders VALUES (1)"));
  ASSERT_OK_AND_ASSIGN(pg::PgResult r,
                       app.Exec("SELECT te_a6.enqueue('work', '{\"order\":1}', 'order-1')"));
  const ExecutionId id(r.Int(0, 0));
  ASSERT_OK_AND_ASSIGN(ExecutionPage invisible, store->ListExecutions(all));
  EXPECT_TRUE(invisible.items.empty()) << "visible before the application committed";
  ASSERT_OK(app.Exec("COMMIT"));

  ASSERT_OK_AND_ASSIGN(Execution e, store->GetExecution(id));
  EXPECT_EQ(e.status, ExecutionStatus::kQueued);
  EXPECT_EQ(e.idempotency_key, "order-1");
  EXPECT_EQ(e.queue, "default");
  EXPECT_EQ(e.retry.max_attempts, Job().retry.max_attempts);
  // Same key and payload: the same execution; another payload: an error.
  ASSERT_OK_AND_ASSIGN(pg::PgResult again,
                       app.Exec("SELECT te_a6.enqueue('work', '{\"order\": 1}', 'order-1')"));
  EXPECT_EQ(again.Int(0, 0), id.value);
  auto conflict = app.Exec("SELECT te_a6.enqueue('work', '{\"order\":2}', 'order-1')");
  EXPECT_EQ(conflict.status().code(), ErrorCode::kConflict) << conflict.status().ToString();
  EXPECT_EQ(app.Exec("SELECT te_a6.enqueue('nope', '{}')").status().code(),
            ErrorCode::kInvalidArgument);
  // What the dispatcher refuses, enqueue refuses too, and admits nothing.
  JobDefinition per_tenant = Job();
  per_tenant.name = JobName("per-tenant");
  per_tenant.scope = JobScope::kPerTenant;
  per_tenant.queue = "other";  // not claimed below
  ASSERT_OK(store->UpsertJob(per_tenant));
  JobDefinition off = Job();
  off.name = JobName("off");
  off.enabled = false;
  ASSERT_OK(store->UpsertJob(off));
  const std::string big = "{\"x\":\"" + std::string(300 * 1024, 'a') + "\"}";
  for (const std::string& bad :
       {std::string("SELECT te_a6.enqueue('off', '{}')"),
        std::string("SELECT te_a6.enqueue('per-tenant', '{}')"),
        std::string("SELECT te_a6.enqueue('per-tenant', '{}', NULL, 'Bad Tenant!')"),
        std::string("SELECT te_a6.enqueue('work', '{}', NULL, 'acme')"),
        std::string("SELECT te_a6.enqueue('work', '[1]')"),
        "SELECT te_a6.enqueue('work', '" + big + "')"}) {
    auto refused = app.Exec(bad);
    EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument)
        << bad.substr(0, 80) << ": " << refused.status().ToString();
  }
  ASSERT_OK(app.Exec("SELECT te_a6.enqueue('per-tenant', '{}', NULL, 'acme')"));
  // The payload limit is the engine's (A1, [engine] max_payload_bytes): 300
  // KiB passes once the limit is 512 KiB, and fails again at 4 KiB.
  ASSERT_OK(store->SetPayloadLimit(512 * 1024));
  ASSERT_OK(app.Exec("SELECT te_a6.enqueue('per-tenant', '" + big + "', NULL, 'acme')"));
  ASSERT_OK(store->SetPayloadLimit(4096));
  auto over = app.Exec("SELECT te_a6.enqueue('per-tenant', '{\"x\":\"" + std::string(5000, 'a') +
                       "\"}', NULL, 'acme')");
  EXPECT_EQ(over.status().code(), ErrorCode::kInvalidArgument) << over.status().ToString();
  EXPECT_THAT(over.status().message(), ::testing::HasSubstr("more than 4096"));
  // Lanes: a second member waits for the first.
  ASSERT_OK(app.Exec("SELECT te_a6.enqueue('work', '{\"l\":1}', NULL, '', 0, 'lane-a')"));
  ASSERT_OK(app.Exec("SELECT te_a6.enqueue('work', '{\"l\":2}', NULL, '', 0, 'lane-a')"));
  // The store's fake clock may be behind the database's: claim from far ahead.
  clock.Set(std::numeric_limits<Millis>::max() / 4);
  ClaimRequest claim;
  claim.worker = WorkerId("w1");
  claim.slots.push_back(QueueSlot{"default", 10});
  ASSERT_OK_AND_ASSIGN(std::vector<Lease> leases, store->Claim(claim));
  EXPECT_EQ(leases.size(), 2u) << "the order and the lane's head; its second member waits";
  ASSERT_OK_AND_ASSIGN(StoreStats stats, store->GetStats());
  // Queued: the lane's second member and the two per-tenant executions.
  EXPECT_EQ(stats.totals[static_cast<int>(ExecutionStatus::kQueued)], 3);
  EXPECT_EQ(stats.totals[static_cast<int>(ExecutionStatus::kRunning)], 2);
}

// O1 through enqueue() (A6): a lane is (tenant, lane key) there too, and
// enqueue() and the store take the same lane lock.
TEST(PgStoreTest, O1_EnqueueLanesArePerTenant) {
  Cluster& cluster = SharedCluster();
  ASSERT_TRUE(cluster.started()) << cluster.url();
  FakeClock clock;
  ASSERT_OK_AND_ASSIGN(auto store, OpenPostgresStore(Options(cluster, &clock, "te_o1")));
  ASSERT_OK(store->Migrate());
  JobDefinition per_tenant = Job();
  per_tenant.name = JobName("sync");
  per_tenant.scope = JobScope::kPerTenant;
  ASSERT_OK(store->UpsertJob(per_tenant));
  pg::PgConn app;
  ASSERT_OK(app.Connect(cluster.url(), ""));
  ASSERT_OK_AND_ASSIGN(
      pg::PgResult a1,
      app.Exec("SELECT te_o1.enqueue('sync', '{\"n\":1}', NULL, 'a', 0, 'orders')"));
  ASSERT_OK(app.Exec("SELECT te_o1.enqueue('sync', '{\"n\":2}', NULL, 'a', 0, 'orders')"));
  ASSERT_OK_AND_ASSIGN(
      pg::PgResult b1,
      app.Exec("SELECT te_o1.enqueue('sync', '{\"n\":3}', NULL, 'b', 0, 'orders')"));
  clock.Set(std::numeric_limits<Millis>::max() / 4);
  ClaimRequest claim;
  claim.worker = WorkerId("w1");
  claim.slots.push_back(QueueSlot{"default", 10});
  ASSERT_OK_AND_ASSIGN(std::vector<Lease> leases, store->Claim(claim));
  std::set<std::int64_t> ids;
  for (const Lease& l : leases) ids.insert(l.id.value);
  EXPECT_EQ(ids, (std::set<std::int64_t>{a1.Int(0, 0), b1.Int(0, 0)}))
      << "each tenant's head; a's second member waits for a's head only";
  ASSERT_OK_AND_ASSIGN(LaneStatus of_a, store->GetLane(TenantId("a"), "orders"));
  EXPECT_EQ(of_a.queued, 1);
  EXPECT_EQ(of_a.running, 1);
}

// O1, version 6: lanes became (tenant, lane key). A database of version 5
// holds executions parked behind another tenant's member of the same key;
// the migration makes each tenant's oldest open member its lane's head.
TEST(PgStoreTest, O1_MigrationToPerTenantLanesUnparksOtherTenantsHeads) {
  Cluster& cluster = SharedCluster();
  ASSERT_TRUE(cluster.started()) << cluster.url();
  FakeClock clock;
  ASSERT_OK_AND_ASSIGN(auto store, OpenPostgresStore(Options(cluster, &clock, "te_o1m")));
  ASSERT_OK(store->Migrate());
  ASSERT_OK(store->UpsertJob(Job()));
  auto in_lane = [](int i, const std::string& tenant) {
    AdmitRequest r;
    r.job = Job().name;
    r.tenant = TenantId(tenant);
    r.payload_json = "{\"i\":" + std::to_string(i) + "}";
    r.fingerprint = std::string(64, '0' + i);
    r.lane_key = "orders";
    return r;
  };
  ASSERT_OK_AND_ASSIGN(AdmitResult a1, store->Admit(in_lane(1, "a")));
  ASSERT_OK(store->Admit(in_lane(2, "a")).status());
  ASSERT_OK_AND_ASSIGN(AdmitResult b1, store->Admit(in_lane(3, "b")));
  pg::PgConn admin;
  ASSERT_OK(admin.Connect(cluster.url(), "te_o1m"));
  // Back to version 5: one lane per key, so b's member waited behind a's
  // (and no handler_started column, which version 7 adds, nor
  // job_definitions.seed_digest of version 8, the worker columns of version
  // 9, the tenant counters and search indexes of version 10, or the settings
  // of version 11).
  ASSERT_OK(admin.Exec(
      "DROP INDEX executions_by_status; DROP INDEX executions_by_queued_at;"
      " DROP INDEX executions_by_finished_at;"
      " CREATE INDEX executions_attention ON executions (status, id) WHERE status IN (3, 4);"
      " DROP TABLE status_counts; CREATE TABLE status_counts (queue TEXT NOT NULL,"
      " status INTEGER NOT NULL, stripe INTEGER NOT NULL DEFAULT 0, count BIGINT NOT NULL,"
      " PRIMARY KEY (queue, status, stripe));"
      " DROP TABLE hourly_outcomes; CREATE TABLE hourly_outcomes (hour BIGINT NOT NULL,"
      " status INTEGER NOT NULL, stripe INTEGER NOT NULL DEFAULT 0, count BIGINT NOT NULL,"
      " PRIMARY KEY (hour, status, stripe))"));
  ASSERT_OK(
      admin.Exec("ALTER TABLE executions DROP COLUMN handler_started;"
                 "ALTER TABLE job_definitions DROP COLUMN seed_digest;"
                 "ALTER TABLE workers DROP COLUMN kind, DROP COLUMN threads, DROP COLUMN busy,"
                 " DROP COLUMN current_executions; DROP TABLE settings;"
                 " ALTER TABLE job_definitions DROP COLUMN notify_on_failure,"
                 " DROP COLUMN notify_targets; DROP TABLE notify_outbox; DROP TABLE notify_state;"
                 " DROP INDEX executions_lane_open; CREATE INDEX executions_lane_open ON executions"
                 " (lane_key, id) WHERE lane_key <> '' AND status IN (0, 1, 3, 4);"
                 " UPDATE executions SET lane_parked = 1 WHERE id = " +
                 std::to_string(b1.id.value) + "; UPDATE schema_version SET version = 5"));
  ASSERT_OK(store->Migrate());
  ASSERT_OK_AND_ASSIGN(int version, store->SchemaVersion());
  EXPECT_EQ(version, pg::kSchemaVersion);
  ClaimRequest claim;
  claim.worker = WorkerId("w1");
  claim.slots.push_back(QueueSlot{"default", 10});
  ASSERT_OK_AND_ASSIGN(std::vector<Lease> leases, store->Claim(claim));
  std::set<std::int64_t> ids;
  for (const Lease& l : leases) ids.insert(l.id.value);
  EXPECT_EQ(ids, (std::set<std::int64_t>{a1.id.value, b1.id.value})) << "a's second waits";
}

// The plan PostgreSQL would run `sql` with (EXPLAIN), one line per row.
Result<std::string> Explain(pg::PgConn& conn, const std::string& sql) {
  TE_ASSIGN_OR_RETURN(pg::PgResult plan, conn.Exec("EXPLAIN " + sql));
  std::string text;
  for (int r = 0; r < plan.rows(); ++r) text += plan.Text(r, 0) + "\n";
  return text;
}

// "Next due of queue Q" and "expired leases" are index seeks at any depth:
// the plans of the claim's and the sweep's predicates use the partial indexes.
TEST(PgStoreTest, ClaimAndSweepPredicatesUseTheirIndexes) {
  Cluster& cluster = SharedCluster();
  ASSERT_TRUE(cluster.started()) << cluster.url();
  FakeClock clock;
  ASSERT_OK_AND_ASSIGN(auto store, OpenPostgresStore(Options(cluster, &clock, "te_plans")));
  ASSERT_OK(store->Migrate());
  for (const char* queue : {"q1", "q2", "q3"}) {
    JobDefinition j = Job();
    j.name = JobName(std::string("job-") + queue);
    j.queue = queue;
    ASSERT_OK(store->UpsertJob(j));
    std::vector<AdmitRequest> batch;
    for (int i = 0; i < 2000; ++i) {
      AdmitRequest r = Request(i);
      r.job = j.name;
      batch.push_back(r);
    }
    ASSERT_OK(store->AdmitBatch(batch));
  }
  ClaimRequest claim;
  claim.worker = WorkerId("w1");
  claim.slots.push_back(QueueSlot{"q2", 500});
  ASSERT_OK(store->Claim(claim));
  pg::PgConn admin;
  ASSERT_OK(admin.Connect(cluster.url(), "te_plans"));
  ASSERT_OK(admin.Exec("ANALYZE executions"));
  ASSERT_OK_AND_ASSIGN(
      std::string plan,
      Explain(admin,
              "SELECT id FROM executions WHERE queue = 'q1' AND status = 0"
              " AND lane_parked = 0 AND run_at <= 9000000000000 ORDER BY run_at, id"
              " LIMIT 10 FOR UPDATE SKIP LOCKED"));
  EXPECT_NE(plan.find("executions_due"), std::string::npos) << plan;
  ASSERT_OK_AND_ASSIGN(plan,
                       Explain(admin,
                               "SELECT id FROM executions WHERE status = 1 AND lease_expires_at < 5"
                               " ORDER BY lease_expires_at LIMIT 500 FOR UPDATE SKIP LOCKED"));
  EXPECT_NE(plan.find("executions_leases"), std::string::npos) << plan;
}

// A short measurement (not a benchmark): admit in batches of 1,000, then
// claim batches of 100 and complete each batch with one FinishBatch, on one
// store. Prints the rates; asserts only that every execution succeeded.
TEST(PgStoreTest, BatchedAdmitClaimCompleteRates) {
  Cluster& cluster = SharedCluster();
  ASSERT_TRUE(cluster.started()) << cluster.url();
  FakeClock clock;
  ASSERT_OK_AND_ASSIGN(auto store, OpenPostgresStore(Options(cluster, &clock, "te_rates")));
  ASSERT_OK(store->Migrate());
  ASSERT_OK(store->UpsertJob(Job()));
  constexpr int kJobs = 5000;
  const auto t0 = std::chrono::steady_clock::now();
  for (int base = 0; base < kJobs; base += 1000) {
    std::vector<AdmitRequest> batch;
    for (int i = base; i < base + 1000; ++i) batch.push_back(Request(i));
    ASSERT_OK(store->AdmitBatch(batch));
  }
  const auto t1 = std::chrono::steady_clock::now();
  ClaimRequest claim;
  claim.worker = WorkerId("w1");
  claim.slots.push_back(QueueSlot{"default", 100});
  int done = 0;
  while (true) {
    ASSERT_OK_AND_ASSIGN(std::vector<Lease> leases, store->Claim(claim));
    if (leases.empty()) break;
    std::vector<FinishRequest> finish;
    for (const Lease& l : leases) {
      FinishRequest f;
      f.lease = LeaseRef{l.id, l.version};
      finish.push_back(f);
    }
    for (const auto& r : store->FinishBatch(finish)) ASSERT_OK(r);
    done += static_cast<int>(leases.size());
  }
  const auto t2 = std::chrono::steady_clock::now();
  EXPECT_EQ(done, kJobs);
  auto per_second = [](int n, auto d) {
    return n * 1000.0 / std::max<double>(1.0, std::chrono::duration<double, std::milli>(d).count());
  };
  std::printf(
      "PostgreSQL store, one connection at a time: admit %.0f/s (batches of 1000), "
      "claim+complete %.0f/s (batches of 100)\n",
      per_second(kJobs, t1 - t0), per_second(kJobs, t2 - t1));
  ASSERT_OK_AND_ASSIGN(StoreStats stats, store->GetStats());
  EXPECT_EQ(stats.totals[static_cast<int>(ExecutionStatus::kSucceeded)], kJobs);
}

// A3: a store's work listener hears work made due through ANOTHER store
// object (another node): admissions, a retryable failure's requeue and the
// SQL enqueue function; not claims or successes; and after a server restart
// it is called once (notifications may have been missed) and hears again.
TEST(PgStoreTest, WorkListenerHearsOtherStoresAcrossARestart) {
  Cluster& cluster = SharedCluster();
  ASSERT_TRUE(cluster.started()) << cluster.url();
  FakeClock clock;
  ASSERT_OK_AND_ASSIGN(auto a, OpenPostgresStore(Options(cluster, &clock, "te_wake")));
  ASSERT_OK_AND_ASSIGN(auto b, OpenPostgresStore(Options(cluster, &clock, "te_wake")));
  ASSERT_OK(a->Migrate());
  ASSERT_OK(a->UpsertJob(Job()));
  std::atomic<int> calls{0};
  a->SetWorkListener([&] { ++calls; });

  int next = 0;
  // Repeats `act` until a's listener has been called more than `before`
  // times (the LISTEN connection starts asynchronously), for at most 10 s.
  auto heard_after = [&](int before, const std::function<void()>& act) {
    for (int i = 0; i < 200; ++i) {
      act();
      for (int j = 0; j < 5; ++j) {
        if (calls.load() > before) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    return false;
  };
  auto admit = [&] { (void)b->Admit(Request(next++)); };
  auto quiet = [&] {  // waits until no call arrived for 300 ms; returns the count
    int n = calls.load();
    for (int i = 0; i < 50; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      if (calls.load() == n) return n;
      n = calls.load();
    }
    return n;
  };

  EXPECT_TRUE(heard_after(0, admit)) << "an admission by another store was not heard";
  admit();
  admit();  // at least two to claim below
  int n = quiet();

  // A claim and a success make nothing due: no wakeup.
  ClaimRequest claim;
  claim.worker = WorkerId("w1");
  claim.slots.push_back(QueueSlot{"default", 2});
  ASSERT_OK_AND_ASSIGN(std::vector<Lease> leases, b->Claim(claim));
  ASSERT_EQ(leases.size(), 2u);
  ASSERT_OK(b->Complete(LeaseRef{leases[0].id, leases[0].version}, "{}"));
  EXPECT_EQ(quiet(), n) << "a claim or a success woke the listener";

  // A retryable failure requeues: heard.
  ASSERT_OK(b->Fail(LeaseRef{leases[1].id, leases[1].version}, FailureClass::kRetryable, "boom"));
  for (int i = 0; i < 100 && calls.load() == n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GT(calls.load(), n) << "a requeue was not heard";
  n = quiet();

  // A6: an application's enqueue, at its commit.
  pg::PgConn app;
  ASSERT_OK(app.Connect(cluster.url(), ""));
  ASSERT_OK(app.Exec("BEGIN; SELECT te_wake.enqueue('work', '{\"sql\":1}')"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(calls.load(), n) << "heard before the application committed";
  ASSERT_OK(app.Exec("COMMIT"));
  for (int i = 0; i < 100 && calls.load() == n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GT(calls.load(), n) << "the SQL enqueue was not heard";
  app.Close();
  n = quiet();

  // A restart: the LISTEN connection comes back by itself, calls the
  // listener once for what it may have missed, and hears again.
  ASSERT_TRUE(cluster.StopImmediate());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(cluster.Start());
  for (int i = 0; i < 500 && calls.load() == n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GT(calls.load(), n) << "no catch-up call after the reconnect";
  n = quiet();
  EXPECT_TRUE(heard_after(n, admit)) << "not heard after the restart";

  // Without a listener nothing is called (and replacing it waited for any call).
  a->SetWorkListener(nullptr);
  n = calls.load();
  for (int i = 0; i < 3; ++i) admit();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(calls.load(), n);
}

// DatabaseClock follows the server's clock: its time is within a second of
// clock_timestamp() read over another connection.
TEST(PgStoreTest, DatabaseClockFollowsTheServer) {
  Cluster& cluster = SharedCluster();
  ASSERT_TRUE(cluster.started()) << cluster.url();
  ASSERT_OK_AND_ASSIGN(auto clock, OpenPostgresClock(cluster.url(), std::chrono::milliseconds(50)));
  pg::PgConn conn;
  ASSERT_OK(conn.Connect(cluster.url(), ""));
  ASSERT_OK_AND_ASSIGN(pg::PgResult r,
                       conn.Exec("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"));
  const Millis db = r.Int(0, 0);
  EXPECT_LT(std::llabs(clock->NowMillis() - db), 1000);
  ASSERT_OK(clock->Resample());
  std::this_thread::sleep_for(std::chrono::milliseconds(120));  // the sampler runs meanwhile
  const Millis a = clock->NowMillis();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GE(clock->NowMillis(), a);
  EXPECT_FALSE(OpenPostgresClock("postgres://postgres@127.0.0.1:1/none?connect_timeout=2").ok());
}

// Migrates a fresh `schema` (a store opened and closed) and connects `conn`
// to it; for tests that read the schema or plans with their own connection.
void MigrateAndConnect(const Cluster& cluster, const std::string& schema, pg::PgConn& conn) {
  FakeClock clock;
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenPostgresStore(Options(cluster, &clock, schema)));
    ASSERT_OK(store->Migrate());
  }
  ASSERT_OK(conn.Connect(cluster.url(), schema));
}

// I1: every common combination of search criteria is served by an index,
// never a sequential scan of the executions (EXPLAIN of the statements the
// store builds, with sequential scans priced out so that any usable index
// shows; the planner falls back to one only when no index applies).
TEST(PgStoreTest, I1_SearchCombinationsUseAnIndex) {
  Cluster& cluster = SharedCluster();
  ASSERT_TRUE(cluster.started()) << cluster.url();
  pg::PgConn conn;
  ASSERT_NO_FATAL_FAILURE(MigrateAndConnect(cluster, "te_search_plans", conn));
  ASSERT_OK(conn.Exec("SET enable_seqscan = off"));
  std::vector<std::pair<const char*, ExecutionFilter>> combinations;
  auto add = [&](const char* name, auto set) {
    ExecutionFilter f;
    set(f);
    combinations.emplace_back(name, f);
  };
  add("job", [](ExecutionFilter& f) { f.job = JobName("a"); });
  add("tenant", [](ExecutionFilter& f) { f.tenant = TenantId("t1"); });
  add("status", [](ExecutionFilter& f) { f.status = ExecutionStatus::kSucceeded; });
  add("job+status", [](ExecutionFilter& f) {
    f.job = JobName("a");
    f.status = ExecutionStatus::kFailed;
  });
  add("tenant+status", [](ExecutionFilter& f) {
    f.tenant = TenantId("t1");
    f.status = ExecutionStatus::kQueued;
  });
  add("job+trigger", [](ExecutionFilter& f) {
    f.job = JobName("a");
    f.triggers = {Trigger::kRetry};
  });
  add("queued range", [](ExecutionFilter& f) {
    f.queued_from = 1000;
    f.queued_to = 2000;
  });
  add("ended range", [](ExecutionFilter& f) {
    f.ended_from = 1000;
    f.ended_to = 2000;
  });
  add("trigger+cursor", [](ExecutionFilter& f) {
    f.triggers = {Trigger::kScheduled};
    f.before = ExecutionId(500);
  });
  add("running", [](ExecutionFilter& f) { f.status = ExecutionStatus::kRunning; });
  add("queued+running", [](ExecutionFilter& f) {
    f.statuses = {ExecutionStatus::kQueued, ExecutionStatus::kRunning};
  });
  add("job+running+cursor", [](ExecutionFilter& f) {
    f.job = JobName("a");
    f.status = ExecutionStatus::kRunning;
    f.before = ExecutionId(500);
  });
  // Version 14: the searches by job or queue time and no status read every
  // status but running from these indexes (and running executions apart).
  const std::map<std::string, std::string> not_running_index = {
      {"job", "executions_by_job"},
      {"job+trigger", "executions_by_job"},
      {"queued range", "executions_by_queued_at"}};
  for (const auto& [name, filter] : combinations) {
    const std::vector<storage_internal::ListPart> parts =
        storage_internal::PlanListParts(filter, pg::kListIndexing);
    const auto expected = not_running_index.find(name);
    if (expected != not_running_index.end()) {
      EXPECT_EQ(parts.size(), 2u) << name;
    }
    for (bool count_only : {false, true}) {
      for (const storage_internal::ListPart& part : parts) {
        storage_internal::ListSql q = storage_internal::BuildListSql(
            filter, part, "*", 51, count_only, '$', pg::kListIndexing);
        // The arguments as literals, the highest number first ($10 before $1).
        std::string sql = q.sql;
        for (std::size_t i = q.args.size(); i > 0; --i) {
          const storage_internal::ListArg& a = q.args[i - 1];
          const std::string literal = a.is_text ? "'" + a.text + "'" : std::to_string(a.number);
          const std::string placeholder = "$" + std::to_string(i);
          for (auto at = sql.find(placeholder); at != std::string::npos;
               at = sql.find(placeholder, at + literal.size())) {
            sql.replace(at, placeholder.size(), literal);
          }
        }
        ASSERT_OK_AND_ASSIGN(std::string text, Explain(conn, sql));
        EXPECT_EQ(text.find("Seq Scan"), std::string::npos)
            << name << (count_only ? " (count)" : "") << ": " << sql << "\n"
            << text;
        EXPECT_NE(text.find("Index"), std::string::npos) << name << ": " << text;
        if (part.not_running) {
          ASSERT_NE(expected, not_running_index.end()) << name;
          EXPECT_NE(text.find(expected->second), std::string::npos) << name << ": " << text;
        }
      }
    }
  }
  // Deleting a job counts its open executions the same way (the dialect's
  // statement, its ?1 the job).
  std::string count = storage_internal::kPostgresDialect.count_open_of_job;
  for (auto at = count.find("?1"); at != std::string::npos; at = count.find("?1", at)) {
    count.replace(at, 2, "'a'");
  }
  ASSERT_OK_AND_ASSIGN(std::string text, Explain(conn, count));
  EXPECT_EQ(text.find("Seq Scan"), std::string::npos) << text;
  EXPECT_NE(text.find("executions_by_job"), std::string::npos) << text;
  EXPECT_NE(text.find("executions_leases"), std::string::npos) << text;
}

// Version 14: the indexes of statuses, jobs and queue times hold no running
// execution, so a claim's update (never HOT) writes no entry in them: a
// partial index takes an entry only for a row that meets its condition.
TEST(PgStoreTest, JobAndTimeIndexesLeaveRunningExecutionsOut) {
  Cluster& cluster = SharedCluster();
  ASSERT_TRUE(cluster.started()) << cluster.url();
  pg::PgConn conn;
  ASSERT_NO_FATAL_FAILURE(MigrateAndConnect(cluster, "te_running_indexes", conn));
  ASSERT_OK_AND_ASSIGN(
      pg::PgResult r,
      conn.Exec("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'executions'"
                " AND schemaname = 'te_running_indexes' ORDER BY indexname"));
  std::map<std::string, std::string> defs;
  for (int i = 0; i < r.rows(); ++i) defs[r.Text(i, 0)] = r.Text(i, 1);
  for (const char* name :
       {"executions_by_job", "executions_by_queued_at", "executions_by_status"}) {
    ASSERT_TRUE(defs.count(name)) << name;
    EXPECT_NE(defs[name].find("WHERE (status <> 1)"), std::string::npos) << defs[name];
  }
}

}  // namespace
}  // namespace taskengine
