#include "views/views.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/time_text.h"

namespace taskengine {
namespace {

Json StringOrNull(const std::string& s) { return s.empty() ? Json(nullptr) : Json(s); }

Json JsonText(const std::string& text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return text;
  return j;
}

}  // namespace

Json TimeOrNull(Millis ms) { return ms == 0 ? Json(nullptr) : Json(FormatTime(ms)); }

Json EmbeddedJson(const std::string& text) {
  if (text.empty()) return nullptr;
  return JsonText(text);
}

Json PageToJson(Json items, std::int64_t next_cursor) {
  return {{"items", std::move(items)},
          {"next_cursor", next_cursor == 0 ? Json(nullptr) : Json(std::to_string(next_cursor))}};
}

std::string ExecutionUrl(ExecutionId id) {
  return "/api/v1/executions/" + std::to_string(id.value);
}

Json JobToJson(const JobDefinition& job, const JobScheduleInfo& schedule) {
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
      {"catch_up", std::string(ToString(job.catch_up))},
      {"catch_up_window_ms", job.catch_up_window_ms},
      {"window_ms", job.window_ms},
      {"config", job.config_json.empty() ? Json::object() : JsonText(job.config_json)},
      {"enabled", job.enabled},
      {"notify_on_failure", job.notify_on_failure},
      {"notify_targets", job.notify_targets},
      {"created_at", TimeOrNull(job.created_at)},
      {"updated_at", TimeOrNull(job.updated_at)},
      {"next_fire", schedule.next_fire ? TimeOrNull(*schedule.next_fire) : Json(nullptr)},
      {"last_fire", TimeOrNull(schedule.last_fire_at)},
      {"skipped_fires", schedule.skipped_fires},
      {"last_skipped_at", TimeOrNull(schedule.last_skipped_at)},
      {"schedule_error", StringOrNull(schedule.error)},
  };
}

Json ExecutionToJson(const Execution& e, bool with_payload) {
  const bool finished = e.finished_at > 0 && IsTerminal(e.status);
  Json j = {
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
  };
  if (with_payload) j["payload"] = EmbeddedJson(e.payload_json);
  j["progress"] = e.progress;
  j["error"] = StringOrNull(e.error);
  j["failure_class"] = e.failure_class == FailureClass::kNone
                           ? Json(nullptr)
                           : Json(std::string(ToString(e.failure_class)));
  j["scheduled_at"] = TimeOrNull(e.scheduled_at);
  j["run_at"] = TimeOrNull(e.run_at);
  j["queued_at"] = TimeOrNull(e.queued_at);
  j["started_at"] = TimeOrNull(e.started_at);
  j["finished_at"] = TimeOrNull(e.finished_at);
  j["duration_ms"] = finished ? Json(e.DurationMillis()) : Json(nullptr);
  j["claim_version"] = e.claim_version.value;
  j["lease_ms"] = e.lease_ms;
  j["lease_expires_at"] = TimeOrNull(e.lease_expires_at);
  j["cancel_requested"] = e.cancel_requested;
  j["lane_key"] = StringOrNull(e.lane_key);
  j["parent"] = e.parent.value == 0 ? Json(nullptr) : Json(e.parent.value);
  j["consecutive_lease_expiries"] = e.consecutive_lease_expiries;
  j["permanent_failures"] = e.permanent_failures;
  j["ambiguous_failures"] = e.ambiguous_failures;
  j["status_url"] = ExecutionUrl(e.id);
  j["result_url"] = e.status == ExecutionStatus::kSucceeded ? Json(ExecutionUrl(e.id) + "/result")
                                                            : Json(nullptr);
  return j;
}

Json ExecutionDetailToJson(const ExecutionDetail& d) {
  Json j = ExecutionToJson(d.execution, /*with_payload=*/true);
  Json logs = Json::array();
  for (const LogEntry& l : d.logs) logs.push_back(LogToJson(l));
  j["logs"] = std::move(logs);
  Json effects = Json::array();
  for (const EffectRecord& e : d.effects) effects.push_back(EffectToJson(e));
  j["effects"] = std::move(effects);
  Json escaped = Json::array();
  for (const EffectRecord& e : d.EscapedEffects()) escaped.push_back(EffectToJson(e));
  j["escaped_effects"] = std::move(escaped);
  Json attempts = Json::array();
  for (const AttemptRecord& a : d.attempts) attempts.push_back(AttemptToJson(a));
  j["attempts"] = std::move(attempts);
  Json audit = Json::array();
  for (const AuditRecord& r : d.audit) audit.push_back(AuditToJson(r));
  j["audit"] = std::move(audit);
  return j;
}

