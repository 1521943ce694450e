// worker:start, worker:manager and worker:effect: remote workers (W4, W5).
//
// worker:start is one worker process: it leases executions from a server over
// the HTTP worker protocol (clients/cpp) and runs their `command` handler
// locally (the handler and its config come with the lease), adapting the lease
// to a JobContext (remote_job_context.h). The command's script reports effects
// with `$TASKENGINE_BIN worker:effect reserve NAME` (and commit/release),
// which call the server's effect routes with the variables worker:start sets:
// TASKENGINE_SERVER, TASKENGINE_TOKEN, TASKENGINE_EXECUTION_ID,
// TASKENGINE_CLAIM_VERSION. SIGTERM or SIGINT = graceful stop (unstarted
// leases are released, running ones finish). --max-jobs ends the process after
// that many executions (memory hygiene; a manager starts a fresh one).
//
// worker:manager keeps N worker:start children alive: a child that exits is
// started again at once (a crash loop backs off, up to 10 s), and SIGTERM is
// forwarded to every child, which get --grace-ms to stop before SIGKILL. Each
// child also proves it is alive: it writes a byte every 500 ms to a pipe the
// manager gave it (TASKENGINE_WORKER_HEARTBEAT_FD); a child silent for
// --hang-timeout-ms (SIGSTOPped, frozen, swapped out) is killed with SIGKILL
// and replaced like one that crashed, and the sweeper recovers its leases
// once they expire. It is
// a child subreaper: the `command` processes of a worker that crashed are
// re-parented to it and killed (process group) as soon as the crash is seen,
// so they cannot go on acting on the dead worker's claims.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

#include "cli.h"
#include "handlers/command_handler.h"
#include "platform/process.h"
#include "remote_job_context.h"
#include "taskengine_client/worker.h"

namespace taskengine::cli {
namespace {

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

struct WorkerFlags {
  std::string server;
  std::string token;
  std::string queues = "default";
  int concurrency = 4;
  std::int64_t max_jobs = 0;
  std::string name;
  int poll_ms = 30'000;
  int kill_grace_ms = 5'000;
  // worker:manager only
  int workers = 2;
  int grace_ms = 30'000;
  int hang_timeout_ms = 30'000;
};

// worker:manager -> worker:start: the descriptor of the pipe a child writes
// its liveness beats to.
constexpr const char* kHeartbeatFdEnv = "TASKENGINE_WORKER_HEARTBEAT_FD";
constexpr auto kLivenessBeat = std::chrono::milliseconds(500);

// The write end of the manager's liveness pipe, or -1 when not run by a
// manager. Takes the variable out of the environment and marks the
// descriptor close-on-exec, so `command` processes inherit neither.
int TakeHeartbeatFd() {
  const char* v = std::getenv(kHeartbeatFdEnv);
  if (v == nullptr) return -1;
  int fd = -1;
  try {
    fd = std::stoi(v);
  } catch (...) {
    fd = -1;
  }
  unsetenv(kHeartbeatFdEnv);
  if (fd < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) return -1;
  return fd;
}

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : fallback;
}

std::string SelfPath() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "taskengine";
  return std::string(buf, static_cast<std::size_t>(n));
}

