#include "soak/soak_support.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <tuple>

namespace taskengine::soak {
namespace {

std::optional<std::int64_t> ParseInt(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return static_cast<std::int64_t>(v);
}

[[noreturn]] void BadEnv(const char* name, const char* value, const char* want) {
  std::fprintf(stderr, "%s=%s is invalid: %s\n", name, value, want);
  std::abort();
}

}  // namespace

SoakOptions ReadSoakOptions(std::uint64_t default_seed, int default_steps, int default_runs) {
  SoakOptions o;
  o.seed = default_seed;
  o.steps = default_steps;
  o.runs = default_runs;
  if (const char* s = std::getenv("TASKENGINE_SOAK_SEED"); s != nullptr && *s != '\0') {
    if (std::string(s) == "random") {
      std::random_device rd;
      o.seed = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    } else {
      auto v = ParseInt(s);
      if (!v || *v < 0) BadEnv("TASKENGINE_SOAK_SEED", s, "a non-negative integer or \"random\"");
      o.seed = static_cast<std::uint64_t>(*v);
    }
  }
  if (const char* s = std::getenv("TASKENGINE_SOAK_STEPS"); s != nullptr && *s != '\0') {
    auto v = ParseInt(s);
    if (!v || *v < 1 || *v > 100'000'000) BadEnv("TASKENGINE_SOAK_STEPS", s, "1..100000000");
    o.steps = static_cast<int>(*v);
  }
  if (const char* s = std::getenv("TASKENGINE_SOAK_RUNS"); s != nullptr && *s != '\0') {
    auto v = ParseInt(s);
    if (!v || *v < 1 || *v > 1'000'000) BadEnv("TASKENGINE_SOAK_RUNS", s, "1..1000000");
    o.runs = static_cast<int>(*v);
  }
  return o;
}

// --- EffectWorld ---------------------------------------------------------------

int EffectWorld::Perform(const std::string& key, bool idempotent_sink) {
  std::lock_guard<std::mutex> lock(mu_);
  ++performs_;
  int& count = counts_[key];
  if (idempotent_sink && count > 0) {
    ++deduplicated_;
    return count;
  }
  return ++count;
}

int EffectWorld::Count(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  return CountLocked(key);
}

int EffectWorld::CountLocked(const std::string& key) const {
  auto it = counts_.find(key);
  return it == counts_.end() ? 0 : it->second;
}

std::map<std::string, int> EffectWorld::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

std::int64_t EffectWorld::performs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return performs_;
}

std::int64_t EffectWorld::deduplicated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return deduplicated_;
}

void EffectWorld::Enter(ExecutionId id) {
  std::lock_guard<std::mutex> lock(mu_);
  ++handlers_[id.value];
}

void EffectWorld::Leave(ExecutionId id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (--handlers_[id.value] == 0) handlers_.erase(id.value);
}

int EffectWorld::Handlers(ExecutionId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return HandlersLocked(id);
}

int EffectWorld::HandlersLocked(ExecutionId id) const {
  auto it = handlers_.find(id.value);
  return it == handlers_.end() ? 0 : it->second;
}

AmbiguousResolution PerfectResolution(const EffectWorld& world,
                                      const std::vector<EffectRecord>& effects) {
  int unconfirmed = 0;
  int happened = 0;
  for (const EffectRecord& e : effects) {
    if (e.committed) continue;
    ++unconfirmed;
    if (world.CountLocked(e.key) > 0) ++happened;
  }
  if (unconfirmed == 0) return AmbiguousResolution::kKeep;
  if (happened == unconfirmed) return AmbiguousResolution::kAssumeDone;
  if (happened == 0) return AmbiguousResolution::kAssumeNotDone;
  return AmbiguousResolution::kKeep;
}

// --- AdmissionModel ------------------------------------------------------------

AdmissionModel::Expectation AdmissionModel::Predict(const std::string& job, const std::string& key,
                                                    const std::string& identity) const {
  Expectation e;
  if (key.empty()) return e;
  auto it = by_key_.find({job, key});
  if (it == by_key_.end()) return e;
  e.existing = it->second.id;
  e.outcome = it->second.identity == identity ? Outcome::kDuplicate : Outcome::kConflict;
  return e;
}

namespace {
const char* Name(AdmissionModel::Outcome o) {
  switch (o) {
    case AdmissionModel::Outcome::kCreated:
      return "created";
    case AdmissionModel::Outcome::kDuplicate:
      return "duplicate";
    case AdmissionModel::Outcome::kConflict:
      return "conflict";
  }
  return "?";
}
}  // namespace

