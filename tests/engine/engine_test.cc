// Engine behaviour through the public C++ API, on a real SQLite file.
#include "taskengine/engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "core/canonical_json.h"
#include "engine/engine_internal.h"
#include "engine/worker_pool.h"
#include "storage/sqlite/sqlite_store.h"
#include "storage/store.h"
#include "testing_support/test_util.h"

namespace taskengine {
namespace {

using namespace std::chrono_literals;

JobDefinition Job(const std::string& name, const std::string& handler,
                  const std::string& queue = "default") {
  JobDefinition j;
  j.name = JobName(name);
  j.handler = handler;
  j.queue = queue;
  j.retry.backoff_base_ms = 10;
  j.retry.backoff_cap_ms = 50;
  return j;
}

class EngineTest : public ::testing::Test {
 protected:
  EngineOptions Options(int workers = 2) {
    EngineOptions o;
    o.database_path = dir_.File("te.db");
    o.worker_threads = workers;
    o.poll_interval_ms = 50;
    o.sweep_interval_ms = 50;
    o.shutdown_grace_ms = 2000;
    return o;
  }
  ExecutionStatus StatusOf(Engine& e, ExecutionId id) {
    auto ex = e.GetExecution(id);
    return ex.ok() ? ex->status : ExecutionStatus::kQueued;
  }
  // A worker pool driven on its own, the test playing the store's writer: a
  // store of its own with job "count" (each run counted in `ran`) and a pool
  // of `workers` (one unless said) on queue "default" of concurrency 1
  // without prefetch, so the queue's target in hand is its one slot. Polls
  // once a minute: only Wake() and the test move it.
  struct OneWorkerPool {
    std::unique_ptr<Store> store;
    HandlerRegistry handlers;
    std::atomic<int> ran{0};
    std::unique_ptr<WorkerPool> pool;
  };
  void StartOneWorkerPool(const std::string& worker_id, OneWorkerPool* rig, int workers = 1) {
    SqliteStoreOptions so;
    so.path = dir_.File(worker_id + ".db");
    ASSERT_OK_AND_ASSIGN(rig->store, OpenSqliteStore(so));
    ASSERT_OK(rig->store->Migrate());
    ASSERT_OK(rig->store->UpsertJob(Job("count", "count")));
    ASSERT_OK(rig->handlers.Register("count", [rig](JobContext&) {
      ++rig->ran;
      return HandlerResult::Success();
    }));
    WorkerPoolOptions po;
    static_cast<EngineOptions&>(po) = Options(workers);
    po.poll_interval_ms = 60'000;
    po.worker_id = worker_id;
    po.queues = {QueueConfig{"default", 0, 1}};
    po.prefetch = 0;
    po.max_prefetch = 0;
    rig->pool =
        std::make_unique<WorkerPool>(rig->store.get(), SystemClock::Get(), &rig->handlers, po);
    ASSERT_OK(rig->pool->Start());
  }
  static AdmitRequest CountRequest() {
    AdmitRequest a;
    a.job = JobName("count");
    a.payload_json = "{}";
    a.fingerprint = Sha256Hex(a.payload_json);
    return a;
  }
  // What a succeeding handler saw: the executions it ran and their attempts.
  class RunLog {
   public:
    taskengine::Handler Handler() {
      return [this](JobContext& ctx) {
        std::lock_guard<std::mutex> lock(mu_);
        seen_.insert(ctx.execution_id().value);
        attempts_.push_back(ctx.attempt());
        return HandlerResult::Success();
      };
    }
    std::size_t Times(ExecutionId id) {
      std::lock_guard<std::mutex> lock(mu_);
      return seen_.count(id.value);
    }
    std::size_t Total() {
      std::lock_guard<std::mutex> lock(mu_);
      return seen_.size();
    }
    std::vector<int> attempts() {
      std::lock_guard<std::mutex> lock(mu_);
      return attempts_;
    }

   private:
    std::mutex mu_;
    std::multiset<std::int64_t> seen_;
    std::vector<int> attempts_;
  };
  // Each of `ids` ran once, on attempt 1, and succeeded.
  void ExpectEachRanOnceOnAttempt1(Engine& e, RunLog& runs, const std::vector<ExecutionId>& ids) {
    for (const ExecutionId& id : ids) {
      EXPECT_EQ(runs.Times(id), 1u);
      EXPECT_EQ(StatusOf(e, id), ExecutionStatus::kSucceeded);
    }
    EXPECT_THAT(runs.attempts(), ::testing::Each(1));
  }
  // An engine whose `workers` run job "count" into `runs`, polling once a
  // minute: only wakeups move its work.
  void StartUnpolledCountingEngine(int workers, RunLog* runs, std::unique_ptr<Engine>* engine) {
    EngineOptions o = Options(workers);
    o.poll_interval_ms = 60'000;
    ASSERT_OK_AND_ASSIGN(*engine, Engine::Open(o));
    ASSERT_OK((*engine)->DefineJob(Job("count", "count")));
    ASSERT_OK((*engine)->RegisterHandler("count", runs->Handler()));
    ASSERT_OK((*engine)->Start());
  }
  TempDir dir_;
};

TEST_F(EngineTest, DispatchedJobRunsToSucceededWithResultAndLogs) {
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(Options()));
  ASSERT_OK(engine->DefineJob(Job("greet", "greet")));
  ASSERT_OK(engine->RegisterHandler("greet", [](JobContext& ctx) {
    ctx.SetProgress(50);
    ctx.Log(LogLevel::kInfo, "hello " + ctx.payload_json());
    EXPECT_EQ(ctx.attempt(), 1);
    EXPECT_EQ(ctx.effect_key_prefix(), std::to_string(ctx.execution_id().value) + ":");
    return HandlerResult::Success(R"({"ok":true})");
  }));
  ASSERT_OK(engine->Start());
  DispatchRequest r;
  r.job = JobName("greet");
  r.payload_json = R"({ "b": 2, "a": 1 })";
  ASSERT_OK_AND_ASSIGN(DispatchResult d, engine->Dispatch(r));
  EXPECT_TRUE(d.created);
  ASSERT_TRUE(WaitFor([&] { return StatusOf(*engine, d.id) == ExecutionStatus::kSucceeded; }));
  ASSERT_OK_AND_ASSIGN(Execution e, engine->GetExecution(d.id));
  EXPECT_EQ(e.result_json, R"({"ok":true})");
  EXPECT_EQ(e.payload_json, R"({"a":1,"b":2})");  // stored canonical
  EXPECT_EQ(e.progress, 100);
  EXPECT_GT(e.finished_at, 0);
  ASSERT_OK_AND_ASSIGN(auto logs, StoreOf(*engine).GetLogs(d.id, 10));
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].message, R"(hello {"a":1,"b":2})");
}

