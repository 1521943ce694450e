// Shared pieces of the randomized soaks (tests/soak): run options from the
// environment, the simulated "world" that counts side effects, the model of
// acknowledged admissions, and the end-of-run checks of invariants L and D
// (quality.md §2) against a Store.
//
// The checks return the violations they find as text instead of asserting,
// so that each soak can prefix them with its seed and recent actions.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "storage/store.h"
#include "taskengine/types.h"

namespace taskengine::soak {

// What a soak runs. Defaults come from the test; the environment overrides:
//   TASKENGINE_SOAK_SEED   the first seed (a number, or "random")
//   TASKENGINE_SOAK_STEPS  steps per run
//   TASKENGINE_SOAK_RUNS   how many runs, with seeds seed, seed+1, ...
struct SoakOptions {
  std::uint64_t seed = 0;
  int steps = 0;
  int runs = 1;
};

// Reads the environment over the defaults. Invalid values abort the test
// binary with a message (a typo must not silently run the default).
SoakOptions ReadSoakOptions(std::uint64_t default_seed, int default_steps, int default_runs = 1);

// The world outside the engine: how many times each side effect really
// happened, by effect key. An idempotent sink deduplicates by the key (it
// happens at most once whatever the callers do); a non-idempotent one
// happens every time it is called. Also tracks which executions have a
// handler running right now, so that an operator can tell whether an effect
// might still be in flight. Thread-safe.
class EffectWorld {
 public:
  // Performs the effect `key`; returns how many times it has now happened.
  int Perform(const std::string& key, bool idempotent_sink);
  int Count(const std::string& key) const;
  // Every key that happened at least once, with its count.
  std::map<std::string, int> Snapshot() const;
  // Total performs asked for, and how many an idempotent sink deduplicated.
  std::int64_t performs() const;
  std::int64_t deduplicated() const;

  // A handler of `id` starts / ends. Handlers() is how many are running.
  void Enter(ExecutionId id);
  void Leave(ExecutionId id);
  int Handlers(ExecutionId id) const;

  // Runs `f` while no handler can enter or leave and no effect can happen:
  // what `f` reads of the world stays true while it runs.
  template <typename F>
  auto Locked(F&& f) const {
    std::lock_guard<std::mutex> lock(mu_);
    return f();
  }
  // The unlocked forms, for use inside Locked().
  int CountLocked(const std::string& key) const;
  int HandlersLocked(ExecutionId id) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, int> counts_;     // guarded by mu_
  std::map<std::int64_t, int> handlers_;  // guarded by mu_
  std::int64_t performs_ = 0;             // guarded by mu_
  std::int64_t deduplicated_ = 0;         // guarded by mu_
};

// What the perfect operator assumes about the unconfirmed effects of an
// execution it replays: it looks at the world. All happened -> kAssumeDone;
// none happened -> kAssumeNotDone; no unconfirmed effect, or a mix -> kKeep.
// REQUIRES: called inside world.Locked(), with no handler of the execution
// running, so that the world cannot change under the decision.
AmbiguousResolution PerfectResolution(const EffectWorld& world,
                                      const std::vector<EffectRecord>& effects);

// The model of acknowledged admissions (invariant L). Not thread-safe.
class AdmissionModel {
 public:
  enum class Outcome { kCreated, kDuplicate, kConflict };
  struct Expectation {
    Outcome outcome = Outcome::kCreated;
    ExecutionId existing;  // kDuplicate / kConflict: the execution holding the key
  };

  // What admitting `identity` (canonical payload + requester) under
  // (job, key) must do, given what was acknowledged so far. An empty key is
  // always kCreated.
  Expectation Predict(const std::string& job, const std::string& key,
                      const std::string& identity) const;
  // Records an acknowledged outcome. Returns a violation description, or ""
  // when it matches the prediction (and a created id is new).
  std::string Record(const std::string& job, const std::string& key, const std::string& identity,
                     Outcome outcome, ExecutionId id);

  // Executions created, in admission order.
  const std::vector<ExecutionId>& created() const { return created_; }
  bool Exists(ExecutionId id) const { return ids_.count(id.value) > 0; }
  // (job, key) -> execution, for every key used.
  const std::map<std::pair<std::string, std::string>, ExecutionId>& keyed() const;
  // Keys admitted so far for `job` (for reuse by a soak).
  std::vector<std::string> KeysOf(const std::string& job) const;
  // The identity recorded with (job, key); "" when unknown.
  std::string IdentityOf(const std::string& job, const std::string& key) const;

 private:
  struct Keyed {
    ExecutionId id;
    std::string identity;
  };
  std::map<std::pair<std::string, std::string>, Keyed> by_key_;
  std::map<std::pair<std::string, std::string>, ExecutionId> keyed_ids_;
  std::vector<ExecutionId> created_;
  std::set<std::int64_t> ids_;
};

// Every execution in the store, oldest first (pages through ListExecutions).
Result<std::vector<Execution>> AllExecutions(Store& store);

// L: every acknowledged admission exists exactly once, under its key, and is
// terminal; the store holds no execution that was never acknowledged.
std::vector<std::string> CheckAdmissions(Store& store, const AdmissionModel& model);

// What CheckEffects needs to know about one execution.
struct EffectExpectation {
  ExecutionId id;
  std::vector<std::string> effects;  // the names its handler performs, in order
};

struct EffectCheckReport {
  std::vector<std::string> violations;
  // Keys whose world count disagrees with the ledger but that an operator
  // resolved wrongly on purpose (the oracle self-test): expected findings.
  std::set<std::string> excused;
  int committed = 0;             // committed effect keys
  int unconfirmed = 0;           // reserved, never committed (ambiguous) at the end
  int unconfirmed_happened = 0;  // ... of which the world says happened
  int escaped = 0;               // committed effects of canceled executions
  // Executions that ended `canceled` (no effect escaped, by the ledger)
  // while holding an unconfirmed reservation, and how many of those effects
  // did happen in the world: the ledger cannot tell, so "canceled" may hide
  // an escaped effect.
  int canceled_with_unconfirmed = 0;
  int canceled_with_unconfirmed_happened = 0;
};

// D: for every effect key, the world count is exactly 1 when the ledger says
// committed, at most 1 when only reserved, and 0 when the ledger has no
// record; no key happened twice. A succeeded execution committed all its
// effects; canceled ones have none committed, partially_canceled ones at
// least one. Keys in `wrongly_resolved` are reported in `excused` instead of
// as violations when they disagree.
EffectCheckReport CheckEffects(Store& store, const std::vector<EffectExpectation>& executions,
                               const std::map<std::string, int>& world,
                               const std::set<std::string>& wrongly_resolved);

// "queued=3 running=0 succeeded=120 ..." over the executions.
std::string StatusHistogram(const std::vector<Execution>& executions);

// A full, field-by-field rendering of an execution, for "nothing changed"
// comparisons and failure messages.
std::string Describe(const Execution& e);
std::string Describe(const std::vector<EffectRecord>& effects);

}  // namespace taskengine::soak
