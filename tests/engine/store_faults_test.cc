// Storage errors met through the real engine: the FaultInjectingStore of
// src/storage/testing/fault_injecting_store.h in front of a SQLite store.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "engine/engine_internal.h"
#include "storage/store.h"
#include "storage/testing/fault_injecting_store.h"
#include "taskengine/engine.h"
#include "testing_support/test_util.h"

namespace taskengine {
namespace {

using namespace std::chrono_literals;

class StoreFaultsTest : public ::testing::Test {
 protected:
  Result<std::unique_ptr<Engine>> Open(int workers, Millis poll_interval_ms = 50,
                                       std::vector<QueueConfig> queues = {}) {
    EngineOptions o;
    o.database_path = dir_.File("te.db");
    o.worker_threads = workers;
    o.queues = std::move(queues);
    o.poll_interval_ms = poll_interval_ms;
    o.sweep_interval_ms = 50;
    o.shutdown_grace_ms = 2000;
    return OpenEngine(o, WrapStoreWithFaults(faults_));
  }
  static JobDefinition Job(const std::string& name) {
    JobDefinition j;
    j.name = JobName(name);
    j.handler = name;
    return j;
  }
  std::shared_ptr<StoreFaults> faults_ = std::make_shared<StoreFaults>();
  TempDir dir_;
};

TEST_F(StoreFaultsTest, AFaultMeetsTheCallsItNamesAfterTheSkippedOnes) {
  ASSERT_OK_AND_ASSIGN(auto engine, Open(0));
  ASSERT_OK(engine->DefineJob(Job("a")));
  Store& store = StoreOf(*engine);
  const int before = faults_->Calls("GetJob");
  ASSERT_OK(faults_->Fail("GetJob", Unavailable("down"), {.skip = 1, .times = 2}));
  std::vector<ErrorCode> codes;
  for (int i = 0; i < 4; ++i) codes.push_back(store.GetJob(JobName("a")).status().code());
  EXPECT_EQ(codes, (std::vector<ErrorCode>{ErrorCode::kOk, ErrorCode::kUnavailable,
                                           ErrorCode::kUnavailable, ErrorCode::kOk}));
  EXPECT_EQ(faults_->Calls("GetJob") - before, 4);
  EXPECT_EQ(faults_->Failed("GetJob"), 2);
  // Other methods are untouched.
  EXPECT_OK(store.ListJobs().status());
  EXPECT_EQ(faults_->Failed("*"), 2);
}

TEST_F(StoreFaultsTest, EveryMethodUntilClearedAndBatchesAnswerPerRequest) {
  ASSERT_OK_AND_ASSIGN(auto engine, Open(0));
  Store& store = StoreOf(*engine);
  ASSERT_OK(faults_->Fail("*", Unavailable("database restarting"), {.times = -1}));
  EXPECT_EQ(store.ListJobs().status().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(store.ListJobs().status().message(), "database restarting");
  std::vector<HeartbeatRequest> beats(3);
  for (std::size_t i = 0; i < beats.size(); ++i)
    beats[i].lease = LeaseRef{ExecutionId{static_cast<std::int64_t>(i + 1)}, ClaimVersion{1}};
  auto replies = store.HeartbeatBatch(beats);
  ASSERT_EQ(replies.size(), 3u);
  for (const auto& r : replies) EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable);
  DispatchRequest d;
  d.job = JobName("a");
  EXPECT_EQ(engine->Dispatch(d).status().code(), ErrorCode::kUnavailable);
  faults_->Clear();
  EXPECT_OK(store.ListJobs().status());
  // Nothing reached the store while it was "down".
  ASSERT_OK_AND_ASSIGN(ExecutionPage page, store.ListExecutions(ExecutionFilter{}));
  EXPECT_TRUE(page.items.empty());
}

TEST_F(StoreFaultsTest, BadFaultsAreRefused) {
  EXPECT_EQ(faults_->Fail("Admitt", Unavailable("x")).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(faults_->Fail("Admit", Status::Ok()).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(faults_->Delay("Admit", 1ms, {.skip = -1}).code(), ErrorCode::kInvalidArgument);
  EXPECT_OK(faults_->Delay("Admit", 1ms));
}

TEST_F(StoreFaultsTest, DelayHoldsTheCallBeforeTheStore) {
  ASSERT_OK_AND_ASSIGN(auto engine, Open(0));
  ASSERT_OK(faults_->Delay("ListJobs", 80ms));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_OK(StoreOf(*engine).ListJobs().status());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 80ms);
}

// A storage outage between a handler's end and the publication of its
// outcome: the pool keeps the outcome and publishes it when the store is
// back, while the lease still holds (30 s), instead of giving up and leaving
// the execution to lease expiry and a second run of its handler.
TEST_F(StoreFaultsTest, OutcomeWaitsOutAnOutageInsteadOfRunningTheHandlerAgain) {
  ASSERT_OK_AND_ASSIGN(auto engine, Open(1));
  ASSERT_OK(engine->DefineJob(Job("once")));
  std::atomic<int> runs{0};
  ASSERT_OK(engine->RegisterHandler("once", [&](JobContext&) {
    ++runs;
    return HandlerResult::Success("{}");
  }));
  // About 4 s of retries at the pool's pace (one every 100 ms).
  ASSERT_OK(faults_->Fail("FinishBatch", Unavailable("database restarting"), {.times = 40}));
  ASSERT_OK(engine->Start());
  DispatchRequest d;
  d.job = JobName("once");
  ASSERT_OK_AND_ASSIGN(DispatchResult r, engine->Dispatch(d));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto e = engine->GetExecution(r.id);
        return e.ok() && e->status == ExecutionStatus::kSucceeded;
      },
      20s))
      << "FinishBatch failed " << faults_->Failed("FinishBatch") << " times";
  EXPECT_EQ(faults_->Failed("FinishBatch"), 40);
  EXPECT_EQ(runs.load(), 1);
  ASSERT_OK_AND_ASSIGN(Execution e, engine->GetExecution(r.id));
  EXPECT_EQ(e.attempt, 1);
  engine->Stop();
}

