// execution:list, execution:show, execution:cancel, execution:replay,
// execution:approve.
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli.h"
#include "core/time_text.h"
#include "engine/engine_internal.h"
#include "server/logging.h"
#include "server/operations.h"
#include "server/server.h"
#include "server/time_format.h"
#include "storage/store.h"
#include "views/execution_search.h"
#include "views/views.h"

namespace taskengine::cli {
namespace {

constexpr std::size_t kErrorColumnBytes = 60;

std::string AttemptText(const Execution& e) {
  return std::to_string(e.attempt) + "/" + std::to_string(e.retry.max_attempts);
}

std::string DurationText(const Execution& e) {
  if (e.started_at == 0 || e.finished_at == 0) return "-";
  return FormatDuration(e.DurationMillis());
}

// The search flags: each is the API's parameter of the same name
// (views/execution_search.h), spelled --queued-from for queued_from.
struct ListFlags {
  SearchParams params;
  int limit = 50;
  std::int64_t before = 0;
};

int RunList(const GlobalFlags& flags, const ListFlags& f) {
  if (f.before < 0) return Fail(InvalidArgument("--before must be a positive execution id"));
  if (f.before > 0 && f.params.count("offset") > 0) {
    return Fail(InvalidArgument("--offset: give either --before or --offset"));
  }
  auto parsed = ParseExecutionSearch(f.params, "--");
  if (!parsed.ok()) return Fail(parsed.status());
  ExecutionFilter filter = std::move(parsed).value();
  filter.limit = f.limit;
  filter.before = ExecutionId(f.before);

  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  auto page = StoreOf(**engine).ListExecutions(filter);
  if (!page.ok()) return Fail(page.status());

  if (flags.json) {
    PrintJson(SearchPageToJson(*page, filter));
    return kExitOk;
  }
  if (filter.with_total) {
    std::cout << "total: " << (page->total_is_lower_bound ? "at least " : "") << page->total
              << std::endl;
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
  int logs = kDetailLogLimit;  // as the API's detail
};

std::string TimeOrDash(Millis ms) { return ms == 0 ? "-" : FormatTime(ms); }

// Prints `table` with every line indented by two spaces.
void PrintIndented(const Table& table) {
  std::ostringstream out;
  table.Print(out);
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) Printf("  %s\n", line.c_str());
}

void PrintField(const char* name, const std::string& value) {
  Printf("  %-18s %s\n", name, value.c_str());
}

void PrintDetail(const ExecutionDetail& d) {
  const Execution& e = d.execution;
  Printf("execution %lld\n", static_cast<long long>(e.id.value));
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
  PrintField("scheduled at", e.scheduled_at == 0 ? "-" : FormatTime(e.scheduled_at));
  PrintField("run at", e.run_at == 0 ? "-" : FormatTime(e.run_at));
  PrintField("queued at", e.queued_at == 0 ? "-" : FormatTime(e.queued_at));
  PrintField("started at", e.started_at == 0 ? "-" : FormatTime(e.started_at));
  PrintField("finished at", e.finished_at == 0 ? "-" : FormatTime(e.finished_at));
  PrintField("duration", DurationText(e));
  PrintField("progress", std::to_string(e.progress) + "%");
  PrintField("worker", OrDash(e.worker.value));
  PrintField("claim version", std::to_string(e.claim_version.value));
  PrintField("lease expires at", e.lease_expires_at == 0 ? "-" : FormatTime(e.lease_expires_at));
  PrintField("failure class",
             e.failure_class == FailureClass::kNone ? "-" : std::string(ToString(e.failure_class)));
  PrintField("error", OrDash(e.error));
  PrintField("lease expiries", std::to_string(e.consecutive_lease_expiries) + " in a row");
  PrintField("cancel requested", e.cancel_requested ? "yes" : "no");
  PrintField("fingerprint", OrDash(e.fingerprint));
  Printf("payload\n  %s\n", e.payload_json.c_str());
  Printf("result\n  %s\n", e.result_json.empty() ? "-" : e.result_json.c_str());

  Printf("effects (%zu)\n", d.effects.size());
  if (!d.effects.empty()) {
    Table table({"KEY", "STATE", "RESERVED AT", "COMMITTED AT", "ATTEMPT", "DETAIL"});
    for (const EffectRecord& f : d.effects) {
      table.Add({f.key, f.committed ? "committed" : "reserved", TimeOrDash(f.reserved_at),
                 TimeOrDash(f.committed_at), std::to_string(f.attempt),
                 OrDash(Cut(f.detail, kErrorColumnBytes))});
    }
    PrintIndented(table);
  }
  const std::vector<EffectRecord> escaped = d.EscapedEffects();
  if (!escaped.empty()) {
    Printf(
        "escaped effects (%zu): they may have happened although the execution was canceled; "
        "cancellation does not undo them\n",
        escaped.size());
    for (const EffectRecord& f : escaped) {
      if (f.committed) {
        Printf("  %s  committed at %s  %s\n", f.key.c_str(), TimeOrDash(f.committed_at).c_str(),
               OrDash(Cut(f.detail, kErrorColumnBytes)).c_str());
      } else {
        Printf("  %s  reserved at %s, never confirmed: outcome unknown\n", f.key.c_str(),
               TimeOrDash(f.reserved_at).c_str());
      }
    }
  }

  Printf("earlier attempts (%zu)\n", d.attempts.size());
  if (!d.attempts.empty()) {
    Table table(
        {"ATTEMPT", "CLAIM", "OUTCOME", "CLASS", "WORKER", "STARTED AT", "ENDED AT", "ERROR"});
    for (const AttemptRecord& a : d.attempts) {
      table.Add(
          {std::to_string(a.attempt) + (a.released ? " (released)" : ""),
           std::to_string(a.claim_version.value), std::string(ToString(a.outcome)),
           a.failure_class == FailureClass::kNone ? "-" : std::string(ToString(a.failure_class)),
           OrDash(a.worker), TimeOrDash(a.started_at), TimeOrDash(a.ended_at),
           OrDash(Cut(a.error, kErrorColumnBytes))});
    }
    PrintIndented(table);
  }

  Printf("audit (%zu)\n", d.audit.size());
  if (!d.audit.empty()) {
    Table table({"AT", "ACTOR", "ACTION", "REASON"});
    for (const AuditRecord& r : d.audit) {
      table.Add({TimeOrDash(r.at), r.actor, r.action, OrDash(Cut(r.reason, kErrorColumnBytes))});
    }
    PrintIndented(table);
  }

  Printf("logs (%zu)\n", d.logs.size());
  for (const LogEntry& l : d.logs) {
    Printf("  %s  %-5s  #%d  %s\n", FormatTime(l.at).c_str(),
           std::string(ToString(l.level)).c_str(), l.attempt, l.message.c_str());
  }
  std::fflush(stdout);
}

int RunShow(const GlobalFlags& flags, const ShowFlags& f) {
  if (f.id <= 0) return Fail(InvalidArgument("the execution id must be a positive integer"));
  auto engine = OpenClient(flags);
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

int RunResult(const GlobalFlags& flags, const ShowFlags& f) {
  if (f.id <= 0) return Fail(InvalidArgument("the execution id must be a positive integer"));
  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  auto e = (*engine)->GetExecution(ExecutionId(f.id));
  if (!e.ok()) {
    if (e.status().code() == ErrorCode::kNotFound) {
      return Fail(NotFound("no execution " + std::to_string(f.id)));
    }
    return Fail(e.status());
  }
  if (e->status != ExecutionStatus::kSucceeded) {
    return Fail(Conflict("execution " + std::to_string(f.id) + " is " +
                         std::string(ToString(e->status)) +
                         "; its result is available only after it succeeded"));
  }
  if (flags.json) {
    PrintJson({{"id", e->id.value}, {"result", EmbeddedJson(e->result_json)}});
  } else {
    std::printf("%s\n", e->result_json.empty() ? "null" : e->result_json.c_str());
  }
  return kExitOk;
}

std::string_view OutcomeName(ReplayOutcome o) {
  return o == ReplayOutcome::kReplayed ? "replayed" : "pending_approval";
}

Status CheckId(std::int64_t id) {
  if (id <= 0) return InvalidArgument("the execution id must be a positive integer");
  return Status::Ok();
}

struct CancelFlags {
  std::int64_t id = 0;
  std::string reason;
};

int RunCancel(const GlobalFlags& flags, const CancelFlags& f) {
  if (Status s = CheckId(f.id); !s.ok()) return Fail(s);
  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  const std::string actor = CliRequester();
  auto status = (*engine)->Cancel(ExecutionId(f.id), actor, f.reason);
  if (!status.ok()) return Fail(status.status());
  const bool requested = *status == ExecutionStatus::kRunning;
  if (flags.json) {
    PrintJson({{"id", f.id},
               {"status", std::string(ToString(*status))},
               {"cancel_requested", true},
               {"actor", actor}});
  } else if (requested) {
    std::cout << "execution " << f.id
              << ": cancel requested (running); its worker stops at the next heartbeat, "
                 "checkpoint or effect reservation and it ends canceled or partially_canceled"
              << std::endl;
  } else {
    std::cout << "execution " << f.id << ": " << ToString(*status) << std::endl;
  }
  return kExitOk;
}

struct ReplayFlags {
  std::int64_t id = 0;
  std::string reason;
  std::string as;
  bool assume_done = false;
  bool assume_not_done = false;
};

void PrintReplay(const GlobalFlags& flags, std::int64_t id, const std::string& actor,
                 const ReplayResult& r, bool approval) {
  if (flags.json) {
    PrintJson({{"id", id},
               {"outcome", std::string(OutcomeName(r.outcome))},
               {"status", std::string(ToString(r.status))},
               {"actor", actor}});
    return;
  }
  if (r.outcome == ReplayOutcome::kPendingApproval) {
    std::cout << "replay of execution " << id << " recorded by " << actor
              << ", pending approval: a different operator runs `taskengine execution:approve "
              << id << "`" << std::endl;
    return;
  }
  std::cout << "execution " << id << " replayed" << (approval ? " (approved by " + actor + ")" : "")
            << ": " << ToString(r.status) << std::endl;
}

int RunReplay(const GlobalFlags& flags, const ReplayFlags& f) {
  if (Status s = CheckId(f.id); !s.ok()) return Fail(s);
  auto actor = CliActor(f.as);
  if (!actor.ok()) return Fail(actor.status());
  if (f.reason.empty()) return Fail(InvalidArgument("--reason must not be empty"));
  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  ReplayOptions options;
  options.actor = *actor;
  options.reason = f.reason;
  if (f.assume_done) options.ambiguous = AmbiguousResolution::kAssumeDone;
  if (f.assume_not_done) options.ambiguous = AmbiguousResolution::kAssumeNotDone;
  auto result = (*engine)->Replay(ExecutionId(f.id), options);
  if (!result.ok()) return Fail(result.status());
  PrintReplay(flags, f.id, *actor, *result, /*approval=*/false);
  return kExitOk;
}

struct ApproveFlags {
  std::int64_t id = 0;
  std::string as;
};

int RunApprove(const GlobalFlags& flags, const ApproveFlags& f) {
  if (Status s = CheckId(f.id); !s.ok()) return Fail(s);
  auto actor = CliActor(f.as);
  if (!actor.ok()) return Fail(actor.status());
  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  auto result = (*engine)->ApproveReplay(ExecutionId(f.id), *actor);
  if (!result.ok()) return Fail(result.status());
  PrintReplay(flags, f.id, *actor, *result, /*approval=*/true);
  return kExitOk;
}

constexpr const char* kAsHelp =
    "Act as operator cli:NAME instead of cli:<unix user> (for scripts and tests that play "
    "several operators; the audit log records the name given)";

}  // namespace

void AddExecutionVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs) {
  auto lf = std::make_shared<ListFlags>();
  CLI::App* list = AddVerb(app, "execution:list",
                           "List executions, newest first; prints the cursor of the next page.");
  // A search flag: stored under the API's parameter name when given.
  auto search = [&](const char* flag, const char* name, const char* help) {
    list->add_option_function<std::string>(
        flag, [lf, name](const std::string& v) { lf->params[name] = v; }, help);
  };
  search("--job", "job", "Only this job");
  search("--tenant", "tenant", "Only this tenant");
  search("--status", "status",
         "Only these statuses, comma-separated: queued, running, succeeded, failed, quarantined, "
         "canceled, partially_canceled");
  search("--trigger", "trigger",
         "Only these triggers, comma-separated: scheduled, manual, api, retry, replay");
  search("--queued-from", "queued_from", "Only executions queued at or after this RFC 3339 time");
  search("--queued-to", "queued_to", "Only executions queued before this RFC 3339 time");
  search("--ended-from", "ended_from", "Only executions that ended at or after this RFC 3339 time");
  search("--ended-to", "ended_to", "Only executions that ended before this RFC 3339 time");
  search("--offset", "offset",
         "Skip this many matches (0..10000; page-number paging) and print the total");
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
      ->default_str("1000");
  verbs->push_back({show, [&flags, sf] { return RunShow(flags, *sf); }});

  auto resf = std::make_shared<ShowFlags>();
  CLI::App* result = AddVerb(
      app, "execution:result",
      "The result of a succeeded execution, as GET /api/v1/executions/{id}/result answers: "
      "{\"id\", \"result\"} with --json, the result's JSON text otherwise. Exit 4 before it "
      "succeeded.");
  result->add_option("id", resf->id, "Execution id")->required();
  verbs->push_back({result, [&flags, resf] { return RunResult(flags, *resf); }});

  auto cf = std::make_shared<CancelFlags>();
  CLI::App* cancel = AddVerb(
      app, "execution:cancel",
      "Cancel an execution (C1), audited as cli:<unix user>. A queued, failed or quarantined "
      "one ends canceled at once (partially_canceled when an effect committed or may have "
      "escaped); a running "
      "one gets cancel-requested and ends when its worker stops. Prints the status after. "
      "Exit 4 when its status does not allow it (e.g. succeeded).");
  cancel->add_option("id", cf->id, "Execution id")->required();
  cancel->add_option("--reason", cf->reason, "Why (written to the audit log)");
  verbs->push_back({cancel, [&flags, cf] { return RunCancel(flags, *cf); }});

  auto rf = std::make_shared<ReplayFlags>();
  CLI::App* replay = AddVerb(
      app, "execution:replay",
      "Queue a failed or quarantined execution again under the same id (R1): committed effects "
      "answer already_done and are not repeated. Rechecks the original requester's access and "
      "writes an audit record. With [engine] replay_requires_approval = true the replay stays "
      "pending until a different operator runs execution:approve. Exit 4 for other statuses or "
      "when a replay is already pending.");
  replay->add_option("id", rf->id, "Execution id")->required();
  replay->add_option("--reason", rf->reason, "Why (required; written to the audit log)")
      ->required();
  CLI::Option* done = replay->add_flag(
      "--assume-done", rf->assume_done,
      "Effects an earlier attempt reserved but never confirmed (ambiguous) happened: record "
      "them as committed (detail \"assumed done\")");
  CLI::Option* not_done = replay->add_flag(
      "--assume-not-done", rf->assume_not_done,
      "Effects an earlier attempt reserved but never confirmed did not happen: drop the "
      "reservations so the replay performs them");
  done->excludes(not_done);
  replay->add_option("--as", rf->as, kAsHelp);
  verbs->push_back({replay, [&flags, rf] { return RunReplay(flags, *rf); }});

  auto af = std::make_shared<ApproveFlags>();
  CLI::App* approve =
      AddVerb(app, "execution:approve",
              "Four-eyes: approve the pending replay of an execution, which is then queued. The "
              "approver must differ from the operator who asked for the replay (exit 4 otherwise); "
              "exit 2 when no replay is pending.");
  approve->add_option("id", af->id, "Execution id")->required();
  approve->add_option("--as", af->as, kAsHelp);
  verbs->push_back({approve, [&flags, af] { return RunApprove(flags, *af); }});
}

}  // namespace taskengine::cli
