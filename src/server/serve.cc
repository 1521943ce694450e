#include "server/serve.h"

#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>

#include "api/api.h"
#include "api/http_server.h"
#include "api/rate_limit.h"
#include "api/store_authenticator.h"
#include "engine/engine_internal.h"
#include "engine/notifier.h"
#include "engine/retention.h"
#include "engine/scheduler.h"
#include "handlers/notify_handler.h"
#include "server/logging.h"
#include "server/server.h"
#include "storage/open_store.h"

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

// "<hostname>:<pid>": unique per process, as the leader lock needs.
std::string SchedulerNodeId() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "localhost");
  return std::string(host) + ":" + std::to_string(getpid());
}

// "http://127.0.0.1:8080", "http://[::1]:8080".
std::string BaseUrl(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return "http://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

api::RateLimit PerSecond(double per_second, double burst) { return {per_second, burst}; }

// Raises the soft RLIMIT_NOFILE to the hard limit: every connection, database
// file and handler pipe is a descriptor, and the default soft limit (1024)
// lets about a thousand idle connections lock everyone out (issue 13,
// finding 6). Logs the limit in force.
void RaiseDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t before = limit.rlim_cur;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      limit.rlim_cur = before;
      spdlog::warn("cannot raise the descriptor limit from {}: {}", before, std::strerror(errno));
    }
  }
  spdlog::info("descriptor limit {} (hard {})", limit.rlim_cur, limit.rlim_max);
  if (limit.rlim_cur < 4096) {
    spdlog::warn(
        "a descriptor limit of {} caps open connections near {}; raise it "
        "(systemd: LimitNOFILE=65536)",
        limit.rlim_cur, limit.rlim_cur - std::max<rlim_t>(64, limit.rlim_cur / 8));
  }
}

// Logs how to create the first admin when nobody can log in yet (X1).
void HintFirstAdmin(Store& store) {
  auto users = store.ListUsers();
  auto tokens = store.ListTokens();
  if (!users.ok() || !tokens.ok() || !users->empty() || !tokens->empty()) return;
  spdlog::warn(
      "no users and no API tokens yet: create the first admin with `taskengine user:add admin "
      "--role=admin` (prints a random password once), or an API token with `taskengine "
      "token:create --name=admin --scopes=admin` (prints the secret once)");
}

spdlog::level::level_enum AccessLogLevel() {
  return CurrentLogFormat() == LogFormat::kJson ? spdlog::level::info : spdlog::level::debug;
}

// `respond` with the access log: one record per request as its response is
// handed to the server, with method, path (without the query string, which
// may carry secrets), status, duration and peer. Info level in JSON log
// format, debug in text format. The bearer token and cookies are never
// logged; the principal's name is (HttpResponse::principal).
api::Responder Logged(const api::HttpRequest& request, const api::Responder& respond,
                      spdlog::level::level_enum level) {
  const auto start = std::chrono::steady_clock::now();
  return respond.Wrap([start, level, method = request.method_name, path = request.path,
                       peer = request.remote_address](api::HttpResponse& response) {
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    LogEvent(level, "http request",
             {{"method", method},
              {"path", path.substr(0, 512)},
              {"status", response.status},
              {"duration_ms", static_cast<double>(static_cast<std::int64_t>(ms * 10)) / 10},
              {"remote", peer},
              {"principal", response.principal}});
  });
}

// `inner` with the access log (Logged).
api::RequestHandler WithAccessLog(api::RequestHandler inner) {
  return [inner = std::move(inner), level = AccessLogLevel()](api::HttpRequest request,
                                                              api::Responder respond) {
    if (!spdlog::should_log(level)) {
      inner(std::move(request), std::move(respond));
      return;
    }
    api::Responder logged = Logged(request, std::move(respond), level);
    inner(std::move(request), std::move(logged));
  };
}

// The same for the handling that may run on a network thread: a request it
// leaves is logged by the RequestHandler that takes it.
api::InlineHandler WithAccessLog(api::InlineHandler inner) {
  return [inner = std::move(inner), level = AccessLogLevel()](api::HttpRequest& request,
                                                              const api::Responder& respond) {
    if (!spdlog::should_log(level)) return inner(request, respond);
    api::Responder logged = Logged(request, respond, level);
    if (inner(request, logged)) return true;
    logged.Abandon();  // the RequestHandler logs it
    return false;
  };
}

}  // namespace

