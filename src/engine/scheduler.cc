#include "engine/scheduler.h"

#include <spdlog/spdlog.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <unordered_set>

#include "core/canonical_json.h"
#include "core/cron.h"
#include "core/int_math.h"
#include "core/prometheus_text.h"
#include "core/time_text.h"
#include "platform/thread_name.h"

namespace taskengine {
namespace {

constexpr Millis kMillisPerMinute = 60'000;

using SteadyClock = std::chrono::steady_clock;

std::chrono::microseconds Since(SteadyClock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - start);
}

// CPU time of the calling thread (a measurement, not a time of day).
std::chrono::microseconds ThreadCpuTime() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::duration_cast<std::chrono::microseconds>(
                                               std::chrono::nanoseconds(ts.tv_nsec));
}

CivilTime UtcCivil(Millis ms) { return ToCivil(LocalMinute{FloorDiv(ms, kMillisPerMinute)}); }

// Writes `v` (>= 0) as exactly `width` decimal digits, zero-padded.
char* PutDigits(char* p, int v, int width) {
  for (int i = width - 1; i >= 0; --i) {
    p[i] = static_cast<char>('0' + v % 10);
    v /= 10;
  }
  return p + width;
}

// "YYYY-MM-DDTHH:MM" (16 characters) into `p`; the formats below are on the
// hot path of a cycle (a key and a payload per fire), hence no snprintf.
char* PutUtcMinute(char* p, const CivilTime& c) {
  p = PutDigits(p, c.year, 4);
  *p++ = '-';
  p = PutDigits(p, c.month, 2);
  *p++ = '-';
  p = PutDigits(p, c.day, 2);
  *p++ = 'T';
  p = PutDigits(p, c.hour, 2);
  *p++ = ':';
  return PutDigits(p, c.minute, 2);
}

// The admission of one fire (or window) of `job` for `tenant`.
AdmitRequest MakeAdmission(const JobDefinition& job, const TenantId& tenant, std::string key,
                           std::string payload, std::string fingerprint,
                           const std::string& requester, Millis fire) {
  AdmitRequest r;
  r.job = job.name;
  r.tenant = tenant;
  r.payload_json = std::move(payload);
  r.fingerprint = std::move(fingerprint);
  r.idempotency_key = std::move(key);
  r.requester = requester;
  r.trigger = Trigger::kScheduled;
  r.scheduled_at = fire;
  return r;
}

}  // namespace

std::string FormatKeyMinute(Millis ms) {
  const CivilTime c = UtcCivil(ms);
  char buf[32];
  if (c.year < 0 || c.year > 9999) {
    std::snprintf(buf, sizeof buf, "%d-%02d-%02dT%02d:%02dZ", c.year, c.month, c.day, c.hour,
                  c.minute);
    return buf;
  }
  char* end = PutUtcMinute(buf, c);
  *end++ = 'Z';
  return std::string(buf, end);
}

std::string ScheduledKey(const JobName& job, Millis fire, const TenantId& tenant) {
  const std::string minute = FormatKeyMinute(fire);
  std::string key;
  key.reserve(job.value.size() + minute.size() + tenant.value.size() + 2);
  key.append(job.value).append(1, ':').append(minute);
  if (!tenant.empty()) key.append(1, ':').append(tenant.value);
  return key;
}

std::string WindowKey(const JobName& job, const TenantId& tenant, Millis window_start) {
  const std::string minute = FormatKeyMinute(window_start);
  std::string key;
  key.reserve(job.value.size() + minute.size() + tenant.value.size() + 2);
  key.append(job.value).append(1, ':');
  if (!tenant.empty()) key.append(tenant.value).append(1, ':');
  return key.append(minute);
}

