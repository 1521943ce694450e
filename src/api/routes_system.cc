// Health, readiness, Prometheus metrics (I5) and the OpenAPI document (I1).
#include <cstdio>

#include "api/routes.h"

namespace taskengine::api {
namespace {

// A Prometheus label value: backslash, double quote and newline escaped.
std::string LabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void Family(std::string* out, std::string_view name, std::string_view type, std::string_view help) {
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  *out += help;
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += type;
  *out += '\n';
}

void Sample(std::string* out, std::string_view name, std::string_view labels, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", value);
  *out += name;
  *out += labels;
  *out += ' ';
  *out += buf;
  *out += '\n';
}

// GET /healthz -> 200 {"status": "ok"} while the process serves HTTP.
HttpResponse Healthz(const RouteRequest&) { return JsonResponse(200, Json{{"status", "ok"}}); }

// GET /readyz -> 200 {"status": "ready", "schema_version"} when the store
// answers; 503 otherwise.
HttpResponse Readyz(ApiContext& ctx, const RouteRequest&) {
  auto version = ctx.store->SchemaVersion();
  if (!version.ok()) {
    return StatusResponse(Status(ErrorCode::kUnavailable,
                                 "store not reachable: " + version.status().message()));
  }
  return JsonResponse(200, Json{{"status", "ready"}, {"schema_version", *version}});
}

// GET /metrics -> Prometheus text format 0.0.4. From the store's counters
// (cost independent of history) and this engine's worker-pool counters.
HttpResponse Metrics(ApiContext& ctx, const RouteRequest& req) {
  if (req.principal && !req.principal->all_tenants) return NeedsAllTenants("metrics");
  const Millis now = ctx.clock->NowMillis();
  auto stats = ctx.store->GetStats();
  if (!stats.ok()) return StatusResponse(stats.status());
  constexpr int kQueued = static_cast<int>(ExecutionStatus::kQueued);
  constexpr int kRunning = static_cast<int>(ExecutionStatus::kRunning);
  std::string out;
  out.reserve(4096);
  Family(&out, "taskengine_queue_depth", "gauge", "Queued executions per queue, due or not.");
  for (const QueueStats& q : stats->queues) {
    Sample(&out, "taskengine_queue_depth", "{queue=\"" + LabelValue(q.queue) + "\"}",
           static_cast<double>(q.by_status[kQueued]));
  }
  Family(&out, "taskengine_queue_running", "gauge", "Running executions per queue.");
  for (const QueueStats& q : stats->queues) {
    Sample(&out, "taskengine_queue_running", "{queue=\"" + LabelValue(q.queue) + "\"}",
           static_cast<double>(q.by_status[kRunning]));
  }
  Family(&out, "taskengine_queue_oldest_age_seconds", "gauge",
         "Per queue, how long the oldest due queued execution has waited past its run-at "
         "(0 when none is due).");
  for (const QueueStats& q : stats->queues) {
    double age = q.oldest_due_at == 0 ? 0.0 : std::max<Millis>(0, now - q.oldest_due_at) / 1000.0;
    Sample(&out, "taskengine_queue_oldest_age_seconds",
           "{queue=\"" + LabelValue(q.queue) + "\"}", age);
  }
  Family(&out, "taskengine_executions", "gauge", "Executions stored, by status.");
  for (int i = 0; i < kExecutionStatusCount; ++i) {
    Sample(&out, "taskengine_executions",
           "{status=\"" + std::string(ToString(static_cast<ExecutionStatus>(i))) + "\"}",
           static_cast<double>(stats->totals[i]));
  }
  Family(&out, "taskengine_executions_ended_24h", "gauge",
         "Executions that ended in the last 24 hours, by final status.");
  for (int i = 0; i < kExecutionStatusCount; ++i) {
    auto status = static_cast<ExecutionStatus>(i);
    if (!IsTerminal(status)) continue;
    Sample(&out, "taskengine_executions_ended_24h",
           "{status=\"" + std::string(ToString(status)) + "\"}",
           static_cast<double>(stats->ended_last_24h[i]));
  }
  const EngineStats s = ctx.engine->stats();
  const struct {
    const char* name;
    const char* help;
    std::int64_t value;
  } counters[] = {
      {"taskengine_claims_total", "Executions claimed by this engine's workers.", s.claimed},
      {"taskengine_handler_successes_total", "Handler runs that returned success.", s.succeeded},
      {"taskengine_handler_failures_total", "Handler runs that returned a failure.", s.failed},
      {"taskengine_leases_released_total", "Leases given back unrun (shutdown).", s.released},
      {"taskengine_stale_rejections_total",
       "Outcomes or heartbeats rejected because the claim was stale.", s.stale},
      {"taskengine_outcomes_published_total", "Outcomes durably recorded by the store.",
       s.published},
  };
  for (const auto& c : counters) {
    Family(&out, c.name, "counter", c.help);
    Sample(&out, c.name, "", static_cast<double>(c.value));
  }
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
  router.Add(HttpMethod::kGet, "/healthz", RouteAccess::Public(), Healthz);
  router.Add(HttpMethod::kGet, "/readyz", RouteAccess::Public(),
             [&ctx](const RouteRequest& r) { return Readyz(ctx, r); });
  router.Add(HttpMethod::kGet, "/metrics",
             ctx.options.metrics_open ? RouteAccess::Public() : RouteAccess::Requires(Scope::kRead),
             [&ctx](const RouteRequest& r) { return Metrics(ctx, r); });
  router.Add(HttpMethod::kGet, "/api/v1/openapi.json", RouteAccess::Authenticated(), OpenApi);
}

}  // namespace taskengine::api
