// worker:start and worker:manager (W4, W5) as processes against the real
// `taskengine serve` (with no in-process workers): remote workers run
// `command` jobs of queue "remote" end to end, with progress,
// logs, results and countable effects reported over HTTP (worker:effect);
// --max-jobs; graceful SIGTERM; a serve restart under a running worker; and
// worker:manager restarting a kill -9'd worker and stopping on SIGTERM.

#include <fstream>
#include <regex>
#include <thread>

#include "drill_support.h"
#include "remote_dispatch.h"

namespace taskengine::testing {
namespace {

// CountableEffect (drill_support.h) through worker:effect, the HTTP effect verbs.
std::string RemoteCountableEffect(const DrillFiles& f, const std::string& name) {
  std::string s = CountableEffect(f, name);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"effect:reserve", "worker:effect reserve"},
           {"effect:commit", "worker:effect commit"}}) {
    for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) {
      s.replace(p, from.size(), to);
    }
  }
  return s;
}

// A remote `command` job: progress, a log line, a countable effect, then its
// payload back as the result. `wait` adds a pause of `sleep_s` seconds.
std::string RemoteJob(const DrillFiles& f, const std::string& sleep_s = "0") {
  return ShellJob("remote",
                  "payload=$(cat)\n"
                  "echo '{\"progress\": 50}'\n"
                  "echo '{\"log\": \"remote run\", \"level\": \"warn\"}'\n"
                  "sleep " +
                      sleep_s + "\n" + RemoteCountableEffect(f, "notice") +
                      "echo \"{\\\"result\\\": {\\\"got\\\": $payload}}\"\n",
                  "queue = \"remote\"\nlease_ms = 3000\ntimeout_ms = 30000\nmax_attempts = 5\n"
                  "backoff_base_ms = 50\nbackoff_cap_ms = 100\n");
}

std::string HttpSection(int port) {
  return "\n[http]\nport = " + std::to_string(port) +
         "\nlease_per_second = 0\ndispatch_per_second = 0\n";
}

