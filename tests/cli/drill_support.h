// Shared pieces of the effect drills (quality.md §2: RD2, RD4, RD5, RD7, RD15,
// RD16) and of the operator CLI tests: `command` jobs whose shell scripts
// perform COUNTABLE effects through the effect verbs, and the invariant checks
// L, D and A over what the real binary reports.
//
// A countable effect: the script reserves effect NAME with
// `taskengine effect:reserve`, and only on `proceed` appends "<execution id>"
// to <drill dir>/<NAME>.txt and commits it. Every reservation answer is
// appended to <drill dir>/answers.txt as
// "<NAME> <execution id> <claim version> <answer> <exit code>", so a drill can
// tell which claim heard what. Scripts never wait unboundedly: waits poll for
// <drill dir>/go-<execution id> or <drill dir>/go-all and give up after 15 s,
// so no script outlives a failed test by long (DrillFiles' destructor creates
// go-all).
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_harness.h"

namespace taskengine::testing {

using std::chrono::milliseconds;

// The files a drill's scripts write and read.
class DrillFiles {
 public:
  DrillFiles() = default;
  ~DrillFiles() { std::ofstream(dir_.File("go-all")) << "end of test\n"; }
  DrillFiles(const DrillFiles&) = delete;
  DrillFiles& operator=(const DrillFiles&) = delete;

  std::string dir() const { return dir_.path().string(); }
  // One "<execution id>" line per performed effect NAME.
  std::string Effects(const std::string& name = "notice") const { return dir_.File(name + ".txt"); }
  std::string answers() const { return dir_.File("answers.txt"); }
  // "<execution id> <claim version>" when a script starts.
  std::string started() const { return dir_.File("started.txt"); }

  // Lets the script of execution `id` (or every script) past its wait.
  void Go(std::int64_t id) const { std::ofstream(dir_.File("go-" + std::to_string(id))) << "go\n"; }
  void GoAll() const { std::ofstream(dir_.File("go-all")) << "go\n"; }

 private:
  TempDir dir_;
};

// Shell that records the start: "<id> <claim version>" to started.txt.
inline std::string StartLine(const DrillFiles& f) {
  return R"(id=$TASKENGINE_EXECUTION_ID; v=$TASKENGINE_CLAIM_VERSION
echo "$id $v" >> ')" +
         f.started() + "'\n";
}

// Shell that waits (at most 15 s) until the test lets this execution go.
inline std::string WaitForGo(const DrillFiles& f) {
  return "i=0; while [ ! -e '" + f.dir() + "/go-'\"$TASKENGINE_EXECUTION_ID\" ] && [ ! -e '" +
         f.dir() + "/go-all' ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done\n";
}

// Shell performing countable effect `name` (see the file comment). Sets
// `performed=1` when this run performed it. On `ambiguous` the script exits 76
// (the handler's Ambiguous); on stale, canceled or any error, 75 (retryable:
// the engine decides what happens, a stale outcome is dropped anyway).
inline std::string CountableEffect(const DrillFiles& f, const std::string& name) {
  return R"(answer=$("$TASKENGINE_BIN" effect:reserve )" + name + R"(); rc=$?
echo ")" +
         name +
         R"( $TASKENGINE_EXECUTION_ID $TASKENGINE_CLAIM_VERSION ${answer:-error} $rc" >> ')" +
         f.answers() + R"('
case $rc in
  0) echo "$TASKENGINE_EXECUTION_ID" >> ')" +
         f.Effects(name) + R"('
     "$TASKENGINE_BIN" effect:commit )" +
         name + R"( --detail "$TASKENGINE_EXECUTION_ID-)" + name + R"(" > /dev/null || exit 75
     performed=1 ;;
  10) ;;
  11) exit 76 ;;
  *) exit 75 ;;
esac
)";
}

// A [[job]] table running `script` with /bin/sh -c; `keys` are extra TOML
// lines (lease_ms = ..., max_attempts = ...).
inline std::string ShellJob(const std::string& name, const std::string& script,
                            const std::string& keys = "") {
  return "\n[[job]]\nname = \"" + name + "\"\nhandler = \"command\"\n" + keys +
         "\nconfig = { argv = [\"/bin/sh\", \"-c\", '''\n" + script + "'''] }\n";
}