std::vector<std::string> SplitQueues(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// Fills server and token from the environment when the flags are empty and
// checks the flags. kExitOk or the exit code of a usage error (printed).
int Resolve(WorkerFlags* f) {
  if (f->server.empty()) f->server = EnvOr("TASKENGINE_SERVER", "");
  if (f->token.empty()) f->token = EnvOr("TASKENGINE_TOKEN", "");
  if (f->server.empty()) {
    return Fail(
        InvalidArgument("--server (or TASKENGINE_SERVER) is required, e.g. "
                        "--server=http://127.0.0.1:8080"));
  }
  if (f->server.rfind("http://", 0) != 0 && f->server.rfind("https://", 0) != 0) {
    return Fail(InvalidArgument("--server must start with http:// or https://"));
  }
  if (f->token.empty()) {
    return Fail(
        InvalidArgument("--token (or TASKENGINE_TOKEN) is required: a token with "
                        "scope worker (taskengine token:create)"));
  }
  const auto queues = SplitQueues(f->queues);
  if (queues.empty() || queues.size() > 32) {
    return Fail(InvalidArgument("--queues needs 1..32 comma-separated names"));
  }
  if (f->concurrency < 1 || f->concurrency > 100) {
    return Fail(InvalidArgument("--concurrency must be 1..100"));
  }
  if (f->max_jobs < 0) return Fail(InvalidArgument("--max-jobs must be >= 0"));
  return kExitOk;
}

// Blocks SIGTERM and SIGINT in this thread (and every thread it starts later),
// so that a watcher thread can take them with sigtimedwait.
sigset_t BlockStopSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// ---------------------------------------------------------------- worker:start

int RunWorkerStart(const GlobalFlags& flags, WorkerFlags f) {
  if (int code = Resolve(&f); code != kExitOk) return code;
  const sigset_t stop_signals = BlockStopSignals();

  taskengine_client::Client client({f.server, f.token});
  CommandHandlerOptions command_options;
  command_options.kill_grace = milliseconds(f.kill_grace_ms);
  command_options.server_env = {
      {"TASKENGINE_SERVER", f.server},
      {"TASKENGINE_TOKEN", f.token},
      {"TASKENGINE_BIN", SelfPath()},
  };
  const Handler command = MakeCommandHandler(command_options);

  taskengine_client::WorkerOptions options;
  options.queues = SplitQueues(f.queues);
  // W4: jobs of other handlers (e.g. `http`) stay queued for a worker that
  // runs them instead of failing here.
  options.handlers = {"command"};
  options.concurrency = f.concurrency;
  options.max_jobs = f.max_jobs;
  options.name = f.name;
  options.version = "taskengine 0.1.0";
  options.poll_wait = milliseconds(std::clamp(f.poll_ms, 0, 30'000));
  taskengine_client::Worker worker(
      &client, options, [&command](taskengine_client::LeaseContext& lease) {
        if (lease.lease().handler != "command") {
          return taskengine_client::Outcome::Permanent(
              "worker:start runs `command` handlers only; this job's handler is '" +
              lease.lease().handler + "'");
        }
        RemoteJobContext context(&lease);
        return ToOutcome(command(context));
      });

  std::atomic<bool> done{false};
  const int heartbeat_fd = TakeHeartbeatFd();
  std::thread watcher([&] {
    const timespec tick{0, 100'000'000};
    SteadyClock::time_point beat_at;
    while (!done) {
      if (heartbeat_fd >= 0 && SteadyClock::now() >= beat_at) {
        // Liveness for worker:manager; a full pipe (the manager is behind) is fine.
        const char beat = 1;
        (void)!write(heartbeat_fd, &beat, 1);
        beat_at = SteadyClock::now() + kLivenessBeat;
      }
      int sig = sigtimedwait(&stop_signals, nullptr, &tick);
      if (sig == SIGTERM || sig == SIGINT) {
        std::cerr << "taskengine: worker " << worker.worker_id()
                  << ": stopping (releasing unstarted leases, finishing running ones)" << std::endl;
        worker.Stop();
      }
    }
  });
  std::cerr << "taskengine: worker " << worker.worker_id() << " leasing " << f.queues << " from "
            << f.server << " with concurrency " << f.concurrency << std::endl;
  taskengine_client::Status status = worker.Run();
  done = true;
  watcher.join();
  const taskengine_client::WorkerStats s = worker.stats();
  if (flags.json) {
    PrintJson({{"worker_id", worker.worker_id()},
               {"leased", s.leased},
               {"completed", s.completed},
               {"failed", s.failed},
               {"released", s.released},
               {"lost", s.lost}});
  } else {
    std::cerr << "taskengine: worker " << worker.worker_id() << " stopped: leased " << s.leased
              << ", completed " << s.completed << ", failed " << s.failed << ", released "
              << s.released << ", lost " << s.lost << std::endl;
  }
  if (!status.ok()) {
    std::cerr << "taskengine: the server refused this worker: " << status.ToString()
              << " (worker tokens need scope worker and all tenants)" << std::endl;
    return kExitUsage;
  }
  return kExitOk;
}

// ---------------------------------------------------------------- worker:manager

struct Child {
  Process process;  // not running(): waiting to be started again
  SteadyClock::time_point started;
  SteadyClock::time_point restart_at;
  int fast_exits = 0;  // consecutive exits within kHealthyRun of starting
  int beats = -1;      // read end of its liveness pipe (non-blocking); -1 = none
  SteadyClock::time_point last_beat;
  bool hang_killed = false;  // killed for silence; its exit is reported as such
};

// Reads every byte waiting in `c`'s liveness pipe; true when there was any.
bool DrainBeats(Child& c) {
  if (c.beats < 0) return false;
  bool any = false;
  char buf[256];
  while (read(c.beats, buf, sizeof(buf)) > 0) any = true;
  return any;
}

void CloseBeats(Child& c) {
  if (c.beats >= 0) close(c.beats);
  c.beats = -1;
}

constexpr auto kHealthyRun = std::chrono::seconds(2);
constexpr auto kMaxRestartDelay = std::chrono::seconds(10);

// The environment of a worker:start child: this process's, with the token
// and, when `beat_fd` >= 0, the number of its liveness pipe's write end.
std::vector<std::string> WorkerEnvironment(const std::string& token, int beat_fd) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.starts_with("TASKENGINE_TOKEN=") ||
        entry.starts_with(std::string(kHeartbeatFdEnv) + "=")) {
      continue;
    }
    env.emplace_back(entry);
  }
  env.push_back("TASKENGINE_TOKEN=" + token);
  if (beat_fd >= 0) env.push_back(std::string(kHeartbeatFdEnv) + "=" + std::to_string(beat_fd));
  return env;
}

