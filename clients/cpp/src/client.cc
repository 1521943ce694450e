#include "taskengine_client/client.h"

#include <algorithm>

#include "http_connection.h"

namespace taskengine_client {
namespace {

// "%XX"-encodes everything outside RFC 3986's unreserved set.
std::string Escape(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string StringOr(const Json& doc, const char* key) {
  auto it = doc.find(key);
  if (it == doc.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

std::int64_t IntOr(const Json& doc, const char* key) {
  auto it = doc.find(key);
  if (it == doc.end() || !it->is_number()) return 0;
  return it->get<std::int64_t>();
}

// The error object of an API answer ({"code", "message", "details"}) as a Status.
Status ErrorToStatus(int http_status, const Json& error) {
  if (!error.is_object()) return Status(http_status, "internal", "malformed error");
  Json details = error.contains("details") ? error["details"] : Json::object();
  return Status(http_status, StringOr(error, "code"), StringOr(error, "message"),
                std::move(details));
}

Json DispatchBody(const DispatchOptions& o) {
  Json body = Json::object();
  if (!o.tenant.empty()) body["tenant"] = o.tenant;
  body["payload"] = o.payload.is_null() ? Json::object() : o.payload;
  if (o.delay_ms) body["delay_ms"] = *o.delay_ms;
  if (!o.lane.empty()) body["lane"] = o.lane;
  if (o.extra.is_object()) {
    for (const auto& [k, v] : o.extra.items()) body[k] = v;
  }
  return body;
}

DispatchResult ToDispatchResult(const Json& doc) {
  DispatchResult r;
  r.id = IdToString(doc.value("id", Json()));
  r.status = StringOr(doc, "status");
  r.created = doc.value("created", false);
  r.status_url = StringOr(doc, "status_url");
  return r;
}

const char* KindPath(FinishItem::Kind kind) {
  switch (kind) {
    case FinishItem::Kind::kComplete:
      return "complete";
    case FinishItem::Kind::kFail:
      return "fail";
    case FinishItem::Kind::kRelease:
      return "release";
  }
  return "release";
}

Json FinishFields(const FinishItem& item) {
  Json body = {{"claim_version", item.claim_version}};
  if (item.kind == FinishItem::Kind::kComplete && item.result) body["result"] = *item.result;
  if (item.kind == FinishItem::Kind::kFail) {
    body["class"] = item.failure_class;
    body["error"] = item.error;
    body["retry_after_ms"] = item.retry_after_ms;
  }
  return body;
}

std::string WorkerPath(const std::string& id, const std::string& rest) {
  return "/api/v1/worker/executions/" + Escape(id) + "/" + rest;
}

}  // namespace

std::string IdToString(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_integer()) return std::to_string(value.get<std::int64_t>());
  return {};
}

Client::Client(ClientOptions options)
    : options_(std::move(options)), pool_(std::make_unique<internal::ConnectionPool>()) {
  while (!options_.base_url.empty() && options_.base_url.back() == '/')
    options_.base_url.pop_back();
}

Client::~Client() = default;

Result<Json> Client::Call(const std::string& method, const std::string& path, const Json& body,
                          const std::vector<std::pair<std::string, std::string>>& headers,
                          std::chrono::milliseconds timeout, const std::atomic<bool>* abort,
                          int* http_status) {
  internal::HttpCall call;
  call.method = method;
  call.url = options_.base_url + path;
  if (!body.is_null()) call.body = body.dump();
  call.headers = headers;
  if (!options_.token.empty())
    call.headers.emplace_back("Authorization", "Bearer " + options_.token);
  call.timeout = timeout.count() > 0 ? timeout : options_.timeout;
  call.abort = abort;
  auto connection = pool_->Acquire();
  auto reply = connection->Perform(call);
  // A connection that failed may be half-closed: drop it rather than reuse it.
  if (reply.ok()) pool_->Return(std::move(connection));
  if (!reply.ok()) return reply.status();
  if (http_status != nullptr) *http_status = reply->status;
  Json doc;
  if (!reply->body.empty()) {
    doc = Json::parse(reply->body, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) {
      if (reply->status >= 200 && reply->status < 300) {
        return Status(reply->status, "internal", "the answer is not JSON");
      }
      return Status(reply->status, reply->status == 503 ? "unavailable" : "internal",
                    reply->body.substr(0, 200));
    }
  }
  if (reply->status < 200 || reply->status >= 300) {
    if (doc.is_object() && doc.contains("error")) return ErrorToStatus(reply->status, doc["error"]);
    return Status(reply->status, reply->status == 503 ? "unavailable" : "internal",
                  "HTTP " + std::to_string(reply->status));
  }
  if (!reply->location.empty() && doc.is_object() && !doc.contains("status_url")) {
    doc["status_url"] = reply->location;
  }
  return doc;
}

Result<DispatchResult> Client::Dispatch(const std::string& job, const DispatchOptions& options) {
  std::vector<std::pair<std::string, std::string>> headers;
  if (!options.idempotency_key.empty()) {
    headers.emplace_back("Idempotency-Key", options.idempotency_key);
  }
  auto doc =
      Call("POST", "/api/v1/jobs/" + Escape(job) + "/dispatch", DispatchBody(options), headers);
  if (!doc.ok()) return doc.status();
  return ToDispatchResult(*doc);
}

Result<std::vector<BulkItemResult>> Client::DispatchBulk(const std::vector<BulkItem>& items) {
  Json list = Json::array();
  for (const BulkItem& item : items) {
    Json body = DispatchBody(item.options);
    body["job"] = item.job;
    if (!item.options.idempotency_key.empty())
      body["idempotency_key"] = item.options.idempotency_key;
    list.push_back(std::move(body));
  }
  auto doc = Call("POST", "/api/v1/dispatch/bulk", Json{{"items", std::move(list)}});
  if (!doc.ok()) return doc.status();
  std::vector<BulkItemResult> out;
  for (const Json& item : doc->value("items", Json::array())) {
    BulkItemResult r;
    if (item.contains("error") && item["error"].is_object()) {
      r.status = ErrorToStatus(409, item["error"]);
    } else if (item.value("conflict", false)) {
      r.status = Status(409, "conflict", "idempotency key used with a different payload",
                        Json{{"existing_execution_id", item.value("id", Json())}});
    }
    r.result = ToDispatchResult(item);
    out.push_back(std::move(r));
  }
  return out;
}

Result<Json> Client::GetExecution(const std::string& id) {
  return Call("GET", "/api/v1/executions/" + Escape(id), Json());
}

Result<ExecutionPage> Client::ListExecutions(const ListFilter& filter) {
  std::string query;
  auto add = [&](const char* name, const std::string& value) {
    if (value.empty()) return;
    query += (query.empty() ? "?" : "&") + std::string(name) + "=" + Escape(value);
  };
  add("job", filter.job);
  add("tenant", filter.tenant);
  add("status", filter.status);
  add("cursor", filter.cursor);
  if (filter.limit > 0) add("limit", std::to_string(filter.limit));
  auto doc = Call("GET", "/api/v1/executions" + query, Json());
  if (!doc.ok()) return doc.status();
  ExecutionPage page;
  for (const Json& item : doc->value("items", Json::array())) page.items.push_back(item);
  page.next_cursor = StringOr(*doc, "next_cursor");
  return page;
}

Result<Json> Client::Cancel(const std::string& id, const std::string& reason) {
  Json body = Json::object();
  if (!reason.empty()) body["reason"] = reason;
  return Call("POST", "/api/v1/executions/" + Escape(id) + "/cancel", body);
}

Result<Json> Client::Replay(const std::string& id, const std::string& reason,
                            const std::string& assume) {
  Json body = {{"reason", reason}};
  if (!assume.empty()) body["assume"] = assume;
  return Call("POST", "/api/v1/executions/" + Escape(id) + "/replay", body);
}

Result<Json> Client::GetResult(const std::string& id) {
  return Call("GET", "/api/v1/executions/" + Escape(id) + "/result", Json());
}

Result<Json> Client::Stats() { return Call("GET", "/api/v1/stats", Json()); }

Result<Json> Client::Workers() { return Call("GET", "/api/v1/workers", Json()); }

Result<std::vector<Lease>> Client::LeaseExecutions(const LeaseRequest& request,
                                                   const std::atomic<bool>* abort) {
  Json body = {{"worker_id", request.worker_id},
               {"queues", request.queues},
               {"max", request.max},
               {"wait_ms", request.wait_ms}};
  if (!request.name.empty()) body["name"] = request.name;
  if (!request.host.empty()) body["host"] = request.host;
  if (!request.version.empty()) body["version"] = request.version;
  if (request.pid > 0) body["pid"] = request.pid;
  if (request.concurrency > 0) body["concurrency"] = request.concurrency;
  if (request.confirm_start) body["confirm_start"] = true;
  if (!request.handlers.empty()) body["handlers"] = request.handlers;
  auto timeout = options_.timeout + std::chrono::milliseconds(request.wait_ms);
  auto doc = Call("POST", "/api/v1/worker/lease", body, {}, timeout, abort);
  if (!doc.ok()) return doc.status();
  std::vector<Lease> leases;
  for (const Json& item : doc->value("leases", Json::array())) {
    Lease lease;
    lease.id = IdToString(item.value("id", Json()));
    lease.claim_version = IntOr(item, "claim_version");
    lease.job = StringOr(item, "job");
    lease.tenant = StringOr(item, "tenant");
    lease.queue = StringOr(item, "queue");
    lease.attempt = static_cast<int>(IntOr(item, "attempt"));
    lease.payload = item.value("payload", Json::object());
    lease.idempotency_key = StringOr(item, "idempotency_key");
    lease.effect_key_prefix = StringOr(item, "effect_key_prefix");
    lease.lease_ms = IntOr(item, "lease_ms");
    lease.lease_expires_at = StringOr(item, "lease_expires_at");
    lease.handler = StringOr(item, "handler");
    lease.handler_config = item.value("handler_config", Json::object());
    if (lease.handler_config.is_null()) lease.handler_config = Json::object();
    lease.timeout_ms = IntOr(item, "timeout_ms");
    lease.raw = item;
    if (lease.id.empty()) return Status(200, "internal", "a lease without an id");
    leases.push_back(std::move(lease));
  }
  return leases;
}

namespace {

HeartbeatResult ToHeartbeatResult(const std::string& id, const Json& doc) {
  HeartbeatResult r;
  r.id = id;
  r.cancel_requested = doc.value("cancel_requested", false);
  r.lease_expires_at_ms = IntOr(doc, "lease_expires_at_ms");
  return r;
}

}  // namespace

Result<std::vector<HeartbeatResult>> Client::HeartbeatBatch(const std::string& worker_id,
                                                            const std::vector<HeartbeatItem>& items,
                                                            std::int64_t processed,
                                                            std::int64_t failed) {
  Json list = Json::array();
  for (const HeartbeatItem& item : items) {
    Json entry = {{"id", item.id}, {"claim_version", item.claim_version}};
    if (item.progress) entry["progress"] = *item.progress;
    if (item.started) entry["started"] = true;
    list.push_back(std::move(entry));
  }
  auto doc = Call("POST", "/api/v1/worker/heartbeats",
                  Json{{"worker_id", worker_id},
                       {"items", std::move(list)},
                       {"processed", processed},
                       {"failed", failed}});
  if (!doc.ok()) return doc.status();
  std::vector<HeartbeatResult> out;
  for (const Json& item : doc->value("items", Json::array())) {
    const std::string id = IdToString(item.value("id", Json()));
    HeartbeatResult r = ToHeartbeatResult(id, item);
    if (!item.value("ok", false)) {
      r.status = ErrorToStatus(409, item.value("error", Json::object()));
    }
    out.push_back(std::move(r));
  }
  return out;
}

Result<HeartbeatResult> Client::Heartbeat(const HeartbeatItem& item) {
  Json body = {{"claim_version", item.claim_version}};
  if (item.progress) body["progress"] = *item.progress;
  auto doc = Call("POST", WorkerPath(item.id, "heartbeat"), body);
  if (!doc.ok()) return doc.status();
  return ToHeartbeatResult(item.id, *doc);
}

Status Client::Log(const std::string& id, std::int64_t claim_version, const std::string& level,
                   const std::string& message) {
  return Call("POST", WorkerPath(id, "log"),
              Json{{"claim_version", claim_version}, {"level", level}, {"message", message}})
      .status();
}

Result<EffectReservation> Client::ReserveEffect(const std::string& id, std::int64_t claim_version,
                                                const std::string& name) {
  auto doc = Call("POST", WorkerPath(id, "effects/" + Escape(name) + "/reserve"),
                  Json{{"claim_version", claim_version}});
  if (!doc.ok()) return doc.status();
  EffectReservation r;
  r.answer = StringOr(*doc, "answer");
  r.key = StringOr(*doc, "key");
  r.detail = StringOr(*doc, "detail");
  r.committed_at = StringOr(*doc, "committed_at");
  return r;
}

Result<Json> Client::CommitEffect(const std::string& id, std::int64_t claim_version,
                                  const std::string& name, const std::string& detail) {
  return Call("POST", WorkerPath(id, "effects/" + Escape(name) + "/commit"),
              Json{{"claim_version", claim_version}, {"detail", detail}});
}

Status Client::ReleaseEffect(const std::string& id, std::int64_t claim_version,
                             const std::string& name) {
  return Call("POST", WorkerPath(id, "effects/" + Escape(name) + "/release"),
              Json{{"claim_version", claim_version}})
      .status();
}

Result<FinishResult> Client::Finish(const FinishItem& item) {
  auto doc = Call("POST", WorkerPath(item.id, KindPath(item.kind)), FinishFields(item));
  if (!doc.ok()) return doc.status();
  FinishResult r;
  r.id = item.id;
  r.state = StringOr(*doc, "status");
  return r;
}

Result<std::vector<FinishResult>> Client::FinishBatch(const std::vector<FinishItem>& items) {
  Json list = Json::array();
  for (const FinishItem& item : items) {
    Json entry = FinishFields(item);
    entry["id"] = item.id;
    entry["kind"] = KindPath(item.kind);
    list.push_back(std::move(entry));
  }
  auto doc = Call("POST", "/api/v1/worker/finish", Json{{"items", std::move(list)}});
  if (!doc.ok()) return doc.status();
  std::vector<FinishResult> out;
  for (const Json& item : doc->value("items", Json::array())) {
    FinishResult r;
    r.id = IdToString(item.value("id", Json()));
    if (!item.value("ok", false)) {
      r.status = ErrorToStatus(409, item.value("error", Json::object()));
    }
    r.state = StringOr(item, "status");
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace taskengine_client