// [database], [engine] (plus `engine_keys` lines) and one queue. Polls and
// sweeps fast so drills stay short.
inline std::string EngineSection(int workers, int poll_ms = 100, int sweep_ms = 100,
                                 const std::string& sync = "full",
                                 const std::string& engine_keys = "") {
  return "[database]\nsync = \"" + sync +
         "\"\n\n[engine]\nworker_threads = " + std::to_string(workers) +
         "\npoll_interval_ms = " + std::to_string(poll_ms) +
         "\nsweep_interval_ms = " + std::to_string(sweep_ms) + "\nshutdown_grace_ms = 5000\n" +
         engine_keys + "\n[[queue]]\nname = \"default\"\n";
}

// Lines of a file (without the newline); empty when it does not exist.
inline std::vector<std::string> ReadLines(const std::string& path) {
  std::istringstream in(ReadFile(path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// How many lines of an effects file name each execution id.
inline std::map<std::int64_t, int> EffectLines(const std::string& path) {
  std::map<std::int64_t, int> count;
  for (const std::string& line : ReadLines(path)) count[std::stoll(line)]++;
  return count;
}

// The answers.txt lines of effect `name` for execution `id`, as
// {claim version, answer} in file order.
inline std::vector<std::pair<std::int64_t, std::string>> Answers(const DrillFiles& f,
                                                                 const std::string& name,
                                                                 std::int64_t id) {
  std::vector<std::pair<std::int64_t, std::string>> out;
  for (const std::string& line : ReadLines(f.answers())) {
    std::istringstream fields(line);
    std::string effect, answer;
    std::int64_t exec = 0, version = 0;
    int rc = 0;
    if (!(fields >> effect >> exec >> version >> answer >> rc)) continue;
    if (effect == name && exec == id) out.emplace_back(version, answer);
  }
  return out;
}

// The last "listening on http://..." URL of the serve log ("" when none yet).
inline std::string ServeUrl(const TaskengineInstall& te) {
  const std::string log = ReadFile(te.serve_log());
  static const std::regex kListening("listening on (http://[0-9.]+:[0-9]+)");
  std::string url;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), kListening);
       it != std::sregex_iterator(); ++it) {
    url = (*it)[1];
  }
  return url;
}

// Dispatches through the CLI and returns the new id (0 after a test failure).
inline std::int64_t DispatchJob(const TaskengineInstall& te, const std::string& job,
                                const std::string& payload = "{}") {
  nlohmann::json j = te.RunJson({"job:dispatch", job, "--payload", payload});
  if (!j.is_object()) return 0;
  EXPECT_TRUE(j.value("created", false)) << j.dump();
  return j.value("id", std::int64_t{0});
}

inline nlohmann::json ShowJson(const TaskengineInstall& te, std::int64_t id) {
  return te.RunJson({"execution:show", std::to_string(id)});
}

inline bool IsTerminalStatus(const std::string& s) {
  return s == "succeeded" || s == "failed" || s == "quarantined" || s == "canceled" ||
         s == "partially_canceled";
}

// Waits until execution `id` satisfies `pred` (its execution:show --json).
// The last document is left in *last.
template <typename Pred>
bool WaitExecution(const TaskengineInstall& te, std::int64_t id, milliseconds timeout, Pred pred,
                   nlohmann::json* last) {
  return WaitUntil(
      timeout,
      [&] {
        *last = ShowJson(te, id);
        return last->is_object() && pred(*last);
      },
      milliseconds(100));
}

// Every execution, by id, from execution:list --json.
inline std::map<std::int64_t, nlohmann::json> ListAll(const TaskengineInstall& te) {
  std::map<std::int64_t, nlohmann::json> out;
  nlohmann::json j = te.RunJson({"execution:list", "--limit=1000"});
  if (!j.is_object()) return out;
  for (const auto& e : j["items"]) out[e["id"].get<std::int64_t>()] = e;
  return out;
}

