// Drill RD9 (quality.md §2): kill -9 the SERVER five times during a run of
// remote-worker jobs that use effects; after the last restart L, D and S hold.
//
// Setup: a SQLite-backed `taskengine serve` (synchronous=FULL) on a fixed
// loopback port chosen up front, with NO in-process workers
// (worker_threads = 0), and a worker:manager keeping 3 worker:start processes
// (concurrency 8 each) that lease queue "remote" over HTTP. The job's
// `command` handler runs tests/cli/scripts/rd9_remote_effect.sh, which
// performs one countable effect through the HTTP effect verbs: reserve
// "notice" -> on `proceed` append the execution id to notice.txt -> commit
// (retrying calls while the server is away). The drill dispatches every job
// in bulk, then kill -9s the server when 10%, 25%, 45%, 65% and 85% of the
// effects have been performed and restarts it on the SAME port at once,
// except after the third kill, when it stays down for longer than the lease
// (so leases expire and the workers' late calls must be rejected as stale).
// The workers are never restarted: they must ride out every outage.
//
// After the last restart, once everything settled:
//   L  every dispatched execution is listed exactly once and is terminal:
//      `succeeded`, or `quarantined` with failure class `ambiguous` where an
//      earlier claim heard `proceed` and could not commit before its claim was
//      lost (E3: the effect may have happened; it is never repeated blindly).
//      Nothing is `failed` (the attempt budget is generous), and attempts
//      never exceed max_attempts (A).
//   D  notice.txt names each execution at most once; exactly once (with one
//      committed ledger entry) for each succeeded one; never more often than
//      ledger + ambiguity allow; no unknown id.
//   S  no execution was seen `running` more than one sweep interval (plus
//      kSlackMs of scheduling slack) after its lease expired, counting only
//      time the server was up; nothing is running at the end.
//   F  every commit a worker's script heard `stale` for left no committed
//      effect for that claim; the stale answers and the claims the workers
//      lost are counted and printed.
// The workers must not have crashed or exited (worker:manager restarted
// none of them).
//
// Size: the drill in quality.md is 10,000 jobs; CI runs 2,000 (about two
// minutes on 2 shared cores: each job starts a shell and two `taskengine`
// processes, about 15 jobs/s here). TE_RD9_JOBS sets the size; run the full
// drill with TE_RD9_JOBS=10000 (about 11 minutes).
#include <sys/wait.h>
#include <unistd.h>

#include <ctime>
#include <iomanip>
#include <optional>
#include <regex>

#include "drill_support.h"
#include "remote_dispatch.h"
#include "taskengine_client/client.h"

namespace taskengine::testing {
namespace {

constexpr int kLeaseMs = 3000;
constexpr int kSweepMs = 100;
// Scheduling and store latency allowed on top of lease + sweep for S.
constexpr int kSlackMs = 1000;
constexpr int kKillPercents[] = {10, 25, 45, 65, 85};
// The kill (0-based) after which the server stays down past the lease.
constexpr int kLongOutageKill = 2;
constexpr int kLongOutageMs = kLeaseMs + 1500;
constexpr int kMaxAttempts = 25;

int JobCount() {
  const char* v = std::getenv("TE_RD9_JOBS");
  return v != nullptr ? std::max(100, std::atoi(v)) : 2000;
}

// Every "listening on URL" of the serve log, in order (one per start).
std::vector<std::string> ListeningUrls(const TaskengineInstall& te) {
  const std::string log = ReadFile(te.serve_log());
  static const std::regex kListening("listening on (http://[0-9.]+:[0-9]+)");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), kListening);
       it != std::sregex_iterator(); ++it) {
    out.push_back((*it)[1].str());
  }
  return out;
}

