// The black-box soak (issue 12; quality.md §2): the real `taskengine serve`
// under a seeded random stream of work and faults, judged only from what its
// public API answers and from an effect ledger outside the engine.
//
// World: `serve` nodes (SQLite: one; PostgreSQL: two on one throwaway
// cluster) with in-process workers, and a `worker:manager` keeping two remote
// `worker:start` processes on node 0 for the queue `remote` (pool = false:
// the nodes' pools leave it to them). Jobs:
//   work    `command` script on the nodes' pools: sleeps 0.1-0.6 s (so
//           cancels land mid-flight), performs the countable effect `notice`
//           through effect:reserve/commit (tests/cli/drill_support.h), and
//           exits 75 (retryable) when its payload says "fail" — after its
//           effect, so retries and replays must answer already_done.
//   remote  the same effect from tests/cli/scripts/rd9_remote_effect.sh on
//           the remote workers (worker:effect over HTTP).
//   tick    a cron job firing every minute (C).
// Every effect appends "<execution id>" to notice.txt only on `proceed`, and
// every reservation answer goes to answers.txt: that is the outside ledger.
//
// The seeded stream (one decision every 50-250 ms, about 4 new executions a
// second, which the scripts' processes keep up with here): dispatches over HTTP,
// single and bulk, with idempotency keys and, for one in eight, one of six
// lanes; repeats of acknowledged keys (must answer the same execution) and
// conflicting repeats (must answer 409); cancels of recent executions;
// replays of failed and quarantined ones (an ambiguous one with `assume done`
// when the outside ledger shows the effect, else `keep`). One fault at a
// time, 1-4 s apart: kill -9 of a node (down 0-3 s), SIGSTOP of a node past
// its leases, kill -9 or SIGSTOP of a remote worker, kill -9 of a handler
// script, and on PostgreSQL `pg_ctl stop -m immediate` with a restart.
// Dispatches that got no answer are sent again with the same key at the end,
// as a client would. Then every fault ends, lanes held by a failed or
// quarantined head are released by canceling the head, and once everything
// is terminal the invariants are checked:
//   L  every acknowledged dispatch is listed exactly once and is terminal; a
//      repeated key always named the same execution;
//   D  notice.txt names an execution at most once and only dispatched ones;
//      at most one reservation per execution heard `proceed`; every committed
//      ledger entry has its line, every line a ledger entry (committed, or
//      reserved and surfaced); succeeded means exactly one committed effect;
//      canceled means none committed, partially_canceled lists its escapes;
//   S  sampled every second while every node and the database are up:
//      nothing `running` more than a sweep interval (plus slack) past its
//      lease or the end of the last node or database fault;
//   F  a commit a remote worker heard `stale` for (with no unanswered earlier
//      call) left no committed effect of that claim;
//   A  attempt <= max_attempts; `failed` only once the attempts ran out;
//   C  one `tick` execution per fire time.
//
// Environment: TASKENGINE_SOAK_SEED (a number or "random"; printed),
// TASKENGINE_BLACKBOX_SECONDS (seconds of faults per backend; default 60).
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <thread>

#include "core/time_text.h"
#include "drill_support.h"
#include "multinode_support.h"
#include "remote_dispatch.h"
#include "soak_support.h"
#include "taskengine_client/client.h"

