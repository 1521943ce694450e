// The bridge between a remote worker's lease (taskengine_client, HTTP) and the
// engine's handler interface (taskengine::JobContext), so that `worker:start`
// runs the same built-in `command` handler as `serve` does, with every
// heartbeat, log line and effect call going through the HTTP worker protocol.
#pragma once

#include <string>

#include "taskengine/job.h"
#include "taskengine_client/worker.h"

namespace taskengine::cli {

// A JobContext over one leased execution. Valid while `lease` is. Thread-safe
// where JobContext says so (it forwards to the thread-safe LeaseContext).
class RemoteJobContext final : public JobContext {
 public:
  explicit RemoteJobContext(taskengine_client::LeaseContext* lease);

  ExecutionId execution_id() const override { return id_; }
  const JobName& job() const override { return job_; }
  const TenantId& tenant() const override { return tenant_; }
  int attempt() const override { return lease_->lease().attempt; }
  ClaimVersion claim_version() const override { return claim_version_; }
  const std::string& payload_json() const override { return payload_json_; }
  // The lease's handler_config (the job definition's config).
  const std::string& config_json() const override { return config_json_; }
  // The lease's timeout_ms, 0 when the server sent none (the handler's
  // default or the config's timeout_ms applies).
  Millis timeout_ms() const override { return lease_->lease().timeout_ms; }
  std::string effect_key_prefix() const override { return effect_key_prefix_; }

  void SetProgress(int percent) override { lease_->SetProgress(percent); }
  void Log(LogLevel level, std::string_view message) override;
  LeaseState Heartbeat() override;
  LeaseState Checkpoint() override;

  // Errors: kStale never (a stale claim is the answer kStale); kUnavailable
  // when the server cannot be reached or answers otherwise.
  Result<EffectResult> ReserveEffect(std::string_view name) override;
  // kStale for a lost claim, kUnavailable when the server cannot be reached,
  // otherwise the server's error mapped to the nearest code.
  Status CommitEffect(std::string_view name, std::string_view detail) override;
  Status ReleaseEffect(std::string_view name) override;

 private:
  taskengine_client::LeaseContext* const lease_;
  const ExecutionId id_;
  const ClaimVersion claim_version_;
  const JobName job_;
  const TenantId tenant_;
  const std::string payload_json_;
  const std::string config_json_;
  const std::string effect_key_prefix_;
};

// The SDK outcome that publishes a handler's result (success -> complete,
// retryable/permanent/ambiguous -> fail with that class, canceled -> release).
taskengine_client::Outcome ToOutcome(const HandlerResult& result);

// An SDK client Status as an engine Status (stale, not_found, conflict,
// invalid_argument keep their meaning; the rest is kUnavailable).
Status ToEngineStatus(const taskengine_client::Status& status);

}  // namespace taskengine::cli
