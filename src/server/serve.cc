#include "server/serve.h"

#include <unistd.h>

#include "engine/scheduler.h"

#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>

#include "server/server.h"

namespace taskengine {
namespace {

constexpr int kForcedExitCode = 5;

std::string SignalName(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    default:
      return "signal " + std::to_string(sig);
  }
}

std::string Describe(const std::vector<QueueConfig>& queues) {
  std::string out;
  for (const QueueConfig& q : queues) {
    if (!out.empty()) out += ", ";
    out += q.name + " (priority " + std::to_string(q.priority) + ", concurrency " +
           (q.concurrency == 0 ? std::string("all") : std::to_string(q.concurrency)) + ")";
  }
  return out;
}

// "<hostname>:<pid>": unique per process, as the leader lock needs.
std::string SchedulerNodeId() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "localhost");
  return std::string(host) + ":" + std::to_string(getpid());
}

}  // namespace

Status Serve(const ServerConfig& config) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  spdlog::info("taskengine serve: config {}",
               config.source.empty() ? "(none: defaults)" : config.source);
  spdlog::info("database {} (sync {})", config.database_path, SyncModeName(config.sync));
  spdlog::info("{} worker threads; queues: {}", config.worker_threads, Describe(config.queues));
  auto opened = OpenEngine(config, EngineMode::kServe);
  if (!opened.ok()) return opened.status();
  std::unique_ptr<Engine> engine = std::move(opened).value();
  std::string jobs;
  for (const JobDefinition& j : config.jobs) jobs += (jobs.empty() ? "" : ", ") + j.name.value;
  spdlog::info("seeded {} job definitions{}{}", config.jobs.size(), jobs.empty() ? "" : ": ", jobs);
  // The cron scheduler (T3, T6): cycles aligned to the minute; the leader lock
  // makes it safe to run on every node.
  SchedulerOptions scheduler_options;
  scheduler_options.node_id = SchedulerNodeId();
  Scheduler scheduler(&engine->store(), SystemClock::Get(), scheduler_options);
  TE_RETURN_IF_ERROR(scheduler.Start([](const Result<CycleReport>& report) {
    if (!report.ok()) {
      spdlog::warn("scheduler cycle failed: {}", report.status().ToString());
    } else if (report->leader && (report->executions_created > 0 || report->skipped > 0 ||
                                  !report->errors.empty())) {
      spdlog::info("scheduler: {} executions created, {} coalesced, {} skipped, {} errors",
                   report->executions_created, report->coalesced, report->skipped,
                   report->errors.size());
    }
  }));
  spdlog::info("scheduler running as {}", scheduler_options.node_id);
  spdlog::info("serving (poll {} ms, sweep {} ms); SIGTERM or SIGINT stops",
               config.poll_interval_ms, config.sweep_interval_ms);

  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  spdlog::info("received {}: stopping (running handlers get up to {} ms)", SignalName(sig),
               config.shutdown_grace_ms);

  // A second signal means "now": leases left behind expire and are recovered.
  std::atomic<bool> stopped{false};
  std::thread watcher([&] {
    const timespec tick{0, 100'000'000};
    while (!stopped.load()) {
      siginfo_t info;
      int s = sigtimedwait(&stop_signals, &info, &tick);
      if (s > 0) {
        spdlog::warn("received {} again: exiting without waiting for running handlers",
                     SignalName(s));
        spdlog::default_logger()->flush();
        std::_Exit(kForcedExitCode);
      }
    }
  });
  scheduler.Stop();
  engine->Stop();
  engine.reset();
  stopped.store(true);
  watcher.join();
  spdlog::info("stopped");
  return Status::Ok();
}

}  // namespace taskengine
