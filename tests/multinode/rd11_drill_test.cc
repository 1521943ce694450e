// RD11 (quality.md §2; issue #17): PostgreSQL stopped with `pg_ctl stop -m
// immediate`, and MariaDB killed with SIGKILL, then restarted during load.
// The serve nodes are NOT restarted: they must reconnect on their own;
// afterwards L, D and S hold.
//
// Clock drill ("drill 8 of the clock", issue #6): a node run under
// `faketime -f +10m` must not steal the live leases a normal node holds,
// because every node judges leases by the database's clock (DatabaseClock),
// not by its own wall clock.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <set>
#include <sstream>
#include <thread>

#include "multinode_support.h"

namespace taskengine::testing {
namespace {

// libfaketime of the Debian package faketime, preloaded directly (the
// `faketime` wrapper forks, and would leave serve behind when signalled).
constexpr const char* kFaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

int JobCount() {
  const char* v = std::getenv("TASKENGINE_RD11_JOBS");
  if (v != nullptr && std::atoi(v) > 0) return std::atoi(v);
  return 400;
}

// Samples S every 250 ms: the most executions seen running past their lease
// plus `slack_ms` (by the database's clock). Failed probes (the server is
// down) are skipped.
class LeaseSampler {
 public:
  LeaseSampler(std::string url, long long slack_ms) : url_(std::move(url)), slack_ms_(slack_ms) {
    thread_ = std::thread([this] {
      while (!stop_) {
        ProcessResult r = RunProcess(SqlArgv(url_,
                                             "SELECT count(*) FROM taskengine.executions WHERE "
                                             "status = 1 AND lease_expires_at < " +
                                                 DbNowMs(url_) + " - " + std::to_string(slack_ms_)),
                                     "", std::chrono::seconds(30));
        if (r.exit_code == 0 && !paused_) {
          long long n = std::atoll(r.out.c_str());
          if (n > worst_) worst_ = n;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
      }
    });
  }
  ~LeaseSampler() { Finish(); }
  // While the server is down nothing can heartbeat or sweep; the sampler
  // ignores the moments around the outage (the caller says when).
  void Pause(bool paused) { paused_ = paused; }
  long long Finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return worst_;
  }

 private:
  const std::string url_;
  const long long slack_ms_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> paused_{false};
  std::atomic<long long> worst_{0};
  std::thread thread_;
};

// RD11 on `db`: the server dies at once (PostgreSQL: pg_ctl stop -m
// immediate; MariaDB: kill -9 of mariadbd) while two nodes work, and comes
// back 2 s later on the same port.
void RunRd11(DbKind db) {
  if (std::string why = DbUnavailableReason(db); !why.empty()) GTEST_SKIP() << why;
  DbServer pg(db);
  const std::string url = pg.Start();
  ASSERT_FALSE(url.empty());

  DrillFiles files;
  NodeConfig nc;
  nc.url = url;
  nc.lease_ms = 5000;
  TempDir work;
  const std::string config = work.File("taskengine.toml");
  std::ofstream(config) << NodeToml(nc, files);
  ProcessResult migrate =
      RunProcess({TASKENGINE_BIN, "--config", config, "migrate"}, "", std::chrono::seconds(60),
                 ChildEnvironment(), work.path().string());
  ASSERT_EQ(migrate.exit_code, 0) << migrate.Describe();

  std::vector<std::unique_ptr<Node>> nodes;
  for (int i = 0; i < 2; ++i) {
    nodes.push_back(std::make_unique<Node>(config, work.File("node" + std::to_string(i) + ".log"),
                                           work.path().string()));
    nodes.back()->Start();
  }
  for (auto& n : nodes) ASSERT_TRUE(n->WaitServing(std::chrono::seconds(30))) << n->log();

  LeaseSampler sampler(url, nc.sweep_ms + 1000);
  const int count = JobCount();
  std::vector<std::int64_t> ids = DispatchWork(url, count, 250);
  ASSERT_EQ(static_cast<int>(ids.size()), count);

  const std::string done_sql =
      "SELECT count(*) FROM taskengine.executions WHERE job = 'work' AND "
      "status NOT IN (0, 1)";
  EXPECT_TRUE(WaitUntil(
      std::chrono::seconds(120), [&] { return SqlInt(url, done_sql) >= count / 4; },
      std::chrono::milliseconds(250)));
  sampler.Pause(true);
  const auto down_at = std::chrono::steady_clock::now();
  pg.StopImmediate();
  std::cout << "[ measure ] " << DbName(db) << " died (crash stop)" << std::endl;
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ASSERT_EQ(pg.Start(), url) << "the server came back on another port";
  std::cout << "[ measure ] " << DbName(db) << " back after " << MillisSince(down_at) << " ms"
            << std::endl;
  for (auto& n : nodes)
    EXPECT_TRUE(n->Alive()) << "serve exited while the database was down: " << n->log();
  // Leases that ran out while nothing could reach the database are swept at
  // the next sweep after reconnection: judge S again from one lease later.
  std::this_thread::sleep_for(std::chrono::milliseconds(nc.lease_ms));
  sampler.Pause(false);

  const bool drained = WaitWorkTerminal(url, std::chrono::seconds(300));
  std::cout << "[ measure ] drained " << count << " after the restart in " << MillisSince(down_at)
            << " ms" << std::endl;
  EXPECT_TRUE(drained) << StatusCounts(url, "work");
  const long long worst = sampler.Finish();
  for (auto& n : nodes) EXPECT_TRUE(n->Alive()) << "a node died: " << n->log();
  // The nodes did work after the restart without being restarted: both logged
  // no second "serving" line and the last executions finished after it.
  for (auto& n : nodes) n->Stop();
  EXPECT_EQ(worst, 0) << "S: executions running past lease + " << nc.sweep_ms + 1000 << " ms";
  ExpectLAndD(url, files, ids);
}

TEST(Rd11DrillTest, PostgresRestartDuringLoadNodesReconnectOnTheirOwn) {
  RunRd11(DbKind::kPostgres);
}

TEST(Rd11DrillTest, MariaDbKilledDuringLoadNodesReconnectOnTheirOwn) { RunRd11(DbKind::kMariaDb); }

TEST(ClockDrillTest, NodeTenMinutesAheadDoesNotStealLiveLeases) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "libfaketime cannot be preloaded into an AddressSanitizer build of serve (the "
                  "ASan runtime must come first in the library list); this drill runs in the "
                  "Release suite";
#endif
  if (std::string why = PgUnavailableReason(); !why.empty()) GTEST_SKIP() << why;
  std::error_code ec;
  if (!std::filesystem::exists(kFaketime, ec)) {
    GTEST_SKIP() << "faketime is not installed (scripts/deps.sh test installs the Debian package)";
  }
  PgCluster pg;
  const std::string url = pg.Start();
  ASSERT_FALSE(url.empty());