Result<std::optional<Schedule>> CheckJobSchedule(const JobDefinition& job) {
  const std::string who = "job '" + job.name.value + "'";
  if (job.window_ms < 0 || job.window_ms % kMillisPerMinute != 0) {
    return InvalidArgument(who + ": window_ms must be a whole number of minutes (got " +
                           std::to_string(job.window_ms) + ")");
  }
  if (job.catch_up_window_ms < 0) {
    return InvalidArgument(who + ": catch_up_window_ms must not be negative");
  }
  CronExpr cron;  // matches nothing: only the zone is checked when there is no schedule
  if (!job.schedule.empty()) {
    auto parsed = ParseCron(job.schedule);
    if (!parsed.ok()) {
      return InvalidArgument(who + ": schedule \"" + job.schedule +
                             "\": " + parsed.status().message());
    }
    cron = std::move(parsed).value();
  }
  auto schedule = Schedule::Create(cron, job.timezone);
  if (!schedule.ok()) {
    return Status(schedule.status().code(), who + ": timezone: " + schedule.status().message());
  }
  if (job.schedule.empty()) return std::optional<Schedule>();
  return std::optional<Schedule>(std::move(schedule).value());
}

Scheduler::Scheduler(Store* store, Clock* clock, SchedulerOptions options)
    : store_(store),
      clock_(clock),
      options_(std::move(options)),
      lock_ttl_ms_(options_.lock_ttl_ms > 0 ? options_.lock_ttl_ms
                                            : 3 * options_.cycle_interval_ms) {
  TE_CHECK(store_ != nullptr && clock_ != nullptr);
  TE_CHECK(!options_.node_id.empty());
  TE_CHECK(options_.cycle_interval_ms > 0);
  TE_CHECK(options_.max_admissions_per_commit > 0);
}

Scheduler::~Scheduler() { Stop(); }

const Result<std::optional<Schedule>>& Scheduler::ParsedSchedule(const JobDefinition& job) {
  auto [it, inserted] = cache_.try_emplace(job.name.value);
  CachedSchedule& c = it->second;
  if (inserted || c.updated_at != job.updated_at || c.schedule != job.schedule ||
      c.timezone != job.timezone || c.window_ms != job.window_ms) {
    c.updated_at = job.updated_at;
    c.schedule = job.schedule;
    c.timezone = job.timezone;
    c.window_ms = job.window_ms;
    c.parsed = CheckJobSchedule(job);
  }
  return c.parsed;
}

Result<CycleReport> Scheduler::RunCycle() {
  MutexLock lock(cycle_mu_);
  const auto start = SteadyClock::now();
  const Millis started_at = clock_->NowMillis();
  std::map<std::string, std::int64_t> skipped_by_job;
  Result<CycleReport> result = RunCycleLocked(&skipped_by_job);
  MutexLock totals_lock(totals_mu_);
  if (!result.ok()) {
    ++totals_.cycles_failed;
  } else if (!result->leader) {
    ++totals_.cycles_not_leader;
  } else {
    const CycleReport& r = *result;
    ++totals_.cycles;
    totals_.fires += r.fires;
    totals_.executions_created += r.executions_created;
    totals_.coalesced += r.coalesced;
    totals_.skipped += r.skipped;
    for (const auto& [job, n] : skipped_by_job) totals_.skipped_by_job[job] += n;
    totals_.last_cycle_at = r.now;
    const Millis interval = options_.cycle_interval_ms;
    totals_.last_lag_ms = started_at - FloorDiv(started_at, interval) * interval;
    totals_.last_duration = Since(start);
  }
  return result;
}

SchedulerTotals Scheduler::totals() const {
  MutexLock lock(totals_mu_);
  return totals_;
}

Result<CycleReport> Scheduler::RunCycleLocked(std::map<std::string, std::int64_t>* skipped_by_job) {
  TE_ASSIGN_OR_RETURN(bool leader,
                      store_->AcquireLock(kSchedulerLockName, options_.node_id, lock_ttl_ms_));
  if (!leader) {
    CycleReport report;
    report.leader = false;
    report.now = clock_->NowMillis();
    return report;
  }
  TE_ASSIGN_OR_RETURN(CyclePlan plan, EvaluateLocked());
  plan.report.leader = true;
  for (const ScheduleUpdate& u : plan.updates) {
    if (u.skipped > 0) (*skipped_by_job)[u.job.value] += u.skipped;
  }
  return CommitLocked(std::move(plan));
}

