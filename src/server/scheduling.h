// Operator actions about scheduling and tenants behind the CLI verbs
// `scheduler:run`, `schedule:preview`, `tenant:add|list|enable|disable` and
// the schedule columns of `job:list`, with their --json views. The scheduler
// itself is src/engine/scheduler.h.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/scheduler.h"
#include "storage/store.h"
#include "taskengine/clock.h"
#include "taskengine/status.h"
#include "taskengine/types.h"
#include "views/schedule_preview.h"

namespace taskengine {

// --- scheduler:run ---

// The node id `scheduler:run` uses unless told otherwise: the host name
// ("localhost" when it cannot be read). Stable across runs, so that the same
// host keeps the leader lock from one run to the next.
std::string DefaultSchedulerNode();

// One scheduler cycle (see Scheduler::RunCycle) as node `node_id`. The
// leader lock is kept afterwards (for 3 minutes): the next run on the same
// node renews it, another node takes over once it expires. kInvalidArgument
// for an empty or overlong (> 200 bytes) node id.
Result<CycleReport> RunSchedulerCycle(Store& store, Clock& clock, const std::string& node_id);

// {"leader", "node", "now", "jobs_evaluated", "fires", "admitted_fires",
//  "coalesced", "skipped", "skipped_count_capped", "admissions",
//  "executions_created", "duplicates", "conflicts",
//  "errors": [{"job", "message"}], "load_us", "evaluation_us", "commit_us"}
nlohmann::ordered_json CycleReportToJson(const CycleReport& r, const std::string& node_id);

// --- schedule:preview: views/schedule_preview.h ---

// --- tenants ---

struct TenantChange {
  Tenant tenant;         // after the change
  bool created = false;  // tenant:add made a new tenant
  bool changed = false;  // anything was written (false: it already was so)
};

// tenant:add: creates the tenant, active, or, when it exists, sets its name
// (when `name` is given); never changes whether an existing tenant is
// active. Writes an audit record (action "tenant.add" or "tenant.update",
// target "tenant:<id>") when something changed. kInvalidArgument for a bad id
// or name. The store has no audited tenant transaction, so the two writes are
// separate: if the audit append fails the change stays and the error says so.
Result<TenantChange> AddTenant(Store& store, const std::string& id,
                               const std::optional<std::string>& name, const std::string& actor);

// tenant:enable / tenant:disable (audit "tenant.enable" / "tenant.disable"
// when it changed anything). kNotFound naming the id for a missing tenant.
Result<TenantChange> SetTenantActive(Store& store, const std::string& id, bool active,
                                     const std::string& actor);

}  // namespace taskengine