Json LogToJson(const LogEntry& log) {
  return {
      {"attempt", log.attempt},
      {"at", TimeOrNull(log.at)},
      {"level", std::string(ToString(log.level))},
      {"message", log.message},
  };
}

Json EffectToJson(const EffectRecord& effect) {
  return {
      {"name", effect.name},
      {"key", effect.key},
      {"state", effect.committed ? "committed" : "reserved"},
      {"attempt", effect.attempt},
      {"claim_version", effect.reserved_by.value},
      {"reserved_at", TimeOrNull(effect.reserved_at)},
      {"committed_at", TimeOrNull(effect.committed_at)},
      {"detail", StringOrNull(effect.detail)},
  };
}

Json EffectReplyToJson(const EffectReply& r) {
  return {
      {"answer", std::string(ToString(r.answer))},
      {"key", r.key},
      {"detail", r.answer == EffectAnswer::kAlreadyDone ? Json(r.detail) : Json(nullptr)},
      {"committed_at", TimeOrNull(r.committed_at)},
  };
}

Json AttemptToJson(const AttemptRecord& a) {
  return {
      {"attempt", a.attempt},
      {"claim_version", a.claim_version.value},
      {"worker", StringOrNull(a.worker)},
      {"started_at", TimeOrNull(a.started_at)},
      {"ended_at", TimeOrNull(a.ended_at)},
      {"outcome", std::string(ToString(a.outcome))},
      {"failure_class", a.failure_class == FailureClass::kNone
                            ? Json(nullptr)
                            : Json(std::string(ToString(a.failure_class)))},
      {"released", a.released},
      {"error", StringOrNull(a.error)},
  };
}

Json AuditToJson(const AuditRecord& r) {
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

std::vector<QueueView> QueueViews(std::vector<QueueDepth> depths,
                                  const std::vector<QueueConfig>& configured, Millis now) {
  std::map<std::string, QueueDepth> by_name;
  for (QueueDepth& d : depths) by_name.emplace(d.queue, std::move(d));
  std::vector<QueueView> views;
  auto fill = [&](QueueView& view) {
    auto it = by_name.find(view.queue);
    if (it == by_name.end()) return;
    view.queued = it->second.queued;
    view.due = it->second.due;
    view.running = it->second.running;
    view.oldest_queued_at = it->second.oldest_queued_at;
    if (view.oldest_queued_at > 0)
      view.oldest_age_ms = std::max<Millis>(0, now - view.oldest_queued_at);
    by_name.erase(it);
  };
  std::vector<QueueConfig> sorted = configured;
  std::stable_sort(sorted.begin(), sorted.end(), [](const QueueConfig& a, const QueueConfig& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.name < b.name;
  });
  for (const QueueConfig& q : sorted) {
    QueueView view;
    view.queue = q.name;
    view.configured = true;
    view.priority = q.priority;
    view.concurrency = q.concurrency;
    fill(view);
    views.push_back(std::move(view));
  }
  // What remains has work but is not worked by this configuration (by name).
  std::vector<std::string> others;
  for (const auto& entry : by_name) others.push_back(entry.first);
  for (std::string& name : others) {
    QueueView view;
    view.queue = std::move(name);
    fill(view);
    views.push_back(std::move(view));
  }
  return views;
}

Json QueueToJson(const QueueView& q) {
  return {
      {"queue", q.queue},
      {"configured", q.configured},
      {"priority", q.priority},
      {"concurrency", q.concurrency},
      {"queued", q.queued},
      {"due", q.due},
      {"running", q.running},
      {"oldest_queued_at", TimeOrNull(q.oldest_queued_at)},
      {"oldest_queued_age_ms", q.oldest_queued_at == 0 ? Json(nullptr) : Json(q.oldest_age_ms)},
  };
}

Json LaneToJson(const LaneStatus& lane) {
  return {
      {"tenant", lane.tenant.value.empty() ? Json(nullptr) : Json(lane.tenant.value)},
      {"lane", lane.lane},
      {"head", lane.head.value == 0 ? Json(nullptr) : Json(lane.head.value)},
      {"head_status",
       lane.head.value == 0 ? Json(nullptr) : Json(std::string(ToString(lane.head_status)))},
      {"blocked", lane.blocked},
      {"queued", lane.queued},
      {"running", lane.running},
  };
}

// Every single dispatch answers with it: built member by member, as an
// initializer list copies each member and value once more.
Json DispatchResultToJson(const DispatchResult& r) {
  Json out = Json::object();
  out.emplace("id", r.id.value);
  out.emplace("status", ToString(r.status));
  out.emplace("created", r.created);
  out.emplace("status_url", ExecutionUrl(r.id));
  return out;
}

std::string DispatchResultText(const DispatchResult& r) {
  // A status's name and an execution's URL are plain ASCII: printed as they are.
  const std::string_view status = ToString(r.status);
  const std::string url = ExecutionUrl(r.id);
  std::string out;
  out.reserve(64 + status.size() + 2 * url.size());
  out += R"({"id":)";
  out += std::to_string(r.id.value);
  out += R"(,"status":")";
  out += status;
  out += r.created ? R"(","created":true,"status_url":")" : R"(","created":false,"status_url":")";
  out += url;
  out += R"("})";
  return out;
}

