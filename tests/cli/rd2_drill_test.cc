// Drill RD2 (quality.md §2): the server dies (kill -9) after the effects
// happened and were committed, before the acknowledgement. Redelivery must
// leave one artifact and one notice per execution (D, E2), and every execution
// must succeed after the restart (L).
//
// Setup: `serve` with one worker per execution; a `command` job whose script
// performs two countable effects through the effect verbs (reserve "artifact",
// append a line, commit; the same for "notice"), then, only when it performed
// them in this run, waits for the test before it exits (its acknowledgement).
// The test kills the server while every script is waiting, lets the orphaned
// scripts end, and restarts the server: the leases expire, the sweeper
// requeues, and each retry hears `already_done` twice and succeeds.
#include "drill_support.h"

namespace taskengine::testing {
namespace {

constexpr int kExecutions = 6;

std::string DrillConfig(const DrillFiles& f) {
  const std::string script = StartLine(f) + "performed=0\n" + CountableEffect(f, "artifact") +
                             CountableEffect(f, "notice") + "echo \"$id $v\" >> '" + f.dir() +
                             "/committed.txt'\n" + "if [ $performed = 1 ]; then\n" + WaitForGo(f) +
                             "fi\nexit 0\n";
  return EngineSection(kExecutions) +
         ShellJob("deliver", script,
                  "lease_ms = 1000\ntimeout_ms = 30000\nmax_attempts = 5\nbackoff_base_ms = "
                  "50\nbackoff_cap_ms = 100\n");
}

TEST(Rd2Drill, KillNineAfterTheEffectsBeforeTheAckLeavesOneEffectEach) {
  const auto t_start = std::chrono::steady_clock::now();
  DrillFiles files;
  TaskengineInstall te(DrillConfig(files));
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  std::vector<std::int64_t> ids;
  for (int i = 0; i < kExecutions; ++i) {
    ids.push_back(DispatchJob(te, "deliver", "{\"n\":" + std::to_string(i) + "}"));
    ASSERT_GT(ids.back(), 0);
  }

  ChildProcess serve;
  ASSERT_NO_FATAL_FAILURE(te.StartServe(&serve));
  // Every script committed both effects and now waits: not acknowledged yet.
  ASSERT_TRUE(
      WaitUntil(milliseconds(20'000),
                [&] { return ReadLines(files.dir() + "/committed.txt").size() == kExecutions; }))
      << "committed: " << ReadFile(files.dir() + "/committed.txt") << "\nserve log:\n"
      << ReadFile(te.serve_log());
  std::map<std::int64_t, nlohmann::json> at_kill = ListAll(te);
  for (std::int64_t id : ids) {
    EXPECT_EQ(at_kill[id]["status"], "running") << "acknowledged before the kill: " << id;
  }
  serve.Signal(SIGKILL);
  std::optional<int> killed = serve.Wait(milliseconds(10'000));
  ASSERT_TRUE(killed.has_value() && WIFSIGNALED(*killed) && WTERMSIG(*killed) == SIGKILL);
  files.GoAll();  // the orphaned scripts exit; their server is gone

  const auto t_restart = std::chrono::steady_clock::now();
  ChildProcess restarted;
  ASSERT_NO_FATAL_FAILURE(te.StartServe(&restarted));
  std::map<std::int64_t, nlohmann::json> all;
  ASSERT_TRUE(WaitAllTerminal(te, ids, milliseconds(20'000), &all))
      << DescribeStatuses(all) << "\nserve log:\n"
      << ReadFile(te.serve_log());
  const long long recovery_ms = MillisSince(t_restart);

  std::map<std::int64_t, int> once;
  for (std::int64_t id : ids) once[id] = 1;
  std::map<std::int64_t, nlohmann::json> shown = ExpectInvariants(te, files, ids, once, "notice");
  ExpectInvariants(te, files, ids, once, "artifact");
  for (std::int64_t id : ids) {
    SCOPED_TRACE("execution " + std::to_string(id));
    const nlohmann::json& j = shown[id];
    EXPECT_EQ(j["status"], "succeeded") << j.dump();
    EXPECT_EQ(j["attempt"], 2) << "one redelivery after the crash";
    ASSERT_EQ(j["attempts"].size(), 1u);
    EXPECT_EQ(j["attempts"][0]["failure_class"], "lease_expired");
    for (const char* effect : {"artifact", "notice"}) {
      EXPECT_EQ(Answers(files, effect, id), (std::vector<std::pair<std::int64_t, std::string>>{
                                                {1, "proceed"}, {2, "already_done"}}))
          << effect;
    }
  }
  std::printf("[ measure ] RD2: %d executions recovered %lld ms after the restart; drill %lld ms\n",
              kExecutions, recovery_ms, MillisSince(t_start));
  StopServe(&restarted);
}

}  // namespace
}  // namespace taskengine::testing
