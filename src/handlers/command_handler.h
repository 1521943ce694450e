// The built-in `command` handler (product.md W2, quality.md §3 item 9).
//
// Runs a program named by the job definition's config (never by the payload):
//
//   {"argv": ["/usr/bin/env", "python3", "x.py"],   required; argv[0] must contain a '/'
//    "cwd": "/srv",                                 optional working directory
//    "env": {"FOO": "bar"},                         optional extra variables (string values)
//    "timeout_ms": 60000}                           optional; else the job's timeout
//
// The program is started (platform/process.h: no shell, no PATH search) as the
// leader of a new process group, with only file descriptors 0, 1 and 2 open and
// a clean environment: TASKENGINE_EXECUTION_ID, TASKENGINE_JOB,
// TASKENGINE_ATTEMPT, TASKENGINE_TENANT (empty for global jobs),
// TASKENGINE_CLAIM_VERSION, TASKENGINE_EFFECT_KEY_PREFIX, PATH, the variables of
// CommandHandlerOptions::server_env (set by the server, e.g. TASKENGINE_DB and
// TASKENGINE_BIN so that the script can call `taskengine effect:reserve`), the
// variables of CommandHandlerOptions::env_allowlist copied from the server's
// environment, and then the configured "env" map (which may override PATH and
// allowlisted names but not TASKENGINE_*). Signal dispositions and the signal
// mask are reset to their defaults in the child.
//
// The payload JSON is written to stdin, which is then closed. A program that
// does not read it is fine: a write that fails with EPIPE just ends the input.
// SIGPIPE is never ignored process-wide: the handler blocks it in the calling
// thread for the duration of the call and consumes a SIGPIPE that its own
// write raised before restoring the thread's signal mask.
//
// stdout and stderr are read concurrently (poll), line by line. A stdout line
// that is a JSON object is a protocol message, and may carry several keys:
//   {"progress": 42}                     -> JobContext::SetProgress (clamped to 0..100)
//   {"log": "text", "level": "warn"}     -> JobContext::Log (debug|info|warn|error; default info)
//   {"result": <any JSON>}               -> the success result (the last one wins)
// Any other stdout line (including objects with none of these keys) is logged
// at info; each stderr line is logged at warn. Lines longer than
// max_line_bytes are cut there (and never treated as protocol); log messages
// are cut at max_log_message_bytes; once max_log_bytes of log text has been
// written, further lines are counted but not logged (protocol still works).
//
// Outcome:
//   exit 0                      -> Success(last result, or "")
//   exit 75 (EX_TEMPFAIL)       -> Retryable
//   exit 65 (EX_DATAERR)        -> Permanent
//   exit 76                     -> Ambiguous (the script met `ambiguous` from
//                                  `taskengine effect:reserve` and cannot tell
//                                  whether its effect happened; E3)
//   any other exit code N       -> Retryable "exit code N: <last stderr line>"
//   killed by a signal          -> Retryable naming the signal
//   timeout                     -> Retryable "timed out after N ms"
//   Checkpoint() cancel / lost  -> Canceled() / Retryable("lease lost")
//   bad config, exec failure    -> Permanent with the reason (errno text)
// On timeout, cancel or lost lease the whole process group gets SIGTERM and,
// kill_grace later if the leader is still alive, SIGKILL. When the leader
// exits (for any reason), every process still in its group is sent SIGKILL
// before the leader is reaped, so no process of the command outlives the call
// and no zombie of ours is left. (Orphans that left the group with setsid/
// setpgid are beyond reach; orphans are reaped by init, so run the server under
// an init that reaps when it is PID 1.)
//
// Durations are real time (std::chrono::steady_clock): this handler supervises
// real processes, so it does not take an injected Clock.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "handlers/named_config.h"
#include "taskengine/job.h"
#include "taskengine/status.h"

namespace taskengine {

struct CommandHandlerOptions {
  // Used when neither the config's "timeout_ms" nor the job's timeout is > 0.
  // Default: 5 min.
  std::chrono::milliseconds default_timeout{300'000};
  // Time between SIGTERM and SIGKILL when stopping a command. Default: 5 s.
  std::chrono::milliseconds kill_grace{5'000};
  // How often the handler calls JobContext::Checkpoint() while the command
  // runs. Default: 1 s.
  std::chrono::milliseconds checkpoint_interval{1'000};
  // After the leader exits, how long to keep reading output still held open by
  // other processes of its group before killing them. Default: 200 ms.
  std::chrono::milliseconds exit_drain{200};
  // A stdout/stderr line longer than this is cut (the rest up to the newline is
  // discarded) and is never parsed as protocol. Bounds memory per stream.
  // Default: 1 MiB.
  std::size_t max_line_bytes = 1 << 20;
  // A log message longer than this is cut and marked " [truncated]".
  // Default: 8 KiB.
  std::size_t max_log_message_bytes = 8 << 10;
  // Total bytes of log text one execution may write; past it lines are dropped
  // and one final warn line says how many. Default: 1 MiB.
  std::size_t max_log_bytes = 1 << 20;
  // PATH given to the command (the config's env may override it).
  // Default: "/usr/local/bin:/usr/bin:/bin".
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  // Names of variables copied from the server's environment (read once, when
  // MakeCommandHandler is called; unset names are skipped; TASKENGINE_* names
  // are ignored). Default: none.
  std::vector<std::string> env_allowlist;
  // Variables the server gives every command (name -> value), e.g.
  // TASKENGINE_DB and TASKENGINE_BIN. They never replace the per-execution
  // variables (TASKENGINE_EXECUTION_ID, ...); names outside TASKENGINE_* may
  // be replaced by PATH, the allowlist or a job's configured "env" (which
  // cannot set TASKENGINE_* names). Invalid names are skipped. Default: none.
  std::map<std::string, std::string> server_env;
  // The [[command_profile]]s of the server's configuration (named_config.h):
  // a config {"profile": NAME, ...} runs what the profile says. Default: none.
  NamedConfigs profiles;
};

// The exit code a command uses to report that the outcome of one of its
// effects is unknown (HandlerResult::Ambiguous; the execution is quarantined
// with failure class `ambiguous` after the job's bound).
inline constexpr int kCommandExitAmbiguous = 76;

// The config keys that say what runs (W2): they come from the server's
// configuration only, never from the API or the dashboard.
inline constexpr std::string_view kCommandServerOwnedKeys[] = {"argv", "cwd", "env"};

// Checks a job's config exactly as the handler parses it before a run (see
// the top of this file): unknown keys, argv, cwd, env (TASKENGINE_* names are
// reserved) and timeout_ms. kInvalidArgument saying what is wrong.
// A config naming a profile is checked with the profile's keys in place
// (ExpandNamedConfig over `profiles`).
Status CheckCommandHandlerConfig(const std::string& config_json, const NamedConfigs& profiles = {});

// Returns the `command` handler. The returned Handler is thread-safe: each call
// keeps its state on its own stack, so many executions may run concurrently.
// It never throws.
Handler MakeCommandHandler(CommandHandlerOptions options = {});

}  // namespace taskengine
