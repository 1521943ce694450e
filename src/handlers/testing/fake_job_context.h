// A JobContext for handler tests: fixed identity fields, recorded progress and
// logs, and a scriptable lease state. Thread-safe, like the real one.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
    std::lock_guard<std::mutex> lock(mu_);
    progress_.push_back(percent);
  }
  void Log(LogLevel level, std::string_view message) override {
    std::lock_guard<std::mutex> lock(mu_);
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

  // What Heartbeat/Checkpoint return from now on. Thread-safe.
  void set_lease_state(LeaseState s) { state_.store(s); }
  // Alternatively, computes the state per call (given the call number, from
  // 1); takes precedence over set_lease_state. Set before the handler runs.
  std::function<LeaseState(int call)> lease_state_fn;

  std::vector<int> progress() const {
    std::lock_guard<std::mutex> lock(mu_);
    return progress_;
  }
  std::vector<LogLine> logs() const {
    std::lock_guard<std::mutex> lock(mu_);
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

  mutable std::mutex mu_;
  std::vector<int> progress_;  // guarded by mu_
  std::vector<LogLine> logs_;  // guarded by mu_
  std::atomic<LeaseState> state_{LeaseState::kActive};
  std::atomic<int> calls_{0};
  std::atomic<int> checkpoints_{0};
  std::atomic<int> heartbeats_{0};
};

}  // namespace taskengine
