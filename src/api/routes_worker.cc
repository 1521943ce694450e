// The remote worker protocol (W4; L1-L3, E1, C1 over HTTP) and the workers
// list. Every call about a lease carries its claim version and the store
// fences it: a claim that is not current answers 409 `stale` (details: id and
// the claim version sent) and changes nothing; a missing execution answers
// 404. Worker tokens must have access to every tenant (a worker runs whatever
// its queues hold), so a tenant-bound worker token gets 403 on every route.
//
// Lease requests long-poll through the LeaseBroker (no thread is held while
// a worker waits). Single heartbeats of concurrent requests are
// group-committed into the store's batch call; single finishes are handed to
// the store's writer without a waiting thread and answered from its commit,
// which they share with the concurrent ones (where the store writes without
// waiting, on the network thread that read them); the batch routes are one
// store call each. Every finish confirms the caller's API token in its own
// transaction (FinishRequest::token_id), so the router may authenticate a
// remembered token for the finish routes (RouteAccess::ConfirmedAtCommit).
// Outcomes are published through the engine (PublishOutcomes,
// PublishOutcomesAsync, engine/engine_internal.h) so that work they make due
// wakes workers.
//
// Worker registration: lease and batch heartbeat requests register the worker
// (Store::ReportWorker, when the WorkerRegistry says a report is due). The
// store keeps id, host, pid, state, one current execution and counts; the
// rest of the registration (name, version, queues, concurrency, every
// execution in hand) is kept in this process's WorkerRegistry
// (worker_registry.h) and merged into GET /api/v1/workers.
#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include "api/lease_broker.h"
#include "api/metrics.h"
#include "api/routes.h"
#include "api/worker_registry.h"
#include "core/mutex.h"
#include "core/utf8.h"

namespace taskengine::api {
namespace {

constexpr std::int64_t kMaxLeaseBatch = 100;
constexpr std::int64_t kMaxWaitMs = 30'000;
constexpr std::size_t kMaxQueues = 32;
constexpr std::size_t kMaxHandlers = 64;
constexpr std::size_t kMaxHandlerName = 100;
constexpr std::size_t kMaxWorkerId = 200;
constexpr std::size_t kMaxLabel = 255;  // name, host, version
constexpr std::int64_t kMaxConcurrency = 100'000;
constexpr std::size_t kMaxBatchItems = 1000;
constexpr std::size_t kMaxLogBytes = 16 * 1024;  // longer lines are truncated
constexpr std::size_t kMaxErrorBytes = 64 * 1024;
constexpr std::size_t kMaxDetailBytes = 64 * 1024;
constexpr std::int64_t kMaxRetryAfterMs = 7LL * 24 * 3600 * 1000;
constexpr auto kJobCacheTtl = std::chrono::seconds(1);

// Worker ids: 1..200 visible ASCII characters (e.g. "host-1:4242").
bool IsValidWorkerId(std::string_view id) {
  if (id.empty() || id.size() > kMaxWorkerId) return false;
  for (char c : id) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

// Handler names in a lease request: 1..100 visible ASCII characters.
bool IsValidHandlerName(std::string_view name) {
  if (name.empty() || name.size() > kMaxHandlerName) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return c >= 0x21 && c <= 0x7e; });
}

std::string IdText(ExecutionId id) { return std::to_string(id.value); }

// Job definitions for lease answers (handler, config), cached briefly so a
// burst of leases does not read each definition again (by the Clock's
// monotonic reading). Thread-safe.
class JobCache {
 public:
  // Not owned; both must outlive the cache.
  JobCache(Store* store, const Clock* clock) : store_(store), clock_(clock) {}

  // nullptr when the definition is gone or cannot be read now.
  std::shared_ptr<const JobDefinition> Get(const JobName& job) EXCLUDES(mu_) {
    const Clock::SteadyTime now = clock_->Steady();
    {
      MutexLock lock(mu_);
      auto it = jobs_.find(job.value);
      if (it != jobs_.end() && now - it->second.fetched_at < kJobCacheTtl) return it->second.job;
    }
    Result<JobDefinition> def = store_->GetJob(job);
    if (!def.ok()) return nullptr;
    auto shared = std::make_shared<const JobDefinition>(std::move(def).value());
    MutexLock lock(mu_);
    if (jobs_.size() > 10'000) jobs_.clear();
    jobs_[job.value] = Cached{shared, now};
    return shared;
  }

 private:
  struct Cached {
    std::shared_ptr<const JobDefinition> job;
    Clock::SteadyTime fetched_at;
  };
  Store* const store_;
  const Clock* const clock_;
  Mutex mu_;
  std::map<std::string, Cached> jobs_ GUARDED_BY(mu_);
};

// The state the worker routes share. Thread-safe.
struct WorkerProtocol {
  explicit WorkerProtocol(ApiContext& context)
      : ctx(context),
        metrics(context.options.worker_metrics.get()),
        workers(context.clock),
        jobs(context.store, context.clock),
        heartbeats(
            [store = context.store](const std::vector<HeartbeatRequest>& batch) {
              return store->HeartbeatBatch(batch);
            },
            kMaxBatchItems) {}