// The engine's threads carry their names (top -H, ps -L, perf, gdb): the
// store's writer and the pool's threads of a started engine are there.
TEST_F(EngineTest, ItsThreadsAreNamed) {
  const auto names = [] {
    std::multiset<std::string> out;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
      std::ifstream in(task.path() / "comm");
      std::string name;
      std::getline(in, name);
      out.insert(name);
    }
    return out;
  };
  const std::vector<std::string> once = {"te-writer",  "te-callbacks", "te-checkpoint",
                                         "te-claimer", "te-outcomes",  "te-keeper",
                                         "te-sweeper"};
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(Options(2)));
  ASSERT_OK(engine->Start());
  // Each is named by the thread that starts it (NamedThread), before Start()
  // returns: nothing to wait for.
  const std::multiset<std::string> seen = names();
  for (const std::string& name : once) EXPECT_EQ(seen.count(name), 1u) << name;
  EXPECT_EQ(seen.count("te-worker"), 2u);
  engine->Stop();
}

TEST_F(EngineTest, DispatchValidatesInputAndChangesNothing) {
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(Options(0)));
  ASSERT_OK(engine->DefineJob(Job("greet", "greet")));
  JobDefinition per_tenant = Job("digest", "greet");
  per_tenant.scope = JobScope::kPerTenant;
  ASSERT_OK(engine->DefineJob(per_tenant));
  auto expect_code = [&](DispatchRequest r, ErrorCode code) {
    auto d = engine->Dispatch(r);
    EXPECT_EQ(d.status().code(), code) << d.status().ToString();
  };
  DispatchRequest base;
  base.job = JobName("greet");
  DispatchRequest r = base;
  r.payload_json = "[1,2]";
  expect_code(r, ErrorCode::kInvalidArgument);
  r.payload_json = "{\"a\":";
  expect_code(r, ErrorCode::kInvalidArgument);
  r = base;
  r.payload_json = "{\"x\":\"" + std::string(kDefaultMaxPayloadBytes, 'a') + "\"}";
  expect_code(r, ErrorCode::kInvalidArgument);
  r = base;
  r.job = JobName("missing");
  expect_code(r, ErrorCode::kNotFound);
  r.job = JobName("Bad Name");
  expect_code(r, ErrorCode::kInvalidArgument);
  r = base;
  r.tenant = TenantId("acme");
  expect_code(r, ErrorCode::kInvalidArgument);  // global job takes no tenant
  r = base;
  r.job = JobName("digest");
  expect_code(r, ErrorCode::kInvalidArgument);  // per-tenant job needs one
  r.tenant = TenantId("ACME!");
  expect_code(r, ErrorCode::kInvalidArgument);
  r = base;
  r.idempotency_key = "has space";
  expect_code(r, ErrorCode::kInvalidArgument);
  r = base;
  r.delay_ms = -5;
  expect_code(r, ErrorCode::kInvalidArgument);
  ExecutionFilter all;
  ASSERT_OK_AND_ASSIGN(ExecutionPage page, StoreOf(*engine).ListExecutions(all));
  EXPECT_TRUE(page.items.empty());
}

// A1: dispatches are checked against the job's definition as the engine last
// read it, and the admission checks that definition against the stored one:
// a job changed elsewhere (here: another store on the same database, as the
// CLI or another node) is never dispatched to on its old terms, in the
// synchronous and the asynchronous (HTTP) path alike.
TEST_F(EngineTest, A1_ADispatchFollowsADefinitionChangedElsewhere) {
  EngineOptions o = Options(0);
  std::mutex mu;
  std::map<std::int64_t, std::string> dispatched_to;  // the queue each event named
  o.lifecycle_listener = [&](const LifecycleEvent& e) {
    if (e.kind != LifecycleKind::kDispatched) return;
    std::lock_guard<std::mutex> lock(mu);
    dispatched_to[e.id.value] = e.queue;
  };
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(o));
  ASSERT_OK(engine->DefineJob(Job("greet", "greet")));
  SqliteStoreOptions so;
  so.path = Options().database_path;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> elsewhere, OpenSqliteStore(so));
  const auto change = [&](auto edit) {
    ASSERT_OK_AND_ASSIGN(JobDefinition job, elsewhere->GetJob(JobName("greet")));
    edit(job);
    ASSERT_OK(elsewhere->UpsertJob(job));
  };
  const auto dispatch_async = [&](const DispatchRequest& r) {
    std::promise<Result<std::vector<DispatchResult>>> answer;
    DispatchBatchAsync(*engine, {r}, [&](Result<std::vector<DispatchResult>> d) {
      answer.set_value(std::move(d));
    });
    return answer.get_future().get();
  };
  const auto queue_of = [&](ExecutionId id) {
    auto e = engine->GetExecution(id);
    return e.ok() ? e->queue : "?";
  };
  DispatchRequest r;
  r.job = JobName("greet");
  for (bool async : {false, true}) {
    SCOPED_TRACE(async ? "DispatchBatchAsync" : "Dispatch");
    const auto dispatch = [&](const DispatchRequest& d) -> Result<ExecutionId> {
      if (!async) {
        TE_ASSIGN_OR_RETURN(DispatchResult one, engine->Dispatch(d));
        return one.id;
      }
      TE_ASSIGN_OR_RETURN(std::vector<DispatchResult> all, dispatch_async(d));
      return all.front().id;
    };
    change([](JobDefinition& j) {
      j.queue = "default";
      j.scope = JobScope::kGlobal;
      j.enabled = true;
    });
    ASSERT_OK_AND_ASSIGN(ExecutionId first, dispatch(r));  // remembered from here on
    EXPECT_EQ(queue_of(first), "default");

    change([](JobDefinition& j) { j.queue = "other"; });
    ASSERT_OK_AND_ASSIGN(ExecutionId moved, dispatch(r));
    EXPECT_EQ(queue_of(moved), "other");
    {
      std::lock_guard<std::mutex> lock(mu);
      EXPECT_EQ(dispatched_to[moved.value], "other") << "the event names the old queue";
    }

    DispatchRequest keyed = r;
    keyed.idempotency_key = async ? "async-key" : "sync-key";
    ASSERT_OK(dispatch(keyed).status());
    change([](JobDefinition& j) { j.enabled = false; });
    Result<ExecutionId> repeat = dispatch(keyed);
    EXPECT_EQ(repeat.status().code(), ErrorCode::kInvalidArgument)
        << "a repeat to a disabled job: " << repeat.status().ToString();
    Result<ExecutionId> disabled = dispatch(r);
    EXPECT_EQ(disabled.status().code(), ErrorCode::kInvalidArgument)
        << disabled.status().ToString();
    EXPECT_THAT(disabled.status().message(), ::testing::HasSubstr("disabled"));

    change([](JobDefinition& j) {
      j.enabled = true;
      j.scope = JobScope::kPerTenant;
    });
    Result<ExecutionId> untenanted = dispatch(r);
    EXPECT_EQ(untenanted.status().code(), ErrorCode::kInvalidArgument)
        << untenanted.status().ToString();
    EXPECT_THAT(untenanted.status().message(), ::testing::HasSubstr("per-tenant"));
    DispatchRequest tenanted = r;
    tenanted.tenant = TenantId("acme");
    ASSERT_OK(dispatch(tenanted).status());
  }
  ExecutionFilter all;
  all.limit = 100;
  ASSERT_OK_AND_ASSIGN(ExecutionPage page, StoreOf(*engine).ListExecutions(all));
  EXPECT_EQ(page.items.size(), 8u) << "a refused dispatch admitted something";
}