// "2026-01-01T00:00:00.123Z" -> Unix milliseconds; 0 when unparsable.
std::int64_t UnixMillis(const std::string& s) {
  std::tm tm{};
  std::istringstream in(s);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  if (in.fail()) return 0;
  std::int64_t ms = static_cast<std::int64_t>(timegm(&tm)) * 1000;
  if (in.peek() == '.') {
    in.get();
    std::string digits;
    while (std::isdigit(in.peek())) digits.push_back(static_cast<char>(in.get()));
    ms += std::stoi((digits + "000").substr(0, 3));
  }
  return ms;
}

std::int64_t WallNowMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Lines of `path` split into whitespace-separated fields.
std::vector<std::vector<std::string>> Records(const std::string& path) {
  std::vector<std::vector<std::string>> out;
  for (const std::string& line : ReadLines(path)) {
    std::istringstream in(line);
    std::vector<std::string> fields;
    for (std::string f; in >> f;) fields.push_back(f);
    out.push_back(std::move(fields));
  }
  return out;
}

// Sum of "<word> N" figures over the worker stop lines ("stopped: leased 5,
// completed 4, failed 0, released 0, lost 1") of a worker:manager log.
std::int64_t SumWorkerFigure(const std::string& log, const std::string& word) {
  static const std::regex kStopped("stopped: leased [^\\n]*");
  std::int64_t sum = 0;
  const std::regex figure("[ ,:]" + word + " ([0-9]+)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), kStopped);
       it != std::sregex_iterator(); ++it) {
    std::smatch m;
    const std::string line = it->str();
    if (std::regex_search(line, m, figure)) sum += std::stoll(m[1].str());
  }
  return sum;
}

// Starts `taskengine serve` on `port` (TASKENGINE_HTTP_PORT, which the test
// environment otherwise sets to 0), appending to the install's serve.log.
void StartServeOnPort(const TaskengineInstall& te, int port, ChildProcess* child) {
  SpawnOptions o;
  o.env = ChildEnvironment({"TASKENGINE_HTTP_PORT=" + std::to_string(port)});
  o.cwd = te.dir().path().string();
  o.stdout_path = te.serve_log();
  o.stderr_path = te.serve_log();
  std::string error;
  ASSERT_TRUE(child->Start(te.Argv({"serve"}), o, &error)) << error;
}