Json FinishReplyToJson(const FinishReply& reply, bool fail) {
  Json out = Json::object();
  out.emplace("status", ToString(reply.status));
  if (fail) {
    out.emplace("run_at", reply.status == ExecutionStatus::kQueued ? TimeOrNull(reply.run_at)
                                                                   : Json(nullptr));
  }
  return out;
}

std::string FinishReplyText(const FinishReply& reply, bool fail) {
  // A status's name and a formatted time are plain ASCII: printed as they are.
  std::string out = R"({"status":")";
  out += ToString(reply.status);
  out += '"';
  if (fail) {
    if (reply.status == ExecutionStatus::kQueued && reply.run_at != 0) {
      out += R"(,"run_at":")";
      out += FormatTime(reply.run_at);
      out += '"';
    } else {
      out += R"(,"run_at":null)";
    }
  }
  out += '}';
  return out;
}

Json TenantToJson(const Tenant& tenant) {
  return {
      {"id", tenant.id.value},
      {"name", tenant.name},
      {"active", tenant.active},
      {"created_at", TimeOrNull(tenant.created_at)},
  };
}

Json UserToJson(const User& user, std::string_view role) {
  return {
      {"name", user.name},         {"role", role},
      {"scopes", user.scopes},     {"tenants", user.tenants},
      {"disabled", user.disabled}, {"created_at", TimeOrNull(user.created_at)},
  };
}

std::string_view TokenState(const ApiToken& token, Millis now) {
  if (token.revoked_at != 0) return "revoked";
  if (token.expires_at != 0 && now >= token.expires_at) return "expired";
  return "live";
}

Json TokenToJson(const ApiToken& token, Millis now) {
  return {
      {"id", token.id},
      {"name", token.name},
      {"principal", token.principal},
      {"scopes", token.scopes},
      {"tenants", token.tenants},
      {"state", TokenState(token, now)},
      {"created_at", TimeOrNull(token.created_at)},
      {"expires_at", TimeOrNull(token.expires_at)},
      {"revoked_at", TimeOrNull(token.revoked_at)},
      {"last_used_at", TimeOrNull(token.last_used_at)},
  };
}

Json WorkerToJson(const WorkerInfo& w, const WorkerDetails* details, Millis now) {
  const std::vector<ExecutionId>& ids = details != nullptr ? details->current : w.current;
  Json current = Json::array();
  for (ExecutionId id : ids) current.push_back(std::to_string(id.value));
  WorkerInfo seen = w;
  seen.last_heartbeat_at =
      std::max(w.last_heartbeat_at, details != nullptr ? details->last_seen_at : Millis{0});
  const WorkerState state = LiveState(seen, now);
  const bool live = state == WorkerState::kIdle || state == WorkerState::kBusy;
  const int concurrency =
      w.threads > 0 ? w.threads : (details != nullptr ? details->concurrency : 0);
  const int busy = live ? w.busy : 0;
  return {
      {"id", w.id.value},
      {"kind", std::string(ToString(w.kind))},
      {"name", details != nullptr ? StringOrNull(details->name) : Json(nullptr)},
      {"host", StringOrNull(w.hostname)},
      {"pid", w.pid == 0 ? Json(nullptr) : Json(w.pid)},
      {"version", details != nullptr ? StringOrNull(details->version) : Json(nullptr)},
      {"queues", details != nullptr ? Json(details->queues) : Json::array()},
      {"handlers", details != nullptr ? Json(details->handlers) : Json::array()},
      {"concurrency", concurrency > 0 ? Json(concurrency) : Json(nullptr)},
      {"busy", busy},
      {"idle", concurrency > 0 ? Json(live ? std::max(0, concurrency - busy) : 0) : Json(nullptr)},
      {"state", std::string(ToString(state))},
      {"started_at", TimeOrNull(w.started_at)},
      {"last_seen_at", TimeOrNull(seen.last_heartbeat_at)},
      {"stale_after_ms", WorkerStaleAfterMs(w.kind)},
      {"processed", w.processed},
      {"failed", w.failed},
      {"current", std::move(current)},
  };
}

