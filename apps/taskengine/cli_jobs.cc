// job:list, job:dispatch, job:create, job:edit, job:enable, job:disable,
// job:delete.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/job_edits.h"
#include "api/redaction.h"
#include "cli.h"
#include "engine/engine_internal.h"
#include "server/logging.h"
#include "server/operations.h"
#include "server/scheduling.h"
#include "server/server.h"
#include "server/time_format.h"
#include "storage/store.h"
#include "views/views.h"

namespace taskengine::cli {
namespace {

int RunJobList(const GlobalFlags& flags, bool show_secrets) {
  ServerConfig config;
  auto engine = OpenClient(flags, &config);
  if (!engine.ok()) return Fail(engine.status());
  auto jobs = StoreOf(**engine).ListJobs();
  if (!jobs.ok()) return Fail(jobs.status());
  // The server's own jobs (taskengine.*) are not listed; their executions are.
  std::erase_if(*jobs, [](const JobDefinition& j) { return IsReservedJobName(j.name.value); });
  auto schedules = JobSchedules(StoreOf(**engine), *jobs, (*engine)->clock()->NowMillis());
  if (!schedules.ok()) return Fail(schedules.status());
  if (flags.json) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const JobDefinition& j : *jobs) {
      list.push_back(JobToJson(j, (*schedules)[j.name.value]));
      list.back()["config"] =
          api::RedactJobConfig(list.back()["config"], show_secrets, config.redact_keys);
    }
    PrintJson({{"items", std::move(list)}});
    return kExitOk;
  }
  if (jobs->empty()) {
    std::cout
        << "no job definitions (add [[job]] tables to the config and run `taskengine migrate`)"
        << std::endl;
    return kExitOk;
  }
  Table table({"NAME", "HANDLER", "QUEUE", "SCOPE", "SCHEDULE", "ENABLED", "MAX ATTEMPTS",
               "TIMEOUT", "NEXT FIRE", "LAST FIRE", "SKIPPED FIRES"});
  for (const JobDefinition& j : *jobs) {
    const JobScheduleInfo& s = (*schedules)[j.name.value];
    table.Add({j.name.value, j.handler, j.queue, std::string(ToString(j.scope)),
               j.schedule.empty() ? "-" : j.schedule + " (" + j.timezone + ")",
               j.enabled ? "yes" : "no", std::to_string(j.retry.max_attempts),
               FormatDuration(j.timeout_ms),
               !s.error.empty() ? "invalid schedule"
               : s.next_fire    ? ShortTime(*s.next_fire)
                                : "-",
               ShortTime(s.last_fire_at), std::to_string(s.skipped_fires)});
  }
  table.Print(std::cout);
  return kExitOk;
}

struct DispatchFlags {
  CliDispatch in;
  double delay_seconds = 0;
  CLI::Option* delay = nullptr;
};

int RunJobDispatch(const GlobalFlags& flags, DispatchFlags& d) {
  if (d.delay->count() > 0) d.in.delay_seconds = d.delay_seconds;
  if (d.in.payload_json == "-") {
    d.in.payload_json.assign(std::istreambuf_iterator<char>(std::cin),
                             std::istreambuf_iterator<char>());
  }
  auto request = BuildCliDispatch(d.in);
  if (!request.ok()) return Fail(request.status());
  if (IsReservedJobName(request->job.value)) {
    return Fail(InvalidArgument("job '" + request->job.value +
                                "' is internal to the server (names under taskengine. are "
                                "reserved) and cannot be dispatched"));
  }
  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  auto result = (*engine)->Dispatch(*request);
  if (!result.ok()) {
    if (result.status().code() == ErrorCode::kNotFound) {
      return Fail(NotFound(result.status().message() + " (see `taskengine job:list`)"));
    }
    return Fail(result.status());
  }
  if (flags.json) {
    PrintJson(DispatchResultToJson(*result));
  } else if (result->created) {
    std::cout << "accepted execution " << result->id.value << " (created)" << std::endl;
  } else {
    std::cout << "accepted execution " << result->id.value << " (existing, "
              << ToString(result->status) << ")" << std::endl;
  }
  return kExitOk;
}

// --------------------------------------------------- job:create / job:edit / ...

// The flags of job:create and job:edit, turned into the request body of
// POST /api/v1/jobs and PATCH /api/v1/jobs/{name} (api/job_edits.h), so that
// the CLI and the API share one path and one set of rules.
struct DefineFlags {
  std::string name;
  std::string handler;
  std::string display_name;
  std::string queue;
  std::string scope;
  std::string schedule;
  std::string timezone;
  std::string config_json;
  std::string catch_up;
  std::vector<std::string> sets;  // FIELD=VALUE
  bool no_schedule = false;
  bool disabled = false;
  std::string reason;
  std::string as;
};

