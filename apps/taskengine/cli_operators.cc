// quarantine:list, lane:status, audit:list, grant:add, grant:revoke.
#include <iostream>
#include <memory>

#include "api/accounts.h"
#include "cli.h"
#include "engine/engine_internal.h"
#include "server/operations.h"
#include "server/time_format.h"
#include "storage/store.h"
#include "views/views.h"

namespace taskengine::cli {
namespace {

constexpr std::size_t kTextColumnBytes = 60;

// --- quarantine:list ---

struct QuarantineFlags {
  std::string job;
  int limit = 50;
  std::int64_t before = 0;
};

int RunQuarantineList(const GlobalFlags& flags, const QuarantineFlags& f) {
  if (f.before < 0) return Fail(InvalidArgument("--before must be a positive execution id"));
  ExecutionFilter filter;
  filter.status = ExecutionStatus::kQuarantined;
  if (!f.job.empty()) filter.job = JobName(f.job);
  filter.limit = f.limit;
  filter.before = ExecutionId(f.before);
  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  auto page = StoreOf(**engine).ListExecutions(filter);
  if (!page.ok()) return Fail(page.status());
  if (flags.json) {
    nlohmann::ordered_json items = nlohmann::ordered_json::array();
    for (const Execution& e : page->items)
      items.push_back(ExecutionToJson(e, /*with_payload=*/false));
    PrintJson(PageToJson(std::move(items), page->next_before.value));
    return kExitOk;
  }
  if (page->items.empty()) {
    std::cout << "no quarantined executions" << std::endl;
    return kExitOk;
  }
  Table table({"ID", "JOB", "TENANT", "ATTEMPT", "FAILURE CLASS", "FINISHED AT", "ERROR"});
  for (const Execution& e : page->items) {
    table.Add(
        {std::to_string(e.id.value), e.job.value, OrDash(e.tenant.value),
         std::to_string(e.attempt) + "/" + std::to_string(e.retry.max_attempts),
         e.failure_class == FailureClass::kNone ? "-" : std::string(ToString(e.failure_class)),
         ShortTime(e.finished_at), OrDash(Cut(e.error, kTextColumnBytes))});
  }
  table.Print(std::cout);
  if (page->next_before.value != 0) {
    std::cout << "more: --before=" << page->next_before.value << std::endl;
  }
  return kExitOk;
}

// --- lane:status ---

struct LaneFlags {
  std::string lane;
  std::string tenant;  // empty: the lanes of global jobs (one lane) or of every tenant (list)
  CLI::Option* tenant_option = nullptr;
  int limit = 50;
};

int RunLaneStatus(const GlobalFlags& flags, const LaneFlags& f) {
  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  Store& store = StoreOf(**engine);
  std::vector<LaneStatus> lanes;
  if (f.tenant_option->count() > 0 && !IsValidTenantId(f.tenant)) {
    return Fail(InvalidArgument("--tenant: '" + f.tenant +
                                "' is not a tenant id ([a-z0-9][a-z0-9_-]{0,49})"));
  }
  if (!f.lane.empty()) {
    auto lane = store.GetLane(TenantId(f.tenant), f.lane);
    if (!lane.ok()) return Fail(lane.status());
    lanes.push_back(std::move(lane).value());
  } else {
    LaneFilter filter;
    filter.limit = f.limit;
    if (f.tenant_option->count() > 0) filter.tenant = TenantId(f.tenant);
    auto all = store.ListLanes(filter);
    if (!all.ok()) return Fail(all.status());
    lanes = std::move(all).value();
  }
  if (flags.json) {
    nlohmann::ordered_json items = nlohmann::ordered_json::array();
    for (const LaneStatus& l : lanes) items.push_back(LaneToJson(l));
    PrintJson({{"items", std::move(items)}});
    return kExitOk;
  }
  if (lanes.empty()) {
    std::cout << "no lanes with open work" << std::endl;
    return kExitOk;
  }
  Table table({"TENANT", "LANE", "HEAD", "HEAD STATUS", "BLOCKED", "QUEUED", "RUNNING"});
  for (const LaneStatus& l : lanes) {
    const bool has_head = l.head.value != 0;
    table.Add({OrDash(l.tenant.value), l.lane, has_head ? std::to_string(l.head.value) : "-",
               has_head ? std::string(ToString(l.head_status)) : "-",
               l.blocked ? "yes (replay or cancel the head)" : "no", std::to_string(l.queued),
               std::to_string(l.running)});
  }
  table.Print(std::cout);
  return kExitOk;
}

// --- audit:list ---

struct AuditFlags {
  std::string target;
  int limit = 50;
  std::int64_t before = 0;
};

int RunAuditList(const GlobalFlags& flags, const AuditFlags& f) {
  if (f.before < 0) return Fail(InvalidArgument("--before must be a positive audit record id"));
  AuditFilter filter;
  filter.target = f.target;
  filter.limit = f.limit;
  filter.before_id = f.before;
  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  auto records = StoreOf(**engine).ListAudit(filter);
  if (!records.ok()) return Fail(records.status());
  // A full page may have more behind it.
  const std::int64_t next =
      static_cast<int>(records->size()) == f.limit && !records->empty() ? records->back().id : 0;
  if (flags.json) {
    nlohmann::ordered_json items = nlohmann::ordered_json::array();
    for (const AuditRecord& r : *records) items.push_back(AuditToJson(r));
    PrintJson(PageToJson(std::move(items), next));
    return kExitOk;
  }
  if (records->empty()) {
    std::cout << "no audit records" << std::endl;
    return kExitOk;
  }
  Table table({"ID", "AT", "ACTOR", "ACTION", "TARGET", "TENANT", "REASON"});
  for (const AuditRecord& r : *records) {
    table.Add({std::to_string(r.id), ShortTime(r.at), r.actor, r.action, r.target, OrDash(r.tenant),
               OrDash(Cut(r.reason, kTextColumnBytes))});
  }
  table.Print(std::cout);
  if (next != 0) std::cout << "more: --before=" << next << std::endl;
  return kExitOk;
}

// --- grant:add, grant:revoke ---

struct GrantFlags {
  std::string principal;
  std::string tenant;
};

int RunGrant(const GlobalFlags& flags, const GrantFlags& f, bool add) {
  auto engine = OpenClient(flags);
  if (!engine.ok()) return Fail(engine.status());
  auto change = api::ChangeGrant(StoreOf(**engine), add, f.principal, f.tenant,
                                 api::AccountActor{CliRequester(), ""});
  if (!change.ok()) return Fail(change.status());
  if (flags.json) {
    PrintJson({{"principal", change->principal},
               {"tenant", change->tenant},
               {"action", add ? "add" : "revoke"},
               {"effective", change->effective}});
    return kExitOk;
  }
  const std::string scope = change->tenant == "*" ? "every tenant (*)" : "tenant " + change->tenant;
  if (add) {
    std::cout << "granted " << change->principal << " access to " << scope << std::endl;
  } else if (change->effective) {
    std::cout << "revoked " << change->principal << "'s grant for " << scope
              << "; access remains through the grant for every tenant (*)" << std::endl;
  } else {
    std::cout << "revoked " << change->principal << "'s access to " << scope << std::endl;
  }
  return kExitOk;
}

}  // namespace

void AddOperatorVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs) {
  auto qf = std::make_shared<QuarantineFlags>();
  CLI::App* quarantine = AddVerb(
      app, "quarantine:list",
      "Quarantined executions (poison, ambiguous or permanently failing work waiting for an "
      "operator), newest first, with their failure class and error.");
  quarantine->add_option("--job", qf->job, "Only this job");
  quarantine->add_option("--limit", qf->limit, "Rows per page (1..1000)")
      ->check(CLI::Range(1, 1000))
      ->default_str("50");
  quarantine->add_option("--before", qf->before, "Cursor: only executions with a smaller id");
  verbs->push_back({quarantine, [&flags, qf] { return RunQuarantineList(flags, *qf); }});

  auto lf = std::make_shared<LaneFlags>();
  CLI::App* lane = AddVerb(
      app, "lane:status",
      "One lane, or every lane with open work (blocked ones first): its tenant (a lane belongs "
      "to one), its head (the oldest execution not done), the head's status, whether a failed "
      "or quarantined head blocks it, and its queued and running counts.");
  lane->add_option("lane", lf->lane, "Lane key (omit to list lanes)");
  lf->tenant_option = lane->add_option(
      "--tenant", lf->tenant,
      "The lane's tenant (omit for a lane of global jobs); when listing, only its lanes");
  lane->add_option("--limit", lf->limit, "Most lanes to list (1..1000)")
      ->check(CLI::Range(1, 1000))
      ->default_str("50");
  verbs->push_back({lane, [&flags, lf] { return RunLaneStatus(flags, *lf); }});

  auto af = std::make_shared<AuditFlags>();
  CLI::App* audit = AddVerb(app, "audit:list",
                            "The audit log of operator actions (cancel, replay, approval, grant "
                            "changes, definition edits), newest first.");
  audit->add_option("--target", af->target,
                    "Only records about this target, e.g. execution:42 or principal:alice");
  audit->add_option("--limit", af->limit, "Rows per page (1..1000)")
      ->check(CLI::Range(1, 1000))
      ->default_str("50");
  audit->add_option("--before", af->before, "Cursor: only records with a smaller id");
  verbs->push_back({audit, [&flags, af] { return RunAuditList(flags, *af); }});

  for (bool add : {true, false}) {
    auto gf = std::make_shared<GrantFlags>();
    CLI::App* grant =
        add ? AddVerb(app, "grant:add",
                      "Allow a principal to act for a tenant (or * for every tenant and global "
                      "jobs). Replays recheck the original requester's grants (R1). Audited.")
            : AddVerb(app, "grant:revoke",
                      "Take back a principal's grant for a tenant (or *). Idempotent. Audited.");
    grant->add_option("principal", gf->principal, "Principal (user or token name)")->required();
    grant->add_option("tenant", gf->tenant, "Tenant id, or * for every tenant")->required();
    verbs->push_back({grant, [&flags, gf, add] { return RunGrant(flags, *gf, add); }});
  }
}

}  // namespace taskengine::cli