int CountOf(const std::string& text, const std::string& needle) {
  int n = 0;
  for (std::size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

TEST(Rd9Drill, KillNineTheServerFiveTimesDuringARemoteWorkerRunKeepsLDS) {
  const int jobs = JobCount();
  const auto t_start = std::chrono::steady_clock::now();
  DrillFiles files;
  const int port = PickStablePort();
  ASSERT_GT(port, 0) << "no free loopback port";
  const std::string job =
      "\n[[job]]\nname = \"remote\"\nhandler = \"command\"\nqueue = "
      "\"remote\"\nlease_ms = " +
      std::to_string(kLeaseMs) +
      "\ntimeout_ms = 60000\nmax_attempts = " + std::to_string(kMaxAttempts) +
      "\nmax_consecutive_lease_expiries = " + std::to_string(kMaxAttempts) +
      "\nbackoff_base_ms = 20\nbackoff_cap_ms = 200\n"
      "config = { argv = [\"/bin/sh\", \"" TE_RD9_SCRIPT "\", \"" +
      files.dir() + "\"] }\n";
  TaskengineInstall te(EngineSection(0, 100, kSweepMs, "full") +
                       "\n[[queue]]\nname = \"remote\"\n\n[http]\nlease_per_second = 0\n"
                       "dispatch_per_second = 0\n" +
                       job);
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  nlohmann::json worker_token = te.RunJson({"token:create", "--name", "w", "--scopes", "worker"});
  nlohmann::json ops_token =
      te.RunJson({"token:create", "--name", "ops", "--scopes", "read,dispatch"});
  ASSERT_TRUE(worker_token.is_object() && ops_token.is_object());

  ChildProcess serve;
  ASSERT_NO_FATAL_FAILURE(StartServeOnPort(te, port, &serve));
  ASSERT_TRUE(te.WaitServing(1, milliseconds(20'000))) << ReadFile(te.serve_log());
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  ASSERT_EQ(ListeningUrls(te), std::vector<std::string>{url}) << ReadFile(te.serve_log());
  taskengine_client::Client ops({url, ops_token.value("secret", "")});

  // Every dispatch acknowledged (committed) before the first kill.
  std::vector<std::string> ids;
  ASSERT_NO_FATAL_FAILURE(DispatchRemoteJobs(ops, jobs, "rd9-", &ids));
  ASSERT_EQ(static_cast<int>(ids.size()), jobs);
  const long long dispatch_ms = MillisSince(t_start);

  ChildProcess manager;
  const std::string manager_log_path = te.dir().File("manager.log");
  {
    SpawnOptions o;
    o.env = ChildEnvironment({"TASKENGINE_TOKEN=" + worker_token.value("secret", "")});
    o.cwd = te.dir().path().string();
    o.stdout_path = manager_log_path;
    o.stderr_path = manager_log_path;
    std::string error;
    ASSERT_TRUE(manager.Start(
        {TASKENGINE_BIN, "worker:manager", "--server=" + url, "--queues=remote", "--workers=3",
         "--concurrency=8", "--poll-ms=1000", "--kill-grace-ms=1000", "--grace-ms=20000"},
        o, &error))
        << error;
  }

  // S, sampled while the server is up: how long past max(lease expiry, the
  // moment the server came back) an execution was still `running`.
  std::int64_t up_since_ms = WallNowMs();
  std::int64_t worst_overdue_ms = 0;
  std::string worst_overdue_id;
  int s_samples = 0;
  auto sample_s = [&] {
    auto running = ListOverHttp(ops, "running");
    if (!running) return;
    ++s_samples;
    const std::int64_t now = WallNowMs();
    for (const auto& e : *running) {
      const std::int64_t expires = UnixMillis(e.value("lease_expires_at", ""));
      if (expires <= 0) continue;
      const std::int64_t overdue = now - std::max(expires, up_since_ms);
      if (overdue > worst_overdue_ms) {
        worst_overdue_ms = overdue;
        worst_overdue_id = taskengine_client::IdToString(e["id"]);
      }
    }
  };

  // The five kills, each when the performed effects pass the next mark.
  struct Kill {
    int effects_at_kill = 0;
    long long at_ms = 0;      // since the start of the drill
    long long outage_ms = 0;  // kill -> the restarted server logs "serving"
  };
  std::vector<Kill> kills;
  // Generous: 120 s plus 100 ms per job (the run does about 15 jobs/s here).
  const int load_limit_s = 120 + jobs / 10;
  const auto load_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(load_limit_s);
  auto next_sample = std::chrono::steady_clock::now();
  while (kills.size() < std::size(kKillPercents) &&
         std::chrono::steady_clock::now() < load_deadline) {
    std::this_thread::sleep_for(milliseconds(20));
    const int effects = static_cast<int>(ReadLines(files.Effects("notice")).size());
    const int mark = jobs * kKillPercents[kills.size()] / 100;
    if (effects >= mark) {
      Kill k;
      k.effects_at_kill = effects;
      k.at_ms = MillisSince(t_start);
      const auto t_kill = std::chrono::steady_clock::now();
      serve.Signal(SIGKILL);
      std::optional<int> killed = serve.Wait(milliseconds(10'000));
      ASSERT_TRUE(killed.has_value() && WIFSIGNALED(*killed) && WTERMSIG(*killed) == SIGKILL)
          << "serve did not die of the kill -9";
      if (static_cast<int>(kills.size()) == kLongOutageKill) {
        std::this_thread::sleep_for(milliseconds(kLongOutageMs));
      }
      ASSERT_NO_FATAL_FAILURE(StartServeOnPort(te, port, &serve));
      ASSERT_TRUE(te.WaitServing(static_cast<int>(kills.size()) + 2, milliseconds(30'000)))
          << ReadFile(te.serve_log());
      up_since_ms = WallNowMs();
      k.outage_ms = MillisSince(t_kill);
      kills.push_back(k);
      // The restarted server listens where the workers look for it.
      const std::vector<std::string> urls = ListeningUrls(te);
      ASSERT_EQ(urls.size(), kills.size() + 1);
      ASSERT_EQ(urls.back(), url) << "the restarted server is not on the same port";
      continue;
    }
    if (std::chrono::steady_clock::now() >= next_sample) {
      next_sample = std::chrono::steady_clock::now() + milliseconds(500);
      sample_s();
    }
  }
  ASSERT_EQ(kills.size(), std::size(kKillPercents))
      << "the run did not reach the last kill mark within " << load_limit_s
      << " s; effects: " << ReadLines(files.Effects("notice")).size() << "\n"
      << ReadFile(manager_log_path).substr(0, 4000);
  // The drill only means something if work was left when the last kill hit.
  ASSERT_LT(kills.back().effects_at_kill, jobs)
      << "every effect was performed before the last kill";

  // L: everything terminal (bounded), sampling S meanwhile.
  const auto t_last_restart = std::chrono::steady_clock::now();
  std::vector<nlohmann::json> listed;
  std::map<std::string, nlohmann::json> by_id;
  const bool terminal = WaitUntil(
      milliseconds(240'000),
      [&] {
        sample_s();
        auto all = ListOverHttp(ops);
        if (!all) return false;
        listed = std::move(*all);
        by_id.clear();
        for (const auto& e : listed) by_id[taskengine_client::IdToString(e["id"])] = e;
        for (const std::string& id : ids) {
          auto it = by_id.find(id);
          if (it == by_id.end() || !IsTerminalStatus(it->second.value("status", ""))) return false;
        }
        return true;
      },
      milliseconds(500));
  std::map<std::string, int> status_counts;
  for (const auto& e : listed) status_counts[e.value("status", "")]++;
  std::string described;
  for (const auto& [s, n] : status_counts) described += s + "=" + std::to_string(n) + " ";
  ASSERT_TRUE(terminal) << described << "\n" << ReadFile(manager_log_path).substr(0, 4000);
  const long long settle_ms = MillisSince(t_last_restart);
  sample_s();

  // L: each dispatched id listed exactly once, nothing else listed.
  EXPECT_EQ(listed.size(), ids.size()) << "listed executions vs acknowledged dispatches";
  EXPECT_EQ(by_id.size(), listed.size()) << "an execution is listed twice";
  for (const std::string& id : ids) EXPECT_EQ(by_id.count(id), 1u) << "missing " << id;

  // What the scripts heard: reservation answers (id -> {claim version,
  // answer} in file order) and commit outcomes (id -> claim version -> exit).
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> answers;
  int stale_answers = 0, already_done = 0, ambiguous_answers = 0;
  std::map<std::string, int> answer_codes;  // reservation exit code -> count
  for (const auto& r : Records(files.answers())) {
    ASSERT_EQ(r.size(), 5u) << "bad answers line";
    answers[r[1]].emplace_back(r[2], r[3]);
    answer_codes[r[4]]++;
    stale_answers += r[4] == "12";
    already_done += r[4] == "10";
    ambiguous_answers += r[4] == "11";
  }
  std::map<std::string, std::map<std::string, std::string>> commits;
  int stale_commits = 0, failed_commits = 0;
  for (const auto& r : Records(files.dir() + "/commits.txt")) {
    ASSERT_EQ(r.size(), 3u) << "bad commits line";
    commits[r[0]][r[1]] = r[2];
    stale_commits += r[2] == "12";
    failed_commits += r[2] != "0";
  }
  // Claims ("<id> <claim version>") whose commit call went unanswered at
  // least once (the server died with it): the server may have committed it.
  std::set<std::string> commit_unanswered;
  const auto missed = Records(files.dir() + "/retries.txt");
  for (const auto& r : missed) {
    if (r.size() == 4 && r[2] == "commit") commit_unanswered.insert(r[0] + " " + r[1]);
  }
  const int missed_calls = static_cast<int>(missed.size());

  // D and the precise L outcome, per execution.
  const std::map<std::int64_t, int> lines = EffectLines(files.Effects("notice"));
  std::set<std::int64_t> known;
  for (const std::string& id : ids) known.insert(std::stoll(id));
  for (const auto& [id, n] : lines) {
    EXPECT_EQ(known.count(id), 1u) << "the effects file names unknown execution " << id;
  }
  int succeeded = 0, quarantined = 0, doubled = 0, lost_commits = 0, lost_answers = 0;
  for (const std::string& id : ids) {
    SCOPED_TRACE("execution " + id);
    auto detail = ops.GetExecution(id);
    ASSERT_TRUE(detail.ok()) << detail.status().ToString();
    const std::string status = detail->value("status", "");
    EXPECT_LE(detail->value("attempt", 0), detail->value("max_attempts", 0)) << "A";
    int committed = 0;
    for (const auto& effect : detail->value("effects", nlohmann::json::array())) {
      if (effect.value("name", "") != "notice" || !(effect.value("state", "") == "committed"))
        continue;
      ++committed;
      // F: a claim whose only commit call was answered `stale` published
      // nothing. (When an earlier call of that claim went unanswered, the
      // server may have committed it before it died; the stale answer is
      // then to the retry, which must change nothing either.)
      const std::string v = std::to_string(effect.value("claim_version", std::int64_t{0}));
      auto c = commits.find(id);
      if (c != commits.end() && c->second.count(v) && !commit_unanswered.count(id + " " + v)) {
        EXPECT_EQ(c->second.at(v), "0") << "claim " << v << " was refused its commit, yet the "
                                        << "ledger has its effect committed";
      }
    }
    const int in_file = lines.count(std::stoll(id)) ? lines.at(std::stoll(id)) : 0;
    if (in_file > 1 || committed > 1) {
      ++doubled;
      ADD_FAILURE() << "effect performed " << in_file << " times, committed " << committed
                    << " times: " << detail->dump();
    }
    if (status == "succeeded") {
      ++succeeded;
      EXPECT_EQ(committed, 1) << "succeeded without its committed effect: " << detail->dump();
      EXPECT_EQ(in_file, 1) << "succeeded but performed its effect " << in_file << " times";
    } else if (status == "quarantined") {
      ++quarantined;
      // E3: the ledger holds a reservation of an earlier claim that was
      // never committed, and a later claim heard `ambiguous`. Either that
      // claim heard `proceed` and lost its claim before its commit got
      // through (the effect may have happened: at most one line), or the
      // server was killed after recording the reservation but before its
      // answer arrived (the script never heard `proceed`: no line at all).
      EXPECT_EQ(detail->value("failure_class", ""), "ambiguous") << detail->dump();
      EXPECT_EQ(committed, 0) << detail->dump();
      std::string reserved_by;
      for (const auto& effect : detail->value("effects", nlohmann::json::array())) {
        if (effect.value("name", "") == "notice" && !(effect.value("state", "") == "committed")) {
          reserved_by = std::to_string(effect.value("claim_version", std::int64_t{0}));
        }
      }
      EXPECT_FALSE(reserved_by.empty()) << "no open reservation: " << detail->dump();
      bool heard_proceed = false, heard_ambiguous = false;
      for (const auto& [v, answer] : answers[id]) {
        if (v == reserved_by && answer == "proceed") heard_proceed = true;
        if (answer == "ambiguous" && std::stoll(v) > std::stoll("0" + reserved_by)) {
          heard_ambiguous = true;
        }
      }
      EXPECT_TRUE(heard_ambiguous) << "no later claim heard `ambiguous`: " << detail->dump();
      auto c = commits.find(id);
      EXPECT_FALSE(c != commits.end() && c->second.count(reserved_by) &&
                   c->second.at(reserved_by) == "0")
          << "the reserving claim's commit succeeded, yet nothing is committed";
      if (heard_proceed) {
        ++lost_commits;
        EXPECT_LE(in_file, 1);
      } else {
        ++lost_answers;
        EXPECT_EQ(in_file, 0) << "the effect happened although no claim heard `proceed`";
      }
    } else {
      ADD_FAILURE() << "unexpected terminal status " << status << ": " << detail->dump();
    }
  }
  EXPECT_EQ(succeeded + quarantined, jobs) << described;

  // S
  EXPECT_GT(s_samples, 0);
  EXPECT_LE(worst_overdue_ms, kSweepMs + kSlackMs)
      << "execution " << worst_overdue_id << " stayed running " << worst_overdue_ms
      << " ms past its lease (server time up only)";
  auto still_running = ListOverHttp(ops, "running");
  ASSERT_TRUE(still_running.has_value());
  EXPECT_EQ(still_running->size(), 0u);

  // The workers rode out every outage; stop them and read their counters.
  manager.Signal(SIGTERM);
  auto manager_status = manager.Wait(milliseconds(30'000));
  ASSERT_TRUE(manager_status.has_value());
  EXPECT_TRUE(WIFEXITED(*manager_status) && WEXITSTATUS(*manager_status) == 0);
  StopServe(&serve);
  const std::string manager_log = ReadFile(manager_log_path);
  EXPECT_EQ(CountOf(manager_log, "restarting"), 0) << "a worker died during the server outages:\n"
                                                   << manager_log.substr(0, 4000);
  const std::int64_t lost_claims = SumWorkerFigure(manager_log, "lost");
  const std::int64_t leased = SumWorkerFigure(manager_log, "leased");
  for (const std::string& line : ReadLines(manager_log_path)) {
    if (line.find("stopped: leased") != std::string::npos) std::cout << line << "\n";
  }

  std::string codes;
  for (const auto& [code, n] : answer_codes) codes += " " + code + "=" + std::to_string(n);
  std::string kill_figures;
  for (const Kill& k : kills) {
    kill_figures += " [at " + std::to_string(k.at_ms) + " ms, " +
                    std::to_string(k.effects_at_kill) + " effects done, down " +
                    std::to_string(k.outage_ms) + " ms]";
  }
  std::cout << "[ measure ] RD9: " << jobs << " executions (dispatched in " << dispatch_ms
            << " ms), " << kills.size() << " server kill -9s:" << kill_figures << "\n"
            << "[ measure ] RD9: " << succeeded << " succeeded, " << quarantined
            << " quarantined (ambiguous: " << lost_commits << " commits lost, " << lost_answers
            << " reservation answers lost), " << doubled << " doubled effects; duplicates "
            << "prevented: " << already_done << " already_done + " << ambiguous_answers
            << " ambiguous answers; F: " << stale_answers << " stale reservations, "
            << stale_commits << " stale commits (" << failed_commits << " commits failed), "
            << lost_claims << " claims lost by workers (" << leased << " leases); " << missed_calls
            << " effect calls retried while the server was down\n"
            << "[ measure ] RD9: reservation exit codes:" << codes << "\n"
            << "[ measure ] RD9: worst lease overrun " << worst_overdue_ms << " ms over "
            << s_samples << " samples (lease " << kLeaseMs << " ms, sweep " << kSweepMs
            << " ms); settled " << settle_ms << " ms after the last restart; total "
            << MillisSince(t_start) << " ms" << std::endl;
}

}  // namespace
}  // namespace taskengine::testing
