// Visible workers (W5, issue 14 bug 2) through the real binary: `serve` with
// the repository's own taskengine.toml (what ./run.sh starts) registers its
// in-process pool; GET /api/v1/workers and /api/v1/stats show it over HTTP;
// `worker:list` (another process) prints it; SIGTERM marks it stopped, and a
// pool that stopped reporting without saying so (kill -9) reads as stale.
#include <signal.h>
#include <sys/wait.h>

#include <regex>
#include <string>

#include "cli_harness.h"
#include "test_client.h"

namespace taskengine::testing {
namespace {

using api::testing::ClientResponse;
using api::testing::TestClient;
using nlohmann::json;
using std::chrono::milliseconds;

// The item of `items` with id `id`; null when absent.
json Find(const json& items, const std::string& id) {
  for (const json& w : items) {
    if (w.value("id", "") == id) return w;
  }
  return nullptr;
}

// GET `target` on a new connection (serve closes idle keep-alive ones).
ClientResponse Get(int port, const std::string& target, const std::string& token) {
  TestClient client(port);
  return client.Get(target, token);
}

// GET /api/v1/workers items; an empty list (after a test failure) when the
// answer is not 200.
json WorkersOf(int port, const std::string& token) {
  ClientResponse r = Get(port, "/api/v1/workers", token);
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return json::array();
  const json doc = r.json();
  return doc.is_object() ? doc["items"] : json::array();
}

class WorkerListCliTest : public ::testing::Test {
 protected:
  WorkerListCliTest() : te_(ReadFile(TE_SOURCE_DIR "/taskengine.toml")) {}

  void SetUp() override {
    ASSERT_EQ(te_.Run({"migrate"}).exit_code, 0);
    json token = te_.RunJson({"token:create", "--name=ops", "--scopes=read"});
    ASSERT_TRUE(token.is_object());
    token_ = token.value("secret", "");
    ASSERT_FALSE(token_.empty());
  }

  // worker:list --json, items by id.
  json ListedByCli() {
    json j = te_.RunJson({"worker:list"});
    return j.is_object() ? j["items"] : json::array();
  }

