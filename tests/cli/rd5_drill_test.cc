// Drill RD5 (quality.md §2, R2): a quarantined execution whose effect had
// committed is replayed twice through the CLI. The effect happens once (D);
// audit:list shows both replays with actor and reason.
//
// The script performs its countable effect and then fails permanently (exit
// 65) while <drill dir>/broken exists: quarantined on the first run. The first
// replay runs it again (already_done; still broken: quarantined again); the
// operator removes the cause and the second replay succeeds.
#include "drill_support.h"

namespace taskengine::testing {
namespace {

std::string DrillConfig(const DrillFiles& f) {
  const std::string script = StartLine(f) + CountableEffect(f, "notice") + "if [ -e '" + f.dir() +
                             "/broken' ]; then echo 'downstream rejected the batch' >&2; exit "
                             "65; fi\nexit 0\n";
  return EngineSection(2) + ShellJob("settle", script,
                                     "max_attempts = 3\nbackoff_base_ms = 50\nbackoff_cap_ms = "
                                     "100\nlease_ms = 5000\n");
}

TEST(Rd5Drill, ReplayingAQuarantinedExecutionTwiceLeavesOneEffect) {
  const auto t_start = std::chrono::steady_clock::now();
  DrillFiles files;
  std::ofstream(files.dir() + "/broken") << "yes\n";
  TaskengineInstall te(DrillConfig(files));
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  ChildProcess serve;
  ASSERT_NO_FATAL_FAILURE(te.StartServe(&serve));
  ASSERT_TRUE(te.WaitServing(1, milliseconds(15'000))) << ReadFile(te.serve_log());

  const std::int64_t id = DispatchJob(te, "settle");
  ASSERT_GT(id, 0);
  const std::string sid = std::to_string(id);
  auto quarantined_after = [&](std::size_t runs) {
    nlohmann::json j;
    EXPECT_TRUE(WaitExecution(
        te, id, milliseconds(20'000),
        [&](const nlohmann::json& e) {
          return e["status"] == "quarantined" && e["attempts"].size() == runs;
        },
        &j))
        << j.dump() << "\nserve log:\n"
        << ReadFile(te.serve_log());
    return j;
  };
  nlohmann::json j = quarantined_after(1);
  EXPECT_EQ(j["failure_class"], "permanent");

  ProcessResult first = te.Run({"execution:replay", sid, "--reason", "retry after the outage"});
  ASSERT_EQ(first.exit_code, 0) << first.Describe();
  EXPECT_EQ(first.out, "execution " + sid + " replayed: queued\n");
  j = quarantined_after(2);

  std::filesystem::remove(files.dir() + "/broken");  // the operator fixed the cause
  nlohmann::json second =
      te.RunJson({"execution:replay", sid, "--reason", "downstream fixed", "--as", "oncall"});
  EXPECT_EQ(second["outcome"], "replayed") << second.dump();
  ASSERT_TRUE(WaitExecution(
      te, id, milliseconds(20'000),
      [](const nlohmann::json& e) { return IsTerminalStatus(e["status"].get<std::string>()); }, &j))
      << j.dump();
  EXPECT_EQ(j["status"], "succeeded") << j.dump();

  ExpectInvariants(te, files, {id}, {{id, 1}});
  EXPECT_EQ(Answers(files, "notice", id),
            (std::vector<std::pair<std::int64_t, std::string>>{
                {1, "proceed"}, {2, "already_done"}, {3, "already_done"}}));
  ASSERT_EQ(j["effects"].size(), 1u);
  EXPECT_EQ(j["effects"][0]["claim_version"], 1) << "committed by the first run, never again";

  nlohmann::json audit = te.RunJson({"audit:list", "--target", "execution:" + sid});
  ASSERT_EQ(audit["items"].size(), 2u) << audit.dump();
  EXPECT_EQ(audit["items"][0]["action"], "execution.replay");
  EXPECT_EQ(audit["items"][0]["reason"], "downstream fixed");
  EXPECT_EQ(audit["items"][0]["actor"], "cli:oncall");
  EXPECT_EQ(audit["items"][1]["action"], "execution.replay");
  EXPECT_EQ(audit["items"][1]["reason"], "retry after the outage");
  EXPECT_THAT(audit["items"][1]["actor"].get<std::string>(), ::testing::StartsWith("cli:"));
  ProcessResult table = te.Run({"audit:list", "--target", "execution:" + sid});
  EXPECT_THAT(table.out, ::testing::ContainsRegex("execution.replay +execution:" + sid +
                                                  " +- +downstream fixed"));
  EXPECT_THAT(table.out, ::testing::ContainsRegex("execution.replay +execution:" + sid +
                                                  " +- +retry after the outage"));
  std::printf("[ measure ] RD5: two replays, one effect; drill %lld ms\n", MillisSince(t_start));
  StopServe(&serve);
}

}  // namespace
}  // namespace taskengine::testing
