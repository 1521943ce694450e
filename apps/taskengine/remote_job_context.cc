#include "remote_job_context.h"

#include <nlohmann/json.hpp>

namespace taskengine::cli {
namespace {

std::int64_t ParseId(const std::string& s) {
  std::int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return 0;
    v = v * 10 + (c - '0');
  }
  return v;
}

LeaseState ToLeaseState(taskengine_client::LeaseState s) {
  switch (s) {
    case taskengine_client::LeaseState::kActive:
      return LeaseState::kActive;
    case taskengine_client::LeaseState::kCancelRequested:
      return LeaseState::kCancelRequested;
    case taskengine_client::LeaseState::kLost:
      return LeaseState::kLost;
  }
  return LeaseState::kLost;
}

}  // namespace

Status ToEngineStatus(const taskengine_client::Status& status) {
  if (status.ok()) return Status();
  const std::string message = status.ToString();
  const std::string& code = status.code();
  if (code == "stale") return Stale(message);
  if (code == "not_found") return NotFound(message);
  if (code == "conflict") return Conflict(message);
  if (code == "invalid_argument" || code == "bad_request") return InvalidArgument(message);
  return Unavailable(message);
}

RemoteJobContext::RemoteJobContext(taskengine_client::LeaseContext* lease)
    : lease_(lease),
      id_(ParseId(lease->lease().id)),
      claim_version_(lease->lease().claim_version),
      job_(lease->lease().job),
      tenant_(lease->lease().tenant),
      payload_json_(lease->lease().payload.dump()),
      config_json_(lease->lease().handler_config.dump()),
      effect_key_prefix_(lease->lease().effect_key_prefix.empty()
                             ? lease->lease().id + ":"
                             : lease->lease().effect_key_prefix) {}

void RemoteJobContext::Log(LogLevel level, std::string_view message) {
  lease_->Log(std::string(ToString(level)), std::string(message));
}

LeaseState RemoteJobContext::Heartbeat() { return ToLeaseState(lease_->Heartbeat()); }

LeaseState RemoteJobContext::Checkpoint() { return ToLeaseState(lease_->Checkpoint()); }

Result<EffectResult> RemoteJobContext::ReserveEffect(std::string_view name) {
  auto reply = lease_->ReserveEffect(std::string(name));
  EffectResult out;
  out.key = effect_key_prefix_ + std::string(name);
  if (!reply.ok()) {
    if (reply.status().stale() || reply.status().not_found()) {
      out.answer = EffectAnswer::kStale;
      return out;
    }
    return ToEngineStatus(reply.status());
  }
  const std::string& answer = reply->answer;
  if (answer == "proceed") {
    out.answer = EffectAnswer::kProceed;
  } else if (answer == "already_done") {
    out.answer = EffectAnswer::kAlreadyDone;
  } else if (answer == "ambiguous") {
    out.answer = EffectAnswer::kAmbiguous;
  } else if (answer == "canceled") {
    out.answer = EffectAnswer::kCanceled;
  } else if (answer == "stale") {
    out.answer = EffectAnswer::kStale;
  } else {
    return Unavailable("unknown effect answer '" + answer + "'");
  }
  if (!reply->key.empty()) out.key = reply->key;
  out.detail = reply->detail;
  return out;
}

Status RemoteJobContext::CommitEffect(std::string_view name, std::string_view detail) {
  return ToEngineStatus(lease_->CommitEffect(std::string(name), std::string(detail)));
}

Status RemoteJobContext::ReleaseEffect(std::string_view name) {
  return ToEngineStatus(lease_->ReleaseEffect(std::string(name)));
}

taskengine_client::Outcome ToOutcome(const HandlerResult& result) {
  using taskengine_client::Outcome;
  switch (result.kind) {
    case HandlerResult::Kind::kSuccess: {
      if (result.result_json.empty()) return Outcome::Complete();
      auto parsed = nlohmann::json::parse(result.result_json, nullptr, false);
      if (parsed.is_discarded()) return Outcome::Complete(nlohmann::json(result.result_json));
      return Outcome::Complete(std::move(parsed));
    }
    case HandlerResult::Kind::kRetryable:
      return Outcome::Retryable(result.error, result.retry_after_ms);
    case HandlerResult::Kind::kPermanent:
      return Outcome::Permanent(result.error);
    case HandlerResult::Kind::kAmbiguous:
      return Outcome::Ambiguous(result.error);
    case HandlerResult::Kind::kCanceled:
      return Outcome::Canceled();
  }
  return Outcome::Retryable("unknown handler result");
}

}  // namespace taskengine::cli
