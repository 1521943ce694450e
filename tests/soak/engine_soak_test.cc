// A shorter randomized soak through the real Engine (include/taskengine/
// engine.h): worker threads run handlers that perform their effects with
// JobContext::Effect, failing at random (the sink refuses, the sink times
// out after sending, the handler fails with any class or throws), while the
// test thread dispatches (single and batch, reused idempotency keys, lanes,
// delays, unsupported payload schemas), moves a FakeClock (sometimes past
// every lease, so the sweeper takes executions away from running handlers),
// cancels, and replays as a perfect operator. Then it drains and checks
// invariants L and D (quality.md §2).
//
// The seed fixes every random choice of the test thread and the handlers'
// random source, but thread interleavings still vary between runs: a failure
// names the seed, and the store soak (store_soak_test.cc) is the place to
// reproduce a contract violation deterministically.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/canonical_json.h"
#include "engine/engine_internal.h"
#include "soak/soak_support.h"
#include "storage/store.h"
#include "taskengine/engine.h"
#include "testing_support/test_util.h"

namespace taskengine {
namespace {

using namespace std::chrono_literals;
using soak::AdmissionModel;

constexpr std::uint64_t kDefaultSeed = 20260201;
// About 3-4 s of real time per run in a Debug build.
constexpr int kDefaultSteps = 3000;
constexpr int kDefaultRuns = 2;
constexpr auto kDrainLimit = 90s;

bool IdempotentSink(const std::string& name) { return name.rfind("idem.", 0) == 0; }

struct EngineSoakStats {
  int dispatch_calls = 0, batch_calls = 0, bad_batches = 0;
  int created = 0, duplicates = 0, conflicts = 0, delayed = 0, laned = 0, bad_schema = 0;
  int clock_jumps = 0, cancels = 0, cancel_refused = 0;
  int replays = 0, replay_assume_done = 0, replay_assume_not_done = 0, replay_keep = 0;
  int replay_skipped_in_flight = 0;
  std::atomic<int> handler_runs{0}, sink_refused{0}, sink_unknown{0}, handler_failures{0};
  std::atomic<int> handler_throws{0}, handler_cancels{0};
  std::atomic<int> died_after_reserve{0}, died_after_effect{0}, slow_handlers{0};
};

class EngineSoak {
 public:
  EngineSoak(std::uint64_t seed, int steps)
      : seed_(seed), steps_(steps), rng_(seed), handler_rng_(seed ^ 0xabc), jitter_(seed) {}

  // Returns the number of invariant violations (each already reported).
  int Run() {
    const auto started = std::chrono::steady_clock::now();
    if (!Setup()) return violations_;
    for (step_ = 0; step_ < steps_ && violations_ == 0; ++step_) Step();
    Drain();
    engine_->Stop();
    if (violations_ == 0) FinalChecks();
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    PrintSummary(elapsed);
    return violations_;
  }

 private:
  void Violation(const std::string& what) {
    ++violations_;
    ADD_FAILURE() << what << "\n  engine soak seed=" << seed_ << " step=" << step_
                  << " (TASKENGINE_SOAK_SEED=" << seed_ << " TASKENGINE_SOAK_RUNS=1)";
  }

  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p; }
  // The handlers' shared random source (handlers run on several threads).
  bool HandlerChance(double p) {
    std::lock_guard<std::mutex> lock(handler_rng_mu_);
    return std::uniform_real_distribution<double>(0.0, 1.0)(handler_rng_) < p;
  }

