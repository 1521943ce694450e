// serve, migrate, backup, queue:status, worker:list.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "api/job_edits.h"
#include "cli.h"
#include "engine/engine_internal.h"
#include "server/job_seeding.h"
#include "server/logging.h"
#include "server/operations.h"
#include "server/serve.h"
#include "server/server.h"
#include "server/time_format.h"
#include "storage/open_store.h"
#include "storage/sqlite/sqlite_backup.h"
#include "storage/store.h"
#include "views/views.h"

namespace taskengine::cli {
namespace {

int RunServe(const GlobalFlags& flags, const std::string& log_format) {
  auto config = ResolveConfig(flags);
  if (!config.ok()) return Fail(config.status());
  if (log_format == "json") config->log_format = LogFormat::kJson;
  if (log_format == "text") config->log_format = LogFormat::kText;
  ConfigureLogging(config->log_format, /*verbose=*/true);
  Status s = Serve(*config);
  if (!s.ok()) return Fail(s);
  return kExitOk;
}

int RunBackup(const GlobalFlags& flags, const std::string& dest) {
  auto config = ResolveConfig(flags);
  if (!config.ok()) return Fail(config.status());
  ConfigureLogging(config->log_format, /*verbose=*/false);
  if (!config->database_url.empty()) {
    return Fail(InvalidArgument(
        "backup copies a SQLite database; for " + RedactUrl(config->database_url) +
        " use the database's own tools (pg_dump, or pg_basebackup for point-in-time recovery)"));
  }
  const bool tty = isatty(STDERR_FILENO) != 0;
  std::int64_t total_pages = 0;
  Status s = sqlite::Backup(config->database_path, dest, /*pages_per_step=*/1024, /*pause_ms=*/1,
                            [&](const sqlite::BackupProgress& p) {
                              total_pages = p.pages_total;
                              if (tty && !flags.json) {
                                std::fprintf(stderr, "\rbackup: %lld / %lld pages",
                                             static_cast<long long>(p.pages_done),
                                             static_cast<long long>(p.pages_total));
                              }
                            });
  if (tty && !flags.json) std::fprintf(stderr, "\n");
  if (!s.ok()) return Fail(s);
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(dest, ec);
  if (flags.json) {
    PrintJson({{"database", config->database_path},
               {"backup", dest},
               {"pages", total_pages},
               {"bytes", ec ? 0 : static_cast<std::int64_t>(bytes)}});
  } else {
    std::cout << "backed up " << config->database_path << " to " << dest << " (" << (ec ? 0 : bytes)
              << " bytes, integrity ok)" << std::endl;
  }
  return kExitOk;
}

struct MigrateFlags {
  bool sync_jobs = false;
  bool dry_run = false;
  std::string as;
};

// One value of a difference, as printed: JSON, null for "none".
std::string ShowValue(const nlohmann::ordered_json& v) { return v.dump(); }

// `migrate --sync-jobs [--dry-run]`: the differences between the file's
// [[job]]s and the database, field by field, then (unless --dry-run) the file
// applied, each change audited job.sync.
int RunSyncJobs(const GlobalFlags& flags, const ServerConfig& config, const MigrateFlags& f) {
  auto actor = CliActor(f.as);
  if (!actor.ok()) return Fail(actor.status());
  OpenOptions options;
  options.skip_seeding = true;
  // A dry run changes nothing: an existing, migrated database only.
  auto engine = OpenEngine(config, f.dry_run ? EngineMode::kClient : EngineMode::kMigrate, options);
  if (!engine.ok()) return Fail(engine.status());
  auto synced = SyncJobs(StoreOf(**engine), config.jobs, f.dry_run, *actor, config.redact_keys);
  if (!synced.ok()) return Fail(synced.status());
  int differ = 0;
  int missing = 0;
  for (const JobSync& s : *synced) {
    if (s.created) {
      ++missing;
    } else if (!s.changes.empty()) {
      ++differ;
    }
  }
  if (flags.json) {
    nlohmann::ordered_json jobs = nlohmann::ordered_json::array();
    for (const JobSync& s : *synced) {
      nlohmann::ordered_json changes = nlohmann::ordered_json::array();
      for (const api::FieldChange& c : s.changes) {
        changes.push_back({{"field", c.field}, {"database", c.before}, {"file", c.after}});
      }
      const char* state = s.created           ? (f.dry_run ? "missing" : "created")
                          : s.changes.empty() ? "in_sync"
                          : f.dry_run         ? "differs"
                                              : "updated";
      jobs.push_back({{"job", s.job}, {"state", state}, {"changes", std::move(changes)}});
    }
    PrintJson({{"dry_run", f.dry_run}, {"jobs", std::move(jobs)}});
    return kExitOk;
  }
  for (const JobSync& s : *synced) {
    if (s.created) {
      std::cout << "job " << s.job << ": not in the database, "
                << (f.dry_run ? "would be created" : "created") << std::endl;
    } else if (s.changes.empty()) {
      std::cout << "job " << s.job << ": in sync" << std::endl;
      continue;
    } else {
      std::cout << "job " << s.job << ": differs (database -> file), "
                << (f.dry_run ? "would be updated" : "updated") << std::endl;
    }
    for (const api::FieldChange& c : s.changes) {
      std::cout << "  " << c.field << ": " << ShowValue(c.before) << " -> " << ShowValue(c.after)
                << std::endl;
    }
  }
  std::cout << synced->size() << " job" << (synced->size() == 1 ? "" : "s") << " in "
            << (config.source.empty() ? "(no config file)" : config.source) << ": " << differ
            << " differ, " << missing << " missing; "
            << (f.dry_run ? "nothing changed (--dry-run)"
                          : "the file was applied (audit action job.sync)")
            << std::endl;
  return kExitOk;
}

int RunMigrate(const GlobalFlags& flags, const MigrateFlags& f) {
  auto config = ResolveConfig(flags);
  if (!config.ok()) return Fail(config.status());
  ConfigureLogging(config->log_format, /*verbose=*/false);
  if (f.dry_run && !f.sync_jobs) return Fail(InvalidArgument("--dry-run goes with --sync-jobs"));
  if (f.sync_jobs) return RunSyncJobs(flags, *config, f);
  auto engine = OpenEngine(*config, EngineMode::kMigrate);
  if (!engine.ok()) return Fail(engine.status());
  auto version = StoreOf(**engine).SchemaVersion();
  if (!version.ok()) return Fail(version.status());
  if (flags.json) {
    PrintJson({{"database", config->database_url.empty() ? config->database_path
                                                         : RedactUrl(config->database_url)},
               {"backend", BackendName(*config)},
               {"schema_version", *version},
               {"jobs_seeded", config->jobs.size()}});
  } else {
    std::cout << "database " << DescribeDatabase(*config) << " is at schema version " << *version
              << "; seeded " << config->jobs.size() << " job definition"
              << (config->jobs.size() == 1 ? "" : "s") << " from "
              << (config->source.empty() ? "(no config file)" : config->source)
              << " (runtime edits kept; see --sync-jobs)" << std::endl;
  }
  return kExitOk;
}

int RunQueueStatus(const GlobalFlags& flags) {
  ServerConfig config;
  auto engine = OpenClient(flags, &config);
  if (!engine.ok()) return Fail(engine.status());
  auto rows = QueueStatus(StoreOf(**engine), config, (*engine)->clock()->NowMillis());
  if (!rows.ok()) return Fail(rows.status());
  if (flags.json) {
    nlohmann::ordered_json queues = nlohmann::ordered_json::array();
    for (const QueueView& r : *rows) queues.push_back(QueueToJson(r));
    PrintJson({{"items", std::move(queues)}});
    return kExitOk;
  }
  Table table({"QUEUE", "PRIORITY", "CONCURRENCY", "QUEUED", "DUE", "RUNNING", "OLDEST"});
  for (const QueueView& r : *rows) {
    table.Add({r.queue + (r.configured ? "" : " (not configured)"),
               r.configured ? std::to_string(r.priority) : "-",
               !r.configured        ? "-"
               : r.concurrency == 0 ? "all"
                                    : std::to_string(r.concurrency),
               std::to_string(r.queued), std::to_string(r.due), std::to_string(r.running),
               r.oldest_queued_at == 0 ? "-" : FormatDuration(r.oldest_age_ms)});
  }
  table.Print(std::cout);
  return kExitOk;
}

// W5: the workers the store knows (every node's pool, every remote worker),
// as GET /api/v1/workers shows them (WorkerToJson) without the registration
// details only the serving process holds (name, version, queues, handlers).
int RunWorkerList(const GlobalFlags& flags) {
  auto config = ResolveConfig(flags);
  if (!config.ok()) return Fail(config.status());
  ConfigureLogging(config->log_format, /*verbose=*/false);
  auto engine = OpenEngine(*config, EngineMode::kClient);
  if (!engine.ok()) return Fail(engine.status());
  auto workers = StoreOf(**engine).ListWorkers(0);
  if (!workers.ok()) return Fail(workers.status());
  const Millis now = (*engine)->clock()->NowMillis();
  nlohmann::ordered_json items = nlohmann::ordered_json::array();
  for (const WorkerInfo& w : *workers) items.push_back(WorkerToJson(w, nullptr, now));
  if (flags.json) {
    PrintJson({{"items", std::move(items)}});
    return kExitOk;
  }
  Table table({"ID", "STATE", "KIND", "HOST", "PID", "CONCURRENCY", "BUSY", "PROCESSED", "FAILED",
               "STARTED", "LAST HEARTBEAT"});
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto text = [&](const char* field) {
      const auto& v = items[i][field];
      if (v.is_null()) return std::string("-");
      return v.is_string() ? v.get<std::string>() : v.dump();
    };
    const WorkerInfo& row = (*workers)[i];
    table.Add({text("id"), text("state"), text("kind"), text("host"), text("pid"),
               text("concurrency"), text("busy"), text("processed"), text("failed"),
               ShortTime(row.started_at),
               ShortTime(row.last_heartbeat_at) + " (" +
                   FormatDuration(std::max<Millis>(0, now - row.last_heartbeat_at)) + " ago)"});
  }
  table.Print(std::cout);
  return kExitOk;
}

}  // namespace

void AddServerVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs) {
  CLI::App* serve = AddVerb(
      app, "serve",
      "Run the node: REST API, worker pool, lease sweeper and cron scheduler. Logs to stderr, "
      "with one line per lifecycle event (execution.completed, ...; [log] lifecycle). Stops "
      "gracefully on SIGTERM or SIGINT (running jobs get shutdown_grace_ms to finish; a second "
      "signal exits at once).");
  auto log_format = std::make_shared<std::string>();
  serve
      ->add_option("--log-format", *log_format,
                   "text or json (one JSON object per line, with an access log of HTTP requests); "
                   "overrides [log] format and TASKENGINE_LOG_FORMAT")
      ->check(CLI::IsMember({"text", "json"}));
  verbs->push_back({serve, [&flags, log_format] { return RunServe(flags, *log_format); }});

  CLI::App* migrate = AddVerb(
      app, "migrate",
      "Create or upgrade the database schema and seed the [[job]] definitions of the config: "
      "jobs the database lacks are created, jobs nobody edited at runtime follow the file, "
      "edited ones are kept (a warning names them). Prints the schema version.");
  auto migrate_flags = std::make_shared<MigrateFlags>();
  migrate->add_flag("--sync-jobs", migrate_flags->sync_jobs,
                    "Apply every [[job]] of the config file on purpose, also over runtime edits; "
                    "prints the differences field by field; each change is audited job.sync");
  migrate->add_flag("--dry-run", migrate_flags->dry_run,
                    "With --sync-jobs: only print the differences; change nothing");
  migrate->add_option("--as", migrate_flags->as,
                      "Act as operator cli:NAME instead of cli:<unix user> (for the audit log)");
  verbs->push_back(
      {migrate, [&flags, migrate_flags] { return RunMigrate(flags, *migrate_flags); }});

  auto backup_dest = std::make_shared<std::string>();
  CLI::App* backup =
      AddVerb(app, "backup",
              "Online backup of the SQLite database to a new file PATH while serve keeps running "
              "(SQLite's backup API; checked with PRAGMA integrity_check). Never overwrites PATH. "
              "PostgreSQL: use pg_dump / pg_basebackup.");
  backup->add_option("path", *backup_dest, "The new backup file")->required();
  verbs->push_back({backup, [&flags, backup_dest] { return RunBackup(flags, *backup_dest); }});

  CLI::App* queue_status =
      AddVerb(app, "queue:status",
              "Queued, due and running executions and the oldest queued age, per queue.");
  verbs->push_back({queue_status, [&flags] { return RunQueueStatus(flags); }});

  CLI::App* worker_list = AddVerb(
      app, "worker:list",
      "Workers (W5): the in-process pool of every serve node (kind pool; its threads are its "
      "concurrency) and every remote worker process (kind remote), with state (idle, busy, "
      "stopped, or stale: no heartbeat for 5 s (pool) / 35 s (remote)), host, pid, "
      "concurrency, busy, processed and failed counts, start and last heartbeat. --json prints "
      "the documents of GET /api/v1/workers.");
  verbs->push_back({worker_list, [&flags] { return RunWorkerList(flags); }});
}

}  // namespace taskengine::cli