// Starts a worker:start child with `argv`, in this process's group, with its
// standard streams; `beat_fd` (or -1) is the write end of its liveness pipe,
// kept open in the child and named in TASKENGINE_WORKER_HEARTBEAT_FD. The
// child gets SIGTERM when the manager dies.
Result<Process> SpawnWorker(const std::vector<std::string>& argv, const std::string& token,
                            int beat_fd) {
  SpawnOptions options;
  options.argv = argv;
  options.env = WorkerEnvironment(token, beat_fd);
  options.stdin_spec = StdioSpec::Inherit();
  options.stdout_spec = StdioSpec::Inherit();
  options.stderr_spec = StdioSpec::Inherit();
  if (beat_fd >= 0) options.keep_fds = {beat_fd};
  options.new_process_group = false;
  options.parent_death_signal = SIGTERM;
  return Process::Spawn(options);
}

// Kills the process groups of processes this manager adopted as a child
// subreaper: `command` processes whose worker died (each leads its own group).
// Without this they would run on with the dead worker's claim. Returns how many.
int KillAdoptedOrphans(const std::vector<pid_t>& workers) {
  // Counted by process group: a command's children, re-parented here when
  // its shell died, belong to the group already counted.
  std::set<pid_t> groups;
  const pid_t self = getpid();
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return 0;
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat("/proc/" + name + "/stat");
    std::string line;
    std::getline(stat, line);
    const std::size_t paren = line.rfind(')');
    if (paren == std::string::npos || paren + 2 >= line.size()) continue;
    std::istringstream rest(line.substr(paren + 2));
    char state = 0;
    pid_t ppid = 0;
    pid_t group = 0;
    rest >> state >> ppid >> group;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (ppid != self || state == 'Z') continue;
    if (std::find(workers.begin(), workers.end(), pid) != workers.end()) continue;
    kill(-pid, SIGKILL);  // its group (a command leads one)
    kill(pid, SIGKILL);
    groups.insert(group);
  }
  closedir(dir);
  return static_cast<int>(groups.size());
}

