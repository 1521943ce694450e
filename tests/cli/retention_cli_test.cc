// `taskengine retention:run [--dry-run]` and `db:vacuum` (I7) against a
// database that `serve` filled, with the clock of the CLI moved 31 days ahead
// by libfaketime (Debian package faketime, preloaded directly): the old
// succeeded execution goes, a queued execution of the same age and a lane's
// blocking head stay, an audit record of the same age survives, and a dry
// run removes nothing.
//
// Labelled drill, so that it runs in the Release tree: libfaketime cannot be
// preloaded into an AddressSanitizer build.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "drill_support.h"

namespace taskengine::testing {
namespace {

using std::chrono::milliseconds;

constexpr const char* kFaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

std::vector<std::string> DaysAhead(int days) {
  return {std::string("LD_PRELOAD=") + kFaketime, "FAKETIME=+" + std::to_string(days) + "d"};
}

nlohmann::json Parse(const ProcessResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  return nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
}

class RetentionCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "libfaketime cannot be preloaded into an AddressSanitizer build";
#endif
    std::error_code ec;
    if (!std::filesystem::exists(kFaketime, ec)) {
      GTEST_SKIP() << "faketime is not installed (scripts/deps.sh test installs it)";
    }
  }
};

TEST_F(RetentionCliTest, RemovesWhatAgedOutAndKeepsQueuedBlockingAndAudit) {
  TaskengineInstall te(EngineSection(2) + ShellJob("hello", "cat >/dev/null\n") +
                       ShellJob("bad", "exit 3\n", "max_attempts = 1"));
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  ChildProcess serve;
  te.StartServe(&serve);
  ASSERT_TRUE(te.WaitServing(1, milliseconds(20'000))) << ReadFile(te.serve_log());
  const std::int64_t done = DispatchJob(te, "hello");
  nlohmann::json head = te.RunJson({"job:dispatch", "bad", "--lane", "customer-7"});
  const std::int64_t blocker = head.value("id", std::int64_t{0});
  nlohmann::json later = te.RunJson({"job:dispatch", "hello", "--delay", "5184000"});  // 60 days
  const std::int64_t queued = later.value("id", std::int64_t{0});
  ASSERT_EQ(
      te.Run({"job:edit", "hello", "--display-name", "Hello", "--reason", "rename"}).exit_code, 0);
  ASSERT_TRUE(WaitUntil(std::chrono::seconds(20), [&] {
    return ShowJson(te, done).value("status", "") == "succeeded" &&
           ShowJson(te, blocker).value("status", "") == "failed";
  })) << ReadFile(te.serve_log());
  StopServe(&serve);

  // Today nothing is due.
  nlohmann::json now = Parse(te.Run({"retention:run", "--dry-run", "--json"}));
  EXPECT_EQ(now.value("executions", -1), 0) << now.dump();

  // 31 days later: the dry run counts and removes nothing.
  nlohmann::json dry = Parse(te.Run({"retention:run", "--dry-run", "--json"}, "", DaysAhead(31)));
  EXPECT_EQ(dry.value("dry_run", false), true) << dry.dump();
  EXPECT_EQ(dry.value("executions", -1), 1) << dry.dump();
  EXPECT_EQ(dry.value("audit", -1), 0) << dry.dump();
  EXPECT_TRUE(dry["oldest_ended_at"].is_string()) << dry.dump();
  EXPECT_EQ(ShowJson(te, done).value("status", ""), "succeeded");

  ProcessResult text = te.Run({"retention:run", "--dry-run"}, "", DaysAhead(31));
  EXPECT_EQ(text.exit_code, 0) << text.Describe();
  EXPECT_NE(text.out.find("WOULD GO"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("nothing was removed"), std::string::npos) << text.out;

  nlohmann::json run = Parse(te.Run({"retention:run", "--json"}, "", DaysAhead(31)));
  EXPECT_EQ(run.value("dry_run", true), false) << run.dump();
  EXPECT_EQ(run.value("executions", -1), 1) << run.dump();
  EXPECT_EQ(run.value("attempts", -1), 0) << run.dump();  // a success leaves no failed attempt

  ProcessResult gone = te.Run({"execution:show", std::to_string(done)});
  EXPECT_EQ(gone.exit_code, 2) << gone.Describe();
  EXPECT_EQ(ShowJson(te, blocker).value("status", ""), "failed");
  EXPECT_EQ(ShowJson(te, queued).value("status", ""), "queued");
  nlohmann::json audit = te.RunJson({"audit:list"});
  bool edit_kept = false;
  for (const auto& r : audit["items"]) edit_kept |= r.value("action", "") == "job.update";
  EXPECT_TRUE(edit_kept) << audit.dump();
  nlohmann::json stats = te.RunJson({"queue:status"});
  EXPECT_FALSE(stats.is_discarded());

  // A year and a day later the audit record goes too, and nothing else.
  nlohmann::json year = Parse(te.Run({"retention:run", "--json"}, "", DaysAhead(366)));
  EXPECT_GE(year.value("audit", -1), 1) << year.dump();
  EXPECT_EQ(year.value("executions", -1), 0) << year.dump();
  EXPECT_EQ(ShowJson(te, blocker).value("status", ""), "failed");
  EXPECT_EQ(ShowJson(te, queued).value("status", ""), "queued");
}

// serve purges by itself: its loop runs a pass at start, here with serve's
// clock 31 days after the work ended.
TEST_F(RetentionCliTest, ServePurgesAtStartWhatAgedOut) {
  TaskengineInstall te(EngineSection(2) + ShellJob("hello", "cat >/dev/null\n"));
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  ChildProcess serve;
  te.StartServe(&serve);
  ASSERT_TRUE(te.WaitServing(1, milliseconds(20'000))) << ReadFile(te.serve_log());
  const std::int64_t done = DispatchJob(te, "hello");
  ASSERT_TRUE(WaitUntil(std::chrono::seconds(20), [&] {
    return ShowJson(te, done).value("status", "") == "succeeded";
  })) << ReadFile(te.serve_log());
  StopServe(&serve);

  std::vector<std::string> env = DaysAhead(31);
  env.push_back("FAKETIME_DONT_FAKE_MONOTONIC=1");
  ChildProcess later;
  ASSERT_NE(te.StartServeOnEphemeralPort(&later, env), 0);
  ASSERT_TRUE(WaitUntil(std::chrono::seconds(20), [&] {
    return te.Run({"execution:show", std::to_string(done)}).exit_code == 2;
  })) << ReadFile(te.serve_log());
  EXPECT_TRUE(WaitUntil(std::chrono::seconds(10), [&] {
    return ReadFile(te.serve_log()).find("retention: removed 1 executions") != std::string::npos;
  })) << ReadFile(te.serve_log());
  StopServe(&later);
}

TEST_F(RetentionCliTest, VacuumCompactsSqliteAndRefusesPostgres) {
  TaskengineInstall te(EngineSection(0));
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  nlohmann::json v = Parse(te.Run({"db:vacuum", "--json"}));
  EXPECT_EQ(v.value("was_incremental", false), true) << v.dump();
  EXPECT_GT(v.value("bytes_after", 0), 0) << v.dump();

  TaskengineInstall pg("[database]\nurl = \"postgres://nobody@127.0.0.1:1/none\"\n");
  ProcessResult r = pg.Run({"db:vacuum"});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("autovacuum"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace taskengine::testing
