#include "server/server.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/cron.h"
#include "core/notify_target.h"
#include "engine/engine_internal.h"
#include "engine/notifier.h"
#include "engine/scheduler.h"
#include "handlers/command_handler.h"
#include "handlers/http_handler.h"
#include "handlers/named_config.h"
#include "handlers/notify_handler.h"
#include "server/job_seeding.h"
#include "server/logging.h"

namespace taskengine {
namespace {

constexpr const char* kCommandHandler = "command";
constexpr const char* kHttpHandler = "http";
// Run by a remote worker that knows the job by name (a worker SDK); no
// handler of the server runs it.
constexpr const char* kRemoteHandler = "remote";
constexpr std::size_t kMaxText = 200;

// A failed check: kInvalidArgument "job 'NAME': <field> <problem>", the field
// in *field when asked.
Status Bad(const JobDefinition& job, std::string_view field, const std::string& problem,
           std::string* out_field) {
  if (out_field != nullptr) *out_field = std::string(field);
  return InvalidArgument("job '" + job.name.value + "': " + std::string(field) + " " + problem);
}

// A failed check of the handler's config: "job 'NAME' (handler H): <problem>",
// field "config".
Status BadConfig(const JobDefinition& job, const std::string& problem, std::string* out_field) {
  if (out_field != nullptr) *out_field = "config";
  return InvalidArgument("job '" + job.name.value + "' (handler " + job.handler + "): " + problem);
}

Status CheckRange(const JobDefinition& job, std::string_view field, std::int64_t value,
                  std::int64_t min, std::int64_t max, std::string* out_field) {
  if (value >= min && value <= max) return Status::Ok();
  return Bad(job, field,
             "must be between " + std::to_string(min) + " and " + std::to_string(max) + " (got " +
                 std::to_string(value) + ")",
             out_field);
}

// A `command` config (a profile reference expanded): an "argv" array of
// strings whose first element is an absolute path, then everything the
// handler reads before a run.
Status CheckCommandConfig(const JobDefinition& job, const ServerConfig& server,
                          std::string* field) {
  auto bad = [&](const std::string& why) { return BadConfig(job, why, field); };
  auto expanded = ExpandNamedConfig(job.config_json, kCommandProfileKey, server.command_profiles,
                                    kCommandServerOwnedKeys, "[[command_profile]]");
  if (!expanded.ok()) return bad(expanded.status().message());
  nlohmann::json config = nlohmann::json::parse(*expanded, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return bad("must be a table");
  auto argv = config.find("argv");
  if (argv == config.end()) {
    return bad(
        "config.argv is required, e.g. [\"/usr/bin/env\", \"true\"], or config.profile naming a "
        "[[command_profile]]");
  }
  if (!argv->is_array() || argv->empty()) return bad("config.argv must be a non-empty array");
  for (const auto& arg : *argv) {
    if (!arg.is_string()) return bad("config.argv must hold only strings");
  }
  const std::string program = argv->front().get<std::string>();
  if (program.empty() || program.front() != '/') {
    return bad("config.argv[0] must be an absolute path (no PATH search), got '" + program + "'");
  }
  // Everything else exactly as the handler reads it before a run.
  if (Status s = CheckCommandHandlerConfig(*expanded); !s.ok()) return bad(s.message());
  return Status::Ok();
}

// The settings of a named profile or target, checked as a job using it; the
// message names where the file defines it.
Status CheckNamedSettings(const ServerConfig& config) {
  for (const auto& [name, settings] : config.command_profiles) {
    JobDefinition probe;
    probe.name = JobName(name);
    probe.handler = kCommandHandler;
    probe.config_json = settings;
    if (Status s = CheckCommandConfig(probe, config, nullptr); !s.ok()) {
      return Located(InvalidArgument("[[command_profile]] '" + name +
                                     "': " + s.message().substr(s.message().find("): ") + 3)),
                     config, "command_profile", name);
    }
  }
  for (const auto& [name, settings] : config.http_targets) {
    if (auto http = ParseHttpHandlerConfig(settings); !http.ok()) {
      return Located(InvalidArgument("[[http_target]] '" + name + "': " + http.status().message()),
                     config, "http_target", name);
    }
  }
  return Status::Ok();
}

// Notify targets as ParseNotifyTargets reads them, webhook and Slack ones
// naming an [[http_target]] of the file.
Status CheckNotifyTargets(const std::vector<std::string>& texts, const ServerConfig& config) {
  TE_ASSIGN_OR_RETURN(std::vector<NotifyTarget> targets, ParseNotifyTargets(texts));
  for (const NotifyTarget& t : targets) {
    if (t.channel != NotifyChannel::kEmail && config.http_targets.count(t.address) == 0) {
      return InvalidArgument("'" + t.ToString() +
                             "' names no [[http_target]] of the server's configuration");
    }
  }
  return Status::Ok();
}

NotifyDeliveryCounters& DeliveryCounters() {
  static NotifyDeliveryCounters counters;
  return counters;
}

}  // namespace

const NotifyDeliveryCounters& NotifyDeliveryCountersOfProcess() { return DeliveryCounters(); }

Status CheckNotifySettings(const ServerConfig& config) {
  TE_RETURN_IF_ERROR(ValidateNotifySettings(config.notifications));
  if (Status s = CheckNotifyTargets(config.notifications.targets, config); !s.ok()) {
    return InvalidArgument("[notifications] targets: " + s.message());
  }
  return Status::Ok();
}

EngineOptions ToEngineOptions(const ServerConfig& config, EngineMode mode) {
  EngineOptions o = config;  // the engine's part of the configuration
  o.migrate = mode != EngineMode::kClient;
  if (mode != EngineMode::kServe) o.worker_threads = 0;
  // The internal queue of notification deliveries (I6), worked by serve's
  // pool ahead of everything else, two at a time.
  if (mode == EngineMode::kServe && config.notifications.enabled &&
      std::none_of(o.queues.begin(), o.queues.end(),
                   [](const QueueConfig& q) { return q.name == kNotifyQueueName; })) {
    if (o.queues.empty()) o.queues.push_back(QueueConfig{});
    o.queues.push_back(QueueConfig{std::string(kNotifyQueueName), 1'000, 2, true});
  }
  o.run_sweeper = mode == EngineMode::kServe;
  // Lifecycle lines belong to the node that runs the work; the CLI's own
  // changes are in its output and the audit log.
  if (mode == EngineMode::kServe && config.log_lifecycle) o.lifecycle_listener = LogLifecycle;
  return o;
}

std::map<std::string, std::string> CommandEnvironment(const ServerConfig& config) {
  std::map<std::string, std::string> env;
  std::error_code ec;
  std::filesystem::path db = std::filesystem::absolute(config.database_path, ec);
  env["TASKENGINE_DB"] = ec ? config.database_path : db.lexically_normal().string();
  env["TASKENGINE_SYNC"] = std::string(SyncModeName(config.sync));
  if (!config.database_url.empty()) {
    // The same database for `taskengine` verbs a command runs (PostgreSQL wins).
    env["TASKENGINE_DATABASE_URL"] = config.database_url;
    env["TASKENGINE_DATABASE_SCHEMA"] = config.database_schema;
  }
  std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  // After an upgrade replaced the file, the link reads "<path> (deleted)": the
  // binary now at <path> is the one to call.
  constexpr std::string_view kDeleted = " (deleted)";
  if (!ec && self.ends_with(kDeleted)) self.resize(self.size() - kDeleted.size());
  if (!ec && !self.empty() && self.front() == '/') env["TASKENGINE_BIN"] = self;
  return env;
}

// A `remote` job: no config (its worker holds the code), and a queue this
// server's worker pool does not claim from, which would fail it for want of
// a handler.
Status CheckRemoteJob(const JobDefinition& job, const ServerConfig& config, std::string* field) {
  auto parsed =
      nlohmann::json::parse(job.config_json.empty() ? "{}" : job.config_json, nullptr, false);
  if (!parsed.is_object() || !parsed.empty()) {
    return BadConfig(job, "a remote job has no config (its worker knows the job by name): {}",
                     field);
  }
  const auto queue = std::find_if(config.queues.begin(), config.queues.end(),
                                  [&](const QueueConfig& q) { return q.name == job.queue; });
  if (queue == config.queues.end() || queue->pool) {
    return Bad(job, "queue",
               "'" + job.queue +
                   "' is claimed by this server's worker pool, which cannot run a remote job: "
                   "give the job a [[queue]] declared with pool = false, which only remote "
                   "workers lease from",
               field);
  }
  return Status::Ok();
}

std::vector<std::string> BuiltinHandlerNames() {
  return {kCommandHandler, kHttpHandler, kRemoteHandler};
}

Status CheckJobDefinition(const JobDefinition& job, const ServerConfig& config,
                          std::string* field) {
  if (!IsValidJobName(job.name.value)) {
    return Bad(job, "name", "must match [a-z0-9][a-z0-9._-]{0,99}", field);
  }
  if (IsReservedJobName(job.name.value)) {
    return Bad(job, "name", "is reserved: names under taskengine. belong to the server", field);
  }
  if (job.display_name.size() > kMaxText) {
    return Bad(job, "display_name", "is longer than 200 bytes", field);
  }
  const std::vector<std::string> known = BuiltinHandlerNames();
  if (std::find(known.begin(), known.end(), job.handler) == known.end()) {
    std::string list;
    for (const std::string& name : known) list += (list.empty() ? "" : ", ") + name;
    return Bad(job, "handler",
               "'" + job.handler.substr(0, 100) +
                   "' is not a handler of this server (known: " + list + ")",
               field);
  }
  if (!IsValidQueueName(job.queue)) {
    return Bad(job, "queue", "'" + job.queue.substr(0, 100) + "' is not a valid queue name", field);
  }
  const bool declared =
      config.queues.empty()  // a ServerConfig built by hand: "default"
          ? job.queue == QueueConfig{}.name
          : std::any_of(config.queues.begin(), config.queues.end(),
                        [&](const QueueConfig& q) { return q.name == job.queue; });
  if (!declared) {
    return Bad(job, "queue",
               "'" + job.queue + "' is not a queue of the server's configuration (its work " +
                   "would never run)",
               field);
  }
  if (job.schedule.size() > kMaxText)
    return Bad(job, "schedule", "is longer than 200 bytes", field);
  if (!job.schedule.empty()) {
    auto cron = ParseCron(job.schedule);
    if (!cron.ok()) {
      if (field != nullptr) *field = "schedule";
      return InvalidArgument("job '" + job.name.value + "': invalid schedule \"" + job.schedule +
                             "\": " + cron.status().message());
    }
    if (!cron->CanEverFire()) {
      if (field != nullptr) *field = "schedule";
      return InvalidArgument("job '" + job.name.value + "': invalid schedule \"" + job.schedule +
                             "\": it never fires");
    }
  }
  if (job.timezone.empty() || job.timezone.size() > 64) {
    return Bad(job, "timezone", "must be an IANA time zone name, e.g. Europe/Paris", field);
  }
  TE_RETURN_IF_ERROR(
      CheckRange(job, "catch_up_window_ms", job.catch_up_window_ms, 0, 7 * kMillisPerDay, field));
  TE_RETURN_IF_ERROR(CheckRange(job, "window_ms", job.window_ms, 0, 366 * kMillisPerDay, field));
  if (job.window_ms % 60'000 != 0) {
    return Bad(job, "window_ms", "must be a whole number of minutes", field);
  }
  if (auto schedule = CheckJobSchedule(job); !schedule.ok()) {
    if (field != nullptr) *field = "timezone";  // the other causes are checked above
    return schedule.status();
  }
  TE_RETURN_IF_ERROR(CheckRange(job, "timeout_ms", job.timeout_ms, 1, 7 * kMillisPerDay, field));
  TE_RETURN_IF_ERROR(CheckRange(job, "lease_ms", job.lease_ms, 100, kMillisPerDay, field));
  const RetryPolicy& p = job.retry;
  TE_RETURN_IF_ERROR(CheckRange(job, "max_attempts", p.max_attempts, 1, 1000, field));
  TE_RETURN_IF_ERROR(
      CheckRange(job, "backoff_base_ms", p.backoff_base_ms, 0, kMillisPerDay, field));
  TE_RETURN_IF_ERROR(
      CheckRange(job, "backoff_cap_ms", p.backoff_cap_ms, 0, 7 * kMillisPerDay, field));
  if (p.backoff_cap_ms < p.backoff_base_ms) {
    return Bad(job, "backoff_cap_ms",
               "(" + std::to_string(p.backoff_cap_ms) + ") must not be below backoff_base_ms (" +
                   std::to_string(p.backoff_base_ms) + ")",
               field);
  }
  TE_RETURN_IF_ERROR(
      CheckRange(job, "max_permanent_attempts", p.max_permanent_attempts, 1, 1000, field));
  TE_RETURN_IF_ERROR(CheckRange(job, "max_unsupported_schema_attempts",
                                p.max_unsupported_schema_attempts, 1, 1000, field));
  TE_RETURN_IF_ERROR(
      CheckRange(job, "max_ambiguous_attempts", p.max_ambiguous_attempts, 1, 1000, field));
  TE_RETURN_IF_ERROR(CheckRange(job, "max_consecutive_lease_expiries",
                                p.max_consecutive_lease_expiries, 1, 1000, field));
  if (job.lane_template.size() > kMaxText) {
    return Bad(job, "lane_template", "is longer than 200 bytes", field);
  }
  std::set<int> versions;
  for (int v : job.accepted_schema_versions) {
    if (v < 1 || v > 1'000'000) {
      return Bad(job, "accepted_schema_versions", "must hold integers from 1 to 1000000", field);
    }
    if (!versions.insert(v).second) {
      return Bad(job, "accepted_schema_versions", "lists " + std::to_string(v) + " twice", field);
    }
  }
  if (Status s = CheckNotifyTargets(job.notify_targets, config); !s.ok()) {
    return Bad(job, "notify_targets", s.message(), field);
  }
  if (job.handler == kCommandHandler) {
    TE_RETURN_IF_ERROR(CheckCommandConfig(job, config, field));
  }
  if (job.handler == kRemoteHandler) TE_RETURN_IF_ERROR(CheckRemoteJob(job, config, field));
  if (job.handler == kHttpHandler) {
    auto http = ParseHttpHandlerConfig(job.config_json, config.http_targets);
    if (!http.ok()) {
      return BadConfig(job, http.status().message(), field);
    }
  }
  return Status::Ok();
}

Result<std::string> ExpandHandlerConfig(const JobDefinition& job, const ServerConfig& config) {
  if (job.handler == kCommandHandler) {
    return ExpandNamedConfig(job.config_json, kCommandProfileKey, config.command_profiles,
                             kCommandServerOwnedKeys, "[[command_profile]]");
  }
  if (job.handler == kHttpHandler) {
    return ExpandNamedConfig(job.config_json, kHttpTargetKey, config.http_targets,
                             kHttpServerOwnedKeys, "[[http_target]]");
  }
  return job.config_json;
}

std::vector<std::string> ServerOwnedConfigKeys(std::string_view handler) {
  std::vector<std::string> keys;
  if (handler == kCommandHandler) {
    for (std::string_view k : kCommandServerOwnedKeys) keys.emplace_back(k);
  } else if (handler == kHttpHandler) {
    for (std::string_view k : kHttpServerOwnedKeys) keys.emplace_back(k);
  }
  return keys;
}

Status CheckJobsAgainstHandlers(const ServerConfig& config) {
  TE_RETURN_IF_ERROR(CheckNamedSettings(config));
  TE_RETURN_IF_ERROR(CheckNotifySettings(config));
  for (const JobDefinition& job : config.jobs) {
    std::string field;
    if (Status s = CheckJobDefinition(job, config, &field); !s.ok()) {
      return Located(s, config, "job", job.name.value, field);  // the key's line in the file
    }
  }
  return Status::Ok();
}

Result<std::unique_ptr<Engine>> OpenEngine(const ServerConfig& config, EngineMode mode,
                                           const OpenOptions& options) {
  const bool seed = mode != EngineMode::kClient;
  if (seed) TE_RETURN_IF_ERROR(CheckJobsAgainstHandlers(config));
  const std::string& path = config.database_path;
  const std::string where = config.database_url.empty() ? path : DescribeDatabase(config);
  if (mode == EngineMode::kClient && config.database_url.empty()) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      return Unavailable("database " + path +
                         " does not exist: run `taskengine migrate` first (or pass --db)");
    }
  }
  auto opened = Engine::Open(ToEngineOptions(config, mode));
  if (!opened.ok()) {
    const Status& s = opened.status();
    if (s.code() == ErrorCode::kInvalidArgument) return s;
    return Unavailable("cannot open database " + where + ": " + s.message());
  }
  std::unique_ptr<Engine> engine = std::move(opened).value();
  CommandHandlerOptions command_options;
  command_options.server_env = CommandEnvironment(config);
  command_options.profiles = config.command_profiles;
  TE_RETURN_IF_ERROR(
      engine->RegisterHandler(kCommandHandler, MakeCommandHandler(std::move(command_options))));
  HttpHandlerOptions http_options;
  http_options.targets = config.http_targets;
  TE_RETURN_IF_ERROR(engine->RegisterHandler(kHttpHandler, MakeHttpHandler(http_options)));
  NotifyHandlerOptions notify_options;
  notify_options.settings = config.notifications;
  notify_options.http = http_options;
  if (!config.notifications.smtp_password_env.empty()) {
    if (const char* p = std::getenv(config.notifications.smtp_password_env.c_str())) {
      notify_options.smtp_password = p;
    }
  }
  notify_options.counters = &DeliveryCounters();
  TE_RETURN_IF_ERROR(engine->RegisterHandler(std::string(kNotifyHandlerName),
                                             MakeNotifyHandler(std::move(notify_options))));
  if (seed && !options.skip_seeding) {
    TE_RETURN_IF_ERROR(SeedJobs(StoreOf(*engine), config.jobs, engine->clock()->NowMillis()));
  }
  if (mode == EngineMode::kServe) {
    // The server's own job (I6), defined by the node that runs its deliveries,
    // always as this binary defines it.
    TE_RETURN_IF_ERROR(StoreOf(*engine).UpsertJob(NotifyJobDefinition()));
  }
  if (mode == EngineMode::kServe) {
    Status s = engine->Start();
    if (!s.ok()) return Status(s.code(), "starting the engine: " + s.message());
  }
  return engine;
}

}  // namespace taskengine
