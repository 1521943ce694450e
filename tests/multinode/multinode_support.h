// Shared pieces of the multi-node drills on PostgreSQL and MariaDB (issues
// #6 and #17; quality.md §2: L, D, S, C, RD11 and the clock drill): a
// throwaway server (scripts/pg_cluster.sh, scripts/mariadb_cluster.sh) that a
// test can crash and restart, SQL probes through psql or the mariadb client,
// several real `taskengine serve` nodes on one database, and the invariant
// checks over what the database holds.
//
// The work job runs a countable effect through the effect ledger, in one of
// two ways:
//   - `command` (tests/cli/drill_support.h): a shell script appends
//     "<execution id>" to <dir>/notice.txt only when `effect:reserve` answered
//     proceed, so a line twice means an effect happened twice (D). Real
//     processes (a shell and two CLI calls per job): a few jobs per second.
//   - `http` (NodeConfig::work_http_url): the built-in http handler POSTs the
//     payload to a CountingHttpSink (http_sink.h) in the test process with
//     the effect key "<execution id>:http" as Idempotency-Key; the sink counts
//     raw arrivals, so a key twice means an effect happened twice (D).
//     Hundreds of jobs per second.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "drill_support.h"
#include "http_sink.h"
#include "process_util.h"
#include "taskengine/engine.h"

