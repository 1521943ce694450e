// Drill RD10 (quality.md §2): kill -9 random remote worker processes during
// load. A `taskengine serve` with no in-process workers, a worker:manager
// keeping 3 worker:start processes (concurrency 4 each), and a few thousand
// `command` executions whose script performs a countable effect through the
// HTTP effect verbs (worker:effect). While they run, the drill kill -9s a
// random worker every few hundred milliseconds (the manager restarts it).
// Afterwards:
//   L  every dispatched execution is terminal (and, with a generous attempt
//      budget, succeeded, or quarantined as ambiguous: see D);
//   D  no effect is performed twice: each key is committed at most once and
//      the effects file names each execution at most once, exactly as often as
//      the ledger has it committed, except when a worker died between
//      performing and committing it: then the execution must be quarantined
//      as ambiguous (E3), never performed again;
//   S  no execution stayed running past its lease plus the sweep interval
//      (sampled during the run; none is running at the end).
// The same drill body runs on every backend (issues #6, #17):
// Rd10DrillTest.Sqlite* on the embedded SQLite file, Rd10DrillTest.Postgres*
// on the PostgreSQL server of TASKENGINE_TEST_PG_URL (set by ./test.sh), in a
// fresh schema rd10_<pid>_<time> that is dropped at the end,
// Rd10DrillTest.MariaDb* on the MariaDB server of TASKENGINE_TEST_MYSQL_URL in
// a fresh database of the same name. Every check goes through the
// HTTP API, so nothing below depends on the backend. Without
// TASKENGINE_TEST_PG_URL the PostgreSQL variant FAILS, unless
// TASKENGINE_TEST_PG_OPTIONAL=1, when it is skipped with the reason (as the
// PostgreSQL conformance suite does).
// TASKENGINE_RD10_JOBS overrides the number of executions (default 2000),
// TASKENGINE_RD10_KILL_MS the mean pause between kills (default 1000 ms); both
// apply to both variants.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <random>
#include <regex>

#include "drill_support.h"
#include "remote_dispatch.h"
#include "taskengine_client/client.h"

namespace taskengine::testing {
namespace {

constexpr int kLeaseMs = 2000;
constexpr int kSweepMs = 100;
// Store and scheduling latency allowed on top of lease + sweep for S.
constexpr int kSlackMs = 2000;

std::string RemoteCountableEffect(const DrillFiles& f, const std::string& name) {
  std::string s = CountableEffect(f, name);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"effect:reserve", "worker:effect reserve"},
           {"effect:commit", "worker:effect commit"}}) {
    for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) {
      s.replace(p, from.size(), to);
    }
  }
  return s;
}

// "2026-01-01T00:00:00.123Z" -> Unix milliseconds (0 when unparsable).
std::int64_t ParseTimeMs(const std::string& s) {
  std::tm tm{};
  std::istringstream in(s);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  if (in.fail()) return 0;
  std::int64_t ms = static_cast<std::int64_t>(timegm(&tm)) * 1000;
  if (in.peek() == '.') {
    in.get();
    std::string frac;
    while (std::isdigit(in.peek())) frac.push_back(static_cast<char>(in.get()));
    frac = (frac + "000").substr(0, 3);
    ms += std::stoi(frac);
  }
  return ms;
}

std::int64_t NowMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Every execution by id, through the API (pages of 1000).
std::map<std::string, nlohmann::json> ListAllOverHttp(taskengine_client::Client& client,
                                                      const std::string& status = "") {
  std::map<std::string, nlohmann::json> out;
  taskengine_client::ListFilter filter;
  filter.status = status;
  filter.limit = 1000;
  for (int page = 0; page < 100; ++page) {
    auto r = client.ListExecutions(filter);
    if (!r.ok()) break;
    for (const auto& e : r->items) out[taskengine_client::IdToString(e["id"])] = e;
    if (r->next_cursor.empty()) break;
    filter.cursor = r->next_cursor;
  }
  return out;
}

int JobCount() {
  const char* v = std::getenv("TASKENGINE_RD10_JOBS");
  return v != nullptr ? std::max(10, std::atoi(v)) : 2000;
}

