// taskengine-pg-bench: P5 (quality.md §1), PostgreSQL end to end, or P11,
// the same on MariaDB, and the SQLite P1 figure from the same run for the
// ratio.
//
//   taskengine-pg-bench --database-url=postgres://...|mysql://... [--jobs N]
//                       [--workers N] [--runs N] [--dir PATH]
//                       [--configs=two,one,sqlite]
//
// On MariaDB each run gets a fresh database (created next to the URL's and
// dropped after the run; the URL's user needs CREATE and DROP).
//
// P5: bulk-dispatch N no-op jobs (batches of 1,000; each node dispatches half
// at the same time) into a fresh schema, then drain them with TWO engine nodes (two Engine objects
// in this process, each with its own connection pool, worker pool and sweeper, sharing the work
// through the database exactly as two processes would). The server keeps its
// durable defaults (synchronous_commit=on, fsync on: scripts/pg_cluster.sh).
// P1 (same run): the same N with one engine of 2x the workers, on PostgreSQL
// and on SQLite (WAL, synchronous=FULL). Prints medians and the ratios. The
// client threads share the machine's cores with the server.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "storage/mariadb/maria_conn.h"
#include "storage/open_store.h"
#include "storage/postgres/pg_conn.h"
#include "storage/store_rows.h"
#include "taskengine/engine.h"

namespace te = taskengine;
using SteadyClock = std::chrono::steady_clock;

