// job:list, job:dispatch.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>

#include "api/redaction.h"
#include "cli.h"
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
  auto jobs = (*engine)->store().ListJobs();
  if (!jobs.ok()) return Fail(jobs.status());
  auto schedules = JobSchedules((*engine)->store(), *jobs, (*engine)->clock()->NowMillis());
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
}

}  // namespace taskengine::cli