  DrillFiles files;
  NodeConfig nc;
  nc.url = url;
  nc.lease_ms = 3000;  // heartbeated every second by the holder
  nc.sweep_ms = 200;
  TempDir work;
  const std::string config = work.File("taskengine.toml");
  // Each execution holds its lease for 6 s: two lease lengths.
  std::ofstream(config) << NodeToml(nc, files, "sleep 6\n");
  ProcessResult migrate =
      RunProcess({TASKENGINE_BIN, "--config", config, "migrate"}, "", std::chrono::seconds(60),
                 ChildEnvironment(), work.path().string());
  ASSERT_EQ(migrate.exit_code, 0) << migrate.Describe();

  Node normal(config, work.File("normal.log"), work.path().string());
  normal.Start();
  ASSERT_TRUE(normal.WaitServing(std::chrono::seconds(30))) << normal.log();
  std::vector<std::int64_t> held = DispatchWork(url, 4);
  ASSERT_EQ(held.size(), 4u);
  const std::string running_sql =
      "SELECT count(*) FROM taskengine.executions WHERE job = 'work' AND status = 1";
  ASSERT_TRUE(WaitUntil(std::chrono::seconds(30), [&] { return SqlInt(url, running_sql) == 4; }))
      << StatusCounts(url, "work");
  // The worker column is cleared when an execution finishes: note holders
  // while they run.
  const std::string normal_worker =
      Sql(url, "SELECT DISTINCT worker FROM taskengine.executions WHERE job = 'work'");
  EXPECT_THAT(normal_worker, ::testing::EndsWith(":" + std::to_string(normal.pid()) + ":pool"));
  std::map<std::string, std::set<std::string>> holders;  // execution id -> workers seen

