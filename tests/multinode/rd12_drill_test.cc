// RD12 (quality.md §2; issue #17): Redis stopped with `redis-cli shutdown
// nosave` during a bulk dispatch of 10,000 jobs over HTTP to a MariaDB
// deployment of two `serve` nodes that share work through the Redis
// transport. Node A only dispatches (no workers); node B runs every job, so
// B's pickup depends on the transport (MariaDB has no notifications) and
// shows which path carried it:
//   - every dispatch answers 2xx, Redis or not (A3: the database is the
//     queue of record, the transport only wakes);
//   - every execution ends terminal, each effect once (L, D);
//   - while Redis is down, pickup falls back to B's poll; with Redis back,
//     fast pickup resumes (both measured from the database's own clock:
//     started_at - queued_at of a probe execution).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <regex>
#include <thread>

#include "multinode_support.h"
#include "taskengine_client/client.h"
#include "testing_support/script_server.h"

namespace taskengine::testing {
namespace {

constexpr int kPollMs = 2'000;  // B's poll: the fallback bound

int JobCount() {
  const char* v = std::getenv("TASKENGINE_RD12_JOBS");
  if (v != nullptr && std::atoi(v) > 0) return std::atoi(v);
  return 10'000;
}

std::string ListenUrl(const Node& node) {
  static const std::regex kListening("listening on (http://[0-9.]+:[0-9]+)");
  const std::string log = node.log();
  std::smatch m;
  return std::regex_search(log, m, kListening) ? m[1].str() : "";
}

// Dispatches one probe on `client` (adding its id to `ids`) and returns its
// pickup latency by the database's clock (started_at - queued_at, ms), or -1.
long long ProbePickup(taskengine_client::Client& client, const std::string& db_url,
                      std::vector<std::int64_t>& ids) {
  taskengine_client::DispatchOptions o;
  // As ExpectLAndDHttp checks it: {"n": <its index in ids>}.
  o.payload = {{"n", ids.size()}};
  auto r = client.Dispatch("work", o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return -1;
  ids.push_back(std::atoll(r->id.c_str()));
  const std::string sql =
      "SELECT started_at - queued_at FROM taskengine.executions WHERE id = " + r->id +
      " AND started_at > 0";
  long long latency = -1;
  WaitUntil(
      std::chrono::seconds(30),
      [&] {
        const std::string out = Sql(db_url, sql);
        if (out.empty()) return false;
        latency = std::atoll(out.c_str());
        return true;
      },
      std::chrono::milliseconds(20));
  return latency;
}

long long MedianOf(std::vector<long long> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}

TEST(Rd12DrillTest, RedisShutdownDuringBulkDispatchOnlyDelaysPickup) {
  if (std::string why = DbUnavailableReason(DbKind::kMariaDb); !why.empty()) GTEST_SKIP() << why;
  std::error_code ec;
  if (!std::filesystem::exists("/usr/bin/redis-server", ec)) {
    GTEST_SKIP() << "redis-server is not installed (scripts/deps.sh test installs it)";
  }
  DbServer db(DbKind::kMariaDb);
  const std::string db_url = db.Start();
  ASSERT_FALSE(db_url.empty());
  ScriptServer redis("scripts/redis_server.sh");
  ASSERT_TRUE(redis.started()) << redis.url();
  const std::string redis_port = redis.url().substr(redis.url().rfind(':') + 1);

  CountingHttpSink sink(/*keep_alive=*/true);
  DrillFiles files;
  NodeConfig nc;
  nc.url = db_url;
  nc.poll_ms = kPollMs;
  nc.work_http_url = sink.url();
  TempDir work;
  const std::string redis_section = "\n[redis]\nurl = \"" + redis.url() + "\"\nprefix = \"rd12\"\n";
  nc.workers = 0;
  const std::string config_a = work.File("a.toml");
  std::ofstream(config_a) << NodeToml(nc, files) << redis_section;
  nc.workers = 8;
  const std::string config_b = work.File("b.toml");
  std::ofstream(config_b) << NodeToml(nc, files) << redis_section;
  ProcessResult migrate =
      RunProcess({TASKENGINE_BIN, "--config", config_a, "migrate"}, "", std::chrono::seconds(60),
                 ChildEnvironment(), work.path().string());
  ASSERT_EQ(migrate.exit_code, 0) << migrate.Describe();
  ProcessResult token =
      RunProcess({TASKENGINE_BIN, "--config", config_a, "token:create", "--name", "ops", "--scopes",
                  "read,dispatch", "--json"},
                 "", std::chrono::seconds(60), ChildEnvironment(), work.path().string());
  ASSERT_EQ(token.exit_code, 0) << token.Describe();
  const std::string secret = nlohmann::json::parse(token.out).value("secret", "");
  ASSERT_FALSE(secret.empty()) << token.out;

  Node a(config_a, work.File("a.log"), work.path().string());
  Node b(config_b, work.File("b.log"), work.path().string());
  a.Start();
  b.Start();
  ASSERT_TRUE(a.WaitServing(std::chrono::seconds(30))) << a.log();
  ASSERT_TRUE(b.WaitServing(std::chrono::seconds(30))) << b.log();
  ASSERT_NE(a.log().find("redis transport redis://"), std::string::npos) << a.log();
  taskengine_client::Client client({ListenUrl(a), secret});
  // Both nodes registered for wakeups.
  ASSERT_TRUE(WaitUntil(std::chrono::seconds(20), [&] {
    ProcessResult r = RunProcess({"/usr/bin/redis-cli", "-p", redis_port, "SCARD", "rd12:nodes"},
                                 "", std::chrono::seconds(10));
    return r.out.find('2') != std::string::npos;
  }));

  // Every acknowledged execution: probes and the bulk.
  std::vector<std::int64_t> ids;
  // With Redis: B picks up within milliseconds (its poll is 2 s away).
  std::vector<long long> fast_before;
  for (int i = 0; i < 5; ++i) fast_before.push_back(ProbePickup(client, db_url, ids));

  // The bulk dispatch, 200 items per request; Redis dies a fifth of the way in.
  const int count = JobCount();
  const std::size_t probes_before = ids.size();
  int non_2xx = 0;
  bool redis_stopped = false;
  for (int done = 0; done < count;) {
    if (!redis_stopped && done >= count / 5) {
      (void)RunProcess({"/usr/bin/redis-cli", "-p", redis_port, "shutdown", "nosave"}, "",
                       std::chrono::seconds(10));
      std::cout << "[ measure ] redis-cli shutdown nosave after " << done << " dispatches"
                << std::endl;
      redis_stopped = true;
    }
    std::vector<taskengine_client::BulkItem> items;
    for (int i = 0; i < 200 && done + i < count; ++i) {
      taskengine_client::BulkItem item;
      item.job = "work";
      item.options.payload = {{"n", ids.size() + static_cast<std::size_t>(i)}};
      items.push_back(std::move(item));
    }
    auto r = client.DispatchBulk(items);
    if (!r.ok()) {
      ++non_2xx;
      ADD_FAILURE() << "bulk dispatch failed: " << r.status().message();
      break;
    }
    for (const auto& item : *r) {
      EXPECT_TRUE(item.status.ok()) << item.status.message();
      ids.push_back(std::atoll(item.result.id.c_str()));
    }
    done += static_cast<int>(items.size());
  }
  ASSERT_TRUE(redis_stopped);
  EXPECT_EQ(non_2xx, 0);
  ASSERT_EQ(ids.size() - probes_before, static_cast<std::size_t>(count));

  const bool drained = WaitWorkTerminal(db_url, std::chrono::seconds(300));
  EXPECT_TRUE(drained) << StatusCounts(db_url, "work");

  // Redis still down: B finds each probe at its poll, within the bound.
  std::vector<long long> slow;
  for (int i = 0; i < 3; ++i) slow.push_back(ProbePickup(client, db_url, ids));

  // Redis back: fast pickup resumes once the nodes have registered again.
  ASSERT_TRUE(redis.Start());
  ASSERT_TRUE(WaitUntil(std::chrono::seconds(20), [&] {
    ProcessResult r = RunProcess({"/usr/bin/redis-cli", "-p", redis_port, "SCARD", "rd12:nodes"},
                                 "", std::chrono::seconds(10));
    return r.out.find('2') != std::string::npos;
  }));
  std::this_thread::sleep_for(std::chrono::milliseconds(1'500));  // the publisher's node list
  std::vector<long long> fast_after;
  for (int i = 0; i < 5; ++i) fast_after.push_back(ProbePickup(client, db_url, ids));

  auto show = [](const std::vector<long long>& v) {
    std::string s;
    for (long long x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
    return s;
  };
  std::cout << "[ measure ] pickup ms (started_at - queued_at): with Redis " << show(fast_before)
            << "; Redis down " << show(slow) << "; Redis back " << show(fast_after) << std::endl;
  // Fast: far below the poll. Down: at most the poll plus a claim.
  EXPECT_LT(MedianOf(fast_before), kPollMs / 4) << show(fast_before);
  EXPECT_LT(MedianOf(fast_after), kPollMs / 4) << show(fast_after);
  for (long long x : slow) {
    EXPECT_GE(x, 0);
    EXPECT_LE(x, kPollMs + 1'500) << show(slow);
  }
  EXPECT_TRUE(a.Alive()) << a.log();
  EXPECT_TRUE(b.Alive()) << b.log();
  EXPECT_NE(a.log().find("cannot publish wakeups"), std::string::npos) << a.log();
  a.Stop();
  b.Stop();
  ExpectLAndDHttp(db_url, sink, ids);
}

}  // namespace
}  // namespace taskengine::testing
