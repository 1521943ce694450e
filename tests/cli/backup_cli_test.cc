// `taskengine backup PATH`: an online copy of the SQLite database taken while
// `serve` runs and jobs are admitted; the copy opens as a database with every
// execution committed before it started, it never overwrites, and a
// PostgreSQL configuration is refused with the tools to use instead.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "drill_support.h"

namespace taskengine::testing {
namespace {

using std::chrono::milliseconds;

TEST(BackupCliTest, CopiesALiveDatabaseConsistentlyAndNeverOverwrites) {
  TaskengineInstall te(EngineSection(2) + ShellJob("hello", "cat >/dev/null\n"));
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  ChildProcess serve;
  te.StartServe(&serve);
  ASSERT_TRUE(te.WaitServing(1, milliseconds(20'000))) << ReadFile(te.serve_log());
  std::vector<std::int64_t> before;
  for (int i = 0; i < 20; ++i) before.push_back(DispatchJob(te, "hello"));

  // Admissions continue while the backup runs.
  std::atomic<bool> stop{false};
  std::thread load([&] {
    while (!stop.load()) DispatchJob(te, "hello");
  });
  const std::string dest = te.dir().File("backup.db");
  ProcessResult r = te.Run({"backup", dest, "--json"});
  stop.store(true);
  load.join();
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  nlohmann::json report = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << r.out;
  EXPECT_GT(report.value("bytes", 0), 0) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dest + ".partial"));
  EXPECT_FALSE(std::filesystem::exists(dest + "-wal") &&
               std::filesystem::file_size(dest + "-wal") > 0)
      << "the backup is one self-contained file";

  // The copy is a database of its own with everything committed before it.
  ProcessResult list = RunProcess({TASKENGINE_BIN, "--config", te.config_path(), "--db", dest,
                                   "execution:list", "--limit=1000", "--json"},
                                  "", kCliTimeout, ChildEnvironment({}), te.dir().path().string());
  ASSERT_EQ(list.exit_code, 0) << list.Describe();
  nlohmann::json items = nlohmann::json::parse(list.out)["items"];
  std::set<std::int64_t> copied;
  for (const auto& e : items) copied.insert(e["id"].get<std::int64_t>());
  for (std::int64_t id : before) EXPECT_TRUE(copied.count(id)) << "execution " << id;

  // Never overwrites.
  ProcessResult again = te.Run({"backup", dest});
  EXPECT_EQ(again.exit_code, 1) << again.Describe();
  EXPECT_NE(again.err.find("exists"), std::string::npos) << again.err;
  StopServe(&serve);
}

TEST(BackupCliTest, RefusesPostgresWithTheToolsToUse) {
  TaskengineInstall te("[database]\nurl = \"postgres://nobody@127.0.0.1:1/none\"\n");
  ProcessResult r = te.Run({"backup", te.dir().File("x.db")});
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("pg_dump"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace taskengine::testing
