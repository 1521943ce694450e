#include "server/views.h"

#include "server/time_format.h"

namespace taskengine {
namespace {

nlohmann::ordered_json StringOrNull(const std::string& s) {
  return s.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s);
}

}  // namespace

nlohmann::ordered_json EmbeddedJson(const std::string& text) {
  if (text.empty()) return nullptr;
  nlohmann::ordered_json j =
      nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return text;
  return j;
}

nlohmann::ordered_json TimeOrNull(Millis ms) {
  return ms == 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(FormatIso8601(ms));
}

nlohmann::ordered_json JobToJson(const JobDefinition& job) {
  return {
      {"name", job.name.value},
      {"display_name", job.display_name},
      {"handler", job.handler},
      {"queue", job.queue},
      {"scope", std::string(ToString(job.scope))},
      {"schedule", StringOrNull(job.schedule)},
      {"timezone", job.timezone},
      {"timeout_ms", job.timeout_ms},
      {"lease_ms", job.lease_ms},
      {"max_attempts", job.retry.max_attempts},
      {"backoff_base_ms", job.retry.backoff_base_ms},
      {"backoff_cap_ms", job.retry.backoff_cap_ms},
      {"max_permanent_attempts", job.retry.max_permanent_attempts},
      {"max_unsupported_schema_attempts", job.retry.max_unsupported_schema_attempts},
      {"max_ambiguous_attempts", job.retry.max_ambiguous_attempts},
      {"max_consecutive_lease_expiries", job.retry.max_consecutive_lease_expiries},
      {"lane_template", StringOrNull(job.lane_template)},
      {"accepted_schema_versions", job.accepted_schema_versions},
      {"config", EmbeddedJson(job.config_json)},
      {"enabled", job.enabled},
      {"created_at", TimeOrNull(job.created_at)},
      {"updated_at", TimeOrNull(job.updated_at)},
  };
}

nlohmann::ordered_json ExecutionToJson(const Execution& e) {
  const bool finished = e.finished_at > 0 && IsTerminal(e.status);
  return {
      {"id", e.id.value},
      {"job", e.job.value},
      {"tenant", StringOrNull(e.tenant.value)},
      {"queue", e.queue},
      {"status", std::string(ToString(e.status))},
      {"trigger", std::string(ToString(e.trigger))},
      {"requester", e.requester},
      {"worker", StringOrNull(e.worker.value)},
      {"attempt", e.attempt},
      {"max_attempts", e.retry.max_attempts},
      {"idempotency_key", StringOrNull(e.idempotency_key)},
      {"fingerprint", e.fingerprint},
      {"payload", EmbeddedJson(e.payload_json)},
      {"result", EmbeddedJson(e.result_json)},
      {"progress", e.progress},
      {"error", StringOrNull(e.error)},
      {"failure_class", e.failure_class == FailureClass::kNone
                            ? nlohmann::ordered_json(nullptr)
                            : nlohmann::ordered_json(std::string(ToString(e.failure_class)))},
      {"scheduled_at", TimeOrNull(e.scheduled_at)},
      {"run_at", TimeOrNull(e.run_at)},
      {"queued_at", TimeOrNull(e.queued_at)},
      {"started_at", TimeOrNull(e.started_at)},
      {"finished_at", TimeOrNull(e.finished_at)},
      {"duration_ms",
       finished ? nlohmann::ordered_json(e.DurationMillis()) : nlohmann::ordered_json(nullptr)},
      {"claim_version", e.claim_version.value},
      {"lease_ms", e.lease_ms},
      {"lease_expires_at", TimeOrNull(e.lease_expires_at)},
      {"cancel_requested", e.cancel_requested},
      {"lane_key", StringOrNull(e.lane_key)},
      {"parent", e.parent.value == 0 ? nlohmann::ordered_json(nullptr)
                                     : nlohmann::ordered_json(e.parent.value)},
      {"consecutive_lease_expiries", e.consecutive_lease_expiries},
      {"permanent_failures", e.permanent_failures},
      {"ambiguous_failures", e.ambiguous_failures},
  };
}

nlohmann::ordered_json LogToJson(const LogEntry& log) {
  return {
      {"attempt", log.attempt},
      {"at", TimeOrNull(log.at)},
      {"level", std::string(ToString(log.level))},
      {"message", log.message},
  };
}