int RunWorkerManager(const GlobalFlags& flags, WorkerFlags f) {
  if (int code = Resolve(&f); code != kExitOk) return code;
  if (f.workers < 1 || f.workers > 256) return Fail(InvalidArgument("--workers must be 1..256"));
  if (f.hang_timeout_ms != 0 && (f.hang_timeout_ms < 1'000 || f.hang_timeout_ms > 3'600'000)) {
    return Fail(InvalidArgument("--hang-timeout-ms must be 0 (off) or 1000..3600000"));
  }
  const auto hang_timeout = milliseconds(f.hang_timeout_ms);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGCHLD);
  sigprocmask(SIG_BLOCK, &signals, nullptr);
  // Processes orphaned by a crashed worker (its `command` processes) are
  // re-parented to this manager, which kills them (KillAdoptedOrphans).
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  std::vector<std::string> argv = {SelfPath(),
                                   "worker:start",
                                   "--server=" + f.server,
                                   "--queues=" + f.queues,
                                   "--concurrency=" + std::to_string(f.concurrency),
                                   "--max-jobs=" + std::to_string(f.max_jobs),
                                   "--poll-ms=" + std::to_string(f.poll_ms),
                                   "--kill-grace-ms=" + std::to_string(f.kill_grace_ms)};
  if (!f.name.empty()) argv.push_back("--name=" + f.name);
  if (!flags.config_path.empty()) argv.push_back("--config=" + flags.config_path);

  std::vector<Child> children(static_cast<std::size_t>(f.workers));
  auto start = [&](std::size_t i) {
    Child& c = children[i];
    CloseBeats(c);
    int pipe_fds[2] = {-1, -1};
    if (hang_timeout.count() > 0 && pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC) != 0) {
      std::cerr << "taskengine: worker:manager: cannot create a liveness pipe; worker " << i
                << " is watched for exits only" << std::endl;
      pipe_fds[0] = pipe_fds[1] = -1;
    }
    Result<Process> spawned = SpawnWorker(argv, f.token, pipe_fds[1]);
    if (pipe_fds[1] >= 0) close(pipe_fds[1]);
    c.beats = pipe_fds[0];
    c.started = SteadyClock::now();
    c.last_beat = c.started;
    c.hang_killed = false;
    if (!spawned.ok()) {
      std::cerr << "taskengine: worker:manager: cannot start worker " << i << ": "
                << spawned.status().message() << "; retrying" << std::endl;
      c.restart_at = SteadyClock::now() + std::chrono::seconds(1);
    } else {
      c.process = std::move(spawned).value();
      std::cerr << "taskengine: worker:manager: worker " << i << " started (pid " << c.process.pid()
                << ")" << std::endl;
    }
  };
  for (std::size_t i = 0; i < children.size(); ++i) start(i);

  bool stopping = false;
  SteadyClock::time_point kill_at;
  while (true) {
    // Reap every child that ended (workers, and adopted orphans).
    bool worker_died = false;
    while (std::optional<pid_t> pid = FindExitedChild()) {
      const auto worker = std::find_if(children.begin(), children.end(),
                                       [&](const Child& c) { return c.process.pid() == *pid; });
      if (worker == children.end()) {
        (void)ReapChild(*pid);  // an adopted orphan
        continue;
      }
      const std::size_t i = static_cast<std::size_t>(worker - children.begin());
      Child& c = *worker;
      const std::optional<ExitStatus> status = c.process.Wait(milliseconds(0));
      if (!status.has_value()) break;  // not reapable after all: look again next tick
      worker_died = true;
      if (stopping) continue;
      const bool healthy = SteadyClock::now() - c.started >= kHealthyRun;
      const bool clean = status->exited() && status->code == 0;
      c.fast_exits = (healthy || clean) ? 0 : c.fast_exits + 1;
      auto delay = milliseconds(0);
      if (c.fast_exits > 1) {
        delay = std::min<milliseconds>(milliseconds(100 << std::min(c.fast_exits - 2, 7)),
                                       kMaxRestartDelay);
      }
      c.restart_at = SteadyClock::now() + delay;
      CloseBeats(c);
      std::cerr << "taskengine: worker:manager: worker " << i << " (pid " << *pid << ") ended ("
                << (c.hang_killed ? "killed: no heartbeat" : status->ToString()) << "); restarting"
                << (delay.count() > 0 ? " in " + std::to_string(delay.count()) + " ms" : "")
                << std::endl;
    }
    if (worker_died) {
      std::vector<pid_t> alive;
      for (const Child& c : children) {
        if (c.process.running()) alive.push_back(c.process.pid());
      }
      if (int n = KillAdoptedOrphans(alive); n > 0) {
        std::cerr << "taskengine: worker:manager: killed " << n
                  << " orphaned command process group(s) of a dead worker" << std::endl;
      }
    }
    if (stopping) {
      bool any = std::any_of(children.begin(), children.end(),
                             [](const Child& c) { return c.process.running(); });
      if (!any) break;
      if (SteadyClock::now() >= kill_at) {
        for (Child& c : children) c.process.Signal(SIGKILL);
      }
    } else {
      const auto now = SteadyClock::now();
      for (std::size_t i = 0; i < children.size(); ++i) {
        Child& c = children[i];
        if (!c.process.running()) {
          if (now >= c.restart_at) start(i);
          continue;
        }
        if (DrainBeats(c)) c.last_beat = now;
        if (c.beats >= 0 && !c.hang_killed && now - c.last_beat > hang_timeout) {
          // Hung or stopped: SIGKILL works on a stopped process too; the
          // reaping above restarts it and kills its orphaned commands.
          c.hang_killed = true;
          c.process.Signal(SIGKILL);
          std::cerr << "taskengine: worker:manager: worker " << i << " (pid " << c.process.pid()
                    << ") sent no heartbeat for "
                    << std::chrono::duration_cast<milliseconds>(now - c.last_beat).count()
                    << " ms (hung or stopped); killing it (SIGKILL)" << std::endl;
        }
      }
    }
    const timespec tick{0, 50'000'000};
    int sig = sigtimedwait(&signals, nullptr, &tick);
    if ((sig == SIGTERM || sig == SIGINT) && !stopping) {
      stopping = true;
      kill_at = SteadyClock::now() + milliseconds(f.grace_ms);
      std::cerr << "taskengine: worker:manager: stopping " << f.workers << " workers (grace "
                << f.grace_ms << " ms)" << std::endl;
      for (Child& c : children) c.process.Signal(SIGTERM);
    }
  }
  for (Child& c : children) CloseBeats(c);
  std::cerr << "taskengine: worker:manager: stopped" << std::endl;
  return kExitOk;
}