// A1: the payload limit is an option; bad limits are refused at Open.
TEST_F(EngineTest, PayloadLimitIsConfigurable) {
  EngineOptions o = Options(0);
  o.max_payload_bytes = 4096;
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(o));
  ASSERT_OK(engine->DefineJob(Job("greet", "greet")));
  DispatchRequest r;
  r.job = JobName("greet");
  const std::string fits = "{\"x\":\"" + std::string(4096 - 8, 'a') + "\"}";
  ASSERT_EQ(fits.size(), 4096u);
  r.payload_json = fits;
  EXPECT_OK(engine->Dispatch(r).status());
  r.payload_json = "{\"x\":\"" + std::string(4096 - 7, 'a') + "\"}";
  Result<DispatchResult> over = engine->Dispatch(r);
  EXPECT_EQ(over.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(over.status().message(), ::testing::HasSubstr("exceeds the limit of 4096"));
  engine.reset();

  for (std::size_t bad : {kMinPayloadLimit - 1, kMaxPayloadLimit + 1}) {
    EngineOptions b = Options(0);
    b.max_payload_bytes = bad;
    EXPECT_EQ(Engine::Open(b).status().code(), ErrorCode::kInvalidArgument) << bad;
  }
}

TEST_F(EngineTest, IdempotentDispatchReturnsSameExecutionAndConflictsOnChangedPayload) {
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(Options(0)));
  ASSERT_OK(engine->DefineJob(Job("greet", "greet")));
  DispatchRequest r;
  r.job = JobName("greet");
  r.idempotency_key = "order-7";
  r.payload_json = R"({"a":1,"b":[1,2]})";
  ASSERT_OK_AND_ASSIGN(DispatchResult first, engine->Dispatch(r));
  r.payload_json = R"({"b":[1,2], "a":1.0})";  // same content, other spelling
  ASSERT_OK_AND_ASSIGN(DispatchResult again, engine->Dispatch(r));
  EXPECT_FALSE(again.created);
  EXPECT_EQ(again.id, first.id);
  r.payload_json = R"({"a":2})";
  auto conflict = engine->Dispatch(r);
  EXPECT_EQ(conflict.status().code(), ErrorCode::kConflict);
  EXPECT_NE(conflict.status().message().find(std::to_string(first.id.value)), std::string::npos);
  r.payload_json = R"({"a":1,"b":[1,2]})";
  r.requester = "someone-else";  // requester is part of the fingerprint
  EXPECT_EQ(engine->Dispatch(r).status().code(), ErrorCode::kConflict);
}

// A4: the recovery-key trap. The first dispatch commits but its wakeup is lost
// (it came from another process, here another engine on the same file with
// no workers). Dispatching again with the same key returns the same execution,
// and the execution still runs to completion.
TEST_F(EngineTest, A4_SameKeyAfterLostWakeupReturnsSameExecutionAndItStillRuns) {
  std::atomic<int> runs{0};
  ASSERT_OK_AND_ASSIGN(auto server, Engine::Open(Options(1)));
  ASSERT_OK(server->DefineJob(Job("recover", "recover")));
  ASSERT_OK(server->RegisterHandler("recover", [&](JobContext&) {
    ++runs;
    return HandlerResult::Success();
  }));
  EngineOptions client_options = Options(0);
  client_options.run_sweeper = false;
  ASSERT_OK_AND_ASSIGN(auto client, Engine::Open(client_options));
  DispatchRequest r;
  r.job = JobName("recover");
  r.idempotency_key = "webhook-recovery:77";
  ASSERT_OK_AND_ASSIGN(DispatchResult first, client->Dispatch(r));  // nobody is woken
  ASSERT_OK_AND_ASSIGN(DispatchResult second, client->Dispatch(r));
  EXPECT_FALSE(second.created);
  EXPECT_EQ(second.id, first.id);
  ASSERT_OK(server->Start());  // only the poll can find it
  ASSERT_TRUE(WaitFor([&] { return StatusOf(*server, first.id) == ExecutionStatus::kSucceeded; }));
  EXPECT_EQ(runs.load(), 1);
  ASSERT_OK_AND_ASSIGN(DispatchResult third, client->Dispatch(r));
  EXPECT_EQ(third.id, first.id);
  EXPECT_EQ(third.status, ExecutionStatus::kSucceeded);
}

TEST_F(EngineTest, WorkListenersHearAdmissions) {
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(Options(0)));
  ASSERT_OK(engine->DefineJob(Job("greet", "greet")));
  std::atomic<int> heard{0};
  engine->AddWorkListener([&] { ++heard; });
  DispatchRequest r;
  r.job = JobName("greet");
  r.idempotency_key = "once";
  ASSERT_OK(engine->Dispatch(r));
  EXPECT_EQ(heard.load(), 1);
  ASSERT_OK(engine->Dispatch(r));  // a duplicate makes nothing new due
  EXPECT_EQ(heard.load(), 1);
}

