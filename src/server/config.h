// Server configuration: taskengine.toml plus TASKENGINE_* environment overrides.
//
// The file (every section and key is optional; unknown keys are refused):
//
//   [database]
//   path = "./data/taskengine.db"    # TASKENGINE_DB overrides
//   sync = "full"                    # full | normal; TASKENGINE_SYNC overrides
//   url = "postgres://user:pw@host:5432/db"  # PostgreSQL (D2); when set, path and sync
//                                    # are not used. TASKENGINE_DATABASE_URL, else
//                                    # DATABASE_URL, overrides. Logged with the password
//                                    # redacted. Checked as libpq's URI syntax
//                                    # (CheckPostgresUrl) without connecting.
//   schema = "taskengine"            # PostgreSQL schema of the tables;
//                                    # TASKENGINE_DATABASE_SCHEMA overrides
//
//   [engine]
//   worker_threads = 4               # TASKENGINE_WORKERS overrides; 0 = dispatch only
//   poll_interval_ms = 1000          # pickup bound for work admitted by other processes (A3)
//   sweep_interval_ms = 1000         # lease sweeper period (L4)
//   shutdown_grace_ms = 10000        # running handlers may finish this long on SIGTERM (L6)
//   replay_requires_approval = false # four-eyes (R1): `execution:replay` only records a
//                                    # pending replay; another operator runs `execution:approve`
//   max_payload_bytes = 262144       # largest payload a dispatch may carry (1024..16777216);
//                                    # `serve`/`migrate` also set it for PostgreSQL's enqueue()
//
//   [http]                           # the REST API of `serve` (I1, X1)
//   host = "127.0.0.1"               # TASKENGINE_HTTP_HOST overrides
//   port = 8080                      # 0 = ephemeral (logged); TASKENGINE_HTTP_PORT overrides
//   auth = true                      # false only on loopback; TASKENGINE_HTTP_AUTH overrides
//   public_hosts = []                # names (or addresses) clients use besides loopback,
//                                    # localhost and the listen address, e.g.
//                                    # ["taskengine.example.com", "10.0.0.5"]; a request with
//                                    # any other Host gets 421 (DNS rebinding);
//                                    # TASKENGINE_HTTP_PUBLIC_HOSTS (comma-separated) overrides
//   session_idle_minutes = 30        # dashboard session idle timeout
//   session_absolute_hours = 12      # dashboard session absolute timeout
//   secure_cookies = false           # Secure session cookie (behind TLS)
//   metrics_open = false             # GET /metrics without credentials
//   login_per_minute = 10            # per client IP; 0 = unlimited
//   login_per_second = 10            # for the whole server (burst 2x); 0 = unlimited
//   login_threads = 2                # password checks at once (64 MiB each); more wait
//   login_queue = 16                 # logins waiting for a thread; more get 503
//   login_lockout_after = 5          # failures of one account name before a lockout of
//                                    # 1 s, doubling per failure up to 5 min; 0 = never
//   max_connections = 0              # 0 = from the descriptor limit (less an eighth)
//   max_connections_per_client = 128 # per client address
//   header_timeout_ms = 10000        # new connection to first byte, first byte to end of header
//   dispatch_per_second = 5000       # per token or user (burst 2x); 0 = unlimited
//   lease_per_second = 500           # worker lease polls per token (burst 2x); 0 = unlimited
//
//   [redaction]                      # quality.md §3.10
//   keys = ["signing_key"]           # job config keys (any depth, any case) masked for every
//                                    # caller but the global admin in the API, the CLI and
//                                    # audit records, on top of headers, env, password,
//                                    # secret, token, api_key and authorization
//
//   [log]
//   format = "text"                  # text | json (one JSON object per line, on stderr);
//                                    # TASKENGINE_LOG_FORMAT overrides
//   lifecycle = true                 # `serve` logs one line per lifecycle event (admission,
//                                    # retry, orphan, replay, each terminal outcome, pool
//                                    # start/stop) under a stable name such as
//                                    # execution.completed
//
//   [retention]                      # I7: what has aged out is purged in bounded batches
//   enabled = true                   # serve runs the purge loop (one node at a time)
//   executions_days = 30             # ended executions, with their logs, attempts, effects
//                                    # and idempotency keys; never a queued, running or
//                                    # lane-blocking one; 0 = keep forever
//   logs_days = 7                    # log lines of any execution; 0 = keep forever
//   audit_days = 365                 # audit records; 0 = keep forever
//   batch = 500                      # most rows of each kind per transaction (1..10000);
//                                    # fewer when one would hold the writer over ~1 ms
//   interval_seconds = 60            # between two purge passes (1..86400)
//
//   [notifications]                  # I6: failures are told (docs/operations.md)
//   enabled = true                   # serve runs the notifier (one node works the outbox)
//   per_job_per_hour = 10            # per job in any hour; the rest are counted and told
//                                    # in the job's next notification
//   orphan_threshold = 5             # one sweep recovering more expired leases alerts targets
//   targets = ["ops@example.com", "webhook:hook", "slack:team"]   # global: orphan alerts,
//                                    # and jobs without notify_targets of their own
//   dashboard_url = "https://jobs.example.com"   # links to the execution's page
//   from = "taskengine@example.com"  # e-mail sender
//   smtp_url = "smtp://mail.example.com:587"     # or smtps://...:465
//   smtp_tls = "required"            # smtp:// needs STARTTLS; "off" for a local relay only
//   smtp_username = "taskengine"     # optional; the password is read from the environment
//   smtp_password_env = "SMTP_PASSWORD"
//   sendmail = ["/usr/sbin/sendmail", "-t", "-i"]  # instead of SMTP: the message on stdin
//
//   [[queue]]                        # none = one queue named "default"
//   name = "default"
//   priority = 0                     # higher is claimed first
//   concurrency = 0                  # 0 = all workers
//   pool = true                      # false = this node's worker pool never claims from it
//                                    # (remote workers do)
//
//   [[command_profile]]              # what a `command` job may run: jobs (from this file or
//   name = "report"                  # the API) name it with config = { profile = "report" }
//   argv = ["/usr/bin/env", "python3", "report.py"]   # required; argv[0] an absolute path
//   cwd = "/srv/reports"             # optional
//   env = { REPORT_DIR = "/srv/out" }  # optional
//
//   [[http_target]]                  # where an `http` job may send: config = { target = "hook" }
//   name = "hook"
//   url = "https://hooks.example.com/taskengine"      # required
//   allow_hosts = ["hooks.example.com"]  # also: allow_http, allow_private, headers
//
//   [[job]]                          # job definitions seeded into the database: a job the
//                                    # database lacks is created; one nobody edited at runtime
//                                    # follows the file; an edited one is kept (and logged);
//                                    # `taskengine migrate --sync-jobs` applies the file
//   name = "hello"
//   handler = "command"
//   config = { argv = ["/bin/sh", "-c", "echo hi"] }   # or { profile = "report" }
//   # also: display_name, queue, scope (global|per_tenant), schedule, timezone,
//   # timeout_ms, lease_ms, max_attempts, backoff_base_ms, backoff_cap_ms,
//   # max_permanent_attempts, max_unsupported_schema_attempts,
//   # max_ambiguous_attempts, max_consecutive_lease_expiries, lane_template,
//   # accepted_schema_versions (array of integers; empty = any), enabled,
//   # catch_up (coalesce|all|none), catch_up_window_ms (0..7 days), window_ms (whole
//   # minutes, 0..366 days); schedule and timezone are checked as the scheduler parses them;
//   # notify_on_failure (default true), notify_targets (as [notifications] targets)
//
// Relative database paths are relative to the working directory of the
// process, not to the file. ConfigKeys() lists every key above, from the same
// tables ParseConfig refuses unknown keys with.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/notify_settings.h"
#include "engine/retention_policy.h"
#include "taskengine/engine.h"
#include "taskengine/status.h"
#include "taskengine/types.h"