Result<CyclePlan> Scheduler::Evaluate() {
  MutexLock lock(cycle_mu_);
  return EvaluateLocked();
}

Result<CycleReport> Scheduler::Commit(CyclePlan plan) {
  MutexLock lock(cycle_mu_);
  return CommitLocked(std::move(plan));
}

Result<CyclePlan> Scheduler::EvaluateLocked() {
  CyclePlan plan;
  CycleReport& report = plan.report;
  const Millis now = clock_->NowMillis();
  report.now = now;

  const auto load_start = SteadyClock::now();
  TE_ASSIGN_OR_RETURN(std::vector<JobDefinition> jobs, store_->ListJobs());
  TE_ASSIGN_OR_RETURN(std::vector<ScheduleState> states, store_->ListScheduleStates());
  bool need_tenants = false;
  for (const JobDefinition& j : jobs) {
    need_tenants =
        need_tenants || (j.enabled && !j.schedule.empty() && j.scope == JobScope::kPerTenant);
  }
  std::vector<Tenant> tenants;
  if (need_tenants) {
    TE_ASSIGN_OR_RETURN(tenants, store_->ListTenants(/*active_only=*/true));
  }
  report.load_time = Since(load_start);

  const auto eval_start = SteadyClock::now();
  const auto eval_cpu_start = ThreadCpuTime();
  std::unordered_map<std::string_view, const ScheduleState*> state_of;
  state_of.reserve(states.size());
  for (const ScheduleState& s : states) state_of.emplace(s.job.value, &s);

  // Definitions that are gone no longer need their cached schedule.
  if (cache_.size() > jobs.size()) {
    std::unordered_set<std::string> names;
    for (const JobDefinition& j : jobs) names.insert(j.name.value);
    std::erase_if(cache_, [&](const auto& entry) { return names.count(entry.first) == 0; });
  }

  const TenantId kNoTenant;
  const Millis on_time_ms = options_.cycle_interval_ms;
  plan.updates.reserve(jobs.size());
  plan.admissions.reserve(jobs.size());
  const std::string requester = kSchedulerRequester;

  for (const JobDefinition& job : jobs) {
    ScheduleUpdate update;
    update.job = job.name;
    update.evaluated_until = now;
    if (!job.enabled || job.schedule.empty()) {
      plan.updates.push_back(std::move(update));
      continue;
    }
    const Result<std::optional<Schedule>>& parsed = ParsedSchedule(job);
    if (!parsed.ok()) {
      report.errors.push_back({job.name, parsed.status().message()});
      continue;
    }
    const Schedule& schedule = **parsed;
    ++report.jobs_evaluated;

    Millis from = job.created_at;
    if (auto it = state_of.find(job.name.value);
        it != state_of.end() && it->second->last_evaluated_at > 0) {
      from = it->second->last_evaluated_at;
    }
    if (from >= now) {
      plan.updates.push_back(std::move(update));
      continue;
    }

    FirePolicy policy;
    policy.catch_up = job.catch_up;
    policy.catch_up_window_ms = job.catch_up_window_ms;
    policy.window_ms = job.window_ms;
    policy.on_time_ms = on_time_ms;
    const FirePlan fires = PlanFires(schedule, policy, from, now);
    const std::vector<Millis>& admit = fires.claims;
    const std::vector<Millis>& admit_fire = fires.fires;
    update.last_skipped_at = fires.last_skipped_at;
    report.skipped_count_capped = report.skipped_count_capped || fires.skipped_count_capped;
    report.fires += fires.fires_seen;
    report.skipped += fires.skipped;
    report.coalesced += fires.coalesced;
    report.admitted_fires += static_cast<std::int64_t>(admit.size());
    update.skipped = fires.skipped;
    const Millis latest_fire = fires.latest_fire;

    const bool per_tenant = job.scope == JobScope::kPerTenant;
    for (std::size_t i = 0; i < admit.size(); ++i) {
      const Millis fire = admit_fire[i];
      std::string payload;
      if (job.window_ms > 0) {
        // Keys sorted, no whitespace: already canonical JSON.
        payload = "{\"window_end\":\"" + FormatTimeSeconds(admit[i] + job.window_ms) +
                  "\",\"window_start\":\"" + FormatTimeSeconds(admit[i]) + "\"}";
      } else {
        payload = "{\"fire_time\":\"" + FormatTimeSeconds(fire) + "\"}";
      }
      const std::string fingerprint = AdmissionFingerprint(payload, kSchedulerRequester);
      auto key_for = [&](const TenantId& tenant) {
        return job.window_ms > 0 ? WindowKey(job.name, tenant, admit[i])
                                 : ScheduledKey(job.name, fire, tenant);
      };
      if (!per_tenant) {
        plan.admissions.push_back(MakeAdmission(job, kNoTenant, key_for(kNoTenant),
                                                std::move(payload), std::move(fingerprint),
                                                requester, fire));
        plan.queues.push_back(job.queue);
      } else {
        for (const Tenant& t : tenants) {
          plan.admissions.push_back(
              MakeAdmission(job, t.id, key_for(t.id), payload, fingerprint, requester, fire));
          plan.queues.push_back(job.queue);
        }
      }
    }
    if (!admit.empty() && (!per_tenant || !tenants.empty())) update.last_fire_at = latest_fire;
    plan.updates.push_back(std::move(update));
  }
  report.admissions = static_cast<std::int64_t>(plan.admissions.size());
  report.evaluation_time = Since(eval_start);
  report.evaluation_cpu_time = ThreadCpuTime() - eval_cpu_start;
  return plan;
}