// Outcomes that workers outside the engine report (the HTTP worker protocol)
// wake the engine's workers and work listeners (remote long polls) when they
// made work due: a lane's next execution, a release. A plain success makes
// nothing due and wakes nobody: every wakeup costs the woken a claim.
TEST_F(EngineTest, WorkListenersHearPublishedOutcomesThatMadeWorkDueOnly) {
  std::atomic<int> heard{0};  // outlives the engine, which holds the listener
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(Options(0)));
  ASSERT_OK(engine->DefineJob(Job("remote", "remote")));
  auto dispatch = [&](const std::string& lane) {
    DispatchRequest r;
    r.job = JobName("remote");
    r.lane_key = lane;
    auto d = engine->Dispatch(r);
    EXPECT_OK(d.status());
    return d.ok() ? d->id : ExecutionId{};
  };
  const ExecutionId plain = dispatch("");
  const ExecutionId other = dispatch("");
  const ExecutionId head = dispatch("orders-7");
  const ExecutionId next = dispatch("orders-7");  // parked behind `head`
  Store& store = StoreOf(*engine);
  auto claim = [&]() -> std::map<std::int64_t, LeaseRef> {
    ClaimRequest c;
    c.worker = WorkerId("remote-1");
    c.slots = {QueueSlot{"default", 10}};
    std::map<std::int64_t, LeaseRef> out;
    auto leases = store.Claim(c);
    EXPECT_OK(leases.status());
    if (leases.ok()) {
      for (const Lease& l : *leases) out[l.id.value] = LeaseRef{l.id, l.version};
    }
    return out;
  };
  auto finish = [](const LeaseRef& lease, FinishRequest::Kind kind) {
    FinishRequest f;
    f.lease = lease;
    f.kind = kind;
    return f;
  };
  std::map<std::int64_t, LeaseRef> leases = claim();
  ASSERT_EQ(leases.size(), 3u) << "the lane's second execution waits";
  engine->AddWorkListener([&] { ++heard; });

  auto replies =
      PublishOutcomes(*engine, {finish(leases[plain.value], FinishRequest::Kind::kComplete)});
  ASSERT_OK(replies.front().status());
  EXPECT_EQ(heard.load(), 0) << "a success makes nothing due";
  std::promise<std::vector<Result<FinishReply>>> answered;
  PublishOutcomesAsync(
      *engine, {finish(leases[other.value], FinishRequest::Kind::kComplete)},
      [&](std::vector<Result<FinishReply>> r) { answered.set_value(std::move(r)); });
  ASSERT_OK(answered.get_future().get().front().status());
  EXPECT_EQ(heard.load(), 0) << "a success makes nothing due (answered from its commit)";

  replies = PublishOutcomes(*engine, {finish(leases[head.value], FinishRequest::Kind::kComplete)});
  ASSERT_OK(replies.front().status());
  EXPECT_EQ(heard.load(), 1) << "the lane's next execution became due";
  leases = claim();
  ASSERT_EQ(leases.size(), 1u);
  replies = PublishOutcomes(*engine, {finish(leases[next.value], FinishRequest::Kind::kRelease)});
  ASSERT_OK(replies.front().status());
  EXPECT_EQ(replies.front()->status, ExecutionStatus::kQueued);
  EXPECT_EQ(heard.load(), 2) << "a release queues it again";
}

TEST_F(EngineTest, RetryableFailuresBackOffThenExhaustIntoFailed) {
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(Options(1)));
  JobDefinition j = Job("flaky", "flaky");
  j.retry.max_attempts = 3;
  ASSERT_OK(engine->DefineJob(j));
  std::atomic<int> runs{0};
  ASSERT_OK(engine->RegisterHandler("flaky", [&](JobContext& ctx) {
    EXPECT_EQ(ctx.attempt(), runs.load() + 1);
    ++runs;
    return HandlerResult::Retryable("boom " + std::to_string(ctx.attempt()));
  }));
  ASSERT_OK(engine->Start());
  DispatchRequest r;
  r.job = JobName("flaky");
  ASSERT_OK_AND_ASSIGN(DispatchResult d, engine->Dispatch(r));
  ASSERT_TRUE(WaitFor([&] { return StatusOf(*engine, d.id) == ExecutionStatus::kFailed; }));
  EXPECT_EQ(runs.load(), 3);
  ASSERT_OK_AND_ASSIGN(Execution e, engine->GetExecution(d.id));
  EXPECT_EQ(e.attempt, 3);
  EXPECT_EQ(e.failure_class, FailureClass::kRetryable);
  EXPECT_EQ(e.error, "boom 3");
}

TEST_F(EngineTest, PermanentFailureQuarantinesAndOtherJobsKeepFlowing) {
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(Options(2)));
  ASSERT_OK(engine->DefineJob(Job("bad", "bad")));
  ASSERT_OK(engine->DefineJob(Job("good", "good")));
  ASSERT_OK(engine->RegisterHandler(
      "bad", [](JobContext&) { return HandlerResult::Permanent("unsupported schema"); }));
  ASSERT_OK(engine->RegisterHandler("good", [](JobContext&) { return HandlerResult::Success(); }));
  ASSERT_OK(engine->Start());
  DispatchRequest bad;
  bad.job = JobName("bad");
  ASSERT_OK_AND_ASSIGN(DispatchResult b, engine->Dispatch(bad));
  std::vector<DispatchRequest> goods(20);
  for (auto& g : goods) g.job = JobName("good");
  ASSERT_OK_AND_ASSIGN(auto ds, engine->DispatchBatch(goods));
  ASSERT_TRUE(WaitFor([&] {
    for (auto& d : ds) {
      if (StatusOf(*engine, d.id) != ExecutionStatus::kSucceeded) return false;
    }
    return StatusOf(*engine, b.id) == ExecutionStatus::kQuarantined;
  }));
}

TEST_F(EngineTest, UnknownHandlerIsSurfacedNotGuessed) {
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(Options(1)));
  ASSERT_OK(engine->DefineJob(Job("orphan", "not-registered")));
  ASSERT_OK(engine->Start());
  DispatchRequest r;
  r.job = JobName("orphan");
  ASSERT_OK_AND_ASSIGN(DispatchResult d, engine->Dispatch(r));
  ASSERT_TRUE(WaitFor([&] { return StatusOf(*engine, d.id) == ExecutionStatus::kQuarantined; }));
  ASSERT_OK_AND_ASSIGN(Execution e, engine->GetExecution(d.id));
  EXPECT_NE(e.error.find("not-registered"), std::string::npos);
}