  // Registers the worker with the store when a report is due (best effort:
  // a lost registration is harmless; the next report is due within a second).
  void Report(const std::optional<WorkerInfo>& row) {
    if (!row) return;
    (void)ctx.store->ReportWorker(*row);
  }

  // Counts a recorded outcome of a remote worker (I5 metrics); `reply` is
  // what the store recorded.
  void CountOutcome(const FinishRequest& finish, const FinishReply& reply) {
    if (finish.kind == FinishRequest::Kind::kComplete) {
      // C1: a success reported after a cancel request ended canceled.
      if (reply.status == ExecutionStatus::kSucceeded) ++metrics->completions;
    } else if (finish.kind == FinishRequest::Kind::kFail) {
      if (finish.unsupported_schema) {
        ++metrics->failed_unsupported_schema;
      } else if (finish.failure_class == FailureClass::kPermanent) {
        ++metrics->failed_permanent;
      } else if (finish.failure_class == FailureClass::kAmbiguous) {
        ++metrics->failed_ambiguous;
      } else {
        ++metrics->failed_retryable;
      }
    }
  }

  ApiContext& ctx;
  ApiMetrics* const metrics;  // ctx.options.worker_metrics; lives as long as ctx
  WorkerRegistry workers;
  JobCache jobs;
  CallBatcher<HeartbeatRequest, Result<HeartbeatReply>> heartbeats;
};

using ProtocolPtr = std::shared_ptr<WorkerProtocol>;

// --- request helpers ---------------------------------------------------------------

// 403 for a worker token bound to tenants (worker tokens must be global).
std::optional<HttpResponse> RequireGlobalWorker(const RouteRequest& req) {
  if (PrincipalOf(req).all_tenants) return std::nullopt;
  return ErrorResponse(403, "forbidden",
                       "the worker protocol needs a worker token with access to every tenant");
}

// An execution id in a body: a string of decimal digits (an integer is
// accepted too).
std::optional<ExecutionId> ReadId(StrictObject& in, std::string_view field) {
  const nlohmann::json* v = in.Value(field);
  if (!in.ok()) return std::nullopt;
  if (v == nullptr || v->is_null()) {
    in.Fail(field, "is required");
    return std::nullopt;
  }
  if (v->is_number_integer() || v->is_number_unsigned()) {
    std::int64_t n = in.Int(field, 1, std::numeric_limits<std::int64_t>::max()).value_or(0);
    if (n > 0) return ExecutionId(n);
    return std::nullopt;
  }
  if (!v->is_string()) {
    in.Fail(field, "must be an execution id (a string of decimal digits)");
    return std::nullopt;
  }
  auto n = ParseInteger(v->get_ref<const std::string&>(), 1,
                        std::numeric_limits<std::int64_t>::max(), "id");
  if (!n.ok()) {
    in.Fail(field, "must be an execution id (a string of decimal digits)");
    return std::nullopt;
  }
  return ExecutionId(*n);
}

std::optional<ClaimVersion> ReadClaimVersion(StrictObject& in) {
  in.Require("claim_version");
  auto v = in.Int("claim_version", 0, std::numeric_limits<std::int64_t>::max());
  if (!v) return std::nullopt;
  return ClaimVersion(*v);
}

Result<ExecutionId> PathId(const RouteRequest& req) {
  auto id =
      ParseInteger(req.Param("id"), 1, std::numeric_limits<std::int64_t>::max(), "execution id");
  if (!id.ok()) return id.status();
  return ExecutionId(*id);
}

// The answer to a failed call about `ref`: 409 stale names the execution and
// the claim version sent; other errors by the one mapping.
HttpResponse LeaseError(const Status& status, const LeaseRef& ref) {
  if (status.code() == ErrorCode::kStale) {
    return StatusResponse(status, {{"id", IdText(ref.id)}, {"claim_version", ref.version.value}});
  }
  return StatusResponse(status);
}

// {"code", "message"} of a failed batch item.
Json ItemError(const Status& status) {
  return {{"code", std::string(HttpErrorFor(status.code()).code)}, {"message", status.message()}};
}

HttpResponse NoContent() {
  HttpResponse r;
  r.status = 204;
  return r;
}

// Reads a finish (complete, fail, release) of kind `kind` from `in`; the
// fields that do not belong to the kind are refused.
void ReadFinishFields(StrictObject& in, FinishRequest::Kind kind, FinishRequest* out) {
  out->kind = kind;
  if (kind == FinishRequest::Kind::kComplete) {
    const nlohmann::json* result = in.Value("result");
    if (result != nullptr && !result->is_null()) out->result_json = DumpJson(*result);
    return;
  }
  if (kind == FinishRequest::Kind::kFail) {
    std::optional<std::string> cls = in.String("class", 20);
    std::optional<std::string> error = in.String("error", kMaxErrorBytes);
    std::optional<std::int64_t> retry_after = in.Int("retry_after_ms", 0, kMaxRetryAfterMs);
    std::optional<bool> unsupported = in.Bool("unsupported_schema");
    out->failure_class = FailureClass::kRetryable;
    if (cls) {
      if (*cls == "retryable") {
        out->failure_class = FailureClass::kRetryable;
      } else if (*cls == "permanent") {
        out->failure_class = FailureClass::kPermanent;
      } else if (*cls == "ambiguous") {
        out->failure_class = FailureClass::kAmbiguous;
      } else {
        in.Fail("class", "must be one of retryable, permanent, ambiguous");
      }
    }
    out->error = error.value_or("");
    out->retry_after_ms = retry_after.value_or(0);
    out->unsupported_schema = unsupported.value_or(false);
    if (out->unsupported_schema && out->failure_class != FailureClass::kPermanent) {
      in.Fail("unsupported_schema", "needs class permanent");
    }
  }
}

std::optional<FinishRequest::Kind> ParseKind(std::string_view kind) {
  if (kind == "complete") return FinishRequest::Kind::kComplete;
  if (kind == "fail") return FinishRequest::Kind::kFail;
  if (kind == "release") return FinishRequest::Kind::kRelease;
  return std::nullopt;
}

// --- lease -------------------------------------------------------------------------------

// POST /api/v1/worker/lease
//   {"worker_id": "host-1:123", "queues": ["default"], "max": 1..100 (1),
//    "wait_ms": 0..30000 (0), "confirm_start": false, "handlers": ["command"],
//    "name", "host", "pid", "version", "concurrency"}
// -> 200 {"leases": [Lease...]}: as soon as at least one execution is leased,
//    else an empty list once wait_ms has passed (or the server stops).
//    503 when too many polls are parked.
// W4: with "handlers" (1..64 names) only executions whose job's handler is
// one of them are leased; the others stay queued for a worker that can run
// them. Without it, any handler (workers that do not say).
// L4: with "confirm_start": true the leases count as started only once the
// worker says so (a /worker/heartbeats item with "started": true) before it
// runs their handlers, so leases a worker never received (it went away while
// its poll was parked) expire as free requeues. Without it, they count as
// started when leased.
void LeaseRoute(const ProtocolPtr& wp, const RouteRequest& req, const Responder& respond) {
  if (auto forbidden = RequireGlobalWorker(req)) {
    respond.Send(*forbidden);
    return;
  }
  auto body = ParseJsonBody(req.http, /*allow_empty=*/false);
  if (!body.ok()) {
    respond.Send(StatusResponse(body.status()));
    return;
  }
  StrictObject in(*body, "request body");
  in.Require("worker_id");
  in.Require("queues");
  std::optional<std::string> worker_id = in.String("worker_id", kMaxWorkerId);
  const nlohmann::json* queues = in.Value("queues");
  std::optional<std::int64_t> max = in.Int("max", 1, kMaxLeaseBatch);
  std::optional<std::int64_t> wait_ms = in.Int("wait_ms", 0, kMaxWaitMs);
  std::optional<bool> confirm_start = in.Bool("confirm_start");
  const nlohmann::json* handlers = in.Value("handlers");
  WorkerRegistry::Registration reg;
  reg.name = in.String("name", kMaxLabel);
  reg.host = in.String("host", kMaxLabel);
  reg.version = in.String("version", kMaxLabel);
  reg.pid = in.Int("pid", 0, std::numeric_limits<std::int32_t>::max());
  if (auto c = in.Int("concurrency", 1, kMaxConcurrency)) reg.concurrency = static_cast<int>(*c);
  if (worker_id && !IsValidWorkerId(*worker_id)) {
    in.Fail("worker_id", "must be 1..200 visible ASCII characters");
  }
  if (in.ok() && queues != nullptr) {
    if (!queues->is_array() || queues->empty() || queues->size() > kMaxQueues) {
      in.Fail("queues", "must be an array of 1..32 queue names");
    } else {
      for (const nlohmann::json& q : *queues) {
        if (!q.is_string() || !IsValidQueueName(q.get_ref<const std::string&>())) {
          in.Fail("queues", "holds an invalid queue name (must match [a-z0-9][a-z0-9._-]{0,99})");
          break;
        }
        const std::string& name = q.get_ref<const std::string&>();
        if (IsReservedQueueName(name)) {
          in.Fail("queues", "names queue '" + name +
                                "', which is the server's own (its notification deliveries)");
          break;
        }
        if (std::find(reg.queues.begin(), reg.queues.end(), name) != reg.queues.end()) {
          in.Fail("queues", "names queue '" + name + "' twice");
          break;
        }
        reg.queues.push_back(name);
      }
    }
  }
  if (in.ok() && handlers != nullptr && !handlers->is_null()) {
    if (!handlers->is_array() || handlers->empty() || handlers->size() > kMaxHandlers) {
      in.Fail("handlers", "must be an array of 1..64 handler names");
    } else {
      reg.handlers.emplace();
      for (const nlohmann::json& h : *handlers) {
        if (!h.is_string() || !IsValidHandlerName(h.get_ref<const std::string&>())) {
          in.Fail("handlers", "holds an invalid handler name (1..100 visible ASCII characters)");
          break;
        }
        reg.handlers->push_back(h.get<std::string>());
      }
    }
  }
  if (Status s = in.Finish(); !s.ok()) {
    respond.Send(StatusResponse(s));
    return;
  }
  reg.id = WorkerId(*worker_id);
  wp->Report(wp->workers.OnLease(reg, wp->ctx.clock->NowMillis()));

  LeasePoll poll;
  poll.worker = reg.id;
  poll.queues = reg.queues;
  poll.max = static_cast<int>(max.value_or(1));
  poll.wait = std::chrono::milliseconds(wait_ms.value_or(0));
  poll.mark_started = !confirm_start.value_or(false);
  poll.handlers = reg.handlers;
  poll.deliver = [wp, respond, worker = reg.id](std::vector<Lease> leases) {
    wp->workers.OnLeased(worker, leases);
    wp->metrics->claims += static_cast<std::int64_t>(leases.size());
    // Each job's definition and handler config, once per batch.
    std::map<std::string, std::pair<std::shared_ptr<const JobDefinition>, std::string>, std::less<>>
        jobs;
    HttpResponse response;
    response.body = "{\"leases\":[";
    for (const Lease& lease : leases) {
      auto it = jobs.find(lease.job.value);
      if (it == jobs.end()) {
        std::shared_ptr<const JobDefinition> job = wp->jobs.Get(lease.job);
        std::string config;
        if (job != nullptr) {
          config = HandlerConfigText(*job);
          if (wp->ctx.options.expand_handler_config) {
            // A named profile or target becomes the settings it names (a
            // reference the server cannot resolve is sent as stored: the
            // worker refuses it as a bad config).
            auto expanded = wp->ctx.options.expand_handler_config(*job);
            if (expanded.ok()) config = EmbeddedJsonText(*expanded);
          }
        }
        it = jobs.emplace(lease.job.value, std::pair{std::move(job), std::move(config)}).first;
      }
      if (response.body.back() != '[') response.body += ',';
      AppendLeaseJson(response.body, lease, it->second.first.get(), it->second.second);
    }
    response.body += "]}";
    respond.Send(std::move(response));
  };
  if (Status s = wp->ctx.lease_broker->Submit(std::move(poll)); !s.ok()) {
    respond.Send(StatusResponse(s));
  }
}

// --- heartbeats ----------------------------------------------------------------------------

// POST /api/v1/worker/executions/{id}/heartbeat   {"claim_version": 3, "progress": 0..100}
// -> 200 {"cancel_requested", "lease_expires_at", "lease_expires_at_ms"}
HttpResponse HeartbeatRoute(WorkerProtocol& wp, const RouteRequest& req) {
  if (auto forbidden = RequireGlobalWorker(req)) return *forbidden;
  auto id = PathId(req);
  if (!id.ok()) return StatusResponse(id.status());
  auto body = ParseJsonBody(req.http, /*allow_empty=*/false);
  if (!body.ok()) return StatusResponse(body.status());
  StrictObject in(*body, "request body");
  std::optional<ClaimVersion> version = ReadClaimVersion(in);
  std::optional<std::int64_t> progress = in.Int("progress", 0, 100);
  if (Status s = in.Finish(); !s.ok()) return StatusResponse(s);
  HeartbeatRequest h;
  h.lease = LeaseRef{*id, *version};
  if (progress) h.progress = static_cast<int>(*progress);
  Result<HeartbeatReply> reply = wp.heartbeats.Call(h);
  if (!reply.ok()) return LeaseError(reply.status(), h.lease);
  return JsonResponse(200, Json{{"cancel_requested", reply->cancel_requested},
                                {"lease_expires_at", TimeOrNull(reply->lease_expires_at)},
                                {"lease_expires_at_ms", reply->lease_expires_at}});
}

// POST /api/v1/worker/heartbeats
//   {"worker_id": "...", "items": [{"id": "42", "claim_version": 3, "progress": 10,
//    "started": true}], "processed": N, "failed": M}
// -> 200 {"items": [{"id", "ok": true, "cancel_requested", "lease_expires_at_ms"} |
//                   {"id", "ok": false, "error": {"code", "message"}}]}
// One store transaction (two when an item says "started": its lease, leased
// with confirm_start, is then marked started unless the heartbeat found it
// stale; a worker runs its handler only after an ok answer); also refreshes
// the worker's registration (items may be empty: a worker heartbeat only).
HttpResponse HeartbeatsRoute(WorkerProtocol& wp, const RouteRequest& req) {
  if (auto forbidden = RequireGlobalWorker(req)) return *forbidden;
  auto body = ParseJsonBody(req.http, /*allow_empty=*/false);
  if (!body.ok()) return StatusResponse(body.status());
  StrictObject in(*body, "request body");
  in.Require("worker_id");
  std::optional<std::string> worker_id = in.String("worker_id", kMaxWorkerId);
  const nlohmann::json* items = in.Value("items");
  std::optional<std::int64_t> processed =
      in.Int("processed", 0, std::numeric_limits<std::int64_t>::max());
  std::optional<std::int64_t> failed =
      in.Int("failed", 0, std::numeric_limits<std::int64_t>::max());
  if (worker_id && !IsValidWorkerId(*worker_id)) {
    in.Fail("worker_id", "must be 1..200 visible ASCII characters");
  }
  std::vector<HeartbeatRequest> requests;
  std::vector<std::size_t> starting;  // indexes of the items that say "started"
  if (in.ok() && items != nullptr && !items->is_null()) {
    if (!items->is_array() || items->size() > kMaxBatchItems) {
      in.Fail("items", "must be an array of at most 1000 items");
    } else {
      for (std::size_t i = 0; i < items->size() && in.ok(); ++i) {
        StrictObject item((*items)[i], "items[" + std::to_string(i) + "]");
        std::optional<ExecutionId> id = ReadId(item, "id");
        std::optional<ClaimVersion> version = ReadClaimVersion(item);
        std::optional<std::int64_t> progress = item.Int("progress", 0, 100);
        std::optional<bool> started = item.Bool("started");
        if (Status s = item.Finish(); !s.ok()) return StatusResponse(s);
        if (started.value_or(false)) starting.push_back(requests.size());
        HeartbeatRequest h;
        h.lease = LeaseRef{*id, *version};
        if (progress) h.progress = static_cast<int>(*progress);
        requests.push_back(h);
      }
    }
  }
  if (Status s = in.Finish(); !s.ok()) return StatusResponse(s);

  std::vector<Result<HeartbeatReply>> replies;
  if (!requests.empty()) replies = wp.ctx.store->HeartbeatBatch(requests);
  if (!starting.empty()) {
    // After the heartbeats: a lease the heartbeat found stale is not marked.
    std::vector<LeaseRef> refs;
    std::vector<std::size_t> marked;
    for (std::size_t i : starting) {
      if (!replies[i].ok()) continue;
      refs.push_back(requests[i].lease);
      marked.push_back(i);
    }
    std::vector<Status> started =
        refs.empty() ? std::vector<Status>{} : wp.ctx.store->MarkStarted(refs);
    for (std::size_t k = 0; k < started.size(); ++k) {
      if (!started[k].ok()) replies[marked[k]] = started[k];
    }
  }
  std::vector<ExecutionId> in_hand;
  Json out = Json::array();
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const Result<HeartbeatReply>& r = replies[i];
    if (r.ok()) {
      in_hand.push_back(requests[i].lease.id);
      out.push_back(Json{{"id", IdText(requests[i].lease.id)},
                         {"ok", true},
                         {"cancel_requested", r->cancel_requested},
                         {"lease_expires_at_ms", r->lease_expires_at}});
    } else {
      if (r.status().code() == ErrorCode::kStale) ++wp.metrics->stale_rejections;
      out.push_back(Json{
          {"id", IdText(requests[i].lease.id)}, {"ok", false}, {"error", ItemError(r.status())}});
    }
  }
  wp.Report(wp.workers.OnHeartbeat(WorkerId(*worker_id), in_hand, processed, failed,
                                   wp.ctx.clock->NowMillis()));
  return JsonResponse(200, Json{{"items", std::move(out)}});
}

// --- log and effects ------------------------------------------------------------------------

// POST /api/v1/worker/executions/{id}/log
//   {"claim_version": 3, "level": "debug|info|warn|error", "message": "..."} -> 204
// Messages longer than 16 KiB are truncated.
HttpResponse LogRoute(WorkerProtocol& wp, const RouteRequest& req) {
  if (auto forbidden = RequireGlobalWorker(req)) return *forbidden;
  auto id = PathId(req);
  if (!id.ok()) return StatusResponse(id.status());
  auto body = ParseJsonBody(req.http, /*allow_empty=*/false);
  if (!body.ok()) return StatusResponse(body.status());
  StrictObject in(*body, "request body");
  std::optional<ClaimVersion> version = ReadClaimVersion(in);
  std::optional<std::string> level_name = in.String("level", 10);
  in.Require("message");
  std::optional<std::string> message = in.String("message", std::string::npos - 1);
  LogLevel level = LogLevel::kInfo;
  if (level_name) {
    auto parsed = ParseLogLevel(*level_name);
    if (!parsed) {
      in.Fail("level", "must be one of debug, info, warn, error");
    } else {
      level = *parsed;
    }
  }
  if (Status s = in.Finish(); !s.ok()) return StatusResponse(s);
  const std::string_view text = CutUtf8(*message, kMaxLogBytes);
  const LeaseRef ref{*id, *version};
  if (Status s = wp.ctx.store->AppendLog(ref, level, text); !s.ok()) return LeaseError(s, ref);
  return NoContent();
}

// Reads {"claim_version": N} plus, when `detail` is given, "detail".
Result<LeaseRef> ReadEffectCall(const RouteRequest& req, std::optional<std::string>* detail) {
  TE_ASSIGN_OR_RETURN(ExecutionId id, PathId(req));
  if (!IsValidEffectName(req.Param("name"))) {
    return InvalidArgument("effect name: 1..120 characters of [A-Za-z0-9._:-]");
  }
  TE_ASSIGN_OR_RETURN(nlohmann::json body, ParseJsonBody(req.http, /*allow_empty=*/false));
  StrictObject in(body, "request body");
  std::optional<ClaimVersion> version = ReadClaimVersion(in);
  if (detail != nullptr) *detail = in.String("detail", kMaxDetailBytes);
  TE_RETURN_IF_ERROR(in.Finish());
  return LeaseRef{id, *version};
}

// POST /api/v1/worker/executions/{id}/effects/{name}/reserve   {"claim_version": 3}
// -> 200 {"answer": "proceed|already_done|canceled|ambiguous", "key", "detail", "committed_at"}
//    (detail and committed_at set for already_done); 409 stale for a claim
//    that is not current (E1).
HttpResponse ReserveEffectRoute(WorkerProtocol& wp, const RouteRequest& req) {
  if (auto forbidden = RequireGlobalWorker(req)) return *forbidden;
  auto ref = ReadEffectCall(req, nullptr);
  if (!ref.ok()) return StatusResponse(ref.status());
  Result<EffectReply> reply = wp.ctx.store->ReserveEffect(*ref, req.Param("name"));
  if (!reply.ok()) return LeaseError(reply.status(), *ref);
  if (reply->answer == EffectAnswer::kStale) {
    return LeaseError(
        Stale("claim version " + std::to_string(ref->version.value) + " of execution " +
              IdText(ref->id) + " is not current; reserve nothing"),
        *ref);
  }
  if (reply->answer == EffectAnswer::kAlreadyDone) ++wp.metrics->effect_duplicates;
  return JsonResponse(
      200, Json{{"answer", std::string(ToString(reply->answer))},
                {"key", reply->key},
                {"detail",
                 reply->answer == EffectAnswer::kAlreadyDone ? Json(reply->detail) : Json(nullptr)},
                {"committed_at", TimeOrNull(reply->committed_at)}});
}

// POST /api/v1/worker/executions/{id}/effects/{name}/commit
//   {"claim_version": 3, "detail": "..."} -> 200 Effect. 409 conflict when it
//   was never reserved; committing again keeps the first detail.
HttpResponse CommitEffectRoute(WorkerProtocol& wp, const RouteRequest& req) {
  if (auto forbidden = RequireGlobalWorker(req)) return *forbidden;
  std::optional<std::string> detail;
  auto ref = ReadEffectCall(req, &detail);
  if (!ref.ok()) return StatusResponse(ref.status());
  Result<EffectRecord> effect =
      wp.ctx.store->CommitEffect(*ref, req.Param("name"), detail.value_or(""));
  if (!effect.ok()) return LeaseError(effect.status(), *ref);
  return JsonResponse(200, EffectToJson(*effect));
}

// POST /api/v1/worker/executions/{id}/effects/{name}/release   {"claim_version": 3} -> 204
// The effect certainly did not happen: a retry proceeds instead of meeting ambiguous.
HttpResponse ReleaseEffectRoute(WorkerProtocol& wp, const RouteRequest& req) {
  if (auto forbidden = RequireGlobalWorker(req)) return *forbidden;
  auto ref = ReadEffectCall(req, nullptr);
  if (!ref.ok()) return StatusResponse(ref.status());
  if (Status s = wp.ctx.store->ReleaseEffect(*ref, req.Param("name")); !s.ok()) {
    return LeaseError(s, *ref);
  }
  return NoContent();
}

// --- outcomes ---------------------------------------------------------------------------------

// POST /api/v1/worker/executions/{id}/complete  {"claim_version", "result": any JSON}
//   -> 200 {"status": "succeeded"}
// POST /api/v1/worker/executions/{id}/fail      {"claim_version", "class":
//   "retryable|permanent|ambiguous" (retryable), "error", "retry_after_ms",
//   "unsupported_schema"} -> 200 {"status": "queued|failed|quarantined|...", "run_at"}
// POST /api/v1/worker/executions/{id}/release   {"claim_version"} -> 200 {"status": "queued"}
//   (canceled when cancellation was requested)
// Answered from the store's commit (no thread waits for it): 200 only once
// the outcome is durable; 409 stale (counted) and other errors changed nothing.
void FinishRoute(const ProtocolPtr& wp, const RouteRequest& req, FinishRequest::Kind kind,
                 const Responder& respond) {
  if (auto forbidden = RequireGlobalWorker(req)) return (void)respond.Send(std::move(*forbidden));
  auto id = PathId(req);
  if (!id.ok()) return (void)respond.Send(StatusResponse(id.status()));
  auto body = ParseJsonBody(req.http, /*allow_empty=*/false);
  if (!body.ok()) return (void)respond.Send(StatusResponse(body.status()));
  StrictObject in(*body, "request body");
  std::vector<FinishRequest> finishes(1);
  FinishRequest& finish = finishes.front();
  std::optional<ClaimVersion> version = ReadClaimVersion(in);
  ReadFinishFields(in, kind, &finish);
  if (Status s = in.Finish(); !s.ok()) return (void)respond.Send(StatusResponse(s));
  finish.lease = LeaseRef{*id, *version};
  finish.token_id = PrincipalOf(req).token_id;  // the routes confirm it at commit
  // What the answer and the metrics need of the request (not its result or error text).
  FinishRequest counted;
  counted.lease = finish.lease;
  counted.kind = finish.kind;
  counted.failure_class = finish.failure_class;
  counted.unsupported_schema = finish.unsupported_schema;
  PublishOutcomesAsync(
      *wp->ctx.engine, std::move(finishes),
      [wp, counted = std::move(counted), respond](std::vector<Result<FinishReply>> replies) {
        const Result<FinishReply>& reply = replies.front();
        if (!reply.ok()) {
          if (reply.status().code() == ErrorCode::kStale) ++wp->metrics->stale_rejections;
          respond.Send(LeaseError(reply.status(), counted.lease));
          return;
        }
        wp->CountOutcome(counted, *reply);
        wp->workers.OnFinished({counted.lease.id});
        // Answered on a thread of the store after the commit: the answer is
        // built where it is written.
        respond.SendBuilt([fail = counted.kind == FinishRequest::Kind::kFail, reply = *reply] {
          HttpResponse response;
          response.status = 200;
          response.body = FinishReplyText(reply, fail);
          return response;
        });
      });
}

// POST /api/v1/worker/finish
//   {"items": [{"id": "42", "claim_version": 3, "kind": "complete|fail|release",
//               "result", "class", "error", "retry_after_ms", "unsupported_schema"}]}
// -> 200 {"items": [{"id", "ok": true, "status"} | {"id", "ok": false, "error": {"code",
// "message"}}]} 1..1000 items in one transaction: each is fenced on its own, none is ok before all
// are durable. A malformed item refuses the whole request (400).
HttpResponse FinishBatchRoute(WorkerProtocol& wp, const RouteRequest& req) {
  if (auto forbidden = RequireGlobalWorker(req)) return *forbidden;
  auto body = ParseJsonBody(req.http, /*allow_empty=*/false);
  if (!body.ok()) return StatusResponse(body.status());
  StrictObject in(*body, "request body");
  in.Require("items");
  const nlohmann::json* items = in.Value("items");
  std::vector<FinishRequest> requests;
  const std::int64_t token_id = PrincipalOf(req).token_id;  // the route confirms it at commit
  if (in.ok()) {
    if (!items->is_array() || items->empty() || items->size() > kMaxBatchItems) {
      in.Fail("items", "must be an array of 1..1000 items");
    } else {
      for (std::size_t i = 0; i < items->size(); ++i) {
        StrictObject item((*items)[i], "items[" + std::to_string(i) + "]");
        std::optional<ExecutionId> id = ReadId(item, "id");
        std::optional<ClaimVersion> version = ReadClaimVersion(item);
        item.Require("kind");
        std::optional<std::string> kind_name = item.String("kind", 20);
        FinishRequest finish;
        if (kind_name) {
          if (auto kind = ParseKind(*kind_name)) {
            ReadFinishFields(item, *kind, &finish);
          } else {
            item.Fail("kind", "must be one of complete, fail, release");
          }
        }
        if (Status s = item.Finish(); !s.ok()) return StatusResponse(s);
        finish.lease = LeaseRef{*id, *version};
        finish.token_id = token_id;
        requests.push_back(std::move(finish));
      }
    }
  }
  if (Status s = in.Finish(); !s.ok()) return StatusResponse(s);

  std::vector<Result<FinishReply>> replies = PublishOutcomes(*wp.ctx.engine, requests);
  // Every item carries the request's token: when it no longer stands, none
  // was finished, and the request as a whole is refused.
  if (std::all_of(replies.begin(), replies.end(), [](const Result<FinishReply>& r) {
        return r.status().code() == ErrorCode::kUnauthenticated;
      })) {
    return StatusResponse(replies.front().status());
  }
  std::vector<ExecutionId> finished;
  Json out = Json::array();
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const std::string id = IdText(requests[i].lease.id);
    if (replies[i].ok()) {
      wp.CountOutcome(requests[i], *replies[i]);
      finished.push_back(requests[i].lease.id);
      out.push_back(
          Json{{"id", id}, {"ok", true}, {"status", std::string(ToString(replies[i]->status))}});
    } else {
      if (replies[i].status().code() == ErrorCode::kStale) ++wp.metrics->stale_rejections;
      out.push_back(Json{{"id", id}, {"ok", false}, {"error", ItemError(replies[i].status())}});
    }
  }
  wp.workers.OnFinished(finished);
  return JsonResponse(200, Json{{"items", std::move(out)}});
}

