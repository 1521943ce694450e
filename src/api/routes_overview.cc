// Overviews: stats and queues (I1), scoped to the tenants a principal is
// granted (X2); lanes, which belong to tenants (O1); and the audit log, which
// needs a principal with access to every tenant.
#include <algorithm>
#include <array>
#include <optional>
#include <vector>

#include "api/routes.h"

namespace taskengine::api {
namespace {

// Rows older than this are stale for every kind (LiveState decides per row).
constexpr Millis kActiveWorkerWindowMs = 60'000;

// {"queued": n, "running": n, ...} for every status.
Json ByStatus(const std::array<std::int64_t, kExecutionStatusCount>& counts) {
  Json out = Json::object();
  for (int i = 0; i < kExecutionStatusCount; ++i) {
    out[std::string(ToString(static_cast<ExecutionStatus>(i)))] = counts[i];
  }
  return out;
}

Json AgeOrNull(Millis since, Millis now) {
  return since == 0 ? Json(nullptr) : Json(std::max<Millis>(0, now - since));
}

// {"last_24h": {status: count}} for the terminal statuses.
Json EndedByStatus(const std::array<std::int64_t, kExecutionStatusCount>& counts) {
  Json out = Json::object();
  for (int i = 0; i < kExecutionStatusCount; ++i) {
    auto status = static_cast<ExecutionStatus>(i);
    if (IsTerminal(status)) out[std::string(ToString(status))] = counts[i];
  }
  return out;
}

// One tenant's line of seed 001's jobsByStore: "tenant" is null for the
// global jobs.
Json TenantStatsToJson(const TenantStats& t) {
  auto at = [](const auto& counts, ExecutionStatus s) { return counts[static_cast<int>(s)]; };
  return {
      {"tenant", t.tenant.value.empty() ? Json(nullptr) : Json(t.tenant.value)},
      {"queued", at(t.by_status, ExecutionStatus::kQueued)},
      {"running", at(t.by_status, ExecutionStatus::kRunning)},
      {"failed_24h", at(t.ended_last_24h, ExecutionStatus::kFailed)},
      {"succeeded_24h", at(t.ended_last_24h, ExecutionStatus::kSucceeded)},
      {"by_status", ByStatus(t.by_status)},
      {"last_24h", EndedByStatus(t.ended_last_24h)},
  };
}

// The answer refusing a `tenant` query parameter: 400 for a malformed id, 403
// for a tenant not granted to the principal; nullopt when it may be used.
std::optional<HttpResponse> RefuseTenantParam(const std::string& tenant,
                                              const Principal& principal) {
  if (!IsValidTenantId(tenant)) {
    return StatusResponse(InvalidArgument("tenant: must match [a-z0-9][a-z0-9_-]{0,49}"));
  }
  if (!principal.MayAccessTenant(tenant)) {
    return ErrorResponse(403, "forbidden", "tenant '" + tenant + "' is not granted to you");
  }
  return std::nullopt;
}

// GET /api/v1/stats?tenant= (optional: that tenant's figures only; 403 when
// not granted)
// -> {"scope": "global" | "tenants", "queued", "running", "by_status": {...},
//     "oldest_due_age_ms",
//     "queues": [{"queue", "queued", "running", "by_status", "oldest_due_at",
//                 "oldest_due_age_ms"}],
//     "tenants": [{"tenant" (null: global jobs), "queued", "running",
//                  "failed_24h", "succeeded_24h", "by_status", "last_24h"}],
//     "active_workers", "active_worker_threads", "busy_worker_threads",
//     "last_24h": {status: count of executions that ended
//     with it}, "engine": {"claimed", "succeeded", "failed", "released",
//     "stale", "published"}}
// X2: a principal bound to tenants gets the counts of its tenants only (the
// global jobs and other tenants are not in any figure, totals included);
// "engine" (this process's counters over every tenant) and the oldest due
// ages and "busy_worker_threads" are global-scope only (null / absent for
// it).
// From the store's counters: the cost does not grow with history (P8).
// Workers (W5): "active_workers" counts live worker registrations (not
// stopped, not stale), i.e. processes: each node's in-process pool is one,
// each remote worker process one. "active_worker_threads" sums their
// concurrency (pool handler threads, remote --concurrency) and
// "busy_worker_threads" the executions they run now.
HttpResponse Stats(ApiContext& ctx, const RouteRequest& req) {
  const Principal& principal = PrincipalOf(req);
  auto query = QueryParams::Parse(req.http.query);
  if (!query.ok()) return StatusResponse(query.status());
  if (Status s = query->RejectUnknown({"tenant"}); !s.ok()) return StatusResponse(s);
  TenantScope scope = ScopeOf(principal);
  const std::string* tenant = query->Get("tenant");
  if (tenant != nullptr) {
    if (auto refused = RefuseTenantParam(*tenant, principal)) return *refused;
    scope.tenants = std::vector<TenantId>{TenantId(*tenant)};
  }
  const Millis now = ctx.clock->NowMillis();
  auto stats = ctx.store->GetStats(scope);
  if (!stats.ok()) return StatusResponse(stats.status());
  auto workers = ctx.store->ListWorkers(kActiveWorkerWindowMs);
  if (!workers.ok()) return StatusResponse(workers.status());
  std::int64_t active = 0, threads = 0, busy = 0;
  for (const WorkerInfo& w : *workers) {
    const WorkerState state = LiveState(w, now);
    if (state != WorkerState::kIdle && state != WorkerState::kBusy) continue;
    ++active;
    threads += w.threads;
    busy += w.busy;
  }

  Millis oldest_due = 0;
  Json queues = Json::array();
  for (const QueueStats& q : stats->queues) {
    if (q.oldest_due_at != 0 && (oldest_due == 0 || q.oldest_due_at < oldest_due)) {
      oldest_due = q.oldest_due_at;
    }
    queues.push_back({
        {"queue", q.queue},
        {"queued", q.by_status[static_cast<int>(ExecutionStatus::kQueued)]},
        {"running", q.by_status[static_cast<int>(ExecutionStatus::kRunning)]},
        {"by_status", ByStatus(q.by_status)},
        {"oldest_due_at", TimeOrNull(q.oldest_due_at)},
        {"oldest_due_age_ms", AgeOrNull(q.oldest_due_at, now)},
    });
  }
  Json tenants = Json::array();
  for (const TenantStats& t : stats->tenants) tenants.push_back(TenantStatsToJson(t));
  Json out = {
      {"scope", principal.all_tenants && tenant == nullptr ? "global" : "tenants"},
      {"queued", stats->totals[static_cast<int>(ExecutionStatus::kQueued)]},
      {"running", stats->totals[static_cast<int>(ExecutionStatus::kRunning)]},
      {"by_status", ByStatus(stats->totals)},
      {"oldest_due_age_ms", AgeOrNull(oldest_due, now)},
      {"queues", std::move(queues)},
      {"tenants", std::move(tenants)},
      {"active_workers", active},
      {"active_worker_threads", threads},
      // Busy threads run every tenant's work: a figure about other tenants.
      {"busy_worker_threads", principal.all_tenants ? Json(busy) : Json(nullptr)},
      {"last_24h", EndedByStatus(stats->ended_last_24h)},
  };
  if (principal.all_tenants) {
    const EngineStats es = ctx.engine->stats();
    out["engine"] = {{"claimed", es.claimed}, {"succeeded", es.succeeded},
                     {"failed", es.failed},   {"released", es.released},
                     {"stale", es.stale},     {"published", es.published}};
  }
  return JsonResponse(200, out);
}

// GET /api/v1/queues -> {"items": [Queue...]}: the configured queues (by priority,
// then name), then other queues with work in the database (by name). A
// principal bound to tenants sees the depths of its tenants' executions only.
HttpResponse Queues(ApiContext& ctx, const RouteRequest& req) {
  auto query = QueryParams::Parse(req.http.query);
  if (!query.ok()) return StatusResponse(query.status());
  if (Status s = query->RejectUnknown({}); !s.ok()) return StatusResponse(s);
  const Millis now = ctx.clock->NowMillis();
  auto depths = ctx.store->QueueDepths(ScopeOf(PrincipalOf(req)));
  if (!depths.ok()) return StatusResponse(depths.status());
  Json items = Json::array();
  for (const QueueView& q : QueueViews(std::move(depths).value(), ctx.options.queues, now)) {
    items.push_back(QueueToJson(q));
  }
  return JsonResponse(200, Json{{"items", std::move(items)}});
}

// GET /api/v1/lanes?tenant=&limit=100 -> {"items": [Lane...]} (blocked lanes
// first). A lane belongs to a tenant (O1): a principal sees the lanes of the
// tenants it is granted (all of them, or `tenant`: 403 when not granted);
// lanes of global jobs need global tenant access.
HttpResponse Lanes(ApiContext& ctx, const RouteRequest& req) {
  const Principal& principal = PrincipalOf(req);
  auto query = QueryParams::Parse(req.http.query);
  if (!query.ok()) return StatusResponse(query.status());
  if (Status s = query->RejectUnknown({"tenant", "limit"}); !s.ok()) return StatusResponse(s);
  int limit = 100;
  if (const std::string* l = query->Get("limit")) {
    auto n = ParseInteger(*l, 1, 1000, "limit");
    if (!n.ok()) return StatusResponse(n.status());
    limit = static_cast<int>(*n);
  }
  std::vector<std::optional<TenantId>> scopes;
  if (const std::string* t = query->Get("tenant")) {
    if (auto refused = RefuseTenantParam(*t, principal)) return *refused;
    scopes.emplace_back(TenantId(*t));
  } else if (principal.all_tenants) {
    scopes.emplace_back(std::nullopt);
  } else {
    for (const std::string& t : principal.tenants) scopes.emplace_back(TenantId(t));
  }
  std::vector<LaneStatus> lanes;
  for (const std::optional<TenantId>& tenant : scopes) {
    auto some = ctx.store->ListLanes({.tenant = tenant, .limit = limit});
    if (!some.ok()) return StatusResponse(some.status());
    lanes.insert(lanes.end(), some->begin(), some->end());
  }
  std::stable_sort(lanes.begin(), lanes.end(),
                   [](const LaneStatus& a, const LaneStatus& b) { return a.blocked > b.blocked; });
  if (lanes.size() > static_cast<std::size_t>(limit)) lanes.resize(limit);
  Json items = Json::array();
  for (const LaneStatus& l : lanes) items.push_back(LaneToJson(l));
  return JsonResponse(200, Json{{"items", std::move(items)}});
}

// GET /api/v1/audit?target=&limit=&cursor= -> {"items": [AuditRecord...], "next_cursor"}
// Newest first.
HttpResponse Audit(ApiContext& ctx, const RouteRequest& req) {
  if (!PrincipalOf(req).all_tenants) return NeedsAllTenants("the audit log");
  auto query = QueryParams::Parse(req.http.query);
  if (!query.ok()) return StatusResponse(query.status());
  if (Status s = query->RejectUnknown({"target", "limit", "cursor"}); !s.ok()) {
    return StatusResponse(s);
  }
  AuditFilter filter;
  if (const std::string* t = query->Get("target")) {
    if (t->size() > 300) return StatusResponse(InvalidArgument("target: longer than 300 bytes"));
    filter.target = *t;
  }
  if (const std::string* l = query->Get("limit")) {
    auto n = ParseInteger(*l, 1, 1000, "limit");
    if (!n.ok()) return StatusResponse(n.status());
    filter.limit = static_cast<int>(*n);
  }
  if (const std::string* c = query->Get("cursor")) {
    auto n = ParseInteger(*c, 1, std::numeric_limits<std::int64_t>::max(), "cursor");
    if (!n.ok()) return StatusResponse(InvalidArgument("cursor: not a cursor of this API"));
    filter.before_id = *n;
  }
  auto records = ctx.store->ListAudit(filter);
  if (!records.ok()) return StatusResponse(records.status());
  Json items = Json::array();
  for (const AuditRecord& r : *records) items.push_back(AuditToJson(r));
  // A full page may have more behind it.
  const bool full = static_cast<int>(records->size()) == filter.limit && !records->empty();
  return JsonResponse(200, PageToJson(std::move(items), full ? records->back().id : 0));
}

}  // namespace

void RegisterOverviewRoutes(ApiContext& ctx, Router& router) {
  router.Add(HttpMethod::kGet, "/api/v1/stats", RouteAccess::Requires(Scope::kRead),
             [&ctx](const RouteRequest& r) { return Stats(ctx, r); });
  router.Add(HttpMethod::kGet, "/api/v1/queues", RouteAccess::Requires(Scope::kRead),
             [&ctx](const RouteRequest& r) { return Queues(ctx, r); });
  router.Add(HttpMethod::kGet, "/api/v1/lanes", RouteAccess::Requires(Scope::kRead),
             [&ctx](const RouteRequest& r) { return Lanes(ctx, r); });
  router.Add(HttpMethod::kGet, "/api/v1/audit", RouteAccess::Requires(Scope::kAdmin),
             [&ctx](const RouteRequest& r) { return Audit(ctx, r); });
}

}  // namespace taskengine::api
