// The SDK's Worker against FakeWorkerServer (the worker protocol's wire
// format, in memory): the lease loop, concurrency, batched heartbeats with
// cancel, lost claims, graceful stop, max_jobs, reconnect across a server
// restart, and a refused token.
#include "taskengine_client/worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>

#include "fake_worker_server.h"

namespace taskengine_client {
namespace {

using std::chrono::milliseconds;
using testing::FakeWorkerServer;

// Waits while the lease is active, at most 20 s (so a broken worker fails the
// test instead of hanging it).
void WaitWhileActive(LeaseContext& ctx) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ctx.Checkpoint() == LeaseState::kActive && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool WaitFor(const std::function<bool()>& done, milliseconds timeout = milliseconds(10'000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return done();
}

WorkerOptions FastOptions(int concurrency = 2) {
  WorkerOptions o;
  o.concurrency = concurrency;
  o.poll_wait = milliseconds(200);
  o.idle_heartbeat = milliseconds(200);
  o.reconnect_min = milliseconds(20);
  o.reconnect_max = milliseconds(200);
  o.finish_retry_for = milliseconds(10'000);
  o.logger = [](const std::string&) {};
  return o;
}

// Runs a Worker on a thread; Stop and join in the destructor.
class RunningWorker {
 public:
  RunningWorker(Client* client, WorkerOptions options, WorkerHandler handler)
      : worker_(client, std::move(options), std::move(handler)), thread_([this] {
          status_ = worker_.Run();
          returned_ = true;
        }) {}
  ~RunningWorker() { StopAndJoin(); }
  void StopAndJoin() {
    worker_.Stop();
    if (thread_.joinable()) thread_.join();
  }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  Worker& worker() { return worker_; }
  bool returned() const { return returned_; }
  const Status& status() const { return status_; }

 private:
  Worker worker_;
  Status status_;
  std::atomic<bool> returned_{false};
  std::thread thread_;
};

TEST(WorkerTest, RunsLeasesToCompletionWithTheirPayloadAndResult) {
  FakeWorkerServer server;
  ASSERT_TRUE(server.Start().ok());
  Client client({server.url(), ""});
  std::vector<std::string> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(server.Enqueue({{"n", i}}));
  RunningWorker running(&client, FastOptions(4), [](LeaseContext& ctx) {
    return Outcome::Complete(Json{{"twice", ctx.payload()["n"].get<int>() * 2}});
  });
  ASSERT_TRUE(WaitFor([&] { return server.Count("succeeded") == 20; }));
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(server.Get(ids[i]).result, (Json{{"twice", i * 2}}));
  }
  running.StopAndJoin();
  EXPECT_TRUE(running.status().ok());
  EXPECT_EQ(running.worker().stats().completed, 20);
  EXPECT_FALSE(server.last_worker_id().empty());
}

TEST(WorkerTest, NeverHoldsMoreLeasesThanItsConcurrency) {
  FakeWorkerServer server;
  ASSERT_TRUE(server.Start().ok());
  Client client({server.url(), ""});
  for (int i = 0; i < 12; ++i) server.Enqueue();
  std::atomic<int> running_now{0}, peak{0};
  RunningWorker running(&client, FastOptions(3), [&](LeaseContext&) {
    int now = ++running_now;
    int seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(milliseconds(30));
    --running_now;
    return Outcome::Complete();
  });
  ASSERT_TRUE(WaitFor([&] { return server.Count("succeeded") == 12; }));
  EXPECT_EQ(peak.load(), 3);
  EXPECT_LE(server.max_lease_request(), 3);
  EXPECT_EQ(server.Count("running"), 0);
}

TEST(WorkerTest, FailuresCarryTheirClassAndExceptionsAreRetryable) {
  FakeWorkerServer server;
  ASSERT_TRUE(server.Start().ok());
  Client client({server.url(), ""});
  const std::string permanent = server.Enqueue({{"kind", "permanent"}});
  const std::string thrower = server.Enqueue({{"kind", "throw"}});
  RunningWorker running(&client, FastOptions(2), [](LeaseContext& ctx) -> Outcome {
    if (ctx.payload()["kind"] == "throw") throw std::runtime_error("boom");
    return Outcome::Permanent("bad input");
  });
  ASSERT_TRUE(WaitFor([&] { return server.Count("failed") == 2; }));
  EXPECT_EQ(server.Get(permanent).failure_class, "permanent");
  EXPECT_EQ(server.Get(permanent).error, "bad input");
  EXPECT_EQ(server.Get(thrower).failure_class, "retryable");
  EXPECT_NE(server.Get(thrower).error.find("boom"), std::string::npos);
}

TEST(WorkerTest, BatchedHeartbeatsKeepLeasesAndDeliverCancelRequested) {
  FakeWorkerServer server(0, /*lease_ms=*/300);  // heartbeat every 100 ms
  ASSERT_TRUE(server.Start().ok());
  Client client({server.url(), ""});
  const std::string id = server.Enqueue();
  std::atomic<bool> started{false};
  RunningWorker running(&client, FastOptions(1), [&](LeaseContext& ctx) {
    started = true;
    ctx.SetProgress(40);
    WaitWhileActive(ctx);
    return ctx.Checkpoint() == LeaseState::kCancelRequested ? Outcome::Canceled()
                                                            : Outcome::Retryable("lost");
  });
  ASSERT_TRUE(WaitFor([&] { return started.load(); }));
  ASSERT_TRUE(WaitFor([&] { return server.Get(id).heartbeats >= 3; }));
  EXPECT_EQ(server.Get(id).progress, 40);
  EXPECT_EQ(server.Get(id).state, "running");
  server.RequestCancel(id);
  ASSERT_TRUE(WaitFor([&] { return server.Get(id).state == "canceled"; }));
}

TEST(WorkerTest, ALostClaimPublishesNothing) {
  FakeWorkerServer server(0, /*lease_ms=*/300);
  ASSERT_TRUE(server.Start().ok());
  Client client({server.url(), ""});
  const std::string id = server.Enqueue();
  std::atomic<bool> started{false};
  std::atomic<int> seen_state{-1};
  RunningWorker running(&client, FastOptions(1), [&](LeaseContext& ctx) {
    started = true;
    WaitWhileActive(ctx);
    seen_state = static_cast<int>(ctx.Checkpoint());
    return Outcome::Complete();
  });
  ASSERT_TRUE(WaitFor([&] { return started.load(); }));
  server.Expire(id);
  ASSERT_TRUE(WaitFor([&] { return running.worker().stats().lost == 1; }));
  EXPECT_EQ(seen_state.load(), static_cast<int>(LeaseState::kLost));
  EXPECT_EQ(server.Get(id).state, "running");  // the complete was not sent
  EXPECT_EQ(running.worker().stats().completed, 0);
}

// A worker that stalled past its lease leases the same execution again while
// the stale lease's handler still runs: the two leases are kept apart by
// claim version. The stale one's answers do not touch the new one, its end
// does not forget the new one, and the new one is heartbeated and completes.
TEST(WorkerTest, TheSameExecutionLeasedAgainIsKeptApartFromItsStaleLease) {
  FakeWorkerServer server(0, /*lease_ms=*/300);  // heartbeat every 100 ms
  ASSERT_TRUE(server.Start().ok());
  Client client({server.url(), ""});
  const std::string id = server.Enqueue();
  std::atomic<int> runs{0};
  std::atomic<bool> first_may_end{false};
  std::atomic<int> second_state{-1};
  std::atomic<int> heartbeats_after_first{-1};
  std::unique_ptr<RunningWorker> running;
  running = std::make_unique<RunningWorker>(&client, FastOptions(2), [&](LeaseContext& ctx) {
    if (++runs == 1) {
      WaitFor([&] { return first_may_end.load(); });
      return Outcome::Complete();  // stale by now: published nowhere
    }
    // The new lease: outlive the stale one by several heartbeat periods.
    WaitFor([&] { return running->worker().stats().lost == 1; });
    const int before = server.Get(id).heartbeats;
    std::this_thread::sleep_for(milliseconds(500));
    heartbeats_after_first = server.Get(id).heartbeats - before;
    second_state = static_cast<int>(ctx.Checkpoint());
    return Outcome::Complete(Json{{"run", 2}});
  });
  ASSERT_TRUE(WaitFor([&] { return runs.load() == 1; }));
  server.Requeue(id);
  ASSERT_TRUE(WaitFor([&] { return runs.load() == 2; })) << "leased again into the free slot";
  first_may_end = true;
  ASSERT_TRUE(WaitFor([&] { return server.Get(id).state == "succeeded"; }))
      << "the new lease was lost with the stale one: " << server.Get(id).state;
  EXPECT_EQ(second_state.load(), static_cast<int>(LeaseState::kActive));
  EXPECT_GE(heartbeats_after_first.load(), 2) << "the new lease is still heartbeated";
  // The server answers the complete before the worker counts it.
  EXPECT_TRUE(WaitFor([&] { return running->worker().stats().completed == 1; }))
      << "completed: " << running->worker().stats().completed;
  EXPECT_EQ(running->worker().stats().lost, 1);
  running.reset();
}

TEST(WorkerTest, GracefulStopWaitsForRunningHandlers) {
  FakeWorkerServer server;
  ASSERT_TRUE(server.Start().ok());
  Client client({server.url(), ""});
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(server.Enqueue({{"n", i}}));
  std::atomic<int> started{0};
  std::atomic<bool> let_go{false};
  // Concurrency 4: all four run at once; two of them are held until after
  // Stop() was called.
  RunningWorker running(&client, FastOptions(4), [&](LeaseContext& ctx) {
    ++started;
    if (ctx.payload()["n"].get<int>() >= 2) {
      while (!let_go) std::this_thread::sleep_for(milliseconds(5));
    }
    std::this_thread::sleep_for(milliseconds(200));
    return Outcome::Complete();
  });
  ASSERT_TRUE(WaitFor([&] { return started.load() == 4; }));
  std::thread stopper([&] { running.StopAndJoin(); });
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(running.returned());  // waits for the running handlers
  let_go = true;
  stopper.join();
  EXPECT_TRUE(running.returned());
  EXPECT_EQ(server.Count("succeeded"), 4);
  EXPECT_EQ(running.worker().stats().completed, 4);
}

TEST(WorkerTest, LeasesNothingWhileEverySlotIsBusyNorAfterStop) {
  FakeWorkerServer server;
  ASSERT_TRUE(server.Start().ok());
  Client client({server.url(), ""});
  std::atomic<int> calls{0};
  std::atomic<bool> release_first{false};
  const std::string a = server.Enqueue({{"n", 0}});
  RunningWorker running(&client, FastOptions(1), [&](LeaseContext&) {
    ++calls;
    while (!release_first) std::this_thread::sleep_for(milliseconds(5));
    return Outcome::Complete();
  });
  ASSERT_TRUE(WaitFor([&] { return calls.load() == 1; }));
  // While the only slot is busy, nothing more is leased.
  const std::string b = server.Enqueue({{"n", 1}});
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(server.Get(b).state, "queued");
  std::thread stopper([&] { running.StopAndJoin(); });
  std::this_thread::sleep_for(milliseconds(50));
  release_first = true;
  stopper.join();
  EXPECT_EQ(server.Get(a).state, "succeeded");
  EXPECT_EQ(server.Get(b).state, "queued");
  EXPECT_EQ(calls.load(), 1);
}

TEST(WorkerTest, MaxJobsEndsRunAfterThatManyExecutions) {
  FakeWorkerServer server;
  ASSERT_TRUE(server.Start().ok());
  Client client({server.url(), ""});
  for (int i = 0; i < 10; ++i) server.Enqueue();
  auto options = FastOptions(3);
  options.max_jobs = 4;
  RunningWorker running(&client, options, [](LeaseContext&) { return Outcome::Complete(); });
  ASSERT_TRUE(WaitFor([&] { return running.returned(); }));
  EXPECT_TRUE(running.status().ok());
  EXPECT_EQ(server.Count("succeeded"), 4);
  EXPECT_EQ(server.Count("queued"), 6);
  EXPECT_EQ(running.worker().stats().leased, 4);
}

TEST(WorkerTest, SurvivesAServerRestartAndReconnects) {
  auto server = std::make_unique<FakeWorkerServer>();
  ASSERT_TRUE(server->Start().ok());
  const int port = server->port();
  Client client({server->url(), ""});
  std::atomic<int> done{0};
  RunningWorker running(&client, FastOptions(2), [&](LeaseContext&) {
    ++done;
    return Outcome::Complete();
  });
  server->Enqueue();
  ASSERT_TRUE(WaitFor([&] { return done.load() == 1; }));
  server.reset();  // the server goes away
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_FALSE(running.returned());
  EXPECT_GT(running.worker().stats().reconnects, 0);
  server = std::make_unique<FakeWorkerServer>(port);
  ASSERT_TRUE(server->Start().ok());
  server->Enqueue();
  ASSERT_TRUE(WaitFor([&] { return done.load() == 2; }));
  ASSERT_TRUE(WaitFor([&] { return server->Count("succeeded") == 1; }));
}

TEST(WorkerTest, ARefusedTokenEndsRunWithTheError) {
  FakeWorkerServer server;
  server.RequireToken("right");
  ASSERT_TRUE(server.Start().ok());
  Client client({server.url(), "wrong"});
  RunningWorker running(&client, FastOptions(1), [](LeaseContext&) { return Outcome::Complete(); });
  ASSERT_TRUE(WaitFor([&] { return running.returned(); }));
  EXPECT_EQ(running.status().http_status(), 401);
  EXPECT_EQ(running.status().code(), "unauthenticated");
}

TEST(WorkerTest, LeaseContextEffectCallsReachTheirRoutes) {
  FakeWorkerServer server;
  ASSERT_TRUE(server.Start().ok());
  Client client({server.url(), ""});
  const std::string id = server.Enqueue();
  std::string answer, key;
  Status commit;
  RunningWorker running(&client, FastOptions(1), [&](LeaseContext& ctx) {
    auto r = ctx.ReserveEffect("email");
    if (r.ok()) {
      answer = r->answer;
      key = r->key;
    }
    commit = ctx.CommitEffect("email", "msg-1");
    return Outcome::Complete();
  });
  ASSERT_TRUE(WaitFor([&] { return server.Count("succeeded") == 1; }));
  running.StopAndJoin();
  EXPECT_EQ(answer, "proceed");
  EXPECT_EQ(key, id + ":email");
  EXPECT_TRUE(commit.ok()) << commit.ToString();
}

}  // namespace
}  // namespace taskengine_client