  bool Setup() {
    EngineOptions o;
    o.database_path = dir_.File("engine-soak.db");
    o.sync = SyncMode::kNormal;  // no process dies here; durability is not under test
    o.clock = &clock_;
    o.random = &jitter_;
    o.worker_threads = 3;
    o.queues = {QueueConfig{"default", 0, 0}, QueueConfig{"billing", 1, 0}};
    o.poll_interval_ms = 5;
    o.sweep_interval_ms = 5;
    o.sweep_batch = 3;
    o.claim_batch = 4;
    o.prefetch = 2;
    o.shutdown_grace_ms = 2'000;
    o.worker_id = "engine-soak";
    auto engine = Engine::Open(o);
    if (!engine.ok()) {
      Violation("Engine::Open: " + engine.status().ToString());
      return false;
    }
    engine_ = std::move(engine).value();
    JobDefinition mail;
    mail.name = JobName("soak.mail");
    mail.handler = "soak";
    mail.lease_ms = 3'000;
    mail.retry.max_attempts = 4;
    mail.retry.backoff_base_ms = 50;
    mail.retry.backoff_cap_ms = 400;
    JobDefinition charge = mail;
    charge.name = JobName("soak.charge");
    charge.queue = "billing";
    charge.lease_ms = 2'000;
    charge.retry.max_attempts = 3;
    charge.retry.max_ambiguous_attempts = 2;
    charge.retry.max_permanent_attempts = 2;
    JobDefinition report = mail;
    report.name = JobName("soak.report");
    report.accepted_schema_versions = {2};
    report.retry.max_unsupported_schema_attempts = 2;
    for (const JobDefinition& j : {mail, charge, report}) {
      if (Status s = engine_->DefineJob(j); !s.ok()) {
        Violation("DefineJob: " + s.ToString());
        return false;
      }
      jobs_.push_back(j.name.value);
    }
    // The requester "app" may act for every tenant, so replays pass R1's recheck.
    if (Status s = StoreOf(*engine_).Grant("app", "*"); !s.ok()) {
      Violation("Grant: " + s.ToString());
      return false;
    }
    Status reg = engine_->RegisterHandler("soak", [this](JobContext& ctx) { return Handle(ctx); });
    if (!reg.ok() || !engine_->Start().ok()) {
      Violation("RegisterHandler/Start failed");
      return false;
    }
    return true;
  }

  // --- the handler (runs on worker threads) ---