// FIELD=VALUE of --set: VALUE is JSON when it parses (5, true, null, [1],
// {"a":1}, "text"), else the text itself.
Status AddSetting(const std::string& setting, nlohmann::json* body) {
  const auto eq = setting.find('=');
  if (eq == std::string::npos || eq == 0) {
    return InvalidArgument("--set wants FIELD=VALUE, e.g. --set max_attempts=3 (got '" +
                           setting.substr(0, 100) + "')");
  }
  const std::string value = setting.substr(eq + 1);
  nlohmann::json parsed = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
  (*body)[setting.substr(0, eq)] = parsed.is_discarded() ? nlohmann::json(value) : parsed;
  return Status::Ok();
}

// The request body the flags describe (only the flags given).
Result<nlohmann::json> DefineBody(const DefineFlags& f, bool creating) {
  nlohmann::json body = nlohmann::json::object();
  if (creating) {
    body["name"] = f.name;
    if (!f.handler.empty()) body["handler"] = f.handler;
    if (!f.scope.empty()) body["scope"] = f.scope;
  }
  if (!f.display_name.empty()) body["display_name"] = f.display_name;
  if (!f.queue.empty()) body["queue"] = f.queue;
  if (!f.schedule.empty()) body["schedule"] = f.schedule;
  if (f.no_schedule) body["schedule"] = nullptr;
  if (!f.timezone.empty()) body["timezone"] = f.timezone;
  if (!f.catch_up.empty()) body["catch_up"] = f.catch_up;
  if (!f.config_json.empty()) {
    nlohmann::json config =
        nlohmann::json::parse(f.config_json, nullptr, /*allow_exceptions=*/false);
    if (!config.is_object()) {
      return InvalidArgument("--config must be a JSON object, e.g. '{\"profile\": \"report\"}'");
    }
    body["config"] = std::move(config);
  }
  if (f.disabled) body["enabled"] = false;
  for (const std::string& setting : f.sets) TE_RETURN_IF_ERROR(AddSetting(setting, &body));
  if (!f.reason.empty()) body["reason"] = f.reason;
  return body;
}

// The job edits over the CLI's database, with the checks of config loading.
api::JobEditor CliEditor(Engine& engine, const ServerConfig& config) {
  api::JobEditor editor;
  editor.store = &StoreOf(engine);
  editor.check_job = [config](const JobDefinition& job, std::string* field) {
    return CheckJobDefinition(job, config, field);
  };
  editor.server_owned_config_keys = ServerOwnedConfigKeys;
  editor.redact_keys = config.redact_keys;
  return editor;
}

// Prints the definition after a change (--json: JobToJson, secrets masked).
int PrintJob(const GlobalFlags& flags, Engine& engine, const ServerConfig& config,
             const JobDefinition& job, const std::string& what) {
  if (flags.json) {
    auto schedules = JobSchedules(StoreOf(engine), {job}, engine.clock()->NowMillis());
    if (!schedules.ok()) return Fail(schedules.status());
    nlohmann::ordered_json doc = JobToJson(job, (*schedules)[job.name.value]);
    doc["config"] = api::RedactJobConfig(doc["config"], /*reveal=*/false, config.redact_keys);
    PrintJson(doc);
  } else {
    std::cout << what << std::endl;
  }
  return kExitOk;
}

// Opens the database for a job edit: the configuration (for the checks), the
// engine and the actor. Fails the verb (returns its exit code) otherwise.
struct EditSession {
  ServerConfig config;
  std::unique_ptr<Engine> engine;
  std::string actor;
};

Result<EditSession> OpenEditSession(const GlobalFlags& flags, const std::string& as) {
  EditSession session;
  TE_ASSIGN_OR_RETURN(session.actor, CliActor(as));
  TE_ASSIGN_OR_RETURN(session.engine, OpenClient(flags, &session.config));
  return session;
}

Result<JobDefinition> ReadJob(Engine& engine, const std::string& name) {
  if (!IsValidJobName(name)) {
    return InvalidArgument("'" + name.substr(0, 100) +
                           "' is not a valid job name ([a-z0-9][a-z0-9._-]{0,99})");
  }
  auto job = StoreOf(engine).GetJob(JobName(name));
  if (!job.ok() && job.status().code() == ErrorCode::kNotFound) {
    return NotFound("no job named '" + name + "' (see `taskengine job:list`)");
  }
  return job;
}

// "job 'x': schedule ..." plus, for a field the message does not start
// with, "(field F)".
int FailEdit(const Status& status, const std::string& field) {
  if (field.empty() || status.message().find(field) != std::string::npos) return Fail(status);
  return Fail(Status(status.code(), status.message() + " (field " + field + ")"));
}

