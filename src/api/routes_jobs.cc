// Job definitions: list, get, create, update, enable, disable, delete (I1).
#include <algorithm>

#include "api/job_edits.h"
#include "api/redaction.h"
#include "api/routes.h"
#include "core/time_text.h"
#include "engine/scheduler.h"
#include "views/schedule_preview.h"

namespace taskengine::api {
namespace {

// A tenant-bound principal sees the per-tenant definitions only (it may
// dispatch those for its tenants); global ones need global tenant access.
bool MaySeeJob(const Principal& p, const JobDefinition& job) {
  return p.all_tenants || job.scope == JobScope::kPerTenant;
}

Result<JobDefinition> VisibleJob(ApiContext& ctx, const Principal& p, const std::string& name) {
  const Status missing = NotFound("job " + name.substr(0, 100) + " not found");
  if (!IsValidJobName(name)) return missing;
  Result<JobDefinition> job = ctx.store->GetJob(JobName(name));
  if (!job.ok()) return job.status().code() == ErrorCode::kNotFound ? missing : job.status();
  if (!MaySeeJob(p, *job)) return missing;
  return job;
}

// Only the global admin sees a config's secrets (X2, quality.md §3.10).
bool MayRevealSecrets(const Principal& p) { return p.all_tenants && p.HasScope(Scope::kAdmin); }

// The definition and its schedule state as `p` may see them: secrets of its
// config masked unless `p` is the global admin.
Json JobView(const ApiContext& ctx, const Principal& p, const JobDefinition& job,
             const JobScheduleInfo& schedule) {
  Json view = JobToJson(job, schedule);
  view["config"] = RedactJobConfig(view["config"], MayRevealSecrets(p), ctx.options.redact_keys);
  return view;
}

// 200 with the job's view (see JobView).
HttpResponse JobResponse(ApiContext& ctx, const Principal& p, const JobDefinition& job) {
  auto schedules = JobSchedules(*ctx.store, {job}, ctx.clock->NowMillis());
  if (!schedules.ok()) return StatusResponse(schedules.status());
  return JsonResponse(200, JobView(ctx, p, job, (*schedules)[job.name.value]));
}

// Without ApiOptions::check_job (an embedding that knows no handlers): the
// schedule and time zone as the scheduler reads them.
Status CheckScheduleOnly(const JobDefinition& job, std::string* field) {
  if (auto schedule = CheckJobSchedule(job); !schedule.ok()) {
    *field = "schedule";
    return InvalidArgument("invalid schedule: " + schedule.status().message());
  }
  return Status::Ok();
}

// The job edits of job_edits.h over this server's store and decisions.
JobEditor Editor(const ApiContext& ctx) {
  JobEditor editor;
  editor.store = ctx.store;
  editor.check_job = ctx.options.check_job ? ctx.options.check_job : CheckScheduleOnly;
  editor.server_owned_config_keys = ctx.options.server_owned_config_keys;
  editor.redact_keys = ctx.options.redact_keys;
  return editor;
}

// The error of a refused edit, with {"field": ...} when it names one.
HttpResponse EditError(const Status& status, const std::string& field) {
  if (field.empty()) return StatusResponse(status);
  return StatusResponse(status, {{"field", field}});
}

// The optional {"reason": "..."} body of enable, disable and delete.
// GET /api/v1/jobs -> {"items": [JobDefinition...]} ordered by name.
HttpResponse ListJobs(ApiContext& ctx, const RouteRequest& req) {
  auto query = QueryParams::Parse(req.http.query);
  if (!query.ok()) return StatusResponse(query.status());
  if (Status s = query->RejectUnknown({}); !s.ok()) return StatusResponse(s);
  auto jobs = ctx.store->ListJobs();
  if (!jobs.ok()) return StatusResponse(jobs.status());
  std::vector<JobDefinition> visible;
  for (JobDefinition& job : *jobs) {
    // The server's own jobs (taskengine.*) are not the operators' to edit or
    // run; their executions stay visible in the execution search.
    if (IsReservedJobName(job.name.value)) continue;
    if (MaySeeJob(PrincipalOf(req), job)) visible.push_back(std::move(job));
  }
  auto schedules = JobSchedules(*ctx.store, visible, ctx.clock->NowMillis());
  if (!schedules.ok()) return StatusResponse(schedules.status());
  Json items = Json::array();
  for (const JobDefinition& job : visible) {
    items.push_back(JobView(ctx, PrincipalOf(req), job, (*schedules)[job.name.value]));
  }
  return JsonResponse(200, Json{{"items", std::move(items)}});
}

// GET /api/v1/jobs/{name} -> JobDefinition
HttpResponse GetJob(ApiContext& ctx, const RouteRequest& req) {
  auto job = VisibleJob(ctx, PrincipalOf(req), req.Param("name"));
  if (!job.ok()) return StatusResponse(job.status());
  return JobResponse(ctx, PrincipalOf(req), *job);
}

// POST /api/v1/jobs
//   {"name": "...", "handler": "command" | "http", ...every field of
//    JobDefinition by its JobToJson name..., "reason": "..."}
// -> 201 JobDefinition. Fields left out take their defaults. The config may
// not set the keys the server's configuration owns (a `command` job names a
// [[command_profile]] with {"profile": NAME}, an `http` job a [[http_target]]
// with {"target": NAME}). Checked as at load time (ApiOptions::check_job):
// 400 naming the field, 409 when the name exists; nothing changes then.
// Audited "job.create" (config secrets masked).
HttpResponse CreateJobRoute(ApiContext& ctx, const RouteRequest& req) {
  const Principal& principal = PrincipalOf(req);
  if (!principal.all_tenants) return NeedsAllTenants("creating job definitions");
  auto body = ParseJsonBody(req.http, /*allow_empty=*/false);
  if (!body.ok()) return StatusResponse(body.status());
  std::string field;
  auto created = CreateJob(Editor(ctx), *body, principal.name, &field);
  if (!created.ok()) return EditError(created.status(), field);
  HttpResponse response = JobResponse(ctx, principal, *created);
  if (response.status == 200) response.status = 201;
  return response;
}

// PATCH /api/v1/jobs/{name}
//   {any field of POST /api/v1/jobs but name, handler and scope (which may
//    only be repeated unchanged), "reason": "..."}   (at least one field)
// -> 200 JobDefinition (after). "config" replaces the handler's editable
// settings; the keys the server's configuration owns (what runs, where
// requests go: ApiOptions::server_owned_config_keys) are kept and may only be
// repeated unchanged, else 400 naming the field. The edited definition is
// checked as at load time (ApiOptions::check_job); nothing changes when a
// check fails, and 409 when the job changed meanwhile. Audited "job.update"
// with the changed fields before and after (configs with their secrets
// masked).
HttpResponse PatchJob(ApiContext& ctx, const RouteRequest& req) {
  const Principal& principal = PrincipalOf(req);
  if (!principal.all_tenants) return NeedsAllTenants("editing job definitions");
  auto body = ParseJsonBody(req.http, /*allow_empty=*/false);
  if (!body.ok()) return StatusResponse(body.status());
  auto current = VisibleJob(ctx, principal, req.Param("name"));
  if (!current.ok()) return StatusResponse(current.status());
  std::string field;
  auto edited = EditJob(Editor(ctx), *current, *body, principal.name, &field);
  if (!edited.ok()) return EditError(edited.status(), field);
  return JobResponse(ctx, principal, *edited);
}

// POST /api/v1/jobs/{name}/enable   {"reason": "..."}  (optional body)
// POST /api/v1/jobs/{name}/disable  {"reason": "..."}  (reason required)
// -> 200 JobDefinition. A disabled job is not fired by the scheduler and its
// dispatches are refused (400 "job NAME is disabled"); work already admitted
// still runs. Audited
// "job.enable" / "job.disable" with the reason; already so: no record.
HttpResponse SetEnabledRoute(ApiContext& ctx, const RouteRequest& req, bool enabled) {
  const Principal& principal = PrincipalOf(req);
  if (!principal.all_tenants) {
    return NeedsAllTenants(enabled ? "enabling jobs" : "disabling jobs");
  }
  auto reason = ReasonBody(req);
  if (!reason.ok()) return StatusResponse(reason.status());
  auto current = VisibleJob(ctx, principal, req.Param("name"));
  if (!current.ok()) return StatusResponse(current.status());
  auto changed = SetJobEnabled(Editor(ctx), *current, enabled, principal.name, *reason);
  if (!changed.ok()) {
    return EditError(changed.status(),
                     changed.status().code() == ErrorCode::kInvalidArgument ? "reason" : "");
  }
  return JobResponse(ctx, principal, *changed);
}

// DELETE /api/v1/jobs/{name}   {"reason": "..."}  (optional body)
// -> 200 {"name": "...", "deleted": true}. 409 naming how many executions of
// the job are open (queued or running): disabling is the safe verb. Its
// finished executions keep their history. Audited "job.delete".
HttpResponse DeleteJobRoute(ApiContext& ctx, const RouteRequest& req) {
  const Principal& principal = PrincipalOf(req);
  if (!principal.all_tenants) return NeedsAllTenants("deleting job definitions");
  auto reason = ReasonBody(req);
  if (!reason.ok()) return StatusResponse(reason.status());
  auto current = VisibleJob(ctx, principal, req.Param("name"));
  if (!current.ok()) return StatusResponse(current.status());
  if (Status s = DeleteJob(Editor(ctx), *current, principal.name, *reason); !s.ok()) {
    return StatusResponse(s);
  }
  return JsonResponse(200, Json{{"name", current->name.value}, {"deleted", true}});
}

}  // namespace

// GET /api/v1/schedule/preview?schedule=EXPR&timezone=ZONE&count=N&from=TIME
// -> {"expression", "normalized", "timezone", "from", "can_ever_fire",
//     "fires": [{"utc", "local", "offset", "abbrev", "shifted"}]}: the next
// `count` (1..50, default 5) fire times strictly after `from` (default now),
// as the scheduler computes them (T1, T2); what `schedule:preview` prints.
// 400 naming the position for a bad expression, or an unknown zone.
HttpResponse PreviewScheduleRoute(ApiContext& ctx, const RouteRequest& req) {
  auto query = QueryParams::Parse(req.http.query);
  if (!query.ok()) return StatusResponse(query.status());
  if (Status s = query->RejectUnknown({"schedule", "timezone", "count", "from"}); !s.ok()) {
    return StatusResponse(s);
  }
  const std::string* schedule = query->Get("schedule");
  if (schedule == nullptr || schedule->empty() || schedule->size() > 200) {
    return StatusResponse(
        InvalidArgument("schedule: a cron expression of 1..200 bytes is required"));
  }
  std::string zone = "UTC";
  if (const std::string* z = query->Get("timezone")) zone = *z;
  if (zone.empty() || zone.size() > 64) {
    return StatusResponse(InvalidArgument("timezone: an IANA time zone name, e.g. Europe/Paris"));
  }
  int count = 5;
  if (const std::string* c = query->Get("count")) {
    auto n = ParseInteger(*c, 1, 50, "count");
    if (!n.ok()) return StatusResponse(n.status());
    count = static_cast<int>(*n);
  }
  Millis from = ctx.clock->NowMillis();
  if (const std::string* f = query->Get("from")) {
    auto t = ParseTime(*f, "from");
    if (!t.ok()) return StatusResponse(t.status());
    from = *t;
  }
  auto preview = PreviewSchedule(*schedule, zone, from, count);
  if (!preview.ok()) return StatusResponse(preview.status());
  return JsonResponse(200, SchedulePreviewToJson(*preview));
}

void RegisterJobRoutes(ApiContext& ctx, Router& router) {
  router.Add(HttpMethod::kGet, "/api/v1/schedule/preview", RouteAccess::Requires(Scope::kRead),
             [&ctx](const RouteRequest& r) { return PreviewScheduleRoute(ctx, r); });
  router.Add(HttpMethod::kGet, "/api/v1/jobs", RouteAccess::Requires(Scope::kRead),
             [&ctx](const RouteRequest& r) { return ListJobs(ctx, r); });
  router.Add(HttpMethod::kGet, "/api/v1/jobs/{name}", RouteAccess::Requires(Scope::kRead),
             [&ctx](const RouteRequest& r) { return GetJob(ctx, r); });
  router.Add(HttpMethod::kPost, "/api/v1/jobs", RouteAccess::Requires(Scope::kAdmin),
             [&ctx](const RouteRequest& r) { return CreateJobRoute(ctx, r); });
  router.Add(HttpMethod::kPatch, "/api/v1/jobs/{name}", RouteAccess::Requires(Scope::kAdmin),
             [&ctx](const RouteRequest& r) { return PatchJob(ctx, r); });
  router.Add(HttpMethod::kDelete, "/api/v1/jobs/{name}", RouteAccess::Requires(Scope::kAdmin),
             [&ctx](const RouteRequest& r) { return DeleteJobRoute(ctx, r); });
  router.Add(HttpMethod::kPost, "/api/v1/jobs/{name}/enable", RouteAccess::Requires(Scope::kAdmin),
             [&ctx](const RouteRequest& r) { return SetEnabledRoute(ctx, r, true); });
  router.Add(HttpMethod::kPost, "/api/v1/jobs/{name}/disable", RouteAccess::Requires(Scope::kAdmin),
             [&ctx](const RouteRequest& r) { return SetEnabledRoute(ctx, r, false); });
}

}  // namespace taskengine::api
