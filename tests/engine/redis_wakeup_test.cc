// The Redis transport between two engines on one MariaDB database (D3, A3,
// A4): a dispatch on one node wakes the other at once although its poll is a
// minute away; Redis failing right after the commit (the recovery-key trap of
// seed 000) cannot strand the work; Redis back brings fast pickup back.
//
// Needs TASKENGINE_TEST_MYSQL_URL (a MariaDB server; each test makes its own
// database on it) and redis-server (each test starts a throwaway one with
// scripts/redis_server.sh). Without the URL it FAILS, unless
// TASKENGINE_TEST_MYSQL_OPTIONAL=1.
#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "engine/engine_internal.h"
#include "storage/mariadb/maria_conn.h"
#include "storage/testing/fault_injecting_store.h"
#include "taskengine/engine.h"
#include "testing_support/script_server.h"
#include "testing_support/test_util.h"

namespace taskengine {
namespace {

using namespace std::chrono_literals;
using taskengine::testing::ScriptServer;

std::string TestUrl() {
  const char* url = std::getenv("TASKENGINE_TEST_MYSQL_URL");
  return url != nullptr ? url : "";
}

JobDefinition Job(const std::string& name) {
  JobDefinition j;
  j.name = JobName(name);
  j.handler = name;
  j.queue = "default";
  return j;
}

class RedisWakeupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (TestUrl().empty()) {
      const char* optional = std::getenv("TASKENGINE_TEST_MYSQL_OPTIONAL");
      if (optional != nullptr && std::string(optional) == "1") {
        GTEST_SKIP() << "TASKENGINE_TEST_MYSQL_URL is not set and "
                        "TASKENGINE_TEST_MYSQL_OPTIONAL=1";
      }
      FAIL() << "TASKENGINE_TEST_MYSQL_URL is not set: start a server with "
                "`scripts/mariadb_cluster.sh start <dir>` and export the URL it prints";
    }
    ASSERT_TRUE(redis_.started()) << redis_.url();
    database_ =
        std::string("te_redis_") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : database_) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    maria::MariaConn admin;
    ASSERT_OK(admin.Connect(TestUrl()));
    ASSERT_OK(admin.Exec("DROP DATABASE IF EXISTS " + database_ + "; CREATE DATABASE " + database_ +
                         " CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin"));
  }

  void TearDown() override {
    dispatcher_.reset();
    worker_.reset();
    if (database_.empty()) return;
    maria::MariaConn admin;
    if (admin.Connect(TestUrl()).ok()) (void)admin.Exec("DROP DATABASE IF EXISTS " + database_);
  }

  std::string DatabaseUrl() const {
    const std::string url = TestUrl();
    return url.substr(0, url.rfind('/') + 1) + database_;
  }

  EngineOptions Options(int workers, Millis poll_ms) const {
    EngineOptions o;
    o.database_url = DatabaseUrl();
    o.redis_url = redis_.url();
    o.redis_prefix = database_;
    o.worker_threads = workers;
    o.poll_interval_ms = poll_ms;
    o.sweep_interval_ms = 60'000;
    o.shutdown_grace_ms = 2'000;
    return o;
  }

  // Node 1 only dispatches (through a store whose commits a test can follow
  // with a fault); node 2 runs the "work" job with a poll of `worker_poll_ms`.
  // Each node on its clock, when given (default: the database's).
  void OpenNodes(Millis worker_poll_ms, Clock* dispatcher_clock = nullptr,
                 Clock* worker_clock = nullptr) {
    EngineOptions d_options = Options(0, 60'000);
    d_options.clock = dispatcher_clock;
    auto d = OpenEngine(d_options, WrapStoreWithFaults(faults_));
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    dispatcher_ = std::move(*d);
    ASSERT_OK(dispatcher_->DefineJob(Job("work")));
    EngineOptions w_options = Options(1, worker_poll_ms);
    w_options.clock = worker_clock;
    auto w = Engine::Open(w_options);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    worker_ = std::move(*w);
    ASSERT_OK(worker_->RegisterHandler("work", [ran = ran_](JobContext&) {
      ++*ran;
      return HandlerResult::Success();
    }));
    ASSERT_OK(worker_->Start());
    // Both registered for wakeups (the dispatcher's own list counts too).
    ASSERT_TRUE(WaitFor([&] {
      return dispatcher_->stats().transport.connected && worker_->stats().transport.connected;
    }));
  }

  DispatchRequest Request(const std::string& key = "") const {
    DispatchRequest r;
    r.job = JobName("work");
    r.payload_json = R"({"n":1})";
    r.idempotency_key = key;
    return r;
  }

  bool Succeeded(Engine& engine, ExecutionId id, std::chrono::milliseconds limit) {
    return WaitFor(
        [&] {
          auto e = engine.GetExecution(id);
          return e.ok() && e->status == ExecutionStatus::kSucceeded;
        },
        limit);
  }

  ScriptServer redis_{"scripts/redis_server.sh"};
  std::string database_;
  std::shared_ptr<StoreFaults> faults_ = std::make_shared<StoreFaults>();
  std::shared_ptr<std::atomic<int>> ran_ = std::make_shared<std::atomic<int>>(0);
  std::unique_ptr<Engine> dispatcher_;
  std::unique_ptr<Engine> worker_;
};

