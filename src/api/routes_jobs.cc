// Job definitions: list, get, update (I1).
#include <algorithm>

#include "api/redaction.h"
#include "api/routes.h"
#include "core/schedule.h"

namespace taskengine::api {
namespace {

constexpr std::size_t kMaxDisplayName = 200;
constexpr std::size_t kMaxSchedule = 200;
constexpr std::size_t kMaxReason = 1000;

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

// The config an edit asks for (`requested`, a JSON object) applied to the
// current one: the keys the server's configuration owns are kept from
// `current`, and may only be repeated unchanged; every other key is replaced
// by the request's. kInvalidArgument naming the first owned key the request
// sets, changes or drops (its name in *field).
Result<nlohmann::json> EditedConfig(const ApiContext& ctx, const JobDefinition& job,
                                    const nlohmann::json& requested, std::string* field) {
  nlohmann::json current = nlohmann::json::parse(job.config_json, nullptr, false);
  if (!current.is_object()) current = nlohmann::json::object();
  std::vector<std::string> owned;
  if (ctx.options.server_owned_config_keys)
    owned = ctx.options.server_owned_config_keys(job.handler);
  nlohmann::json edited = nlohmann::json::object();
  for (const auto& [key, value] : requested.items()) {
    const bool is_owned = std::find(owned.begin(), owned.end(), key) != owned.end();
    auto kept = current.find(key);
    if (is_owned && (kept == current.end() || *kept != value)) {
      *field = "config." + key;
      return InvalidArgument("config." + key + " of " + job.handler +
                             " jobs comes from the server's configuration only "
                             "(taskengine.toml): the API cannot set or change it");
    }
    edited[key] = value;
  }
  for (const std::string& key : owned) {
    if (auto kept = current.find(key); kept != current.end()) edited[key] = *kept;
  }
  return edited;
}

// GET /api/v1/jobs -> {"items": [JobDefinition...]} ordered by name.
HttpResponse ListJobs(ApiContext& ctx, const RouteRequest& req) {
  auto query = QueryParams::Parse(req.http.query);
  if (!query.ok()) return StatusResponse(query.status());
  if (Status s = query->RejectUnknown({}); !s.ok()) return StatusResponse(s);
  auto jobs = ctx.store->ListJobs();
  if (!jobs.ok()) return StatusResponse(jobs.status());
  std::vector<JobDefinition> visible;
  for (JobDefinition& job : *jobs) {
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

// PATCH /api/v1/jobs/{name}
//   {"enabled": bool, "schedule": "cron" | null, "config": {...},
//    "display_name": "...", "reason": "..."}   (at least one of the first four)
// -> 200 JobDefinition (after). "config" replaces the handler's editable
// settings; the keys the server's configuration owns (what runs, where
// requests go: ApiOptions::server_owned_config_keys) are kept and may only be
// repeated unchanged, else 400 naming the field. The edited definition is
// checked as at load time (ApiOptions::check_job); nothing changes when a
// check fails. Audited as "job.update" with the changed fields before and
// after (configs with their secrets masked).
HttpResponse PatchJob(ApiContext& ctx, const RouteRequest& req) {
  const Principal& principal = PrincipalOf(req);
  if (!principal.all_tenants) return NeedsAllTenants("editing job definitions");
  auto body = ParseJsonBody(req.http, /*allow_empty=*/false);
  if (!body.ok()) return StatusResponse(body.status());
  StrictObject in(*body, "request body");
  std::optional<bool> enabled = in.Bool("enabled");
  const nlohmann::json* schedule = in.Value("schedule");
  const nlohmann::json* config = in.Value("config");
  std::optional<std::string> display_name = in.String("display_name", kMaxDisplayName);
  std::optional<std::string> reason = in.String("reason", kMaxReason);
  if (schedule != nullptr && !schedule->is_null() && !schedule->is_string()) {
    in.Fail("schedule", "must be a cron expression string or null");
  }
  if (schedule != nullptr && schedule->is_string() &&
      schedule->get_ref<const std::string&>().size() > kMaxSchedule) {
    in.Fail("schedule", "is longer than " + std::to_string(kMaxSchedule) + " bytes");
  }
  if (config != nullptr && !config->is_object()) in.Fail("config", "must be a JSON object");
  if (Status s = in.Finish(); !s.ok()) return StatusResponse(s);
  if (!enabled && schedule == nullptr && config == nullptr && !display_name) {
    return StatusResponse(InvalidArgument(
        "nothing to change: give at least one of enabled, schedule, config, display_name"));
  }

  std::lock_guard<std::mutex> lock(ctx.job_edit_mu);
  auto current = VisibleJob(ctx, principal, req.Param("name"));
  if (!current.ok()) return StatusResponse(current.status());
  JobDefinition job = *current;
  Json before = Json::object();
  Json after = Json::object();
  if (enabled && *enabled != job.enabled) {
    before["enabled"] = job.enabled;
    after["enabled"] = *enabled;
    job.enabled = *enabled;
  }
  if (schedule != nullptr) {
    std::string cron = schedule->is_null() ? "" : schedule->get<std::string>();
    if (!cron.empty()) {
      auto parsed = Schedule::Create(cron, job.timezone);
      if (!parsed.ok()) {
        return StatusResponse(
            Status(parsed.status().code(), "invalid schedule: " + parsed.status().message()));
      }
      if (!parsed->cron().CanEverFire()) {
        return StatusResponse(InvalidArgument("invalid schedule: '" + cron + "' never fires"));
      }
    }
    if (cron != job.schedule) {
      before["schedule"] = job.schedule.empty() ? Json(nullptr) : Json(job.schedule);
      after["schedule"] = cron.empty() ? Json(nullptr) : Json(cron);
      job.schedule = cron;
    }
  }
  if (config != nullptr) {
    std::string field;
    auto edited = EditedConfig(ctx, job, *config, &field);
    if (!edited.ok()) return StatusResponse(edited.status(), {{"field", field}});
    nlohmann::json current = nlohmann::json::parse(job.config_json, nullptr, false);
    if (!current.is_object()) current = nlohmann::json::object();
    if (current != *edited) {
      before["config"] =
          RedactJobConfig(EmbeddedJson(job.config_json), /*reveal=*/false, ctx.options.redact_keys);
      job.config_json = DumpJson(*edited);
      after["config"] =
          RedactJobConfig(EmbeddedJson(job.config_json), /*reveal=*/false, ctx.options.redact_keys);
    }
  }
  if (display_name && *display_name != job.display_name) {
    before["display_name"] = job.display_name;
    after["display_name"] = *display_name;
    job.display_name = *display_name;
  }
  if (after.empty()) return JobResponse(ctx, principal, job);  // no change: no audit
  if ((after.contains("config") || after.contains("schedule")) && ctx.options.check_job) {
    if (Status s = ctx.options.check_job(job); !s.ok()) return StatusResponse(s);
  }

  if (Status s = ctx.store->UpsertJob(job); !s.ok()) return StatusResponse(s);
  AuditRecord audit;
  audit.actor = principal.name;
  audit.action = "job.update";
  audit.target = "job:" + job.name.value;
  audit.before_json = DumpJson(before);
  audit.after_json = DumpJson(after);
  audit.reason = reason.value_or("");
  if (Status s = ctx.store->AppendAudit(audit); !s.ok()) {
    return StatusResponse(Status(s.code(), "job " + job.name.value +
                                               " was updated but its audit record could not be "
                                               "written: " +
                                               s.message()));
  }
  auto updated = ctx.store->GetJob(job.name);
  if (!updated.ok()) return StatusResponse(updated.status());
  return JobResponse(ctx, principal, *updated);
}

}  // namespace

void RegisterJobRoutes(ApiContext& ctx, Router& router) {
  router.Add(HttpMethod::kGet, "/api/v1/jobs", RouteAccess::Requires(Scope::kRead),
             [&ctx](const RouteRequest& r) { return ListJobs(ctx, r); });
  router.Add(HttpMethod::kGet, "/api/v1/jobs/{name}", RouteAccess::Requires(Scope::kRead),
             [&ctx](const RouteRequest& r) { return GetJob(ctx, r); });
  router.Add(HttpMethod::kPatch, "/api/v1/jobs/{name}", RouteAccess::Requires(Scope::kAdmin),
             [&ctx](const RouteRequest& r) { return PatchJob(ctx, r); });
}

}  // namespace taskengine::api
