// Health, readiness, Prometheus metrics (I5) and the OpenAPI document (I1).
#include <cstdio>

#include "api/metrics.h"
#include "api/routes.h"

namespace taskengine::api {
namespace {

// GET /healthz -> 200 {"status": "ok"} while the process serves HTTP.
HttpResponse Healthz(const RouteRequest&) { return JsonResponse(200, Json{{"status", "ok"}}); }

// GET /readyz -> 200 {"status": "ready", "schema_version"} when the store
// answers; 503 otherwise.
HttpResponse Readyz(ApiContext& ctx, const RouteRequest&) {
  auto version = ctx.store->SchemaVersion();
  if (!version.ok()) {
    return StatusResponse(
        Status(ErrorCode::kUnavailable, "store not reachable: " + version.status().message()));
  }
  return JsonResponse(200, Json{{"status", "ready"}, {"schema_version", *version}});
}

// GET /metrics -> Prometheus text format 0.0.4. From the store's counters
// (cost independent of history), this engine's counters (EngineStats), the
// worker routes' counters (ApiMetrics) and ApiOptions::extra_metrics. Every
// family is listed in docs/operations.md.
HttpResponse Metrics(ApiContext& ctx, const RouteRequest& req) {
  if (req.principal && !req.principal->all_tenants) return NeedsAllTenants("metrics");
  const Millis now = ctx.clock->NowMillis();
  auto stats = ctx.store->GetStats();
  if (!stats.ok()) return StatusResponse(stats.status());
  constexpr int kQueued = static_cast<int>(ExecutionStatus::kQueued);
  constexpr int kRunning = static_cast<int>(ExecutionStatus::kRunning);
  std::string out;
  out.reserve(8192);
  MetricsWriter gauges(&out);
  gauges.Family("taskengine_queue_depth", "gauge", "Queued executions per queue, due or not.");
  for (const QueueStats& q : stats->queues) {
    gauges.Sample("taskengine_queue_depth", "{queue=\"" + LabelValue(q.queue) + "\"}",
                  static_cast<double>(q.by_status[kQueued]));
  }
  gauges.Family("taskengine_queue_running", "gauge", "Running executions per queue.");
  for (const QueueStats& q : stats->queues) {
    gauges.Sample("taskengine_queue_running", "{queue=\"" + LabelValue(q.queue) + "\"}",
                  static_cast<double>(q.by_status[kRunning]));
  }
  gauges.Family("taskengine_queue_oldest_age_seconds", "gauge",
                "Per queue, how long the oldest due queued execution has waited past its run-at "
                "(0 when none is due).");
  for (const QueueStats& q : stats->queues) {
    double age = q.oldest_due_at == 0 ? 0.0 : std::max<Millis>(0, now - q.oldest_due_at) / 1000.0;
    gauges.Sample("taskengine_queue_oldest_age_seconds", "{queue=\"" + LabelValue(q.queue) + "\"}",
                  age);
  }
  gauges.Family("taskengine_executions", "gauge", "Executions stored, by status.");
  for (int i = 0; i < kExecutionStatusCount; ++i) {
    gauges.Sample("taskengine_executions",
                  "{status=\"" + std::string(ToString(static_cast<ExecutionStatus>(i))) + "\"}",
                  static_cast<double>(stats->totals[i]));
  }
  gauges.Family("taskengine_executions_ended_24h", "gauge",
                "Executions that ended in the last 24 hours, by final status.");
  for (int i = 0; i < kExecutionStatusCount; ++i) {
    auto status = static_cast<ExecutionStatus>(i);
    if (!IsTerminal(status)) continue;
    gauges.Sample("taskengine_executions_ended_24h",
                  "{status=\"" + std::string(ToString(status)) + "\"}",
                  static_cast<double>(stats->ended_last_24h[i]));
  }
  gauges.Family("taskengine_quarantine_oldest_age_seconds", "gauge",
                "How long ago the quarantined execution admitted first was quarantined "
                "(waiting for an operator); 0 when none is quarantined.");
  gauges.Sample("taskengine_quarantine_oldest_age_seconds", "",
                stats->oldest_quarantined_at == 0
                    ? 0.0
                    : std::max<Millis>(0, now - stats->oldest_quarantined_at) / 1000.0);
  gauges.Family("taskengine_tenant_executions_ended_24h", "gauge",
                "Per tenant (\"\" = the global jobs), executions that ended in the last 24 "
                "hours, by final status; tenants with executions only.");
  for (const TenantStats& t : stats->tenants) {
    for (int i = 0; i < kExecutionStatusCount; ++i) {
      auto status = static_cast<ExecutionStatus>(i);
      if (!IsTerminal(status)) continue;
      gauges.Sample("taskengine_tenant_executions_ended_24h",
                    "{tenant=\"" + LabelValue(t.tenant.value) + "\",status=\"" +
                        std::string(ToString(status)) + "\"}",
                    static_cast<double>(t.ended_last_24h[i]));
    }
  }
  const EngineStats s = ctx.engine->stats();
  const ApiMetrics& remote = *ctx.options.worker_metrics;
  MetricsWriter w(&out);
  const auto d = [](std::int64_t v) { return static_cast<double>(v); };
  w.Single("taskengine_claims_total", "counter",
           "Executions claimed through this node: by its in-process worker pool plus leases "
           "handed to remote workers by its API.",
           d(s.claimed + remote.claims.load()));
  w.Single("taskengine_handler_successes_total", "counter",
           "In-process handler runs that returned success.", d(s.succeeded));
  w.Single("taskengine_handler_failures_total", "counter",
           "In-process handler runs that returned a failure of any class.", d(s.failed));
  w.Family("taskengine_completions_total", "counter",
           "Successful outcomes, by source: in_process (this node's handlers, when recorded) or "
           "remote (complete calls of remote workers recorded by this node's API); a success "
           "reported after a cancel request ends canceled and is not counted.");
  w.Sample("taskengine_completions_total", "{source=\"in_process\"}", d(s.completed));
  w.Sample("taskengine_completions_total", "{source=\"remote\"}", d(remote.completions.load()));
  w.Family("taskengine_failures_total", "counter",
           "Failed attempts by class and source: retryable, permanent, ambiguous and "
           "unsupported_schema (payload schema version not accepted) from in_process handlers "
           "or remote workers' fail outcomes; lease_expiry (source sweeper) for expired leases "
           "recovered by this node's sweeper.");
  const struct {
    const char* cls;
    std::int64_t in_process;
    std::int64_t remote;
  } classes[] = {
      {"retryable", s.failed_retryable, remote.failed_retryable.load()},
      {"permanent", s.failed_permanent, remote.failed_permanent.load()},
      {"ambiguous", s.failed_ambiguous, remote.failed_ambiguous.load()},
      {"unsupported_schema", s.failed_unsupported_schema, remote.failed_unsupported_schema.load()},
  };
  for (const auto& c : classes) {
    const std::string cls = std::string("{class=\"") + c.cls + "\",source=";
    w.Sample("taskengine_failures_total", cls + "\"in_process\"}", d(c.in_process));
    w.Sample("taskengine_failures_total", cls + "\"remote\"}", d(c.remote));
  }
  w.Sample("taskengine_failures_total", "{class=\"lease_expiry\",source=\"sweeper\"}",
           d(s.lease_expirations));
  w.Single("taskengine_lease_expirations_total", "counter",
           "Expired leases recovered by this node's sweeper (requeued, failed or quarantined).",
           d(s.lease_expirations));
  w.Single("taskengine_stale_rejections_total", "counter",
           "Calls refused because the claim version was no longer current: in-process outcomes "
           "and heartbeats, plus remote worker calls answered 409 stale and batch items "
           "answered stale.",
           d(s.stale + remote.stale_rejections.load()));
  w.Family("taskengine_effect_duplicates_prevented_total", "counter",
           "Effect reservations answered already_done (the effect was committed before, so it "
           "was not done twice), by source: in_process handlers or remote workers.");
  w.Sample("taskengine_effect_duplicates_prevented_total", "{source=\"in_process\"}",
           d(s.effect_duplicates));
  w.Sample("taskengine_effect_duplicates_prevented_total", "{source=\"remote\"}",
           d(remote.effect_duplicates.load()));
  w.Single("taskengine_leases_released_total", "counter",
           "Leases the in-process pool gave back unrun (shutdown).", d(s.released));
  w.Single("taskengine_outcomes_published_total", "counter",
           "In-process outcomes durably recorded by the store.", d(s.published));
  w.Family("taskengine_cancel_latency_seconds", "histogram",
           "Per cancel request handled by this node: seconds by the engine's clock from the "
           "request to the execution's terminal status as this node observed it (at once when "
           "the cancel ended it; else when this node recorded its outcome, or its sweep loop "
           "found it ended elsewhere).");
  std::int64_t cumulative = 0;
  for (std::size_t i = 0; i < EngineStats::kCancelLatencyBoundsMs.size(); ++i) {
    cumulative += s.cancel_latency_buckets[i];
    char le[32];
    std::snprintf(le, sizeof(le), "%g", EngineStats::kCancelLatencyBoundsMs[i] / 1000.0);
    w.Sample("taskengine_cancel_latency_seconds_bucket", std::string("{le=\"") + le + "\"}",
             d(cumulative));
  }
  w.Sample("taskengine_cancel_latency_seconds_bucket", "{le=\"+Inf\"}", d(s.cancel_latency_count));
  w.Sample("taskengine_cancel_latency_seconds_sum", "", s.cancel_latency_sum_ms / 1000.0);
  w.Sample("taskengine_cancel_latency_seconds_count", "", d(s.cancel_latency_count));
  if (s.transport.enabled) {
    const TransportStats& t = s.transport;
    w.Single("taskengine_redis_connected", "gauge",
             "1 while this node's Redis transport can take wakeups, else 0 (pickup then waits "
             "for the poll).",
             t.connected ? 1 : 0);
    w.Single("taskengine_redis_wakeups_published_total", "counter",
             "Wakeups this node pushed to every node's ready list after commits that made work "
             "due (one per flush; commits during a flush share the next).",
             d(t.published));
    w.Single("taskengine_redis_wakeups_dropped_total", "counter",
             "Wakeups this node could not push (Redis unreachable); the work waits for the poll.",
             d(t.dropped));
    w.Single("taskengine_redis_wakeups_received_total", "counter",
             "Wakeups this node took from its ready list.", d(t.received));
    w.Single("taskengine_redis_reconnects_total", "counter",
             "Connections to Redis this node made again after losing one.", d(t.reconnects));
    w.Single("taskengine_redis_nodes", "gauge",
             "Nodes registered for wakeups at this node's last look.", d(t.nodes));
  }
  if (ctx.options.extra_metrics) ctx.options.extra_metrics(&out);
  HttpResponse response;
  response.status = 200;
  response.content_type = "text/plain; version=0.0.4; charset=utf-8";
  response.body = std::move(out);
  return response;
}

// GET /api/v1/openapi.json -> docs/openapi.json as built into the binary.
HttpResponse OpenApi(const RouteRequest&) {
  HttpResponse response;
  response.status = 200;
  response.body = std::string(OpenApiDocument());
  return response;
}

}  // namespace

void RegisterSystemRoutes(ApiContext& ctx, Router& router) {
  if (!ctx.options.worker_metrics) ctx.options.worker_metrics = std::make_shared<ApiMetrics>();
  router.Add(HttpMethod::kGet, "/healthz", RouteAccess::Public(), Healthz);
  router.Add(HttpMethod::kGet, "/readyz", RouteAccess::Public(),
             [&ctx](const RouteRequest& r) { return Readyz(ctx, r); });
  router.Add(HttpMethod::kGet, "/metrics",
             ctx.options.metrics_open ? RouteAccess::Public() : RouteAccess::Requires(Scope::kRead),
             [&ctx](const RouteRequest& r) { return Metrics(ctx, r); });
  router.Add(HttpMethod::kGet, "/api/v1/openapi.json", RouteAccess::Authenticated(), OpenApi);
}

}  // namespace taskengine::api
