// The SDK's Worker against the real server side of the worker protocol
// (src/api/routes_worker.cc) behind the real HTTP server, over a real engine
// (tests/api harness). Jobs of queue "remote" are taken by remote workers only.
#include <gtest/gtest.h>

#include <thread>

#include "api_harness.h"  // (after storage/store.h: FinishReply must be complete)
#include "storage/store.h"
#include "taskengine_client/worker.h"

namespace taskengine_client {
namespace {

using std::chrono::milliseconds;
using taskengine::api::testing::ApiHarness;
namespace t = taskengine::api::testing;

// Waits while the lease is active, at most 20 s (so a broken worker fails the
// test instead of hanging it).
void WaitWhileActive(LeaseContext& ctx) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ctx.Checkpoint() == LeaseState::kActive && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool WaitFor(const std::function<bool()>& done, milliseconds timeout = milliseconds(15'000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return done();
}

WorkerOptions RemoteOptions(int concurrency) {
  WorkerOptions o;
  o.queues = {"remote"};
  o.concurrency = concurrency;
  o.poll_wait = milliseconds(500);
  o.reconnect_min = milliseconds(20);
  o.reconnect_max = milliseconds(200);
  o.logger = [](const std::string&) {};
  return o;
}

class WorkerServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    harness_ = std::make_unique<ApiHarness>();
    taskengine::Status s = harness_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    taskengine::JobDefinition job;
    job.name = taskengine::JobName("remote");
    job.display_name = "remote";
    job.handler = "command";
    job.queue = "remote";
    job.lease_ms = 900;  // heartbeats every 300 ms
    job.retry.max_attempts = 3;
    job.retry.backoff_base_ms = 10;
    job.retry.backoff_cap_ms = 20;
    job.config_json = R"({"argv":["/bin/true"]})";
    s = harness_->engine().DefineJob(job);
    ASSERT_TRUE(s.ok()) << s.ToString();
    url_ = "http://127.0.0.1:" + std::to_string(harness_->port());
    admin_ = std::make_unique<Client>(ClientOptions{url_, t::kAdmin});
    worker_client_ = std::make_unique<Client>(ClientOptions{url_, t::kWorker});
  }

  std::string Dispatch(Json payload = Json::object()) {
    auto r = admin_->Dispatch("remote", {.payload = std::move(payload)});
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->id : "";
  }
  std::string StatusOf(const std::string& id) {
    auto doc = admin_->GetExecution(id);
    return doc.ok() ? doc->value("status", "") : "";
  }

  std::unique_ptr<ApiHarness> harness_;
  std::string url_;
  std::unique_ptr<Client> admin_, worker_client_;
};

TEST_F(WorkerServerTest, LeasesCarryHandlerAndConfigAndCompleteWithAResult) {
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(Dispatch({{"n", i}}));
  std::mutex mu;
  std::vector<Lease> seen;
  Worker worker(worker_client_.get(), RemoteOptions(3), [&](LeaseContext& ctx) {
    {
      std::lock_guard<std::mutex> lock(mu);
      seen.push_back(ctx.lease());
    }
    return Outcome::Complete(Json{{"n", ctx.payload()["n"]}});
  });
  std::thread run([&] { EXPECT_TRUE(worker.Run().ok()); });
  ASSERT_TRUE(WaitFor([&] {
    for (const auto& id : ids) {
      if (StatusOf(id) != "succeeded") return false;
    }
    return true;
  }));
  worker.Stop();
  run.join();
  auto result = admin_->GetResult(ids[4]);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_NE(result->dump().find("\"n\":4"), std::string::npos) << result->dump();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(seen.size(), 10u);
  EXPECT_EQ(seen[0].handler, "command");
  EXPECT_EQ(seen[0].handler_config, (Json{{"argv", {"/bin/true"}}}));
  EXPECT_EQ(seen[0].job, "remote");
  EXPECT_EQ(seen[0].attempt, 1);
  EXPECT_EQ(seen[0].lease_ms, 900);
  EXPECT_GT(seen[0].claim_version, 0);
  EXPECT_EQ(seen[0].effect_key_prefix, seen[0].id + ":");
  auto workers = admin_->Workers();
  ASSERT_TRUE(workers.ok()) << workers.status().ToString();
  bool found = false;
  for (const Json& w : workers->value("items", Json::array())) {
    found = found || w.value("id", "") == worker.worker_id();
  }
  EXPECT_TRUE(found) << workers->dump();
}

TEST_F(WorkerServerTest, HeartbeatsOutliveTheLeaseAndCancelReachesTheHandler) {
  const std::string id = Dispatch();
  std::atomic<bool> started{false};
  Worker worker(worker_client_.get(), RemoteOptions(1), [&](LeaseContext& ctx) {
    started = true;
    WaitWhileActive(ctx);
    return ctx.Checkpoint() == LeaseState::kCancelRequested ? Outcome::Canceled()
                                                            : Outcome::Retryable("lost");
  });
  std::thread run([&] { EXPECT_TRUE(worker.Run().ok()); });
  ASSERT_TRUE(WaitFor([&] { return started.load(); }));
  // Three lease lengths: only heartbeats keep it running.
  std::this_thread::sleep_for(milliseconds(2700));
  EXPECT_EQ(StatusOf(id), "running");
  EXPECT_EQ(worker.stats().lost, 0);
  auto c = admin_->Cancel(id, "sdk test");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return StatusOf(id) == "canceled"; })) << StatusOf(id);
  worker.Stop();
  run.join();
}