TEST_F(EngineTest, PerQueueConcurrencyIsBounded) {
  EngineOptions o = Options(4);
  o.queues = {QueueConfig{"low", 0, 1}, QueueConfig{"high", 10, 2}};
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(o));
  ASSERT_OK(engine->DefineJob(Job("slow-low", "work", "low")));
  ASSERT_OK(engine->DefineJob(Job("slow-high", "work", "high")));
  std::atomic<int> running_low{0}, running_high{0}, max_low{0}, max_high{0};
  ASSERT_OK(engine->RegisterHandler("work", [&](JobContext& ctx) {
    bool low = ctx.job().value == "slow-low";
    auto& running = low ? running_low : running_high;
    auto& max = low ? max_low : max_high;
    int now = ++running;
    int prev = max.load();
    while (now > prev && !max.compare_exchange_weak(prev, now)) {
    }
    std::this_thread::sleep_for(20ms);
    --running;
    return HandlerResult::Success();
  }));
  std::vector<DispatchRequest> batch;
  for (int i = 0; i < 12; ++i) {
    DispatchRequest r;
    r.job = JobName(i % 2 ? "slow-low" : "slow-high");
    batch.push_back(r);
  }
  ASSERT_OK_AND_ASSIGN(auto ds, engine->DispatchBatch(batch));
  ASSERT_OK(engine->Start());
  ASSERT_TRUE(WaitFor([&] {
    for (auto& d : ds) {
      if (StatusOf(*engine, d.id) != ExecutionStatus::kSucceeded) return false;
    }
    return true;
  }));
  EXPECT_EQ(max_low.load(), 1);
  EXPECT_EQ(max_high.load(), 2);
}

// A queue with pool = false is never claimed by this engine's pool (its work
// waits for remote workers), even at a higher priority than the queue the pool
// drains.
TEST_F(EngineTest, QueueWithoutPoolIsLeftToRemoteWorkers) {
  EngineOptions o = Options(1);
  QueueConfig remote{"remote", 10, 0};
  remote.pool = false;
  o.queues = {QueueConfig{"default", 0, 0}, remote};
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(o));
  ASSERT_OK(engine->DefineJob(Job("j-remote", "work", "remote")));
  ASSERT_OK(engine->DefineJob(Job("j-local", "work", "default")));
  std::atomic<int> remote_runs{0};
  ASSERT_OK(engine->RegisterHandler("work", [&](JobContext& ctx) {
    if (ctx.job().value == "j-remote") ++remote_runs;
    return HandlerResult::Success();
  }));
  std::vector<DispatchRequest> batch(4);
  batch[0].job = JobName("j-remote");
  for (int i = 1; i < 4; ++i) batch[i].job = JobName("j-local");
  ASSERT_OK_AND_ASSIGN(auto ds, engine->DispatchBatch(batch));
  ASSERT_OK(engine->Start());
  ASSERT_TRUE(WaitFor([&] {
    for (int i = 1; i < 4; ++i) {
      if (StatusOf(*engine, ds[i].id) != ExecutionStatus::kSucceeded) return false;
    }
    return true;
  }));
  EXPECT_EQ(StatusOf(*engine, ds[0].id), ExecutionStatus::kQueued);
  EXPECT_EQ(remote_runs.load(), 0);
}

// O2: with one worker, every ready execution of the higher-priority queue runs
// before any of the lower one, even though the lower ones were admitted first.
TEST_F(EngineTest, HigherPriorityQueueRunsFirst) {
  EngineOptions o = Options(1);
  o.queues = {QueueConfig{"low", 0, 1}, QueueConfig{"high", 10, 1}};
  o.prefetch = 10;
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(o));
  ASSERT_OK(engine->DefineJob(Job("j-low", "work", "low")));
  ASSERT_OK(engine->DefineJob(Job("j-high", "work", "high")));
  std::mutex mu;
  std::vector<std::string> order;
  ASSERT_OK(engine->RegisterHandler("work", [&](JobContext& ctx) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(ctx.job().value);
    return HandlerResult::Success();
  }));
  std::vector<DispatchRequest> batch;
  for (int i = 0; i < 6; ++i) {
    DispatchRequest r;
    r.job = JobName(i < 3 ? "j-low" : "j-high");
    batch.push_back(r);
  }
  ASSERT_OK_AND_ASSIGN(auto ds, engine->DispatchBatch(batch));
  ASSERT_OK(engine->Start());
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard<std::mutex> lock(mu);
    return order.size() == 6;
  }));
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(order,
            (std::vector<std::string>{"j-high", "j-high", "j-high", "j-low", "j-low", "j-low"}));
}

// L6: Stop() lets running handlers finish within the grace period and gives
// back leases it did not start, so they are claimable at once.
TEST_F(EngineTest, GracefulStopFinishesRunningAndReleasesTheRest) {
  EngineOptions o = Options(1);
  o.prefetch = 10;
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(o));
  ASSERT_OK(engine->DefineJob(Job("slow", "slow")));
  std::atomic<int> started{0};
  ASSERT_OK(engine->RegisterHandler("slow", [&](JobContext&) {
    ++started;
    std::this_thread::sleep_for(100ms);
    return HandlerResult::Success();
  }));
  std::vector<DispatchRequest> batch(5);
  for (auto& r : batch) r.job = JobName("slow");
  ASSERT_OK_AND_ASSIGN(auto ds, engine->DispatchBatch(batch));
  ASSERT_OK(engine->Start());
  ASSERT_TRUE(WaitFor([&] { return started.load() >= 1; }));
  engine->Stop();
  int succeeded = 0, queued = 0;
  for (auto& d : ds) {
    ASSERT_OK_AND_ASSIGN(Execution e, engine->GetExecution(d.id));
    EXPECT_NE(e.status, ExecutionStatus::kRunning) << "execution " << d.id.value;
    if (e.status == ExecutionStatus::kSucceeded) ++succeeded;
    if (e.status == ExecutionStatus::kQueued) {
      ++queued;
      EXPECT_EQ(e.attempt, 0);  // a release gives the attempt back
    }
  }
  EXPECT_GE(succeeded, 1);
  EXPECT_EQ(succeeded + queued, 5);
}

// A handler past its grace keeps running, but its lease is released: the
// engine publishes nothing for it afterwards (its claim is stale).
TEST_F(EngineTest, HandlerStillRunningAfterGraceLosesItsClaim) {
  EngineOptions o = Options(1);
  o.shutdown_grace_ms = 50;
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(o));
  ASSERT_OK(engine->DefineJob(Job("stuck", "stuck")));
  std::atomic<bool> saw_lost{false};
  std::atomic<bool> started{false};
  ASSERT_OK(engine->RegisterHandler("stuck", [&](JobContext& ctx) {
    started = true;
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (ctx.Checkpoint() == LeaseState::kLost) {
        saw_lost = true;
        break;
      }
      std::this_thread::sleep_for(5ms);
    }
    return HandlerResult::Success();
  }));
  DispatchRequest r;
  r.job = JobName("stuck");
  ASSERT_OK_AND_ASSIGN(DispatchResult d, engine->Dispatch(r));
  ASSERT_OK(engine->Start());
  ASSERT_TRUE(WaitFor([&] { return started.load(); }));  // running in its handler, not just leased
  engine->Stop();
  EXPECT_TRUE(saw_lost.load());
  ASSERT_OK_AND_ASSIGN(Execution e, engine->GetExecution(d.id));
  EXPECT_EQ(e.status, ExecutionStatus::kQueued);
}

