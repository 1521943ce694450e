// config:check: everything a `serve` start checks in its configuration,
// without opening the database or starting anything.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "cli.h"
#include "server/config.h"
#include "server/serve.h"
#include "server/server.h"
#include "storage/open_store.h"

namespace taskengine::cli {
namespace {

namespace fs = std::filesystem;

// What `serve` (or `migrate`) would find at the SQLite path, found without
// creating anything.
struct SqlitePathCheck {
  std::string directory;  // the directory of the database file
  bool directory_exists = false;
  bool file_exists = false;
  std::string summary;  // says which of the above holds, and what serve would do
};

// kInvalidArgument when serve could not create or open the database at
// `path`: it names a directory, its directory is a file or not writable, or
// the directory cannot be created (its nearest existing ancestor is not a
// writable directory).
Result<SqlitePathCheck> CheckSqlitePath(const std::string& path) {
  SqlitePathCheck check;
  std::error_code ec;
  const fs::path file(path);
  const fs::file_status status = fs::status(file, ec);
  if (fs::is_directory(status)) return InvalidArgument("database path " + path + " is a directory");
  check.file_exists = fs::exists(status);
  const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  check.directory = dir.string();
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) {
      return InvalidArgument("the database directory " + check.directory + " is not a directory");
    }
    if (access(dir.c_str(), W_OK | X_OK) != 0) {
      return InvalidArgument("the database directory " + check.directory +
                             " is not writable (SQLite creates the database and its -wal file "
                             "there)");
    }
    check.directory_exists = true;
    if (check.file_exists && access(file.c_str(), R_OK | W_OK) != 0) {
      return InvalidArgument("the database file " + path + " is not readable and writable");
    }
    check.summary = check.file_exists
                        ? "the file exists"
                        : "directory " + check.directory +
                              " exists; the file does not exist yet (migrate or serve creates it)";
    return check;
  }
  // The nearest existing ancestor must be a writable directory.
  fs::path ancestor = dir.parent_path();
  while (!ancestor.empty() && !fs::exists(ancestor, ec)) ancestor = ancestor.parent_path();
  if (ancestor.empty()) ancestor = dir.is_absolute() ? fs::path("/") : fs::path(".");
  if (!fs::is_directory(ancestor, ec)) {
    return InvalidArgument("the database directory " + check.directory +
                           " cannot be created: " + ancestor.string() + " is not a directory");
  }
  if (access(ancestor.c_str(), W_OK | X_OK) != 0) {
    return InvalidArgument("the database directory " + check.directory +
                           " cannot be created: " + ancestor.string() + " is not writable");
  }
  check.summary = "directory " + check.directory +
                  " does not exist; migrate or serve creates it (in " + ancestor.string() + ")";
  return check;
}

// Where the SQLite path comes from, for messages: --db, TASKENGINE_DB, the
// file's [database] path (with its location) or the default.
std::string PathSource(const GlobalFlags& flags, const ServerConfig& config) {
  if (!flags.db.empty()) return "--db";
  if (std::getenv("TASKENGINE_DB") != nullptr) return "TASKENGINE_DB";
  const auto database = config.locations.find({"database", ""});
  if (database != config.locations.end() && database->second.keys.count("path") > 0) {
    return ConfigLocation(config, "database", "", "path");
  }
  return "the default path";
}