int RunJobCreate(const GlobalFlags& flags, const DefineFlags& f) {
  auto body = DefineBody(f, /*creating=*/true);
  if (!body.ok()) return Fail(body.status());
  auto session = OpenEditSession(flags, f.as);
  if (!session.ok()) return Fail(session.status());
  std::string field;
  auto created =
      api::CreateJob(CliEditor(*session->engine, session->config), *body, session->actor, &field);
  if (!created.ok()) return FailEdit(created.status(), field);
  return PrintJob(flags, *session->engine, session->config, *created,
                  "created job " + created->name.value);
}

int RunJobEdit(const GlobalFlags& flags, const DefineFlags& f) {
  auto body = DefineBody(f, /*creating=*/false);
  if (!body.ok()) return Fail(body.status());
  auto session = OpenEditSession(flags, f.as);
  if (!session.ok()) return Fail(session.status());
  auto current = ReadJob(*session->engine, f.name);
  if (!current.ok()) return Fail(current.status());
  std::string field;
  const api::JobEditor editor = CliEditor(*session->engine, session->config);
  auto edited = api::EditJob(editor, *current, *body, session->actor, &field);
  if (!edited.ok()) return FailEdit(edited.status(), field);
  const auto changes = api::DiffJobs(*current, *edited, /*mask=*/true, editor.redact_keys);
  std::string fields;
  for (const api::FieldChange& c : changes) fields += (fields.empty() ? "" : ", ") + c.field;
  return PrintJob(
      flags, *session->engine, session->config, *edited,
      changes.empty() ? "job " + f.name + " unchanged" : "updated job " + f.name + ": " + fields);
}

struct StateFlags {
  std::string name;
  std::string reason;
  std::string as;
};

int RunJobSetEnabled(const GlobalFlags& flags, const StateFlags& f, bool enabled) {
  auto session = OpenEditSession(flags, f.as);
  if (!session.ok()) return Fail(session.status());
  auto current = ReadJob(*session->engine, f.name);
  if (!current.ok()) return Fail(current.status());
  auto changed = api::SetJobEnabled(CliEditor(*session->engine, session->config), *current, enabled,
                                    session->actor, f.reason);
  if (!changed.ok()) return Fail(changed.status());
  const bool was = current->enabled;
  return PrintJob(flags, *session->engine, session->config, *changed,
                  "job " + f.name + (was == enabled ? " was already " : " is now ") +
                      (enabled ? "enabled" : "disabled"));
}

int RunJobDelete(const GlobalFlags& flags, const StateFlags& f) {
  auto session = OpenEditSession(flags, f.as);
  if (!session.ok()) return Fail(session.status());
  auto current = ReadJob(*session->engine, f.name);
  if (!current.ok()) return Fail(current.status());
  Status s = api::DeleteJob(CliEditor(*session->engine, session->config), *current, session->actor,
                            f.reason);
  if (!s.ok()) return Fail(s);
  if (flags.json) {
    PrintJson({{"name", f.name}, {"deleted", true}});
  } else {
    std::cout << "deleted job " << f.name << std::endl;
  }
  return kExitOk;
}

constexpr const char* kJobAsHelp =
    "Act as operator cli:NAME instead of cli:<unix user> (the audit log records the name)";

// The options job:create and job:edit share.
void AddDefineOptions(CLI::App* verb, DefineFlags& f) {
  verb->add_option("--display-name", f.display_name, "Display name");
  verb->add_option("--queue", f.queue, "Queue (one the config declares)");
  verb->add_option("--schedule", f.schedule,
                   "Cron expression: 5 fields or @hourly/@daily/... (checked as at load time)");
  verb->add_option("--timezone", f.timezone, "IANA time zone of the schedule, e.g. Europe/Paris");
  verb->add_option("--catch-up", f.catch_up, "Missed fires after downtime: coalesce, all or none");
  verb->add_option("--config", f.config_json,
                   "Handler config, a JSON object: {\"profile\": NAME} names a "
                   "[[command_profile]], {\"target\": NAME} a [[http_target]] of the config "
                   "(argv, cwd, env, url, ... come from the config file only)");
  verb->add_option("--set", f.sets,
                   "FIELD=VALUE for any other field of the definition (repeatable; VALUE is JSON "
                   "when it parses), e.g. --set max_attempts=3 --set timeout_ms=60000");
  verb->add_option("--reason", f.reason, "Why (kept in the audit log)");
  verb->add_option("--as", f.as, kJobAsHelp);
}

}  // namespace

void AddJobVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs) {
  CLI::App* list = AddVerb(app, "job:list", "List the job definitions in the database.");
  auto show_secrets = std::make_shared<bool>(false);
  list->add_flag("--show-secrets", *show_secrets,
                 "With --json: show the configs' secrets (headers, env and the [redaction] "
                 "keys), which are masked otherwise");
  verbs->push_back({list, [&flags, show_secrets] { return RunJobList(flags, *show_secrets); }});

  auto d = std::make_shared<DispatchFlags>();
  CLI::App* dispatch = AddVerb(
      app, "job:dispatch",
      "Admit one execution of a job (trigger manual, requester cli:<user>). It is durable when "
      "this returns; a running `serve` picks it up at its next poll.");
  dispatch->add_option("job", d->in.job, "Job name")->required();
  dispatch->add_option("--tenant", d->in.tenant, "Tenant (required for per-tenant jobs)");
  dispatch
      ->add_option("--payload", d->in.payload_json,
                   "Payload: a JSON object, or - to read it from stdin")
      ->default_str("{}");
  dispatch->add_option("--key", d->in.idempotency_key,
                       "Idempotency key: the same key and payload return the same execution; "
                       "a different payload is a conflict (exit 4)");
  d->delay =
      dispatch->add_option("--delay", d->delay_seconds, "Start no earlier than SECONDS from now");
  dispatch
      ->add_option("--run-at", d->in.run_at,
                   "Start no earlier than this RFC 3339 time, e.g. 2026-03-01T12:00:00Z")
      ->excludes(d->delay);
  dispatch->add_option("--lane", d->in.lane_key,
                       "Lane key: executions of one lane run one at a time");
  verbs->push_back({dispatch, [&flags, d] { return RunJobDispatch(flags, *d); }});
  auto create_flags = std::make_shared<DefineFlags>();
  CLI::App* create =
      AddVerb(app, "job:create",
              "Create a job definition in the database, checked exactly as a [[job]] of the config "
              "(exit 1 naming the field otherwise; nothing is created). Audited job.create.");
  create->add_option("name", create_flags->name, "Job name ([a-z0-9][a-z0-9._-]{0,99})")
      ->required();
  create->add_option("--handler", create_flags->handler, "Handler: command or http")->required();
  create->add_option("--scope", create_flags->scope, "global (default) or per_tenant");
  create->add_flag("--disabled", create_flags->disabled, "Create it disabled");
  AddDefineOptions(create, *create_flags);
  verbs->push_back({create, [&flags, create_flags] { return RunJobCreate(flags, *create_flags); }});

  auto edit_flags = std::make_shared<DefineFlags>();
  CLI::App* edit = AddVerb(
      app, "job:edit",
      "Change fields of a job definition (the name, handler and scope stay), checked as at load "
      "time. The edit is kept across restarts: seeding never overwrites it (see migrate "
      "--sync-jobs). Audited job.update with before and after.");
  edit->add_option("name", edit_flags->name, "Job name")->required();
  edit->add_flag("--no-schedule", edit_flags->no_schedule, "Remove the schedule");
  AddDefineOptions(edit, *edit_flags);
  verbs->push_back({edit, [&flags, edit_flags] { return RunJobEdit(flags, *edit_flags); }});

  auto enable_flags = std::make_shared<StateFlags>();
  CLI::App* enable = AddVerb(app, "job:enable",
                             "Enable a job: the scheduler fires it again and dispatches are "
                             "accepted. Audited job.enable.");
  enable->add_option("name", enable_flags->name, "Job name")->required();
  enable->add_option("--reason", enable_flags->reason, "Why (kept in the audit log)");
  enable->add_option("--as", enable_flags->as, kJobAsHelp);
  verbs->push_back(
      {enable, [&flags, enable_flags] { return RunJobSetEnabled(flags, *enable_flags, true); }});

  auto disable_flags = std::make_shared<StateFlags>();
  CLI::App* disable = AddVerb(app, "job:disable",
                              "Disable a job: the scheduler stops firing it and dispatches are "
                              "refused; admitted work still runs. Audited job.disable.");
  disable->add_option("name", disable_flags->name, "Job name")->required();
  disable->add_option("--reason", disable_flags->reason, "Why (required; kept in the audit log)")
      ->required();
  disable->add_option("--as", disable_flags->as, kJobAsHelp);
  verbs->push_back({disable, [&flags, disable_flags] {
                      return RunJobSetEnabled(flags, *disable_flags, false);
                    }});

  auto delete_flags = std::make_shared<StateFlags>();
  CLI::App* remove = AddVerb(
      app, "job:delete",
      "Delete a job definition. Refused (exit 4, naming how many) while executions of it are "
      "queued or running: disable it instead. Finished executions keep their history. Audited "
      "job.delete.");
  remove->add_option("name", delete_flags->name, "Job name")->required();
  remove->add_option("--reason", delete_flags->reason, "Why (kept in the audit log)");
  remove->add_option("--as", delete_flags->as, kJobAsHelp);
  verbs->push_back({remove, [&flags, delete_flags] { return RunJobDelete(flags, *delete_flags); }});
}

}  // namespace taskengine::cli
