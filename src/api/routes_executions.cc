// Executions: list, detail, result, cancel, replay, approve (I1, I2, C1, C2, R1).
#include <algorithm>

#include "api/routes.h"
#include "core/time_text.h"

namespace taskengine::api {
namespace {

constexpr std::size_t kMaxReason = 1000;
constexpr int kDefaultPageSize = 50;
constexpr int kMaxPageSize = 1000;

// GET /api/v1/executions?job=&tenant=&status=&queued_from=&queued_to=&limit=&cursor=
// -> {"items": [Execution without payload...], "next_cursor": "..." | null}
// Newest first. A principal bound to tenants sees only theirs: without a
// tenant filter, the pages of its tenants are merged.
HttpResponse ListExecutions(ApiContext& ctx, const RouteRequest& req) {
  const Principal& principal = PrincipalOf(req);
  auto query = QueryParams::Parse(req.http.query);
  if (!query.ok()) return StatusResponse(query.status());
  if (Status s = query->RejectUnknown(
          {"job", "tenant", "status", "queued_from", "queued_to", "limit", "cursor"});
      !s.ok()) {
    return StatusResponse(s);
  }
  ExecutionFilter filter;
  filter.limit = kDefaultPageSize;
  if (const std::string* job = query->Get("job")) {
    if (!IsValidJobName(*job)) return StatusResponse(InvalidArgument("job: invalid job name"));
    filter.job = JobName(*job);
  }
  std::optional<TenantId> tenant;
  if (const std::string* t = query->Get("tenant")) {
    if (!IsValidTenantId(*t)) {
      return StatusResponse(InvalidArgument("tenant: must match [a-z0-9][a-z0-9_-]{0,49}"));
    }
    tenant = TenantId(*t);
  }
  if (const std::string* status = query->Get("status")) {
    auto parsed = ParseExecutionStatus(*status);
    if (!parsed) {
      return StatusResponse(InvalidArgument(
          "status: must be one of queued, running, succeeded, failed, quarantined, canceled, "
          "partially_canceled"));
    }
    filter.status = *parsed;
  }
  if (const std::string* from = query->Get("queued_from")) {
    auto t = ParseTime(*from, "queued_from");
    if (!t.ok()) return StatusResponse(t.status());
    filter.queued_from = *t;
  }
  if (const std::string* to = query->Get("queued_to")) {
    auto t = ParseTime(*to, "queued_to");
    if (!t.ok()) return StatusResponse(t.status());
    filter.queued_to = *t;
  }
  if (const std::string* limit = query->Get("limit")) {
    auto n = ParseInteger(*limit, 1, kMaxPageSize, "limit");
    if (!n.ok()) return StatusResponse(n.status());
    filter.limit = static_cast<int>(*n);
  }
  if (const std::string* cursor = query->Get("cursor")) {
    auto n = ParseInteger(*cursor, 1, std::numeric_limits<std::int64_t>::max(), "cursor");
    if (!n.ok()) return StatusResponse(InvalidArgument("cursor: not a cursor of this API"));
    filter.before = ExecutionId(*n);
  }

  std::vector<std::optional<TenantId>> scopes;
  if (tenant) {
    if (!principal.MayAccessTenant(*tenant)) {
      return ErrorResponse(403, "forbidden",
                           "tenant '" + tenant->value + "' is not granted to you");
    }
    scopes.emplace_back(tenant);
  } else if (principal.all_tenants) {
    scopes.emplace_back(std::nullopt);
  } else {
    for (const std::string& t : principal.tenants) scopes.emplace_back(TenantId(t));
  }

  std::vector<Execution> merged;
  bool more = false;
  for (const auto& scope : scopes) {
    ExecutionFilter f = filter;
    f.tenant = scope;
    auto page = ctx.store->ListExecutions(f);
    if (!page.ok()) return StatusResponse(page.status());
    more = more || page->next_before.value != 0;
    for (Execution& e : page->items) merged.push_back(std::move(e));
  }
  std::sort(merged.begin(), merged.end(),
            [](const Execution& a, const Execution& b) { return a.id > b.id; });
  const std::size_t limit = static_cast<std::size_t>(filter.limit);
  if (merged.size() > limit) {
    merged.resize(limit);
    more = true;
  }
  Json items = Json::array();
  for (const Execution& e : merged) items.push_back(ExecutionToJson(e, /*with_payload=*/false));
  return JsonResponse(
      200, PageToJson(std::move(items), more && !merged.empty() ? merged.back().id.value : 0));
}

// GET /api/v1/executions/{id}
// -> Execution with payload, plus "logs", "effects", "escaped_effects",
//    "attempts", "audit". "result_url" is set only after success.
HttpResponse GetExecution(ApiContext& ctx, const RouteRequest& req) {
  auto e = VisibleExecution(ctx, PrincipalOf(req), req.Param("id"));
  if (!e.ok()) return StatusResponse(e.status());
  auto detail = LoadExecutionDetail(*ctx.store, std::move(e).value(), ctx.options.detail_log_limit,
                                    ctx.options.detail_audit_limit);
  if (!detail.ok()) return StatusResponse(detail.status());
  return JsonResponse(200, ExecutionDetailToJson(*detail));
}

// GET /api/v1/executions/{id}/result -> {"id", "result"} after success only;
// 409 before. Checked against the caller's principal at access time (I2).
HttpResponse GetResult(ApiContext& ctx, const RouteRequest& req) {
  auto e = VisibleExecution(ctx, PrincipalOf(req), req.Param("id"));
  if (!e.ok()) return StatusResponse(e.status());
  if (e->status != ExecutionStatus::kSucceeded) {
    return StatusResponse(Conflict("execution " + std::to_string(e->id.value) + " is " +
                                   std::string(ToString(e->status)) +
                                   "; its result is available only after it succeeded"),
                          {{"status", std::string(ToString(e->status))}});
  }
  return JsonResponse(200, Json{{"id", e->id.value}, {"result", EmbeddedJson(e->result_json)}});
}

// POST /api/v1/executions/{id}/cancel   {"reason": "..."} (optional body)
// -> 200 {"id", "status", "status_url"}: canceled / partially_canceled at once
//    for queued (failed, quarantined) work; still running with
//    cancel_requested for running work (C1). 409 for finished executions.
HttpResponse Cancel(ApiContext& ctx, const RouteRequest& req) {
  const Principal& principal = PrincipalOf(req);
  auto body = ParseJsonBody(req.http, /*allow_empty=*/true);
  if (!body.ok()) return StatusResponse(body.status());
  StrictObject in(*body, "request body");
  std::optional<std::string> reason = in.String("reason", kMaxReason);
  if (Status s = in.Finish(); !s.ok()) return StatusResponse(s);
  auto e = VisibleExecution(ctx, principal, req.Param("id"));
  if (!e.ok()) return StatusResponse(e.status());
  auto status = ctx.engine->Cancel(e->id, principal.name, reason.value_or(""));
  if (!status.ok()) return StatusResponse(status.status());
  return JsonResponse(200, Json{{"id", e->id.value},
                                {"status", std::string(ToString(*status))},
                                {"cancel_requested", *status == ExecutionStatus::kRunning},
                                {"status_url", ExecutionUrl(e->id)}});
}

Json ReplayToJson(ExecutionId id, const ReplayResult& r) {
  return {
      {"id", id.value},
      {"outcome", r.outcome == ReplayOutcome::kPendingApproval ? "pending_approval" : "replayed"},
      {"status", std::string(ToString(r.status))},
      {"status_url", ExecutionUrl(id)}};
}

// POST /api/v1/executions/{id}/replay
//   {"reason": "why" (required), "assume": "keep" | "done" | "not_done"}
// -> 200 {"id", "outcome": "replayed" | "pending_approval", "status", "status_url"}
// 409 unless failed or quarantined (or when a replay is already pending);
// 400 when the original requester may no longer act for the tenant (R1).
HttpResponse Replay(ApiContext& ctx, const RouteRequest& req) {
  const Principal& principal = PrincipalOf(req);
  auto body = ParseJsonBody(req.http, /*allow_empty=*/false);
  if (!body.ok()) return StatusResponse(body.status());
  StrictObject in(*body, "request body");
  in.Require("reason");
  std::optional<std::string> reason = in.String("reason", kMaxReason);
  std::optional<std::string> assume = in.String("assume", 20);
  ReplayOptions options;
  if (assume) {
    if (*assume == "keep") {
      options.ambiguous = AmbiguousResolution::kKeep;
    } else if (*assume == "done") {
      options.ambiguous = AmbiguousResolution::kAssumeDone;
    } else if (*assume == "not_done") {
      options.ambiguous = AmbiguousResolution::kAssumeNotDone;
    } else {
      in.Fail("assume", "must be one of keep, done, not_done");
    }
  }
  if (reason && reason->find_first_not_of(" \t\r\n") == std::string::npos) {
    in.Fail("reason", "must not be blank");
  }
  if (Status s = in.Finish(); !s.ok()) return StatusResponse(s);
  auto e = VisibleExecution(ctx, principal, req.Param("id"));
  if (!e.ok()) return StatusResponse(e.status());
  options.actor = principal.name;
  options.reason = *reason;
  auto result = ctx.engine->Replay(e->id, options);
  if (!result.ok()) return StatusResponse(result.status());
  return JsonResponse(200, ReplayToJson(e->id, *result));
}

// POST /api/v1/executions/{id}/approve   (no body, or {})
// -> 200 {"id", "outcome": "replayed", "status", "status_url"}
// Four-eyes: 409 when the approver asked for the replay; 404 when none is pending.
HttpResponse Approve(ApiContext& ctx, const RouteRequest& req) {
  const Principal& principal = PrincipalOf(req);
  auto body = ParseJsonBody(req.http, /*allow_empty=*/true);
  if (!body.ok()) return StatusResponse(body.status());
  StrictObject in(*body, "request body");
  if (Status s = in.Finish(); !s.ok()) return StatusResponse(s);
  auto e = VisibleExecution(ctx, principal, req.Param("id"));
  if (!e.ok()) return StatusResponse(e.status());
  auto result = ctx.engine->ApproveReplay(e->id, principal.name);
  if (!result.ok()) return StatusResponse(result.status());
  return JsonResponse(200, ReplayToJson(e->id, *result));
}

}  // namespace

void RegisterExecutionRoutes(ApiContext& ctx, Router& router) {
  router.Add(HttpMethod::kGet, "/api/v1/executions", RouteAccess::Requires(Scope::kRead),
             [&ctx](const RouteRequest& r) { return ListExecutions(ctx, r); });
  router.Add(HttpMethod::kGet, "/api/v1/executions/{id}", RouteAccess::Requires(Scope::kRead),
             [&ctx](const RouteRequest& r) { return GetExecution(ctx, r); });
  router.Add(HttpMethod::kGet, "/api/v1/executions/{id}/result",
             RouteAccess::Requires(Scope::kRead),
             [&ctx](const RouteRequest& r) { return GetResult(ctx, r); });
  router.Add(HttpMethod::kPost, "/api/v1/executions/{id}/cancel",
             RouteAccess::Requires(Scope::kOperate),
             [&ctx](const RouteRequest& r) { return Cancel(ctx, r); });
  router.Add(HttpMethod::kPost, "/api/v1/executions/{id}/replay",
             RouteAccess::Requires(Scope::kOperate),
             [&ctx](const RouteRequest& r) { return Replay(ctx, r); });
  router.Add(HttpMethod::kPost, "/api/v1/executions/{id}/approve",
             RouteAccess::Requires(Scope::kOperate),
             [&ctx](const RouteRequest& r) { return Approve(ctx, r); });
}

}  // namespace taskengine::api
