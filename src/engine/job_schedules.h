// The schedule state of job definitions as operators see it (job:list,
// GET /api/v1/jobs): next fire, last fire, skipped fires. A light header for
// the view layer; computed in scheduler.cc with the scheduler's own rules.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "storage/store.h"
#include "taskengine/status.h"
#include "taskengine/types.h"

namespace taskengine {

// The schedule state of one job definition as operators see it (job:list,
// GET /api/v1/jobs).
struct JobScheduleInfo {
  std::optional<Millis> next_fire;  // none: no schedule, disabled, never fires, or invalid
  Millis last_fire_at = 0;          // 0 = never
  std::int64_t skipped_fires = 0;
  Millis last_skipped_at = 0;  // 0 = none
  std::string error;           // the schedule or zone does not parse
};

// By job name, for every job in `jobs`, at `now`.
Result<std::map<std::string, JobScheduleInfo>> JobSchedules(Store& store,
                                                            const std::vector<JobDefinition>& jobs,
                                                            Millis now);

}  // namespace taskengine