// L4 through the engine: a lease that expires (the worker died) is recovered
// by the sweeper and the execution runs again on a live worker.
TEST_F(EngineTest, SweeperRecoversExpiredLeaseAndJobRunsAgain) {
  FakeClock clock;
  EngineOptions o = Options(0);
  o.clock = &clock;
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(o));
  ASSERT_OK(engine->DefineJob(Job("work", "work")));
  DispatchRequest r;
  r.job = JobName("work");
  ASSERT_OK_AND_ASSIGN(DispatchResult d, engine->Dispatch(r));
  ClaimRequest claim;
  claim.worker = WorkerId("dead-worker");
  claim.slots = {QueueSlot{"default", 10}};
  ASSERT_OK_AND_ASSIGN(auto leases, StoreOf(*engine).Claim(claim));
  ASSERT_EQ(leases.size(), 1u);
  clock.Advance(29s);
  ASSERT_OK_AND_ASSIGN(int early, engine->SweepOnce());
  EXPECT_EQ(early, 0);  // staleness gate: in flight
  clock.Advance(2s);
  ASSERT_OK_AND_ASSIGN(int recovered, engine->SweepOnce());
  EXPECT_EQ(recovered, 1);
  ASSERT_OK_AND_ASSIGN(Execution e, engine->GetExecution(d.id));
  EXPECT_EQ(e.status, ExecutionStatus::kQueued);
  EXPECT_EQ(e.failure_class, FailureClass::kLeaseExpired);
  // The dead worker's late completion is stale and changes nothing.
  EXPECT_EQ(
      StoreOf(*engine).Complete(LeaseRef{leases[0].id, leases[0].version}, "").status().code(),
      ErrorCode::kStale);
}

TEST_F(EngineTest, HeartbeatsKeepLongHandlersLeased) {
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(Options(1)));
  JobDefinition j = Job("long", "long");
  j.lease_ms = 150;  // much shorter than the handler
  ASSERT_OK(engine->DefineJob(j));
  std::atomic<int> runs{0};
  ASSERT_OK(engine->RegisterHandler("long", [&](JobContext& ctx) {
    ++runs;
    std::this_thread::sleep_for(600ms);
    return ctx.Checkpoint() == LeaseState::kActive ? HandlerResult::Success()
                                                   : HandlerResult::Retryable("lost");
  }));
  ASSERT_OK(engine->Start());
  DispatchRequest r;
  r.job = JobName("long");
  ASSERT_OK_AND_ASSIGN(DispatchResult d, engine->Dispatch(r));
  ASSERT_TRUE(WaitFor([&] { return StatusOf(*engine, d.id) == ExecutionStatus::kSucceeded; }));
  EXPECT_EQ(runs.load(), 1);  // never swept while alive
}

TEST_F(EngineTest, ThrowingHandlerIsARetryableFailure) {
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(Options(1)));
  JobDefinition j = Job("throws", "throws");
  j.retry.max_attempts = 1;
  ASSERT_OK(engine->DefineJob(j));
  ASSERT_OK(engine->RegisterHandler(
      "throws", [](JobContext&) -> HandlerResult { throw std::runtime_error("kaput"); }));
  ASSERT_OK(engine->Start());
  DispatchRequest r;
  r.job = JobName("throws");
  ASSERT_OK_AND_ASSIGN(DispatchResult d, engine->Dispatch(r));
  ASSERT_TRUE(WaitFor([&] { return StatusOf(*engine, d.id) == ExecutionStatus::kFailed; }));
  ASSERT_OK_AND_ASSIGN(Execution e, engine->GetExecution(d.id));
  EXPECT_NE(e.error.find("kaput"), std::string::npos);
}

TEST_F(EngineTest, ManyJobsEachRunExactlyOnce) {
  EngineOptions o = Options(4);
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(o));
  ASSERT_OK(engine->DefineJob(Job("count", "count")));
  std::mutex mu;
  std::multiset<std::int64_t> seen;
  ASSERT_OK(engine->RegisterHandler("count", [&](JobContext& ctx) {
    std::lock_guard<std::mutex> lock(mu);
    seen.insert(ctx.execution_id().value);
    return HandlerResult::Success();
  }));
  ASSERT_OK(engine->Start());
  std::vector<DispatchRequest> batch(2000);
  for (auto& r : batch) r.job = JobName("count");
  ASSERT_OK_AND_ASSIGN(auto ds, engine->DispatchBatch(batch));
  ASSERT_TRUE(WaitFor(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return seen.size() >= ds.size();
      },
      30s));
  ASSERT_TRUE(WaitFor([&] { return engine->stats().published >= 2000; }));
  EngineStats stats = engine->stats();
  EXPECT_EQ(stats.claimed, 2000);
  EXPECT_EQ(stats.succeeded, 2000);
  EXPECT_EQ(stats.published, 2000);
  EXPECT_EQ(stats.stale, 0);
  engine->Stop();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(seen.size(), ds.size());
  for (auto& d : ds) EXPECT_EQ(seen.count(d.id.value), 1u);
  for (auto& d : ds) EXPECT_EQ(StatusOf(*engine, d.id), ExecutionStatus::kSucceeded);
}

// A3 and the direct handoff: with polling out of the picture (one minute),
// each dispatch to an idle pool is claimed at once, by a parked worker for
// itself or by the claimer, and a batch larger than one claim runs whole (the
// worker's claim wakes the claimer for the rest). Each runs once, attempt 1.
TEST_F(EngineTest, A3_DispatchToAnIdlePoolRunsWithoutWaitingForAPoll) {
  RunLog runs;
  std::unique_ptr<Engine> engine;
  ASSERT_NO_FATAL_FAILURE(StartUnpolledCountingEngine(2, &runs, &engine));
  std::vector<ExecutionId> ids;
  for (int i = 0; i < 20; ++i) {
    DispatchRequest r;
    r.job = JobName("count");
    ASSERT_OK_AND_ASSIGN(auto d, engine->Dispatch(r));
    ids.push_back(d.id);
    ASSERT_TRUE(WaitFor([&] { return runs.Times(d.id) == 1; })) << "dispatch " << i;
  }
  std::vector<DispatchRequest> batch(100);
  for (auto& r : batch) r.job = JobName("count");
  ASSERT_OK_AND_ASSIGN(auto ds, engine->DispatchBatch(batch));
  for (const auto& d : ds) ids.push_back(d.id);
  ASSERT_TRUE(WaitFor([&] { return runs.Total() >= ids.size(); }));
  ASSERT_TRUE(WaitFor([&] { return engine->stats().published >= 120; }));
  EngineStats stats = engine->stats();
  EXPECT_EQ(stats.claimed, 120);
  EXPECT_EQ(stats.succeeded, 120);
  EXPECT_EQ(stats.stale, 0);
  EXPECT_EQ(stats.released, 0);
  engine->Stop();
  ExpectEachRanOnceOnAttempt1(*engine, runs, ids);
}