// --- workers list -----------------------------------------------------------------------------

// Hides from a principal bound to tenants what a worker's line tells about
// other tenants' work (X2): workers run every tenant's executions, so its
// processed and failed totals and its busy and idle threads become null and "current" keeps only
// the executions of the principal's tenants.
void ScopeWorkerJson(ApiContext& ctx, const Principal& principal, Json& worker) {
  worker["processed"] = nullptr;
  worker["failed"] = nullptr;
  worker["busy"] = nullptr;
  worker["idle"] = nullptr;
  Json visible = Json::array();
  for (const Json& id : worker["current"]) {
    auto e = VisibleExecution(ctx, principal, id.get<std::string>());
    if (e.ok()) visible.push_back(id);
  }
  worker["current"] = std::move(visible);
}

// GET /api/v1/workers -> {"items": [Worker...]} by id: the in-process pool of
// every node (kind "pool") and the remote workers (kind "remote"), live,
// stale or stopped. A principal bound to tenants sees every worker, without
// the figures and current executions of other tenants (ScopeWorkerJson).
HttpResponse ListWorkersRoute(WorkerProtocol& wp, const RouteRequest& req) {
  const Principal& principal = PrincipalOf(req);
  auto query = QueryParams::Parse(req.http.query);
  if (!query.ok()) return StatusResponse(query.status());
  if (Status s = query->RejectUnknown({}); !s.ok()) return StatusResponse(s);
  const Millis now = wp.ctx.clock->NowMillis();
  Result<std::vector<WorkerInfo>> stored = wp.ctx.store->ListWorkers(0);
  if (!stored.ok()) return StatusResponse(stored.status());
  std::map<std::string, WorkerDetails> details;
  std::map<std::string, WorkerInfo> rows;
  wp.workers.Snapshot(&details, &rows);
  // The store's rows win (they hold what every node reported); workers this
  // process knows but the store does not (a lost report) are listed too.
  for (WorkerInfo& w : *stored) rows[w.id.value] = std::move(w);
  Json items = Json::array();
  for (const auto& [id, row] : rows) {
    auto d = details.find(id);
    Json worker = WorkerToJson(row, d == details.end() ? nullptr : &d->second, now);
    if (!principal.all_tenants) ScopeWorkerJson(wp.ctx, principal, worker);
    items.push_back(std::move(worker));
  }
  return JsonResponse(200, Json{{"items", std::move(items)}});
}

}  // namespace