std::string AdmissionModel::Record(const std::string& job, const std::string& key,
                                   const std::string& identity, Outcome outcome, ExecutionId id) {
  Expectation want = Predict(job, key, identity);
  std::ostringstream why;
  if (outcome != want.outcome) {
    why << "admission of job " << job << " key '" << key << "' answered " << Name(outcome)
        << ", expected " << Name(want.outcome);
    if (want.outcome != Outcome::kCreated) why << " of execution " << want.existing.value;
    return why.str();
  }
  if (outcome == Outcome::kCreated) {
    if (id.value <= 0 || ids_.count(id.value) > 0) {
      why << "admission of job " << job << " created execution " << id.value
          << ", an id that is invalid or already used";
      return why.str();
    }
    ids_.insert(id.value);
    created_.push_back(id);
    if (!key.empty()) {
      by_key_[{job, key}] = Keyed{id, identity};
      keyed_ids_[{job, key}] = id;
    }
    return "";
  }
  // kDuplicate / kConflict: only a known id (conflicts through the engine's
  // single Dispatch carry no id; they pass 0).
  if (id.value != 0 && id != want.existing) {
    why << "admission of job " << job << " key '" << key << "' named execution " << id.value
        << ", expected " << want.existing.value;
    return why.str();
  }
  return "";
}

const std::map<std::pair<std::string, std::string>, ExecutionId>& AdmissionModel::keyed() const {
  return keyed_ids_;
}

std::vector<std::string> AdmissionModel::KeysOf(const std::string& job) const {
  std::vector<std::string> out;
  for (const auto& [jk, k] : by_key_) {
    if (jk.first == job) out.push_back(jk.second);
  }
  return out;
}

std::string AdmissionModel::IdentityOf(const std::string& job, const std::string& key) const {
  auto it = by_key_.find({job, key});
  return it == by_key_.end() ? "" : it->second.identity;
}

// --- checks ----------------------------------------------------------------------