  HandlerResult Handle(JobContext& ctx) {
    ++stats_.handler_runs;
    world_.Enter(ctx.execution_id());
    struct Leave {
      soak::EffectWorld& w;
      ExecutionId id;
      ~Leave() { w.Leave(id); }
    } leave{world_, ctx.execution_id()};
    const bool calm = calm_.load();
    std::vector<std::string> effects;
    auto doc = nlohmann::json::parse(ctx.payload_json(), nullptr, false);
    if (doc.is_object() && doc.contains("fx") && doc["fx"].is_string()) {
      std::stringstream in(doc["fx"].get<std::string>());
      for (std::string name; std::getline(in, name, ',');) effects.push_back(name);
    }
    if (!calm && HandlerChance(0.1)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1 + seed_ % 3));
    }
    for (const std::string& name : effects) {
      if (HandlerChance(0.2)) {
        const LeaseState state = ctx.Heartbeat();
        if (state == LeaseState::kCancelRequested) {
          ++stats_.handler_cancels;
          return HandlerResult::Canceled();
        }
        if (state == LeaseState::kLost) return HandlerResult::Retryable("claim lost");
      }
      const bool idempotent = IdempotentSink(name);
      if (!calm && HandlerChance(0.02)) {
        // The worker dies after reserving the effect, before performing it.
        ++stats_.died_after_reserve;
        (void)ctx.ReserveEffect(name);
        return HandlerResult::Retryable("worker died after reserving " + name);
      }
      if (!calm && HandlerChance(0.02)) {
        // The worker dies between the effect and its commit (the effect happened).
        ++stats_.died_after_effect;
        auto reserved = ctx.ReserveEffect(name);
        if (reserved.ok() && reserved->answer == EffectAnswer::kProceed) {
          world_.Perform(reserved->key, idempotent);
        }
        return HandlerResult::Retryable("worker died after performing " + name);
      }
      if (!calm && HandlerChance(0.02)) {
        // A slow handler: the test thread may move the clock past its lease
        // meanwhile, and the sweeper give its execution to another claim.
        ++stats_.slow_handlers;
        std::this_thread::sleep_for(20ms);
      }
      EffectResult r = ctx.Effect(
          name, idempotent ? EffectSink::kIdempotent : EffectSink::kNotIdempotent,
          [&](const std::string& key) -> Result<std::string> {
            if (!calm && HandlerChance(0.05)) {
              ++stats_.sink_refused;
              return Unavailable("sink refused the connection");  // certainly not performed
            }
            if (!calm && HandlerChance(0.04)) {
              ++stats_.sink_unknown;
              world_.Perform(key, idempotent);
              return Internal("sink timed out after sending");  // performed; outcome unknown
            }
            if (!calm && HandlerChance(0.03)) std::this_thread::sleep_for(2ms);  // a slow sink
            world_.Perform(key, idempotent);
            return "sent:" + key;
          });
      if (!r.done()) return r.ToHandlerResult();
    }
    if (!calm) {
      if (HandlerChance(0.06)) {
        ++stats_.handler_failures;
        return HandlerResult::Retryable("flaky");
      }
      if (HandlerChance(0.02)) {
        ++stats_.handler_failures;
        return HandlerResult::Permanent("bad input");
      }
      if (HandlerChance(0.02)) {
        ++stats_.handler_failures;
        return HandlerResult::Ambiguous("unsure");
      }
      if (HandlerChance(0.015)) {
        ++stats_.handler_throws;
        throw std::runtime_error("handler blew up");
      }
    }
    if (ctx.Checkpoint() == LeaseState::kCancelRequested && HandlerChance(0.5)) {
      ++stats_.handler_cancels;
      return HandlerResult::Canceled();
    }
    return HandlerResult::Success("{\"effects\":" + std::to_string(effects.size()) + "}");
  }

  // --- the test thread's world ---

  struct Draft {
    DispatchRequest request;
    std::string identity;
    std::vector<std::string> effects;
    bool bad_schema = false;
  };

  Draft NewDraft() {
    Draft d;
    const std::string job =
        jobs_[static_cast<std::size_t>(Uniform(0, static_cast<int>(jobs_.size()) - 1))];
    std::vector<std::string> names = {"notice", "charge", "artifact", "idem.webhook", "idem.index"};
    std::shuffle(names.begin(), names.end(), rng_);
    names.resize(static_cast<std::size_t>(Uniform(1, 3)));
    std::string fx;
    for (const std::string& n : names) fx += (fx.empty() ? "" : ",") + n;
    std::string payload = "{\"fx\":\"" + fx + "\",\"n\":" + std::to_string(++payload_counter_);
    if (job == "soak.report") {
      d.bad_schema = Chance(0.15);
      payload += ",\"schema_version\":" + std::string(d.bad_schema ? "1" : "2");
    }
    payload += "}";
    std::string requester = "app";
    std::string key;
    const int k = Uniform(0, 99);
    if (k < 35) {
      key = "k-" + std::to_string(++key_counter_);
    } else if (k < 55) {
      std::vector<std::string> used = model_.KeysOf(job);
      if (!used.empty()) {
        key = used[static_cast<std::size_t>(Uniform(0, static_cast<int>(used.size()) - 1))];
        if (Chance(0.6)) {
          const std::string identity = model_.IdentityOf(job, key);
          const std::size_t nl = identity.rfind('\n');
          payload = identity.substr(0, nl);
          requester = identity.substr(nl + 1);
        }
      }
    }
    auto canonical = CanonicalizeJson(payload);
    TE_CHECK(canonical.ok());
    d.effects = names;
    d.identity = *canonical + "\n" + requester;
    d.request.job = JobName(job);
    d.request.payload_json = payload;
    d.request.requester = requester;
    d.request.idempotency_key = key;
    if (Chance(0.1)) d.request.delay_ms = Uniform(100, 3'000);
    if (job == "soak.mail" && Chance(0.2)) {
      d.request.lane_key = "lane-" + std::to_string(Uniform(1, 3));
    }
    return d;
  }

  void Acknowledge(const Draft& d, AdmissionModel::Outcome outcome, ExecutionId id) {
    const std::string v =
        model_.Record(d.request.job.value, d.request.idempotency_key, d.identity, outcome, id);
    if (!v.empty()) return Violation("L: " + v);
    switch (outcome) {
      case AdmissionModel::Outcome::kCreated:
        ++stats_.created;
        if (d.request.delay_ms > 0) ++stats_.delayed;
        if (!d.request.lane_key.empty()) ++stats_.laned;
        if (d.bad_schema) ++stats_.bad_schema;
        expectations_.push_back({id, d.effects});
        break;
      case AdmissionModel::Outcome::kDuplicate:
        ++stats_.duplicates;
        break;
      case AdmissionModel::Outcome::kConflict:
        ++stats_.conflicts;
        break;
    }
  }

  void DispatchOne() {
    Draft d = NewDraft();
    ++stats_.dispatch_calls;
    auto r = engine_->Dispatch(d.request);
    if (!r.ok()) {
      if (r.status().code() == ErrorCode::kConflict) {
        return Acknowledge(d, AdmissionModel::Outcome::kConflict, ExecutionId());
      }
      return Violation("Dispatch failed: " + r.status().ToString());
    }
    Acknowledge(
        d, r->created ? AdmissionModel::Outcome::kCreated : AdmissionModel::Outcome::kDuplicate,
        r->id);
  }

  void DispatchMany() {
    std::vector<Draft> drafts(static_cast<std::size_t>(Uniform(2, 6)));
    for (Draft& d : drafts) d = NewDraft();
    std::vector<DispatchRequest> requests;
    for (const Draft& d : drafts) requests.push_back(d.request);
    const bool bad = Chance(0.1);
    if (bad) {
      DispatchRequest undefined = requests.front();
      undefined.job = JobName("soak.undefined");
      requests.push_back(undefined);
    }
    ++stats_.batch_calls;
    const ExecutionId newest = NewestId();
    auto r = engine_->DispatchBatch(requests);
    if (bad) {
      ++stats_.bad_batches;
      if (r.ok() || NewestId() != newest) {
        Violation("A5: a batch with an undefined job admitted something");
      }
      return;
    }
    if (!r.ok() || r->size() != drafts.size()) {
      return Violation("DispatchBatch failed: " +
                       (r.ok() ? std::string("wrong size") : r.status().ToString()));
    }
    for (std::size_t i = 0; i < drafts.size() && violations_ == 0; ++i) {
      const DispatchResult& x = (*r)[i];
      Acknowledge(drafts[i],
                  x.conflict  ? AdmissionModel::Outcome::kConflict
                  : x.created ? AdmissionModel::Outcome::kCreated
                              : AdmissionModel::Outcome::kDuplicate,
                  x.id);
    }
  }

  ExecutionId NewestId() {
    ExecutionFilter f;
    f.limit = 1;
    auto page = StoreOf(*engine_).ListExecutions(f);
    return page.ok() && !page->items.empty() ? page->items.front().id : ExecutionId();
  }

  void Cancel() {
    if (model_.created().empty()) return;
    // Mostly recent executions, which are likely queued or running.
    const int n = static_cast<int>(model_.created().size());
    const int from = Chance(0.7) ? std::max(0, n - 10) : 0;
    const ExecutionId id = model_.created()[static_cast<std::size_t>(Uniform(from, n - 1))];
    auto r = engine_->Cancel(id, "ops", "engine soak");
    if (r.ok()) {
      ++stats_.cancels;
    } else if (r.status().code() == ErrorCode::kConflict) {
      ++stats_.cancel_refused;  // already terminal
    } else {
      Violation("Cancel failed: " + r.status().ToString());
    }
  }

  std::vector<Execution> Stuck() {
    std::vector<Execution> out;
    for (ExecutionStatus s : {ExecutionStatus::kFailed, ExecutionStatus::kQuarantined}) {
      ExecutionFilter f;
      f.status = s;
      f.limit = 200;
      auto page = StoreOf(*engine_).ListExecutions(f);
      if (page.ok()) out.insert(out.end(), page->items.begin(), page->items.end());
    }
    return out;
  }

  // The perfect operator: resolves unconfirmed effects by what the world
  // says, and only when no handler of the execution is running (one could
  // still be about to perform an effect it reserved). Returns whether it
  // replayed. `or_cancel`: when it cannot resolve (a mixed world), cancel.
  bool Replay(ExecutionId id, bool cautious, bool or_cancel) {
    return world_.Locked([&] {
      if (world_.HandlersLocked(id) > 0) {
        ++stats_.replay_skipped_in_flight;
        return false;
      }
      auto effects = StoreOf(*engine_).GetEffects(id);
      if (!effects.ok()) return false;
      AmbiguousResolution how = soak::PerfectResolution(world_, *effects);
      bool unconfirmed = false;
      for (const EffectRecord& e : *effects) unconfirmed |= !e.committed;
      if (unconfirmed && how == AmbiguousResolution::kKeep && or_cancel) {
        (void)engine_->Cancel(id, "ops", "cannot resolve");
        return false;
      }
      if (cautious) how = AmbiguousResolution::kKeep;
      auto r = engine_->Replay(id, ReplayOptions{"ops", "engine soak", how});
      if (!r.ok()) {
        // The execution moved on meanwhile (a concurrent cancel cannot
        // happen: this thread is the only operator), so this is a failure.
        Violation("Replay of execution " + std::to_string(id.value) +
                  " failed: " + r.status().ToString());
        return false;
      }
      ++stats_.replays;
      how == AmbiguousResolution::kKeep         ? ++stats_.replay_keep
      : how == AmbiguousResolution::kAssumeDone ? ++stats_.replay_assume_done
                                                : ++stats_.replay_assume_not_done;
      return true;
    });
  }

  void OperatorReplay() {
    std::vector<Execution> stuck = Stuck();
    if (stuck.empty()) return;
    const Execution& e =
        stuck[static_cast<std::size_t>(Uniform(0, static_cast<int>(stuck.size()) - 1))];
    Replay(e.id, /*cautious=*/Chance(0.25), /*or_cancel=*/false);
  }

  void AdvanceClock() {
    if (Chance(0.05)) {
      ++stats_.clock_jumps;
      clock_.Advance(std::chrono::milliseconds(Uniform(2'000, 6'000)));  // past every lease
    } else {
      clock_.Advance(std::chrono::milliseconds(Uniform(1, 30)));
    }
  }

  void Step() {
    const int roll = Uniform(0, 99);
    if (roll < 30) return DispatchOne();
    if (roll < 40) return DispatchMany();
    if (roll < 70) return AdvanceClock();
    if (roll < 76) return Cancel();
    if (roll < 82) return OperatorReplay();
    std::this_thread::sleep_for(std::chrono::milliseconds(Uniform(1, 3)));
  }

  void Drain() {
    calm_ = true;
    const auto deadline = std::chrono::steady_clock::now() + kDrainLimit;
    for (int i = 0; std::chrono::steady_clock::now() < deadline; ++i) {
      clock_.Advance(100ms);
      std::this_thread::sleep_for(1ms);
      if (i % 25 != 0) continue;
      // Lanes whose head failed or was quarantined wait for the operator.
      auto lanes = StoreOf(*engine_).ListLanes({.limit = 100});
      if (lanes.ok()) {
        for (const LaneStatus& lane : *lanes) {
          if (lane.blocked) Replay(lane.head, /*cautious=*/false, /*or_cancel=*/true);
        }
      }
      auto depths = StoreOf(*engine_).QueueDepths();
      if (!depths.ok()) continue;
      std::int64_t open = 0;
      for (const QueueDepth& d : *depths) open += d.queued + d.running;
      if (open == 0) return;
    }
    Violation("the engine did not drain within " + std::to_string(kDrainLimit.count()) + " s");
  }

  void FinalChecks() {
    for (const std::string& v : soak::CheckAdmissions(StoreOf(*engine_), model_)) Violation(v);
    auto all = soak::AllExecutions(StoreOf(*engine_));
    if (!all.ok()) return Violation("AllExecutions: " + all.status().ToString());
    for (const Execution& e : *all) {
      if (e.status == ExecutionStatus::kRunning) {
        Violation("S: execution " + std::to_string(e.id.value) + " still running");
      }
      if (e.attempt > e.retry.max_attempts) {
        Violation("A: execution " + std::to_string(e.id.value) + " beyond max_attempts");
      }
    }
    histogram_ = soak::StatusHistogram(*all);
    report_ = soak::CheckEffects(StoreOf(*engine_), expectations_, world_.Snapshot(), {});
    for (const std::string& v : report_.violations) Violation(v);
  }

  void PrintSummary(double elapsed) {
    const EngineStats es = engine_->stats();
    std::ostringstream o;
    o << "engine soak seed=" << seed_ << " steps=" << steps_ << ": executions=" << stats_.created
      << " (dispatch calls " << stats_.dispatch_calls << ", batches " << stats_.batch_calls
      << ", refused batches " << stats_.bad_batches << ", duplicates " << stats_.duplicates
      << ", conflicts " << stats_.conflicts << ", delayed " << stats_.delayed << ", laned "
      << stats_.laned << ", bad schema " << stats_.bad_schema << ")"
      << " claims=" << es.claimed << " handler_runs=" << stats_.handler_runs.load()
      << " faults{sink_refused=" << stats_.sink_refused.load()
      << " sink_unknown=" << stats_.sink_unknown.load()
      << " handler_failures=" << stats_.handler_failures.load()
      << " throws=" << stats_.handler_throws.load()
      << " died_after_reserve=" << stats_.died_after_reserve.load()
      << " died_after_effect=" << stats_.died_after_effect.load()
      << " slow_handlers=" << stats_.slow_handlers.load() << " clock_jumps=" << stats_.clock_jumps
      << "}"
      << " stale=" << es.stale << " published=" << es.published << " cancels=" << stats_.cancels
      << " (refused " << stats_.cancel_refused << ", acknowledged by handlers "
      << stats_.handler_cancels.load() << ")"
      << " replays=" << stats_.replays << " (assume_done " << stats_.replay_assume_done
      << ", assume_not_done " << stats_.replay_assume_not_done << ", keep " << stats_.replay_keep
      << ", waited for a running handler " << stats_.replay_skipped_in_flight << ")"
      << " effects{performs=" << world_.performs() << " deduplicated=" << world_.deduplicated()
      << " committed=" << report_.committed << " unconfirmed_at_end=" << report_.unconfirmed
      << " (happened " << report_.unconfirmed_happened << ") escaped=" << report_.escaped
      << " canceled_with_unconfirmed=" << report_.canceled_with_unconfirmed << " (happened "
      << report_.canceled_with_unconfirmed_happened << ")}"
      << " statuses{" << histogram_ << "} violations=" << violations_;
    o.setf(std::ios::fixed);
    o.precision(1);
    o << " elapsed=" << elapsed << "s";
    std::cout << o.str() << std::endl;
  }

  const std::uint64_t seed_;
  const int steps_;
  std::mt19937_64 rng_;
  std::mutex handler_rng_mu_;
  std::mt19937_64 handler_rng_;  // guarded by handler_rng_mu_
  SeededRandom jitter_;
  FakeClock clock_;
  TempDir dir_;
  std::unique_ptr<Engine> engine_;
  std::vector<std::string> jobs_;
  soak::EffectWorld world_;
  AdmissionModel model_;
  std::vector<soak::EffectExpectation> expectations_;
  EngineSoakStats stats_;
  soak::EffectCheckReport report_;
  std::string histogram_;
  std::atomic<bool> calm_{false};
  int violations_ = 0;
  int step_ = 0;
  int payload_counter_ = 0;
  int key_counter_ = 0;
};

TEST(EngineSoakTest, InvariantsLAndDHoldWithWorkerThreads) {
  // Thousands of "lease expired" / "outcome not published: stale" lines are
  // the expected noise of this test; the summary line counts them.
  spdlog::set_level(spdlog::level::err);
  const soak::SoakOptions o = soak::ReadSoakOptions(kDefaultSeed, kDefaultSteps, kDefaultRuns);
  for (int run = 0; run < o.runs; ++run) {
    const std::uint64_t seed = o.seed + static_cast<std::uint64_t>(run);
    std::cout << "engine soak: seed=" << seed << " steps=" << o.steps
              << " (override with TASKENGINE_SOAK_SEED / TASKENGINE_SOAK_STEPS)" << std::endl;
    if (EngineSoak(seed, o.steps).Run() > 0) {
      ADD_FAILURE() << "engine soak FAILED with seed " << seed;
      return;
    }
  }
}

}  // namespace
}  // namespace taskengine