// L4 at speed: a fast queue's work is claimed already marked started, so its
// leases need no MarkStarted call after the claim (one row write fewer per
// short job). Only what is claimed before the queue's completion rate is
// known (its first 50 ms) is claimed unmarked and marked as handlers take it.
// Every run is marked exactly once, one way or the other.
TEST_F(StoreFaultsTest, AFastQueueIsClaimedMarkedStartedInsteadOfMarkedAfterwards) {
  constexpr int kJobs = 20'000;
  ASSERT_OK_AND_ASSIGN(auto engine, Open(2));
  ASSERT_OK(engine->DefineJob(Job("quick")));
  std::atomic<int> runs{0};
  ASSERT_OK(engine->RegisterHandler("quick", [&](JobContext&) {
    ++runs;
    return HandlerResult::Success();
  }));
  std::vector<DispatchRequest> batch(1000);
  for (DispatchRequest& d : batch) d.job = JobName("quick");
  for (int i = 0; i < kJobs; i += static_cast<int>(batch.size())) {
    ASSERT_OK(engine->DispatchBatch(batch).status());
  }
  ASSERT_OK(engine->Start());
  ASSERT_TRUE(WaitFor([&] { return runs.load() >= kJobs; }, 120s)) << runs.load() << " runs";
  engine->Stop();
  const StoreFaults::Marks marks = faults_->marks();
  EXPECT_EQ(runs.load(), kJobs);
  EXPECT_EQ(marks.by_claim + marks.by_mark_started, kJobs);
  EXPECT_LE(marks.by_mark_started, kJobs / 4)
      << "claimed marked: " << marks.by_claim << ", marked after the claim "
      << marks.by_mark_started;
}

// A commit that makes work due wakes this engine's workers only when they
// serve its queue: work left to remote workers (a queue with pool = false)
// or to other nodes (a queue this engine does not list) costs the pool no
// claim. Polls are a minute apart here, so every claim counted was a wakeup's.
TEST_F(StoreFaultsTest, WorkInAQueueThePoolDoesNotServeWakesNoWorker) {
  ASSERT_OK_AND_ASSIGN(auto engine, Open(2, /*poll_interval_ms=*/60'000,
                                         {QueueConfig{.name = "default"},
                                          QueueConfig{.name = "remote", .pool = false}}));
  ASSERT_OK(engine->DefineJob(Job("here")));
  JobDefinition remote = Job("remote");
  remote.queue = "remote";
  ASSERT_OK(engine->DefineJob(remote));
  JobDefinition elsewhere = Job("elsewhere");
  elsewhere.queue = "elsewhere";
  ASSERT_OK(engine->DefineJob(elsewhere));
  std::atomic<int> runs{0};
  ASSERT_OK(engine->RegisterHandler("here", [&](JobContext&) {
    ++runs;
    return HandlerResult::Success();
  }));
  ASSERT_OK(engine->Start());
  DispatchRequest here;
  here.job = JobName("here");
  ASSERT_OK(engine->Dispatch(here).status());
  ASSERT_TRUE(WaitFor([&] { return runs.load() == 1; }, 10s));

  const int before = faults_->Calls("Claim");
  for (int i = 0; i < 20; ++i) {
    DispatchRequest d;
    d.job = JobName(i % 2 == 0 ? "remote" : "elsewhere");
    ASSERT_OK(engine->Dispatch(d).status());
  }
  // A job of the pool's own queue still wakes it, and marks the end of the
  // window: whatever the twenty admissions woke has claimed by then.
  ASSERT_OK(engine->Dispatch(here).status());
  ASSERT_TRUE(WaitFor([&] { return runs.load() == 2; }, 10s));
  const int claims = faults_->Calls("Claim") - before;
  EXPECT_LE(claims, 4) << "claims while twenty executions of other queues were admitted";
  engine->Stop();
}

}  // namespace
}  // namespace taskengine