// The mean pause between two kills. TASKENGINE_RD10_KILL_MS overrides it.
int KillEveryMs() {
  const char* v = std::getenv("TASKENGINE_RD10_KILL_MS");
  return v != nullptr ? std::max(50, std::atoi(v)) : 1000;
}

// The database a variant of the drill runs on.
struct Rd10Database {
  std::string backend;    // "sqlite", "postgresql" or "mariadb": the [ measure ] line
  std::string pg_url;     // PostgreSQL and MariaDB: the server (MariaDB: the run's database)
  std::string pg_schema;  // PostgreSQL only: the fresh schema of this run
};

constexpr const char* kPsql = "/usr/bin/psql";

std::string PgTestUrl() {
  const char* url = std::getenv("TASKENGINE_TEST_PG_URL");
  return url != nullptr ? url : "";
}

std::string MariaDbTestUrl() {
  const char* url = std::getenv("TASKENGINE_TEST_MYSQL_URL");
  return url != nullptr ? url : "";
}

// Runs `sql` on the MariaDB server of `url` (mysql://user:password@host:port/db)
// with the mariadb client.
ProcessResult MariaDbSql(const std::string& url, const std::string& sql) {
  const std::string rest = url.substr(url.find("://") + 3);
  const std::string auth = rest.substr(0, rest.find('@'));
  const std::string host = rest.substr(rest.find('@') + 1, rest.find('/') - rest.find('@') - 1);
  return RunProcess(
      {"/usr/bin/mariadb", "--host=" + host.substr(0, host.find(':')),
       "--port=" + host.substr(host.find(':') + 1), "--user=" + auth.substr(0, auth.find(':')),
       "--password=" + auth.substr(auth.find(':') + 1), "--batch", "-e", sql},
      "", milliseconds(60'000));
}

// A fresh database for the MariaDB variant, dropped at the end, passed or
// failed, after every process of the drill has gone.
class MariaDbDatabase {
 public:
  MariaDbDatabase(std::string url, std::string name)
      : url_(std::move(url)), name_(std::move(name)) {
    ProcessResult r = MariaDbSql(
        url_, "CREATE DATABASE " + name_ + " CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin");
    EXPECT_EQ(r.exit_code, 0) << "creating database " << name_ << ": " << r.Describe();
  }
  ~MariaDbDatabase() {
    ProcessResult r = MariaDbSql(url_, "DROP DATABASE IF EXISTS " + name_);
    EXPECT_EQ(r.exit_code, 0) << "dropping database " << name_ << ": " << r.Describe();
  }
  MariaDbDatabase(const MariaDbDatabase&) = delete;
  MariaDbDatabase& operator=(const MariaDbDatabase&) = delete;

  // The server's URL with this database.
  std::string url() const { return url_.substr(0, url_.rfind('/') + 1) + name_; }

 private:
  std::string url_;
  std::string name_;
};

// Drops the run's schema (and everything in it) when the PostgreSQL variant
// ends, passed or failed, after every process of the drill has gone.
class DropSchemaAtEnd {
 public:
  DropSchemaAtEnd(std::string url, std::string schema)
      : url_(std::move(url)), schema_(std::move(schema)) {}
  ~DropSchemaAtEnd() {
    ProcessResult r = RunProcess({kPsql, url_, "-v", "ON_ERROR_STOP=1", "-Atqc",
                                  "DROP SCHEMA IF EXISTS " + schema_ + " CASCADE"},
                                 "", milliseconds(60'000));
    EXPECT_EQ(r.exit_code, 0) << "dropping schema " << schema_ << ": " << r.Describe();
  }
  DropSchemaAtEnd(const DropSchemaAtEnd&) = delete;
  DropSchemaAtEnd& operator=(const DropSchemaAtEnd&) = delete;

 private:
  std::string url_;
  std::string schema_;
};

// EngineSection(...) with the [database] keys of `db`: for PostgreSQL its url
// and schema, for MariaDB its url (path and sync are then unused).
std::string WithDatabase(const Rd10Database& db, std::string engine_section) {
  if (db.pg_url.empty()) return engine_section;
  const std::string table = "[database]\n";
  EXPECT_EQ(engine_section.rfind(table, 0), 0u) << engine_section;
  std::string keys = "url = \"" + db.pg_url + "\"\n";
  if (!db.pg_schema.empty()) keys += "schema = \"" + db.pg_schema + "\"\n";
  engine_section.insert(table.size(), keys);
  return engine_section;
}

// The drill itself, on `db` (see the file comment).
void RunRd10Drill(const Rd10Database& db) {
  const int jobs = JobCount();
  const auto t_start = std::chrono::steady_clock::now();
  DrillFiles files;
  const std::string job = ShellJob(
      "remote",
      "cat > /dev/null\nsleep 0.02\n" + RemoteCountableEffect(files, "notice") + "exit 0\n",
      "queue = \"remote\"\nlease_ms = " + std::to_string(kLeaseMs) +
          "\ntimeout_ms = 30000\nmax_attempts = 25\nmax_consecutive_lease_expiries = 25\n"
          "backoff_base_ms = 20\nbackoff_cap_ms = 100\n");
  TaskengineInstall te(WithDatabase(db, EngineSection(0, 100, kSweepMs, "normal")) +
                       "\n[[queue]]\nname = \"remote\"\n\n[http]\nport = 0\nlease_per_second = "
                       "0\ndispatch_per_second = 0\n" +
                       job);
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  nlohmann::json worker_token = te.RunJson({"token:create", "--name", "w", "--scopes", "worker"});
  nlohmann::json ops_token =
      te.RunJson({"token:create", "--name", "ops", "--scopes", "read,dispatch"});
  ASSERT_TRUE(worker_token.is_object() && ops_token.is_object());
  ChildProcess serve;
  ASSERT_NO_FATAL_FAILURE(te.StartServe(&serve));
  ASSERT_TRUE(te.WaitServing(1, milliseconds(20'000))) << ReadFile(te.serve_log());
  // The drill runs on the backend it names (the serve log's database line).
  const std::string database_line = "database " + db.backend + " ";
  ASSERT_NE(ReadFile(te.serve_log()).find(database_line), std::string::npos)
      << ReadFile(te.serve_log());
  if (!db.pg_schema.empty()) {
    ASSERT_NE(ReadFile(te.serve_log()).find("(schema " + db.pg_schema + ")"), std::string::npos)
        << ReadFile(te.serve_log());
  }
  const std::string url = ServeUrl(te);
  ASSERT_FALSE(url.empty());
  taskengine_client::Client ops({url, ops_token.value("secret", "")});

  // Dispatch in bulk.
  std::vector<std::string> ids;
  ASSERT_NO_FATAL_FAILURE(DispatchRemoteJobs(ops, jobs, "rd10-", &ids));
  ASSERT_EQ(static_cast<int>(ids.size()), jobs);

  ChildProcess manager;
  {
    SpawnOptions o;
    o.env = ChildEnvironment({"TASKENGINE_TOKEN=" + worker_token.value("secret", "")});
    o.cwd = te.dir().path().string();
    o.stdout_path = te.dir().File("manager.log");
    o.stderr_path = te.dir().File("manager.log");
    std::string error;
    ASSERT_TRUE(manager.Start(
        {TASKENGINE_BIN, "worker:manager", "--server=" + url, "--queues=remote", "--workers=3",
         "--concurrency=4", "--poll-ms=1000", "--kill-grace-ms=1000", "--grace-ms=10000"},
        o, &error))
        << error;
  }

  // Kill -9 random workers while the load runs; sample S meanwhile.
  std::mt19937 random(std::random_device{}());
  const unsigned seed = random();
  random.seed(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  int kills = 0;
  std::int64_t worst_overdue_ms = 0;
  auto sample_s = [&] {
    const std::int64_t now = NowMs();
    for (const auto& [id, e] : ListAllOverHttp(ops, "running")) {
      const std::int64_t expires = ParseTimeMs(e.value("lease_expires_at", ""));
      if (expires > 0) worst_overdue_ms = std::max(worst_overdue_ms, now - expires);
    }
  };
  const auto load_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  auto next_kill = std::chrono::steady_clock::now() + milliseconds(KillEveryMs());
  auto next_sample = std::chrono::steady_clock::now();
  const int every = KillEveryMs();
  while (std::chrono::steady_clock::now() < load_deadline) {
    std::this_thread::sleep_for(milliseconds(50));
    const int effects = static_cast<int>(ReadLines(files.Effects("notice")).size());
    if (effects >= jobs * 9 / 10) break;
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_kill) {
      next_kill =
          now + milliseconds(std::uniform_int_distribution<int>(every / 2, every * 3 / 2)(random));
      std::vector<pid_t> workers = ChildrenOf(manager.pid());
      if (!workers.empty()) {
        const pid_t victim = workers[random() % workers.size()];
        if (kill(victim, SIGKILL) == 0) ++kills;
      }
    }
    if (now >= next_sample) {
      next_sample = now + milliseconds(500);
      sample_s();
    }
  }
  const long long load_ms = MillisSince(t_start);
  if (every < 100'000) {
    ASSERT_GE(kills, 5) << "the load ended before the drill could kill enough workers";
  }

  // L: everything terminal within a bound after the last kill.
  const auto t_last_kill = std::chrono::steady_clock::now();
  std::map<std::string, nlohmann::json> all;
  const bool terminal = WaitUntil(
      milliseconds(180'000),
      [&] {
        sample_s();
        all = ListAllOverHttp(ops);
        for (const std::string& id : ids) {
          auto it = all.find(id);
          if (it == all.end() || !IsTerminalStatus(it->second.value("status", ""))) return false;
        }
        return true;
      },
      milliseconds(500));
  std::map<std::string, int> counts;
  for (const auto& [id, e] : all) counts[e.value("status", "")]++;
  std::string described;
  for (const auto& [s, n] : counts) described += s + "=" + std::to_string(n) + " ";
  ASSERT_TRUE(terminal) << described << "\n"
                        << ReadFile(te.dir().File("manager.log")).substr(0, 4000);
  const long long drain_ms = MillisSince(t_last_kill);

  // D: ledger vs effects file, per execution.
  const std::map<std::int64_t, int> lines = EffectLines(files.Effects("notice"));
  std::set<std::int64_t> known;
  for (const std::string& id : ids) known.insert(std::stoll(id));
  for (const auto& [id, n] : lines) {
    EXPECT_EQ(known.count(id), 1u) << "the effects file names unknown execution " << id;
  }
  int succeeded = 0, doubled = 0, mismatched = 0, ambiguous = 0;
  for (const std::string& id : ids) {
    auto detail = ops.GetExecution(id);
    ASSERT_TRUE(detail.ok()) << detail.status().ToString();
    const std::string status = detail->value("status", "");
    succeeded += status == "succeeded";
    int committed = 0;
    for (const auto& effect : detail->value("effects", nlohmann::json::array())) {
      if ((effect.value("state", "") == "committed") && effect.value("name", "") == "notice")
        ++committed;
    }
    const int in_file = lines.count(std::stoll(id)) ? lines.at(std::stoll(id)) : 0;
    if (in_file > 1 || committed > 1) {
      ++doubled;
      ADD_FAILURE() << "execution " << id << ": effect performed " << in_file
                    << " times, committed " << committed << " times";
    } else if (committed == 0 && status == "quarantined" &&
               detail->value("failure_class", "") == "ambiguous") {
      // E3: the worker died after reserving the effect and before committing
      // it (whether or not the script performed it: in_file 1 or 0); the
      // retry met `ambiguous` and the execution was quarantined instead of
      // performing it again. At most once, unconfirmed, never doubled.
      ++ambiguous;
    } else if (in_file != committed) {
      ++mismatched;
      ADD_FAILURE() << "execution " << id << ": effects file " << in_file << ", ledger "
                    << committed << ": " << detail->dump();
    }
    if (status == "succeeded") {
      EXPECT_EQ(committed, 1) << "succeeded execution " << id << " without its effect";
    }
  }
  // L: every execution succeeded, except the ambiguous ones above.
  EXPECT_EQ(succeeded + ambiguous, jobs) << described;

  // S: nothing outlived lease + sweep (+ slack); nothing is running now.
  EXPECT_LE(worst_overdue_ms, kSweepMs + kSlackMs)
      << "an execution stayed running " << worst_overdue_ms << " ms past its lease";
  EXPECT_EQ(ListAllOverHttp(ops, "running").size(), 0u);

  manager.Signal(SIGTERM);
  auto status = manager.Wait(milliseconds(20'000));
  ASSERT_TRUE(status.has_value());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  StopServe(&serve);

  const std::string manager_log = ReadFile(te.dir().File("manager.log"));
  int restarts = 0;
  for (std::size_t p = manager_log.find("restarting"); p != std::string::npos;
       p = manager_log.find("restarting", p + 1)) {
    ++restarts;
  }
  std::cout << "[ measure ] RD10 (" << db.backend << "): " << jobs << " executions, " << kills
            << " worker kill -9s, " << restarts << " restarts by worker:manager, " << succeeded
            << " succeeded, " << ambiguous << " quarantined as ambiguous, " << doubled
            << " doubled effects, " << mismatched << " ledger/file mismatches, worst lease overrun "
            << worst_overdue_ms << " ms (lease " << kLeaseMs << " ms, sweep " << kSweepMs
            << " ms), drained " << drain_ms << " ms after the load phase (" << load_ms
            << " ms), total " << MillisSince(t_start) << " ms" << std::endl;
}

TEST(Rd10DrillTest, SqliteKillingRandomWorkersDuringLoadKeepsLDS) {
  Rd10Database sqlite;
  sqlite.backend = "sqlite";
  RunRd10Drill(sqlite);
}

TEST(Rd10DrillTest, PostgresKillingRandomWorkersDuringLoadKeepsLDS) {
  const std::string url = PgTestUrl();
  if (url.empty()) {
    const char* optional = std::getenv("TASKENGINE_TEST_PG_OPTIONAL");
    if (optional != nullptr && std::string(optional) == "1") {
      GTEST_SKIP() << "TASKENGINE_TEST_PG_URL is not set and TASKENGINE_TEST_PG_OPTIONAL=1: "
                      "drill RD10 did not run on PostgreSQL";
    }
    FAIL() << "TASKENGINE_TEST_PG_URL is not set: drill RD10 on PostgreSQL needs a server. "
              "Start one with `scripts/pg_cluster.sh start <dir>` and export the URL it "
              "prints, or set TASKENGINE_TEST_PG_OPTIONAL=1 to skip this variant.";
  }
  const std::string schema = "rd10_" + std::to_string(getpid()) + "_" +
                             std::to_string(static_cast<long long>(std::time(nullptr)));
  SCOPED_TRACE("schema " + schema);
  DropSchemaAtEnd drop(url, schema);
  RunRd10Drill({.backend = "postgresql", .pg_url = url, .pg_schema = schema});
}

TEST(Rd10DrillTest, MariaDbKillingRandomWorkersDuringLoadKeepsLDS) {
  const std::string url = MariaDbTestUrl();
  if (url.empty()) {
    const char* optional = std::getenv("TASKENGINE_TEST_MYSQL_OPTIONAL");
    if (optional != nullptr && std::string(optional) == "1") {
      GTEST_SKIP() << "TASKENGINE_TEST_MYSQL_URL is not set and TASKENGINE_TEST_MYSQL_OPTIONAL=1: "
                      "drill RD10 did not run on MariaDB";
    }
    FAIL() << "TASKENGINE_TEST_MYSQL_URL is not set: drill RD10 on MariaDB needs a server. "
              "Start one with `scripts/mariadb_cluster.sh start <dir>` and export the URL it "
              "prints, or set TASKENGINE_TEST_MYSQL_OPTIONAL=1 to skip this variant.";
  }
  MariaDbDatabase database(url, "rd10_" + std::to_string(getpid()) + "_" +
                                    std::to_string(static_cast<long long>(std::time(nullptr))));
  RunRd10Drill({.backend = "mariadb", .pg_url = database.url(), .pg_schema = ""});
}

}  // namespace
}  // namespace taskengine::testing