// The checks of serve's start, in its order, without the database:
// the file and the environment (ResolveConfig), [http] (CheckHttpConfig), the
// profiles, targets and jobs as the handlers and the scheduler read them
// (CheckJobsAgainstHandlers), then the database location.
int RunConfigCheck(const GlobalFlags& flags) {
  auto resolved = ResolveConfig(flags);
  if (!resolved.ok()) return Fail(resolved.status());
  const ServerConfig& config = *resolved;
  if (Status s = CheckHttpConfig(config.http); !s.ok()) {
    const bool from_env = std::getenv("TASKENGINE_HTTP_AUTH") != nullptr ||
                          std::getenv("TASKENGINE_HTTP_HOST") != nullptr;
    return Fail(from_env ? s : Located(s, config, "http", "", "auth"));
  }
  if (Status s = CheckJobsAgainstHandlers(config); !s.ok()) return Fail(s);

  const bool server = !config.database_url.empty();  // PostgreSQL or MariaDB
  nlohmann::ordered_json database = {{"backend", BackendName(config)},
                                     {"description", DescribeDatabase(config)}};
  std::string database_summary;
  if (server) {
    // ParseConfig checked the URL's scheme (and a PostgreSQL URL's syntax); nothing connects.
    database["url"] = RedactUrl(config.database_url);
    if (!IsMariaDbUrl(config.database_url)) database["schema"] = config.database_schema;
    database_summary = "not connected (config:check never opens the database)";
  } else {
    auto path = CheckSqlitePath(config.database_path);
    if (!path.ok()) {
      return Fail(
          Status(path.status().code(), PathSource(flags, config) + ": " + path.status().message()));
    }
    database["path"] = config.database_path;
    database["sync"] = SyncModeName(config.sync);
    database["directory"] = path->directory;
    database["directory_exists"] = path->directory_exists;
    database["file_exists"] = path->file_exists;
    database_summary = path->summary;
  }
  database["summary"] = database_summary;

  std::set<std::string> used;
  for (const JobDefinition& job : config.jobs) used.insert(job.handler);
  nlohmann::ordered_json queues = nlohmann::ordered_json::array();
  for (const QueueConfig& q : config.queues) {
    queues.push_back({{"name", q.name},
                      {"priority", q.priority},
                      {"concurrency", q.concurrency},
                      {"pool", q.pool}});
  }
  nlohmann::ordered_json jobs = nlohmann::ordered_json::array();
  for (const JobDefinition& job : config.jobs) {
    jobs.push_back({{"name", job.name.value},
                    {"handler", job.handler},
                    {"schedule", job.schedule.empty() ? nlohmann::ordered_json(nullptr)
                                                      : nlohmann::ordered_json(job.schedule)},
                    {"timezone", job.timezone},
                    {"queue", job.queue},
                    {"scope", ToString(job.scope)},
                    {"enabled", job.enabled}});
  }
  std::vector<std::string> profiles;
  for (const auto& [name, settings] : config.command_profiles) profiles.push_back(name);
  std::vector<std::string> targets;
  for (const auto& [name, settings] : config.http_targets) targets.push_back(name);

  if (flags.json) {
    PrintJson({{"ok", true},
               {"config", config.source.empty() ? nlohmann::ordered_json(nullptr)
                                                : nlohmann::ordered_json(config.source)},
               {"backend", BackendName(config)},
               {"database", std::move(database)},
               {"listen", {{"host", config.http.host}, {"port", config.http.port}}},
               {"public_hosts", config.http.public_hosts},
               {"auth", config.http.auth},
               {"metrics_open", config.http.metrics_open},
               {"worker_threads", config.worker_threads},
               {"queues", std::move(queues)},
               {"handlers", {{"available", BuiltinHandlerNames()}, {"used", used}}},
               {"command_profiles", profiles},
               {"http_targets", targets},
               {"job_count", config.jobs.size()},
               {"jobs", std::move(jobs)}});
    return kExitOk;
  }
  auto list = [](const auto& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return out.empty() ? std::string("none") : out;
  };
  const std::string queue_text = DescribeQueues(config.queues);
  std::cout << "config " << (config.source.empty() ? "(none: built-in defaults)" : config.source)
            << ": ok\n"
            << "database: " << DescribeDatabase(config) << "; " << database_summary << "\n"
            << "listen: host " << config.http.host << ", port " << config.http.port
            << (config.http.port == 0 ? " (ephemeral)" : "")
            << "; public hosts: " << list(config.http.public_hosts) << "\n"
            << "auth: " << (config.http.auth ? "on" : "off (loopback only)")
            << "; metrics_open: " << (config.http.metrics_open ? "true" : "false") << "\n"
            << "worker threads: " << config.worker_threads << "\n"
            << "queues: " << queue_text << "\n"
            << "handlers used: " << list(used) << " (available: " << list(BuiltinHandlerNames())
            << ")\n"
            << "command profiles: " << list(profiles) << "\n"
            << "http targets: " << list(targets) << "\n"
            << "jobs: " << config.jobs.size() << "\n";
  if (!config.jobs.empty()) {
    Table table({"NAME", "HANDLER", "SCHEDULE", "QUEUE", "ENABLED"});
    for (const JobDefinition& job : config.jobs) {
      table.Add({job.name.value, job.handler,
                 job.schedule.empty() ? "-" : job.schedule + " (" + job.timezone + ")", job.queue,
                 job.enabled ? "yes" : "no"});
    }
    table.Print(std::cout);
  }
  std::cout.flush();
  return kExitOk;
}

}  // namespace

void AddConfigVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs) {
  CLI::App* check = AddVerb(
      app, "config:check",
      "Check the configuration (--config, else ./taskengine.toml) as serve would at start, "
      "without opening or creating the database and without starting anything: every key, "
      "cron expression and time zone, every job's handler config (command profiles, http "
      "targets), [http] auth, the PostgreSQL URL's syntax or whether the SQLite file's directory "
      "exists or can be created, and the TASKENGINE_* overrides. Exit 1 naming "
      "file:line:column and the key; exit 0 printing a summary (backend and database with the "
      "password redacted, listen address, auth, queues, handlers, jobs).");
  verbs->push_back({check, [&flags] { return RunConfigCheck(flags); }});
}

}  // namespace taskengine::cli