namespace taskengine {

enum class LogFormat { kText, kJson };

// [http]: the REST API served by `serve`.
struct HttpConfig {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0 = ephemeral
  bool auth = true;
  Millis session_idle_ms = 30 * 60'000;
  Millis session_absolute_ms = 12 * 3'600'000;
  bool secure_cookies = false;
  bool metrics_open = false;  // GET /metrics without credentials (scrapers on a private network)
  int login_per_minute = 10;  // 0 = unlimited
  int dispatch_per_second = 5000;  // 0 = unlimited
  int lease_per_second = 500;      // 0 = unlimited
  // Host names or addresses (no port) answered besides loopback, localhost
  // and the listen address. Default: none.
  std::vector<std::string> public_hosts;
  int login_per_second = 10;  // whole server; 0 = unlimited
  int login_threads = 2;
  int login_queue = 16;
  int login_lockout_after = 5;  // 0 = never
  int max_connections = 0;      // 0 = from RLIMIT_NOFILE
  int max_connections_per_client = 128;
  Millis header_timeout_ms = 10'000;
};

// True for "localhost", 127.0.0.0/8 and ::1 (the hosts `auth = false` may use).
bool IsLoopbackHost(std::string_view host);

// The engine's settings (EngineOptions, which declares them and their
// defaults) that the file sets, and `serve`'s own. ToEngineOptions (server.h)
// turns it into the options of a process's engine.
struct ServerConfig : EngineOptions {
  // The file this was read from; empty when only defaults and the
  // environment were used.
  std::string source;
  // (EngineOptions::queues is never empty after LoadConfig/ParseConfig: a
  // file without [[queue]] works the queue "default".)
  LogFormat log_format = LogFormat::kText;
  // [log] lifecycle: serve logs lifecycle events (LogLifecycle). Default: true.
  bool log_lifecycle = true;
  HttpConfig http;
  // [retention] (I7): the purge loop of `serve` and `retention:run`.
  RetentionPolicy retention;
  // [notifications] (I6): the notifier of `serve` and `notify:test`.
  NotifySettings notifications;
  // [redaction] keys: config keys masked on top of the built-in ones
  // (api::RedactJobConfig). Default: none.
  std::vector<std::string> redact_keys;
  // Seeds, in file order; names are unique and every queue is declared.
  std::vector<JobDefinition> jobs;
  // [[command_profile]]: name -> {"argv": [...], "cwd": "...", "env": {...}}
  // (JSON text). Checked by CheckJobsAgainstHandlers (server.h). Default: none.
  std::map<std::string, std::string, std::less<>> command_profiles;
  // [[http_target]]: name -> {"url": ..., "allow_hosts": [...], ...} (JSON
  // text). Checked by CheckJobsAgainstHandlers. Default: none.
  std::map<std::string, std::string, std::less<>> http_targets;

