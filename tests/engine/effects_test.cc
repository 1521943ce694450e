// Issue 3 through the engine API on a real SQLite file: the effect ledger in
// handlers, cancellation, quarantine, replay, and lanes.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "engine/engine_internal.h"
#include "storage/store.h"
#include "taskengine/engine.h"
#include "testing_support/test_util.h"

namespace taskengine {
namespace {

using namespace std::chrono_literals;

class EffectsTest : public ::testing::Test {
 protected:
  std::unique_ptr<Engine> Open(int workers = 2, bool four_eyes = false) {
    EngineOptions o;
    o.database_path = dir_.File("te.db");
    o.worker_threads = workers;
    o.poll_interval_ms = 20;
    o.sweep_interval_ms = 20;
    o.shutdown_grace_ms = 1000;
    o.replay_requires_approval = four_eyes;
    auto e = Engine::Open(o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return std::move(e).value();
  }
  static JobDefinition Job(const std::string& name, const std::string& handler) {
    JobDefinition j;
    j.name = JobName(name);
    j.handler = handler;
    j.retry.backoff_base_ms = 1;
    j.retry.backoff_cap_ms = 5;
    return j;
  }
  static ExecutionStatus StatusOf(Engine& e, ExecutionId id) {
    auto ex = e.GetExecution(id);
    return ex.ok() ? ex->status : ExecutionStatus::kQueued;
  }
  static ExecutionId Dispatch(Engine& e, const std::string& job, const std::string& payload = "{}",
                              const std::string& lane = "", const std::string& requester = "") {
    DispatchRequest r;
    r.job = JobName(job);
    r.payload_json = payload;
    r.lane_key = lane;
    r.requester = requester;
    auto d = e.Dispatch(r);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? d->id : ExecutionId();
  }
  TempDir dir_;
};

// E1/E2 (RD2's essence): the handler performs its effect, then "crashes"
// before acknowledging (here: reports a retryable failure). The retry finds
// the effect already done and skips it: one effect.
TEST_F(EffectsTest, RetryAfterEffectBeforeAcknowledgementLeavesOneEffect) {
  auto engine = Open();
  ASSERT_OK(engine->DefineJob(Job("notify", "notify")));
  std::atomic<int> sent{0};
  std::atomic<int> runs{0};
  ASSERT_OK(engine->RegisterHandler("notify", [&](JobContext& ctx) {
    ++runs;
    EffectResult r = ctx.Effect("send-notice", EffectSink::kNotIdempotent,
                                [&](const std::string& key) -> Result<std::string> {
                                  ++sent;
                                  return "msg-for-" + key;
                                });
    if (!r.done()) return r.ToHandlerResult();
    if (ctx.attempt() == 1) return HandlerResult::Retryable("crash before ack");
    EXPECT_EQ(r.answer, EffectAnswer::kAlreadyDone);
    return HandlerResult::Success("{\"notice\":\"" + r.detail + "\"}");
  }));
  ASSERT_OK(engine->Start());
  ExecutionId id = Dispatch(*engine, "notify");
  ASSERT_TRUE(WaitFor([&] { return StatusOf(*engine, id) == ExecutionStatus::kSucceeded; }));
  EXPECT_EQ(runs.load(), 2);
  EXPECT_EQ(sent.load(), 1);
  ASSERT_OK_AND_ASSIGN(auto effects, StoreOf(*engine).GetEffects(id));
  ASSERT_EQ(effects.size(), 1u);
  EXPECT_TRUE(effects[0].committed);
  EXPECT_EQ(effects[0].key, std::to_string(id.value) + ":send-notice");
  EXPECT_EQ(effects[0].detail, "msg-for-" + effects[0].key);
  // The attempt history names the first attempt and how it ended.
  ASSERT_OK_AND_ASSIGN(auto attempts, StoreOf(*engine).GetAttempts(id));
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].attempt, 1);
  EXPECT_EQ(attempts[0].outcome, ExecutionStatus::kQueued);
  EXPECT_EQ(attempts[0].failure_class, FailureClass::kRetryable);
  EXPECT_EQ(attempts[0].error, "crash before ack");
  EXPECT_FALSE(attempts[0].worker.empty());
  EXPECT_GT(attempts[0].ended_at, 0);
}

// E3: a reservation never confirmed (the worker died mid-effect) is
// ambiguous. A non-idempotent sink quarantines with class ambiguous; nothing
// is performed blindly.
TEST_F(EffectsTest, AmbiguousEffectQuarantinesUnlessTheSinkIsIdempotent) {
  auto engine = Open();
  ASSERT_OK(engine->DefineJob(Job("strict", "strict")));
  ASSERT_OK(engine->DefineJob(Job("idem", "idem")));
  std::atomic<int> strict_sent{0}, idem_sent{0};
  auto make = [](std::atomic<int>& sent, EffectSink sink) {
    return [&sent, sink](JobContext& ctx) {
      if (ctx.attempt() == 1) {
        // Reserve, then "die" before confirming: the effect's outcome is unknown.
        auto r = ctx.ReserveEffect("charge");
        EXPECT_TRUE(r.ok());
        return HandlerResult::Retryable("worker died mid-effect");
      }
      EffectResult r = ctx.Effect("charge", sink, [&](const std::string&) -> Result<std::string> {
        ++sent;
        return std::string("charged");
      });
      return r.done() ? HandlerResult::Success() : r.ToHandlerResult();
    };
  };
  ASSERT_OK(engine->RegisterHandler("strict", make(strict_sent, EffectSink::kNotIdempotent)));
  ASSERT_OK(engine->RegisterHandler("idem", make(idem_sent, EffectSink::kIdempotent)));
  ASSERT_OK(engine->Start());
  ExecutionId strict = Dispatch(*engine, "strict");
  ExecutionId idem = Dispatch(*engine, "idem");
  ASSERT_TRUE(WaitFor([&] {
    return StatusOf(*engine, strict) == ExecutionStatus::kQuarantined &&
           StatusOf(*engine, idem) == ExecutionStatus::kSucceeded;
  }));
  EXPECT_EQ(strict_sent.load(), 0);
  EXPECT_EQ(idem_sent.load(), 1);  // performed with the effect key as the sink's idempotency key
  ASSERT_OK_AND_ASSIGN(Execution e, engine->GetExecution(strict));
  EXPECT_EQ(e.failure_class, FailureClass::kAmbiguous);
}

// C1/RD7: cancel while running before any effect -> canceled; cancel after
// the notice was sent -> partially_canceled with the escaped notice listed.
TEST_F(EffectsTest, CancelRunningBeforeAndAfterAnEffect) {
  auto engine = Open();
  ASSERT_OK(engine->DefineJob(Job("render", "render")));
  ASSERT_OK(engine->RegisterHandler("render", [&](JobContext& ctx) {
    if (ctx.payload_json().find("correct") != std::string::npos) return HandlerResult::Success();
    const bool send_first = ctx.payload_json().find("send") != std::string::npos;
    if (send_first) {
      EffectResult r =
          ctx.Effect("notice", EffectSink::kNotIdempotent,
                     [](const std::string&) -> Result<std::string> { return std::string("sent"); });
      if (!r.done()) return r.ToHandlerResult();
    }
    while (ctx.Heartbeat() == LeaseState::kActive) std::this_thread::sleep_for(5ms);
    EffectResult late = ctx.Effect("artifact", EffectSink::kNotIdempotent,
                                   [](const std::string&) -> Result<std::string> {
                                     ADD_FAILURE() << "no new effect may start after cancel";
                                     return std::string("x");
                                   });
    EXPECT_EQ(late.answer, EffectAnswer::kCanceled);
    return late.ToHandlerResult();
  }));
  ASSERT_OK(engine->Start());
  ExecutionId quiet = Dispatch(*engine, "render", R"({"mode":"quiet"})");
  ExecutionId loud = Dispatch(*engine, "render", R"({"mode":"send"})");
  ASSERT_TRUE(WaitFor([&] {
    auto fx = StoreOf(*engine).GetEffects(loud);
    return StatusOf(*engine, quiet) == ExecutionStatus::kRunning && fx.ok() && fx->size() == 1 &&
           (*fx)[0].committed;
  }));
  ASSERT_OK_AND_ASSIGN(ExecutionStatus s1, engine->Cancel(quiet, "ops", "wrong input"));
  EXPECT_EQ(s1, ExecutionStatus::kRunning);  // requested; the worker stops at its next heartbeat
  ASSERT_OK(engine->Cancel(loud, "ops", "customer asked"));
  ASSERT_TRUE(WaitFor([&] {
    return StatusOf(*engine, quiet) == ExecutionStatus::kCanceled &&
           StatusOf(*engine, loud) == ExecutionStatus::kPartiallyCanceled;
  }));
  ASSERT_OK_AND_ASSIGN(auto escaped, StoreOf(*engine).GetEffects(loud));
  ASSERT_EQ(escaped.size(), 1u);
  EXPECT_EQ(escaped[0].name, "notice");
  EXPECT_GT(escaped[0].committed_at, 0);
  AuditFilter f;
  f.target = "execution:" + std::to_string(loud.value);
  ASSERT_OK_AND_ASSIGN(auto audit, StoreOf(*engine).ListAudit(f));
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_EQ(audit[0].actor, "ops");
  EXPECT_EQ(audit[0].reason, "customer asked");
  // C2: a corrective execution linked to the original.
  DispatchRequest fix;
  fix.job = JobName("render");
  fix.payload_json = R"({"mode":"quiet","correct":true})";
  fix.parent = loud;
  ASSERT_OK_AND_ASSIGN(DispatchResult corrective, engine->Dispatch(fix));
  ASSERT_OK_AND_ASSIGN(Execution c, engine->GetExecution(corrective.id));
  EXPECT_EQ(c.parent, loud);
}

// C1: a cancel made through this engine reaches a handler running here at
// once (its next checkpoint), not only at the next heartbeat (lease / 3).
TEST_F(EffectsTest, InProcessCancelIsSeenAtTheNextCheckpoint) {
  auto engine = Open(1);
  JobDefinition j = Job("long", "long");
  j.lease_ms = 60'000;  // heartbeats every 20 s: far beyond this test
  ASSERT_OK(engine->DefineJob(j));
  std::atomic<bool> started{false};
  ASSERT_OK(engine->RegisterHandler("long", [&](JobContext& ctx) {
    started = true;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (ctx.Checkpoint() == LeaseState::kCancelRequested) return HandlerResult::Canceled();
      std::this_thread::sleep_for(2ms);
    }
    return HandlerResult::Success();
  }));
  ASSERT_OK(engine->Start());
  ExecutionId id = Dispatch(*engine, "long");
  ASSERT_TRUE(WaitFor([&] { return started.load(); }));
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_OK(engine->Cancel(id, "ops", "stop"));
  ASSERT_TRUE(WaitFor([&] { return StatusOf(*engine, id) == ExecutionStatus::kCanceled; }, 5s));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

// Q1/RD4: an unsupported payload schema among valid jobs is quarantined after
// its bounded attempts (3) while the valid ones complete.
TEST_F(EffectsTest, UnsupportedSchemaQuarantinesAfterBoundedAttemptsOthersComplete) {
  auto engine = Open();
  JobDefinition j = Job("report", "report");
  j.accepted_schema_versions = {2, 3};
  ASSERT_OK(engine->DefineJob(j));
  std::atomic<int> ran{0};
  ASSERT_OK(engine->RegisterHandler("report", [&](JobContext&) {
    ++ran;
    return HandlerResult::Success();
  }));
  ASSERT_OK(engine->Start());
  ExecutionId old = Dispatch(*engine, "report", R"({"schema_version":1,"case":47})");
  std::vector<ExecutionId> valid;
  for (int i = 0; i < 46; ++i) {
    valid.push_back(
        Dispatch(*engine, "report", "{\"schema_version\":2,\"i\":" + std::to_string(i) + "}"));
  }
  ASSERT_TRUE(WaitFor([&] {
    for (ExecutionId id : valid) {
      if (StatusOf(*engine, id) != ExecutionStatus::kSucceeded) return false;
    }
    return StatusOf(*engine, old) == ExecutionStatus::kQuarantined;
  }));
  EXPECT_EQ(ran.load(), 46);
  ASSERT_OK_AND_ASSIGN(Execution e, engine->GetExecution(old));
  EXPECT_EQ(e.attempt, 3);
  EXPECT_EQ(e.failure_class, FailureClass::kPermanent);
  EXPECT_NE(e.error.find("unsupported payload schema version 1"), std::string::npos) << e.error;
}

// R1/R2/RD5: replaying a quarantined execution twice keeps its id and effect
// keys: one effect. The audit has both replays. A requester whose access was
// revoked blocks the replay.
TEST_F(EffectsTest, ReplayTwiceYieldsOneEffectAndIsAudited) {
  auto engine = Open();
  ASSERT_OK(engine->DefineJob(Job("digest", "digest")));
  std::atomic<int> sent{0};
  std::atomic<int> runs{0};
  ASSERT_OK(engine->RegisterHandler("digest", [&](JobContext& ctx) {
    ++runs;
    EffectResult r = ctx.Effect("mail", EffectSink::kNotIdempotent,
                                [&](const std::string&) -> Result<std::string> {
                                  ++sent;
                                  return std::string("ok");
                                });
    if (!r.done()) return r.ToHandlerResult();
    return HandlerResult::Permanent("template missing");  // quarantine after the effect
  }));
  ASSERT_OK(engine->Start());
  ExecutionId id = Dispatch(*engine, "digest", "{}", "", "alice");
  ASSERT_TRUE(WaitFor([&] { return StatusOf(*engine, id) == ExecutionStatus::kQuarantined; }));
  // alice holds no grant: the replay is refused and nothing changes.
  auto refused = engine->Replay(id, {"ops", "template fixed"});
  EXPECT_EQ(refused.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("alice"), std::string::npos);
  ASSERT_OK(StoreOf(*engine).Grant("alice", "*"));
  for (int i = 0; i < 2; ++i) {
    ASSERT_OK_AND_ASSIGN(ReplayResult r,
                         engine->Replay(id, {"ops", "template fixed " + std::to_string(i)}));
    EXPECT_EQ(r.outcome, ReplayOutcome::kReplayed);
    ASSERT_TRUE(WaitFor([&] {
      auto e = engine->GetExecution(id);
      return e.ok() && e->status == ExecutionStatus::kQuarantined && runs.load() == 2 + i;
    }));
  }
  EXPECT_EQ(sent.load(), 1);
  AuditFilter f;
  f.target = "execution:" + std::to_string(id.value);
  ASSERT_OK_AND_ASSIGN(auto audit, StoreOf(*engine).ListAudit(f));
  ASSERT_EQ(audit.size(), 2u);
  EXPECT_EQ(audit[0].action, "execution.replay");
  EXPECT_EQ(audit[0].reason, "template fixed 1");
  EXPECT_EQ(audit[1].reason, "template fixed 0");
}

TEST_F(EffectsTest, FourEyesReplayNeedsASecondOperator) {
  auto engine = Open(1, /*four_eyes=*/true);
  ASSERT_OK(engine->DefineJob(Job("fragile", "fragile")));
  std::atomic<int> runs{0};
  ASSERT_OK(engine->RegisterHandler("fragile", [&](JobContext&) {
    return ++runs == 1 ? HandlerResult::Permanent("bad") : HandlerResult::Success();
  }));
  ASSERT_OK(engine->Start());
  ExecutionId id = Dispatch(*engine, "fragile");
  ASSERT_TRUE(WaitFor([&] { return StatusOf(*engine, id) == ExecutionStatus::kQuarantined; }));
  ASSERT_OK_AND_ASSIGN(ReplayResult pending, engine->Replay(id, {"carol", "fixed"}));
  EXPECT_EQ(pending.outcome, ReplayOutcome::kPendingApproval);
  EXPECT_EQ(StatusOf(*engine, id), ExecutionStatus::kQuarantined);
  EXPECT_EQ(engine->ApproveReplay(id, "carol").status().code(), ErrorCode::kConflict);
  ASSERT_OK_AND_ASSIGN(ReplayResult approved, engine->ApproveReplay(id, "dave"));
  EXPECT_EQ(approved.outcome, ReplayOutcome::kReplayed);
  ASSERT_TRUE(WaitFor([&] { return StatusOf(*engine, id) == ExecutionStatus::kSucceeded; }));
}

// O1: one lane runs one execution at a time, in admission order; a
// quarantined head blocks its lane (others keep flowing) until replayed.
TEST_F(EffectsTest, LaneSerializesInOrderAndAFailedHeadBlocksOnlyItsLane) {
  auto engine = Open(4);
  JobDefinition j = Job("meeting", "meeting");
  j.lane_template = "meeting:{meeting_id}";
  ASSERT_OK(engine->DefineJob(j));
  std::mutex mu;
  std::vector<std::string> order;
  std::atomic<int> running_a{0};
  std::atomic<bool> overlap{false};
  std::atomic<bool> fail_step2{true};
  ASSERT_OK(engine->RegisterHandler("meeting", [&](JobContext& ctx) {
    const bool lane_a = ctx.payload_json().find("\"meeting_id\":1") != std::string::npos;
    if (lane_a && ++running_a > 1) overlap = true;
    std::this_thread::sleep_for(5ms);
    {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(ctx.payload_json());
    }
    if (lane_a) --running_a;
    if (ctx.payload_json().find("\"step\":2") != std::string::npos && lane_a && fail_step2) {
      return HandlerResult::Permanent("step 2 broke");
    }
    return HandlerResult::Success();
  }));
  std::vector<ExecutionId> a, b;
  for (int step = 1; step <= 4; ++step) {
    a.push_back(
        Dispatch(*engine, "meeting", "{\"meeting_id\":1,\"step\":" + std::to_string(step) + "}"));
    b.push_back(
        Dispatch(*engine, "meeting", "{\"meeting_id\":2,\"step\":" + std::to_string(step) + "}"));
  }
  ASSERT_OK(engine->Start());
  ASSERT_TRUE(WaitFor([&] {
    for (ExecutionId id : b) {
      if (StatusOf(*engine, id) != ExecutionStatus::kSucceeded) return false;
    }
    return StatusOf(*engine, a[1]) == ExecutionStatus::kQuarantined;
  }));
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(StatusOf(*engine, a[0]), ExecutionStatus::kSucceeded);
  EXPECT_EQ(StatusOf(*engine, a[2]), ExecutionStatus::kQueued);  // blocked behind the head
  EXPECT_EQ(StatusOf(*engine, a[3]), ExecutionStatus::kQueued);
  ASSERT_OK_AND_ASSIGN(LaneStatus lane, StoreOf(*engine).GetLane(TenantId(), "meeting:1"));
  EXPECT_TRUE(lane.blocked);
  EXPECT_EQ(lane.head, a[1]);
  fail_step2 = false;
  ASSERT_OK(engine->Replay(a[1], {"ops", "fixed step 2"}));
  ASSERT_TRUE(WaitFor([&] {
    for (ExecutionId id : a) {
      if (StatusOf(*engine, id) != ExecutionStatus::kSucceeded) return false;
    }
    return true;
  }));
  EXPECT_FALSE(overlap.load());
  std::lock_guard<std::mutex> lock(mu);
  std::vector<int> steps_a;
  for (const std::string& p : order) {
    if (p.find("\"meeting_id\":1") != std::string::npos) {
      steps_a.push_back(p[p.find("\"step\":") + 7] - '0');
    }
  }
  EXPECT_EQ(steps_a, (std::vector<int>{1, 2, 2, 3, 4}));
}

TEST_F(EffectsTest, LaneTemplateNeedsItsField) {
  auto engine = Open(0);
  JobDefinition j = Job("meeting", "meeting");
  j.lane_template = "meeting:{meeting_id}";
  ASSERT_OK(engine->DefineJob(j));
  DispatchRequest r;
  r.job = JobName("meeting");
  r.payload_json = R"({"other":1})";
  auto d = engine->Dispatch(r);
  EXPECT_EQ(d.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("meeting_id"), std::string::npos);
}

}  // namespace
}  // namespace taskengine