  // The skewed node: its wall clock (and every clock libfaketime fakes) is
  // 10 minutes ahead; by its own clock every lease above expired long ago.
  // The skewed node also works queue `skew` (job work_skew, 3 s each, so the
  // sampling below sees their leases), which the normal node does not, so it
  // certainly claims something.
  const std::string skewed_config = work.File("skewed.toml");
  std::ofstream(skewed_config) << NodeToml(nc, files, "sleep 6\n")
                               << "\n[[queue]]\nname = \"skew\"\n"
                               << ShellJob("work_skew",
                                           CountableEffect(files, "notice") + "sleep 3\n",
                                           "queue = \"skew\"\nlease_ms = 3000\n");
  Node skewed(skewed_config, work.File("skewed.log"), work.path().string());
  // Its wall clock only: a real node's monotonic clock is never skewed, and
  // the kernel times its waits by the real one (a faked CLOCK_MONOTONIC
  // makes every timed wait of the node last 10 minutes).
  skewed.Start(
      {std::string("LD_PRELOAD=") + kFaketime, "FAKETIME=+10m", "FAKETIME_DONT_FAKE_MONOTONIC=1"});
  ASSERT_TRUE(skewed.WaitServing(std::chrono::seconds(30))) << skewed.log();
  // The drill only means something if the node's own clock is really ahead.
  // Its log timestamps are its own wall clock: about 600 s ahead of the database's.
  const std::string first_stamp = skewed.log().substr(0, 24);
  EXPECT_GE(SqlInt(url, "SELECT extract(epoch FROM (timestamptz '" + first_stamp +
                            "' - clock_timestamp()))::bigint"),
            500)
      << "libfaketime did not skew the node's clock: " << first_stamp;
  // Work dispatched now is taken by the skewed node (the normal one's 4
  // workers are busy): its claims must carry leases by the database's time.
  std::vector<std::int64_t> later = DispatchWork(url, 4, 1000, "work_skew");
  ASSERT_EQ(later.size(), 4u);
  long long worst_future_lease = 0;
  ASSERT_TRUE(WaitUntil(
      std::chrono::seconds(60),
      [&] {
        long long ahead =
            SqlInt(url, std::string("SELECT coalesce(max(lease_expires_at - ") + DbNowMs(url) +
                            "), 0) FROM taskengine.executions WHERE status = 1");
        worst_future_lease = std::max(worst_future_lease, ahead);
        std::istringstream rows(Sql(url,
                                    "SELECT id || ' ' || worker FROM taskengine.executions "
                                    "WHERE status = 1"));
        for (std::string id, worker; rows >> id >> worker;) holders[id].insert(worker);
        return SqlInt(url,
                      "SELECT count(*) FROM taskengine.executions WHERE job LIKE 'work%' AND "
                      "status NOT IN (0, 1)") == 8;
      },
      std::chrono::milliseconds(200)))
      << StatusCounts(url, "work") << " "
      << Sql(url, "SELECT id, job, status, attempt, worker, error FROM taskengine.executions")
      << "\nskewed node:\n"
      << skewed.log();
  const std::string skewed_worker = ":" + std::to_string(skewed.pid()) + ":pool";
  skewed.Stop();
  normal.Stop();

  // The 4 held executions ran once, on the normal node, under their first
  // claim: nobody stole a live lease.
  for (std::int64_t id : held) {
    SCOPED_TRACE("execution " + std::to_string(id));
    EXPECT_EQ(Sql(url,
                  "SELECT status || ' ' || attempt || ' ' || claim_version "
                  "FROM taskengine.executions WHERE id = " +
                      std::to_string(id)),
              "2 1 1");
    for (const std::string& w : holders[std::to_string(id)]) EXPECT_EQ(w, normal_worker);
  }
  // The skewed node worked (so the drill could have stolen): its lifecycle
  // log has the completions of the 4 work_skew executions under its worker
  // id. (Sampling the running rows can miss executions this short on a busy
  // machine.) And its leases were set by the database's clock: never 10
  // minutes ahead.
  const std::string skewed_log = skewed.log();
  int skewed_ran = 0;
  std::istringstream log_lines(skewed_log);
  for (std::string line; std::getline(log_lines, line);) {
    if (line.find("event=execution.completed") != std::string::npos &&
        line.find("job=work_skew") != std::string::npos &&
        line.find(skewed_worker) != std::string::npos) {
      ++skewed_ran;
    }
  }
  EXPECT_EQ(skewed_ran, 4) << "completions of work_skew by " << skewed_worker << " in:\n"
                           << skewed_log;
  EXPECT_LE(worst_future_lease, nc.lease_ms + 2000) << "a lease was set by a skewed clock";
  std::vector<std::int64_t> all = held;
  all.insert(all.end(), later.begin(), later.end());
  ExpectLAndD(url, files, all, "job LIKE 'work%'");
  EXPECT_EQ(SqlInt(url, "SELECT count(*) FROM taskengine.executions WHERE attempt > 1"), 0)
      << Sql(url, "SELECT id, job, attempt, claim_version, error FROM taskengine.executions");
}

}  // namespace
}  // namespace taskengine::testing
