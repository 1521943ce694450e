// Drill RD1 (quality.md §2): kill -9 the server right after dispatches have
// committed, before it could run them; after a restart every acknowledged
// dispatch exists once and reaches a terminal status (invariant L).
//
// Setup: `serve` with ONE worker thread, a `command` job that sleeps 0.3 s and
// then appends "<execution id> <attempt>" to a file, and 50 dispatches through
// the CLI (each acknowledged only after its commit). The server is SIGKILLed
// right after the last acknowledgement, while most of the work is still queued
// or leased to it (its leases expire and the restarted sweeper requeues them).
//
// Effects may repeat here: a command killed with the server, or one whose
// completion was not committed before the kill, runs again after the restart.
// At-most-once effects are the effect ledger's job (E1, a later issue), so this
// drill checks "at least once" for the file (every id appears) and L for the
// executions, and reports how many lines were repeats.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "cli_harness.h"

namespace taskengine::testing {
namespace {

using std::chrono::milliseconds;

constexpr int kJobs = 50;

std::string DrillConfig(const std::string& effects_path) {
  return R"(
[engine]
worker_threads = 1
poll_interval_ms = 100
sweep_interval_ms = 100
shutdown_grace_ms = 5000

[[queue]]
name = "default"

[[job]]
name = "append"
handler = "command"
timeout_ms = 10000
lease_ms = 1000
max_attempts = 10
backoff_base_ms = 50
backoff_cap_ms = 200
max_consecutive_lease_expiries = 5
config = { argv = ["/bin/sh", "-c", '''sleep 0.3; echo "$TASKENGINE_EXECUTION_ID $TASKENGINE_ATTEMPT" >> )" +
         effects_path + R"('''] }
)";
}

// Status counts of every execution, read through the CLI.
std::map<std::string, int> StatusCounts(const TaskengineInstall& te, nlohmann::json* items) {
  *items = te.RunJson({"execution:list", "--limit=1000"});
  std::map<std::string, int> counts;
  if (!items->is_object()) return counts;
  for (const auto& e : (*items)["items"]) counts[e["status"].get<std::string>()]++;
  return counts;
}

std::string Describe(const std::map<std::string, int>& counts) {
  std::string s;
  for (const auto& [status, n] : counts) s += status + "=" + std::to_string(n) + " ";
  return s;
}

TEST(Rd1Drill, KillNineAfterCommitThenRestartRunsEveryExecution) {
  TempDir effects_dir;
  const std::string effects = effects_dir.File("effects.txt");
  TaskengineInstall te(DrillConfig(effects));
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);

  ChildProcess serve;
  ASSERT_NO_FATAL_FAILURE(te.StartServe(&serve));
  ASSERT_TRUE(te.WaitServing(1, milliseconds(15'000))) << ReadFile(te.serve_log());

  std::vector<std::int64_t> ids;
  const auto dispatch_start = std::chrono::steady_clock::now();
  for (int i = 0; i < kJobs; ++i) {
    ProcessResult r =
        te.Run({"job:dispatch", "append", "--json", "--payload={\"n\":" + std::to_string(i) + "}"});
    ASSERT_EQ(r.exit_code, 0) << "dispatch " << i << ": " << r.Describe();
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.out;
    ASSERT_TRUE(j["created"].get<bool>());
    ids.push_back(j["id"].get<std::int64_t>());
  }
  // The last dispatch is acknowledged (committed): crash now.
  serve.Signal(SIGKILL);
  std::printf("[ measure ] %d CLI dispatches took %lld ms\n", kJobs,
              static_cast<long long>(std::chrono::duration_cast<milliseconds>(
                                         std::chrono::steady_clock::now() - dispatch_start)
                                         .count()));
  std::optional<int> killed = serve.Wait(milliseconds(10'000));
  ASSERT_TRUE(killed.has_value());
  ASSERT_TRUE(WIFSIGNALED(*killed) && WTERMSIG(*killed) == SIGKILL);

  nlohmann::json items;
  std::map<std::string, int> at_crash = StatusCounts(te, &items);
  ASSERT_EQ(items["items"].size(), static_cast<std::size_t>(kJobs));
  const int unfinished_at_crash = kJobs - at_crash["succeeded"];
  const std::string effects_at_crash = ReadFile(effects);
  std::printf(
      "[ measure ] at kill -9: %s(effect lines so far: %lld)\n", Describe(at_crash).c_str(),
      static_cast<long long>(std::count(effects_at_crash.begin(), effects_at_crash.end(), '\n')));
  // The drill only means something if the crash left work behind.
  ASSERT_GT(unfinished_at_crash, 0) << "the server finished everything before the kill; "
                                       "the drill did not exercise recovery";

  // Restart and wait (bounded) until every execution is terminal.
  ChildProcess restarted;
  ASSERT_NO_FATAL_FAILURE(te.StartServe(&restarted));
  ASSERT_TRUE(te.WaitServing(2, milliseconds(15'000))) << ReadFile(te.serve_log());
  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, int> counts;
  const bool all_done = WaitUntil(
      milliseconds(120'000),
      [&] {
        counts = StatusCounts(te, &items);
        return counts["succeeded"] + counts["failed"] + counts["quarantined"] + counts["canceled"] +
                   counts["partially_canceled"] ==
               kJobs;
      },
      milliseconds(250));
  const auto recovery_ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(all_done) << "not all terminal after 120 s: " << Describe(counts) << "\nserve log:\n"
                        << ReadFile(te.serve_log());
  std::printf("[ measure ] %d unfinished executions all terminal %lld ms after restart\n",
              unfinished_at_crash, static_cast<long long>(recovery_ms));

  // L: every acknowledged dispatch exists exactly once and succeeded.
  EXPECT_EQ(counts["succeeded"], kJobs) << Describe(counts);
  std::set<std::int64_t> listed;
  for (const auto& e : items["items"]) {
    const std::int64_t id = e["id"].get<std::int64_t>();
    EXPECT_TRUE(listed.insert(id).second) << "execution " << id << " listed twice";
    EXPECT_LE(e["attempt"].get<int>(), e["max_attempts"].get<int>()) << e.dump();
    EXPECT_EQ(e["job"], "append");
  }
  for (std::int64_t id : ids) {
    EXPECT_EQ(listed.count(id), 1u) << "dispatched execution " << id << " is missing";
    nlohmann::json shown = te.RunJson({"execution:show", std::to_string(id)});
    ASSERT_TRUE(shown.is_object());
    EXPECT_EQ(shown["status"], "succeeded") << shown.dump();
  }

  // At least once: every id appended a line (repeats allowed until the effect ledger).
  std::istringstream lines(ReadFile(effects));
  std::map<std::int64_t, int> runs;
  int total = 0;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::int64_t id = 0;
    int attempt = 0;
    ASSERT_TRUE(static_cast<bool>(fields >> id >> attempt)) << "bad line: " << line;
    runs[id]++;
    ++total;
  }
  EXPECT_GE(total, kJobs);
  for (std::int64_t id : ids)
    EXPECT_GE(runs[id], 1) << "execution " << id << " never ran its command";
  std::printf("[ measure ] effect lines: %d for %d executions (%d repeats)\n", total, kJobs,
              total - kJobs);

  restarted.Signal(SIGTERM);
  std::optional<int> status = restarted.Wait(milliseconds(15'000));
  ASSERT_TRUE(status.has_value()) << "restarted serve did not stop within 15 s of SIGTERM";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << "wait status " << *status;
}

}  // namespace
}  // namespace taskengine::testing