inline std::string DescribeStatuses(const std::map<std::int64_t, nlohmann::json>& all) {
  std::map<std::string, int> counts;
  for (const auto& [id, e] : all) counts[e["status"].get<std::string>()]++;
  std::string s;
  for (const auto& [status, n] : counts) s += status + "=" + std::to_string(n) + " ";
  return s;
}

// L: waits (bounded) until every id in `ids` is terminal.
inline bool WaitAllTerminal(const TaskengineInstall& te, const std::vector<std::int64_t>& ids,
                            milliseconds timeout, std::map<std::int64_t, nlohmann::json>* all) {
  return WaitUntil(
      timeout,
      [&] {
        *all = ListAll(te);
        for (std::int64_t id : ids) {
          auto it = all->find(id);
          if (it == all->end() || !IsTerminalStatus(it->second["status"].get<std::string>())) {
            return false;
          }
        }
        return true;
      },
      milliseconds(200));
}

// The invariants every drill checks at its end, for the executions `ids` and
// the countable effect `name`:
//   L  every id exists exactly once and is terminal;
//   D  at most one committed ledger entry per effect key, the effects file
//      names an id exactly as often as its ledger has the effect committed
//      (`expected_lines` gives that count per id: 0 or 1), and no other id
//      appears in the file;
//   A  attempt <= max_attempts.
// Returns the execution:show documents by id.
inline std::map<std::int64_t, nlohmann::json> ExpectInvariants(
    const TaskengineInstall& te, const DrillFiles& files, const std::vector<std::int64_t>& ids,
    const std::map<std::int64_t, int>& expected_lines, const std::string& name = "notice") {
  std::map<std::int64_t, nlohmann::json> shown;
  std::map<std::int64_t, nlohmann::json> all = ListAll(te);
  const std::map<std::int64_t, int> lines = EffectLines(files.Effects(name));
  std::set<std::int64_t> known(ids.begin(), ids.end());
  for (const auto& [id, n] : lines) {
    EXPECT_EQ(known.count(id), 1u)
        << "the effects file names execution " << id << ", which the drill did not dispatch";
  }
  for (std::int64_t id : ids) {
    SCOPED_TRACE("execution " + std::to_string(id));
    // L
    EXPECT_EQ(all.count(id), 1u) << "acknowledged dispatch " << id << " is missing";
    nlohmann::json j = ShowJson(te, id);
    if (!j.is_object()) {
      ADD_FAILURE() << "execution:show " << id << " failed";
      continue;
    }
    EXPECT_TRUE(IsTerminalStatus(j["status"].get<std::string>())) << j["status"];
    // A
    EXPECT_LE(j["attempt"].get<int>(), j["max_attempts"].get<int>()) << j.dump();
    // D
    std::map<std::string, int> committed;
    for (const auto& e : j["effects"]) {
      if (e["state"] == "committed") committed[e["key"].get<std::string>()]++;
    }
    for (const auto& [key, n] : committed) {
      EXPECT_EQ(n, 1) << key << " committed " << n << " times";
    }
    const std::string key = std::to_string(id) + ":" + name;
    const int in_file = lines.count(id) ? lines.at(id) : 0;
    EXPECT_LE(in_file, 1) << "effect " << key << " happened " << in_file << " times";
    EXPECT_EQ(in_file, committed.count(key) ? committed[key] : 0)
        << "the effects file and the ledger disagree about " << key << ": " << j["effects"].dump();
    auto want = expected_lines.find(id);
    if (want != expected_lines.end()) {
      EXPECT_EQ(in_file, want->second) << key;
    }
    shown[id] = std::move(j);
  }
  return shown;
}

// Stops a serve with SIGTERM (bounded); SIGKILL if it does not stop.
inline void StopServe(ChildProcess* serve) {
  if (!serve->running()) return;
  serve->Signal(SIGTERM);
  if (!serve->Wait(milliseconds(10'000)).has_value()) {
    ADD_FAILURE() << "serve did not stop within 10 s of SIGTERM";
    serve->Kill();
  }
}

// Prints a "[ measure ]" line with the milliseconds since `t0`.
inline long long MillisSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace taskengine::testing
