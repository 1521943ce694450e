#include "storage/store_rules.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "core/canonical_json.h"
#include "core/notify_target.h"
#include "storage/execution_detail.h"
#include "storage/list_codec.h"

namespace taskengine::storage_internal {

// --- validation --------------------------------------------------------------

Status ValidateJob(const JobDefinition& j) {
  if (!IsValidJobName(j.name.value)) {
    return InvalidArgument("invalid job name '" + j.name.value +
                           "': must match [a-z0-9][a-z0-9._-]{0,99}");
  }
  if (!IsValidQueueName(j.queue)) {
    return InvalidArgument("invalid queue name '" + j.queue + "' for job " + j.name.value);
  }
  if (j.handler.empty() || j.handler.size() > 100) {
    return InvalidArgument("job " + j.name.value + " needs a handler name (1..100 characters)");
  }
  const RetryPolicy& r = j.retry;
  if (r.max_attempts < 1 || r.max_attempts > 1000 || r.max_permanent_attempts < 1 ||
      r.max_ambiguous_attempts < 1 || r.max_consecutive_lease_expiries < 1 ||
      r.max_unsupported_schema_attempts < 1) {
    return InvalidArgument("job " + j.name.value +
                           ": attempt bounds must be >= 1 (max_attempts <= 1000)");
  }
  if (r.backoff_base_ms < 0 || r.backoff_cap_ms < r.backoff_base_ms) {
    return InvalidArgument("job " + j.name.value + ": backoff needs 0 <= base <= cap");
  }
  if (j.lease_ms < 1 || j.timeout_ms < 1) {
    return InvalidArgument("job " + j.name.value + ": lease and timeout must be >= 1 ms");
  }
  for (int v : j.accepted_schema_versions) {
    if (v < 0 || v > 1'000'000) {
      return InvalidArgument("job " + j.name.value + ": schema versions must be 0..1000000");
    }
  }
  if (j.catch_up_window_ms < 0 || j.catch_up_window_ms > 7LL * 24 * 3600 * 1000 ||
      j.window_ms < 0 || j.window_ms > 366LL * 24 * 3600 * 1000) {
    return InvalidArgument("job " + j.name.value +
                           ": catch-up window must be 0..7 days and window 0..366 days");
  }
  if (j.lane_template.size() > 200) {
    return InvalidArgument("job " + j.name.value + ": lane template longer than 200 bytes");
  }
  if (auto targets = ParseNotifyTargets(j.notify_targets); !targets.ok()) {
    return InvalidArgument("job " + j.name.value + ": " + targets.status().message());
  }
  auto config = CanonicalizeJson(j.config_json);
  if (!config.ok()) {
    return InvalidArgument("job " + j.name.value +
                           ": config must be a JSON object: " + config.status().message());
  }
  return Status::Ok();
}

Status CheckJobChange(const JobChange& change, bool exists, Millis updated_at) {
  const std::string& name = change.job.name.value;
  if (change.kind == JobChange::Kind::kCreate) {
    if (exists) return Conflict("job " + name + " already exists");
    return Status::Ok();
  }
  if (!exists) return NotFound("no job named '" + name + "'");
  if (change.expected_updated_at != 0 && change.expected_updated_at != updated_at) {
    return Conflict("job " + name + " was changed by someone else meanwhile: read it again");
  }
  return Status::Ok();
}

Status CheckJobDeletable(const std::string& job, std::int64_t open) {
  if (open == 0) return Status::Ok();
  return Conflict("job " + job + " has " + std::to_string(open) + " open execution" +
                  (open == 1 ? "" : "s") +
                  " (queued or running): cancel or let them finish first, or disable the job "
                  "instead");
}

Status ValidateTenant(const Tenant& tenant) {
  if (!IsValidTenantId(tenant.id.value)) {
    return InvalidArgument("invalid tenant id '" + tenant.id.value +
                           "': must match [a-z0-9][a-z0-9_-]{0,49}");
  }
  if (tenant.name.size() > 200) return InvalidArgument("tenant name longer than 200 bytes");
  return Status::Ok();
}

Status ValidateUser(const User& user) {
  if (user.name.empty() || user.name.size() > 100 ||
      user.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789._@-") !=
          std::string::npos) {
    return InvalidArgument("invalid user name '" + user.name + "': [a-z0-9._@-], 1..100");
  }
  if (user.password_hash.empty()) return InvalidArgument("a user needs a password hash");
  return ValidatePrincipalLists(user.scopes, user.tenants);
}

Status ValidateToken(const ApiToken& token) {
  if (token.secret_hash.size() != 64)
    return InvalidArgument("token secret hash must be hex SHA-256");
  if (token.principal.empty() || token.principal.size() > 200 || token.name.size() > 200) {
    return InvalidArgument("a token needs a principal (and names of at most 200 bytes)");
  }
  return ValidatePrincipalLists(token.scopes, token.tenants);
}

Status ValidateSession(const Session& session) {
  if (session.id_hash.size() != 64 || session.user.empty() || session.csrf_token.empty()) {
    return InvalidArgument("a session needs an id hash, a user and a CSRF token");
  }
  return Status::Ok();
}

Status ValidateWorker(const WorkerInfo& w) {
  if (w.id.empty() || w.id.value.size() > 200 || w.hostname.size() > 255) {
    return InvalidArgument("a worker needs an id (at most 200 bytes)");
  }
  if (w.state == WorkerState::kStale) {
    return InvalidArgument("stale is a state readers see, never one a worker reports");
  }
  if (w.threads < 0 || w.busy < 0) return InvalidArgument("worker threads and busy are >= 0");
  return Status::Ok();
}

Status ValidateGrant(std::string_view principal, std::string_view tenant) {
  if (principal.empty() || principal.size() > 200) return InvalidArgument("bad principal");
  if (tenant != "*" && !IsValidTenantId(tenant)) {
    return InvalidArgument("invalid tenant '" + std::string(tenant) + "'");
  }
  return Status::Ok();
}

Status ValidateLock(std::string_view name, std::string_view holder, Millis ttl_ms) {
  if (name.empty() || holder.empty() || ttl_ms < 1) {
    return InvalidArgument("a lock needs a name, a holder and a positive ttl");
  }
  return Status::Ok();
}

Status ValidateEffectName(std::string_view name) {
  if (!IsValidEffectName(name)) {
    return InvalidArgument("invalid effect name: 1..120 characters of [A-Za-z0-9._:-]");
  }
  return Status::Ok();
}

Status ValidateEffectCommit(std::string_view name, std::string_view detail) {
  TE_RETURN_IF_ERROR(ValidateEffectName(name));
  if (detail.size() > 64 * 1024) return InvalidArgument("effect detail longer than 64 KiB");
  return Status::Ok();
}

Status ValidateAuditRecord(const AuditRecord& record) {
  if (record.actor.empty() || record.action.empty() || record.target.empty()) {
    return InvalidArgument("audit records need an actor, an action and a target");
  }
  return Status::Ok();
}

Status ValidateListLimit(int limit) {
  if (limit < 1 || limit > 1000) return InvalidArgument("limit must be 1..1000");
  return Status::Ok();
}

Status ValidateLogLimit(int limit) {
  if (limit < 1) return InvalidArgument("limit must be >= 1");
  return Status::Ok();
}

Status ValidateSweepBatch(int max_batch) {
  if (max_batch < 1) return InvalidArgument("sweep batch must be >= 1");
  return Status::Ok();
}

Status ValidateReclaim(int max_pages) {
  if (max_pages < 1 || max_pages > kMaxReclaimPages) {
    return InvalidArgument("max_pages must be in 1.." + std::to_string(kMaxReclaimPages));
  }
  return Status::Ok();
}

Status ValidatePurge(const RetentionCutoffs& cutoffs, int max_rows) {
  if (max_rows < 1 || max_rows > kMaxPurgeBatch) {
    return InvalidArgument("purge batch must be between 1 and " + std::to_string(kMaxPurgeBatch));
  }
  if (cutoffs.executions_ended_before < 0 || cutoffs.logs_before < 0 || cutoffs.audit_before < 0) {
    return InvalidArgument("retention cutoffs must not be negative");
  }
  return Status::Ok();
}

Status ValidateCancel(const OperatorAction& action) {
  if (action.actor.empty()) return InvalidArgument("cancel needs an actor");
  return Status::Ok();
}

Status ValidateReplay(const ReplayRequest& request) {
  if (request.action.actor.empty()) return InvalidArgument("replay needs an operator identity");
  if (request.action.reason.empty()) return InvalidArgument("replay needs a reason");
  return Status::Ok();
}

Status ValidateApproval(const OperatorAction& approver) {
  if (approver.actor.empty()) return InvalidArgument("approval needs an operator identity");
  return Status::Ok();
}

Status NewerSchemaError(int version, int supported) {
  return Unavailable("database schema version " + std::to_string(version) +
                     " is newer than this binary's (" + std::to_string(supported) +
                     "); upgrade taskengine");
}

// --- executions --------------------------------------------------------------

Status CheckLease(const std::optional<StateRow>& row, const LeaseRef& lease) {
  if (!row) return NotFound("no execution " + std::to_string(lease.id.value));
  if (row->version != lease.version || row->state.status != ExecutionStatus::kRunning) {
    return Stale("claim version " + std::to_string(lease.version.value) + " of execution " +
                 std::to_string(lease.id.value) + " is not current (current " +
                 std::to_string(row->version.value) + ", status " +
                 std::string(ToString(row->state.status)) + ")");
  }
  return Status::Ok();
}

Lease NewLease(const ClaimRow& due, const Transition& t, Millis now, const std::string& queue) {
  const StateRow& row = due.row;
  Lease lease;
  lease.id = row.id;
  lease.version = ClaimVersion(row.version.value + (t.bump_claim ? 1 : 0));
  lease.job = due.job;
  lease.tenant = TenantId(row.tenant);
  lease.queue = queue;
  lease.attempt = t.attempt;
  lease.payload_json = due.payload_json;
  lease.idempotency_key = due.idempotency_key;
  lease.lease_ms = row.lease_ms;
  lease.lease_expires_at = now + row.lease_ms;
  return lease;
}

HeartbeatReply HeartbeatReplyFor(const StateRow& row, Millis now) {
  HeartbeatReply reply;
  reply.lease_expires_at = now + row.lease_ms;
  reply.cancel_requested = row.state.cancel_requested;
  return reply;
}

bool EndsFailedAttempt(ExecutionStatus from, ExecutionStatus to) {
  return from == ExecutionStatus::kRunning && to != ExecutionStatus::kRunning &&
         to != ExecutionStatus::kSucceeded;
}

bool EndsWithFailureNotice(ExecutionStatus from, ExecutionStatus to) {
  const bool failure = to == ExecutionStatus::kFailed || to == ExecutionStatus::kQuarantined ||
                       to == ExecutionStatus::kPartiallyCanceled;
  const bool told = from == ExecutionStatus::kFailed || from == ExecutionStatus::kQuarantined;
  return failure && !told;
}

Status ValidateNotifyLimit(int max_pending) {
  if (max_pending < 1 || max_pending > 10'000) {
    return InvalidArgument("the outbox limit must be 1..10000 (got " + std::to_string(max_pending) +
                           ")");
  }
  return Status::Ok();
}

bool IsEmptyNotifyState(const NotifyJobState& state) {
  return state.sent_at.empty() && state.suppressed == 0;
}

bool HoldsLane(ExecutionStatus s) {
  return s == ExecutionStatus::kQueued || s == ExecutionStatus::kRunning ||
         s == ExecutionStatus::kFailed || s == ExecutionStatus::kQuarantined;
}

bool BlocksLane(ExecutionStatus head_status) {
  return head_status == ExecutionStatus::kFailed || head_status == ExecutionStatus::kQuarantined;
}

bool LeavesLane(const StateRow& row, ExecutionStatus to) {
  return !row.lane_key.empty() && HoldsLane(row.state.status) && !HoldsLane(to);
}

void SortBlockedFirst(std::vector<LaneStatus>& lanes) {
  std::stable_sort(lanes.begin(), lanes.end(),
                   [](const LaneStatus& a, const LaneStatus& b) { return a.blocked > b.blocked; });
}

std::int64_t FirstRecentOutcomeHour(Millis now) { return now / kMillisPerHour - 23; }

void StatusCounters::CountTransition(const StateRow& row, const Transition& t, Millis now) {
  const ExecutionStatus from = row.state.status;
  const ExecutionStatus to = t.to;
  if (from == to) return;
  counts[{row.tenant, row.queue, static_cast<int>(from)}] -= 1;
  counts[{row.tenant, row.queue, static_cast<int>(to)}] += 1;
  if (IsTerminal(to)) outcomes[{now / kMillisPerHour, row.tenant, static_cast<int>(to)}] += 1;
  if (!record_events) return;
  const std::optional<LifecycleKind> kind = LifecycleKindOf(from, to, t.failure_class, t.trigger);
  if (!kind) return;
  LifecycleEvent& e = events.emplace_back();
  e.kind = *kind;
  e.id = row.id;
  e.job = JobName(row.job);
  e.tenant = TenantId(row.tenant);
  e.queue = row.queue;
  e.status = to;
  e.failure_class = t.failure_class;
  e.at = now;
  if (from == ExecutionStatus::kRunning) {  // an attempt ended
    e.attempt = row.state.attempt;
    e.started_at = row.started_at;
    e.worker = row.worker;
  }
  if (to == ExecutionStatus::kQueued) e.run_at = t.run_at;
}

void StatusCounters::CountAdmission(const std::string& queue, const std::string& tenant) {
  counts[{tenant, queue, static_cast<int>(ExecutionStatus::kQueued)}] += 1;
}

void StatusCounters::Add(const StatusCounters& other) {
  for (const auto& [k, v] : other.counts) counts[k] += v;
  for (const auto& [k, v] : other.outcomes) outcomes[k] += v;
  events.insert(events.end(), other.events.begin(), other.events.end());
}

void StatusCounters::Clear() {
  counts.clear();
  outcomes.clear();
  events.clear();
}

FinishPlan PlanFinish(const FinishRequest& f, Millis now, double jitter01) {
  FinishPlan plan;
  Event& e = plan.event;
  e.now = now;
  e.jitter01 = jitter01;
  switch (f.kind) {
    case FinishRequest::Kind::kComplete:
      e.kind = EventKind::kSucceed;
      plan.result = f.result_json;
      plan.error = std::string_view();
      plan.progress = 100;
      break;
    case FinishRequest::Kind::kFail:
      e.kind = EventKind::kFail;
      e.failure_class = f.failure_class;
      e.unsupported_schema = f.unsupported_schema;
      e.retry_after_ms = std::max<Millis>(0, f.retry_after_ms);
      plan.error = f.error;
      break;
    case FinishRequest::Kind::kRelease:
      e.kind = EventKind::kRelease;
      break;
  }
  return plan;
}

std::string LeaseExpiredError(int attempt) {
  return "lease expired (attempt " + std::to_string(attempt) + ")";
}

std::string UnstartedLeaseExpiredError(int attempt) {
  return "lease expired before its handler started (attempt " + std::to_string(attempt) +
         " given back)";
}

void CountRecovered(SweepReport& report, ExecutionStatus to) {
  ++report.recovered;
  switch (to) {
    case ExecutionStatus::kQueued:
      ++report.requeued;
      break;
    case ExecutionStatus::kFailed:
      ++report.failed;
      break;
    case ExecutionStatus::kQuarantined:
      ++report.quarantined;
      break;
    case ExecutionStatus::kCanceled:
    case ExecutionStatus::kPartiallyCanceled:
      ++report.canceled;
      break;
    default:
      break;
  }
}

Status ValidateExecutionFilter(const ExecutionFilter& f) {
  TE_RETURN_IF_ERROR(ValidateListLimit(f.limit));
  if (f.offset < 0 || f.offset > kMaxListOffset) {
    return InvalidArgument("offset must be 0.." + std::to_string(kMaxListOffset));
  }
  return Status::Ok();
}

namespace {

// The statuses a search asks for (none: any), in status order.
std::vector<int> ListStatuses(const ExecutionFilter& f) {
  std::vector<int> out;
  if (f.status) out.push_back(static_cast<int>(*f.status));
  for (ExecutionStatus s : f.statuses) out.push_back(static_cast<int>(s));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The tenants a search asks for: nullopt = any; sorted, without repeats.
std::optional<std::vector<std::string>> ListTenants(const ExecutionFilter& f) {
  std::optional<std::vector<std::string>> out;
  if (f.tenants) {
    out.emplace();
    for (const TenantId& t : *f.tenants) out->push_back(t.value);
  }
  if (f.tenant) {
    const bool granted = !out || std::find(out->begin(), out->end(), f.tenant->value) != out->end();
    out = granted ? std::vector<std::string>{f.tenant->value} : std::vector<std::string>{};
  }
  if (out) {
    std::sort(out->begin(), out->end());
    out->erase(std::unique(out->begin(), out->end()), out->end());
  }
  return out;
}

}  // namespace

std::vector<ListPart> PlanListParts(const ExecutionFilter& f, const ListIndexing& indexing) {
  std::vector<std::optional<std::string>> tenants;
  if (auto listed = ListTenants(f)) {
    for (std::string& t : *listed) tenants.emplace_back(std::move(t));
  } else {
    tenants.emplace_back(std::nullopt);
  }
  // The statuses of the seeks, for every tenant.
  std::vector<ListPart> by_status;
  for (int s : ListStatuses(f)) by_status.push_back(ListPart{std::nullopt, s, false});
  const bool by_job_or_time = f.job || f.queued_from != 0 || f.queued_to != 0;
  if (by_status.empty() && by_job_or_time && indexing.job_and_time_indexes_without_running) {
    by_status.push_back(ListPart{std::nullopt, std::nullopt, /*not_running=*/true});
    by_status.push_back(ListPart{std::nullopt, static_cast<int>(ExecutionStatus::kRunning), false});
  }
  if (by_status.empty()) by_status.emplace_back();
  std::vector<ListPart> parts;
  for (const auto& t : tenants) {
    for (ListPart part : by_status) {
      part.tenant = t;
      parts.push_back(std::move(part));
    }
  }
  return parts;
}

ListSql BuildListSql(const ExecutionFilter& f, const ListPart& part, std::string_view columns,
                     std::int64_t row_limit, bool count_only, char placeholder,
                     ListIndexing indexing) {
  ListSql out;
  std::string where;
  std::string from = " FROM executions";
  auto arg = [&](ListArg a) {
    out.args.push_back(std::move(a));
    return std::string(1, placeholder) + std::to_string(out.args.size());
  };
  auto number = [&](std::int64_t n) { return arg(ListArg{false, n, {}}); };
  auto text = [&](const std::string& t) { return arg(ListArg{true, 0, t}); };
  auto add = [&](const std::string& condition) {
    where += where.empty() ? " WHERE " : " AND ";
    where += condition;
  };
  if (f.job) add("job = " + text(f.job->value));
  if (part.tenant) {
    add("tenant = " + text(*part.tenant));
    // Lets the planner use the index of tenant executions (partial: tenant <> '').
    if (!part.tenant->empty()) add("tenant <> ''");
  }
  constexpr int kRunning = static_cast<int>(ExecutionStatus::kRunning);
  if (part.status && indexing.status_index_without_running) {
    if (*part.status == kRunning) {
      // The planners match the leases index's condition only to a literal.
      if (indexing.index_hints) from += " INDEXED BY executions_leases";
      add("status = " + std::to_string(kRunning));
    } else {
      add("status = " + number(*part.status));
      add("status <> " + std::to_string(kRunning));
    }
  } else if (part.status) {
    add("status = " + number(*part.status));
  }
  if (part.not_running) add("status <> " + std::to_string(kRunning));
  if (!f.triggers.empty()) {
    std::string in;
    for (Trigger t : f.triggers) in += (in.empty() ? "" : ", ") + number(static_cast<int>(t));
    add("\"trigger\" IN (" + in + ")");
  }
  // A time range open at one end is closed at the other (0 and the largest
  // time): the planners then estimate it as the narrow window it usually is
  // ("the last hour") and seek the time index instead of walking every row.
  constexpr Millis kEndOfTime = std::numeric_limits<Millis>::max();
  if (f.queued_from != 0 || f.queued_to != 0) {
    add("queued_at >= " + number(f.queued_from));
    add("queued_at < " + number(f.queued_to != 0 ? f.queued_to : kEndOfTime));
  }
  if (f.ended_from != 0 || f.ended_to != 0) {
    // Only ended executions: the index of finish times holds only those.
    add("finished_at > 0");
    add("finished_at >= " + number(f.ended_from));
    add("finished_at < " + number(f.ended_to != 0 ? f.ended_to : kEndOfTime));
  }
  if (f.before.value != 0) add("id < " + number(f.before.value));
  std::string select = "SELECT " + std::string(count_only ? "id" : columns) + from + where +
                       " ORDER BY id DESC LIMIT " + number(row_limit);
  out.sql = count_only ? "SELECT COUNT(*) FROM (" + select + ") AS matches" : std::move(select);
  return out;
}

std::int64_t ListPartRowLimit(const ExecutionFilter& f) {
  return static_cast<std::int64_t>(f.offset) + f.limit + 1;
}

ExecutionPage MergeListParts(std::vector<std::vector<Execution>> parts, const ExecutionFilter& f) {
  std::vector<Execution> all;
  for (auto& part : parts) {
    for (Execution& e : part) all.push_back(std::move(e));
  }
  std::sort(all.begin(), all.end(),
            [](const Execution& a, const Execution& b) { return a.id > b.id; });
  ExecutionPage page;
  const auto offset = static_cast<std::size_t>(f.offset);
  const auto limit = static_cast<std::size_t>(f.limit);
  for (std::size_t i = offset; i < all.size() && i < offset + limit; ++i) {
    page.items.push_back(std::move(all[i]));
  }
  if (all.size() > offset + limit && !page.items.empty()) page.next_before = page.items.back().id;
  return page;
}

bool TotalFromCounters(const ExecutionFilter& f) {
  return !f.job && f.triggers.empty() && f.queued_from == 0 && f.queued_to == 0 &&
         f.ended_from == 0 && f.ended_to == 0;
}

TenantScope ListTotalScope(const ExecutionFilter& f) {
  TenantScope scope;
  if (auto tenants = ListTenants(f)) {
    scope.tenants.emplace();
    for (std::string& t : *tenants) scope.tenants->push_back(TenantId(std::move(t)));
  }
  return scope;
}

std::int64_t TotalOfStatuses(const StoreStats& stats, const ExecutionFilter& f) {
  const std::vector<int> statuses = ListStatuses(f);
  std::int64_t total = 0;
  for (int s = 0; s < kExecutionStatusCount; ++s) {
    if (statuses.empty() || std::binary_search(statuses.begin(), statuses.end(), s)) {
      total += stats.totals[s];
    }
  }
  return total;
}

void SetCountedTotal(ExecutionPage& page, const std::vector<std::int64_t>& counts) {
  std::int64_t total = 0;
  for (std::int64_t n : counts) total += n;
  page.total_is_lower_bound = total > kListCountCap;
  page.total = std::min(total, kListCountCap);
}

Status ReplayAlreadyPending(ExecutionId id, const std::string& requested_by) {
  return Conflict("a replay of execution " + std::to_string(id.value) + " requested by " +
                  requested_by + " is waiting for approval");
}

Status NoPendingReplay(ExecutionId id) {
  return NotFound("no replay of execution " + std::to_string(id.value) +
                  " is waiting for approval");
}

Status CheckFourEyes(const PendingReplay& pending, const OperatorAction& approver) {
  if (pending.requested_by == approver.actor) {
    return Conflict("four-eyes: " + approver.actor +
                    " asked for this replay and cannot also approve it");
  }
  return Status::Ok();
}

std::string ApprovedReplayReason(const PendingReplay& pending) {
  return pending.reason + " (requested by " + pending.requested_by + ")";
}

std::string AssumedDoneDetail(const std::string& actor) {
  return "assumed done by " + actor + " at replay";
}

const char* CancelAuditAction(ExecutionStatus to) {
  return to == ExecutionStatus::kRunning ? "execution.cancel_requested" : "execution.cancel";
}

std::string StatusJson(ExecutionStatus status) {
  return std::string("{\"status\":\"") + std::string(ToString(status)) + "\"}";
}

AuditRecord ExecutionAudit(Millis at, const std::string& actor, const std::string& tenant,
                           std::string action, ExecutionId id, ExecutionStatus before,
                           std::optional<ExecutionStatus> after, const std::string& reason) {
  AuditRecord a;
  a.at = at;
  a.actor = actor;
  a.tenant = tenant;
  a.action = std::move(action);
  a.target = ExecutionAuditTarget(id);
  a.before_json = StatusJson(before);
  if (after) a.after_json = StatusJson(*after);
  a.reason = reason;
  return a;
}

// --- effects -----------------------------------------------------------------

bool AnswerReserve(const std::optional<StoredEffect>& stored, bool cancel_requested,
                   const LeaseRef& lease, EffectReply& reply) {
  if (stored) {
    if (stored->committed) {
      reply.answer = EffectAnswer::kAlreadyDone;
      reply.committed_at = stored->committed_at;
      reply.detail = stored->detail;
      return true;
    }
    if (cancel_requested) {
      reply.answer = EffectAnswer::kCanceled;
      return true;
    }
    reply.answer =
        stored->reserved_by == lease.version ? EffectAnswer::kProceed : EffectAnswer::kAmbiguous;
    return true;
  }
  if (cancel_requested) {
    reply.answer = EffectAnswer::kCanceled;
    return true;
  }
  return false;
}

Result<EffectCommit> PlanCommit(const LeaseRef& lease, std::string_view name,
                                std::string_view detail, const std::optional<StoredEffect>& stored,
                                int attempt, Millis now) {
  EffectCommit out;
  EffectRecord& rec = out.record;
  rec.execution = lease.id;
  rec.name = std::string(name);
  rec.key = EffectKey(lease.id, name);
  if (!stored) {
    return Conflict("effect " + rec.key + " was never reserved: reserve it before the effect");
  }
  rec.reserved_at = stored->reserved_at;
  rec.committed = true;
  if (stored->committed) {  // already committed: keep the first record
    rec.reserved_by = stored->reserved_by;
    rec.attempt = stored->attempt;
    rec.committed_at = stored->committed_at;
    rec.detail = stored->detail;
    return out;
  }
  out.write = true;
  rec.reserved_by = lease.version;
  rec.attempt = attempt;
  rec.committed_at = now;
  rec.detail = std::string(detail);
  return out;
}

// --- admission -----------------------------------------------------------------

Status CheckPreparedTerms(const AdmitRequest& request, const JobPolicy& p) {
  if (!request.prepared_with) return Status::Ok();
  if (!p.enabled) return InvalidArgument("job " + request.job.value + " is disabled");
  const JobTerms stored{p.queue, p.scope, p.lane_template};
  if (*request.prepared_with != stored) {
    return Conflict("job " + request.job.value +
                    " was changed while the dispatch was prepared; nothing was admitted");
  }
  return Status::Ok();
}

Millis AdmissionRunAt(const AdmitRequest& request, Millis now) {
  return request.run_at > 0 ? request.run_at : now;
}

AdmitResult ExistingAdmission(ExecutionId id, std::string_view fingerprint, ExecutionStatus status,
                              const AdmitRequest& request) {
  AdmitResult res;
  res.id = id;
  res.outcome =
      fingerprint == request.fingerprint ? AdmitOutcome::kDuplicate : AdmitOutcome::kConflict;
  res.status = status;
  return res;
}

}  // namespace taskengine::storage_internal
