// The composition root: turns a ServerConfig into a running (or dispatch-only)
// Engine with the built-in handlers registered and the configured job
// definitions seeded. `taskengine serve`, the other CLI verbs and the system
// tests all go through OpenEngine, so they share one way of building the
// server.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/config.h"
#include "taskengine/engine.h"

namespace taskengine {

// What the engine is opened for.
enum class EngineMode {
  // `serve`: migrate, seed the job definitions, run the worker pool (the
  // configured worker threads) and the sweeper. OpenEngine returns it started.
  kServe,
  // `migrate`: migrate and seed; no workers, no sweeper.
  kMigrate,
  // Every other CLI verb: an existing, migrated database only (kUnavailable
  // otherwise, and no file is created); no migration, no seeding, no workers,
  // no sweeper. Work it admits is picked up by a running `serve` at its next
  // poll.
  kClient,
};

// The engine options for `config` in `mode` (worker_threads and run_sweeper
// are zero/false unless kServe).
EngineOptions ToEngineOptions(const ServerConfig& config, EngineMode mode);

// The variables OpenEngine gives every `command` job (on top of the
// per-execution ones), so that its script can call the effect verbs:
//   TASKENGINE_DB    the absolute path of config.database_path
//   TASKENGINE_SYNC  config.sync ("full" or "normal")
//   TASKENGINE_BIN   the absolute path of the running binary (/proc/self/exe,
//                    without a " (deleted)" suffix; omitted when unreadable)
std::map<std::string, std::string> CommandEnvironment(const ServerConfig& config);

// The handlers a job may name, sorted: {"command", "http", "remote"}.
// OpenEngine registers the first two; `remote` jobs run in remote workers
// that know them by name (the worker SDKs) and need a queue declared with
// pool = false.
std::vector<std::string> BuiltinHandlerNames();

// THE check of a job definition, shared by config loading (`serve`,
// `migrate`: CheckJobsAgainstHandlers) and the job edits of the API and the
// CLI (job_edits.h): the name, the lengths of the texts, a built-in handler,
// a queue `config` declares, a schedule that parses and can fire, the time
// zone and windows (CheckJobSchedule), the ranges of the timeouts and retry
// settings, the accepted schema versions, and the handler's config as the
// handler reads it with a profile/target reference expanded from `config`
// (named_config.h) — `command`: an "argv" array of strings whose first
// element is an absolute path, then CheckCommandHandlerConfig; `http`:
// ParseHttpHandlerConfig (scheme, allow_hosts, allow_private, headers, ...);
// `remote`: config {} and a queue declared with pool = false.
// kInvalidArgument "job 'NAME': FIELD problem" otherwise, FIELD (the JSON
// name, e.g. "schedule") also in *field when given.
Status CheckJobDefinition(const JobDefinition& job, const ServerConfig& config,
                          std::string* field = nullptr);

// The config a handler of `job` runs with: a `command` job's profile or an
// `http` job's target reference replaced by the settings `config` names
// (named_config.h); other configs as stored. kInvalidArgument for an unknown
// name.
Result<std::string> ExpandHandlerConfig(const JobDefinition& job, const ServerConfig& config);

// The config keys of built-in handler `handler` that come from the server's
// configuration only (W2, W3): kCommandServerOwnedKeys, kHttpServerOwnedKeys;
// none for other names (CheckJobDefinition refuses those).
std::vector<std::string> ServerOwnedConfigKeys(std::string_view handler);

// The [[command_profile]]s and [[http_target]]s checked as the handlers read
// them, then CheckJobDefinition for every seeded job. kInvalidArgument naming
// the profile, target or job, after "<file>:<line>:<column>: job[N].<field>"
// (or the table) when config.locations knows where the file defines it.
Status CheckJobsAgainstHandlers(const ServerConfig& config);

// [notifications] (I6): its ranges and shapes (ValidateNotifySettings), and
// every webhook or slack target naming an [[http_target]] of the file.
Status CheckNotifySettings(const ServerConfig& config);

struct NotifyDeliveryCounters;  // handlers/notify_handler.h
// The delivery counters of this process's notification handler (/metrics).
const NotifyDeliveryCounters& NotifyDeliveryCountersOfProcess();

struct OpenOptions {
  // kServe, kMigrate: do not seed config.jobs (`migrate --sync-jobs` applies
  // them itself). Default: false.
  bool skip_seeding = false;
};

// Opens the engine for `mode` (see EngineMode), registers the built-in
// handlers (the `command` handler with CommandEnvironment(config) and the
// profiles, the `http` handler with the targets) and, for kServe and kMigrate,
// seeds config.jobs (SeedJobs, job_seeding.h: the file creates what the
// database lacks and never overwrites a runtime edit). A database that cannot
// be opened, created or migrated answers kUnavailable with the path in the
// message; a bad seed answers kInvalidArgument and starts nothing.
Result<std::unique_ptr<Engine>> OpenEngine(const ServerConfig& config, EngineMode mode,
                                           const OpenOptions& options = {});

}  // namespace taskengine