TEST_F(WorkerServerTest, EffectsAreDoneOnceAcrossAttempts) {
  const std::string id = Dispatch();
  std::mutex mu;
  std::vector<std::string> answers;
  Worker worker(worker_client_.get(), RemoteOptions(1), [&](LeaseContext& ctx) {
    auto r = ctx.ReserveEffect("notice");
    if (!r.ok()) return Outcome::Retryable(r.status().ToString());
    {
      std::lock_guard<std::mutex> lock(mu);
      answers.push_back(r->answer);
    }
    if (r->answer == "proceed") {
      Status s = ctx.CommitEffect("notice", "msg-1");
      if (!s.ok()) return Outcome::Permanent(s.ToString());
    }
    // The first attempt fails after its effect; the second finds it done.
    if (ctx.lease().attempt == 1) return Outcome::Retryable("try again");
    return Outcome::Complete();
  });
  std::thread run([&] { EXPECT_TRUE(worker.Run().ok()); });
  ASSERT_TRUE(WaitFor([&] { return StatusOf(id) == "succeeded"; })) << StatusOf(id);
  worker.Stop();
  run.join();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(answers, (std::vector<std::string>{"proceed", "already_done"}));
}

TEST_F(WorkerServerTest, AnOldClaimIsStaleAndChangesNothing) {
  const std::string id = Dispatch();
  LeaseRequest request;
  request.worker_id = "test:1";
  request.queues = {"remote"};
  request.wait_ms = 2000;
  auto leases = worker_client_->LeaseExecutions(request);
  ASSERT_TRUE(leases.ok()) << leases.status().ToString();
  ASSERT_EQ(leases->size(), 1u);
  const Lease lease = (*leases)[0];
  FinishItem release{lease.id, lease.claim_version, FinishItem::Kind::kRelease};
  ASSERT_TRUE(worker_client_->Finish(release).ok());
  auto again = worker_client_->LeaseExecutions(request);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);
  EXPECT_GT((*again)[0].claim_version, lease.claim_version);
  FinishItem old{lease.id, lease.claim_version, FinishItem::Kind::kComplete};
  auto stale = worker_client_->Finish(old);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().http_status(), 409);
  EXPECT_TRUE(stale.status().stale());
  auto hb = worker_client_->HeartbeatBatch("test:1", {{lease.id, lease.claim_version, 5}}, 0, 0);
  ASSERT_TRUE(hb.ok()) << hb.status().ToString();
  ASSERT_EQ(hb->size(), 1u);
  EXPECT_TRUE((*hb)[0].status.stale());
  EXPECT_EQ(StatusOf(id), "running");
  // The current claim finishes through the batch route.
  auto done = worker_client_->FinishBatch(
      {{(*again)[0].id, (*again)[0].claim_version, FinishItem::Kind::kComplete}});
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  ASSERT_EQ(done->size(), 1u);
  EXPECT_TRUE((*done)[0].status.ok()) << (*done)[0].status.ToString();
  EXPECT_EQ((*done)[0].state, "succeeded");
}

TEST_F(WorkerServerTest, ATenantBoundTokenIsRefused) {
  Client tenant({url_, t::kTenantA});
  Worker worker(&tenant, RemoteOptions(1), [](LeaseContext&) { return Outcome::Complete(); });
  Status s = worker.Run();
  EXPECT_EQ(s.http_status(), 403) << s.ToString();
}

TEST_F(WorkerServerTest, GracefulStopFinishesRunningWork) {
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(Dispatch());
  std::atomic<int> started{0};
  Worker worker(worker_client_.get(), RemoteOptions(4), [&](LeaseContext&) {
    ++started;
    std::this_thread::sleep_for(milliseconds(500));
    return Outcome::Complete();
  });
  std::thread run([&] { EXPECT_TRUE(worker.Run().ok()); });
  ASSERT_TRUE(WaitFor([&] { return started.load() == 4; }));
  worker.Stop();
  run.join();
  for (const auto& id : ids) EXPECT_EQ(StatusOf(id), "succeeded");
}

}  // namespace
}  // namespace taskengine_client
