// Executions: list, detail, result, cancel, replay, approve (I1, I2, C1, C2, R1).
#include <algorithm>

#include "api/routes.h"
#include "core/time_text.h"
#include "views/execution_search.h"

namespace taskengine::api {
namespace {

// The parameters of the execution search (views/execution_search.h).
constexpr std::string_view kSearchParams[] = {"job",         "tenant",    "status",     "trigger",
                                              "queued_from", "queued_to", "ended_from", "ended_to",
                                              "limit",       "cursor",    "offset"};

// GET /api/v1/executions?job=&tenant=&status=a,b&trigger=a,b&queued_from=&queued_to=
//                       &ended_from=&ended_to=&limit=&cursor=&offset=
// -> {"items": [Execution without payload...], "next_cursor": "..." | null}
//    and with offset: "total", "total_is_lower_bound", "offset", "limit".
// Newest first. A principal bound to tenants sees only theirs (403 for a
// tenant filter it is not granted).
HttpResponse ListExecutions(ApiContext& ctx, const RouteRequest& req) {
  const Principal& principal = PrincipalOf(req);
  auto query = QueryParams::Parse(req.http.query);
  if (!query.ok()) return StatusResponse(query.status());
  if (Status s =
          query->RejectUnknown({"job", "tenant", "status", "trigger", "queued_from", "queued_to",
                                "ended_from", "ended_to", "limit", "cursor", "offset"});
      !s.ok()) {
    return StatusResponse(s);
  }
  SearchParams params;
  for (std::string_view name : kSearchParams) {
    if (const std::string* v = query->Get(name)) params.emplace(std::string(name), *v);
  }
  auto filter = ParseExecutionSearch(params);
  if (!filter.ok()) return StatusResponse(filter.status());
  if (filter->tenant && !principal.MayAccessTenant(*filter->tenant)) {
    return ErrorResponse(403, "forbidden",
                         "tenant '" + filter->tenant->value + "' is not granted to you");
  }
  filter->tenants = ScopeOf(principal).tenants;
  auto page = ctx.store->ListExecutions(*filter);
  if (!page.ok()) return StatusResponse(page.status());
  return JsonResponse(200, SearchPageToJson(*page, *filter));
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