  TaskengineInstall te_;
  std::string token_;
};

TEST_F(WorkerListCliTest, ServeRegistersItsPoolWhichStopsOnSigtermAndGoesStaleWhenKilled) {
  ChildProcess serve;
  const int port = te_.StartServeOnEphemeralPort(&serve);
  ASSERT_NE(port, 0);
  const std::string pool_id_suffix = ":" + std::to_string(serve.pid()) + ":pool";

  // The pool of this serve, as GET /api/v1/workers shows it.
  json pool;
  ASSERT_TRUE(WaitUntil(milliseconds(10'000), [&] {
    ClientResponse r = Get(port, "/api/v1/workers", token_);
    if (r.status != 200) return false;
    const json listed = r.json();
    for (const json& w : listed["items"]) {
      const std::string id = w.value("id", "");
      if (id.size() > pool_id_suffix.size() &&
          id.compare(id.size() - pool_id_suffix.size(), pool_id_suffix.size(), pool_id_suffix) ==
              0) {
        pool = w;
      }
    }
    return pool.is_object();
  })) << Get(port, "/api/v1/workers", token_).body;
  const std::string pool_id = pool["id"];
  EXPECT_EQ(pool["kind"], "pool") << pool.dump();
  EXPECT_EQ(pool["state"], "idle") << pool.dump();
  EXPECT_EQ(pool["pid"], serve.pid()) << pool.dump();
  EXPECT_TRUE(pool["host"].is_string() && !pool["host"].get<std::string>().empty());
  EXPECT_EQ(pool["concurrency"], 4) << "worker_threads of taskengine.toml: " << pool.dump();
  EXPECT_EQ(pool["busy"], 0);
  EXPECT_EQ(pool["idle"], 4);
  EXPECT_TRUE(pool["started_at"].is_string());
  EXPECT_TRUE(pool["last_seen_at"].is_string());

  ClientResponse stats = Get(port, "/api/v1/stats", token_);
  ASSERT_EQ(stats.status, 200) << stats.body;
  const json s = stats.json();
  EXPECT_EQ(s["active_workers"], 1) << "one process: this serve's pool";
  EXPECT_EQ(s["active_worker_threads"], 4) << stats.body;

  // It counts what it runs (reported within a second).
  json dispatched = te_.RunJson({"job:dispatch", "hello", "--payload", R"({"name":"w"})"});
  ASSERT_TRUE(dispatched.is_object());
  const std::string execution = std::to_string(dispatched.value("id", std::int64_t{0}));
  ASSERT_TRUE(WaitUntil(milliseconds(20'000), [&] {
    json w = Find(WorkersOf(port, token_), pool_id);
    return w.is_object() && w.value("processed", 0) == 1;
  })) << Get(port, "/api/v1/workers", token_).body;
  json e = te_.RunJson({"execution:show", execution});
  EXPECT_EQ(e["status"], "succeeded") << e.dump();

  // worker:list, a second process reading the database, prints it.
  ProcessResult table = te_.Run({"worker:list"});
  ASSERT_EQ(table.exit_code, 0) << table.Describe();
  EXPECT_NE(table.out.find("LAST HEARTBEAT"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(pool_id), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("pool"), std::string::npos) << table.out;
  json listed = Find(ListedByCli(), pool_id);
  ASSERT_TRUE(listed.is_object());
  EXPECT_EQ(listed["kind"], "pool");
  EXPECT_EQ(listed["state"], "idle");
  EXPECT_EQ(listed["processed"], 1);

  // SIGTERM: the pool says it stopped.
  serve.Signal(SIGTERM);
  auto status = serve.Wait(milliseconds(20'000));
  ASSERT_TRUE(status.has_value()) << ReadFile(te_.serve_log());
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0);
  listed = Find(ListedByCli(), pool_id);
  ASSERT_TRUE(listed.is_object());
  EXPECT_EQ(listed["state"], "stopped") << listed.dump();
  EXPECT_EQ(listed["busy"], 0);
  EXPECT_EQ(listed["processed"], 1);

  // After a restart the API lists the old pool stopped and the new one live.
  ChildProcess again;
  // serve.log is appended to: the new port is on the second "listening on" line.
  (void)te_.StartServeOnEphemeralPort(&again);
  int port2 = 0;
  ASSERT_TRUE(WaitUntil(milliseconds(20'000), [&] {
    const std::string log = ReadFile(te_.serve_log());
    const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
    int seen = 0;
    for (auto it = std::sregex_iterator(log.begin(), log.end(), listening);
         it != std::sregex_iterator(); ++it) {
      if (++seen == 2) port2 = std::stoi((*it)[1]);
    }
    return port2 != 0;
  })) << ReadFile(te_.serve_log());
  const std::string new_id_suffix = ":" + std::to_string(again.pid()) + ":pool";
  json items;
  ASSERT_TRUE(WaitUntil(milliseconds(10'000), [&] {
    items = WorkersOf(port2, token_);
    for (const json& w : items) {
      const std::string id = w.value("id", "");
      if (id.find(new_id_suffix) != std::string::npos) return true;
    }
    return false;
  })) << items.dump();
  EXPECT_EQ(Find(items, pool_id)["state"], "stopped") << items.dump();
  const json stats2 = Get(port2, "/api/v1/stats", token_).json();
  EXPECT_EQ(stats2.is_object() ? stats2["active_workers"] : json(), 1) << stats2.dump();

  // kill -9: no stopped report; once it missed its reports it reads stale.
  again.Kill();
  json stale;
  ASSERT_TRUE(WaitUntil(
      milliseconds(15'000),
      [&] {
        for (const json& w : ListedByCli()) {
          if (w.value("id", "").find(new_id_suffix) != std::string::npos) stale = w;
        }
        return stale.is_object() && stale["state"] == "stale";
      },
      milliseconds(500)))
      << stale.dump();
  EXPECT_EQ(stale["stale_after_ms"], 5000);
  EXPECT_EQ(stale["busy"], 0);
}

}  // namespace
}  // namespace taskengine::testing