namespace taskengine::testing {

inline constexpr const char* kPgBin = "/usr/lib/postgresql/15/bin";
inline constexpr const char* kPsql = "/usr/bin/psql";
inline constexpr const char* kMariaDb = "/usr/bin/mariadb";
inline constexpr const char* kMariaDbd = "/usr/sbin/mariadbd";

// The server a drill runs against.
enum class DbKind { kPostgres, kMariaDb };

inline const char* DbName(DbKind kind) {
  return kind == DbKind::kPostgres ? "PostgreSQL" : "MariaDB";
}

inline DbKind DbKindOf(const std::string& url) {
  return url.rfind("mysql://", 0) == 0 || url.rfind("mariadb://", 0) == 0 ? DbKind::kMariaDb
                                                                          : DbKind::kPostgres;
}

// The repository's scripts/pg_cluster.sh or scripts/mariadb_cluster.sh
// (compiled in by CMake).
inline std::string ClusterScript(DbKind kind) {
  return std::string(TASKENGINE_SOURCE_DIR) +
         (kind == DbKind::kPostgres ? "/scripts/pg_cluster.sh" : "/scripts/mariadb_cluster.sh");
}

// Why drills on `kind` cannot run here, or "" when they can.
inline std::string DbUnavailableReason(DbKind kind = DbKind::kPostgres) {
  std::error_code ec;
  if (kind == DbKind::kMariaDb) {
    if (!std::filesystem::exists(kMariaDbd, ec)) {
      return "MariaDB is not installed (scripts/deps.sh installs mariadb-server)";
    }
    if (!std::filesystem::exists(kMariaDb, ec)) return "the mariadb client is not installed";
    return "";
  }
  if (!std::filesystem::exists(std::string(kPgBin) + "/initdb", ec)) {
    return std::string("PostgreSQL 15 is not installed (") + kPgBin +
           "/initdb missing; scripts/deps.sh installs postgresql-15)";
  }
  if (!std::filesystem::exists(kPsql, ec)) return "psql is not installed";
  return "";
}
inline std::string PgUnavailableReason() { return DbUnavailableReason(DbKind::kPostgres); }

// A throwaway server in its own /tmp directory (the scripts chown it to the
// server's user when run as root; a TempDir parent would not be traversable).
// Stopped and removed by the destructor. Its URL names a database whose
// tables are reached as taskengine.<table> in SQL on both servers: the schema
// `taskengine` on PostgreSQL, the database `taskengine` on MariaDB.
class DbServer {
 public:
  explicit DbServer(DbKind kind = DbKind::kPostgres) : kind_(kind) {
    char tmpl[] = "/tmp/te-multinode-db.XXXXXX";
    if (mkdtemp(tmpl) != nullptr) dir_ = tmpl;
  }
  ~DbServer() {
    if (dir_.empty()) return;
    RunProcess({ClusterScript(kind_), "stop", dir_}, "", std::chrono::seconds(60));
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  DbServer(const DbServer&) = delete;
  DbServer& operator=(const DbServer&) = delete;

  // Starts (or restarts) the server; its URL, or "" after a test failure.
  std::string Start() {
    ProcessResult r =
        RunProcess({ClusterScript(kind_), "start", dir_}, "", std::chrono::seconds(120));
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    if (r.exit_code != 0) return "";
    std::string url = r.out.substr(0, r.out.find('\n'));
    if (kind_ == DbKind::kMariaDb) {
      url = url.substr(0, url.rfind('/') + 1) + "taskengine";
      if (url_.empty()) {
        ProcessResult c = RunProcess(
            MariaDbArgv(url.substr(0, url.rfind('/') + 1) + "taskengine_test",
                        "CREATE DATABASE IF NOT EXISTS taskengine CHARACTER SET utf8mb4 COLLATE "
                        "utf8mb4_nopad_bin"),
            "", std::chrono::seconds(60));
        EXPECT_EQ(c.exit_code, 0) << c.Describe();
        if (c.exit_code != 0) return "";
      }
    }
    url_ = url;
    return url_;
  }
  // The server dies at once, as in a crash: `pg_ctl stop -m immediate` (no
  // checkpoint), or SIGKILL of mariadbd.
  void StopImmediate() {
    std::vector<std::string> argv;
    if (kind_ == DbKind::kPostgres) {
      argv = {
          std::string(kPgBin) + "/pg_ctl", "-D", dir_ + "/data", "-m", "immediate", "-w", "stop"};
      if (getuid() == 0) argv.insert(argv.begin(), {"/usr/sbin/runuser", "-u", "postgres", "--"});
    } else {
      argv = {"/bin/sh", "-c",
              "pid=$(cat " + dir_ +
                  "/mariadbd.pid) && kill -9 $pid && "
                  "while kill -0 $pid 2>/dev/null; do sleep 0.05; done"};
    }
    ProcessResult r = RunProcess(argv, "", std::chrono::seconds(60));
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
  }
  DbKind kind() const { return kind_; }
  const std::string& url() const { return url_; }
  const std::string& dir() const { return dir_; }

  // The `mariadb` client's argv running `sql` on `url` (tab-separated rows).
  static std::vector<std::string> MariaDbArgv(const std::string& url, const std::string& sql) {
    // mysql://user:password@host:port/database
    const std::string rest = url.substr(url.find("://") + 3);
    const std::string auth = rest.substr(0, rest.find('@'));
    const std::string hostport =
        rest.substr(rest.find('@') + 1, rest.find('/') - rest.find('@') - 1);
    return {kMariaDb,
            "--host=" + hostport.substr(0, hostport.find(':')),
            "--port=" + hostport.substr(hostport.find(':') + 1),
            "--user=" + auth.substr(0, auth.find(':')),
            "--password=" + auth.substr(auth.find(':') + 1),
            "--database=" + rest.substr(rest.find('/') + 1),
            "--batch",
            "--skip-column-names",
            "--init-command=SET SESSION sql_mode = 'ANSI_QUOTES,PIPES_AS_CONCAT', time_zone = "
            "'+00:00'",
            "-e",
            sql};
  }

 private:
  DbKind kind_;
  std::string dir_;
  std::string url_;
};
using PgCluster = DbServer;

// The argv that runs `sql` on `url` with the server's client, printing rows
// of '|'-separated fields (psql -Atq; mariadb --batch, tabs turned into '|'
// by SqlOutput).
inline std::vector<std::string> SqlArgv(const std::string& url, const std::string& sql) {
  if (DbKindOf(url) == DbKind::kMariaDb) return DbServer::MariaDbArgv(url, sql);
  return {kPsql, url, "-v", "ON_ERROR_STOP=1", "-Atqc", sql};
}
inline std::string SqlOutput(const std::string& url, std::string out) {
  if (DbKindOf(url) == DbKind::kMariaDb) {
    std::replace(out.begin(), out.end(), '\t', '|');
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Runs `sql`; the unaligned, tuples-only output (rows of '|' separated
// fields) or "<error>" with a test failure.
inline std::string Sql(const std::string& url, const std::string& sql) {
  ProcessResult r = RunProcess(SqlArgv(url, sql), "", std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 0) << sql << ": " << r.Describe();
  if (r.exit_code != 0) return "<error>";
  return SqlOutput(url, r.out);
}

// One integer from `sql`; -1 after a failure.
inline long long SqlInt(const std::string& url, const std::string& sql) {
  std::string out = Sql(url, sql);
  try {
    return std::stoll(out);
  } catch (...) {
    ADD_FAILURE() << sql << " gave '" << out << "'";
    return -1;
  }
}

// The database's clock in ms (the clock every node judges leases by), as a
// SQL expression for the server of `url`.
inline std::string DbNowMs(const std::string& url) {
  return DbKindOf(url) == DbKind::kMariaDb
             ? "CAST(FLOOR(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)"
             : "(extract(epoch from clock_timestamp()) * 1000)::bigint";
}

// `expr` of every row joined by `separator`, in `order`, as a SQL aggregate.
inline std::string StringAgg(const std::string& url, const std::string& expr,
                             const std::string& separator, const std::string& order = "") {
  const std::string by = order.empty() ? "" : " ORDER BY " + order;
  if (DbKindOf(url) == DbKind::kMariaDb) {
    return "GROUP_CONCAT(" + expr + by + " SEPARATOR '" + separator + "')";
  }
  return "string_agg(" + expr + ", '" + separator + "'" + by + ")";
}

// S: executions still `running` more than `slack_ms` after their lease expired.
inline long long RunningPastLease(const std::string& url, long long slack_ms) {
  return SqlInt(url,
                "SELECT count(*) FROM taskengine.executions WHERE status = 1 "
                "AND lease_expires_at < " +
                    DbNowMs(url) + " - " + std::to_string(slack_ms));
}

// Options of the nodes' shared configuration.
struct NodeConfig {
  std::string url;
  int workers = 4;
  int poll_ms = 200;
  int sweep_ms = 250;
  int lease_ms = 3000;
  bool cron = false;  // also a job `tick` firing every minute (C)
  // Extra lines of the work job (e.g. timeout_ms).
  std::string work_keys;
  // Non-empty: the work job uses the built-in `http` handler and POSTs to this
  // loopback URL (a CountingHttpSink), not idempotent; otherwise the `command`
  // handler with the countable effect `notice`.
  std::string work_http_url;
};

// The config table of an `http` work job posting to `url` on 127.0.0.1:
// plain http and the loopback address explicitly allowed (allow_http,
// allow_private), NOT idempotent (so an unclear outcome is ambiguous, never
// resent), generous timeouts for a loaded 2-core machine.
inline std::string HttpWorkConfig(const std::string& url) {
  return "{ url = \"" + url +
         "\", allow_hosts = [\"127.0.0.1\"], allow_http = true, allow_private = "
         "[\"127.0.0.1\"], idempotent = false, timeout_ms = 20000, connect_timeout_ms = 5000 }";
}

// taskengine.toml for every node: the PostgreSQL URL, fast polls and sweeps,
// an ephemeral HTTP port, the work job `work` whose script performs the
// countable effect `notice` (plus `extra_script`) — or, with work_http_url,
// whose http handler posts to the sink (extra_script unused) — and
// optionally `tick`.
inline std::string NodeToml(const NodeConfig& c, const DrillFiles& files,
                            const std::string& extra_script = "") {
  std::string toml =
      "[database]\nurl = \"" + c.url +
      "\"\n\n[engine]\nworker_threads = " + std::to_string(c.workers) +
      "\npoll_interval_ms = " + std::to_string(c.poll_ms) +
      "\nsweep_interval_ms = " + std::to_string(c.sweep_ms) +
      "\nshutdown_grace_ms = 5000\n\n[http]\nport = 0\n\n[[queue]]\nname = \"default\"\n";
  const std::string work_keys =
      "lease_ms = " + std::to_string(c.lease_ms) +
      "\nmax_attempts = 25\nbackoff_base_ms = 100\nbackoff_cap_ms = 1000\n" + c.work_keys;
  if (c.work_http_url.empty()) {
    toml += ShellJob("work", CountableEffect(files, "notice") + extra_script, work_keys);
  } else {
    toml += "\n[[job]]\nname = \"work\"\nhandler = \"http\"\n" + work_keys +
            "\nconfig = " + HttpWorkConfig(c.work_http_url) + "\n";
  }
  if (c.cron) {
    toml +=
        "\n[[job]]\nname = \"tick\"\nhandler = \"command\"\nschedule = \"* * * * *\"\n"
        "config = { argv = [\"/bin/true\"] }\n";
  }
  return toml;
}

// One `taskengine serve` process with its own log file, run in `cwd`.
class Node {
 public:
  Node(std::string config_path, std::string log_path, std::string cwd)
      : config_path_(std::move(config_path)),
        log_path_(std::move(log_path)),
        cwd_(std::move(cwd)) {}

  // Starts serve with `extra_env` ("NAME=value", e.g. libfaketime's) added.
  void Start(const std::vector<std::string>& extra_env = {}) {
    SpawnOptions o;
    o.env = ChildEnvironment(extra_env);
    o.cwd = cwd_;
    o.stdout_path = log_path_;
    o.stderr_path = log_path_;
    std::vector<std::string> argv = {TASKENGINE_BIN, "--config", config_path_, "serve"};
    std::string error;
    ASSERT_TRUE(child_.Start(argv, o, &error)) << error;
    ++starts_;
  }
  // Waits until the log shows as many "serving (" lines as starts.
  bool WaitServing(std::chrono::milliseconds timeout) const {
    return WaitUntil(timeout, [&] {
      std::string log = ReadFile(log_path_);
      int n = 0;
      for (std::size_t p = log.find("serving ("); p != std::string::npos;
           p = log.find("serving (", p + 1))
        ++n;
      return n >= starts_;
    });
  }
  void Kill9() {
    child_.Signal(SIGKILL);
    child_.Wait(std::chrono::seconds(10));
  }
  void Stop() { StopServe(&child_); }
  bool running() const { return child_.running(); }
  pid_t pid() const { return child_.pid(); }
  // Whether it still runs (reaps it when it has exited).
  bool Alive() {
    if (!child_.running()) return false;
    child_.Wait(std::chrono::milliseconds(0));
    return child_.running();
  }
  std::string log() const { return ReadFile(log_path_); }

 private:
  std::string config_path_;
  std::string log_path_;
  std::string cwd_;
  ChildProcess child_;
  int starts_ = 0;
};

// Dispatches `count` `work` executions in batches through an Engine of this
// process on `url` (no workers, no sweeper), as an application would. Returns
// the acknowledged ids (each created).
inline std::vector<std::int64_t> DispatchWork(const std::string& url, int count, int batch = 1000,
                                              const std::string& job = "work") {
  std::vector<std::int64_t> ids;
  EngineOptions o;
  o.database_url = url;
  o.worker_threads = 0;
  o.run_sweeper = false;
  auto engine = Engine::Open(o);
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  if (!engine.ok()) return ids;
  for (int done = 0; done < count;) {
    std::vector<DispatchRequest> requests;
    for (int i = 0; i < batch && done + i < count; ++i) {
      DispatchRequest r;
      r.job = JobName{job};
      r.payload_json = "{\"n\":" + std::to_string(done + i) + "}";
      requests.push_back(std::move(r));
    }
    auto results = (*engine)->DispatchBatch(requests);
    EXPECT_TRUE(results.ok()) << results.status().ToString();
    if (!results.ok()) return ids;
    for (const DispatchResult& d : *results) {
      EXPECT_TRUE(d.created);
      ids.push_back(d.id.value);
    }
    done += static_cast<int>(requests.size());
  }
  return ids;
}

// Status counts of job `job`: "2=19990 4=10 " (status code = count).
inline std::string StatusCounts(const std::string& url, const std::string& job) {
  return Sql(url,
             "SELECT " + StringAgg(url, "status || '=' || n", " ", "status") +
                 " FROM (SELECT status, count(*) AS n FROM taskengine.executions WHERE job = '" +
                 job + "' GROUP BY status) s");
}

// Waits (bounded) until no `work` execution is queued or running.
inline bool WaitWorkTerminal(const std::string& url, std::chrono::milliseconds timeout) {
  return WaitUntil(
      timeout,
      [&] {
        ProcessResult r = RunProcess(SqlArgv(url,
                                             "SELECT count(*) FROM taskengine.executions WHERE "
                                             "job = 'work' AND status IN (0, 1)"),
                                     "", std::chrono::seconds(30));
        return r.exit_code == 0 && SqlOutput(url, r.out) == "0";
      },
      std::chrono::milliseconds(500));
}

// The SQL condition selecting the drill's executions: ids in the acknowledged
// range and `job_filter`.
inline std::string IdRange(const std::vector<std::int64_t>& ids,
                           const std::string& job_filter = "job = 'work'") {
  return "id BETWEEN " + std::to_string(ids.front()) + " AND " + std::to_string(ids.back()) +
         " AND " + job_filter;
}

// L: every acknowledged id exists exactly once and is terminal.
inline void ExpectL(const std::string& url, const std::vector<std::int64_t>& ids,
                    const std::string& job_filter = "job = 'work'") {
  const std::string range = IdRange(ids, job_filter);
  EXPECT_EQ(SqlInt(url, "SELECT count(*) FROM taskengine.executions WHERE " + range),
            static_cast<long long>(ids.size()))
      << "acknowledged dispatches missing";
  EXPECT_EQ(SqlInt(url, "SELECT count(*) FROM taskengine.executions WHERE " + range +
                            " AND status NOT IN (2, 3, 4, 5, 6)"),
            0)
      << "not terminal: " << StatusCounts(url, "work");
}

// The ids (one a line) a query returns; a test failure for anything else.
inline std::set<std::int64_t> SqlIds(const std::string& url, const std::string& sql) {
  std::set<std::int64_t> out;
  std::istringstream in(Sql(url, sql));
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    try {
      out.insert(std::stoll(line));
    } catch (...) {
      ADD_FAILURE() << sql << " gave '" << line << "'";
      break;
    }
  }
  return out;
}

// L and D over the database and the effects file, for the acknowledged `ids`:
//   L  every id exists exactly once and is terminal;
//   D  no id appears twice in notice.txt, every line names a dispatched id,
//      and the file agrees with the ledger (committed `notice` effects);
//      every succeeded execution performed its effect exactly once.
inline void ExpectLAndD(const std::string& url, const DrillFiles& files,
                        const std::vector<std::int64_t>& ids,
                        const std::string& job_filter = "job = 'work'") {
  // L
  ExpectL(url, ids, job_filter);
  const std::string range = IdRange(ids, job_filter);
  // D
  std::map<std::int64_t, int> lines = EffectLines(files.Effects("notice"));
  std::set<std::int64_t> known(ids.begin(), ids.end());
  int twice = 0, unknown = 0;
  for (const auto& [id, n] : lines) {
    if (n > 1) ++twice;
    if (known.count(id) == 0) ++unknown;
  }
  EXPECT_EQ(twice, 0) << "executions whose effect happened more than once";
  EXPECT_EQ(unknown, 0) << "effects of executions the drill did not dispatch";
  std::string committed = Sql(url,
                              "SELECT execution_id FROM taskengine.effects WHERE name = "
                              "'notice' AND committed = 1 ORDER BY 1");
  std::set<std::int64_t> ledger;
  std::istringstream in(committed);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) ledger.insert(std::stoll(line));
  }
  int file_not_ledger = 0, ledger_not_file = 0;
  for (const auto& [id, n] : lines) file_not_ledger += ledger.count(id) == 0 ? 1 : 0;
  for (std::int64_t id : ledger) ledger_not_file += lines.count(id) == 0 ? 1 : 0;
  // A crash between the append and effect:commit leaves a line without a
  // committed ledger entry (its reservation is then ambiguous and the
  // execution is quarantined, never run again): allowed, and counted.
  EXPECT_EQ(ledger_not_file, 0) << "ledger says committed but no effect line";
  long long succeeded_without =
      SqlInt(url, "SELECT count(*) FROM taskengine.executions e WHERE " + range +
                      " AND status = 2 AND NOT EXISTS (SELECT 1 FROM taskengine.effects f WHERE "
                      "f.execution_id = e.id AND f.name = 'notice' AND f.committed = 1)");
  EXPECT_EQ(succeeded_without, 0) << "succeeded without its effect";
  std::cout << "[ measure ] " << ids.size() << " executions: " << StatusCounts(url, "work")
            << "; effect lines " << lines.size() << ", committed " << ledger.size()
            << ", lines without ledger commit " << file_not_ledger << std::endl;
}

// L and D for `http` work (NodeConfig::work_http_url) over the database and
// the sink's raw arrivals, for the acknowledged `ids` (dispatched by
// DispatchWork: ids[k] carries the payload {"n":k}):
//   L  every id exists exactly once and is terminal;
//   D  no Idempotency-Key arrived twice (the handler is not idempotent, so a
//      repeat would be a second effect); every arrival names a dispatched
//      execution ("<id>:http"), is `POST /effect` and carries that
//      execution's payload; every committed `http` ledger entry has exactly
//      one arrival; every succeeded execution has its effect committed (hence
//      exactly one arrival); an arrival without a committed ledger entry (a
//      node died between the request and effect commit) belongs to an
//      execution quarantined as ambiguous, never to a succeeded one.
// Quarantined executions may have 0 or 1 arrival: both are counted and printed.
inline void ExpectLAndDHttp(const std::string& url, const CountingHttpSink& sink,
                            const std::vector<std::int64_t>& ids) {
  ExpectL(url, ids);
  const std::string range = IdRange(ids);
  std::map<std::int64_t, std::size_t> index;
  for (std::size_t k = 0; k < ids.size(); ++k) index[ids[k]] = k;

  const std::map<std::string, CountingHttpSink::Arrival> arrivals = sink.Arrivals();
  std::map<std::int64_t, int> by_id;
  long long total = 0;
  int twice = 0, unknown = 0, wrong_body = 0, wrong_line = 0;
  std::string examples;
  for (const auto& [key, a] : arrivals) {
    total += a.count;
    std::int64_t id = 0;
    const std::size_t colon = key.find(':');
    bool parsed = colon != std::string::npos && key.substr(colon) == ":http";
    if (parsed) {
      try {
        std::size_t used = 0;
        id = std::stoll(key.substr(0, colon), &used);
        parsed = used == colon;
      } catch (...) {
        parsed = false;
      }
    }
    if (!parsed || index.count(id) == 0) {
      ++unknown;
      if (examples.size() < 400) examples += " unknown key '" + key.substr(0, 64) + "'";
      continue;
    }
    by_id[id] += a.count;
    if (a.count > 1) {
      ++twice;
      if (examples.size() < 400) examples += " " + key + " x" + std::to_string(a.count);
    }
    if (a.request_line != "POST /effect HTTP/1.1") ++wrong_line;
    // The body of a request cut off by a kill may be missing; any body that
    // arrived must be this execution's payload.
    if (!a.body.empty()) {
      nlohmann::json body = nlohmann::json::parse(a.body, nullptr, false);
      if (body != nlohmann::json{{"n", index[id]}}) {
        ++wrong_body;
        if (examples.size() < 400) examples += " " + key + " body " + a.body.substr(0, 64);
      }
    }
  }
  EXPECT_EQ(twice, 0) << "D: effects that arrived more than once:" << examples;
  EXPECT_EQ(unknown, 0) << "D: arrivals naming no dispatched execution:" << examples;
  EXPECT_EQ(sink.without_key(), 0) << "D: requests without an Idempotency-Key";
  EXPECT_EQ(wrong_line, 0) << "requests other than POST /effect HTTP/1.1";
  EXPECT_EQ(wrong_body, 0) << "requests whose body is not their execution's payload:" << examples;

  const std::set<std::int64_t> committed = SqlIds(
      url,
      "SELECT execution_id FROM taskengine.effects WHERE name = 'http' AND "
      "committed = 1 AND execution_id BETWEEN " +
          std::to_string(ids.front()) + " AND " + std::to_string(ids.back()) + " ORDER BY 1");
  const std::set<std::int64_t> succeeded =
      SqlIds(url, "SELECT id FROM taskengine.executions WHERE " + range + " AND status = 2");
  const std::set<std::int64_t> quarantined =
      SqlIds(url, "SELECT id FROM taskengine.executions WHERE " + range + " AND status = 4");
  int committed_not_once = 0, succeeded_not_committed = 0, succeeded_not_once = 0;
  int arrived_uncommitted = 0, arrived_uncommitted_not_quarantined = 0;
  int quarantined_arrived = 0, quarantined_silent = 0;
  for (std::int64_t id : committed) {
    committed_not_once += by_id.count(id) && by_id[id] == 1 ? 0 : 1;
  }
  for (std::int64_t id : succeeded) {
    succeeded_not_committed += committed.count(id) ? 0 : 1;
    succeeded_not_once += by_id.count(id) && by_id[id] == 1 ? 0 : 1;
  }
  for (const auto& [id, n] : by_id) {
    if (committed.count(id)) continue;
    ++arrived_uncommitted;
    if (quarantined.count(id) == 0) ++arrived_uncommitted_not_quarantined;
  }
  for (std::int64_t id : quarantined)
    (by_id.count(id) ? quarantined_arrived : quarantined_silent)++;
  EXPECT_EQ(committed_not_once, 0) << "D: ledger says committed but the sink did not see it once";
  EXPECT_EQ(succeeded_not_committed, 0) << "D: succeeded without its effect committed";
  EXPECT_EQ(succeeded_not_once, 0) << "D: succeeded without exactly one arrival";
  EXPECT_EQ(arrived_uncommitted_not_quarantined, 0)
      << "D: an effect arrived without a ledger commit and its execution is not quarantined";
  const long long ambiguous = SqlInt(url, "SELECT count(*) FROM taskengine.executions WHERE " +
                                              range + " AND status = 4 AND ambiguous_failures > 0");
  std::cout << "[ measure ] " << ids.size() << " executions: " << StatusCounts(url, "work")
            << "; succeeded " << succeeded.size() << ", quarantined " << quarantined.size()
            << " (ambiguous " << ambiguous << ": " << quarantined_arrived << " with an arrival, "
            << quarantined_silent << " without)" << std::endl;
  std::cout << "[ measure ] sink: " << total << " arrivals of " << arrivals.size() << " keys over "
            << sink.connections() << " connections, answered " << sink.answered() << ", cut off "
            << sink.cut_off() << "; ledger committed " << committed.size()
            << ", arrivals without ledger commit " << arrived_uncommitted << std::endl;
}

}  // namespace taskengine::testing
