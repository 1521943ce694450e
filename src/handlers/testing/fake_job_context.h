// A JobContext for handler tests: fixed identity fields, recorded progress and
// logs, and a scriptable lease state. Thread-safe, like the real one.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "taskengine/job.h"

namespace taskengine {

class FakeJobContext : public JobContext {
 public:
  struct LogLine {
    LogLevel level;
    std::string message;
  };

  // Identity and inputs. Set them before the handler runs.
  ExecutionId execution_id_value{42};
  JobName job_value{"demo.job"};
  TenantId tenant_value{"acme"};
  int attempt_value = 1;
  ClaimVersion claim_version_value{7};
  std::string payload = "{}";
  std::string config = "{}";
  Millis timeout = 0;

  ExecutionId execution_id() const override { return execution_id_value; }
  const JobName& job() const override { return job_value; }
  const TenantId& tenant() const override { return tenant_value; }
  int attempt() const override { return attempt_value; }
  ClaimVersion claim_version() const override { return claim_version_value; }
  const std::string& payload_json() const override { return payload; }
  const std::string& config_json() const override { return config; }
  Millis timeout_ms() const override { return timeout; }
  std::string effect_key_prefix() const override {
    return std::to_string(execution_id_value.value) + ":";
  }

  void SetProgress(int percent) override {
    MutexLock lock(mu_);
    progress_.push_back(percent);
  }
  void Log(LogLevel level, std::string_view message) override {
    MutexLock lock(mu_);
    logs_.push_back({level, std::string(message)});
  }
  LeaseState Heartbeat() override {
    heartbeats_.fetch_add(1);
    return NextState();
  }
  LeaseState Checkpoint() override {
    checkpoints_.fetch_add(1);
    return NextState();
  }

  // A small in-memory effect ledger with the answers of the real one.
  Result<EffectResult> ReserveEffect(std::string_view name) override {
    EffectResult r;
    r.key = effect_key_prefix() + std::string(name);
    MutexLock lock(mu_);
    auto it = effects_.find(std::string(name));
    if (state_.load() == LeaseState::kLost) {
      r.answer = EffectAnswer::kStale;
    } else if (it != effects_.end() && it->second.committed) {
      r.answer = EffectAnswer::kAlreadyDone;
      r.detail = it->second.detail;
    } else if (state_.load() == LeaseState::kCancelRequested) {
      r.answer = EffectAnswer::kCanceled;
    } else if (it != effects_.end() && it->second.earlier_claim) {
      r.answer = EffectAnswer::kAmbiguous;
    } else {
      effects_[std::string(name)];
      r.answer = EffectAnswer::kProceed;
    }
    return r;
  }
  Status CommitEffect(std::string_view name, std::string_view detail) override {
    MutexLock lock(mu_);
    auto it = effects_.find(std::string(name));
    if (it == effects_.end()) return Conflict("effect never reserved");
    if (!it->second.committed) {
      it->second.committed = true;
      it->second.detail = std::string(detail);
    }
    return Status::Ok();
  }
  Status ReleaseEffect(std::string_view name) override {
    MutexLock lock(mu_);
    auto it = effects_.find(std::string(name));
    if (it != effects_.end() && !it->second.committed && !it->second.earlier_claim) {
      effects_.erase(it);
    }
    return Status::Ok();
  }
  // Test setup: an earlier claim reserved `name` and never confirmed it.
  void AddAmbiguousEffect(const std::string& name) {
    MutexLock lock(mu_);
    effects_[name].earlier_claim = true;
  }
  // Whether `name` is reserved and not committed (a retry would meet `ambiguous`).
  bool HasOpenReservation(const std::string& name) const {
    MutexLock lock(mu_);
    auto it = effects_.find(name);
    return it != effects_.end() && !it->second.committed;
  }
  // name -> detail of committed effects.
  std::map<std::string, std::string> committed_effects() const {
    MutexLock lock(mu_);
    std::map<std::string, std::string> out;
    for (const auto& [name, e] : effects_) {
      if (e.committed) out[name] = e.detail;
    }
    return out;
  }

  // What Heartbeat/Checkpoint return from now on. Thread-safe.
  void set_lease_state(LeaseState s) { state_.store(s); }
  // Alternatively, computes the state per call (given the call number, from
  // 1); takes precedence over set_lease_state. Set before the handler runs.
  std::function<LeaseState(int call)> lease_state_fn;

  std::vector<int> progress() const {
    MutexLock lock(mu_);
    return progress_;
  }
  std::vector<LogLine> logs() const {
    MutexLock lock(mu_);
    return logs_;
  }
  // Messages logged at `level`, in order.
  std::vector<std::string> LogsAt(LogLevel level) const {
    std::vector<std::string> out;
    for (const LogLine& l : logs()) {
      if (l.level == level) out.push_back(l.message);
    }
    return out;
  }
  int checkpoints() const { return checkpoints_.load(); }
  int heartbeats() const { return heartbeats_.load(); }

 private:
  LeaseState NextState() {
    const int n = calls_.fetch_add(1) + 1;
    if (lease_state_fn) return lease_state_fn(n);
    return state_.load();
  }

  struct FakeEffect {
    bool committed = false;
    bool earlier_claim = false;
    std::string detail;
  };

  mutable Mutex mu_;
  std::map<std::string, FakeEffect> effects_ GUARDED_BY(mu_);
  std::vector<int> progress_ GUARDED_BY(mu_);
  std::vector<LogLine> logs_ GUARDED_BY(mu_);
  std::atomic<LeaseState> state_{LeaseState::kActive};
  std::atomic<int> calls_{0};
  std::atomic<int> checkpoints_{0};
  std::atomic<int> heartbeats_{0};
};

}  // namespace taskengine