TEST_F(RedisWakeupTest, ADispatchOnOneNodeRunsOnAnotherLongBeforeItsPoll) {
  // The worker polls once a minute and MariaDB has no notifications: only
  // the Redis wakeup can make it claim within the limit below.
  OpenNodes(60'000);
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK_AND_ASSIGN(DispatchResult r, dispatcher_->Dispatch(Request()));
    ASSERT_TRUE(Succeeded(*worker_, r.id, 20s)) << "dispatch " << i;
  }
  EXPECT_EQ(ran_->load(), 5);
  EXPECT_GE(worker_->stats().transport.received, 1);
  EXPECT_GE(dispatcher_->stats().transport.published, 1);
}

// The clock of a node whose time runs `ahead` of the system clock.
class AheadClock final : public Clock {
 public:
  explicit AheadClock(Millis ahead) : ahead_(ahead) {}
  Millis NowMillis() const override { return SystemClock::Get()->NowMillis() + ahead_; }
  SteadyTime Steady() const override { return SystemClock::Get()->Steady(); }

 private:
  const Millis ahead_;
};

// Nodes never agree on the time exactly (each follows the database's clock
// through its own estimate). Here the dispatching node's clock is 300 ms
// ahead: the execution it admits "due now" is due 300 ms later by the
// worker's clock, and the Redis wake reaches the worker before that. The
// worker's claim then finds nothing due; it sleeps until the execution is due
// (Store::NextDueIn), not until its poll a minute later.
TEST_F(RedisWakeupTest, AWakeForWorkNotYetDueHereRunsItWhenItIsDueNotAtThePoll) {
  AheadClock ahead(300);
  OpenNodes(60'000, &ahead, SystemClock::Get());
  for (int i = 0; i < 3; ++i) {
    const auto sent = std::chrono::steady_clock::now();
    ASSERT_OK_AND_ASSIGN(DispatchResult r, dispatcher_->Dispatch(Request()));
    ASSERT_TRUE(Succeeded(*worker_, r.id, 20s)) << "dispatch " << i << " waits for the poll";
    EXPECT_GE(std::chrono::steady_clock::now() - sent, 250ms) << "ran before it was due here";
  }
  EXPECT_EQ(ran_->load(), 3);
}

// A4 with Redis as the transport: Redis dies right after the commit of the
// admission, before the wakeup is pushed. The dispatch still answers, the
// same key returns the same execution, and the work runs (at the poll).
TEST_F(RedisWakeupTest, RedisFailingRightAfterTheCommitCannotStrandTheJob) {
  OpenNodes(500);
  std::atomic<int> stopped{0};
  faults_->OnPublishWork([&] {
    if (stopped.exchange(1) == 0) EXPECT_TRUE(redis_.Stop());
  });
  ASSERT_OK_AND_ASSIGN(DispatchResult first, dispatcher_->Dispatch(Request("recovery:77:tick-1")));
  EXPECT_TRUE(first.created);
  EXPECT_EQ(stopped.load(), 1);
  ASSERT_OK_AND_ASSIGN(DispatchResult again, dispatcher_->Dispatch(Request("recovery:77:tick-1")));
  EXPECT_FALSE(again.created);
  EXPECT_EQ(again.id, first.id);
  ASSERT_TRUE(Succeeded(*worker_, first.id, 30s));
  EXPECT_EQ(ran_->load(), 1);
  ASSERT_TRUE(WaitFor([&] { return dispatcher_->stats().transport.dropped >= 1; }));
  // The same key once more: still the one execution, run once.
  ASSERT_OK_AND_ASSIGN(DispatchResult third, dispatcher_->Dispatch(Request("recovery:77:tick-1")));
  EXPECT_EQ(third.id, first.id);
  EXPECT_EQ(third.status, ExecutionStatus::kSucceeded);
  EXPECT_EQ(ran_->load(), 1);
}

TEST_F(RedisWakeupTest, WhileRedisIsDownWorkRunsAtThePollAndFastPickupComesBack) {
  OpenNodes(60'000);
  ASSERT_TRUE(redis_.Stop());
  ASSERT_TRUE(WaitFor([&] { return !worker_->stats().transport.connected; }));
  // Dispatch never fails because of Redis.
  ASSERT_OK_AND_ASSIGN(DispatchResult down, dispatcher_->Dispatch(Request()));
  ASSERT_TRUE(redis_.Start());
  // Back: the nodes register again, and the next dispatch wakes the worker
  // (its claim takes the earlier execution too).
  ASSERT_TRUE(WaitFor([&] { return worker_->stats().transport.connected; }));
  // The dispatcher's publisher tries again once its backoff has passed; a
  // wakeup published before that is dropped (the work waits for the poll).
  // Dispatch until one is sent.
  DispatchResult up;
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::int64_t sent = dispatcher_->stats().transport.published;
        Result<DispatchResult> r = dispatcher_->Dispatch(Request());
        if (!r.ok()) return false;
        up = *r;
        return WaitFor([&] { return dispatcher_->stats().transport.published > sent; }, 300ms);
      },
      20s));
  ASSERT_TRUE(Succeeded(*worker_, up.id, 20s));
  ASSERT_TRUE(Succeeded(*worker_, down.id, 20s));
  EXPECT_GE(worker_->stats().transport.reconnects, 1);
}

TEST(RedisWakeupOptionsTest, ABadRedisUrlIsRefusedBeforeTheDatabaseIsTouched) {
  TempDir dir;
  EngineOptions o;
  o.database_path = dir.File("te.db");
  o.redis_url = "http://cache:6379";
  auto e = Engine::Open(o);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("redis://"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(o.database_path));
  o.redis_url = "redis://127.0.0.1:1";
  o.redis_prefix = "bad prefix";
  e = Engine::Open(o);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace taskengine