Result<CycleReport> Scheduler::CommitLocked(CyclePlan plan) {
  CycleReport report = std::move(plan.report);
  const auto commit_start = SteadyClock::now();
  const std::size_t chunk = options_.max_admissions_per_commit;
  const std::size_t total = plan.admissions.size();
  const std::size_t chunks = std::max<std::size_t>(1, (total + chunk - 1) / chunk);
  const std::vector<ScheduleUpdate> no_updates;
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t begin = c * chunk;
    const std::size_t end = std::min(total, begin + chunk);
    const bool last = c + 1 == chunks;
    std::vector<AdmitRequest> part;
    if (chunks > 1) {
      part.assign(
          std::make_move_iterator(plan.admissions.begin() + static_cast<std::ptrdiff_t>(begin)),
          std::make_move_iterator(plan.admissions.begin() + static_cast<std::ptrdiff_t>(end)));
    }
    const std::vector<AdmitRequest>& sent = chunks == 1 ? plan.admissions : part;
    Result<std::vector<AdmitResult>> results =
        store_->CommitSchedule(sent, last ? plan.updates : no_updates);
    if (!results.ok()) {
      const Status& s = results.status();
      std::string where = chunks == 1 ? std::string()
                                      : " (chunk " + std::to_string(c + 1) + " of " +
                                            std::to_string(chunks) + "; earlier chunks committed)";
      return Status(s.code(), "committing the scheduler cycle" + where + ": " + s.message());
    }
    for (std::size_t i = 0; i < results->size(); ++i) {
      const AdmitResult& r = (*results)[i];
      switch (r.outcome) {
        case AdmitOutcome::kCreated:
          ++report.executions_created;
          if (options_.lifecycle && i < sent.size()) {
            LifecycleEvent e;
            e.kind = LifecycleKind::kDispatched;
            e.id = r.id;
            e.job = sent[i].job;
            e.tenant = sent[i].tenant;
            if (begin + i < plan.queues.size()) e.queue = plan.queues[begin + i];
            e.status = r.status;
            e.trigger = sent[i].trigger;
            e.run_at = sent[i].run_at;
            e.at = clock_->NowMillis();
            options_.lifecycle(e);
          }
          break;
        case AdmitOutcome::kDuplicate:
          ++report.duplicates;
          break;
        case AdmitOutcome::kConflict:
          ++report.conflicts;
          break;
      }
    }
  }
  report.commit_time = Since(commit_start);
  if (report.executions_created > 0 && options_.on_admitted) options_.on_admitted();
  return report;
}

