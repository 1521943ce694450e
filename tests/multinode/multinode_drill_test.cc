// Multi-node operation on PostgreSQL (D2; issue #6): three `taskengine serve`
// processes share one database and run TASKENGINE_MULTINODE_JOBS `work`
// executions (default 800 in CI: each job starts a shell and two `taskengine`
// CLI processes, about 7 jobs/s on this 2-core machine in a Debug build; the
// full 20,000 by setting the variable, run manually)
// whose command performs a countable effect through the effect ledger, plus a
// cron job firing every minute. One node is killed with SIGKILL mid-run and
// restarted. Afterwards:
//   L  every acknowledged dispatch exists once and is terminal;
//   D  no effect happened twice (effects file vs ledger);
//   S  sampled throughout: nothing `running` past its lease plus one sweep
//      interval (plus 1 s of scheduling slack on this shared 2-core machine);
//   C  at most one `tick` execution per fire minute, and it fired.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "multinode_support.h"

namespace taskengine::testing {
namespace {

int JobCount() {
  const char* v = std::getenv("TASKENGINE_MULTINODE_JOBS");
  if (v != nullptr && std::atoi(v) > 0) return std::atoi(v);
  return 800;
}

TEST(MultinodeDrillTest, ThreeNodesOneKilledKeepLDSC) {
  if (std::string why = PgUnavailableReason(); !why.empty()) GTEST_SKIP() << why;
  PgCluster pg;
  const std::string url = pg.Start();
  ASSERT_FALSE(url.empty());

  DrillFiles files;
  NodeConfig nc;
  nc.url = url;
  nc.cron = true;
  TempDir work;
  const std::string config = work.File("taskengine.toml");
  std::ofstream(config) << NodeToml(nc, files);

  // `taskengine migrate` on PostgreSQL, once, before the nodes start.
  ProcessResult migrate = RunProcess({TASKENGINE_BIN, "--config", config, "migrate"}, "",
                                     std::chrono::seconds(60), ChildEnvironment(), work.path().string());
  ASSERT_EQ(migrate.exit_code, 0) << migrate.Describe();
  EXPECT_THAT(migrate.out, ::testing::HasSubstr("postgresql postgres://"));

  std::vector<std::unique_ptr<Node>> nodes;
  for (int i = 0; i < 3; ++i) {
    nodes.push_back(std::make_unique<Node>(config, work.File("node" + std::to_string(i) + ".log"),
                                           work.path().string()));
    nodes.back()->Start();
  }
  for (auto& n : nodes) ASSERT_TRUE(n->WaitServing(std::chrono::seconds(30))) << n->log();
  EXPECT_THAT(nodes[0]->log(), ::testing::HasSubstr("database postgresql"));
  const auto t0 = std::chrono::steady_clock::now();

  // S, sampled every 250 ms until the end.
  std::atomic<bool> stop_sampler{false};
  std::atomic<long long> worst{0};
  const long long slack = nc.sweep_ms + 1000;
  std::thread sampler([&] {
    while (!stop_sampler) {
      ProcessResult r = RunProcess(
          {kPsql, url, "-Atqc",
           std::string("SELECT count(*) FROM taskengine.executions WHERE status = 1 AND "
                       "lease_expires_at < ") +
               kDbNowMs + " - " + std::to_string(slack)},
          "", std::chrono::seconds(30));
      if (r.exit_code == 0) {
        long long n = std::atoll(r.out.c_str());
        if (n > worst) worst = n;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  });

  const int count = JobCount();
  std::vector<std::int64_t> ids = DispatchWork(url, count);
  ASSERT_EQ(static_cast<int>(ids.size()), count);
  std::cout << "[ measure ] dispatched " << count << " in " << MillisSince(t0) << " ms" << std::endl;

  // Kill -9 node 1 once about a third of the work is done, restart it 1 s later.
  const std::string done_sql = "SELECT count(*) FROM taskengine.executions WHERE job = 'work' AND "
                               "status NOT IN (0, 1)";
  EXPECT_TRUE(WaitUntil(
      std::chrono::seconds(120), [&] { return SqlInt(url, done_sql) >= count / 3; },
      std::chrono::milliseconds(250)));
  nodes[1]->Kill9();
  std::cout << "[ measure ] killed node 1 at " << SqlInt(url, done_sql) << " done" << std::endl;
  std::this_thread::sleep_for(std::chrono::seconds(1));
  nodes[1]->Start();
  ASSERT_TRUE(nodes[1]->WaitServing(std::chrono::seconds(30))) << nodes[1]->log();

  const bool drained = WaitWorkTerminal(url, std::chrono::seconds(600));
  const long long run_ms = MillisSince(t0);
  std::cout << "[ measure ] " << count << " jobs on 3 nodes (4 workers each), one kill -9: " << run_ms
            << " ms, " << (count * 1000LL / std::max(1LL, run_ms)) << " jobs/s" << std::endl;
  EXPECT_TRUE(drained) << StatusCounts(url, "work");

  // C: the cron job fired (a minute boundary passes within 70 s of start).
  EXPECT_TRUE(WaitUntil(
      std::chrono::seconds(75),
      [&] { return SqlInt(url, "SELECT count(*) FROM taskengine.executions WHERE job = 'tick'") >= 1; },
      std::chrono::milliseconds(500)))
      << "the per-minute cron job never fired";
  stop_sampler = true;
  sampler.join();
  for (auto& n : nodes) EXPECT_TRUE(n->Alive()) << "a node died: " << n->log();
  for (auto& n : nodes) n->Stop();

  EXPECT_EQ(worst.load(), 0) << "S: executions running past lease + " << slack << " ms";
  ExpectLAndD(url, files, ids);
  EXPECT_EQ(SqlInt(url, "SELECT count(*) FROM (SELECT idempotency_key FROM taskengine.executions "
                        "WHERE job = 'tick' GROUP BY idempotency_key HAVING count(*) > 1) d"),
            0)
      << "C: a fire minute has two executions: "
      << Sql(url, "SELECT idempotency_key FROM taskengine.executions WHERE job = 'tick'");
  EXPECT_EQ(SqlInt(url, "SELECT count(*) FROM taskengine.executions WHERE job = 'tick' AND "
                        "idempotency_key IS NULL"),
            0);
  std::cout << "[ measure ] cron fires: "
            << Sql(url, "SELECT string_agg(idempotency_key, ', ') FROM taskengine.executions WHERE "
                        "job = 'tick'")
            << std::endl;
}

}  // namespace
}  // namespace taskengine::testing