namespace {

using te::bench::Median;

struct Args {
  std::string url;
  long jobs = 100'000;
  int workers = 4;  // per node
  int runs = 3;
  std::string dir = "/tmp/taskengine-pg-bench";
  // Which set-ups each run measures (all by default): "two" (P5/P11, 2
  // nodes), "one" (1 node on the server), "sqlite" (P1 on SQLite).
  bool two = true, one = true, sqlite = true;
};

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

void Check(const te::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

// The transactions the server has committed so far, over all its databases:
// PostgreSQL's pg_stat_database.xact_commit, MariaDB's Com_commit (the engine
// runs with autocommit off, so each of its transactions ends in a COMMIT).
// -1 when it cannot be read.
long long ServerCommits(const std::string& url, bool maria) {
  if (maria) {
    static constexpr char kSql[] =
        "SELECT CAST(VARIABLE_VALUE AS SIGNED) FROM information_schema.GLOBAL_STATUS "
        "WHERE VARIABLE_NAME = 'COM_COMMIT'";
    te::maria::MariaConn c;
    if (!c.Connect(url).ok()) return -1;
    long long v = -1;
    auto r = c.Run(kSql, {}, [&](const te::storage_internal::Row& row) { v = row.Int(0); });
    return r.ok() ? v : -1;
  }
  te::pg::PgConn c;
  if (!c.Connect(url, "").ok()) return -1;
  auto r = c.Exec("SELECT sum(xact_commit)::bigint FROM pg_stat_database");
  if (!r.ok() || r->rows() != 1) return -1;
  return std::atoll(r->Text(0, 0).c_str());
}

// ServerCommits once the count has settled: PostgreSQL's backends report
// their counts when they go idle or exit, a little after the client left.
long long SettledServerCommits(const std::string& url, bool maria) {
  long long last = ServerCommits(url, maria);
  for (int i = 0; i < 10 && last >= 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const long long now = ServerCommits(url, maria);
    if (now == last) break;
    last = now;
  }
  return last;
}

// The process id of the server behind `url` when it runs on this machine:
// PostgreSQL's postmaster (the parent of this connection's backend), MariaDB's
// mariadbd (its pid file). -1 when it cannot be told or /proc does not show it.
long ServerPid(const std::string& url, bool maria) {
  long pid = -1;
  if (maria) {
    te::maria::MariaConn c;
    if (!c.Connect(url).ok()) return -1;
    std::string file;
    if (!c.Run("SELECT @@pid_file", {}, [&](const te::storage_internal::Row& row) {
            file = row.Text(0);
          }).ok()) {
      return -1;
    }
    std::ifstream(file) >> pid;
  } else {
    te::pg::PgConn c;
    if (!c.Connect(url, "").ok()) return -1;
    auto r = c.Exec("SELECT pg_backend_pid()");
    if (!r.ok() || r->rows() != 1) return -1;
    const long backend = std::atol(r->Text(0, 0).c_str());
    std::ifstream status("/proc/" + std::to_string(backend) + "/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("PPid:", 0) == 0) pid = std::atol(line.c_str() + 5);
    }
  }
  return pid > 0 && std::filesystem::exists("/proc/" + std::to_string(pid)) ? pid : -1;
}

// The fields of /proc/PID/stat after the command name (field 3 on); empty
// when it cannot be read.
std::vector<long long> StatFields(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<long long> out;
  const std::size_t end = text.rfind(')');
  if (end == std::string::npos) return out;
  std::istringstream fields(text.substr(end + 2));
  std::string f;
  while (fields >> f) out.push_back(std::atoll(f.c_str()));
  return out;
}

// CPU seconds the server `pid` has used: its own time, that of its children
// that ended (PostgreSQL's backends of closed connections) and that of its
// live children. -1 when /proc does not show it.
double ServerCpuSeconds(long pid) {
  if (pid <= 0) return -1;
  // stat fields from 3 on: ppid is [1], utime [11], stime [12], cutime [13], cstime [14].
  const std::vector<long long> own = StatFields(pid);
  if (own.size() < 15) return -1;
  long long ticks = own[11] + own[12] + own[13] + own[14];
  if (DIR* dir = opendir("/proc")) {
    while (dirent* e = readdir(dir)) {
      const long child = std::atol(e->d_name);
      if (child <= 0) continue;
      const std::vector<long long> f = StatFields(child);
      if (f.size() >= 13 && f[1] == pid) ticks += f[11] + f[12];
    }
    closedir(dir);
  }
  return static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

te::JobDefinition NoopJob() {
  te::JobDefinition j;
  j.name = te::JobName("noop");
  j.handler = "noop";
  j.queue = "default";
  return j;
}

class Run {
 public:
  // Opens `nodes` engines on `options` (each with `workers` threads).
  Run(te::EngineOptions options, int nodes, int workers) {
    for (int i = 0; i < nodes; ++i) {
      te::EngineOptions o = options;
      o.worker_threads = workers;
      o.claim_batch = 512;
      o.worker_id = "bench-node-" + std::to_string(i);
      auto e = te::Engine::Open(o);
      Check(e.status(), "open");
      auto engine = std::move(e).value();
      Check(engine->DefineJob(NoopJob()), "define");
      Check(engine->RegisterHandler("noop",
                                    [this](te::JobContext&) {
                                      done_.fetch_add(1, std::memory_order_relaxed);
                                      return te::HandlerResult::Success();
                                    }),
            "register");
      engines_.push_back(std::move(engine));
    }
  }
  ~Run() {
    for (auto& e : engines_) e->Stop();
  }

  // {dispatch s, drain s}. Every node bulk-dispatches its share at once, as
  // the nodes of a deployment each take their clients' dispatches.
  std::pair<double, double> Go(long n) {
    auto t0 = SteadyClock::now();
    std::vector<std::thread> dispatchers;
    const long nodes = static_cast<long>(engines_.size());
    for (long node = 0; node < nodes; ++node) {
      dispatchers.emplace_back([this, node, nodes, n] {
        std::vector<te::DispatchRequest> batch;
        for (long i = n * node / nodes, end = n * (node + 1) / nodes; i < end;) {
          batch.clear();
          for (int k = 0; k < 1000 && i < end; ++k, ++i) {
            te::DispatchRequest r;
            r.job = te::JobName("noop");
            r.payload_json = "{\"i\":" + std::to_string(i) + "}";
            batch.push_back(std::move(r));
          }
          auto res = engines_[node]->DispatchBatch(batch);
          Check(res.status(), "dispatch");
        }
      });
    }
    for (auto& t : dispatchers) t.join();
    auto t1 = SteadyClock::now();
    for (auto& e : engines_) Check(e->Start(), "start");
    auto published = [&] {
      long p = 0;
      for (auto& e : engines_) p += static_cast<long>(e->stats().published);
      return p;
    };
    while (done_.load(std::memory_order_relaxed) < n || published() < n) {
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    return {Seconds(t1 - t0), Seconds(SteadyClock::now() - t1)};
  }

 private:
  std::atomic<long> done_{0};
  std::vector<std::unique_ptr<te::Engine>> engines_;
};

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto value = [&](const std::string& flag) -> const char* {
      return s.rfind(flag + "=", 0) == 0 ? argv[i] + flag.size() + 1 : nullptr;
    };
    if (const char* v = value("--database-url"))
      a.url = v;
    else if (const char* v = value("--jobs"))
      a.jobs = std::atol(v);
    else if (const char* v = value("--workers"))
      a.workers = std::atoi(v);
    else if (const char* v = value("--runs"))
      a.runs = std::atoi(v);
    else if (const char* v = value("--dir"))
      a.dir = v;
    else if (const char* v = value("--configs")) {
      const std::string list = std::string(",") + v + ",";
      a.two = list.find(",two,") != std::string::npos;
      a.one = list.find(",one,") != std::string::npos;
      a.sqlite = list.find(",sqlite,") != std::string::npos;
      if (!a.two && !a.one && !a.sqlite) {
        std::fprintf(stderr, "--configs takes a comma-separated list of two, one, sqlite\n");
        return 2;
      }
    } else {
      std::fprintf(
          stderr,
          "usage: taskengine-pg-bench --database-url=postgres://...|mysql://... [--jobs=N] "
          "[--workers=N per node] [--runs=N] [--dir=PATH] [--configs=two,one,sqlite]\n");
      return 2;
    }
  }
  if (a.url.empty()) {
    std::fprintf(stderr,
                 "--database-url is required (scripts/pg_cluster.sh or scripts/mariadb_cluster.sh "
                 "start DIR prints one)\n");
    return 2;
  }
  std::vector<double> pg, pg_one, sqlite, commits;
  // Per job of the 2-node runs: the server's CPU and this process's (the two
  // engine nodes), in microseconds.
  std::vector<double> server_us, nodes_us, server_ceiling, all_ceiling;
  auto report = [&](const char* what, int r, double d, double w) {
    std::printf("  run %d %-24s dispatch %.0f/s, drain %.0f jobs/s, end to end %.0f jobs/s\n",
                r + 1, what, a.jobs / d, a.jobs / w, a.jobs / (d + w));
  };
  const bool maria = te::IsMariaDbUrl(a.url);
  const std::string server = maria ? "MariaDB" : "PostgreSQL";
  // A fresh schema (PostgreSQL) or database (MariaDB) per run.
  auto server_options = [&](const char* tag, int r) {
    const std::string name =
        std::string(tag) + "_" + std::to_string(std::time(nullptr)) + "_" + std::to_string(r);
    te::EngineOptions o;
    o.database_url = a.url;
    o.database_schema = name;
    if (maria) {
      te::maria::MariaConn admin;
      Check(admin.Connect(a.url), "connect");
      Check(admin.Exec("DROP DATABASE IF EXISTS " + name + "; CREATE DATABASE " + name),
            "create database");
      const std::size_t slash = a.url.find('/', a.url.find("://") + 3);
      o.database_url = a.url.substr(0, slash) + "/" + name;
    }
    return o;
  };
  // Each run's schema or database goes when the run ends.
  auto drop = [&](const te::EngineOptions& o) {
    if (maria) {
      te::maria::MariaConn admin;
      if (admin.Connect(a.url).ok()) {
        (void)admin.Exec("DROP DATABASE IF EXISTS " + o.database_schema);
      }
      return;
    }
    te::pg::PgConn admin;
    if (admin.Connect(a.url, "").ok()) {
      (void)admin.Exec("SET client_min_messages = warning; DROP SCHEMA IF EXISTS " +
                       o.database_schema + " CASCADE");
    }
  };
  const std::string two_nodes = server + ", 2 nodes:";
  const long server_pid = ServerPid(a.url, maria);
  const int cores = te::bench::Cores();
  const std::string one_node = server + ", 1 node:";
  for (int r = 0; r < a.runs; ++r) {
    if (a.two) {
      const te::EngineOptions o = server_options("p5", r);
      const long long commits_before = SettledServerCommits(a.url, maria);
      double seconds = 0;
      {
        Run run(o, 2, a.workers);
        const double server_before = ServerCpuSeconds(server_pid);
        const te::bench::CpuMeter nodes;
        auto [d, w] = run.Go(a.jobs);
        const double nodes_per_job = nodes.Per(static_cast<double>(a.jobs)).us_per_unit;
        const double server_after = ServerCpuSeconds(server_pid);
        pg.push_back(a.jobs / (d + w));
        seconds = d + w;
        report(two_nodes.c_str(), r, d, w);
        if (server_before >= 0 && server_after >= server_before) {
          server_us.push_back((server_after - server_before) * 1e6 / a.jobs);
          nodes_us.push_back(nodes_per_job);
          server_ceiling.push_back(cores * 1e6 / server_us.back());
          all_ceiling.push_back(cores * 1e6 / (server_us.back() + nodes_us.back()));
          std::printf(
              "  run %d %-24s CPU per job: server %.1f us, the 2 nodes %.1f us; %d cores allow "
              "%.0f jobs/s at most (%.0f for the server alone)\n",
              r + 1, two_nodes.c_str(), server_us.back(), nodes_us.back(), cores,
              all_ceiling.back(), server_ceiling.back());
        }
      }
      const long long commits_after = SettledServerCommits(a.url, maria);
      if (commits_before >= 0 && commits_after >= commits_before) {
        commits.push_back(static_cast<double>(commits_after - commits_before) / seconds);
        std::printf(
            "  run %d %-24s the server committed %lld transactions: %.0f/s, %.2f jobs each\n",
            r + 1, two_nodes.c_str(), commits_after - commits_before, commits.back(),
            static_cast<double>(a.jobs) /
                static_cast<double>(std::max(1LL, commits_after - commits_before)));
      }
      drop(o);
    }
    if (a.one) {
      const te::EngineOptions o = server_options("p1pg", r);
      {
        Run run(o, 1, 2 * a.workers);
        auto [d, w] = run.Go(a.jobs);
        pg_one.push_back(a.jobs / (d + w));
        report(one_node.c_str(), r, d, w);
      }
      drop(o);
    }
    if (a.sqlite) {
      std::filesystem::path dir = std::filesystem::path(a.dir) / ("p1-" + std::to_string(r));
      std::filesystem::remove_all(dir);
      std::filesystem::create_directories(dir);
      te::EngineOptions o;
      o.database_path = (dir / "bench.db").string();
      Run run(o, 1, 2 * a.workers);
      auto [d, w] = run.Go(a.jobs);
      sqlite.push_back(a.jobs / (d + w));
      report("SQLite, 1 node:", r, d, w);
      std::filesystem::remove_all(dir);
    }
  }
  const double ref = Median(sqlite);
  std::printf(
      "%s %s end-to-end: bulk-dispatch %ld no-op jobs (batches of 1000, each node "
      "half at once), drain with 2 engine nodes x %d worker threads; %s.\n"
      "   median of %d runs: %.0f jobs/s (target >= %d)\n"
      "P1 on %s, same run (1 engine x %d threads): %.0f jobs/s\n"
      "P1 on SQLite, same run (1 engine x %d threads, WAL, synchronous=FULL): %.0f jobs/s\n"
      "   ratios to SQLite: %s 2 nodes %.2f, %s 1 node %.2f\n",
      maria ? "P11" : "P5", server.c_str(), a.jobs, a.workers,
      maria ? "innodb_flush_log_at_trx_commit=1" : "synchronous_commit=on", a.runs, Median(pg),
      maria ? 10000 : 40000, server.c_str(), 2 * a.workers, Median(pg_one), 2 * a.workers, ref,
      server.c_str(), ref > 0 ? Median(pg) / ref : 0.0, server.c_str(),
      ref > 0 ? Median(pg_one) / ref : 0.0);
  const std::string id = maria ? "P11" : "P5";
  te::bench::PrintFigure(id,
                         server + ", 2 nodes x " + std::to_string(a.workers) + " workers, " +
                             std::to_string(a.jobs) + " no-op jobs, dispatch + drain",
                         pg, "jobs/s", ">=", maria ? 10'000 : 40'000);
  te::bench::PrintFigure(
      id,
      server +
          ": transactions the server committed per second during the 2-node runs (all databases)",
      commits, "commits/s");
  const std::string cpu_id = id + "cpu";
  const std::string cpu_what = id + " (" + server + ", 2 nodes): ";
  te::bench::PrintFigure(cpu_id, cpu_what + "the server's CPU per job (all its processes)",
                         server_us, "us");
  te::bench::PrintFigure(cpu_id, cpu_what + "the engine nodes' CPU per job (this process)",
                         nodes_us, "us");
  te::bench::PrintFigure(cpu_id,
                         cpu_what + "the most the " + std::to_string(cores) +
                             " cores allow at that CPU per job (cores / (server + nodes))",
                         all_ceiling, "jobs/s");
  te::bench::PrintFigure(cpu_id,
                         cpu_what + "the most the " + std::to_string(cores) +
                             " cores allow the server alone (cores / server CPU per job)",
                         server_ceiling, "jobs/s");
  te::bench::PrintFigure(id, server + ", 1 node x " + std::to_string(2 * a.workers) + " workers",
                         pg_one, "jobs/s");
  te::bench::PrintFigure(
      id, "SQLite in the same run, 1 node x " + std::to_string(2 * a.workers) + " workers", sqlite,
      "jobs/s");
  return 0;
}
