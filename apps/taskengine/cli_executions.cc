// execution:list, execution:show.
#include <iostream>
#include <memory>

#include "cli.h"
#include "server/logging.h"
#include "server/operations.h"
#include "server/server.h"
#include "server/time_format.h"
#include "server/views.h"
#include "storage/store.h"

namespace taskengine::cli {
namespace {

constexpr std::size_t kErrorColumnBytes = 60;

std::string Cut(const std::string& s, std::size_t max) {
  std::string line = s.substr(0, s.find('\n'));
  if (line.size() <= max) return line;
  return line.substr(0, max - 3) + "...";
}

std::string AttemptText(const Execution& e) {
  return std::to_string(e.attempt) + "/" + std::to_string(e.retry.max_attempts);
}

std::string DurationText(const Execution& e) {
  if (e.started_at == 0 || e.finished_at == 0) return "-";
  return FormatDuration(e.DurationMillis());
}

struct ListFlags {
  std::string job;
  std::string tenant;
  std::string status;
  int limit = 50;
  std::int64_t before = 0;
};

int RunList(const GlobalFlags& flags, const ListFlags& f) {
  if (f.before < 0) return Fail(InvalidArgument("--before must be a positive execution id"));
  ExecutionFilter filter;
  if (!f.job.empty()) filter.job = JobName(f.job);
  if (!f.tenant.empty()) filter.tenant = TenantId(f.tenant);
  if (!f.status.empty()) {
    auto status = ParseExecutionStatus(f.status);
    if (!status) {
      std::string names;
      for (int i = 0; i < kExecutionStatusCount; ++i) {
        names += (i ? ", " : "") + std::string(ToString(static_cast<ExecutionStatus>(i)));
      }
      return Fail(InvalidArgument("unknown status '" + f.status + "' (one of " + names + ")"));
    }
    filter.status = *status;
  }
  filter.limit = f.limit;
  filter.before = ExecutionId(f.before);

  auto config = ResolveConfig(flags);
  if (!config.ok()) return Fail(config.status());
  ConfigureLogging(config->log_format, /*verbose=*/false);
  auto engine = OpenEngine(*config, EngineMode::kClient);
  if (!engine.ok()) return Fail(engine.status());
  auto page = (*engine)->store().ListExecutions(filter);
  if (!page.ok()) return Fail(page.status());

  if (flags.json) {
    nlohmann::ordered_json items = nlohmann::ordered_json::array();
    for (const Execution& e : page->items) items.push_back(ExecutionToJson(e));
    PrintJson({{"executions", std::move(items)},
               {"next_before", page->next_before.value == 0
                                   ? nlohmann::ordered_json(nullptr)
                                   : nlohmann::ordered_json(page->next_before.value)}});
    return kExitOk;
  }
  if (page->items.empty()) {
    std::cout << "no executions" << std::endl;
    return kExitOk;
  }
  Table table(
      {"ID", "JOB", "TENANT", "STATUS", "ATTEMPT", "PROGRESS", "QUEUED AT", "DURATION", "ERROR"});
  for (const Execution& e : page->items) {
    table.Add({std::to_string(e.id.value), e.job.value, OrDash(e.tenant.value),
               std::string(ToString(e.status)), AttemptText(e), std::to_string(e.progress) + "%",
               ShortTime(e.queued_at), DurationText(e), OrDash(Cut(e.error, kErrorColumnBytes))});
  }
  table.Print(std::cout);
  if (page->next_before.value != 0) {
    std::cout << "more: --before=" << page->next_before.value << std::endl;
  }
  return kExitOk;
}

struct ShowFlags {
  std::int64_t id = 0;
  int logs = 200;
};

void PrintField(const char* name, const std::string& value) {
  std::printf("  %-18s %s\n", name, value.c_str());
}

void PrintDetail(const ExecutionDetail& d) {
  const Execution& e = d.execution;
  std::printf("execution %lld\n", static_cast<long long>(e.id.value));
  PrintField("status",
             std::string(ToString(e.status)) + (e.cancel_requested ? " (cancel requested)" : ""));
  PrintField("job", e.job.value);
  PrintField("tenant", OrDash(e.tenant.value));
  PrintField("queue", e.queue);
  PrintField("trigger", std::string(ToString(e.trigger)));
  PrintField("requester", OrDash(e.requester));
  PrintField("attempt", std::to_string(e.attempt) + " of " + std::to_string(e.retry.max_attempts));
  PrintField("idempotency key", OrDash(e.idempotency_key));
  PrintField("lane", OrDash(e.lane_key));
  PrintField("parent", e.parent.value == 0 ? "-" : std::to_string(e.parent.value));
  PrintField("scheduled at", e.scheduled_at == 0 ? "-" : FormatIso8601(e.scheduled_at));
  PrintField("run at", e.run_at == 0 ? "-" : FormatIso8601(e.run_at));
  PrintField("queued at", e.queued_at == 0 ? "-" : FormatIso8601(e.queued_at));
  PrintField("started at", e.started_at == 0 ? "-" : FormatIso8601(e.started_at));
  PrintField("finished at", e.finished_at == 0 ? "-" : FormatIso8601(e.finished_at));
  PrintField("duration", DurationText(e));
  PrintField("progress", std::to_string(e.progress) + "%");
  PrintField("worker", OrDash(e.worker.value));
  PrintField("claim version", std::to_string(e.claim_version.value));
  PrintField("lease expires at", e.lease_expires_at == 0 ? "-" : FormatIso8601(e.lease_expires_at));
  PrintField("failure class",
             e.failure_class == FailureClass::kNone ? "-" : std::string(ToString(e.failure_class)));
  PrintField("error", OrDash(e.error));
  PrintField("lease expiries", std::to_string(e.consecutive_lease_expiries) + " in a row");
  PrintField("fingerprint", OrDash(e.fingerprint));
  std::printf("payload\n  %s\n", e.payload_json.c_str());
  std::printf("result\n  %s\n", e.result_json.empty() ? "-" : e.result_json.c_str());
  std::printf("logs (%zu)\n", d.logs.size());
  for (const LogEntry& l : d.logs) {
    std::printf("  %s  %-5s  #%d  %s\n", FormatIso8601(l.at).c_str(),
                std::string(ToString(l.level)).c_str(), l.attempt, l.message.c_str());
  }
  std::fflush(stdout);
}

int RunShow(const GlobalFlags& flags, const ShowFlags& f) {
  if (f.id <= 0) return Fail(InvalidArgument("the execution id must be a positive integer"));
  auto config = ResolveConfig(flags);
  if (!config.ok()) return Fail(config.status());
  ConfigureLogging(config->log_format, /*verbose=*/false);
  auto engine = OpenEngine(*config, EngineMode::kClient);
  if (!engine.ok()) return Fail(engine.status());
  auto detail = ShowExecution(**engine, ExecutionId(f.id), f.logs);
  if (!detail.ok()) return Fail(detail.status());
  if (flags.json) {
    PrintJson(ExecutionDetailToJson(*detail));
  } else {
    PrintDetail(*detail);
  }
  return kExitOk;
}

}  // namespace

void AddExecutionVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs) {
  auto lf = std::make_shared<ListFlags>();
  CLI::App* list = AddVerb(app, "execution:list",
                           "List executions, newest first; prints the cursor of the next page.");
  list->add_option("--job", lf->job, "Only this job");
  list->add_option("--tenant", lf->tenant, "Only this tenant");
  list->add_option("--status", lf->status,
                   "Only this status: queued, running, succeeded, failed, quarantined, canceled, "
                   "partially_canceled");
  list->add_option("--limit", lf->limit, "Rows per page (1..1000)")
      ->check(CLI::Range(1, 1000))
      ->default_str("50");
  list->add_option("--before", lf->before, "Cursor: only executions with a smaller id");
  verbs->push_back({list, [&flags, lf] { return RunList(flags, *lf); }});

  auto sf = std::make_shared<ShowFlags>();
  CLI::App* show = AddVerb(app, "execution:show",
                           "Every field of one execution (times in UTC) and its log lines.");
  show->add_option("id", sf->id, "Execution id")->required();
  show->add_option("--logs", sf->logs, "Most log lines to show (oldest first)")
      ->check(CLI::Range(0, 100000))
      ->default_str("200");
  verbs->push_back({show, [&flags, sf] { return RunShow(flags, *sf); }});
}

}  // namespace taskengine::cli