// ---------------------------------------------------------------- worker:effect

struct EffectVerbFlags {
  std::string op;
  std::string name;
  std::string detail;
};

int RunWorkerEffect(const GlobalFlags& flags, const EffectVerbFlags& f) {
  const std::string server = EnvOr("TASKENGINE_SERVER", "");
  const std::string token = EnvOr("TASKENGINE_TOKEN", "");
  const std::string id = EnvOr("TASKENGINE_EXECUTION_ID", "");
  const std::string version = EnvOr("TASKENGINE_CLAIM_VERSION", "");
  if (server.empty() || id.empty() || version.empty()) {
    return Fail(InvalidArgument(
        "worker:effect runs inside a `command` job of worker:start: TASKENGINE_SERVER, "
        "TASKENGINE_EXECUTION_ID and TASKENGINE_CLAIM_VERSION must be set"));
  }
  std::int64_t claim_version = 0;
  try {
    claim_version = std::stoll(version);
  } catch (...) {
    return Fail(InvalidArgument("TASKENGINE_CLAIM_VERSION is not a number"));
  }
  taskengine_client::Client client({server, token});
  auto print = [&](const std::string& answer, const std::string& key) {
    if (flags.json) {
      PrintJson({{"answer", answer}, {"key", key}});
    } else {
      std::cout << answer << std::endl;
    }
  };
  const std::string key = id + ":" + f.name;
  auto failed = [&](const taskengine_client::Status& s) {
    if (s.stale()) {
      print("stale", key);
      return static_cast<int>(kExitStale);
    }
    return Fail(ToEngineStatus(s));
  };
  if (f.op == "reserve") {
    auto r = client.ReserveEffect(id, claim_version, f.name);
    if (!r.ok()) return failed(r.status());
    print(r->answer, r->key.empty() ? key : r->key);
    if (r->answer == "proceed") return kExitOk;
    if (r->answer == "already_done") return kExitAlreadyDone;
    if (r->answer == "ambiguous") return kExitAmbiguous;
    if (r->answer == "canceled") return kExitCanceled;
    if (r->answer == "stale") return kExitStale;
    return kExitOther;
  }
  if (f.op == "commit") {
    auto r = client.CommitEffect(id, claim_version, f.name, f.detail);
    if (!r.ok()) return failed(r.status());
    print("committed", key);
    return kExitOk;
  }
  if (f.op == "release") {
    auto s = client.ReleaseEffect(id, claim_version, f.name);
    if (!s.ok()) return failed(s);
    print("released", key);
    return kExitOk;
  }
  return Fail(InvalidArgument("worker:effect OP must be reserve, commit or release"));
}