Status Scheduler::Start(std::function<void(const Result<CycleReport>&)> on_cycle) {
  MutexLock lock(loop_mu_);
  if (started_) return Conflict("the scheduler loop is already started");
  started_ = true;
  stopping_ = false;
  loop_ = NamedThread("te-scheduler",
                      [this, cb = std::move(on_cycle)]() mutable { Loop(std::move(cb)); });
  return Status::Ok();
}

void Scheduler::Stop() {
  {
    MutexLock lock(loop_mu_);
    if (!started_ || stopping_) return;
    stopping_ = true;
  }
  loop_cv_.NotifyAll();
  if (loop_.joinable()) loop_.join();
  Status released = store_->ReleaseLock(kSchedulerLockName, options_.node_id);
  if (!released.ok()) {
    spdlog::warn("scheduler {}: releasing the leader lock failed: {}", options_.node_id,
                 released.ToString());
  }
}

void Scheduler::Loop(std::function<void(const Result<CycleReport>&)> on_cycle) {
  const Millis interval = options_.cycle_interval_ms;
  const Millis offset = options_.loop_offset_ms;
  // The first boundary + offset after `t`.
  auto next_after = [&](Millis t) {
    return (FloorDiv(t - offset, interval) + 1) * interval + offset;
  };
  bool was_leader = false;
  // Between cycles the leader renews its lock every third of the ttl, so a
  // short ttl (serve uses seconds) lets another node take over soon after the
  // leader died, at that node's next cycle.
  const Millis renew_every = std::max<Millis>(1, lock_ttl_ms_ / 3);
  Millis renewed_at = 0;
  MutexLock lock(loop_mu_);
  Millis next = clock_->NowMillis();  // the first cycle runs at once
  while (!stopping_) {
    const Millis now = clock_->NowMillis();
    if (now < next && was_leader && now - renewed_at >= renew_every) {
      lock.Unlock();
      Result<bool> held = store_->AcquireLock(kSchedulerLockName, options_.node_id, lock_ttl_ms_);
      lock.Lock();
      renewed_at = now;
      if (held.ok() && !*held) {
        spdlog::info("scheduler {}: is no longer the leader", options_.node_id);
        was_leader = false;
      }
      continue;
    }
    if (now < next) {
      Millis wait = std::min(next - now, std::max<Millis>(1, options_.loop_tick_ms));
      if (was_leader) wait = std::min(wait, std::max<Millis>(1, renewed_at + renew_every - now));
      const auto wait_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait);
      while (!stopping_ && loop_cv_.WaitUntil(loop_mu_, wait_end)) {
      }
      continue;
    }
    lock.Unlock();
    Result<CycleReport> result = RunCycle();
    if (!result.ok()) {
      spdlog::warn("scheduler cycle failed: {}", result.status().ToString());
    } else {
      const CycleReport& r = *result;
      if (r.leader != was_leader) {
        spdlog::info("scheduler {}: {} the leader", options_.node_id,
                     r.leader ? "is now" : "is no longer");
        was_leader = r.leader;
      }
      for (const ScheduleError& e : r.errors) spdlog::warn("scheduler: {}", e.message);
      if (r.executions_created > 0 || r.skipped > 0) {
        spdlog::info(
            "scheduler cycle: {} jobs, {} fires, {} executions created, {} duplicates, {} "
            "skipped, {} coalesced",
            r.jobs_evaluated, r.fires, r.executions_created, r.duplicates, r.skipped, r.coalesced);
      }
    }
    if (on_cycle) on_cycle(result);
    lock.Lock();
    renewed_at = now;  // a cycle takes (or renews) the lock
    const Millis after = clock_->NowMillis();
    next = next_after(after);
    if (result.ok() && !result->leader && lock_ttl_ms_ < interval) {
      // A follower tries again every third of the ttl, not at the next
      // boundary: when the leader died, it takes over soon after the dead
      // leader's lock expired, and its cycle admits the fires missed
      // meanwhile as on time instead of catching them up a minute later.
      next = std::min(next, after + renew_every);
    }
  }
}