namespace taskengine::testing {
namespace {

using Clock = std::chrono::steady_clock;
using taskengine_client::Client;
using Json = nlohmann::json;

constexpr int kLeaseMs = 2000;
constexpr int kSweepMs = 200;
// Scheduling and store latency allowed on top of lease + sweep for S.
constexpr int kSlackMs = 1500;
constexpr int kMaxAttempts = 4;
constexpr int kLanes = 6;

int SoakSeconds() {
  const char* v = std::getenv("TASKENGINE_BLACKBOX_SECONDS");
  if (v == nullptr) return 60;
  const int s = std::atoi(v);
  if (s < 5) {
    ADD_FAILURE() << "TASKENGINE_BLACKBOX_SECONDS='" << v << "' (5 or more)";
    return 5;
  }
  return s;
}

std::int64_t WallNowMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A string field; "" when absent, null or not a string.
std::string Str(const Json& j, const char* field) {
  auto it = j.find(field);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// RFC 3339 -> Unix ms; 0 when absent or unparsable.
std::int64_t UnixMs(const Json& e, const char* field) {
  if (!e.contains(field) || !e[field].is_string()) return 0;
  auto ms = ParseTime(e[field].get<std::string>());
  return ms.ok() ? *ms : 0;
}

// Every execution (of `status` and `job` when not empty) over the API,
// retried for up to 10 s; a test failure naming the last error after that.
std::vector<Json> ListEventually(Client& client, const std::string& status = "",
                                 const std::string& job = "") {
  taskengine_client::Status error;
  for (int i = 0; i < 20; ++i) {
    if (auto items = ListOverHttp(client, status, job, &error)) return std::move(*items);
    std::this_thread::sleep_for(milliseconds(500));
  }
  ADD_FAILURE() << "listing executions (status '" << status << "', job '" << job
                << "') failed: " << error.ToString();
  return {};
}

// One `taskengine serve` on a fixed loopback port (it comes back on the same
// port after a kill, where the remote workers look for it).
class SoakNode {
 public:
  SoakNode(std::string config, std::string log, std::string cwd, int port, std::string token)
      : config_(std::move(config)),
        log_(std::move(log)),
        cwd_(std::move(cwd)),
        port_(port),
        client_({url(), std::move(token), milliseconds(3000)}) {}

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  Client& client() { return client_; }
  pid_t pid() const { return child_.pid(); }
  bool up() const { return child_.running() && !stopped_; }
  std::string log() const { return ReadFile(log_); }

  // Starts serve and waits for its "serving" line (false after 30 s).
  bool Start() {
    SpawnOptions o;
    o.env = ChildEnvironment({"TASKENGINE_HTTP_PORT=" + std::to_string(port_)});
    o.cwd = cwd_;
    o.stdout_path = log_;
    o.stderr_path = log_;
    std::string error;
    if (!child_.Start({TASKENGINE_BIN, "--config", config_, "serve"}, o, &error)) {
      ADD_FAILURE() << error;
      return false;
    }
    ++starts_;
    return WaitUntil(std::chrono::seconds(30), [&] {
      const std::string text = ReadFile(log_);
      int n = 0;
      for (std::size_t p = text.find("serving ("); p != std::string::npos;
           p = text.find("serving (", p + 1)) {
        ++n;
      }
      return n >= starts_;
    });
  }
  void Kill9() {
    if (stopped_) Continue();
    child_.Signal(SIGKILL);
    child_.Wait(milliseconds(10'000));
  }
  void Stop() {
    kill(child_.pid(), SIGSTOP);
    stopped_ = true;
  }
  void Continue() {
    kill(child_.pid(), SIGCONT);
    stopped_ = false;
  }
  // SIGTERM, bounded.
  void Shutdown() {
    if (stopped_) Continue();
    StopServe(&child_);
  }

 private:
  std::string config_, log_, cwd_;
  int port_;
  Client client_;
  ChildProcess child_;
  int starts_ = 0;
  bool stopped_ = false;
};

enum class FaultKind {
  kKillNode,
  kStopNode,
  kKillWorker,
  kStopWorker,
  kKillHandler,
  kRestartDatabase
};

const char* Name(FaultKind k) {
  switch (k) {
    case FaultKind::kKillNode:
      return "kill -9 node";
    case FaultKind::kStopNode:
      return "SIGSTOP node";
    case FaultKind::kKillWorker:
      return "kill -9 worker";
    case FaultKind::kStopWorker:
      return "SIGSTOP worker";
    case FaultKind::kKillHandler:
      return "kill -9 handler";
    case FaultKind::kRestartDatabase:
      return "database restart";
  }
  return "?";
}

// A fault of a worker or handler process: the nodes and their sweepers run on.
bool ProcessFault(FaultKind k) {
  return k == FaultKind::kKillWorker || k == FaultKind::kStopWorker || k == FaultKind::kKillHandler;
}

// One dispatch as the soak sent it (to repeat it with the same key).
struct Sent {
  std::string job;
  Json payload;
  std::string lane;
  std::string key;
};

class BlackboxSoak {
 public:
  BlackboxSoak(std::uint64_t seed, int seconds, bool postgres)
      : seed_(seed), seconds_(seconds), postgres_(postgres), random_(seed), fault_random_(~seed) {}

  void Run() {
    [&] {
      ASSERT_NO_FATAL_FAILURE(SetUp());
      ASSERT_NO_FATAL_FAILURE(FaultPhase());
      ASSERT_NO_FATAL_FAILURE(Settle());
      ASSERT_NO_FATAL_FAILURE(Check());
    }();
    for (auto& node : nodes_) node->Shutdown();
    manager_.Signal(SIGTERM);
    manager_.Wait(milliseconds(20'000));
    // TASKENGINE_SOAK_KEEP=<dir>: the logs, the database (SQLite) and the
    // outside ledger are copied there for a post-mortem.
    if (const char* keep = std::getenv("TASKENGINE_SOAK_KEEP"); keep != nullptr && *keep != 0) {
      std::error_code ec;
      const std::filesystem::path to = std::filesystem::path(keep) / std::to_string(seed_);
      std::filesystem::create_directories(to, ec);
      const auto options = std::filesystem::copy_options::recursive |
                           std::filesystem::copy_options::overwrite_existing;
      std::filesystem::copy(work_.path(), to / "work", options, ec);
      std::filesystem::copy(files_.dir(), to / "ledger", options, ec);
      std::cout << "[ keep ] " << to.string() << (ec ? " (" + ec.message() + ")" : "") << std::endl;
    }
  }

 private:
  // ---- setup ----

  std::string Toml() const {
    std::string db = postgres_
                         ? "[database]\nurl = \"" + pg_url_ + "\"\n"
                         : "[database]\npath = \"" + work_.File("te.db") + "\"\nsync = \"full\"\n";
    const std::string keys = "lease_ms = " + std::to_string(kLeaseMs) +
                             "\nmax_attempts = " + std::to_string(kMaxAttempts) +
                             "\nbackoff_base_ms = 50\nbackoff_cap_ms = 300\ntimeout_ms = 30000\n";
    const std::string work_script =
        "payload=$(cat)\n"
        "d=$(printf '%s' \"$payload\" | sed -n 's/.*\"d\":\"\\([0-9]*\\)\".*/\\1/p')\n"
        "sleep \"0.${d:-1}\"\n" +
        CountableEffect(files_, "notice") +
        "case \"$payload\" in *'\"fail\":true'*) exit 75 ;; esac\nexit 0\n";
    return db + "\n[engine]\nworker_threads = 6\npoll_interval_ms = 100\nsweep_interval_ms = " +
           std::to_string(kSweepMs) +
           "\nshutdown_grace_ms = 3000\n\n[http]\nport = 0\nlease_per_second = 0\n"
           "dispatch_per_second = 0\n\n[[queue]]\nname = \"default\"\n\n[[queue]]\nname = "
           "\"remote\"\npool = false\n" +
           ShellJob("work", work_script, keys) +
           "\n[[job]]\nname = \"remote\"\nhandler = \"command\"\nqueue = \"remote\"\n" + keys +
           "config = { argv = [\"/bin/sh\", \"" TE_RD9_SCRIPT "\", \"" + files_.dir() +
           "\"] }\n"
           "\n[[job]]\nname = \"tick\"\nhandler = \"command\"\nschedule = \"* * * * *\"\n"
           "config = { argv = [\"/bin/true\"] }\n";
  }

  Json Cli(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {TASKENGINE_BIN, "--config", config_};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--json");
    ProcessResult r =
        RunProcess(argv, "", std::chrono::seconds(60), ChildEnvironment(), work_.path().string());
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    return Json::parse(r.out, nullptr, false);
  }

  void SetUp() {
    if (postgres_) {
      pg_ = std::make_unique<PgCluster>();
      pg_url_ = pg_->Start();
      ASSERT_FALSE(pg_url_.empty());
    }
    config_ = work_.File("taskengine.toml");
    std::ofstream(config_) << Toml();
    ProcessResult migrate =
        RunProcess({TASKENGINE_BIN, "--config", config_, "migrate"}, "", std::chrono::seconds(60),
                   ChildEnvironment(), work_.path().string());
    ASSERT_EQ(migrate.exit_code, 0) << migrate.Describe();
    const Json worker = Cli({"token:create", "--name", "w", "--scopes", "worker"});
    const Json ops = Cli({"token:create", "--name", "ops", "--scopes", "read,dispatch,operate"});
    ASSERT_TRUE(worker.is_object() && ops.is_object());
    const int count = postgres_ ? 2 : 1;
    for (int i = 0; i < count; ++i) {
      const int port = PickStablePort();
      ASSERT_GT(port, 0);
      nodes_.push_back(
          std::make_unique<SoakNode>(config_, work_.File("node" + std::to_string(i) + ".log"),
                                     work_.path().string(), port, ops.value("secret", "")));
      ASSERT_TRUE(nodes_.back()->Start()) << nodes_.back()->log();
    }
    manager_log_ = work_.File("manager.log");
    SpawnOptions o;
    o.env = ChildEnvironment({"TASKENGINE_TOKEN=" + worker.value("secret", "")});
    o.cwd = work_.path().string();
    o.stdout_path = manager_log_;
    o.stderr_path = manager_log_;
    std::string error;
    ASSERT_TRUE(manager_.Start({TASKENGINE_BIN, "worker:manager", "--server=" + nodes_[0]->url(),
                                "--queues=remote", "--workers=2", "--concurrency=4",
                                "--poll-ms=500", "--kill-grace-ms=1000", "--grace-ms=10000"},
                               o, &error))
        << error;
  }

  // ---- the random stream ----

  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(random_); }
  // The faults draw from a stream of their own, so that one seed gives the
  // same faults in the same order whatever the timing of the operations.
  int FaultUniform(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(fault_random_);
  }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(random_) < p; }

  // A node that answers (round robin among the live ones); nullptr when none.
  SoakNode* LiveNode() {
    std::vector<SoakNode*> live;
    for (auto& n : nodes_) {
      if (n->up()) live.push_back(n.get());
    }
    if (live.empty()) return nullptr;
    return live[static_cast<std::size_t>(Uniform(0, static_cast<int>(live.size()) - 1))];
  }

  Sent NewDispatch() {
    Sent s;
    const int n = next_++;
    s.job = Chance(0.25) ? "remote" : "work";
    s.payload = {{"n", n}};
    if (s.job == "work") {
      s.payload["d"] = std::to_string(Uniform(1, 6));
      if (Chance(0.06)) s.payload["fail"] = true;
    }
    if (Chance(0.12)) s.lane = "lane-" + std::to_string(Uniform(0, kLanes - 1));
    s.key = "soak-" + std::to_string(seed_) + "-" + std::to_string(n);
    return s;
  }

  // Records the answer to `s`: acknowledged (with its id), or pending again.
  void Acknowledge(const Sent& s, const std::string& id, bool created) {
    auto it = ack_.find(s.key);
    if (it != ack_.end()) {
      EXPECT_EQ(it->second, id) << "L: key " << s.key << " named two executions";
      EXPECT_FALSE(created) << "L: a repeat of " << s.key << " created a new execution";
      return;
    }
    ack_[s.key] = id;
    sent_[s.key] = s;
    ids_.push_back(id);
    ++by_job_[s.job];
  }

  void DispatchOne(const Sent& s) {
    SoakNode* node = LiveNode();
    if (node == nullptr) {
      pending_.push_back(s);
      return;
    }
    taskengine_client::DispatchOptions o;
    o.payload = s.payload;
    o.idempotency_key = s.key;
    o.lane = s.lane;
    auto r = node->client().Dispatch(s.job, o);
    if (r.ok()) {
      Acknowledge(s, r->id, r->created);
    } else if (r.status().retryable() || r.status().http_status() >= 500) {
      pending_.push_back(s);
      ++unanswered_;
    } else {
      ADD_FAILURE() << "dispatch " << s.key << ": " << r.status().ToString();
    }
  }

  void DispatchBulk(int count) {
    SoakNode* node = LiveNode();
    std::vector<Sent> batch;
    std::vector<taskengine_client::BulkItem> items;
    for (int i = 0; i < count; ++i) {
      batch.push_back(NewDispatch());
      taskengine_client::BulkItem item;
      item.job = batch.back().job;
      item.options.payload = batch.back().payload;
      item.options.idempotency_key = batch.back().key;
      item.options.lane = batch.back().lane;
      items.push_back(std::move(item));
    }
    if (node == nullptr) {
      pending_.insert(pending_.end(), batch.begin(), batch.end());
      return;
    }
    auto r = node->client().DispatchBulk(items);
    if (!r.ok()) {
      if (r.status().retryable() || r.status().http_status() >= 500) {
        pending_.insert(pending_.end(), batch.begin(), batch.end());
        ++unanswered_;
      } else {
        ADD_FAILURE() << "bulk dispatch: " << r.status().ToString();
      }
      return;
    }
    ASSERT_EQ(r->size(), batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      ASSERT_TRUE((*r)[i].status.ok()) << (*r)[i].status.ToString();
      Acknowledge(batch[i], (*r)[i].result.id, (*r)[i].result.created);
    }
    ++bulks_;
  }

  // An acknowledged key sent again: the same execution, never a new one; or
  // with a different payload: 409.
  void Repeat(bool conflicting) {
    if (ids_.empty()) return;
    auto it = sent_.begin();
    std::advance(it, Uniform(0, static_cast<int>(sent_.size()) - 1));
    Sent s = it->second;
    SoakNode* node = LiveNode();
    if (node == nullptr) return;
    taskengine_client::DispatchOptions o;
    o.payload = s.payload;
    if (conflicting) o.payload["other"] = true;
    o.idempotency_key = s.key;
    o.lane = s.lane;
    auto r = node->client().Dispatch(s.job, o);
    if (!r.ok() && r.status().retryable()) return;
    if (conflicting) {
      EXPECT_EQ(r.status().http_status(), 409) << s.key << ": " << r.status().ToString();
      ++conflicts_;
      return;
    }
    ASSERT_TRUE(r.ok()) << "repeat of " << s.key << ": " << r.status().ToString();
    Acknowledge(s, r->id, r->created);
    ++repeats_;
  }

  void CancelRecent() {
    if (ids_.empty()) return;
    const int lo = std::max(0, static_cast<int>(ids_.size()) - 40);
    const std::string id =
        ids_[static_cast<std::size_t>(Uniform(lo, static_cast<int>(ids_.size()) - 1))];
    SoakNode* node = LiveNode();
    if (node == nullptr) return;
    auto r = node->client().Cancel(id, "soak");
    if (r.ok()) {
      ++cancels_;
    } else if (!r.status().retryable()) {
      // A terminal execution cannot be canceled: 409.
      EXPECT_EQ(r.status().http_status(), 409) << id << ": " << r.status().ToString();
    }
  }

  // Replays one failed or quarantined execution seen in the last listing.
  void ReplayOne() {
    if (replayable_.empty()) return;
    auto it = replayable_.begin();
    std::advance(it, Uniform(0, static_cast<int>(replayable_.size()) - 1));
    const std::string id = it->first;
    const std::string failure_class = it->second;
    replayable_.erase(it);
    SoakNode* node = LiveNode();
    if (node == nullptr) return;
    std::string assume;
    if (failure_class == "ambiguous") {
      // The careful operator looks at the sink: the effect happened -> done.
      const auto lines = EffectLines(files_.Effects("notice"));
      assume = lines.count(std::stoll(id)) ? "done" : "keep";
    }
    auto r = node->client().Replay(id, "soak replay", assume);
    if (r.ok()) {
      ++replays_;
      if (assume == "done") assumed_done_.insert(id);
    } else if (!r.status().retryable()) {
      // It may have been canceled or replayed meanwhile.
      EXPECT_EQ(r.status().http_status(), 409) << id << ": " << r.status().ToString();
    }
  }

  // Lists running executions (S) and the failed/quarantined ones (to replay).
  void Sample(bool healthy) {
    SoakNode* node = LiveNode();
    if (node == nullptr) return;
    if (healthy) {
      auto running = ListOverHttp(node->client(), "running");
      if (running) {
        ++s_samples_;
        const std::int64_t now = WallNowMs();
        for (const auto& e : *running) {
          const std::int64_t expires = UnixMs(e, "lease_expires_at");
          if (expires <= 0) continue;
          const std::int64_t overdue = now - std::max(expires, healthy_since_ms_);
          if (overdue > worst_overdue_ms_) {
            worst_overdue_ms_ = overdue;
            worst_overdue_id_ = taskengine_client::IdToString(e["id"]);
          }
        }
      }
    }
    for (const char* status : {"failed", "quarantined"}) {
      auto list = ListOverHttp(node->client(), status);
      if (!list) continue;
      for (const auto& e : *list) {
        if (Str(e, "job") == "tick") continue;
        replayable_[taskengine_client::IdToString(e["id"])] = Str(e, "failure_class");
      }
    }
  }

  // ---- faults ----

  std::vector<pid_t> Workers() { return ChildrenOf(manager_.pid()); }

  void StartFault() {
    std::vector<FaultKind> kinds = {FaultKind::kKillNode, FaultKind::kStopNode,
                                    FaultKind::kKillWorker, FaultKind::kStopWorker,
                                    FaultKind::kKillHandler};
    if (postgres_) kinds.push_back(FaultKind::kRestartDatabase);
    const FaultKind kind =
        kinds[static_cast<std::size_t>(FaultUniform(0, static_cast<int>(kinds.size()) - 1))];
    fault_ = kind;
    fault_node_ = FaultUniform(0, static_cast<int>(nodes_.size()) - 1);
    fault_pid_ = 0;
    int duration_ms = 0;
    switch (kind) {
      case FaultKind::kKillNode:
        nodes_[fault_node_]->Kill9();
        duration_ms = FaultUniform(0, 3000);
        break;
      case FaultKind::kStopNode:
        nodes_[fault_node_]->Stop();
        duration_ms = kLeaseMs + FaultUniform(500, 2500);
        break;
      case FaultKind::kKillWorker:
      case FaultKind::kStopWorker: {
        const std::vector<pid_t> workers = Workers();
        if (workers.empty()) break;
        fault_pid_ = workers[static_cast<std::size_t>(
            FaultUniform(0, static_cast<int>(workers.size()) - 1))];
        if (kind == FaultKind::kKillWorker) {
          kill(fault_pid_, SIGKILL);
        } else {
          kill(fault_pid_, SIGSTOP);
          duration_ms = kLeaseMs + FaultUniform(500, 2500);
        }
        break;
      }
      case FaultKind::kKillHandler: {
        const std::vector<pid_t> scripts = ChildrenOf(nodes_[fault_node_]->pid());
        if (scripts.empty()) break;
        kill(scripts[static_cast<std::size_t>(
                 FaultUniform(0, static_cast<int>(scripts.size()) - 1))],
             SIGKILL);
        break;
      }
      case FaultKind::kRestartDatabase:
        pg_->StopImmediate();
        duration_ms = FaultUniform(0, 3000);
        break;
    }
    ++faults_[Name(kind)];
    fault_ends_ = Clock::now() + milliseconds(duration_ms);
  }

  void EndFault() {
    if (!fault_) return;
    switch (*fault_) {
      case FaultKind::kKillNode:
        EXPECT_TRUE(nodes_[fault_node_]->Start()) << nodes_[fault_node_]->log();
        break;
      case FaultKind::kStopNode:
        nodes_[fault_node_]->Continue();
        break;
      case FaultKind::kStopWorker:
        if (fault_pid_ > 0) kill(fault_pid_, SIGCONT);
        break;
      case FaultKind::kRestartDatabase: {
        const std::string url = pg_->Start();
        EXPECT_EQ(url, pg_url_) << "the cluster came back elsewhere";
        break;
      }
      case FaultKind::kKillWorker:
      case FaultKind::kKillHandler:
        break;
    }
    if (!ProcessFault(*fault_)) healthy_since_ms_ = WallNowMs();
    fault_.reset();
    next_fault_ = Clock::now() + milliseconds(FaultUniform(1000, 4000));
  }

  void FaultPhase() {
    const auto t0 = Clock::now();
    const auto end = t0 + std::chrono::seconds(seconds_);
    healthy_since_ms_ = WallNowMs();
    next_fault_ = t0 + milliseconds(FaultUniform(1000, 3000));
    auto next_sample = t0;
    while (Clock::now() < end) {
      if (fault_ && Clock::now() >= fault_ends_) EndFault();
      if (!fault_ && Clock::now() >= next_fault_) StartFault();
      const int op = Uniform(0, 99);
      if (op < 45) {
        DispatchOne(NewDispatch());
      } else if (op < 50) {
        ASSERT_NO_FATAL_FAILURE(DispatchBulk(Uniform(2, 10)));
      } else if (op < 65) {
        ASSERT_NO_FATAL_FAILURE(Repeat(/*conflicting=*/false));
      } else if (op < 68) {
        Repeat(/*conflicting=*/true);
      } else if (op < 85) {
        CancelRecent();
      } else {
        ReplayOne();
      }
      if (Clock::now() >= next_sample) {
        // The sweepers run through worker and handler faults.
        Sample(/*healthy=*/!fault_ || ProcessFault(*fault_));
        next_sample = Clock::now() + milliseconds(1000);
      }
      std::this_thread::sleep_for(milliseconds(Uniform(50, 250)));
    }
    EndFault();
    fault_phase_ms_ = MillisSince(t0);
  }

  // ---- the end ----

  void Settle() {
    const auto t0 = Clock::now();
    // Unanswered dispatches, again with their keys, until each is answered.
    ASSERT_TRUE(WaitUntil(
        std::chrono::seconds(60),
        [&] {
          std::vector<Sent> again;
          again.swap(pending_);
          for (const Sent& s : again) DispatchOne(s);
          return pending_.empty();
        },
        milliseconds(500)))
        << pending_.size() << " dispatches never answered";
    // Everything terminal; a lane whose head failed or was quarantined is
    // released by canceling the head, as an operator would.
    std::string described;
    const bool terminal = WaitUntil(
        std::chrono::seconds(180),
        [&] {
          auto all = ListOverHttp(nodes_[0]->client());
          if (!all) return false;
          Sample(/*healthy=*/true);
          std::map<std::string, Json> by_id;
          std::set<std::string> open_lanes;
          std::map<std::string, int> counts;
          for (const auto& e : *all) {
            by_id[taskengine_client::IdToString(e["id"])] = e;
            counts[Str(e, "status")]++;
            if (!IsTerminalStatus(Str(e, "status")) && Str(e, "lane_key") != "") {
              open_lanes.insert(Str(e, "lane_key"));
            }
          }
          described.clear();
          for (const auto& [s, n] : counts) described += s + "=" + std::to_string(n) + " ";
          int shown = 0;
          for (const auto& e : *all) {
            if (IsTerminalStatus(Str(e, "status")) || ++shown > 10) continue;
            described += "\n  " + e.dump();
          }
          for (const auto& e : *all) {
            const std::string status = Str(e, "status");
            if ((status == "failed" || status == "quarantined") &&
                open_lanes.count(Str(e, "lane_key"))) {
              const std::string id = taskengine_client::IdToString(e["id"]);
              if (nodes_[0]->client().Cancel(id, "soak: release the lane").ok()) ++lane_cancels_;
            }
          }
          for (const std::string& id : ids_) {
            auto it = by_id.find(id);
            if (it == by_id.end() || !IsTerminalStatus(it->second.value("status", ""))) {
              return false;
            }
          }
          return true;
        },
        milliseconds(1000));
    ASSERT_TRUE(terminal) << described << "\n" << nodes_[0]->log().substr(0, 3000);
    settle_ms_ = MillisSince(t0);
  }

  void Check() {
    Client& api = nodes_[0]->client();
    const std::vector<Json> listed = ListEventually(api);
    // L: listed once each, every acknowledged one among them.
    std::map<std::string, Json> by_id;
    for (const auto& e : listed) {
      const std::string id = taskengine_client::IdToString(e["id"]);
      EXPECT_EQ(by_id.count(id), 0u) << "L: execution " << id << " listed twice";
      by_id[id] = e;
    }
    std::set<std::string> known(ids_.begin(), ids_.end());
    EXPECT_EQ(known.size(), ids_.size()) << "L: two keys named one execution";
    for (const std::string& id : ids_) EXPECT_EQ(by_id.count(id), 1u) << "L: missing " << id;

    // The outside ledger.
    const std::map<std::int64_t, int> lines = EffectLines(files_.Effects("notice"));
    std::map<std::string, int> proceeds;  // execution id -> reservations that heard proceed
    std::map<std::string, int> answer_codes;
    for (const std::string& line : ReadLines(files_.answers())) {
      std::istringstream in(line);
      std::string name, id, version, answer, rc;
      if (!(in >> name >> id >> version >> answer >> rc)) continue;
      answer_codes[rc]++;
      if (rc == "0") proceeds[id]++;
    }
    std::map<std::string, std::map<std::string, std::string>> commits;  // id -> claim -> rc
    for (const std::string& line : ReadLines(files_.dir() + "/commits.txt")) {
      std::istringstream in(line);
      std::string id, version, rc;
      if (in >> id >> version >> rc) commits[id][version] = rc;
    }
    std::set<std::string> commit_unanswered;
    for (const std::string& line : ReadLines(files_.dir() + "/retries.txt")) {
      std::istringstream in(line);
      std::string id, version, op, rc;
      if (in >> id >> version >> op >> rc && op == "commit")
        commit_unanswered.insert(id + " " + version);
    }
    for (const auto& [id, n] : lines) {
      EXPECT_EQ(known.count(std::to_string(id)), 1u) << "D: notice.txt names unknown " << id;
    }

    std::map<std::string, int> statuses;
    int ambiguous_open = 0, stale_refused = 0, failed_early = 0;
    for (const std::string& id : ids_) {
      SCOPED_TRACE("execution " + id + " (seed " + std::to_string(seed_) + ")");
      auto detail = api.GetExecution(id);
      for (int i = 0; i < 10 && !detail.ok() && detail.status().retryable(); ++i) {
        std::this_thread::sleep_for(milliseconds(500));
        detail = api.GetExecution(id);
      }
      ASSERT_TRUE(detail.ok()) << detail.status().ToString();
      const Json& d = *detail;
      const std::string status = Str(d, "status");
      statuses[Str(d, "job") + ":" + status]++;
      // A
      EXPECT_LE(d.value("attempt", 0), d.value("max_attempts", 0)) << "A: " << d.dump();
      if (status == "failed" && d.value("attempt", 0) < d.value("max_attempts", 0)) {
        ++failed_early;
        ADD_FAILURE() << "A: failed before its attempts ran out: " << d.dump();
      }
      // D
      int committed = 0, reserved = 0;
      std::int64_t committed_claim = -1;
      for (const auto& effect : d.value("effects", Json::array())) {
        if (Str(effect, "name") != "notice") continue;
        if (Str(effect, "state") == "committed") {
          ++committed;
          committed_claim = effect.value("claim_version", std::int64_t{-1});
        } else {
          ++reserved;
        }
      }
      const int in_file = lines.count(std::stoll(id)) ? lines.at(std::stoll(id)) : 0;
      EXPECT_LE(in_file, 1) << "D: the effect happened " << in_file << " times";
      EXPECT_LE(committed, 1) << "D: " << d.dump();
      EXPECT_LE(proceeds[id], 1) << "D: " << proceeds[id] << " reservations heard proceed";
      if (committed > 0) {
        EXPECT_EQ(in_file, 1) << "D: committed without its line: " << d.dump();
      }
      if (in_file > 0) {
        EXPECT_EQ(committed + reserved, 1) << "D: an effect the ledger does not show: " << d.dump();
      }
      if (in_file > 0 && committed == 0) ++ambiguous_open;
      if (status == "succeeded") {
        EXPECT_EQ(committed, 1) << "D: succeeded without its committed effect: " << d.dump();
      } else if (status == "canceled") {
        EXPECT_EQ(committed, 0) << "C1: canceled with a committed effect: " << d.dump();
      } else if (status == "partially_canceled") {
        EXPECT_FALSE(d.value("escaped_effects", Json::array()).empty())
            << "C1: partially canceled without escaped effects: " << d.dump();
      }
      // F: a commit refused as stale published nothing for that claim (an
      // operator's `assume done` at replay commits the reservation later,
      // under the claim that made it).
      auto c = commits.find(id);
      if (c != commits.end() && assumed_done_.count(id) == 0) {
        for (const auto& [version, rc] : c->second) {
          if (rc != "12" || commit_unanswered.count(id + " " + version)) continue;
          ++stale_refused;
          EXPECT_NE(std::to_string(committed_claim), version)
              << "F: claim " << version << " was refused as stale, yet committed: " << d.dump();
        }
      }
    }

    // S
    EXPECT_LE(worst_overdue_ms_, kSweepMs + kSlackMs)
        << "S: execution " << worst_overdue_id_ << " stayed running " << worst_overdue_ms_
        << " ms past its lease while no fault was active";
    // Nothing the soak dispatched still runs (a `tick` that fired this minute may).
    int still_running = 0;
    for (const auto& e : ListEventually(api, "running")) {
      still_running += known.count(taskengine_client::IdToString(e["id"])) ? 1 : 0;
    }
    EXPECT_EQ(still_running, 0) << "S: still running at the end";

    // C
    std::map<std::string, int> fires;
    for (const auto& e : ListEventually(api, "", "tick")) {
      if (Str(e, "trigger") == "scheduled") fires[Str(e, "scheduled_at")]++;
    }
    for (const auto& [at, n] : fires)
      EXPECT_EQ(n, 1) << "C: fire " << at << " ran " << n << " times";

    std::string faults, outcome, codes;
    int fault_count = 0;
    for (const auto& [k, n] : faults_) {
      faults += " " + k + "=" + std::to_string(n);
      fault_count += n;
    }
    for (const auto& [k, n] : statuses) outcome += " " + k + "=" + std::to_string(n);
    for (const auto& [k, n] : answer_codes) codes += " " + k + "=" + std::to_string(n);
    std::cout << "[ measure ] black-box soak (" << (postgres_ ? "PostgreSQL, 2 nodes" : "SQLite")
              << ") seed " << seed_ << ": " << ids_.size() << " executions (" << by_job_["work"]
              << " work, " << by_job_["remote"] << " remote; " << bulks_ << " bulk requests, "
              << repeats_ << " repeats, " << conflicts_ << " conflicting repeats, " << unanswered_
              << " unanswered requests sent again)\n"
              << "[ measure ]   " << fault_count << " faults in " << fault_phase_ms_
              << " ms:" << faults << "\n"
              << "[ measure ]   " << cancels_ << " cancels, " << replays_ << " replays ("
              << assumed_done_.size() << " assume done), " << lane_cancels_
              << " lane heads canceled at the end; settled in " << settle_ms_ << " ms\n"
              << "[ measure ]   outcomes:" << outcome << "\n"
              << "[ measure ]   effects: " << lines.size() << " lines, " << ambiguous_open
              << " surfaced as reserved (ambiguous); reservation exit codes:" << codes << "; "
              << stale_refused << " stale commits refused; " << fires.size()
              << " cron fires; S: worst " << worst_overdue_ms_ << " ms over " << s_samples_
              << " samples" << std::endl;
  }

  // Settings and the world.
  const std::uint64_t seed_;
  const int seconds_;
  const bool postgres_;
  std::mt19937_64 random_, fault_random_;
  TempDir work_;
  DrillFiles files_;
  std::unique_ptr<PgCluster> pg_;
  std::string pg_url_, config_, manager_log_;
  std::vector<std::unique_ptr<SoakNode>> nodes_;
  ChildProcess manager_;

  // What the soak sent and heard.
  int next_ = 0;
  std::map<std::string, std::string> ack_;         // key -> execution id
  std::map<std::string, Sent> sent_;               // key -> what was sent
  std::vector<std::string> ids_;                   // acknowledged, in order
  std::vector<Sent> pending_;                      // sent, no answer yet
  std::map<std::string, std::string> replayable_;  // id -> failure class
  std::map<std::string, int> by_job_, faults_;
  int bulks_ = 0, repeats_ = 0, conflicts_ = 0, unanswered_ = 0, cancels_ = 0, replays_ = 0,
      lane_cancels_ = 0;
  std::set<std::string> assumed_done_;  // replayed with `assume done`

  // The current fault.
  std::optional<FaultKind> fault_;
  int fault_node_ = 0;
  pid_t fault_pid_ = 0;
  Clock::time_point fault_ends_{}, next_fault_{};
  std::int64_t healthy_since_ms_ = 0;

  // S samples.
  int s_samples_ = 0;
  std::int64_t worst_overdue_ms_ = 0;
  std::string worst_overdue_id_;
  long long fault_phase_ms_ = 0, settle_ms_ = 0;
};

std::uint64_t Seed() {
  return soak::ReadSoakOptions(std::random_device{}(), /*default_steps=*/1).seed;
}

TEST(BlackboxSoak, SqliteNodeUnderFaultsKeepsLDSFAC) {
  const std::uint64_t seed = Seed();
  std::cout << "[ seed ] TASKENGINE_SOAK_SEED=" << seed << std::endl;
  BlackboxSoak soak(seed, SoakSeconds(), /*postgres=*/false);
  soak.Run();
}

TEST(BlackboxSoak, TwoPostgresNodesUnderFaultsKeepLDSFAC) {
  if (std::string why = PgUnavailableReason(); !why.empty()) GTEST_SKIP() << why;
  const std::uint64_t seed = Seed();
  std::cout << "[ seed ] TASKENGINE_SOAK_SEED=" << seed << std::endl;
  BlackboxSoak soak(seed, SoakSeconds(), /*postgres=*/true);
  soak.Run();
}

}  // namespace
}  // namespace taskengine::testing