void AddConnectionFlags(CLI::App* verb, WorkerFlags* f) {
  verb->add_option("--server", f->server,
                   "Server base URL, e.g. http://127.0.0.1:8080. Default: TASKENGINE_SERVER");
  verb->add_option("--token", f->token,
                   "Bearer token with scope worker for all tenants. Default: TASKENGINE_TOKEN");
  verb->add_option("--queues", f->queues,
                   "Comma-separated queues, in priority order. Default: default");
  verb->add_option("--concurrency", f->concurrency,
                   "Executions run at once per worker process. Default: 4");
  verb->add_option("--max-jobs", f->max_jobs,
                   "Exit after this many executions (memory hygiene); 0 = never. Default: 0");
  verb->add_option("--name", f->name, "A display name for GET /api/v1/workers");
  verb->add_option("--poll-ms", f->poll_ms, "Lease long-poll wait, 0..30000 ms. Default: 30000");
  verb->add_option("--kill-grace-ms", f->kill_grace_ms,
                   "Time between SIGTERM and SIGKILL when a command is stopped. Default: 5000");
}

}  // namespace

void AddWorkerVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs) {
  auto sf = std::make_shared<WorkerFlags>();
  CLI::App* start = AddVerb(
      app, "worker:start",
      "Run one remote worker process: lease executions of --queues from --server over the HTTP "
      "worker protocol and run their `command` handler here (scripts report effects with "
      "`$TASKENGINE_BIN worker:effect reserve|commit|release NAME`). SIGTERM/SIGINT stop it "
      "gracefully: unstarted leases are released, running commands finish. Survives server "
      "restarts (reconnects with backoff). Exit 0 when stopped or after --max-jobs, 1 for bad "
      "flags or a token the server refuses.");
  AddConnectionFlags(start, sf.get());
  verbs->push_back({start, [&flags, sf] { return RunWorkerStart(flags, *sf); }});

  auto mf = std::make_shared<WorkerFlags>();
  CLI::App* manager = AddVerb(
      app, "worker:manager",
      "Keep --workers worker:start processes alive (same flags): a worker that exits or "
      "crashes is restarted at once (a crash loop backs off up to 10 s), and one that sends no "
      "liveness heartbeat (every 500 ms, over a pipe) for --hang-timeout-ms (hung, "
      "SIGSTOPped) is killed with SIGKILL and restarted; its leases expire and the sweeper "
      "recovers them. SIGTERM/SIGINT are forwarded to every worker, which get --grace-ms to "
      "stop before SIGKILL.");
  AddConnectionFlags(manager, mf.get());
  manager->add_option("--workers", mf->workers, "Worker processes to keep. Default: 2");
  manager->add_option("--grace-ms", mf->grace_ms,
                      "How long stopping workers may take before SIGKILL. Default: 30000");
  manager->add_option("--hang-timeout-ms", mf->hang_timeout_ms,
                      "Restart a worker silent this long (1000..3600000; 0 = only restart "
                      "workers that exit). Default: 30000");
  verbs->push_back({manager, [&flags, mf] { return RunWorkerManager(flags, *mf); }});

  auto ef = std::make_shared<EffectVerbFlags>();
  CLI::App* effect = AddVerb(
      app, "worker:effect",
      "The effect ledger for scripts of `command` jobs run by worker:start (over HTTP): "
      "reserve NAME (exit 0 proceed, 10 already_done, 11 ambiguous, 12 stale, 13 canceled), "
      "commit NAME [--detail D], release NAME. Reads TASKENGINE_SERVER, TASKENGINE_TOKEN, "
      "TASKENGINE_EXECUTION_ID and TASKENGINE_CLAIM_VERSION (set by worker:start).");
  effect->add_option("op", ef->op, "reserve, commit or release")->required();
  effect->add_option("name", ef->name, "Effect name")->required();
  effect->add_option("--detail", ef->detail, "commit: what to record, e.g. a message id");
  verbs->push_back({effect, [&flags, ef] { return RunWorkerEffect(flags, *ef); }});
}

}  // namespace taskengine::cli