// Counts the answers 409 stale of a worker route (I5 metrics).
RouteHandler CountingStale(ApiMetrics* metrics, RouteHandler route) {
  return [metrics, route = std::move(route)](const RouteRequest& r) {
    HttpResponse response = route(r);
    if (response.status == 409) {
      auto body = nlohmann::json::parse(response.body, nullptr, /*allow_exceptions=*/false);
      if (body.is_object() && body.contains("error") && body["error"].is_object() &&
          body["error"].value("code", "") == HttpErrorFor(ErrorCode::kStale).code) {
        ++metrics->stale_rejections;
      }
    }
    return response;
  };
}

void RegisterWorkerRoutes(ApiContext& ctx, Router& router) {
  if (!ctx.options.worker_metrics) ctx.options.worker_metrics = std::make_shared<ApiMetrics>();
  ctx.lease_broker = std::make_unique<LeaseBroker>(ctx.store, ctx.clock, LeaseBrokerOptions{});
  ctx.engine->AddWorkListener(ctx.lease_broker->WakeCallback());
  auto wp = std::make_shared<WorkerProtocol>(ctx);
  const RouteAccess worker = RouteAccess::Requires(Scope::kWorker);

  router.AddAsync(HttpMethod::kPost, "/api/v1/worker/lease", worker,
                  [wp](RouteRequest r, Responder respond) { LeaseRoute(wp, r, respond); });
  ApiMetrics* const metrics = ctx.options.worker_metrics.get();
  const auto add = [&](std::string pattern, RouteHandler handler) {
    router.Add(HttpMethod::kPost, std::move(pattern), worker,
               CountingStale(metrics, std::move(handler)));
  };
  add("/api/v1/worker/executions/{id}/heartbeat",
      [wp](const RouteRequest& r) { return HeartbeatRoute(*wp, r); });
  add("/api/v1/worker/heartbeats", [wp](const RouteRequest& r) { return HeartbeatsRoute(*wp, r); });
  add("/api/v1/worker/executions/{id}/log",
      [wp](const RouteRequest& r) { return LogRoute(*wp, r); });
  add("/api/v1/worker/executions/{id}/effects/{name}/reserve",
      [wp](const RouteRequest& r) { return ReserveEffectRoute(*wp, r); });
  add("/api/v1/worker/executions/{id}/effects/{name}/commit",
      [wp](const RouteRequest& r) { return CommitEffectRoute(*wp, r); });
  add("/api/v1/worker/executions/{id}/effects/{name}/release",
      [wp](const RouteRequest& r) { return ReleaseEffectRoute(*wp, r); });
  // A finish confirms the caller's API token in its own transaction
  // (FinishRequest::token_id); a single one may run on the network thread
  // that read it, its only store call being FinishBatchAsync.
  const RouteAccess finishing = worker.ConfirmedAtCommit();
  const InlineIf inline_finish = InlineWhileWritesQueue(*ctx.store);
  const auto add_finish = [&](std::string pattern, FinishRequest::Kind kind) {
    router.AddAsync(
        HttpMethod::kPost, std::move(pattern), finishing,
        [wp, kind](RouteRequest r, Responder respond) { FinishRoute(wp, r, kind, respond); },
        inline_finish);
  };
  add_finish("/api/v1/worker/executions/{id}/complete", FinishRequest::Kind::kComplete);
  add_finish("/api/v1/worker/executions/{id}/fail", FinishRequest::Kind::kFail);
  add_finish("/api/v1/worker/executions/{id}/release", FinishRequest::Kind::kRelease);
  router.Add(
      HttpMethod::kPost, "/api/v1/worker/finish", finishing,
      CountingStale(metrics, [wp](const RouteRequest& r) { return FinishBatchRoute(*wp, r); }));
  router.Add(HttpMethod::kGet, "/api/v1/workers", RouteAccess::Requires(Scope::kRead),
             [wp](const RouteRequest& r) { return ListWorkersRoute(*wp, r); });
}

}  // namespace taskengine::api
