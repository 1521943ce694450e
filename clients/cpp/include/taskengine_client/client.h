// taskengine_client::Client: the public HTTP API (/api/v1) of a taskengine
// server from C++. It speaks only HTTP + JSON (libcurl, nlohmann::json) and
// includes nothing of the engine.
//
//   taskengine_client::Client client({.base_url = "http://127.0.0.1:8080",
//                                     .token = std::getenv("TASKENGINE_TOKEN")});
//   auto r = client.Dispatch("resize", {.tenant = "acme",
//                                       .payload = {{"image", 7}},
//                                       .idempotency_key = "resize-7"});
//   if (!r.ok()) std::cerr << r.status().ToString();
//
// Every call returns a Status/Result: the API's error code ("not_found",
// "conflict", "stale", ...) with the HTTP status, or a transport error
// (http_status 0) when the server could not be reached. Nothing throws.
//
// Ids are decimal strings (the API renders them as JSON numbers or strings;
// both are accepted).
//
// Thread-safe: calls may be made from many threads at once; each call borrows
// a keep-alive connection from a pool and gives it back, so a thread that
// calls repeatedly reuses a warm connection.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "taskengine_client/status.h"

namespace taskengine_client {

namespace internal {
class ConnectionPool;
}  // namespace internal

using Json = nlohmann::json;

struct ClientOptions {
  // "http://host:port" (a trailing '/' is ignored). Required.
  std::string base_url{};
  // Bearer token; empty = no Authorization header.
  std::string token{};
  // Timeout of one ordinary call (long polls add their wait). Default: 30 s.
  std::chrono::milliseconds timeout{30'000};
};

struct DispatchOptions {
  std::string tenant{};  // required for per-tenant jobs, empty for global ones
  Json payload = Json::object();
  std::string idempotency_key{};  // sent as Idempotency-Key; empty = none
  std::optional<std::int64_t> delay_ms{};
  std::string lane{};  // empty = none
  // Further request fields (e.g. "run_at"), merged into the body.
  Json extra = Json::object();
};

// The answer to a dispatch.
struct DispatchResult {
  std::string id{};
  std::string status{};      // "queued", ...
  bool created = false;      // false: an earlier dispatch with the same key
  std::string status_url{};  // "/api/v1/executions/<id>"
};

struct BulkItem {
  std::string job{};
  DispatchOptions options{};  // idempotency_key is sent as the item's "idempotency_key"
};

// One item of a bulk dispatch answer: a DispatchResult, or an error.
struct BulkItemResult {
  Status status{};        // ok, or e.g. conflict
  DispatchResult result;  // when status.ok()
};

struct ListFilter {
  std::string job{}, tenant{}, status{}, cursor{};
  int limit = 0;  // 0 = server default
};

struct ExecutionPage {
  std::vector<Json> items{};
  std::string next_cursor{};  // empty at the end
};

// ---- worker protocol (/api/v1/worker) ----

struct LeaseRequest {
  std::string worker_id{};                // required, e.g. "host:pid"
  std::vector<std::string> queues{};      // 1..32, priority order
  int max = 1;                            // 1..100
  int wait_ms = 0;                        // 0..30000: long-poll
  std::string name{}, host{}, version{};  // optional registration details
  int pid = 0;
  int concurrency = 0;
  // L4: the leases count as started only once a batch heartbeat item says
  // so (HeartbeatItem::started): leases this worker never received expire
  // as free requeues on the server.
  bool confirm_start = false;
  // W4: the handlers this worker can run; the server leases only executions
  // whose job's handler is one of them. Empty = not sent: any handler.
  std::vector<std::string> handlers{};
};

// One leased execution, as the server handed it out. Immutable.
struct Lease {
  std::string id{};
  std::int64_t claim_version = 0;
  std::string job{}, tenant{}, queue{};
  int attempt = 0;
  Json payload = Json::object();
  std::string idempotency_key{};
  std::string effect_key_prefix{};
  std::int64_t lease_ms = 0;
  std::string lease_expires_at{};
  std::string handler{};  // e.g. "command"; empty when the server named none
  Json handler_config = Json::object();
  std::int64_t timeout_ms = 0;  // 0 when the server sent none
  Json raw{};                   // the whole lease object
};

struct HeartbeatItem {
  std::string id{};
  std::int64_t claim_version = 0;
  std::optional<int> progress{};
  // A lease leased with confirm_start whose handler starts now (batch only).
  bool started = false;
};

// One answer of a (batch) heartbeat.
struct HeartbeatResult {
  std::string id{};
  Status status{};  // ok, or stale / not_found: the claim is lost
  bool cancel_requested = false;
  std::int64_t lease_expires_at_ms = 0;
};

// The answer of effects/{name}/reserve.
struct EffectReservation {
  std::string answer{};  // "proceed" | "already_done" | "canceled" | "ambiguous"
  std::string key{};
  std::string detail{};
  std::string committed_at{};
};

struct FinishItem {
  enum class Kind { kComplete, kFail, kRelease };
  std::string id{};
  std::int64_t claim_version = 0;
  Kind kind = Kind::kComplete;
  std::optional<Json> result{};             // kComplete
  std::string failure_class = "retryable";  // kFail: retryable | permanent | ambiguous
  std::string error{};                      // kFail
  std::int64_t retry_after_ms = 0;
};

struct FinishResult {
  std::string id{};
  Status status{};    // ok, or stale / not_found
  std::string state;  // the execution's status afterwards ("succeeded", "queued", ...)
};

class Client {
 public:
  explicit Client(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const ClientOptions& options() const { return options_; }

  // POST /api/v1/jobs/{job}/dispatch. 202 new, 200 repeat of an earlier key.
  Result<DispatchResult> Dispatch(const std::string& job, const DispatchOptions& options);
  // POST /api/v1/dispatch/bulk (1..1000 items, one transaction).
  Result<std::vector<BulkItemResult>> DispatchBulk(const std::vector<BulkItem>& items);
  // GET /api/v1/executions/{id}: everything about one execution.
  Result<Json> GetExecution(const std::string& id);
  // GET /api/v1/executions (newest first).
  Result<ExecutionPage> ListExecutions(const ListFilter& filter);
  // POST /api/v1/executions/{id}/cancel. The answer document.
  Result<Json> Cancel(const std::string& id, const std::string& reason = {});
  // POST /api/v1/executions/{id}/replay. `assume`: "" (server default), keep, done, not_done.
  Result<Json> Replay(const std::string& id, const std::string& reason,
                      const std::string& assume = {});
  // GET /api/v1/executions/{id}/result.
  Result<Json> GetResult(const std::string& id);
  // GET /api/v1/stats.
  Result<Json> Stats();
  // GET /api/v1/workers.
  Result<Json> Workers();

  // --- the worker protocol ---
  // POST /api/v1/worker/lease. `abort` (optional) ends a long poll early with
  // a transport error "aborted".
  Result<std::vector<Lease>> LeaseExecutions(const LeaseRequest& request,
                                             const std::atomic<bool>* abort = nullptr);
  // POST /api/v1/worker/heartbeats. Items may be empty (registration refresh).
  Result<std::vector<HeartbeatResult>> HeartbeatBatch(const std::string& worker_id,
                                                      const std::vector<HeartbeatItem>& items,
                                                      std::int64_t processed, std::int64_t failed);
  // POST /api/v1/worker/executions/{id}/heartbeat.
  Result<HeartbeatResult> Heartbeat(const HeartbeatItem& item);
  // POST /api/v1/worker/executions/{id}/log. level: debug|info|warn|error.
  Status Log(const std::string& id, std::int64_t claim_version, const std::string& level,
             const std::string& message);
  // POST .../effects/{name}/reserve|commit|release.
  Result<EffectReservation> ReserveEffect(const std::string& id, std::int64_t claim_version,
                                          const std::string& name);
  Result<Json> CommitEffect(const std::string& id, std::int64_t claim_version,
                            const std::string& name, const std::string& detail);
  Status ReleaseEffect(const std::string& id, std::int64_t claim_version, const std::string& name);
  // POST .../complete|fail|release for one execution.
  Result<FinishResult> Finish(const FinishItem& item);
  // POST /api/v1/worker/finish: up to 1000 in one transaction.
  Result<std::vector<FinishResult>> FinishBatch(const std::vector<FinishItem>& items);

  // Any call: `method` GET/POST/PATCH, `path` from the root ("/api/v1/..."),
  // `body` null for none. The parsed JSON answer (null for an empty body).
  Result<Json> Call(const std::string& method, const std::string& path, const Json& body,
                    const std::vector<std::pair<std::string, std::string>>& headers = {},
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(0),
                    const std::atomic<bool>* abort = nullptr, int* http_status = nullptr);

 private:
  ClientOptions options_;
  std::unique_ptr<internal::ConnectionPool> pool_;
};

// A JSON id (number or string) as a decimal string; "" when neither.
std::string IdToString(const Json& value);

}  // namespace taskengine_client
