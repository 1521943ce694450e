// Drill RD4 (quality.md §2): one payload whose schema version the job does
// not accept, among 46 valid ones. The bad one is quarantined after the job's
// bound for unsupported schemas (3 attempts, Q1) and its script never runs;
// the 46 succeed with one effect each (A, L, D).
#include "drill_support.h"

namespace taskengine::testing {
namespace {

constexpr int kValid = 46;

std::string DrillConfig(const DrillFiles& f) {
  return EngineSection(4) +
         ShellJob("ingest", StartLine(f) + CountableEffect(f, "notice") + "exit 0\n",
                  "accepted_schema_versions = [1]\nmax_unsupported_schema_attempts = 3\n"
                  "max_attempts = 5\nbackoff_base_ms = 50\nbackoff_cap_ms = 100\n"
                  "lease_ms = 5000\n");
}

TEST(Rd4Drill, UnsupportedSchemaIsQuarantinedAfterThreeAttemptsAndTheRestComplete) {
  const auto t_start = std::chrono::steady_clock::now();
  DrillFiles files;
  TaskengineInstall te(DrillConfig(files));
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  ChildProcess serve;
  ASSERT_NO_FATAL_FAILURE(te.StartServe(&serve));
  ASSERT_TRUE(te.WaitServing(1, milliseconds(15'000))) << ReadFile(te.serve_log());

  std::vector<std::int64_t> ids;
  std::int64_t bad = 0;
  for (int i = 0; i <= kValid; ++i) {
    if (i == kValid / 2) {
      bad = DispatchJob(te, "ingest", R"({"schema_version": 2, "n": -1})");
      ASSERT_GT(bad, 0);
      ids.push_back(bad);
    }
    if (i < kValid) {
      // Half say schema_version 1 explicitly, half rely on the default (1).
      const std::string payload = i % 2 == 0
                                      ? R"({"schema_version": 1, "n": )" + std::to_string(i) + "}"
                                      : R"({"n": )" + std::to_string(i) + "}";
      ids.push_back(DispatchJob(te, "ingest", payload));
      ASSERT_GT(ids.back(), 0);
    }
  }
  ASSERT_EQ(ids.size(), static_cast<std::size_t>(kValid + 1));

  std::map<std::int64_t, nlohmann::json> all;
  ASSERT_TRUE(WaitAllTerminal(te, ids, milliseconds(30'000), &all))
      << DescribeStatuses(all) << "\nserve log:\n"
      << ReadFile(te.serve_log());

  std::map<std::int64_t, int> expected;
  for (std::int64_t id : ids) expected[id] = id == bad ? 0 : 1;
  std::map<std::int64_t, nlohmann::json> shown = ExpectInvariants(te, files, ids, expected);
  int succeeded = 0;
  for (std::int64_t id : ids) {
    if (id != bad && shown[id]["status"] == "succeeded") ++succeeded;
  }
  EXPECT_EQ(succeeded, kValid) << DescribeStatuses(all);

  const nlohmann::json& q = shown[bad];
  EXPECT_EQ(q["status"], "quarantined") << q.dump();
  EXPECT_EQ(q["failure_class"], "permanent");
  EXPECT_EQ(q["attempt"], 3) << "max_unsupported_schema_attempts";
  EXPECT_THAT(q["error"].get<std::string>(), ::testing::HasSubstr("schema"));
  EXPECT_EQ(q["attempts"].size(), 3u) << q["attempts"].dump();
  EXPECT_TRUE(q["effects"].empty());
  for (const std::string& line : ReadLines(files.started())) {
    EXPECT_NE(std::stoll(line), bad) << "the script ran for the unsupported payload";
  }
  nlohmann::json quarantine = te.RunJson({"quarantine:list"});
  ASSERT_EQ(quarantine["items"].size(), 1u) << quarantine.dump();
  EXPECT_EQ(quarantine["items"][0]["id"], bad);
  std::printf("[ measure ] RD4: %d valid + 1 unsupported, all terminal; drill %lld ms\n", kValid,
              MillisSince(t_start));
  StopServe(&serve);
}

}  // namespace
}  // namespace taskengine::testing
