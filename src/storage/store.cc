#include "storage/store.h"

namespace taskengine {

bool TenantScope::Covers(std::string_view tenant) const {
  if (!tenants) return true;
  for (const TenantId& t : *tenants) {
    if (t.value == tenant) return true;
  }
  return false;
}

Result<HeartbeatReply> Store::Heartbeat(const LeaseRef& lease, std::optional<int> progress) {
  auto replies = HeartbeatBatch({HeartbeatRequest{lease, progress}});
  return std::move(replies.front());
}

Result<FinishReply> Store::Complete(const LeaseRef& lease, std::string_view result_json) {
  FinishRequest r;
  r.lease = lease;
  r.kind = FinishRequest::Kind::kComplete;
  r.result_json = std::string(result_json);
  return std::move(FinishBatch({std::move(r)}).front());
}

Result<FinishReply> Store::Fail(const LeaseRef& lease, FailureClass failure_class,
                                std::string_view error, Millis retry_after_ms) {
  FinishRequest r;
  r.lease = lease;
  r.kind = FinishRequest::Kind::kFail;
  r.failure_class = failure_class;
  r.error = std::string(error);
  r.retry_after_ms = retry_after_ms;
  return std::move(FinishBatch({std::move(r)}).front());
}

Result<Millis> Store::NextDueIn(const std::vector<std::string>&) { return Millis{-1}; }

void Store::AdmitBatchAsync(std::vector<AdmitRequest> requests, AdmitDone done) {
  done(AdmitBatch(requests));
}

void Store::FinishBatchAsync(std::vector<FinishRequest> requests, FinishDone done) {
  done(FinishBatch(requests));
}

Result<FinishReply> Store::Release(const LeaseRef& lease) {
  FinishRequest r;
  r.lease = lease;
  r.kind = FinishRequest::Kind::kRelease;
  return std::move(FinishBatch({std::move(r)}).front());
}

}  // namespace taskengine
