#include "server/server.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/scheduler.h"
#include "handlers/command_handler.h"
#include "handlers/http_handler.h"

namespace taskengine {
namespace {

constexpr const char* kCommandHandler = "command";
constexpr const char* kHttpHandler = "http";

Status CheckCommandConfig(const JobDefinition& job) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("job '" + job.name.value + "' (handler command): " + why);
  };
  nlohmann::json config =
      nlohmann::json::parse(job.config_json, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return bad("config must be a table");
  auto argv = config.find("argv");
  if (argv == config.end())
    return bad("config.argv is required, e.g. [\"/usr/bin/env\", \"true\"]");
  if (!argv->is_array() || argv->empty()) return bad("config.argv must be a non-empty array");
  for (const auto& arg : *argv) {
    if (!arg.is_string()) return bad("config.argv must hold only strings");
  }
  const std::string program = argv->front().get<std::string>();
  if (program.empty() || program.front() != '/') {
    return bad("config.argv[0] must be an absolute path (no PATH search), got '" + program + "'");
  }
  // Everything else exactly as the handler reads it before a run.
  if (Status s = CheckCommandHandlerConfig(job.config_json); !s.ok()) return bad(s.message());
  return Status::Ok();
}

}  // namespace

EngineOptions ToEngineOptions(const ServerConfig& config, EngineMode mode) {
  EngineOptions o;
  o.database_path = config.database_path;
  o.sync = config.sync;
  o.database_url = config.database_url;
  o.database_schema = config.database_schema;
  o.migrate = mode != EngineMode::kClient;
  o.worker_threads = mode == EngineMode::kServe ? config.worker_threads : 0;
  o.run_sweeper = mode == EngineMode::kServe;
  o.queues = config.queues;
  o.poll_interval_ms = config.poll_interval_ms;
  o.sweep_interval_ms = config.sweep_interval_ms;
  o.shutdown_grace_ms = config.shutdown_grace_ms;
  o.replay_requires_approval = config.replay_requires_approval;
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

std::vector<std::string> BuiltinHandlerNames() { return {kCommandHandler, kHttpHandler}; }

Status CheckJobDefinition(const JobDefinition& job) {
  if (auto schedule = CheckJobSchedule(job); !schedule.ok()) return schedule.status();
  const std::vector<std::string> known = BuiltinHandlerNames();
  if (std::find(known.begin(), known.end(), job.handler) == known.end()) {
    std::string list;
    for (const std::string& name : known) list += (list.empty() ? "" : ", ") + name;
    return InvalidArgument("job '" + job.name.value + "' names handler '" + job.handler +
                           "', which this server does not have (known: " + list + ")");
  }
  if (job.handler == kCommandHandler) TE_RETURN_IF_ERROR(CheckCommandConfig(job));
  if (job.handler == kHttpHandler) {
    auto http = ParseHttpHandlerConfig(job.config_json);
    if (!http.ok()) {
      return InvalidArgument("job '" + job.name.value +
                             "' (handler http): " + http.status().message());
    }
  }
  return Status::Ok();
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
  for (const JobDefinition& job : config.jobs) TE_RETURN_IF_ERROR(CheckJobDefinition(job));
  return Status::Ok();
}

Result<std::unique_ptr<Engine>> OpenEngine(const ServerConfig& config, EngineMode mode) {
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
  TE_RETURN_IF_ERROR(
      engine->RegisterHandler(kCommandHandler, MakeCommandHandler(std::move(command_options))));
  TE_RETURN_IF_ERROR(engine->RegisterHandler(kHttpHandler, MakeHttpHandler()));
  if (seed) {
    for (const JobDefinition& job : config.jobs) {
      Status s = engine->DefineJob(job);
      if (!s.ok()) {
        return Status(s.code(), "seeding job '" + job.name.value + "': " + s.message());
      }
    }
  }
  if (mode == EngineMode::kServe) {
    Status s = engine->Start();
    if (!s.ok()) return Status(s.code(), "starting the engine: " + s.message());
  }
  return engine;
}

}  // namespace taskengine
