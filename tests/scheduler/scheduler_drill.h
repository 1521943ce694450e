// Shared pieces of the scheduler drills (RD8, RD14): a throwaway SQLite
// database driven by a FakeClock, opened by one or more Store objects (each
// stands for a node), and readers for the executions the schedulers created.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/scheduler.h"
#include "storage/sqlite/sqlite_store.h"
#include "testing_support/test_util.h"

namespace taskengine::drill {

inline constexpr Millis kSecond = 1000;
inline constexpr Millis kMinute = 60 * kSecond;
inline constexpr Millis kHour = 60 * kMinute;
inline constexpr Millis kDay = 24 * kHour;
// FakeClock's default start: 2026-01-01T00:00:00Z.
inline constexpr Millis kT0 = 1'767'225'600'000;

// Not thread-safe itself; the stores it opens are.
class DrillDatabase {
 public:
  DrillDatabase() = default;

  // Opens one more Store object over the database file (another node).
  // The first one also migrates.
  Store* Open() {
    SqliteStoreOptions o;
    o.path = dir_.File("te.db");
    o.clock = &clock_;
    o.sync = SyncMode::kNormal;  // the drills are about keys and locks, not power loss
    Result<std::unique_ptr<Store>> s = OpenSqliteStore(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return nullptr;
    if (stores_.empty()) {
      Status m = (*s)->Migrate();
      EXPECT_TRUE(m.ok()) << m.ToString();
    }
    stores_.push_back(std::move(s).value());
    return stores_.back().get();
  }

  FakeClock& clock() { return clock_; }
  Store& first() { return *stores_.front(); }

  static JobDefinition Job(const std::string& name, const std::string& schedule,
                           CatchUpPolicy policy) {
    JobDefinition j;
    j.name = JobName(name);
    j.handler = "noop";
    j.schedule = schedule;
    j.catch_up = policy;
    return j;
  }

  void Define(const JobDefinition& job) { ASSERT_OK(first().UpsertJob(job)); }
  void AddTenant(const std::string& id, bool active = true) {
    Tenant t;
    t.id = TenantId(id);
    t.active = active;
    ASSERT_OK(first().UpsertTenant(t));
  }

  // Every execution, oldest first.
  std::vector<Execution> Executions() {
    std::vector<Execution> all;
    ExecutionFilter f;
    f.limit = 1000;
    while (true) {
      Result<ExecutionPage> page = first().ListExecutions(f);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) break;
      for (Execution& e : page->items) all.push_back(std::move(e));
      if (page->next_before.value == 0) break;
      f.before = page->next_before;
    }
    std::reverse(all.begin(), all.end());
    return all;
  }

  std::map<std::string, ScheduleState> States() {
    std::map<std::string, ScheduleState> out;
    Result<std::vector<ScheduleState>> states = first().ListScheduleStates();
    EXPECT_TRUE(states.ok()) << states.status().ToString();
    if (states.ok()) {
      for (const ScheduleState& s : *states) out[s.job.value] = s;
    }
    return out;
  }

 private:
  TempDir dir_;
  FakeClock clock_{kT0};
  std::vector<std::unique_ptr<Store>> stores_;
};

}  // namespace taskengine::drill