Status CheckHttpConfig(const HttpConfig& http) {
  if (!http.auth && !IsLoopbackHost(http.host)) {
    return InvalidArgument(
        "[http] auth = false is only allowed on a loopback host (127.0.0.1, ::1, localhost), "
        "not '" +
        http.host + "': enable auth or listen on loopback");
  }
  return Status::Ok();
}

Status Serve(const ServerConfig& config) {
  TE_RETURN_IF_ERROR(CheckHttpConfig(config.http));
  RaiseDescriptorLimit();
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  spdlog::info("taskengine serve: config {}",
               config.source.empty() ? "(none: defaults)" : config.source);
  spdlog::info("database {}", DescribeDatabase(config));
  if (!config.redis_url.empty()) {
    spdlog::info("redis transport {} (prefix {})", RedactUrl(config.redis_url),
                 config.redis_prefix);
  }
  spdlog::info("{} worker threads; queues: {}", config.worker_threads,
               DescribeQueues(config.queues));
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
  // A killed leader's lock expires within seconds (the loop renews it); the
  // next node's cycle takes over.
  scheduler_options.lock_ttl_ms = 15'000;
  if (config.log_lifecycle) scheduler_options.lifecycle = LogLifecycle;
  // The engine's clock: with PostgreSQL the database's, so fire times, the
  // leader lock's expiry and the leases all follow one clock across nodes.
  Scheduler scheduler(&StoreOf(*engine), engine->clock(), scheduler_options);
  TE_RETURN_IF_ERROR(scheduler.Start([](const Result<CycleReport>& report) {
    if (!report.ok()) {
      spdlog::warn("scheduler cycle failed: {}", report.status().ToString());
    } else if (report->leader &&
               (report->executions_created > 0 || report->skipped > 0 || !report->errors.empty())) {
      spdlog::info("scheduler: {} executions created, {} coalesced, {} skipped, {} errors",
                   report->executions_created, report->coalesced, report->skipped,
                   report->errors.size());
    }
  }));
  spdlog::info("scheduler running as {}", scheduler_options.node_id);

  // Retention (I7): one node at a time purges what has aged out.
  std::unique_ptr<Retention> retention;
  if (config.retention.enabled) {
    RetentionOptions retention_options;
    retention_options.policy = config.retention;
    retention_options.node_id = scheduler_options.node_id;
    retention = std::make_unique<Retention>(&StoreOf(*engine), engine->clock(), retention_options);
    if (Status s = retention->Start(); !s.ok()) {
      scheduler.Stop();
      engine->Stop();
      return s;
    }
    spdlog::info(
        "retention: executions {} days, logs {} days, audit {} days (0 = forever), every {} s",
        config.retention.executions_ms / kRetentionDayMs,
        config.retention.logs_ms / kRetentionDayMs, config.retention.audit_ms / kRetentionDayMs,
        config.retention.interval_ms / 1000);
  } else {
    spdlog::info("retention: [retention] enabled = false; nothing is purged");
  }

  // Failure notifications (I6): the outbox is worked by one node at a time;
  // every node watches its own sweeper for orphan storms.
  std::unique_ptr<Notifier> notifier;
  if (config.notifications.enabled) {
    NotifierOptions notifier_options;
    notifier_options.settings = config.notifications;
    notifier_options.node_id = scheduler_options.node_id;
    notifier = std::make_unique<Notifier>(engine.get(), &StoreOf(*engine), engine->clock(),
                                          notifier_options);
    if (Status s = notifier->Start(); !s.ok()) {
      scheduler.Stop();
      if (retention) retention->Stop();
      engine->Stop();
      return s;
    }
    spdlog::info("notifier: at most {} notifications per job per hour; {} global targets",
                 config.notifications.per_job_per_hour, config.notifications.targets.size());
  } else {
    spdlog::info("notifier: [notifications] enabled = false; failures are not notified");
  }

  // The REST API (I1) behind authentication (X1), unless turned off on loopback.
  std::unique_ptr<api::Authenticator> authenticator;
  if (config.http.auth) {
    api::StoreAuthenticatorOptions ao;
    ao.session_idle_ms = config.http.session_idle_ms;
    ao.session_absolute_ms = config.http.session_absolute_ms;
    ao.secure_cookies = config.http.secure_cookies;
    ao.clock = engine->clock();  // session expiry by the same clock on every node
    authenticator = std::make_unique<api::StoreAuthenticator>(&StoreOf(*engine), ao);
    HintFirstAdmin(StoreOf(*engine));
  } else {
    authenticator = std::make_unique<api::AnonymousAuthenticator>();
    spdlog::warn(
        "[http] auth = false: every request acts as the global admin 'anonymous' "
        "(loopback only)");
  }
  api::RateLimiterOptions ro;
  ro.login = PerSecond(config.http.login_per_minute / 60.0, config.http.login_per_minute);
  ro.dispatch = PerSecond(config.http.dispatch_per_second, 2.0 * config.http.dispatch_per_second);
  ro.lease = PerSecond(config.http.lease_per_second, 2.0 * config.http.lease_per_second);
  api::RateLimiter limiter(ro);
  api::ApiOptions api_options;
  api_options.clock = engine->clock();
  api_options.queues = config.queues;
  api_options.metrics_open = config.http.metrics_open;
  // /metrics shows the scheduler's totals too (I5); the API does not know it.
  api_options.extra_metrics = [&scheduler, &retention, &notifier](std::string* out) {
    AppendSchedulerMetrics(scheduler.totals(), out);
    AppendRetentionMetrics(retention ? retention->totals() : RetentionTotals{}, out);
    AppendNotifierMetrics(notifier ? notifier->totals() : NotifierTotals{}, out);
    AppendDeliveryMetrics(NotifyDeliveryCountersOfProcess(), out);
  };
  api_options.login.threads = config.http.login_threads;
  api_options.login.max_waiting = config.http.login_queue;
  api_options.login.global =
      PerSecond(config.http.login_per_second, 2.0 * config.http.login_per_second);
  api_options.login.lockout_after = config.http.login_lockout_after;
  // Job edits: what runs and where requests go stay the configuration's (W2,
  // W3); an edited definition is checked exactly as a configured one.
  api_options.server_owned_config_keys = ServerOwnedConfigKeys;
  api_options.check_job = [config](const JobDefinition& job, std::string* field) {
    return CheckJobDefinition(job, config, field);
  };
  api_options.expand_handler_config = [config](const JobDefinition& job) {
    return ExpandHandlerConfig(job, config);
  };
  api_options.redact_keys = config.redact_keys;
  api::Api rest(engine.get(), authenticator.get(), api_options);
  rest.SetRateLimiter(&limiter);
  api::HttpServerOptions ho;
  ho.host = config.http.host;
  ho.port = config.http.port;
  ho.public_hosts = config.http.public_hosts;
  ho.max_connections = config.http.max_connections;
  ho.max_connections_per_client = config.http.max_connections_per_client;
  ho.header_timeout_ms = config.http.header_timeout_ms;
  // A dispatch body is its payload plus a little JSON around it.
  ho.max_body_bytes = std::max(ho.max_body_bytes, config.max_payload_bytes + 64 * 1024);
  if (config.http.public_hosts.empty() && !IsLoopbackHost(config.http.host)) {
    spdlog::warn(
        "[http] public_hosts is empty: requests must name 127.0.0.1, localhost or {} in "
        "their Host header; others get 421 (list the names clients use)",
        config.http.host);
  }
  api::HttpServer http(ho, WithAccessLog(rest.handler()), WithAccessLog(rest.inline_handler()));
  Status listening = http.Start();
  if (!listening.ok()) {
    if (retention) retention->Stop();
    if (notifier) notifier->Stop();
    scheduler.Stop();
    engine->Stop();
    return Status(listening.code(),
                  "cannot serve HTTP on " + BaseUrl(ho.host, ho.port) + ": " + listening.message());
  }
  spdlog::info("listening on {} (at most {} connections, {} per client address)",
               BaseUrl(ho.host, http.port()), http.max_connections(),
               ho.max_connections_per_client);
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
  rest.StopLongPolls();
  http.Stop(std::min<Millis>(config.shutdown_grace_ms, 5'000));
  if (retention) retention->Stop();
  if (notifier) notifier->Stop();
  scheduler.Stop();
  engine->Stop();
  engine.reset();
  stopped.store(true);
  watcher.join();
  spdlog::info("stopped");
  return Status::Ok();
}

}  // namespace taskengine
