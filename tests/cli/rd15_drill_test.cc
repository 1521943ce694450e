// Drill RD15 (quality.md §2, L2, E2): a server is SIGSTOPped past the lease
// of the executions it runs; a second server on the same database recovers
// them after the sweep and runs them; then the first is SIGCONTed. Every call
// the first one's claims make afterwards is `stale` (its scripts' effect
// reservations answer stale or already_done), and each execution has exactly
// one effect (D) and one success (L).
//
// The scripts (children of the server, in their own process groups) are not
// stopped with it: each waits for the test before reserving, so the test can
// make the first server's scripts reserve after the takeover.
//
// SQLite caveat: a server stopped in the middle of a write transaction would
// hold the database's write lock and block the second one. The first server
// is therefore quiet (it polls and sweeps once a minute and only heartbeats,
// in sync=normal so a commit takes well under a millisecond), which makes
// that window tiny; if the second server cannot make progress the test says
// so.
#include "drill_support.h"

namespace taskengine::testing {
namespace {

constexpr int kExecutions = 3;

std::string Job(const DrillFiles& f) {
  return ShellJob("transfer",
                  StartLine(f) + WaitForGo(f) + CountableEffect(f, "notice") + "exit 0\n",
                  "lease_ms = 1000\ntimeout_ms = 30000\nmax_attempts = 5\nbackoff_base_ms = "
                  "50\nbackoff_cap_ms = 100\n");
}

// Started lines "<id> <claim version>" as a set of pairs.
std::set<std::pair<std::int64_t, std::int64_t>> Started(const DrillFiles& f) {
  std::set<std::pair<std::int64_t, std::int64_t>> out;
  for (const std::string& line : ReadLines(f.started())) {
    std::istringstream fields(line);
    std::int64_t id = 0, version = 0;
    if (fields >> id >> version) out.emplace(id, version);
  }
  return out;
}

TEST(Rd15Drill, StoppedServerPastItsLeaseIsStaleAfterContinue) {
  const auto t_start = std::chrono::steady_clock::now();
  DrillFiles files;
  // Server A: quiet (see the file comment). Server B: polls and sweeps fast.
  TaskengineInstall te(EngineSection(kExecutions, 60'000, 60'000, "normal") + Job(files));
  const std::string config_b = te.dir().File("b.toml");
  std::ofstream(config_b) << EngineSection(kExecutions, 100, 100, "normal") + Job(files);
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  std::vector<std::int64_t> ids;
  for (int i = 0; i < kExecutions; ++i) {
    ids.push_back(DispatchJob(te, "transfer", "{\"n\":" + std::to_string(i) + "}"));
    ASSERT_GT(ids.back(), 0);
  }

  ChildProcess a;
  ASSERT_NO_FATAL_FAILURE(te.StartServe(&a));  // claims everything at start
  ASSERT_TRUE(WaitUntil(milliseconds(15'000), [&] { return Started(files).size() == kExecutions; }))
      << ReadFile(files.started()) << "\nserve log:\n"
      << ReadFile(te.serve_log());
  for (std::int64_t id : ids) ASSERT_EQ(Started(files).count({id, 1}), 1u) << id;
  a.Signal(SIGSTOP);
  const auto t_stop = std::chrono::steady_clock::now();

  ChildProcess b;
  SpawnOptions o;
  o.cwd = te.dir().path().string();
  o.stdout_path = te.serve_log();
  o.stderr_path = te.serve_log();
  std::string error;
  ASSERT_TRUE(
      b.Start({TASKENGINE_BIN, "--config", config_b, "--db", te.db_path(), "serve"}, o, &error))
      << error;
  // B recovers the expired leases and claims them again (claim version 2).
  const bool taken_over = WaitUntil(milliseconds(15'000), [&] {
    for (std::int64_t id : ids) {
      if (Started(files).count({id, 2}) == 0) return false;
    }
    return true;
  });
  if (!taken_over) {
    a.Signal(SIGCONT);
    FAIL() << "server B did not take over within 15 s of the stop (was A stopped while holding "
              "the write lock?)\nstarted: "
           << ReadFile(files.started()) << "\nserve log:\n"
           << ReadFile(te.serve_log());
  }
  const long long takeover_ms = MillisSince(t_stop);

  // Claim 2 (B's) is current. Now both claims' scripts reserve, in any
  // order: A's claim 1 is stale whatever comes first.
  for (std::int64_t id : ids) {
    nlohmann::json j = ShowJson(te, id);
    EXPECT_EQ(j["claim_version"], 2) << j.dump();
    EXPECT_EQ(j["status"], "running");
  }
  for (std::int64_t id : ids) files.Go(id);
  std::map<std::int64_t, nlohmann::json> all;
  ASSERT_TRUE(WaitAllTerminal(te, ids, milliseconds(20'000), &all))
      << DescribeStatuses(all) << "\nserve log:\n"
      << ReadFile(te.serve_log());

  // A resumes: its heartbeats and outcomes are stale and change nothing.
  a.Signal(SIGCONT);
  std::this_thread::sleep_for(milliseconds(1500));
  ASSERT_FALSE(a.Wait(milliseconds(0)).has_value()) << "A died after SIGCONT";

  std::map<std::string, int> first_claim_answers;
  for (std::int64_t id : ids) {
    for (const auto& [version, answer] : Answers(files, "notice", id)) {
      if (version == 1) first_claim_answers[answer]++;
    }
  }
  std::string heard;
  for (const auto& [answer, n] : first_claim_answers) {
    heard += answer + "=" + std::to_string(n) + " ";
  }
  std::map<std::int64_t, int> once;
  for (std::int64_t id : ids) once[id] = 1;
  std::map<std::int64_t, nlohmann::json> shown = ExpectInvariants(te, files, ids, once);
  for (std::int64_t id : ids) {
    SCOPED_TRACE("execution " + std::to_string(id));
    EXPECT_EQ(shown[id]["status"], "succeeded") << shown[id].dump();
    EXPECT_EQ(shown[id]["claim_version"], 2);
    std::map<std::int64_t, std::string> by_claim;
    for (const auto& [version, answer] : Answers(files, "notice", id)) by_claim[version] = answer;
    ASSERT_EQ(by_claim.size(), 2u) << ReadFile(files.answers());
    EXPECT_THAT(by_claim[1], ::testing::AnyOf("stale", "already_done"))
        << "the stopped server's claim";
    EXPECT_EQ(by_claim[2], "proceed");
    ASSERT_EQ(shown[id]["effects"].size(), 1u);
    EXPECT_EQ(shown[id]["effects"][0]["claim_version"], 2);
    ASSERT_GE(shown[id]["attempts"].size(), 1u);
    EXPECT_EQ(shown[id]["attempts"][0]["failure_class"], "lease_expired");
  }
  std::printf(
      "[ measure ] RD15: server B took over %d executions %lld ms after SIGSTOP of A; A's "
      "reservations heard: %s; drill %lld ms\n",
      kExecutions, takeover_ms, heard.c_str(), MillisSince(t_start));
  StopServe(&b);
  StopServe(&a);
}

}  // namespace
}  // namespace taskengine::testing
