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

// The names of the handlers OpenEngine registers, sorted: {"command", "http"}.
std::vector<std::string> BuiltinHandlerNames();

// THE check of a job definition, shared by config loading (`serve`,
// `migrate`: CheckJobsAgainstHandlers) and the API's job edits: its schedule
// and time zone (CheckJobSchedule), a built-in handler, and that handler's
// config as the handler reads it — `command`: an "argv" array of strings whose
// first element is an absolute path, then CheckCommandHandlerConfig; `http`:
// ParseHttpHandlerConfig (scheme, allow_hosts, allow_private, headers, ...).
// kInvalidArgument naming the job and the problem otherwise.
Status CheckJobDefinition(const JobDefinition& job);

// The config keys of built-in handler `handler` that come from the server's
// configuration only (W2, W3): kCommandServerOwnedKeys, kHttpServerOwnedKeys;
// none for other names (CheckJobDefinition refuses those).
std::vector<std::string> ServerOwnedConfigKeys(std::string_view handler);

// CheckJobDefinition for every seeded job. kInvalidArgument naming the job.
Status CheckJobsAgainstHandlers(const ServerConfig& config);

// Opens the engine for `mode` (see EngineMode), registers the built-in
// handlers (the `command` handler with CommandEnvironment(config)) and, for kServe and kMigrate,
// upserts config.jobs. A database that cannot be opened, created or migrated answers kUnavailable
// with the path in the message; a bad seed answers kInvalidArgument and starts nothing.
Result<std::unique_ptr<Engine>> OpenEngine(const ServerConfig& config, EngineMode mode);

}  // namespace taskengine
