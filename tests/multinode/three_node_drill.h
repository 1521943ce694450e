// The three-node drill of issue #6 (D2), shared by multinode_drill_test (the
// `http` effect, 20,000 jobs) and multinode_command_drill_test (the `command`
// effect through real processes, 800 jobs): three `taskengine serve`
// processes share one PostgreSQL or MariaDB database and run `count` `work` executions
// that each perform one countable effect through the effect ledger, plus a
// cron job `tick` firing every minute. Node 1 is killed with SIGKILL once a
// third of the work is done and restarted 1 s later. Afterwards:
//   L  every acknowledged dispatch exists once and is terminal;
//   D  no effect happened twice (effects file or sink arrivals vs ledger);
//   S  sampled throughout: nothing `running` past its lease plus one sweep
//      interval (plus 1 s of scheduling slack on this shared 2-core machine);
//   C  at most one `tick` execution per fire minute, it fired, and every
//      minute from the first fire to the last has its own execution.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "multinode_support.h"

namespace taskengine::testing {

enum class WorkEffect { kCommand, kHttp };

// The job count from environment variable `name` (a positive integer), else `fallback`.
inline int JobCountFromEnv(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v != nullptr && std::atoi(v) > 0) return std::atoi(v);
  return fallback;
}

inline void RunThreeNodeDrill(WorkEffect effect, int count, DbKind db = DbKind::kPostgres) {
  if (std::string why = DbUnavailableReason(db); !why.empty()) GTEST_SKIP() << why;
  const std::string what =
      std::string(effect == WorkEffect::kHttp ? "http" : "command") + ", " + DbName(db);
  const std::string tag = std::string(effect == WorkEffect::kHttp ? "http" : "command") +
                          (db == DbKind::kPostgres ? "-pg" : "-mariadb");
  const auto t_setup = std::chrono::steady_clock::now();
  DbServer pg(db);
  const std::string url = pg.Start();
  ASSERT_FALSE(url.empty());

  std::optional<CountingHttpSink> sink;
  DrillFiles files;
  NodeConfig nc;
  nc.url = url;
  nc.cron = true;
  if (effect == WorkEffect::kHttp) {
    sink.emplace();
    ASSERT_TRUE(sink->ok()) << "the counting HTTP sink could not listen on 127.0.0.1";
    nc.work_http_url = sink->url();
  }
  TempDir work;
  const std::string config = work.File("taskengine.toml");
  std::ofstream(config) << NodeToml(nc, files);

  // `taskengine migrate` on the server, once, before the nodes start.
  ProcessResult migrate =
      RunProcess({TASKENGINE_BIN, "--config", config, "migrate"}, "", std::chrono::seconds(60),
                 ChildEnvironment(), work.path().string());
  ASSERT_EQ(migrate.exit_code, 0) << migrate.Describe();
  const std::string backend =
      db == DbKind::kPostgres ? "postgresql postgres://" : "mariadb mysql://";
  EXPECT_THAT(migrate.out, ::testing::HasSubstr(backend));

  std::vector<std::unique_ptr<Node>> nodes;
  for (int i = 0; i < 3; ++i) {
    nodes.push_back(std::make_unique<Node>(config, work.File("node" + std::to_string(i) + ".log"),
                                           work.path().string()));
    nodes.back()->Start();
  }
  for (auto& n : nodes) ASSERT_TRUE(n->WaitServing(std::chrono::seconds(30))) << n->log();
  EXPECT_THAT(nodes[0]->log(), ::testing::HasSubstr("database " + backend));
  const auto t0 = std::chrono::steady_clock::now();

  // S, sampled every 250 ms until the end.
  std::atomic<bool> stop_sampler{false};
  std::atomic<long long> worst{0};
  std::atomic<int> samples{0};
  const long long slack = nc.sweep_ms + 1000;
  std::thread sampler([&] {
    while (!stop_sampler) {
      ProcessResult r = RunProcess(SqlArgv(url,
                                           "SELECT count(*) FROM taskengine.executions WHERE "
                                           "status = 1 AND lease_expires_at < " +
                                               DbNowMs(url) + " - " + std::to_string(slack)),
                                   "", std::chrono::seconds(30));
      if (r.exit_code == 0) {
        ++samples;
        long long n = std::atoll(r.out.c_str());
        if (n > worst) worst = n;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  });

  std::vector<std::int64_t> ids = DispatchWork(url, count);
  if (static_cast<int>(ids.size()) != count) {
    stop_sampler = true;
    sampler.join();
    FAIL() << "dispatched " << ids.size() << " of " << count;
  }
  std::cout << "[ measure ] " << what << ": dispatched " << count << " in " << MillisSince(t0)
            << " ms" << std::endl;

  // Kill -9 node 1 once about a third of the work is done, restart it 1 s later.
  const std::string done_sql =
      "SELECT count(*) FROM taskengine.executions WHERE job = 'work' AND "
      "status NOT IN (0, 1)";
  EXPECT_TRUE(WaitUntil(
      std::chrono::seconds(300), [&] { return SqlInt(url, done_sql) >= count / 3; },
      std::chrono::milliseconds(250)));
  nodes[1]->Kill9();
  std::cout << "[ measure ] " << what << ": killed node 1 at " << SqlInt(url, done_sql) << " done, "
            << MillisSince(t0) << " ms" << std::endl;
  std::this_thread::sleep_for(std::chrono::seconds(1));
  nodes[1]->Start();
  ASSERT_TRUE(nodes[1]->WaitServing(std::chrono::seconds(30))) << nodes[1]->log();

  const bool drained = WaitWorkTerminal(url, std::chrono::seconds(600));
  const long long run_ms = MillisSince(t0);
  std::cout << "[ measure ] " << what << ": " << count
            << " jobs on 3 nodes (4 workers each), one kill -9: " << run_ms << " ms, "
            << (count * 1000LL / std::max(1LL, run_ms)) << " jobs/s" << std::endl;
  EXPECT_TRUE(drained) << StatusCounts(url, "work");

  // C: the cron job fired (a minute boundary passes within 70 s of start).
  EXPECT_TRUE(WaitUntil(
      std::chrono::seconds(75),
      [&] {
        return SqlInt(url, "SELECT count(*) FROM taskengine.executions WHERE job = 'tick'") >= 1;
      },
      std::chrono::milliseconds(500)))
      << "the per-minute cron job never fired";
  stop_sampler = true;
  sampler.join();
  for (auto& n : nodes) EXPECT_TRUE(n->Alive()) << "a node died: " << n->log();
  for (auto& n : nodes) n->Stop();

  EXPECT_GT(samples.load(), 0) << "S was never sampled";
  EXPECT_EQ(worst.load(), 0) << "S: executions running past lease + " << slack << " ms";
  std::cout << "[ measure ] " << what << ": S sampled " << samples.load()
            << " times, worst running past lease + " << slack << " ms: " << worst.load()
            << std::endl;
  if (effect == WorkEffect::kHttp) {
    ExpectLAndDHttp(url, *sink, ids);
  } else {
    ExpectLAndD(url, files, ids);
  }
  EXPECT_EQ(SqlInt(url,
                   "SELECT count(*) FROM (SELECT idempotency_key FROM taskengine.executions "
                   "WHERE job = 'tick' GROUP BY idempotency_key HAVING count(*) > 1) d"),
            0)
      << "C: a fire minute has two executions: "
      << Sql(url, "SELECT idempotency_key FROM taskengine.executions WHERE job = 'tick'");
  EXPECT_EQ(SqlInt(url,
                   "SELECT count(*) FROM taskengine.executions WHERE job = 'tick' AND "
                   "idempotency_key IS NULL"),
            0);
  // ... and every minute from the first fire to the last has its own
  // execution: a killed leader's successor takes over within the minute
  // (the lock's ttl plus a third), so no fire is folded into a later one.
  EXPECT_EQ(SqlInt(url,
                   "SELECT (max(scheduled_at) - min(scheduled_at)) / 60000 + 1 - count(*) "
                   "FROM taskengine.executions WHERE job = 'tick'"),
            0)
      << "C: a fire minute has no execution of its own: "
      << Sql(url, "SELECT " + StringAgg(url, "idempotency_key", ", ") +
                      " FROM taskengine.executions WHERE job = 'tick'");
  std::cout << "[ measure ] cron fires: "
            << Sql(url, "SELECT " + StringAgg(url, "idempotency_key", ", ") +
                            " FROM taskengine.executions WHERE job = 'tick'")
            << std::endl;
  std::cout << "[ measure ] " << what << ": whole drill (cluster start to checks) "
            << MillisSince(t_setup) << " ms" << std::endl;
  // Node log summary; TASKENGINE_MULTINODE_KEEP_LOGS=<dir> keeps copies.
  const char* keep = std::getenv("TASKENGINE_MULTINODE_KEEP_LOGS");
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const std::string log = nodes[i]->log();
    // Text log lines are "<time> <level> <message>": count them by level.
    std::map<std::string, int> levels;
    std::vector<std::string> notable;  // lines above info, but the usual "no users" warning
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);) {
      std::istringstream fields(line);
      std::string time, level;
      fields >> time >> level;
      levels[level]++;
      if (level != "info" && line.find("no users and no API tokens") == std::string::npos &&
          notable.size() < 10) {
        notable.push_back(line.substr(0, 300));
      }
    }
    std::cout << "[ measure ] " << what << ": node" << i << ".log";
    for (const auto& [level, n] : levels) std::cout << " " << level << "=" << n;
    std::cout << std::endl;
    for (const std::string& line : notable)
      std::cout << "    node" << i << ": " << line << std::endl;
    if (keep != nullptr && *keep != '\0') {
      std::error_code ec;
      std::filesystem::create_directories(keep, ec);
      std::ofstream(std::string(keep) + "/" + tag + "-node" + std::to_string(i) + ".log") << log;
    }
  }
  if (::testing::Test::HasFailure()) {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      std::string log = nodes[i]->log();
      if (log.size() > 6000) log = "..." + log.substr(log.size() - 6000);
      std::cout << "---- node" << i << ".log (tail) ----\n" << log << std::endl;
    }
  }
}

}  // namespace taskengine::testing