nlohmann::ordered_json EffectToJson(const EffectRecord& e) {
  return {
      {"key", e.key},
      {"name", e.name},
      {"state", e.committed ? "committed" : "reserved"},
      {"reserved_at", TimeOrNull(e.reserved_at)},
      {"committed_at", TimeOrNull(e.committed_at)},
      {"attempt", e.attempt},
      {"claim_version", e.reserved_by.value},
      {"detail", StringOrNull(e.detail)},
  };
}

nlohmann::ordered_json AttemptToJson(const AttemptRecord& a) {
  return {
      {"attempt", a.attempt},
      {"claim_version", a.claim_version.value},
      {"worker", StringOrNull(a.worker)},
      {"started_at", TimeOrNull(a.started_at)},
      {"ended_at", TimeOrNull(a.ended_at)},
      {"outcome", std::string(ToString(a.outcome))},
      {"failure_class", a.failure_class == FailureClass::kNone
                            ? nlohmann::ordered_json(nullptr)
                            : nlohmann::ordered_json(std::string(ToString(a.failure_class)))},
      {"released", a.released},
      {"error", StringOrNull(a.error)},
  };
}

nlohmann::ordered_json AuditToJson(const AuditRecord& r) {
  return {
      {"id", r.id},
      {"at", TimeOrNull(r.at)},
      {"actor", r.actor},
      {"tenant", StringOrNull(r.tenant)},
      {"action", r.action},
      {"target", r.target},
      {"before", EmbeddedJson(r.before_json)},
      {"after", EmbeddedJson(r.after_json)},
      {"reason", StringOrNull(r.reason)},
  };
}

nlohmann::ordered_json LaneToJson(const LaneStatus& lane) {
  const bool has_head = lane.head.value != 0;
  return {
      {"tenant", StringOrNull(lane.tenant.value)},
      {"lane", lane.lane},
      {"head",
       has_head ? nlohmann::ordered_json(lane.head.value) : nlohmann::ordered_json(nullptr)},
      {"head_status", has_head ? nlohmann::ordered_json(std::string(ToString(lane.head_status)))
                               : nlohmann::ordered_json(nullptr)},
      {"blocked", lane.blocked},
      {"queued", lane.queued},
      {"running", lane.running},
  };
}

nlohmann::ordered_json EffectReplyToJson(const EffectReply& r) {
  return {
      {"answer", std::string(ToString(r.answer))},
      {"key", r.key},
      {"detail", StringOrNull(r.detail)},
      {"committed_at", TimeOrNull(r.committed_at)},
  };
}

nlohmann::ordered_json ExecutionDetailToJson(const ExecutionDetail& d) {
  nlohmann::ordered_json j = ExecutionToJson(d.execution);
  nlohmann::ordered_json logs = nlohmann::ordered_json::array();
  for (const LogEntry& l : d.logs) logs.push_back(LogToJson(l));
  j["logs"] = std::move(logs);
  nlohmann::ordered_json effects = nlohmann::ordered_json::array();
  for (const EffectRecord& e : d.effects) effects.push_back(EffectToJson(e));
  j["effects"] = std::move(effects);
  nlohmann::ordered_json escaped = nlohmann::ordered_json::array();
  for (const EffectRecord& e : d.EscapedEffects()) escaped.push_back(EffectToJson(e));
  j["escaped_effects"] = std::move(escaped);
  nlohmann::ordered_json attempts = nlohmann::ordered_json::array();
  for (const AttemptRecord& a : d.attempts) attempts.push_back(AttemptToJson(a));
  j["attempts"] = std::move(attempts);
  nlohmann::ordered_json audit = nlohmann::ordered_json::array();
  for (const AuditRecord& r : d.audit) audit.push_back(AuditToJson(r));
  j["audit"] = std::move(audit);
  return j;
}

nlohmann::ordered_json DispatchResultToJson(const DispatchResult& r) {
  return {
      {"id", r.id.value},
      {"created", r.created},
      {"status", std::string(ToString(r.status))},
  };
}

nlohmann::ordered_json QueueStatusToJson(const QueueStatusRow& row) {
  return {
      {"queue", row.queue},
      {"configured", row.configured},
      {"priority", row.priority},
      {"concurrency", row.concurrency},
      {"queued", row.queued},
      {"due", row.due},
      {"running", row.running},
      {"oldest_queued_at", TimeOrNull(row.oldest_queued_at)},
      {"oldest_age_ms", row.oldest_queued_at == 0 ? nlohmann::ordered_json(nullptr)
                                                  : nlohmann::ordered_json(row.oldest_age_ms)},
  };
}

}  // namespace taskengine
