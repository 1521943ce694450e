// A node stalled past its leases claims the same executions again (L2, L3,
// L4; issue 12, finding 3). PostgreSQL, two real `taskengine serve` nodes on
// one database: node A runs the `work` jobs with one worker thread; node B
// has no worker thread and only sweeps. A is SIGSTOPped while it holds
// leases (one running, others prefetched) for longer than the lease; B's
// sweeper recovers them; A resumes and claims the same executions again,
// under new claim versions. A must track its leases by (execution, claim
// version): drop the stale ones at once and heartbeat the new ones. Then
// only the lease that was running when A stopped expired (one counted
// expiry), every other lease is kept alive, and every job succeeds with its
// effect exactly once — none ends quarantined as poison on a healthy node.
#include <gtest/gtest.h>
#include <signal.h>

#include "multinode_support.h"

namespace taskengine::testing {
namespace {

constexpr int kJobs = 12;
constexpr int kLeaseMs = 3000;

TEST(ReclaimDrill, StalledNodeReclaimsItsExecutionsAndKeepsTheNewLeasesAlive) {
  if (std::string why = PgUnavailableReason(); !why.empty()) GTEST_SKIP() << why;
  PgCluster pg;
  const std::string url = pg.Start();
  ASSERT_FALSE(url.empty());
  DrillFiles files;
  NodeConfig a_config;
  a_config.url = url;
  a_config.workers = 1;
  a_config.lease_ms = kLeaseMs;
  a_config.work_keys = "timeout_ms = 30000\n";
  NodeConfig b_config = a_config;
  b_config.workers = 0;  // B only sweeps (and serves the API)
  TempDir work;
  const std::string config_a = work.File("a.toml");
  const std::string config_b = work.File("b.toml");
  // The work job's script (the same in both configs, which both seed the
  // definition): record the start, wait for the test's go, perform the
  // countable effect `notice` (drill_support.h), exit 0. The go comes only
  // after B recovered A's leases: the handler that ran at the stall then
  // reserves under a claim version that is no longer current (`stale`) and
  // performs nothing. Without the wait its child (which SIGSTOP does not
  // stop) could reserve while the lease still held and commit after B took
  // it back: a commit that must be refused, leaving a reservation that is
  // rightly `ambiguous` on the next attempt (E1, E3) — a different drill.
  auto toml = [&](const NodeConfig& c) {
    std::string t = NodeToml(c, files, "exit 0\n");
    const std::string marker = "'''\n";
    const std::size_t at = t.find(marker);
    EXPECT_NE(at, std::string::npos);
    if (at != std::string::npos) t.insert(at + marker.size(), StartLine(files) + WaitForGo(files));
    return t;
  };
  std::ofstream(config_a) << toml(a_config);
  std::ofstream(config_b) << toml(b_config);
  ProcessResult migrate =
      RunProcess({TASKENGINE_BIN, "--config", config_a, "migrate"}, "", std::chrono::seconds(60),
                 ChildEnvironment(), work.path().string());
  ASSERT_EQ(migrate.exit_code, 0) << migrate.Describe();
  const std::vector<std::int64_t> ids = DispatchWork(url, kJobs);
  ASSERT_EQ(ids.size(), static_cast<std::size_t>(kJobs));

  Node a(config_a, work.File("a.log"), work.path().string());
  Node b(config_b, work.File("b.log"), work.path().string());
  a.Start();
  b.Start();
  ASSERT_TRUE(a.WaitServing(std::chrono::seconds(30))) << a.log();
  ASSERT_TRUE(b.WaitServing(std::chrono::seconds(30))) << b.log();

  // A runs its first job (and holds others): stall it past the lease.
  ASSERT_TRUE(WaitUntil(std::chrono::seconds(30), [&] {
    return !ReadLines(files.started()).empty();
  })) << a.log();
  ASSERT_EQ(kill(a.pid(), SIGSTOP), 0);
  const long long held = SqlInt(url, "SELECT count(*) FROM taskengine.executions WHERE status = 1");
  EXPECT_GE(held, 1) << "A holds leases when it stalls";
  // B recovers them once they expired (lease + a few sweeps).
  const bool recovered = WaitUntil(
      std::chrono::seconds(30),
      [&] {
        return SqlInt(url, "SELECT count(*) FROM taskengine.executions WHERE status = 1") == 0;
      },
      std::chrono::milliseconds(200));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  files.GoAll();
  ASSERT_EQ(kill(a.pid(), SIGCONT), 0);
  ASSERT_TRUE(recovered) << "B's sweeper did not recover A's leases";

  // A resumes, claims the same executions again and runs everything.
  const bool done = WaitWorkTerminal(url, std::chrono::seconds(120));
  EXPECT_TRUE(done) << StatusCounts(url, "work") << "\nA:\n" << a.log() << "\nB:\n" << b.log();
  EXPECT_TRUE(a.Alive()) << a.log();

  // Every job succeeded, its effect exactly once (L, D).
  ExpectLAndD(url, files, ids);
  const std::string range = IdRange(ids);
  EXPECT_EQ(
      SqlInt(url, "SELECT count(*) FROM taskengine.executions WHERE " + range + " AND status = 2"),
      kJobs)
      << StatusCounts(url, "work");
  EXPECT_EQ(
      SqlInt(url, "SELECT count(*) FROM taskengine.executions WHERE " + range + " AND status = 4"),
      0)
      << "quarantined on a healthy node";
  // Only the lease whose handler ran when A stalled expired as a counted
  // attempt; the prefetched ones were requeued free, and no lease of the
  // executions A claimed again lapsed.
  const long long counted =
      SqlInt(url,
             "SELECT count(*) FROM taskengine.execution_attempts WHERE failure_class = 4 AND "
             "execution_id BETWEEN " +
                 std::to_string(ids.front()) + " AND " + std::to_string(ids.back()));
  EXPECT_LE(counted, 1) << Sql(url,
                               "SELECT execution_id, attempt, claim_version, released, error FROM "
                               "taskengine.execution_attempts ORDER BY 1, 3");
  // S: nothing is left running past its lease.
  EXPECT_EQ(RunningPastLease(url, 1000), 0);
  std::cout << "[ measure ] reclaim drill: " << held << " leases held at the stall, " << counted
            << " counted expiries; " << StatusCounts(url, "work") << std::endl;
  a.Stop();
  b.Stop();
}

}  // namespace
}  // namespace taskengine::testing