// A delayed dispatch starts at its run_at, not at the next poll: the claimer
// that found nothing due sleeps until the earliest queued execution is due
// (Store::NextDueIn). The poll is a minute; each of the delays is 300 ms.
TEST_F(EngineTest, A3_DelayedDispatchRunsAtItsRunAtNotAtTheNextPoll) {
  RunLog runs;
  std::unique_ptr<Engine> engine;
  ASSERT_NO_FATAL_FAILURE(StartUnpolledCountingEngine(2, &runs, &engine));
  for (int i = 0; i < 3; ++i) {
    DispatchRequest r;
    r.job = JobName("count");
    r.delay_ms = 300;
    const auto sent = std::chrono::steady_clock::now();
    ASSERT_OK_AND_ASSIGN(auto d, engine->Dispatch(r));
    ASSERT_TRUE(WaitFor([&] { return runs.Times(d.id) == 1; }, std::chrono::seconds(20)))
        << "dispatch " << i << " waits for the poll";
    EXPECT_GE(std::chrono::steady_clock::now() - sent, std::chrono::milliseconds(300))
        << "ran before its run_at";
  }
}

// The same with two queues and one worker: the parked worker's own claim
// asks only the higher-priority queue, so work admitted to the other one is
// claimed by the claimer it wakes, without a poll.
TEST_F(EngineTest, A3_DispatchToALowerQueueOfAnIdlePoolRunsWithoutWaitingForAPoll) {
  EngineOptions o = Options(1);
  o.poll_interval_ms = 60'000;
  o.queues = {QueueConfig{"low", 0, 1}, QueueConfig{"high", 10, 1}};
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(o));
  ASSERT_OK(engine->DefineJob(Job("j-low", "work", "low")));
  ASSERT_OK(engine->DefineJob(Job("j-high", "work", "high")));
  std::atomic<int> ran{0};
  ASSERT_OK(engine->RegisterHandler("work", [&](JobContext&) {
    ++ran;
    return HandlerResult::Success();
  }));
  ASSERT_OK(engine->Start());
  for (int i = 0; i < 10; ++i) {
    DispatchRequest r;
    r.job = JobName(i % 3 == 2 ? "j-high" : "j-low");
    ASSERT_OK_AND_ASSIGN(auto d, engine->Dispatch(r));
    ASSERT_TRUE(WaitFor([&] { return ran.load() == i + 1; })) << "dispatch " << i;
  }
  ASSERT_TRUE(WaitFor([&] { return engine->stats().published >= 10; }));
  EXPECT_EQ(engine->stats().claimed, 10);
  EXPECT_EQ(engine->stats().stale, 0);
}

// P2, claim at admission: a dispatch to a pool with a parked worker is
// claimed for that worker in the admission's own transaction (marked
// started), so Dispatch already answers `running`, and the execution runs
// once, attempt 1. Sequential dispatches, each waited for: the worker is
// parked again long before the next (its outcome's commit comes first).
TEST_F(EngineTest, P2_AnIdleWorkerTakesAnExecutionInItsAdmissionsTransaction) {
  RunLog runs;
  std::unique_ptr<Engine> engine;
  ASSERT_NO_FATAL_FAILURE(StartUnpolledCountingEngine(1, &runs, &engine));
  constexpr int kDispatches = 20;
  int answered_running = 0;
  std::vector<ExecutionId> ids;
  for (int i = 0; i < kDispatches; ++i) {
    DispatchRequest r;
    r.job = JobName("count");
    ASSERT_OK_AND_ASSIGN(auto d, engine->Dispatch(r));
    ids.push_back(d.id);
    if (d.status == ExecutionStatus::kRunning) ++answered_running;
    ASSERT_TRUE(WaitFor([&] { return engine->stats().published == i + 1; })) << "dispatch " << i;
  }
  // The first may come before the worker first parked; under a sanitizer or
  // a loaded machine a few more may too. None would mean no claim at all.
  EXPECT_GE(answered_running, kDispatches / 2);
  EngineStats stats = engine->stats();
  EXPECT_EQ(stats.claimed, kDispatches);
  EXPECT_EQ(stats.succeeded, kDispatches);
  EXPECT_EQ(stats.stale, 0);
  engine->Stop();
  ExpectEachRanOnceOnAttempt1(*engine, runs, ids);
}

// A claim at admission respects the queue's concurrency: with two workers
// and a queue of concurrency 1 whose one execution runs, the next dispatch
// stays queued although a worker is parked, and runs once the first ends.
// The claimed execution is the pool's: running, attempt 1, leased to this
// engine's worker id.
TEST_F(EngineTest, P2_ClaimAtAdmissionKeepsTheQueuesConcurrency) {
  EngineOptions o = Options(2);
  o.poll_interval_ms = 60'000;
  o.worker_id = "admission-claims";
  o.queues = {QueueConfig{"default", 0, 1}};
  ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(o));
  ASSERT_OK(engine->DefineJob(Job("hold", "hold")));
  std::atomic<bool> release{false};
  std::atomic<int> running{0}, most{0}, ran{0};
  ASSERT_OK(engine->RegisterHandler("hold", [&](JobContext&) {
    const int now = ++running;
    most = std::max(most.load(), now);
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    --running;
    ++ran;
    return HandlerResult::Success();
  }));
  ASSERT_OK(engine->Start());
  DispatchRequest r;
  r.job = JobName("hold");
  // Until one dispatch found a parked worker (the pool may not have parked
  // yet right after Start): it runs and holds the queue.
  std::vector<ExecutionId> ids;
  std::optional<ExecutionId> held;
  for (int i = 0; i < 50 && !held; ++i) {
    ASSERT_OK_AND_ASSIGN(auto d, engine->Dispatch(r));
    ids.push_back(d.id);
    if (d.status == ExecutionStatus::kRunning) held = d.id;
    if (!held) ASSERT_TRUE(WaitFor([&] { return running.load() == 1; }));
    if (!held) {
      release = true;
      ASSERT_TRUE(WaitFor([&] { return engine->stats().published == i + 1; }));
      release = false;
    }
  }
  ASSERT_TRUE(held.has_value()) << "no dispatch was claimed at admission";
  ASSERT_TRUE(WaitFor([&] { return running.load() == 1; }));
  ASSERT_OK_AND_ASSIGN(Execution e, engine->GetExecution(*held));
  EXPECT_EQ(e.status, ExecutionStatus::kRunning);
  EXPECT_EQ(e.worker.value, "admission-claims");
  EXPECT_EQ(e.attempt, 1);
  ASSERT_OK_AND_ASSIGN(auto next, engine->Dispatch(r));
  ids.push_back(next.id);
  EXPECT_EQ(next.status, ExecutionStatus::kQueued) << "the queue's one slot is taken";
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(running.load(), 1);
  release = true;
  ASSERT_TRUE(WaitFor([&] { return StatusOf(*engine, next.id) == ExecutionStatus::kSucceeded; }));
  EXPECT_EQ(most.load(), 1);
  engine->Stop();
  for (const ExecutionId& id : ids) EXPECT_EQ(StatusOf(*engine, id), ExecutionStatus::kSucceeded);
  EXPECT_EQ(ran.load(), static_cast<int>(ids.size()));
}