  // Where the file defines a table and its keys, for messages about them
  // after parsing (CheckJobsAgainstHandlers, `config:check`).
  struct TableLocation {
    std::string path;   // as in messages: "http", "job[2]", "command_profile[0]"
    std::string where;  // "<file>:<line>:<column>" of the table
    // Key -> "<file>:<line>:<column>" of its value, for the keys the file sets.
    std::map<std::string, std::string, std::less<>> keys;
  };
  // Every table the file has, by (table, name): ("http", ""), ("job", "hello"),
  // ("command_profile", "report"), ("http_target", "hook"). Empty for a config
  // built in code or without a file. See ConfigLocation.
  std::map<std::pair<std::string, std::string>, TableLocation> locations;
};

// "<file>:<line>:<column>: <path>.<key>" of `key` in the table `table` named
// `name` ("" for [database], [http], ...), e.g. "te.toml:9:12: job[0].schedule";
// "<file>:<line>:<column>: <path>" of the table when `key` is empty or the
// file does not set it; "" when `config` has no location for the table.
std::string ConfigLocation(const ServerConfig& config, std::string_view table,
                           std::string_view name, std::string_view key = {});

// `status` with ConfigLocation(config, table, name, key) and ": " before its
// message (unchanged when there is no location).
Status Located(const Status& status, const ServerConfig& config, std::string_view table,
               std::string_view name, std::string_view key = {});

// Every key ParseConfig reads, as the documentation writes them: "[database] path",
// "[http] metrics_open", "[[job]] schedule", "[[queue]] name". This is the
// list ParseConfig refuses other keys with, so it cannot drift from the parser.
std::vector<std::string> ConfigKeys();

// kInvalidArgument naming the problem (never the password) unless `url` is a
// PostgreSQL connection URI as libpq reads it:
// postgres[ql]://[user[:password]@][host[:port][,host[:port]...]][/dbname][?name=value[&...]],
// hosts bracketed for IPv6, ports 1..65535, %XX escapes well formed. Does not connect.
Status CheckPostgresUrl(std::string_view url);

// Looks up an environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// The process environment (getenv).
EnvLookup ProcessEnv();

// Parses TOML text (`source_name` is used in messages as "<name>:<line>:<col>"),
// applies the overrides found through `env` (TASKENGINE_DB, TASKENGINE_SYNC,
// TASKENGINE_DATABASE_URL (else DATABASE_URL), TASKENGINE_DATABASE_SCHEMA,
// TASKENGINE_WORKERS, TASKENGINE_HTTP_HOST, TASKENGINE_HTTP_PORT,
// TASKENGINE_HTTP_AUTH, TASKENGINE_HTTP_PUBLIC_HOSTS, TASKENGINE_LOG_FORMAT)
// and validates the result.
// kInvalidArgument on a syntax error, an unknown key (named with its
// location), a value of the wrong type or out of range, or a bad override
// (named with its variable).
Result<ServerConfig> ParseConfig(std::string_view toml_text, std::string_view source_name,
                                 const EnvLookup& env);

// Reads `path` and calls ParseConfig. An empty path means "no file": defaults
// plus the environment. kInvalidArgument when the file cannot be read.
Result<ServerConfig> LoadConfig(const std::string& path, const EnvLookup& env = ProcessEnv());

// "text" / "json" and "full" / "normal", as written in the file.
std::string_view LogFormatName(LogFormat f);
std::string_view SyncModeName(SyncMode m);

// "postgresql <url with the password redacted> (schema S)" or "sqlite <path>
// (sync M)": the backend `config` selects, for logs and `migrate`.
std::string DescribeDatabase(const ServerConfig& config);
// The backend the configuration selects: "sqlite", "postgresql" or "mariadb".
std::string_view BackendName(const ServerConfig& config);

// "default (priority 0, concurrency all), remote (priority 0, remote workers
// only)": the queues and how this node's worker pool treats them, for the
// serve log and config:check.
std::string DescribeQueues(const std::vector<QueueConfig>& queues);

}  // namespace taskengine
