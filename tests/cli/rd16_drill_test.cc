// Drill RD16 (quality.md §2, L4, Q1): a handler that crashes its worker every
// time. The `poison` job's script kills the server that runs it (kill -9
// $PPID). The test plays the supervisor (systemd's Restart=on-failure): it
// restarts the server whenever it dies. After 3 lease expiries in a row the
// sweeper quarantines the poison (max_consecutive_lease_expiries = 3) and the
// crashes stop, while the `steady` jobs dispatched alongside (before the first
// start, and while the server is down) all complete with one effect each.
//
// The second case (L4; issue 12) puts the poison AHEAD of 20 ordinary jobs on
// a node with one worker thread: the pool holds ordinary leases it prefetched
// when the poison kills the node. Their handlers never started, so their
// expiries are free requeues: no ordinary job loses an attempt or ends
// quarantined, only the poison does.
#include "drill_support.h"

namespace taskengine::testing {
namespace {

constexpr int kSteadyBefore = 8;
constexpr int kSteadyWhileDown = 8;
constexpr int kExpiryBound = 3;

// Short leases and backoff; quarantine after kExpiryBound expiries in a row.
std::string JobKeys() {
  return "lease_ms = 1000\ntimeout_ms = 30000\nmax_attempts = 10\n"
         "backoff_base_ms = 50\nbackoff_cap_ms = 100\n"
         "max_consecutive_lease_expiries = " +
         std::to_string(kExpiryBound) + "\n";
}

std::string DrillConfig(const DrillFiles& f) {
  const std::string keys = JobKeys();
  return EngineSection(2) +
         ShellJob("poison", StartLine(f) + "sleep 2\nkill -9 $PPID\nexit 0\n", keys) +
         ShellJob("steady", StartLine(f) + CountableEffect(f, "notice") + "exit 0\n", keys);
}

TEST(Rd16Drill, WorkerKillingHandlerIsQuarantinedAfterThreeExpiriesAndOthersComplete) {
  const auto t_start = std::chrono::steady_clock::now();
  DrillFiles files;
  TaskengineInstall te(DrillConfig(files));
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  std::vector<std::int64_t> steady;
  for (int i = 0; i < kSteadyBefore / 2; ++i) steady.push_back(DispatchJob(te, "steady"));
  const std::int64_t poison = DispatchJob(te, "poison");
  ASSERT_GT(poison, 0);
  for (int i = kSteadyBefore / 2; i < kSteadyBefore; ++i)
    steady.push_back(DispatchJob(te, "steady"));

  ChildProcess serve;
  ASSERT_NO_FATAL_FAILURE(te.StartServe(&serve));
  int crashes = 0;
  std::map<std::int64_t, nlohmann::json> all;
  auto done = [&] {
    all = ListAll(te);
    if (all[poison]["status"] != "quarantined") return false;
    for (std::int64_t id : steady) {
      if (!IsTerminalStatus(all[id]["status"].get<std::string>())) return false;
    }
    return true;
  };
  const bool finished = WaitUntil(
      milliseconds(40'000),
      [&] {
        if (std::optional<int> status = serve.Wait(milliseconds(0))) {
          EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL)
              << "serve ended with wait status " << *status;
          ++crashes;
          if (crashes == 1) {
            for (int i = 0; i < kSteadyWhileDown; ++i) steady.push_back(DispatchJob(te, "steady"));
          }
          te.StartServe(&serve);  // the supervisor's restart
        }
        return done();
      },
      milliseconds(100));
  ASSERT_TRUE(finished) << "after " << crashes << " crashes: poison " << all[poison]["status"]
                        << "; " << DescribeStatuses(all) << "\nserve log:\n"
                        << ReadFile(te.serve_log());
  const long long elapsed_ms = MillisSince(t_start);
  // The quarantine stops the crashes: the last server keeps running.
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_FALSE(serve.Wait(milliseconds(0)).has_value()) << "a crash after the quarantine";
  EXPECT_EQ(crashes, kExpiryBound);

  std::vector<std::int64_t> ids = steady;
  ids.push_back(poison);
  std::map<std::int64_t, int> expected;
  for (std::int64_t id : steady) expected[id] = 1;
  expected[poison] = 0;
  std::map<std::int64_t, nlohmann::json> shown = ExpectInvariants(te, files, ids, expected);
  for (std::int64_t id : steady) {
    EXPECT_EQ(shown[id]["status"], "succeeded") << shown[id].dump();
  }
  const nlohmann::json& p = shown[poison];
  EXPECT_EQ(p["status"], "quarantined") << p.dump();
  EXPECT_EQ(p["failure_class"], "lease_expired");
  EXPECT_EQ(p["attempt"], kExpiryBound);
  EXPECT_EQ(p["consecutive_lease_expiries"], kExpiryBound);
  ASSERT_EQ(p["attempts"].size(), static_cast<std::size_t>(kExpiryBound)) << p["attempts"].dump();
  for (const auto& a : p["attempts"]) EXPECT_EQ(a["failure_class"], "lease_expired") << a.dump();
  int poison_runs = 0;
  for (const std::string& line : ReadLines(files.started())) {
    if (std::stoll(line) == poison) ++poison_runs;
  }
  EXPECT_EQ(poison_runs, kExpiryBound);
  nlohmann::json quarantine = te.RunJson({"quarantine:list"});
  ASSERT_EQ(quarantine["items"].size(), 1u) << quarantine.dump();
  EXPECT_EQ(quarantine["items"][0]["id"], poison);
  std::printf(
      "[ measure ] RD16: %d crashes, poison quarantined and %zu steady jobs done %lld ms after "
      "the first start\n",
      crashes, steady.size(), elapsed_ms);
  StopServe(&serve);
}

constexpr int kOrdinary = 20;

std::string PrefetchConfig(const DrillFiles& f) {
  const std::string keys = JobKeys();
  return EngineSection(1) + ShellJob("poison", StartLine(f) + "kill -9 $PPID\nexit 0\n", keys) +
         ShellJob("steady", StartLine(f) + CountableEffect(f, "notice") + "exit 0\n", keys);
}

TEST(Rd16Drill, PoisonAheadOfPrefetchedJobsOnOneThreadQuarantinesOnlyThePoison) {
  DrillFiles files;
  TaskengineInstall te(PrefetchConfig(files));
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  const std::int64_t poison = DispatchJob(te, "poison");
  ASSERT_GT(poison, 0);
  std::vector<std::int64_t> steady;
  for (int i = 0; i < kOrdinary; ++i) steady.push_back(DispatchJob(te, "steady"));

  ChildProcess serve;
  ASSERT_NO_FATAL_FAILURE(te.StartServe(&serve));
  int crashes = 0;
  std::map<std::int64_t, nlohmann::json> all;
  auto done = [&] {
    all = ListAll(te);
    if (!IsTerminalStatus(all[poison]["status"].get<std::string>())) return false;
    for (std::int64_t id : steady) {
      if (!IsTerminalStatus(all[id]["status"].get<std::string>())) return false;
    }
    return true;
  };
  const bool finished = WaitUntil(
      milliseconds(90'000),
      [&] {
        if (serve.Wait(milliseconds(0)).has_value()) {
          ++crashes;
          te.StartServe(&serve);  // the supervisor's restart
        }
        return done();
      },
      milliseconds(100));
  ASSERT_TRUE(finished) << "after " << crashes << " crashes: " << DescribeStatuses(all)
                        << "\nserve log:\n"
                        << ReadFile(te.serve_log());
  std::vector<std::int64_t> ids = steady;
  ids.push_back(poison);
  std::map<std::int64_t, int> expected;
  for (std::int64_t id : steady) expected[id] = 1;
  expected[poison] = 0;
  std::map<std::int64_t, nlohmann::json> shown = ExpectInvariants(te, files, ids, expected);
  for (std::int64_t id : steady) {
    SCOPED_TRACE("ordinary execution " + std::to_string(id));
    EXPECT_EQ(shown[id]["status"], "succeeded") << shown[id].dump();
    EXPECT_EQ(shown[id]["attempt"], 1) << "a lease that lapsed unstarted burns no attempt";
    for (const auto& a : shown[id]["attempts"]) {
      EXPECT_NE(a["failure_class"], "lease_expired") << a.dump();
    }
  }
  EXPECT_EQ(shown[poison]["status"], "quarantined") << shown[poison].dump();
  EXPECT_EQ(shown[poison]["failure_class"], "lease_expired");
  EXPECT_EQ(shown[poison]["attempt"], kExpiryBound);
  EXPECT_EQ(crashes, kExpiryBound);
  int succeeded = 0;
  for (std::int64_t id : steady) succeeded += shown[id]["status"] == "succeeded" ? 1 : 0;
  std::printf("[ measure ] RD16 prefetch: %d crashes, %d of %zu ordinary jobs succeeded\n", crashes,
              succeeded, steady.size());
  StopServe(&serve);
}

}  // namespace
}  // namespace taskengine::testing