Result<std::vector<Execution>> AllExecutions(Store& store) {
  std::vector<Execution> out;
  ExecutionFilter f;
  f.limit = 1000;
  while (true) {
    TE_ASSIGN_OR_RETURN(ExecutionPage page, store.ListExecutions(f));
    for (Execution& e : page.items) out.push_back(std::move(e));
    if (page.next_before.value == 0) break;
    f.before = page.next_before;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> CheckAdmissions(Store& store, const AdmissionModel& model) {
  std::vector<std::string> v;
  auto all = AllExecutions(store);
  if (!all.ok()) return {"L: cannot list executions: " + all.status().ToString()};
  std::map<std::int64_t, const Execution*> by_id;
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<std::int64_t>> by_key;
  for (const Execution& e : *all) {
    if (!by_id.emplace(e.id.value, &e).second) {
      v.push_back("L: execution " + std::to_string(e.id.value) + " listed twice");
    }
    if (!e.idempotency_key.empty()) {
      by_key[{e.job.value, e.tenant.value, e.idempotency_key}].push_back(e.id.value);
    }
    if (!model.Exists(e.id)) {
      v.push_back("L: execution " + std::to_string(e.id.value) +
                  " exists but was never acknowledged to a client");
    }
  }
  for (ExecutionId id : model.created()) {
    auto it = by_id.find(id.value);
    if (it == by_id.end()) {
      v.push_back("L: acknowledged execution " + std::to_string(id.value) + " is missing");
      continue;
    }
    if (!IsTerminal(it->second->status)) {
      v.push_back("L: execution " + std::to_string(id.value) +
                  " is not terminal: " + std::string(ToString(it->second->status)));
    }
  }
  for (const auto& [key, ids] : by_key) {
    if (ids.size() != 1) {
      v.push_back("L: idempotency key '" + std::get<2>(key) + "' of job " + std::get<0>(key) +
                  " is held by " + std::to_string(ids.size()) + " executions");
    }
  }
  for (const auto& [jk, id] : model.keyed()) {
    auto it = by_id.find(id.value);
    if (it == by_id.end()) continue;  // reported above
    if (it->second->idempotency_key != jk.second || it->second->job.value != jk.first) {
      v.push_back("L: execution " + std::to_string(id.value) + " was acknowledged for key '" +
                  jk.second + "' but carries key '" + it->second->idempotency_key + "'");
    }
  }
  return v;
}

EffectCheckReport CheckEffects(Store& store, const std::vector<EffectExpectation>& executions,
                               const std::map<std::string, int>& world,
                               const std::set<std::string>& wrongly_resolved) {
  EffectCheckReport r;
  std::set<std::string> ledger_keys;
  auto flag = [&](const std::string& key, const std::string& what) {
    if (wrongly_resolved.count(key) > 0) {
      r.excused.insert(key);
    } else {
      r.violations.push_back("D: " + what);
    }
  };
  auto count_of = [&](const std::string& key) {
    auto it = world.find(key);
    return it == world.end() ? 0 : it->second;
  };
  for (const EffectExpectation& x : executions) {
    auto exec = store.GetExecution(x.id);
    auto effects = store.GetEffects(x.id);
    if (!exec.ok() || !effects.ok()) {
      r.violations.push_back("D: cannot read execution " + std::to_string(x.id.value) + ": " +
                             (exec.ok() ? effects.status() : exec.status()).ToString());
      continue;
    }
    int committed = 0;
    std::set<std::string> committed_names;
    for (const EffectRecord& e : *effects) {
      ledger_keys.insert(e.key);
      const int n = count_of(e.key);
      if (e.committed) {
        ++committed;
        ++r.committed;
        committed_names.insert(e.name);
        if (n != 1) {
          flag(e.key, "effect " + e.key + " is committed but happened " + std::to_string(n) +
                          " times in the world");
        }
      } else {
        ++r.unconfirmed;
        if (n > 0) ++r.unconfirmed_happened;
        if (n > 1) {
          flag(e.key, "effect " + e.key + " (reserved, unconfirmed) happened " + std::to_string(n) +
                          " times");
        }
      }
    }
    switch (exec->status) {
      case ExecutionStatus::kSucceeded:
        for (const std::string& name : x.effects) {
          if (committed_names.count(name) == 0) {
            r.violations.push_back("D: execution " + std::to_string(x.id.value) +
                                   " succeeded without committing effect " + name);
          }
        }
        break;
      case ExecutionStatus::kCanceled:
        for (const EffectRecord& e : *effects) {
          if (e.committed) continue;
          ++r.canceled_with_unconfirmed;
          if (count_of(e.key) > 0) ++r.canceled_with_unconfirmed_happened;
        }
        if (!effects->empty()) {
          r.violations.push_back("D: execution " + std::to_string(x.id.value) +
                                 " is canceled but has " + std::to_string(effects->size()) +
                                 " effects that may have escaped (should be partially_canceled)");
        }
        break;
      case ExecutionStatus::kPartiallyCanceled:
        r.escaped += committed;
        if (effects->empty()) {
          r.violations.push_back("D: execution " + std::to_string(x.id.value) +
                                 " is partially_canceled without an effect that may have escaped");
        }
        break;
      default:
        break;
    }
  }
  for (const auto& [key, n] : world) {
    if (n > 0 && ledger_keys.count(key) == 0) {
      flag(key, "effect " + key + " happened " + std::to_string(n) +
                    " times but the ledger has no record of it");
    }
  }
  return r;
}

std::string StatusHistogram(const std::vector<Execution>& executions) {
  int counts[kExecutionStatusCount] = {};
  for (const Execution& e : executions) ++counts[static_cast<int>(e.status)];
  std::string out;
  for (int s = 0; s < kExecutionStatusCount; ++s) {
    if (!out.empty()) out += ' ';
    out += std::string(ToString(static_cast<ExecutionStatus>(s))) + "=" + std::to_string(counts[s]);
  }
  return out;
}

std::string Describe(const Execution& e) {
  std::ostringstream o;
  o << "{id=" << e.id.value << " job=" << e.job.value << " tenant=" << e.tenant.value
    << " queue=" << e.queue << " status=" << ToString(e.status)
    << " trigger=" << ToString(e.trigger) << " requester=" << e.requester
    << " worker=" << e.worker.value << " attempt=" << e.attempt << " key=" << e.idempotency_key
    << " payload=" << e.payload_json << " fp=" << e.fingerprint << " result=" << e.result_json
    << " progress=" << e.progress << " error=" << e.error << " class=" << ToString(e.failure_class)
    << " scheduled_at=" << e.scheduled_at << " run_at=" << e.run_at << " queued_at=" << e.queued_at
    << " started_at=" << e.started_at << " finished_at=" << e.finished_at
    << " claim=" << e.claim_version.value << " lease_expires_at=" << e.lease_expires_at
    << " cancel_requested=" << e.cancel_requested << " lane=" << e.lane_key
    << " parent=" << e.parent.value << " expiries=" << e.consecutive_lease_expiries
    << " permanent=" << e.permanent_failures << " ambiguous=" << e.ambiguous_failures
    << " max_attempts=" << e.retry.max_attempts << " lease_ms=" << e.lease_ms << "}";
  return o.str();
}

std::string Describe(const std::vector<EffectRecord>& effects) {
  std::ostringstream o;
  o << "[";
  for (const EffectRecord& e : effects) {
    o << "{" << e.key << " committed=" << e.committed << " by=" << e.reserved_by.value
      << " attempt=" << e.attempt << " reserved_at=" << e.reserved_at
      << " committed_at=" << e.committed_at << " detail=" << e.detail << "}";
  }
  o << "]";
  return o.str();
}

}  // namespace taskengine::soak