// serve on HTTP plus a worker token; see each test.
class WorkerCliTest : public ::testing::Test {
 protected:
  void Setup(const std::string& job_toml, int port = 0) {
    port_ = port;
    // No in-process workers: every execution runs on a remote worker.
    te_ = std::make_unique<TaskengineInstall>(EngineSection(0, 100, 100, "normal") +
                                              "\n[[queue]]\nname = \"remote\"\n" +
                                              HttpSection(port) + job_toml);
    ASSERT_EQ(te_->Run({"migrate"}).exit_code, 0);
    nlohmann::json token = te_->RunJson({"token:create", "--name", "w", "--scopes", "worker"});
    ASSERT_TRUE(token.is_object());
    token_ = token.value("secret", "");
    ASSERT_FALSE(token_.empty()) << token.dump();
    ASSERT_NO_FATAL_FAILURE(StartServe(1));
  }
  void StartServe(int count) {
    // Like TaskengineInstall::StartServe, but a fixed port survives restarts
    // (ChildEnvironment otherwise sets TASKENGINE_HTTP_PORT=0).
    SpawnOptions o;
    o.env = ChildEnvironment({"TASKENGINE_HTTP_PORT=" + std::to_string(port_)});
    o.cwd = te_->dir().path().string();
    o.stdout_path = te_->serve_log();
    o.stderr_path = te_->serve_log();
    std::string error;
    ASSERT_TRUE(serve_.Start(te_->Argv({"serve"}), o, &error)) << error;
    ASSERT_TRUE(te_->WaitServing(count, milliseconds(20'000))) << ReadFile(te_->serve_log());
    url_ = ServeUrl(*te_);
    ASSERT_FALSE(url_.empty()) << ReadFile(te_->serve_log());
  }
  void TearDown() override {
    if (te_ != nullptr) StopServe(&serve_);
  }

  // Starts `verb` (worker:start or worker:manager) with `args`; its stderr
  // goes to <dir>/<log>.
  void StartWorker(ChildProcess* child, const std::string& verb,
                   const std::vector<std::string>& args, const std::string& log = "worker.log") {
    std::vector<std::string> argv = {TASKENGINE_BIN,     verb,
                                     "--server=" + url_, "--queues=remote",
                                     "--poll-ms=1000",   "--kill-grace-ms=1000"};
    argv.insert(argv.end(), args.begin(), args.end());
    SpawnOptions o;
    o.env = ChildEnvironment({"TASKENGINE_TOKEN=" + token_});
    o.cwd = te_->dir().path().string();
    o.stdout_path = te_->dir().File(log);
    o.stderr_path = te_->dir().File(log);
    std::string error;
    ASSERT_TRUE(child->Start(argv, o, &error)) << error;
  }
  std::string Log(const std::string& name = "worker.log") {
    return ReadFile(te_->dir().File(name));
  }

  std::vector<std::int64_t> DispatchMany(int n) {
    std::vector<std::int64_t> ids;
    for (int i = 0; i < n; ++i) {
      ids.push_back(DispatchJob(*te_, "remote", "{\"n\":" + std::to_string(i) + "}"));
    }
    return ids;
  }
  std::string StatusOf(std::int64_t id) {
    nlohmann::json j = ShowJson(*te_, id);
    return j.is_object() ? j.value("status", "") : "";
  }

  DrillFiles files_;
  std::unique_ptr<TaskengineInstall> te_;
  ChildProcess serve_;
  int port_ = 0;
  std::string url_;
  std::string token_;
};

TEST_F(WorkerCliTest, WorkerStartRunsCommandJobsEndToEnd) {
  ASSERT_NO_FATAL_FAILURE(Setup(RemoteJob(files_)));
  const std::vector<std::int64_t> ids = DispatchMany(6);
  ChildProcess worker;
  ASSERT_NO_FATAL_FAILURE(StartWorker(&worker, "worker:start", {"--concurrency=3"}));
  std::map<std::int64_t, nlohmann::json> all;
  ASSERT_TRUE(WaitAllTerminal(*te_, ids, milliseconds(60'000), &all))
      << DescribeStatuses(all) << "\nworker log:\n"
      << Log();
  std::map<std::int64_t, int> once;
  for (std::int64_t id : ids) once[id] = 1;
  auto shown = ExpectInvariants(*te_, files_, ids, once);
  for (std::int64_t id : ids) {
    const nlohmann::json& j = shown[id];
    EXPECT_EQ(j.value("status", ""), "succeeded") << j.dump();
    EXPECT_NE(j.dump().find("remote run"), std::string::npos) << "log line missing: " << j.dump();
  }
  nlohmann::json result = te_->RunJson({"execution:result", std::to_string(ids[2])});
  EXPECT_NE(result.dump().find("\"got\":{\"n\":2}"), std::string::npos) << result.dump();
  worker.Signal(SIGTERM);
  auto status = worker.Wait(milliseconds(10'000));
  ASSERT_TRUE(status.has_value()) << Log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << Log();
  EXPECT_NE(Log().find("completed 6"), std::string::npos) << Log();
}

TEST_F(WorkerCliTest, ExitCodesAndCancelReachTheServer) {
  const std::string keys =
      "queue = \"remote\"\nlease_ms = 3000\nmax_attempts = 2\nbackoff_base_ms = 20\n"
      "backoff_cap_ms = 50\n";
  ASSERT_NO_FATAL_FAILURE(Setup(ShellJob("permanent", "echo bad input >&2; exit 65\n", keys) +
                                ShellJob("retry", "exit 75\n", keys) +
                                ShellJob("slow", "sleep 30\n", keys)));
  const std::int64_t permanent = DispatchJob(*te_, "permanent");
  const std::int64_t retry = DispatchJob(*te_, "retry");
  const std::int64_t slow = DispatchJob(*te_, "slow");
  ChildProcess worker;
  ASSERT_NO_FATAL_FAILURE(StartWorker(&worker, "worker:start", {"--concurrency=3"}));
  nlohmann::json last;
  ASSERT_TRUE(WaitExecution(
      *te_, slow, milliseconds(20'000),
      [](const nlohmann::json& j) { return j["status"] == "running"; }, &last))
      << last.dump() << Log();
  const auto t_cancel = std::chrono::steady_clock::now();
  ASSERT_EQ(te_->Run({"execution:cancel", std::to_string(slow), "--reason", "test"}).exit_code, 0);
  ASSERT_TRUE(WaitExecution(
      *te_, slow, milliseconds(20'000),
      [](const nlohmann::json& j) { return j["status"] == "canceled"; }, &last))
      << last.dump() << Log();
  std::cout << "[ measure ] cancel of a remote command took " << MillisSince(t_cancel) << " ms"
            << std::endl;
  ASSERT_TRUE(WaitExecution(
      *te_, permanent, milliseconds(20'000),
      [](const nlohmann::json& j) { return IsTerminalStatus(j["status"]); }, &last));
  EXPECT_EQ(last["failure_class"], "permanent") << last.dump();
  EXPECT_NE(last.dump().find("bad input"), std::string::npos) << last.dump();
  ASSERT_TRUE(WaitExecution(
      *te_, retry, milliseconds(20'000),
      [](const nlohmann::json& j) { return IsTerminalStatus(j["status"]); }, &last));
  EXPECT_EQ(last["status"], "failed") << last.dump();
  EXPECT_EQ(last["attempt"], 2) << last.dump();
  EXPECT_EQ(last["failure_class"], "retryable") << last.dump();
}

TEST_F(WorkerCliTest, WorkerStartExitsAfterMaxJobs) {
  ASSERT_NO_FATAL_FAILURE(Setup(RemoteJob(files_)));
  const std::vector<std::int64_t> ids = DispatchMany(5);
  ChildProcess worker;
  ASSERT_NO_FATAL_FAILURE(
      StartWorker(&worker, "worker:start", {"--concurrency=1", "--max-jobs=3"}));
  auto status = worker.Wait(milliseconds(60'000));
  ASSERT_TRUE(status.has_value()) << "worker:start did not exit after --max-jobs\n"
                                  << Log() << "serve:\n"
                                  << ReadFile(te_->serve_log());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << Log();
  int succeeded = 0, queued = 0;
  for (std::int64_t id : ids) {
    const std::string s = StatusOf(id);
    succeeded += s == "succeeded";
    queued += s == "queued";
  }
  EXPECT_EQ(succeeded, 3);
  EXPECT_EQ(queued, 2);
}

TEST_F(WorkerCliTest, SigtermLetsRunningCommandsFinish) {
  ASSERT_NO_FATAL_FAILURE(Setup(RemoteJob(files_, "1.5")));
  const std::vector<std::int64_t> ids = DispatchMany(2);
  ChildProcess worker;
  ASSERT_NO_FATAL_FAILURE(StartWorker(&worker, "worker:start", {"--concurrency=2"}));
  ASSERT_TRUE(WaitUntil(milliseconds(20'000), [&] {
    return StatusOf(ids[0]) == "running" && StatusOf(ids[1]) == "running";
  })) << Log();
  worker.Signal(SIGTERM);
  auto status = worker.Wait(milliseconds(20'000));
  ASSERT_TRUE(status.has_value()) << Log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << Log();
  EXPECT_EQ(StatusOf(ids[0]), "succeeded");
  EXPECT_EQ(StatusOf(ids[1]), "succeeded");
}

// L4 for remote workers: a worker killed while its lease poll is parked
// never receives the leases the server then hands to that poll. worker:start
// confirms the start of its leases before running them, so these unconfirmed
// leases expire as free requeues: the executions run later on another worker
// at attempt 1, with no lease expiry counted.
TEST_F(WorkerCliTest, LeasesOfAWorkerThatDiedWhileItsPollWasParkedCostNoAttempt) {
  ASSERT_NO_FATAL_FAILURE(Setup(RemoteJob(files_)));
  ChildProcess gone;
  {
    SpawnOptions o;
    o.env = ChildEnvironment({"TASKENGINE_TOKEN=" + token_});
    o.cwd = te_->dir().path().string();
    o.stdout_path = te_->dir().File("gone.log");
    o.stderr_path = te_->dir().File("gone.log");
    std::string error;
    ASSERT_TRUE(gone.Start({TASKENGINE_BIN, "worker:start", "--server=" + url_, "--queues=remote",
                            "--poll-ms=30000", "--concurrency=3"},
                           o, &error))
        << error;
  }
  ASSERT_TRUE(WaitUntil(milliseconds(20'000), [&] {
    return Log("gone.log").find("leasing") != std::string::npos;
  })) << Log("gone.log");
  std::this_thread::sleep_for(milliseconds(1000));  // its first poll is parked now
  gone.Kill();
  // One bulk request admits all three in one transaction, so the parked poll
  // (concurrency 3) is served all of them at once rather than only the first
  // of three separate dispatches.
  nlohmann::json ops_token =
      te_->RunJson({"token:create", "--name", "ops", "--scopes", "read,dispatch"});
  ASSERT_TRUE(ops_token.is_object());
  taskengine_client::Client ops({url_, ops_token.value("secret", "")});
  std::vector<std::string> bulk_ids;
  ASSERT_NO_FATAL_FAILURE(DispatchRemoteJobs(ops, 3, "parked-", &bulk_ids));
  std::vector<std::int64_t> ids;
  for (const std::string& id : bulk_ids) ids.push_back(std::stoll(id));
  // The server serves the dead worker's parked poll: the executions run on
  // nobody until their leases lapse and the sweeper requeues them.
  ASSERT_TRUE(WaitUntil(milliseconds(20'000), [&] {
    for (std::int64_t id : ids) {
      if (ShowJson(*te_, id)["claim_version"] != 1) return false;
    }
    return true;
  })) << "the dead worker's poll was not served";
  ASSERT_TRUE(WaitUntil(milliseconds(20'000), [&] {
    for (std::int64_t id : ids) {
      if (StatusOf(id) != "queued") return false;
    }
    return true;
  })) << ReadFile(te_->serve_log());
  ChildProcess worker;
  ASSERT_NO_FATAL_FAILURE(StartWorker(&worker, "worker:start", {"--concurrency=3"}));
  std::map<std::int64_t, nlohmann::json> all;
  ASSERT_TRUE(WaitAllTerminal(*te_, ids, milliseconds(60'000), &all))
      << DescribeStatuses(all) << "\nworker log:\n"
      << Log();
  std::map<std::int64_t, int> once;
  for (std::int64_t id : ids) once[id] = 1;
  auto shown = ExpectInvariants(*te_, files_, ids, once);
  for (std::int64_t id : ids) {
    const nlohmann::json& j = shown[id];
    EXPECT_EQ(j.value("status", ""), "succeeded") << j.dump();
    EXPECT_EQ(j["attempt"], 1) << "a lease never received burns no attempt: " << j.dump();
    for (const auto& a : j["attempts"]) {
      EXPECT_NE(a["failure_class"], "lease_expired") << a.dump();
    }
  }
}

// W4 (issue 14, bug 3): worker:start runs `command` handlers only and says
// so when it leases, so an `http` job of the same queue is never leased to it
// (once, it was leased and failed permanent: quarantined on first contact).
// It stays queued at attempt 0 while the worker runs the command jobs around it.
TEST_F(WorkerCliTest, WorkerStartLeavesJobsOfOtherHandlersQueued) {
  const std::string http_job =
      "\n[[job]]\nname = \"call-sink\"\nhandler = \"http\"\nqueue = \"remote\"\n"
      "config = { url = \"https://hooks.example.com/in\", allow_hosts = [\"hooks.example.com\"] "
      "}\n";
  ASSERT_NO_FATAL_FAILURE(Setup(RemoteJob(files_) + http_job));
  std::vector<std::int64_t> ids = DispatchMany(2);
  const std::int64_t http = DispatchJob(*te_, "call-sink");
  const std::vector<std::int64_t> more = DispatchMany(2);
  ids.insert(ids.end(), more.begin(), more.end());
  ChildProcess worker;
  ASSERT_NO_FATAL_FAILURE(StartWorker(&worker, "worker:start", {"--concurrency=2"}));
  std::map<std::int64_t, nlohmann::json> all;
  ASSERT_TRUE(WaitAllTerminal(*te_, ids, milliseconds(60'000), &all))
      << DescribeStatuses(all) << "\nworker log:\n"
      << Log();
  for (std::int64_t id : ids) EXPECT_EQ(all[id].value("status", ""), "succeeded") << all[id];
  // A few more polls of the worker pass over it.
  std::this_thread::sleep_for(milliseconds(1'500));
  const nlohmann::json j = ShowJson(*te_, http);
  EXPECT_EQ(j.value("status", ""), "queued") << j.dump();
  EXPECT_EQ(j["attempt"], 0) << j.dump();
  EXPECT_EQ(j["claim_version"], 0) << "never leased: " << j.dump();
  EXPECT_TRUE(j["attempts"].empty()) << j.dump();
}

TEST_F(WorkerCliTest, BadFlagsAndARefusedTokenExit1) {
  ASSERT_NO_FATAL_FAILURE(Setup(RemoteJob(files_)));
  ProcessResult no_server =
      RunProcess({TASKENGINE_BIN, "worker:start", "--token=x"}, "", milliseconds(10'000));
  EXPECT_EQ(no_server.exit_code, 1) << no_server.Describe();
  EXPECT_NE(no_server.err.find("--server"), std::string::npos) << no_server.err;
  ProcessResult no_token =
      RunProcess({TASKENGINE_BIN, "worker:start", "--server=" + url_}, "", milliseconds(10'000));
  EXPECT_EQ(no_token.exit_code, 1) << no_token.Describe();
  ProcessResult refused =
      RunProcess({TASKENGINE_BIN, "worker:start", "--server=" + url_, "--token=not-a-token"}, "",
                 milliseconds(20'000));
  EXPECT_EQ(refused.exit_code, 1) << refused.Describe();
  EXPECT_NE(refused.err.find("refused"), std::string::npos) << refused.err;
}

TEST_F(WorkerCliTest, AWorkerSurvivesAServeRestart) {
  ASSERT_NO_FATAL_FAILURE(Setup(RemoteJob(files_), PickStablePort()));
  std::vector<std::int64_t> ids = DispatchMany(2);
  ChildProcess worker;
  ASSERT_NO_FATAL_FAILURE(StartWorker(&worker, "worker:start", {"--concurrency=2"}));
  std::map<std::int64_t, nlohmann::json> all;
  ASSERT_TRUE(WaitAllTerminal(*te_, ids, milliseconds(30'000), &all)) << Log();
  serve_.Signal(SIGKILL);
  serve_.Wait(milliseconds(5'000));
  std::this_thread::sleep_for(milliseconds(1'500));  // the worker meets a closed port
  EXPECT_TRUE(worker.running());
  EXPECT_FALSE(worker.Wait(milliseconds(10)).has_value()) << "the worker exited\n" << Log();
  ASSERT_NO_FATAL_FAILURE(StartServe(2));
  const std::vector<std::int64_t> more = DispatchMany(3);
  ids.insert(ids.end(), more.begin(), more.end());
  ASSERT_TRUE(WaitAllTerminal(*te_, ids, milliseconds(60'000), &all))
      << DescribeStatuses(all) << "\nworker log:\n"
      << Log() << "\nserve log:\n"
      << ReadFile(te_->serve_log()) << "\nconfig:\n"
      << ReadFile(te_->config_path());
  std::map<std::int64_t, int> once;
  for (std::int64_t id : ids) once[id] = 1;
  ExpectInvariants(*te_, files_, ids, once);
}

TEST_F(WorkerCliTest, ManagerRestartsAKilledWorkerAndStopsOnSigterm) {
  ASSERT_NO_FATAL_FAILURE(Setup(RemoteJob(files_)));
  ChildProcess manager;
  ASSERT_NO_FATAL_FAILURE(StartWorker(&manager, "worker:manager",
                                      {"--workers=2", "--concurrency=1", "--grace-ms=5000"},
                                      "manager.log"));
  std::vector<pid_t> children;
  ASSERT_TRUE(WaitUntil(milliseconds(10'000), [&] {
    children = ChildrenOf(manager.pid());
    return children.size() == 2;
  })) << Log("manager.log");
  const pid_t victim = children[0];
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  std::vector<pid_t> now;
  ASSERT_TRUE(WaitUntil(
      milliseconds(5'000),
      [&] {
        now = ChildrenOf(manager.pid());
        return now.size() == 2 && std::find(now.begin(), now.end(), victim) == now.end();
      },
      milliseconds(10)))
      << Log("manager.log");
  const long long restart_ms = MillisSince(killed_at);
  std::cout << "[ measure ] worker:manager restarted a kill -9'd worker in " << restart_ms << " ms"
            << std::endl;
  EXPECT_LT(restart_ms, 1'500);
  // The workers, old and new, run jobs.
  const std::vector<std::int64_t> ids = DispatchMany(4);
  std::map<std::int64_t, nlohmann::json> all;
  ASSERT_TRUE(WaitAllTerminal(*te_, ids, milliseconds(60'000), &all))
      << DescribeStatuses(all) << "\n"
      << Log("manager.log");
  manager.Signal(SIGTERM);
  auto status = manager.Wait(milliseconds(15'000));
  ASSERT_TRUE(status.has_value()) << Log("manager.log");
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << Log("manager.log");
  for (pid_t pid : now) {
    EXPECT_NE(kill(pid, 0), 0) << "worker " << pid << " outlived its manager";
  }
}

// W5 (issue 14): worker:manager replaces a worker that stopped heartbeating
// (here SIGSTOPped), not only one that exited: it kills it -9 after
// --hang-timeout-ms and starts another; the stopped worker's lease expires,
// the sweeper recovers it, and the new worker runs the execution once (L, D, A).
TEST_F(WorkerCliTest, ManagerReplacesAStoppedWorkerAndItsLeaseIsRecovered) {
  const std::string job =
      ShellJob("remote",
               StartLine(files_) + WaitForGo(files_) + RemoteCountableEffect(files_, "notice") +
                   "echo '{\"result\": {\"ok\": true}}'\n",
               "queue = \"remote\"\nlease_ms = 3000\ntimeout_ms = 30000\nmax_attempts = 5\n"
               "backoff_base_ms = 50\nbackoff_cap_ms = 100\n");
  ASSERT_NO_FATAL_FAILURE(Setup(job));
  ChildProcess manager;
  ASSERT_NO_FATAL_FAILURE(
      StartWorker(&manager, "worker:manager",
                  {"--workers=1", "--concurrency=1", "--grace-ms=5000", "--hang-timeout-ms=1500"},
                  "manager.log"));
  std::vector<pid_t> children;
  ASSERT_TRUE(WaitUntil(milliseconds(10'000), [&] {
    children = ChildrenOf(manager.pid());
    return children.size() == 1;
  })) << Log("manager.log");
  const pid_t victim = children[0];
  const std::int64_t id = DispatchJob(*te_, "remote");
  ASSERT_TRUE(WaitUntil(milliseconds(20'000), [&] { return !ReadLines(files_.started()).empty(); }))
      << Log("manager.log");
  ASSERT_EQ(StatusOf(id), "running");

  const auto stopped_at = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(victim, SIGSTOP), 0);
  std::vector<pid_t> now;
  ASSERT_TRUE(WaitUntil(
      milliseconds(10'000),
      [&] {
        now = ChildrenOf(manager.pid());
        return now.size() == 1 && now[0] != victim;
      },
      milliseconds(20)))
      << Log("manager.log");
  const long long replaced_ms = MillisSince(stopped_at);
  std::cout << "[ measure ] worker:manager replaced a SIGSTOPped worker in " << replaced_ms
            << " ms (hang timeout 1500 ms)" << std::endl;
  EXPECT_LT(replaced_ms, 5'000);
  EXPECT_NE(Log("manager.log").find("sent no heartbeat"), std::string::npos) << Log("manager.log");
  EXPECT_NE(kill(victim, 0), 0) << "the stopped worker was killed and reaped";

  // The lease lapses, the sweeper requeues it, the new worker runs it.
  ASSERT_TRUE(WaitUntil(milliseconds(20'000), [&] {
    return ReadLines(files_.started()).size() >= 2;
  })) << Log("manager.log");
  files_.GoAll();
  std::map<std::int64_t, nlohmann::json> all;
  ASSERT_TRUE(WaitAllTerminal(*te_, {id}, milliseconds(30'000), &all))
      << DescribeStatuses(all) << "\n"
      << Log("manager.log");
  auto shown = ExpectInvariants(*te_, files_, {id}, {{id, 1}});
  EXPECT_EQ(shown[id]["status"], "succeeded") << shown[id].dump();
  EXPECT_EQ(shown[id]["attempt"], 2)
      << "the stopped worker's attempt expired: " << shown[id].dump();

  manager.Signal(SIGTERM);
  auto status = manager.Wait(milliseconds(15'000));
  ASSERT_TRUE(status.has_value()) << Log("manager.log");
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << Log("manager.log");
}

TEST_F(WorkerCliTest, ManagerRefusesABadHangTimeout) {
  ASSERT_NO_FATAL_FAILURE(Setup(RemoteJob(files_)));
  for (const char* bad : {"--hang-timeout-ms=999", "--hang-timeout-ms=-1"}) {
    ProcessResult r =
        RunProcess({TASKENGINE_BIN, "worker:manager", "--server=" + url_, "--token=" + token_, bad},
                   "", milliseconds(10'000));
    EXPECT_EQ(r.exit_code, 1) << bad << r.Describe();
    EXPECT_NE(r.err.find("--hang-timeout-ms"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace taskengine::testing