namespace {

// `j` as the API prints it: compact, invalid UTF-8 replaced (api/errors.h).
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// A stored JSON text as a value: copied as it is when it is valid JSON (as the
// store holds it), else as JsonText makes it.
void AppendStoredJson(std::string& out, const std::string& text) {
  if (Json::accept(text)) {
    out += text;
  } else {
    out += Dump(JsonText(text));
  }
}

// The members of an object written as text: Key("k") then the value's text.
class ObjectText {
 public:
  explicit ObjectText(std::string& out) : out_(out) { out_ += '{'; }
  ~ObjectText() { out_ += '}'; }
  ObjectText(const ObjectText&) = delete;
  ObjectText& operator=(const ObjectText&) = delete;
  std::string& Key(std::string_view key) {
    out_ += first_ ? "\"" : ",\"";
    first_ = false;
    out_ += key;
    out_ += "\":";
    return out_;
  }

 private:
  std::string& out_;
  bool first_ = true;
};

// A string as a JSON value. Printable ASCII other than the quote and the
// backslash (names, queues, keys, times) goes between quotes as it is, which
// is how Dump prints it; anything else goes through Dump (escapes, invalid
// UTF-8 replaced).
void AppendString(std::string& out, const std::string& s) {
  const bool plain = std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x7f && c != '"' && c != '\\';
  });
  if (!plain) {
    out += Dump(Json(s));
    return;
  }
  out += '"';
  out += s;
  out += '"';
}

void AppendStringOrNull(std::string& out, const std::string& s) {
  if (s.empty()) {
    out += "null";
  } else {
    AppendString(out, s);
  }
}

}  // namespace

std::string HandlerConfigText(const JobDefinition& job) {
  return job.config_json.empty() ? "{}" : Dump(JsonText(job.config_json));
}

std::string EmbeddedJsonText(const std::string& text) { return Dump(EmbeddedJson(text)); }

void AppendLeaseJson(std::string& out, const Lease& lease, const JobDefinition* job,
                     std::string_view handler_config) {
  const std::string id = std::to_string(lease.id.value);  // digits only
  ObjectText o(out);
  o.Key("id") += '"' + id + '"';
  o.Key("claim_version") += std::to_string(lease.version.value);
  AppendString(o.Key("job"), lease.job.value);
  AppendStringOrNull(o.Key("tenant"), lease.tenant.value);
  AppendString(o.Key("queue"), lease.queue);
  o.Key("attempt") += std::to_string(lease.attempt);
  if (lease.payload_json.empty()) {
    o.Key("payload") += "{}";
  } else {
    AppendStoredJson(o.Key("payload"), lease.payload_json);
  }
  AppendStringOrNull(o.Key("idempotency_key"), lease.idempotency_key);
  o.Key("effect_key_prefix") += '"' + id + ":\"";
  o.Key("lease_ms") += std::to_string(lease.lease_ms);
  if (lease.lease_expires_at == 0) {
    o.Key("lease_expires_at") += "null";
  } else {
    AppendString(o.Key("lease_expires_at"), FormatTime(lease.lease_expires_at));
  }
  if (job == nullptr) {
    o.Key("handler") += "null";
    o.Key("handler_config") += "null";
    o.Key("timeout_ms") += "null";
  } else {
    AppendString(o.Key("handler"), job->handler);
    o.Key("handler_config") += handler_config;
    o.Key("timeout_ms") += std::to_string(job->timeout_ms);
  }
}

}  // namespace taskengine
