// scheduler:run, schedule:preview, tenant:add, tenant:list, tenant:enable,
// tenant:disable.
#include <iostream>
#include <memory>
#include <optional>

#include "cli.h"
#include "core/time_text.h"
#include "engine/engine_internal.h"
#include "server/logging.h"
#include "server/operations.h"
#include "server/scheduling.h"
#include "server/server.h"
#include "server/time_format.h"
#include "storage/store.h"

namespace taskengine::cli {
namespace {

// scheduler:run: another node holds the scheduler's leader lock; nothing was
// done. Not an error for system cron on several nodes.
constexpr int kExitNotLeader = 6;

// The engine over an existing database, as every client verb opens it.
Result<std::unique_ptr<Engine>> Open(const GlobalFlags& flags) {
  TE_ASSIGN_OR_RETURN(ServerConfig config, ResolveConfig(flags));
  ConfigureLogging(config.log_format, /*verbose=*/false);
  return OpenEngine(config, EngineMode::kClient);
}

int RunScheduler(const GlobalFlags& flags, const std::string& node) {
  auto engine = Open(flags);
  if (!engine.ok()) return Fail(engine.status());
  const std::string node_id = node.empty() ? DefaultSchedulerNode() : node;
  auto report = RunSchedulerCycle(StoreOf(**engine), *(*engine)->clock(), node_id);
  if (!report.ok()) return Fail(report.status());
  const CycleReport& r = *report;
  if (flags.json) {
    PrintJson(CycleReportToJson(r, node_id));
  } else if (r.leader) {
    std::cout << "scheduler cycle as " << node_id << " at " << ShortTime(r.now) << ": "
              << r.jobs_evaluated << " scheduled jobs, " << r.fires << " fires, "
              << r.executions_created << " executions created, " << r.duplicates << " duplicates, "
              << r.skipped << " skipped, " << r.coalesced << " coalesced" << std::endl;
  }
  for (const ScheduleError& e : r.errors) {
    std::cerr << "taskengine: warning: not scheduled: " << e.message << std::endl;
  }
  if (!r.leader) {
    std::cerr << "taskengine: not the leader: another node holds the scheduler lock; nothing "
                 "was done (node "
              << node_id << ")" << std::endl;
    return kExitNotLeader;
  }
  return kExitOk;
}

struct PreviewFlags {
  std::string expression;
  std::string zone = "UTC";
  std::string from;
  int count = 10;
};

int RunPreview(const GlobalFlags& flags, const PreviewFlags& f) {
  Millis from = SystemClock::Get()->NowMillis();
  if (!f.from.empty()) {
    auto parsed = ParseTime(f.from);
    if (!parsed.ok()) return Fail(InvalidArgument("--from: " + parsed.status().message()));
    from = *parsed;
  }
  auto preview = PreviewSchedule(f.expression, f.zone, from, f.count);
  if (!preview.ok()) return Fail(preview.status());
  if (flags.json) {
    PrintJson(SchedulePreviewToJson(*preview));
    return kExitOk;
  }
  std::cout << "\"" << preview->expression << "\" (" << preview->normalized << ") in "
            << preview->zone << ", after " << ShortTime(preview->from) << ":" << std::endl;
  if (preview->fires.empty()) {
    std::cout << (preview->can_ever_fire ? "no fire time before 9999-12-31"
                                         : "never fires: no date matches the day fields")
              << std::endl;
    return kExitOk;
  }
  Table table({"#", "UTC", "LOCAL", "OFFSET", "NOTE"});
  int n = 0;
  for (const PreviewFire& fire : preview->fires) {
    table.Add({std::to_string(++n), ShortTime(fire.utc), fire.local + " " + fire.abbrev,
               fire.offset, fire.shifted ? "shifted: that wall-clock time did not exist" : "-"});
  }
  table.Print(std::cout);
  return kExitOk;
}

void PrintTenant(const GlobalFlags& flags, const TenantChange& change, const std::string& what) {
  if (flags.json) {
    nlohmann::ordered_json doc = TenantToJson(change.tenant);
    doc["created"] = change.created;
    doc["changed"] = change.changed;
    PrintJson(doc);
    return;
  }
  std::cout << "tenant " << change.tenant.id.value << " " << (change.changed ? what : "unchanged")
            << " (" << (change.tenant.active ? "active" : "inactive") << ")" << std::endl;
}

struct TenantFlags {
  std::string id;
  std::string name;
  CLI::Option* name_option = nullptr;
};

int RunTenantAdd(const GlobalFlags& flags, const TenantFlags& f) {
  auto engine = Open(flags);
  if (!engine.ok()) return Fail(engine.status());
  std::optional<std::string> name;
  if (f.name_option->count() > 0) name = f.name;
  auto change = AddTenant(StoreOf(**engine), f.id, name, CliRequester());
  if (!change.ok()) return Fail(change.status());
  PrintTenant(flags, *change, change->created ? "added" : "renamed");
  return kExitOk;
}

int RunTenantSetActive(const GlobalFlags& flags, const std::string& id, bool active) {
  auto engine = Open(flags);
  if (!engine.ok()) return Fail(engine.status());
  auto change = SetTenantActive(StoreOf(**engine), id, active, CliRequester());
  if (!change.ok()) return Fail(change.status());
  PrintTenant(flags, *change, active ? "enabled" : "disabled");
  return kExitOk;
}

int RunTenantList(const GlobalFlags& flags) {
  auto engine = Open(flags);
  if (!engine.ok()) return Fail(engine.status());
  auto tenants = StoreOf(**engine).ListTenants(/*active_only=*/false);
  if (!tenants.ok()) return Fail(tenants.status());
  if (flags.json) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const Tenant& t : *tenants) list.push_back(TenantToJson(t));
    PrintJson({{"items", std::move(list)}});
    return kExitOk;
  }
  if (tenants->empty()) {
    std::cout << "no tenants (add one with `taskengine tenant:add <id>`)" << std::endl;
    return kExitOk;
  }
  Table table({"ID", "NAME", "ACTIVE", "CREATED"});
  for (const Tenant& t : *tenants) {
    table.Add({t.id.value, OrDash(t.name), t.active ? "yes" : "no", ShortTime(t.created_at)});
  }
  table.Print(std::cout);
  return kExitOk;
}

}  // namespace

void AddSchedulerVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs) {
  auto node = std::make_shared<std::string>();
  CLI::App* run = AddVerb(
      app, "scheduler:run",
      "Run one scheduler cycle and exit (for system cron): admit the executions of every "
      "enabled scheduled job whose fire time has come, with bounded catch-up. Only the holder "
      "of the leader lock acts; the lock lasts 3 minutes and the next run renews it. Exits 0 "
      "when it acted as the leader, 6 when another node holds the lock (nothing done).");
  run->add_option("--node", *node, "This node's name for the leader lock. Default: the host name");
  verbs->push_back({run, [&flags, node] { return RunScheduler(flags, *node); }});

  auto p = std::make_shared<PreviewFlags>();
  CLI::App* preview =
      AddVerb(app, "schedule:preview",
              "Print the next fire times of a cron expression (UTC and local time). Needs no "
              "database.");
  preview
      ->add_option("expression", p->expression,
                   "Cron expression: five fields or a macro, e.g. \"30 2 * * *\", @daily")
      ->required();
  preview->add_option("--tz", p->zone, "IANA time zone, e.g. Europe/Berlin")->default_str("UTC");
  preview->add_option("--from", p->from,
                      "Start after this RFC 3339 time, e.g. 2026-03-08T00:00:00Z. Default: now");
  preview->add_option("--count", p->count, "How many fire times (1..1000)")->default_str("10");
  verbs->push_back({preview, [&flags, p] { return RunPreview(flags, *p); }});

  auto add = std::make_shared<TenantFlags>();
  CLI::App* tenant_add = AddVerb(
      app, "tenant:add",
      "Add a tenant (active), or rename an existing one (its active flag is kept). Audited.");
  tenant_add->add_option("id", add->id, "Tenant id: [a-z0-9][a-z0-9_-]{0,49}")->required();
  add->name_option = tenant_add->add_option("--name", add->name, "Display name");
  verbs->push_back({tenant_add, [&flags, add] { return RunTenantAdd(flags, *add); }});

  CLI::App* tenant_list = AddVerb(app, "tenant:list",
                                  "List every tenant, active or not. Per-tenant jobs fan out to "
                                  "the active ones.");
  verbs->push_back({tenant_list, [&flags] { return RunTenantList(flags); }});

  for (const bool active : {false, true}) {
    auto id = std::make_shared<std::string>();
    CLI::App* verb = AddVerb(
        app, active ? "tenant:enable" : "tenant:disable",
        active ? "Make a tenant active again: per-tenant jobs fan out to it from the next cycle. "
                 "Audited."
               : "Make a tenant inactive: per-tenant jobs stop fanning out to it (executions "
                 "already admitted are not touched). Audited.");
    verb->add_option("id", *id, "Tenant id")->required();
    verbs->push_back(
        {verb, [&flags, id, active] { return RunTenantSetActive(flags, *id, active); }});
  }
}

}  // namespace taskengine::cli
