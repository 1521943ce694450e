// Dispatch: single (with Idempotency-Key) and bulk (A1, A2, A5, I2).

#include "api/routes.h"
#include "core/time_text.h"
#include "engine/dispatcher.h"

namespace taskengine::api {
namespace {

// The server's own jobs (taskengine.*) are admitted by the server alone.
Status ReservedJob(const JobName& job) {
  return InvalidArgument("job '" + job.value +
                         "' is internal to the server (names under taskengine. are reserved) and "
                         "cannot be dispatched");
}

constexpr std::size_t kMaxTenant = 50;
constexpr std::size_t kMaxKey = 200;
constexpr std::size_t kMaxLane = 200;
constexpr std::size_t kMaxTime = 64;
constexpr std::int64_t kMaxDelayMs = 366LL * 24 * 3600 * 1000;
constexpr std::size_t kMaxJobName = 100;

// The Idempotency-Key header (IETF draft: a structured-field string, so the
// value may come quoted); empty when absent.
Result<std::string> IdempotencyKeyHeader(const HttpRequest& http) {
  const std::string* header = http.Header("idempotency-key");
  if (header == nullptr) return std::string();
  std::string key = *header;
  if (key.size() >= 2 && key.front() == '"' && key.back() == '"')
    key = key.substr(1, key.size() - 2);
  if (!IsValidIdempotencyKey(key)) {
    return InvalidArgument(
        "invalid Idempotency-Key header: 1..200 visible ASCII characters, no spaces");
  }
  return key;
}

// The fields a single and a bulk item share. Checks the principal's access to
// the tenant (and to a parent execution); the engine checks the rest.
// Returns a non-ok status, or a 403 response in *forbidden.
Status ReadCommonFields(ApiContext& ctx, const Principal& principal, StrictObject& in,
                        DispatchRequest* out, std::optional<HttpResponse>* forbidden,
                        const std::string& where) {
  std::optional<std::string> tenant = in.String("tenant", kMaxTenant);
  const nlohmann::json* payload = in.Value("payload");
  std::optional<std::string> run_at = in.String("run_at", kMaxTime);
  std::optional<std::int64_t> delay = in.Int("delay_ms", 0, kMaxDelayMs);
  std::optional<std::string> lane = in.String("lane", kMaxLane);
  std::optional<std::int64_t> parent =
      in.Int("parent", 1, std::numeric_limits<std::int64_t>::max());
  if (payload != nullptr && !payload->is_null() && !payload->is_object()) {
    in.Fail("payload", "must be a JSON object");
  }
  if (run_at && delay) in.Fail("run_at", "and delay_ms are mutually exclusive");
  TE_RETURN_IF_ERROR(in.Finish());

  out->tenant = TenantId(tenant.value_or(""));
  if (payload != nullptr && payload->is_object()) out->payload_json = DumpJson(*payload);
  if (run_at) {
    TE_ASSIGN_OR_RETURN(out->run_at, ParseTime(*run_at, where + "run_at"));
  }
  out->delay_ms = delay.value_or(0);
  out->lane_key = lane.value_or("");
  out->requester = principal.name;
  out->trigger = Trigger::kApi;
  out->token_id = principal.token_id;  // the routes confirm it at commit

  if (!principal.MayAccessTenant(out->tenant)) {
    *forbidden = ErrorResponse(
        403, "forbidden",
        out->tenant.empty()
            ? where + "dispatching without a tenant (a global job) needs access to every tenant"
            : where + "tenant '" + out->tenant.value + "' is not granted to you");
    return Status::Ok();
  }
  if (parent) {
    auto p = VisibleExecution(ctx, principal, std::to_string(*parent));
    if (!p.ok()) {
      if (p.status().code() == ErrorCode::kNotFound) {
        return InvalidArgument(where + "parent execution " + std::to_string(*parent) +
                               " not found");
      }
      return p.status();
    }
    out->parent = ExecutionId(*parent);
  }
  return Status::Ok();
}

// The answer to a single dispatch once its admission is decided.
HttpResponse DispatchAnswer(const DispatchRequest& request,
                            const Result<std::vector<DispatchResult>>& results) {
  if (!results.ok()) return StatusResponse(results.status());
  const DispatchResult& result = results->front();
  if (result.conflict) {
    return StatusResponse(
        ConflictStatus(request, result.id),
        Json{{"existing_execution_id", result.id.value}, {"status_url", ExecutionUrl(result.id)}});
  }
  HttpResponse response;
  response.status = result.created ? 202 : 200;
  response.body = DispatchResultText(result);
  response.headers.emplace_back("Location", ExecutionUrl(result.id));
  return response;
}

// POST /api/v1/jobs/{name}/dispatch   Idempotency-Key: <key> (optional)
//   {"tenant": "t1", "payload": {...}, "run_at": "RFC 3339" | "delay_ms": 0,
//    "lane": "...", "parent": 17}
// -> 202 {"id", "status", "created": true, "status_url"} (Location: status_url)
//    200 the same with "created": false for a repeat with the same payload
//    409 conflict (details.existing_execution_id) for a key used with another payload
// Answered from the store's commit (no thread waits for it): 2xx only once
// the admission is durable.
void Dispatch(ApiContext& ctx, const RouteRequest& req, const Responder& respond) {
  const Principal& principal = PrincipalOf(req);
  auto body = ParseJsonBody(req.http, /*allow_empty=*/true);
  if (!body.ok()) return (void)respond.Send(StatusResponse(body.status()));
  auto key = IdempotencyKeyHeader(req.http);
  if (!key.ok()) return (void)respond.Send(StatusResponse(key.status()));
  std::vector<DispatchRequest> requests(1);
  DispatchRequest& request = requests.front();
  request.job = JobName(req.Param("name"));
  if (IsReservedJobName(request.job.value)) {
    return (void)respond.Send(StatusResponse(ReservedJob(request.job)));
  }
  request.idempotency_key = *key;
  StrictObject in(*body, "request body");
  std::optional<HttpResponse> forbidden;
  if (Status s = ReadCommonFields(ctx, principal, in, &request, &forbidden, ""); !s.ok()) {
    return (void)respond.Send(StatusResponse(s));
  }
  if (forbidden) return (void)respond.Send(std::move(*forbidden));
  // One item through the batch call: a conflict comes back as an answer
  // naming the existing execution, not as an error message. The answer
  // needs the request's names only, not its payload.
  DispatchRequest named;
  named.job = request.job;
  named.idempotency_key = request.idempotency_key;
  // Answered on a thread of the store after the commit: the answer is built
  // where it is written.
  DispatchBatchAsync(
      *ctx.engine, std::move(requests),
      [named = std::move(named), respond](Result<std::vector<DispatchResult>> r) {
        respond.SendBuilt([named, r = std::move(r)] { return DispatchAnswer(named, r); });
      });
}

// POST /api/v1/dispatch/bulk
//   {"items": [{"job": "name", "tenant", "payload", "idempotency_key", "run_at" |
//               "delay_ms", "lane", "parent"}, ...]}   (1..max_bulk_items)
// -> 202 {"items": [{"index", "id", "status", "created", "conflict", "status_url"}]}
// One transaction: invalid input anywhere admits nothing (400 naming the item).
HttpResponse DispatchBulk(ApiContext& ctx, const RouteRequest& req) {
  const Principal& principal = PrincipalOf(req);
  auto body = ParseJsonBody(req.http, /*allow_empty=*/false);
  if (!body.ok()) return StatusResponse(body.status());
  StrictObject top(*body, "request body");
  const nlohmann::json* items = top.Value("items");
  if (items == nullptr || items->is_null()) {
    top.Fail("items", "is required");
  } else if (!items->is_array()) {
    top.Fail("items", "must be an array");
  } else if (items->empty() || items->size() > ctx.options.max_bulk_items) {
    top.Fail("items", "must hold 1 to " + std::to_string(ctx.options.max_bulk_items) + " items");
  }
  if (Status s = top.Finish(); !s.ok()) return StatusResponse(s);

  std::vector<DispatchRequest> requests;
  requests.reserve(items->size());
  for (std::size_t i = 0; i < items->size(); ++i) {
    const std::string where = "items[" + std::to_string(i) + "]";
    StrictObject in((*items)[i], where);
    DispatchRequest request;
    in.Require("job");
    std::optional<std::string> job = in.String("job", kMaxJobName);
    std::optional<std::string> key = in.String("idempotency_key", kMaxKey);
    std::optional<HttpResponse> forbidden;
    Status s = ReadCommonFields(ctx, principal, in, &request, &forbidden, where + ": ");
    if (!s.ok()) {
      return StatusResponse(s, {{"index", i}});
    }
    if (forbidden) return std::move(*forbidden);
    request.job = JobName(job.value_or(""));
    if (IsReservedJobName(request.job.value)) {
      return StatusResponse(ReservedJob(request.job), {{"index", i}});
    }
    request.idempotency_key = key.value_or("");
    requests.push_back(std::move(request));
  }
  auto results = ctx.engine->DispatchBatch(requests);
  if (!results.ok()) return StatusResponse(results.status());
  Json out = Json::array();
  for (std::size_t i = 0; i < results->size(); ++i) {
    const DispatchResult& r = (*results)[i];
    Json item = DispatchResultToJson(r);
    item["index"] = i;
    item["conflict"] = r.conflict;
    if (r.conflict) {
      item["error"] = {{"code", "conflict"},
                       {"message", ConflictStatus(requests[i], r.id).message()}};
    }
    out.push_back(std::move(item));
  }
  return JsonResponse(202, Json{{"items", std::move(out)}});
}

}  // namespace

void RegisterDispatchRoutes(ApiContext& ctx, Router& router) {
  // Their one write is the admission, which confirms the caller's API token
  // (DispatchRequest::token_id, set by ReadCommonFields).
  const RouteAccess access = RouteAccess::Requires(Scope::kDispatch).ConfirmedAtCommit();
  // A single dispatch may run on the network thread that read it when it
  // names no parent (whose visibility is read from the store): without the
  // text "parent" nor an escape (which could spell it), it names none.
  InlineIf inline_if = InlineWhileWritesQueue(*ctx.store, [](const HttpRequest& r) {
    return r.body.find("parent") == std::string::npos && r.body.find('\\') == std::string::npos;
  });
  router.AddAsync(
      HttpMethod::kPost, "/api/v1/jobs/{name}/dispatch", access,
      [&ctx](RouteRequest r, Responder respond) { Dispatch(ctx, r, respond); }, inline_if);
  router.Add(HttpMethod::kPost, "/api/v1/dispatch/bulk", access,
             [&ctx](const RouteRequest& r) { return DispatchBulk(ctx, r); });
}

}  // namespace taskengine::api