// L6 with a claim at admission in flight: Stop waits for the lease of a
// reservation made before it (the admission's transaction still in the
// writer) and gives it back, attempt returned, instead of leaving it to
// expire as a started attempt. Driven on the pool itself, which plays the
// store's writer here: reserve, Stop on another thread, deliver later.
TEST_F(EngineTest, L6_StopGivesBackALeaseClaimedAtAdmissionWhileStopping) {
  OneWorkerPool rig;
  ASSERT_NO_FATAL_FAILURE(StartOneWorkerPool("stopping-pool", &rig));
  WorkerPool& pool = *rig.pool;
  // The pool's one worker parks soon after Start. Without prefetch, the
  // reserved slot leaves its claimer no room, whenever its first pass runs
  // (else it could take the execution before the admission's claim below).
  ASSERT_TRUE(WaitFor([&] { return pool.ReserveForAdmission("default"); }));
  // What the writer would do inside the admission: claim it, marked started.
  ASSERT_OK_AND_ASSIGN(AdmitResult admitted, rig.store->Admit(CountRequest()));
  ClaimRequest c;
  c.worker = WorkerId("stopping-pool");
  c.mark_started = true;
  c.slots = {QueueSlot{"default", 1}};
  ASSERT_OK_AND_ASSIGN(std::vector<Lease> leases, rig.store->Claim(c));
  ASSERT_EQ(leases.size(), 1u);
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    pool.Stop();
    stopped = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(stopped.load()) << "Stop returned with a claim at admission on its way";
  pool.DeliverAdmitted(leases.front());
  stopper.join();
  EXPECT_EQ(rig.ran.load(), 0) << "nothing new starts while stopping";
  ASSERT_OK_AND_ASSIGN(Execution e, rig.store->GetExecution(admitted.id));
  EXPECT_EQ(e.status, ExecutionStatus::kQueued) << "released for another worker at once";
  EXPECT_EQ(e.attempt, 0) << "a released lease gives its attempt back";
}

// A slot reserved for a claim at admission is the writer's to fill. Woken
// meanwhile, neither the pool's claimer (one worker: the wake goes to it)
// nor a second, parked worker's own claim (two workers: the wake goes to
// that worker) takes it, which would put one lease more in hand than the
// queue's target; once the reservation is given back, the work runs.
TEST_F(EngineTest, P2_TheClaimerLeavesASlotReservedForAnAdmissionToTheWriter) {
  for (int workers : {1, 2}) {
    SCOPED_TRACE(std::to_string(workers) + " workers");
    OneWorkerPool rig;
    ASSERT_NO_FATAL_FAILURE(
        StartOneWorkerPool("reserving-pool-" + std::to_string(workers), &rig, workers));
    WorkerPool& pool = *rig.pool;
    ASSERT_TRUE(WaitFor([&] { return pool.ReserveForAdmission("default"); }));
    // Time for every worker to park (with two, the wake below goes to the
    // second one's own claim; were it not parked yet, to the claimer).
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ASSERT_OK_AND_ASSIGN(AdmitResult admitted, rig.store->Admit(CountRequest()));
    pool.Wake();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ASSERT_OK_AND_ASSIGN(Execution waiting, rig.store->GetExecution(admitted.id));
    EXPECT_EQ(waiting.status, ExecutionStatus::kQueued) << "claimed into a reserved slot";
    EXPECT_EQ(rig.ran.load(), 0);
    pool.UnreserveAdmission("default");
    pool.Wake();
    ASSERT_TRUE(WaitFor([&] { return rig.ran.load() == 1; }));
    pool.Stop();
  }
}

// Short jobs: a queue's prefetch grows with its completion rate (about 100 ms
// of work in hand), so one claim serves many of them, but never past
// max_prefetch; with max_prefetch = 0 it stays at `prefetch`.
TEST_F(EngineTest, PrefetchGrowsWithTheCompletionRateWithinItsBound) {
  for (int max_prefetch : {40, 0}) {
    SCOPED_TRACE("max_prefetch " + std::to_string(max_prefetch));
    TempDir dir;
    EngineOptions o = Options(1);
    o.database_path = dir.File("te.db");
    o.prefetch = 4;
    o.max_prefetch = max_prefetch;
    ASSERT_OK_AND_ASSIGN(auto engine, Engine::Open(o));
    ASSERT_OK(engine->DefineJob(Job("quick", "quick")));
    std::atomic<std::int64_t> most_in_hand{0};
    Engine* e = engine.get();
    ASSERT_OK(engine->RegisterHandler("quick", [&most_in_hand, e](JobContext&) {
      // Leased by this engine and not yet finished (this one included).
      EngineStats s = e->stats();
      std::int64_t in_hand = s.claimed - s.succeeded;
      std::int64_t prev = most_in_hand.load();
      while (in_hand > prev && !most_in_hand.compare_exchange_weak(prev, in_hand)) {
      }
      return HandlerResult::Success();
    }));
    std::vector<DispatchRequest> batch(3000);
    for (auto& r : batch) r.job = JobName("quick");
    ASSERT_OK_AND_ASSIGN(auto ds, engine->DispatchBatch(batch));
    ASSERT_OK(engine->Start());
    ASSERT_TRUE(WaitFor([&] { return engine->stats().published >= 3000; }, 60s));
    engine->Stop();
    if (max_prefetch > 0) {
      EXPECT_GT(most_in_hand.load(), 1 + 4) << "the prefetch never grew";
      EXPECT_LE(most_in_hand.load(), 1 + max_prefetch);
    } else {
      EXPECT_LE(most_in_hand.load(), 1 + 4);
    }
  }
}

}  // namespace
}  // namespace taskengine
