#include "server/scheduling.h"

#include <date/tz.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>

#include "core/cron.h"
#include "core/int_math.h"
#include "core/schedule.h"
#include "core/time_text.h"
#include "server/time_format.h"
#include "views/views.h"

namespace taskengine {
namespace {

constexpr std::size_t kMaxNodeIdBytes = 200;
constexpr std::size_t kMaxTenantNameBytes = 200;

nlohmann::ordered_json TenantJsonForAudit(const Tenant& t) {
  return {{"id", t.id.value}, {"name", t.name}, {"active", t.active}};
}

Status Audit(Store& store, const std::string& actor, const std::string& action,
             const Tenant* before, const Tenant& after, const std::string& what) {
  AuditRecord record;
  record.actor = actor;
  record.tenant = after.id.value;
  record.action = action;
  record.target = "tenant:" + after.id.value;
  if (before != nullptr) record.before_json = TenantJsonForAudit(*before).dump();
  record.after_json = TenantJsonForAudit(after).dump();
  Status audited = store.AppendAudit(record);
  if (!audited.ok()) {
    return Status(audited.code(),
                  "the tenant was " + what +
                      " but its audit record could not be written: " + audited.message());
  }
  return Status::Ok();
}

}  // namespace

// --- scheduler:run ---

std::string DefaultSchedulerNode() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "localhost";
  return host;
}

Result<CycleReport> RunSchedulerCycle(Store& store, Clock& clock, const std::string& node_id) {
  if (node_id.empty() || node_id.size() > kMaxNodeIdBytes) {
    return InvalidArgument("the scheduler node id must be 1..200 bytes");
  }
  SchedulerOptions options;
  options.node_id = node_id;
  Scheduler scheduler(&store, &clock, options);
  return scheduler.RunCycle();
}

nlohmann::ordered_json CycleReportToJson(const CycleReport& r, const std::string& node_id) {
  nlohmann::ordered_json errors = nlohmann::ordered_json::array();
  for (const ScheduleError& e : r.errors) {
    errors.push_back({{"job", e.job.value}, {"message", e.message}});
  }
  return {
      {"leader", r.leader},
      {"node", node_id},
      {"now", TimeOrNull(r.now)},
      {"jobs_evaluated", r.jobs_evaluated},
      {"fires", r.fires},
      {"admitted_fires", r.admitted_fires},
      {"coalesced", r.coalesced},
      {"skipped", r.skipped},
      {"skipped_count_capped", r.skipped_count_capped},
      {"admissions", r.admissions},
      {"executions_created", r.executions_created},
      {"duplicates", r.duplicates},
      {"conflicts", r.conflicts},
      {"errors", std::move(errors)},
      {"load_us", r.load_time.count()},
      {"evaluation_us", r.evaluation_time.count()},
      {"commit_us", r.commit_time.count()},
  };
}

// --- schedule:preview ---

// --- tenants ---

Result<TenantChange> AddTenant(Store& store, const std::string& id,
                               const std::optional<std::string>& name, const std::string& actor) {
  if (!IsValidTenantId(id)) {
    return InvalidArgument("invalid tenant id '" + id + "': must match [a-z0-9][a-z0-9_-]{0,49}");
  }
  if (name && name->size() > kMaxTenantNameBytes) {
    return InvalidArgument("tenant name longer than 200 bytes");
  }
  Result<Tenant> existing = store.GetTenant(TenantId(id));
  if (!existing.ok() && existing.status().code() != ErrorCode::kNotFound) return existing.status();
  TenantChange change;
  if (existing.ok()) {
    change.tenant = *existing;
    if (!name || *name == existing->name) return change;  // nothing to do
    change.tenant.name = *name;
  } else {
    change.tenant.id = TenantId(id);
    change.tenant.name = name.value_or("");
    change.tenant.active = true;
    change.created = true;
  }
  TE_RETURN_IF_ERROR(store.UpsertTenant(change.tenant));
  change.changed = true;
  TE_ASSIGN_OR_RETURN(change.tenant, store.GetTenant(TenantId(id)));
  TE_RETURN_IF_ERROR(Audit(store, actor, change.created ? "tenant.add" : "tenant.update",
                           existing.ok() ? &*existing : nullptr, change.tenant,
                           change.created ? "added" : "updated"));
  return change;
}

Result<TenantChange> SetTenantActive(Store& store, const std::string& id, bool active,
                                     const std::string& actor) {
  if (!IsValidTenantId(id)) {
    return InvalidArgument("invalid tenant id '" + id + "': must match [a-z0-9][a-z0-9_-]{0,49}");
  }
  Result<Tenant> existing = store.GetTenant(TenantId(id));
  if (!existing.ok()) {
    if (existing.status().code() == ErrorCode::kNotFound) {
      return NotFound("no tenant '" + id + "' (see `taskengine tenant:list`)");
    }
    return existing.status();
  }
  TenantChange change;
  change.tenant = *existing;
  if (existing->active == active) return change;
  change.tenant.active = active;
  TE_RETURN_IF_ERROR(store.UpsertTenant(change.tenant));
  change.changed = true;
  TE_RETURN_IF_ERROR(Audit(store, actor, active ? "tenant.enable" : "tenant.disable", &*existing,
                           change.tenant, active ? "enabled" : "disabled"));
  return change;
}

}  // namespace taskengine