void AppendSchedulerMetrics(const SchedulerTotals& t, std::string* out) {
  MetricsWriter w(out);
  const auto d = [](std::int64_t v) { return static_cast<double>(v); };
  w.Family("taskengine_scheduler_cycles_total", "counter",
           "Scheduler cycles of this node by result: leader (ran and committed), "
           "not_leader (another node holds the leader lock), failed.");
  w.Sample("taskengine_scheduler_cycles_total", "{result=\"leader\"}", d(t.cycles));
  w.Sample("taskengine_scheduler_cycles_total", "{result=\"not_leader\"}", d(t.cycles_not_leader));
  w.Sample("taskengine_scheduler_cycles_total", "{result=\"failed\"}", d(t.cycles_failed));
  const struct {
    const char* name;
    const char* help;
    std::int64_t value;
  } counters[] = {
      {"taskengine_scheduler_fires_total",
       "Fire times decided by this node's leader cycles (admitted, coalesced or skipped).",
       t.fires},
      {"taskengine_scheduler_executions_created_total",
       "Executions created by this node's scheduler cycles.", t.executions_created},
      {"taskengine_scheduler_coalesced_fires_total",
       "Missed fires folded into a later one by this node's cycles.", t.coalesced},
      {"taskengine_scheduler_skipped_fires_total",
       "Fires skipped by this node's cycles (stale, or missed under misfire policy none).",
       t.skipped},
  };
  for (const auto& c : counters) {
    w.Family(c.name, "counter", c.help);
    w.Sample(c.name, "", d(c.value));
  }
  w.Family("taskengine_scheduler_job_skipped_fires_total", "counter",
           "Of taskengine_scheduler_skipped_fires_total, per job (jobs with a skip only).");
  for (const auto& [job, n] : t.skipped_by_job) {
    w.Sample("taskengine_scheduler_job_skipped_fires_total", Label("job", job), d(n));
  }
  w.Family("taskengine_scheduler_lag_seconds", "gauge",
           "How late the last leader cycle of this node ran relative to the fire time it "
           "served: its start minus the latest cycle boundary (minute) at or before it. On "
           "time is about the loop offset (1 s); 0 before the first cycle.");
  w.Sample("taskengine_scheduler_lag_seconds", "", t.last_lag_ms / 1000.0);
  w.Family("taskengine_scheduler_cycle_duration_seconds", "gauge",
           "Wall-clock duration of the last leader cycle of this node (lock, evaluation, "
           "commit).");
  w.Sample("taskengine_scheduler_cycle_duration_seconds", "",
           static_cast<double>(t.last_duration.count()) / 1e6);
  w.Family("taskengine_scheduler_last_cycle_timestamp_seconds", "gauge",
           "Unix time the last leader cycle of this node decided up to; 0 before the first.");
  w.Sample("taskengine_scheduler_last_cycle_timestamp_seconds", "", t.last_cycle_at / 1000.0);
}

Result<std::map<std::string, JobScheduleInfo>> JobSchedules(Store& store,
                                                            const std::vector<JobDefinition>& jobs,
                                                            Millis now) {
  TE_ASSIGN_OR_RETURN(std::vector<ScheduleState> states, store.ListScheduleStates());
  std::map<std::string, const ScheduleState*> state_of;
  for (const ScheduleState& s : states) state_of[s.job.value] = &s;
  std::map<std::string, JobScheduleInfo> out;
  for (const JobDefinition& job : jobs) {
    JobScheduleInfo& info = out[job.name.value];
    if (auto it = state_of.find(job.name.value); it != state_of.end()) {
      info.last_fire_at = it->second->last_fire_at;
      info.skipped_fires = it->second->skipped_fires;
      info.last_skipped_at = it->second->last_skipped_at;
    }
    if (job.schedule.empty()) continue;
    Result<std::optional<Schedule>> schedule = CheckJobSchedule(job);
    if (!schedule.ok()) {
      info.error = schedule.status().message();
      continue;
    }
    if (job.enabled && schedule->has_value()) info.next_fire = (*schedule)->NextAfter(now);
  }
  return out;
}

}  // namespace taskengine
