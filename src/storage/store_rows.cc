#include "storage/store_rows.h"

#include <algorithm>

#include "storage/list_codec.h"

namespace taskengine::storage_internal {

StateRow ReadStateRow(const Row& s) {
  StateRow r;
  r.id = ExecutionId(s.Int(0));
  r.state.status = static_cast<ExecutionStatus>(s.Int(1));
  r.state.attempt = static_cast<int>(s.Int(2));
  r.version = ClaimVersion(s.Int(3));
  r.state.consecutive_lease_expiries = static_cast<int>(s.Int(4));
  r.state.permanent_failures = static_cast<int>(s.Int(5));
  r.state.ambiguous_failures = static_cast<int>(s.Int(6));
  r.state.cancel_requested = s.Int(7) != 0;
  r.state.failure_class = static_cast<FailureClass>(s.Int(8));
  r.state.retry.max_attempts = static_cast<int>(s.Int(9));
  r.state.retry.backoff_base_ms = s.Int(10);
  r.state.retry.backoff_cap_ms = s.Int(11);
  r.state.retry.max_permanent_attempts = static_cast<int>(s.Int(12));
  r.state.retry.max_ambiguous_attempts = static_cast<int>(s.Int(13));
  r.state.retry.max_consecutive_lease_expiries = static_cast<int>(s.Int(14));
  r.lease_ms = s.Int(15);
  r.run_at = s.Int(16);
  r.started_at = s.Int(17);
  r.finished_at = s.Int(18);
  r.state.retry.max_unsupported_schema_attempts = static_cast<int>(s.Int(19));
  r.lane_key = s.Text(20);
  r.tenant = s.Text(21);
  r.worker = s.Text(23);
  r.queue = s.Text(24);
  r.state.handler_started = s.Int(25) != 0;
  r.job = s.Text(26);
  return r;
}

ClaimRow ReadClaimRow(const Row& s) {
  ClaimRow c;
  c.row = ReadStateRow(s);
  c.job = JobName(s.Text(kStateColumnCount));
  c.payload_json = s.Text(kStateColumnCount + 1);
  c.idempotency_key = s.Text(kStateColumnCount + 2);
  return c;
}

Execution ReadExecutionRow(const Row& s) {
  Execution e;
  e.id = ExecutionId(s.Int(0));
  e.job = JobName(s.Text(1));
  e.tenant = TenantId(s.Text(2));
  e.queue = s.Text(3);
  e.status = static_cast<ExecutionStatus>(s.Int(4));
  e.trigger = static_cast<Trigger>(s.Int(5));
  e.requester = s.Text(6);
  e.worker = WorkerId(s.Text(7));
  e.attempt = static_cast<int>(s.Int(8));
  e.idempotency_key = s.Text(9);
  e.payload_json = s.Text(10);
  e.fingerprint = s.Text(11);
  e.result_json = s.Text(12);
  e.progress = static_cast<int>(s.Int(13));
  e.error = s.Text(14);
  e.failure_class = static_cast<FailureClass>(s.Int(15));
  e.scheduled_at = s.Int(16);
  e.run_at = s.Int(17);
  e.queued_at = s.Int(18);
  e.started_at = s.Int(19);
  e.finished_at = s.Int(20);
  e.claim_version = ClaimVersion(s.Int(21));
  e.lease_expires_at = s.Int(22);
  e.cancel_requested = s.Int(23) != 0;
  e.lane_key = s.Text(24);
  e.parent = ExecutionId(s.Int(25));
  e.consecutive_lease_expiries = static_cast<int>(s.Int(26));
  e.permanent_failures = static_cast<int>(s.Int(27));
  e.ambiguous_failures = static_cast<int>(s.Int(28));
  e.retry.max_attempts = static_cast<int>(s.Int(29));
  e.retry.backoff_base_ms = s.Int(30);
  e.retry.backoff_cap_ms = s.Int(31);
  e.retry.max_permanent_attempts = static_cast<int>(s.Int(32));
  e.retry.max_ambiguous_attempts = static_cast<int>(s.Int(33));
  e.retry.max_consecutive_lease_expiries = static_cast<int>(s.Int(34));
  e.lease_ms = s.Int(35);
  e.retry.max_unsupported_schema_attempts = static_cast<int>(s.Int(36));
  return e;
}

JobDefinition ReadJobRow(const Row& s) {
  JobDefinition j;
  j.name = JobName(s.Text(0));
  j.display_name = s.Text(1);
  j.handler = s.Text(2);
  j.queue = s.Text(3);
  j.scope = static_cast<JobScope>(s.Int(4));
  j.schedule = s.Text(5);
  j.timezone = s.Text(6);
  j.timeout_ms = s.Int(7);
  j.lease_ms = s.Int(8);
  j.retry.max_attempts = static_cast<int>(s.Int(9));
  j.retry.backoff_base_ms = s.Int(10);
  j.retry.backoff_cap_ms = s.Int(11);
  j.retry.max_permanent_attempts = static_cast<int>(s.Int(12));
  j.retry.max_ambiguous_attempts = static_cast<int>(s.Int(13));
  j.retry.max_consecutive_lease_expiries = static_cast<int>(s.Int(14));
  j.lane_template = s.Text(15);
  j.config_json = s.Text(16);
  j.enabled = s.Int(17) != 0;
  j.created_at = s.Int(18);
  j.updated_at = s.Int(19);
  j.accepted_schema_versions = ParseIntList(s.TextView(20));
  j.retry.max_unsupported_schema_attempts = static_cast<int>(s.Int(21));
  j.catch_up = static_cast<CatchUpPolicy>(std::clamp<std::int64_t>(s.Int(22), 0, 2));
  j.catch_up_window_ms = s.Int(23);
  j.window_ms = s.Int(24);
  j.seed_digest = s.Text(25);
  j.notify_on_failure = s.Int(26) != 0;
  j.notify_targets = SplitList(s.TextView(27));
  return j;
}

JobPolicy ReadJobPolicyRow(const Row& s) {
  JobPolicy p;
  p.queue = s.Text(0);
  p.retry.max_attempts = static_cast<int>(s.Int(1));
  p.retry.backoff_base_ms = s.Int(2);
  p.retry.backoff_cap_ms = s.Int(3);
  p.retry.max_permanent_attempts = static_cast<int>(s.Int(4));
  p.retry.max_ambiguous_attempts = static_cast<int>(s.Int(5));
  p.retry.max_consecutive_lease_expiries = static_cast<int>(s.Int(6));
  p.lease_ms = s.Int(7);
  p.retry.max_unsupported_schema_attempts = static_cast<int>(s.Int(8));
  p.enabled = s.Int(9) != 0;
  p.scope = static_cast<JobScope>(s.Int(10));
  p.lane_template = s.Text(11);
  return p;
}

AdmitResult ReadExistingAdmissionRow(const Row& s, const AdmitRequest& request) {
  return ExistingAdmission(ExecutionId(s.Int(0)), s.TextView(1),
                           static_cast<ExecutionStatus>(s.Int(2)), request);
}

User ReadUserRow(const Row& s) {
  User u;
  u.name = s.Text(0);
  u.password_hash = s.Text(1);
  u.scopes = SplitList(s.TextView(2));
  u.tenants = SplitList(s.TextView(3));
  u.disabled = s.Int(4) != 0;
  u.created_at = s.Int(5);
  return u;
}

ApiToken ReadTokenRow(const Row& s) {
  ApiToken t;
  t.id = s.Int(0);
  t.name = s.Text(1);
  t.secret_hash = s.Text(2);
  t.principal = s.Text(3);
  t.scopes = SplitList(s.TextView(4));
  t.tenants = SplitList(s.TextView(5));
  t.created_at = s.Int(6);
  t.expires_at = s.Int(7);
  t.revoked_at = s.Int(8);
  t.last_used_at = s.Int(9);
  return t;
}

Session ReadSessionRow(const Row& s) {
  Session x;
  x.id_hash = s.Text(0);
  x.user = s.Text(1);
  x.csrf_token = s.Text(2);
  x.created_at = s.Int(3);
  x.last_seen_at = s.Int(4);
  x.expires_at = s.Int(5);
  return x;
}

Tenant ReadTenantRow(const Row& s) {
  Tenant t;
  t.id = TenantId(s.Text(0));
  t.name = s.Text(1);
  t.active = s.Int(2) != 0;
  t.created_at = s.Int(3);
  return t;
}

NotifyPending ReadNotifyPendingRow(const Row& r) {
  NotifyPending p;
  p.execution = ExecutionId(r.Int(0));
  p.job = JobName(r.Text(1));
  p.ended_at = r.Int(2);
  return p;
}

NotifyJobState ReadNotifyStateRow(const Row& r) {
  NotifyJobState j;
  j.job = JobName(r.Text(0));
  j.sent_at = ParseMillisList(r.TextView(1));
  j.suppressed = r.Int(2);
  j.suppressed_since = r.Int(3);
  return j;
}

WorkerInfo ReadWorkerRow(const Row& s) {
  WorkerInfo w;
  w.id = WorkerId(s.Text(0));
  w.hostname = s.Text(1);
  w.pid = s.Int(2);
  w.state = static_cast<WorkerState>(std::clamp<std::int64_t>(s.Int(3), 0, 2));
  w.processed = s.Int(5);
  w.failed = s.Int(6);
  w.started_at = s.Int(7);
  w.last_heartbeat_at = s.Int(8);
  w.kind = static_cast<WorkerKind>(std::clamp<std::int64_t>(s.Int(9), 0, 1));
  w.threads = static_cast<int>(s.Int(10));
  w.busy = static_cast<int>(s.Int(11));
  w.current = ParseIdList(s.TextView(12));
  if (w.current.empty() && s.Int(4) != 0) {
    // A row of an older binary: one current execution, counted as busy.
    w.current.push_back(ExecutionId(s.Int(4)));
    w.busy = std::max(w.busy, 1);
  }
  return w;
}

AuditRecord ReadAuditRow(const Row& s) {
  AuditRecord r;
  r.id = s.Int(0);
  r.at = s.Int(1);
  r.actor = s.Text(2);
  r.tenant = s.Text(3);
  r.action = s.Text(4);
  r.target = s.Text(5);
  r.before_json = s.Text(6);
  r.after_json = s.Text(7);
  r.reason = s.Text(8);
  return r;
}

ScheduleState ReadScheduleStateRow(const Row& s) {
  ScheduleState st;
  st.job = JobName(s.Text(0));
  st.last_fire_at = s.Int(1);
  st.last_evaluated_at = s.Int(2);
  st.skipped_fires = s.Int(3);
  st.last_skipped_at = s.Int(4);
  return st;
}

LogEntry ReadLogRow(const Row& s) {
  LogEntry l;
  l.execution = ExecutionId(s.Int(0));
  l.attempt = static_cast<int>(s.Int(1));
  l.at = s.Int(2);
  l.level = static_cast<LogLevel>(std::clamp<std::int64_t>(s.Int(3), 0, 3));
  l.message = s.Text(4);
  return l;
}

AttemptRecord ReadAttemptRow(const Row& s, ExecutionId id) {
  AttemptRecord a;
  a.execution = id;
  a.attempt = static_cast<int>(s.Int(0));
  a.claim_version = ClaimVersion(s.Int(1));
  a.worker = s.Text(2);
  a.started_at = s.Int(3);
  a.ended_at = s.Int(4);
  a.outcome = static_cast<ExecutionStatus>(s.Int(5));
  a.failure_class = static_cast<FailureClass>(s.Int(6));
  a.released = s.Int(7) != 0;
  a.error = s.Text(8);
  return a;
}

EffectRecord ReadEffectRow(const Row& s, ExecutionId id) {
  EffectRecord r;
  r.execution = id;
  r.name = s.Text(0);
  r.key = EffectKey(id, r.name);
  r.committed = s.Int(1) != 0;
  r.reserved_by = ClaimVersion(s.Int(2));
  r.attempt = static_cast<int>(s.Int(3));
  r.reserved_at = s.Int(4);
  r.committed_at = s.Int(5);
  r.detail = s.Text(6);
  return r;
}

StoredEffect ReadStoredEffectRow(const Row& s) {
  StoredEffect e;
  e.committed = s.Int(0) != 0;
  e.reserved_by = ClaimVersion(s.Int(1));
  e.attempt = static_cast<int>(s.Int(2));
  e.reserved_at = s.Int(3);
  e.committed_at = s.Int(4);
  e.detail = s.Text(5);
  return e;
}

PendingReplay ReadPendingReplayRow(const Row& s) {
  PendingReplay p;
  p.requested_by = s.Text(0);
  p.reason = s.Text(1);
  p.ambiguous = static_cast<AmbiguousResolution>(std::clamp<std::int64_t>(s.Int(2), 0, 2));
  return p;
}

void ReadLaneHeadRow(const Row& s, LaneStatus& lane) {
  lane.head = ExecutionId(s.Int(0));
  lane.head_status = static_cast<ExecutionStatus>(s.Int(1));
  lane.blocked = BlocksLane(lane.head_status);
}

void ReadLaneCountsRow(const Row& s, LaneStatus& lane) {
  lane.queued = s.Int(0);
  lane.running = s.Int(1);
}

void AddStatusCountRow(const Row& s, const TenantScope& scope, StoreStats& out) {
  std::string tenant = s.Text(0);
  if (!scope.Covers(tenant)) return;
  std::string queue = s.Text(1);
  const auto status = s.Int(2);
  const std::int64_t n = s.Int(3);
  if (status < 0 || status >= kExecutionStatusCount) return;
  if (out.tenants.empty() || out.tenants.back().tenant.value != tenant) {
    out.tenants.push_back(TenantStats{TenantId(std::move(tenant)), {}, {}});
  }
  out.tenants.back().by_status[status] += n;
  auto q = std::find_if(out.queues.begin(), out.queues.end(),
                        [&](const QueueStats& x) { return x.queue == queue; });
  if (q == out.queues.end()) q = out.queues.insert(q, QueueStats{std::move(queue), {}, 0});
  q->by_status[status] += n;
  out.totals[status] += n;
}

void AddRecentOutcomeRow(const Row& s, const TenantScope& scope, StoreStats& out) {
  std::string tenant = s.Text(0);
  if (!scope.Covers(tenant)) return;
  const auto status = s.Int(1);
  const std::int64_t n = s.Int(2);
  if (status < 0 || status >= kExecutionStatusCount) return;
  auto t = std::lower_bound(
      out.tenants.begin(), out.tenants.end(), tenant,
      [](const TenantStats& x, const std::string& id) { return x.tenant.value < id; });
  if (t == out.tenants.end() || t->tenant.value != tenant) {
    t = out.tenants.insert(t, TenantStats{TenantId(std::move(tenant)), {}, {}});
  }
  t->ended_last_24h[status] += n;
  out.ended_last_24h[status] += n;
}

void FinishStats(StoreStats& out) {
  std::sort(out.queues.begin(), out.queues.end(),
            [](const QueueStats& a, const QueueStats& b) { return a.queue < b.queue; });
}

void AddQueuedDepthRow(const Row& s, QueueDepthMap& depths) {
  QueueDepth& d = depths[s.Text(0)];
  d.queued = s.Int(1);
  d.due = s.Int(2);
  d.oldest_queued_at = s.Int(3);
}

void AddRunningDepthRow(const Row& s, QueueDepthMap& depths) {
  depths[s.Text(0)].running = s.Int(1);
}

std::vector<QueueDepth> QueueDepthList(QueueDepthMap& depths) {
  std::vector<QueueDepth> out;
  for (auto& [name, d] : depths) {
    d.queue = name;
    out.push_back(d);
  }
  return out;
}

}  // namespace taskengine::storage_internal
