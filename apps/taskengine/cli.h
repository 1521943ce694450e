// Shared pieces of the `taskengine` CLI: global flags, exit codes, config
// resolution, output helpers, and the registration of verbs. Each verb only
// parses its flags, calls src/server, and prints.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <iosfwd>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/config.h"
#include "taskengine/engine.h"
#include "taskengine/status.h"

namespace taskengine::cli {

// Exit codes of every verb (also listed in --help).
enum ExitCode : int {
  kExitOk = 0,
  kExitUsage = 1,        // bad flags or arguments, invalid input or config
  kExitNotFound = 2,     // no such job or execution
  kExitUnavailable = 3,  // the database cannot be opened or used
  kExitConflict = 4,     // idempotency key used with a different payload, or the
                         // execution's status does not allow the action
  kExitOther = 5,        // anything else
};

// Exit codes of effect:reserve (and effect:commit / effect:release for
// stale), one per ledger answer other than proceed (which exits 0), so that a
// script can write `if taskengine effect:reserve notice; then ...; fi`.
enum EffectExitCode : int {
  kExitAlreadyDone = 10,
  kExitAmbiguous = 11,
  kExitStale = 12,
  kExitCanceled = 13,
};

struct GlobalFlags {
  std::string config_path;  // --config; empty = ./taskengine.toml when it exists
  std::string db;           // --db; empty = from the config
  bool json = false;        // --json
};

// The exit code for a failed Status.
int ExitCodeFor(const Status& status);

// Prints "taskengine: <message>" to stderr and returns ExitCodeFor(status).
int Fail(const Status& status);

// The configuration for this invocation: --config (or ./taskengine.toml when
// it exists, or defaults), environment overrides, then --db.
Result<ServerConfig> ResolveConfig(const GlobalFlags& flags);

// ResolveConfig, logging for a client verb, and OpenEngine in client mode
// (an existing database only). `config` (optional) receives the configuration.
Result<std::unique_ptr<Engine>> OpenClient(const GlobalFlags& flags,
                                           ServerConfig* config = nullptr);

// Prints one JSON document to stdout (EscapeJsonForTerminal: DEL and C1
// characters as \u escapes; the document is the same).
void PrintJson(const nlohmann::ordered_json& doc);

// printf to std::cout, so that it goes through the terminal filter
// (ProtectTerminal) like every other text output. Never use stdio directly.
void Printf(const char* format, ...) __attribute__((format(printf, 1, 2)));

// "2026-01-01T00:00:00Z" (seconds), or "-" for 0.
std::string ShortTime(Millis ms);

// "-" for an empty string.
std::string OrDash(const std::string& s);
// The first line of `s`, cut to at most `max` bytes ("..." marks a cut), for table cells.
std::string Cut(const std::string& s, std::size_t max);

// A left-aligned text table with a header row, columns two spaces apart.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print(std::ostream& out) const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// A verb: its CLI11 subcommand and what runs when it was chosen. Returns the
// exit code.
struct Verb {
  CLI::App* command = nullptr;
  std::function<int()> run;
};

// Adds the subcommand `name`, which may contain ':' (CLI11 refuses ':' when
// adding a subcommand but matches such names fine, so it is renamed after).
CLI::App* AddVerb(CLI::App& app, const std::string& name, const std::string& description);

// serve, migrate, backup, queue:status, worker:list
void AddServerVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs);
// config:check
void AddConfigVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs);
// job:list, job:dispatch
void AddJobVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs);
// execution:list, execution:show, execution:cancel, execution:replay, execution:approve
void AddExecutionVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs);
// quarantine:list, lane:status, audit:list, grant:add, grant:revoke
void AddOperatorVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs);
// effect:reserve, effect:commit, effect:release (for `command` job scripts)
void AddEffectVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs);
// scheduler:run (exit 6: another node holds the scheduler lock), schedule:preview,
// tenant:add, tenant:list, tenant:enable, tenant:disable
void AddSchedulerVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs);
// worker:start, worker:manager, worker:effect (remote workers over HTTP)
void AddWorkerVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs);
// retention:run, db:vacuum
void AddRetentionVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs);
// notify:test
void AddNotifyVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs);
// user:add, user:list, token:create, token:list, token:revoke
void AddSecurityVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs);

}  // namespace taskengine::cli
