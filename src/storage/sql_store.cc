#include "storage/sql_store.h"

#include "storage/list_codec.h"
#include "storage/store_rules.h"

namespace taskengine::storage_internal {

using namespace sql;  // NOLINT(google-build-using-namespace): the statement table

// --- job definitions ---

Status WriteJobRow(SqlSession& s, const SqlDialect& dialect, const JobDefinition& job, Millis now) {
  SqlArgs a;
  a.Add(job.name.value).Add(job.display_name).Add(job.handler).Add(job.queue);
  a.Add(static_cast<int>(job.scope)).Add(job.schedule).Add(job.timezone);
  a.Add(job.timeout_ms).Add(job.lease_ms).Add(job.retry.max_attempts);
  a.Add(job.retry.backoff_base_ms).Add(job.retry.backoff_cap_ms);
  a.Add(job.retry.max_permanent_attempts).Add(job.retry.max_ambiguous_attempts);
  a.Add(job.retry.max_consecutive_lease_expiries).Add(job.lane_template);
  a.Add(job.config_json).Add(job.enabled ? 1 : 0).Add(now);
  a.Add(FormatIntList(job.accepted_schema_versions));
  a.Add(job.retry.max_unsupported_schema_attempts);
  a.Add(static_cast<int>(job.catch_up)).Add(job.catch_up_window_ms);
  a.Add(job.window_ms).Add(job.seed_digest);
  a.Add(job.notify_on_failure ? 1 : 0).Add(JoinList(job.notify_targets));
  return s.Exec(dialect.upsert_job, a).status();
}

Status SqlStore::UpsertJob(const JobDefinition& job) {
  TE_RETURN_IF_ERROR(ValidateJob(job));
  const Millis now = clock_->NowMillis();
  return InWrite([&](SqlSession& s) { return WriteJobRow(s, dialect_, job, now); });
}

Status SqlStore::ChangeJob(const JobChange& change) {
  if (change.kind == JobChange::Kind::kDelete) {
    if (!IsValidJobName(change.job.name.value)) return NotFound("no job named that");
  } else {
    TE_RETURN_IF_ERROR(ValidateJob(change.job));
  }
  if (change.audit) TE_RETURN_IF_ERROR(ValidateAuditRecord(*change.audit));
  const Millis now = clock_->NowMillis();
  const std::string& name = change.job.name.value;
  return InWrite([&](SqlSession& s) -> Status {
    TE_ASSIGN_OR_RETURN(
        std::optional<Millis> version,
        s.One(dialect_.job_version, SqlArgs().Add(name), [](const Row& r) { return r.Int(0); }));
    TE_RETURN_IF_ERROR(CheckJobChange(change, version.has_value(), version.value_or(0)));
    if (change.kind == JobChange::Kind::kDelete) {
      TE_ASSIGN_OR_RETURN(std::optional<std::int64_t> open,
                          s.One(dialect_.count_open_of_job, SqlArgs().Add(name),
                                [](const Row& r) { return r.Int(0); }));
      TE_RETURN_IF_ERROR(CheckJobDeletable(name, open.value_or(0)));
      TE_RETURN_IF_ERROR(s.Exec(kDeleteJob, SqlArgs().Add(name)).status());
      TE_RETURN_IF_ERROR(s.Exec(kDeleteJobScheduleState, SqlArgs().Add(name)).status());
    } else {
      TE_RETURN_IF_ERROR(WriteJobRow(s, dialect_, change.job, now));
    }
    if (change.audit) {
      AuditRecord r = *change.audit;
      if (r.at == 0) r.at = now;
      TE_RETURN_IF_ERROR(InsertAuditRow(s, r));
    }
    return Status::Ok();
  });
}

Result<JobDefinition> SqlStore::GetJob(const JobName& name) {
  return ReadValue<JobDefinition>([&](SqlSession& s) -> Result<JobDefinition> {
    TE_ASSIGN_OR_RETURN(std::optional<JobDefinition> job,
                        s.One(kGetJob, SqlArgs().Add(name.value), ReadJobRow));
    if (!job) return NotFound("no job named '" + name.value + "'");
    return std::move(*job);
  });
}

Result<std::vector<JobDefinition>> SqlStore::ListJobs() {
  return ReadValue<std::vector<JobDefinition>>(
      [&](SqlSession& s) { return s.All(kListJobs, SqlArgs(), ReadJobRow); });
}

// --- effects, audit, grants, lanes ---

Status RequireExecution(SqlSession& s, ExecutionId id) {
  TE_ASSIGN_OR_RETURN(std::optional<bool> exists,
                      s.One(kExists, SqlArgs().Add(id.value), [](const Row&) { return true; }));
  if (!exists) return NotFound("no execution " + std::to_string(id.value));
  return Status::Ok();
}

Status ConfirmToken(SqlSession& s, std::int64_t token_id, Millis now,
                    std::unordered_set<std::int64_t>& confirmed) {
  if (confirmed.count(token_id) > 0) return Status::Ok();
  struct Standing {
    Millis revoked_at;
    Millis expires_at;
  };
  TE_ASSIGN_OR_RETURN(std::optional<Standing> token,
                      s.One(kTokenStanding, SqlArgs().Add(token_id), [](const Row& row) {
                        return Standing{row.Int(0), row.Int(1)};
                      }));
  if (!token || token->revoked_at != 0 || (token->expires_at != 0 && now >= token->expires_at)) {
    return Unauthenticated("the API token of this request was revoked or has expired");
  }
  confirmed.insert(token_id);
  return Status::Ok();
}

Status ConfirmAdmissionTokens(SqlSession& s, const std::vector<AdmitRequest>& requests, Millis now,
                              std::unordered_set<std::int64_t>& confirmed) {
  for (const AdmitRequest& r : requests) {
    if (r.token_id != 0) TE_RETURN_IF_ERROR(ConfirmToken(s, r.token_id, now, confirmed));
  }
  return Status::Ok();
}

Result<std::vector<EffectRecord>> SqlStore::GetEffects(ExecutionId id) {
  return ReadValue<std::vector<EffectRecord>>(
      [&](SqlSession& s) -> Result<std::vector<EffectRecord>> {
        TE_RETURN_IF_ERROR(RequireExecution(s, id));
        return s.All(kListEffects, SqlArgs().Add(id.value),
                     [&](const Row& r) { return ReadEffectRow(r, id); });
      });
}

Status InsertAuditRow(SqlSession& s, const AuditRecord& r) {
  SqlArgs a;
  a.Add(r.at).Add(r.actor).Add(r.tenant).Add(r.action).Add(r.target);
  a.Add(r.before_json).Add(r.after_json).Add(r.reason);
  return s.Exec(kInsertAudit, a).status();
}

Status SqlStore::AppendAudit(const AuditRecord& record) {
  TE_RETURN_IF_ERROR(ValidateAuditRecord(record));
  return InWrite([&](SqlSession& s) {
    AuditRecord r = record;
    if (r.at == 0) r.at = clock_->NowMillis();
    return InsertAuditRow(s, r);
  });
}

Result<std::vector<AuditRecord>> SqlStore::ListAudit(const AuditFilter& f) {
  TE_RETURN_IF_ERROR(ValidateListLimit(f.limit));
  return ReadValue<std::vector<AuditRecord>>([&](SqlSession& s) {
    return s.All(kListAudit, SqlArgs().Add(f.target).Add(f.before_id).Add(f.limit), ReadAuditRow);
  });
}

Status SqlStore::WriteGrant(const char* sql, std::string_view principal, std::string_view tenant) {
  TE_RETURN_IF_ERROR(ValidateGrant(principal, tenant));
  return InWrite(
      [&](SqlSession& s) { return s.Exec(sql, SqlArgs().Add(principal).Add(tenant)).status(); });
}

Status SqlStore::Grant(std::string_view principal, std::string_view tenant) {
  return WriteGrant(dialect_.grant, principal, tenant);
}

Status SqlStore::Revoke(std::string_view principal, std::string_view tenant) {
  return WriteGrant(kRevoke, principal, tenant);
}

Result<bool> SqlStore::IsGranted(std::string_view principal, std::string_view tenant) {
  return ReadValue<bool>([&](SqlSession& s) -> Result<bool> {
    TE_ASSIGN_OR_RETURN(std::optional<bool> granted,
                        s.One(kIsGranted, SqlArgs().Add(principal).Add(tenant),
                              [](const Row& r) { return r.Int(0) != 0; }));
    return granted.value_or(false);
  });
}

namespace {

// The lane's head and counts.
Result<LaneStatus> LaneOf(SqlSession& s, const SqlLaneReads& reads, std::string_view tenant,
                          std::string_view lane) {
  LaneStatus out;
  out.tenant = TenantId(std::string(tenant));
  out.lane = std::string(lane);
  const SqlArgs a = SqlArgs().Add(tenant).Add(lane);
  bool head = false;
  TE_RETURN_IF_ERROR(s.Run(reads.head, a, [&](const Row& r) {
                        if (!head) ReadLaneHeadRow(r, out);
                        head = true;
                      }).status());
  bool counts = false;
  TE_RETURN_IF_ERROR(s.Run(reads.counts, a, [&](const Row& r) {
                        if (!counts) ReadLaneCountsRow(r, out);
                        counts = true;
                      }).status());
  return out;
}

}  // namespace

Result<LaneStatus> SqlStore::GetLane(const TenantId& tenant, std::string_view lane) {
  return ReadValue<LaneStatus>(
      [&](SqlSession& s) { return LaneOf(s, dialect_.lanes, tenant.value, lane); });
}

Result<std::vector<LaneStatus>> SqlStore::ListLanes(const LaneFilter& filter) {
  TE_RETURN_IF_ERROR(ValidateListLimit(filter.limit));
  return ReadValue<std::vector<LaneStatus>>([&](SqlSession& s) -> Result<std::vector<LaneStatus>> {
    SqlArgs a;
    a.Add(filter.limit);
    if (filter.tenant) a.Add(filter.tenant->value);
    using Name = std::pair<std::string, std::string>;  // (tenant, lane)
    TE_ASSIGN_OR_RETURN(
        std::vector<Name> names,
        s.All(filter.tenant ? dialect_.lanes.open_lanes_of_tenant : dialect_.lanes.open_lanes, a,
              [](const Row& r) { return Name(r.Text(0), r.Text(1)); }));
    std::vector<LaneStatus> out;
    for (const auto& [tenant, name] : names) {
      TE_ASSIGN_OR_RETURN(LaneStatus lane, LaneOf(s, dialect_.lanes, tenant, name));
      out.push_back(std::move(lane));
    }
    SortBlockedFirst(out);
    return out;
  });
}

// --- failure notifications (I6) ---

Result<NotifyOutbox> SqlStore::ReadNotifyOutbox(int max_pending) {
  TE_RETURN_IF_ERROR(ValidateNotifyLimit(max_pending));
  return ReadValue<NotifyOutbox>([&](SqlSession& s) -> Result<NotifyOutbox> {
    NotifyOutbox out;
    TE_ASSIGN_OR_RETURN(
        out.pending, s.All(kListNotifyPending, SqlArgs().Add(max_pending), ReadNotifyPendingRow));
    TE_ASSIGN_OR_RETURN(out.jobs, s.All(kListNotifyState, SqlArgs(), ReadNotifyStateRow));
    return out;
  });
}

Status SqlStore::UpdateNotifyOutbox(const NotifyOutboxUpdate& update) {
  return InWrite([&](SqlSession& s) -> Status {
    for (const NotifyPending& p : update.done) {
      TE_RETURN_IF_ERROR(
          s.Exec(kDeleteNotifyPending, SqlArgs().Add(p.execution.value).Add(p.ended_at)).status());
    }
    for (const NotifyJobState& j : update.jobs) {
      if (IsEmptyNotifyState(j)) {
        TE_RETURN_IF_ERROR(s.Exec(kDeleteNotifyState, SqlArgs().Add(j.job.value)).status());
        continue;
      }
      SqlArgs a;
      a.Add(j.job.value).Add(FormatIntList(j.sent_at)).Add(j.suppressed).Add(j.suppressed_since);
      TE_RETURN_IF_ERROR(s.Exec(dialect_.upsert_notify_state, a).status());
    }
    return Status::Ok();
  });
}

// --- tenants, locks, schedule states ---

Status SqlStore::UpsertTenant(const Tenant& tenant) {
  TE_RETURN_IF_ERROR(ValidateTenant(tenant));
  return InWrite([&](SqlSession& s) {
    SqlArgs a;
    a.Add(tenant.id.value).Add(tenant.name).Add(tenant.active ? 1 : 0).Add(clock_->NowMillis());
    return s.Exec(dialect_.upsert_tenant, a).status();
  });
}

Result<Tenant> SqlStore::GetTenant(const TenantId& id) {
  return ReadValue<Tenant>([&](SqlSession& s) -> Result<Tenant> {
    TE_ASSIGN_OR_RETURN(std::optional<Tenant> t,
                        s.One(kGetTenant, SqlArgs().Add(id.value), ReadTenantRow));
    if (!t) return NotFound("no tenant '" + id.value + "'");
    return std::move(*t);
  });
}

Result<std::vector<Tenant>> SqlStore::ListTenants(bool active_only) {
  return ReadValue<std::vector<Tenant>>([&](SqlSession& s) {
    return s.All(kListTenants, SqlArgs().Add(active_only ? 1 : 0), ReadTenantRow);
  });
}

Result<bool> SqlStore::AcquireLock(std::string_view name, std::string_view holder, Millis ttl_ms) {
  TE_RETURN_IF_ERROR(ValidateLock(name, holder, ttl_ms));
  return WriteValue<bool>([&](SqlSession& s) -> Result<bool> {
    const Millis now = clock_->NowMillis();
    TE_RETURN_IF_ERROR(
        s.Exec(dialect_.acquire_lock, SqlArgs().Add(name).Add(holder).Add(now + ttl_ms).Add(now))
            .status());
    TE_ASSIGN_OR_RETURN(std::optional<bool> held,
                        s.One(kLockHolder, SqlArgs().Add(name),
                              [&](const Row& r) { return r.TextView(0) == holder; }));
    return held.value_or(false);
  });
}

Status SqlStore::ReleaseLock(std::string_view name, std::string_view holder) {
  return InWrite([&](SqlSession& s) {
    return s.Exec(kReleaseLock, SqlArgs().Add(name).Add(holder)).status();
  });
}

Result<std::vector<ScheduleState>> SqlStore::ListScheduleStates() {
  return ReadValue<std::vector<ScheduleState>>(
      [&](SqlSession& s) { return s.All(kListScheduleStates, SqlArgs(), ReadScheduleStateRow); });
}

// --- principals, sessions, workers ---

Status SqlStore::UpsertUser(const User& user) {
  TE_RETURN_IF_ERROR(ValidateUser(user));
  return InWrite([&](SqlSession& s) {
    SqlArgs a;
    a.Add(user.name).Add(user.password_hash).Add(JoinList(user.scopes));
    a.Add(JoinList(user.tenants)).Add(user.disabled ? 1 : 0).Add(clock_->NowMillis());
    return s.Exec(dialect_.upsert_user, a).status();
  });
}

Result<User> SqlStore::GetUser(std::string_view name) {
  return ReadValue<User>([&](SqlSession& s) -> Result<User> {
    TE_ASSIGN_OR_RETURN(std::optional<User> user,
                        s.One(kGetUser, SqlArgs().Add(name), ReadUserRow));
    if (!user) return NotFound("no user '" + std::string(name) + "'");
    return std::move(*user);
  });
}

Result<std::vector<User>> SqlStore::ListUsers() {
  return ReadValue<std::vector<User>>(
      [&](SqlSession& s) { return s.All(kListUsers, SqlArgs(), ReadUserRow); });
}

Result<std::int64_t> SqlStore::CreateToken(const ApiToken& token) {
  TE_RETURN_IF_ERROR(ValidateToken(token));
  return WriteValue<std::int64_t>([&](SqlSession& s) -> Result<std::int64_t> {
    SqlArgs a;
    a.Add(token.name).Add(token.secret_hash).Add(token.principal);
    a.Add(JoinList(token.scopes)).Add(JoinList(token.tenants));
    a.Add(clock_->NowMillis()).Add(token.expires_at);
    TE_ASSIGN_OR_RETURN(std::optional<std::int64_t> id,
                        s.One(dialect_.create_token, a, [](const Row& r) { return r.Int(0); }));
    if (!id) return Internal("INSERT ... RETURNING id returned no row");
    return *id;
  });
}

Result<ApiToken> SqlStore::FindToken(std::string_view secret_hash) {
  return ReadValue<ApiToken>([&](SqlSession& s) -> Result<ApiToken> {
    TE_ASSIGN_OR_RETURN(std::optional<ApiToken> token,
                        s.One(kFindToken, SqlArgs().Add(secret_hash), ReadTokenRow));
    if (!token) return NotFound("no such token");
    return std::move(*token);
  });
}

Status SqlStore::RevokeToken(std::int64_t id) {
  return InWrite([&](SqlSession& s) -> Status {
    TE_ASSIGN_OR_RETURN(std::int64_t changed,
                        s.Exec(kRevokeToken, SqlArgs().Add(id).Add(clock_->NowMillis())));
    if (changed == 0) return NotFound("no token " + std::to_string(id));
    return Status::Ok();
  });
}

Result<std::vector<ApiToken>> SqlStore::ListTokens() {
  return ReadValue<std::vector<ApiToken>>(
      [&](SqlSession& s) { return s.All(kListTokens, SqlArgs(), ReadTokenRow); });
}

Status SqlStore::TouchToken(std::int64_t id) {
  return InWrite([&](SqlSession& s) {
    return s.Exec(kTouchToken, SqlArgs().Add(id).Add(clock_->NowMillis())).status();
  });
}

Status SqlStore::CreateSession(const Session& session) {
  TE_RETURN_IF_ERROR(ValidateSession(session));
  return InWrite([&](SqlSession& s) {
    const Millis now = clock_->NowMillis();
    SqlArgs a;
    a.Add(session.id_hash).Add(session.user).Add(session.csrf_token);
    a.Add(now).Add(now).Add(session.expires_at);
    return s.Exec(kCreateSession, a).status();
  });
}

Result<Session> SqlStore::GetSession(std::string_view id_hash) {
  return ReadValue<Session>([&](SqlSession& s) -> Result<Session> {
    TE_ASSIGN_OR_RETURN(std::optional<Session> session,
                        s.One(kGetSession, SqlArgs().Add(id_hash), ReadSessionRow));
    if (!session) return NotFound("no such session");
    return std::move(*session);
  });
}

Status SqlStore::TouchSession(std::string_view id_hash) {
  return InWrite([&](SqlSession& s) {
    return s.Exec(kTouchSession, SqlArgs().Add(id_hash).Add(clock_->NowMillis())).status();
  });
}

Status SqlStore::DeleteSession(std::string_view id_hash) {
  return InWrite(
      [&](SqlSession& s) { return s.Exec(kDeleteSession, SqlArgs().Add(id_hash)).status(); });
}

Status SqlStore::ReportWorker(const WorkerInfo& w) {
  TE_RETURN_IF_ERROR(ValidateWorker(w));
  return InWrite([&](SqlSession& s) {
    const Millis now = clock_->NowMillis();
    SqlArgs a;
    a.Add(w.id.value).Add(w.hostname).Add(static_cast<std::int64_t>(w.pid));
    a.Add(static_cast<int>(w.state))
        .Add(w.current.empty() ? std::int64_t{0} : w.current.front().value)
        .Add(w.processed)
        .Add(w.failed);
    a.Add(w.started_at > 0 ? w.started_at : now).Add(now);
    a.Add(static_cast<int>(w.kind)).Add(w.threads).Add(w.busy);
    a.Add(FormatIdList(w.current, kMaxWorkerCurrent));
    return s.Exec(dialect_.report_worker, a).status();
  });
}

Result<std::vector<WorkerInfo>> SqlStore::ListWorkers(Millis seen_within_ms) {
  const Millis now = clock_->NowMillis();
  return ReadValue<std::vector<WorkerInfo>>([&](SqlSession& s) {
    return s.All(kListWorkers, SqlArgs().Add(seen_within_ms).Add(now - seen_within_ms),
                 ReadWorkerRow);
  });
}

// --- leasing ---

Result<Millis> SqlStore::NextDueIn(const std::vector<std::string>& queues) {
  return ReadValue<Millis>([&](SqlSession& s) -> Result<Millis> {
    std::optional<Millis> next;
    for (const std::string& queue : queues) {
      TE_ASSIGN_OR_RETURN(std::optional<std::optional<Millis>> run_at,
                          s.One(dialect_.next_run_at, SqlArgs().Add(queue),
                                [](const Row& r) -> std::optional<Millis> {
                                  if (r.IsNull(0)) return std::nullopt;
                                  return r.Int(0);
                                }));
      if (run_at && *run_at && (!next || **run_at < *next)) next = **run_at;
    }
    if (!next) return Millis{-1};
    return std::max<Millis>(0, *next - clock_->NowMillis());
  });
}

// --- reads of one execution ---

Result<Execution> SqlStore::GetExecution(ExecutionId id) {
  return ReadValue<Execution>([&](SqlSession& s) -> Result<Execution> {
    TE_ASSIGN_OR_RETURN(
        std::optional<Execution> e,
        s.One(dialect_.select_execution, SqlArgs().Add(id.value), ReadExecutionRow));
    if (!e) return NotFound("no execution " + std::to_string(id.value));
    return std::move(*e);
  });
}

Result<std::vector<AttemptRecord>> SqlStore::GetAttempts(ExecutionId id) {
  return ReadValue<std::vector<AttemptRecord>>(
      [&](SqlSession& s) -> Result<std::vector<AttemptRecord>> {
        TE_RETURN_IF_ERROR(RequireExecution(s, id));
        return s.All(kListAttempts, SqlArgs().Add(id.value),
                     [&](const Row& r) { return ReadAttemptRow(r, id); });
      });
}

Result<std::vector<LogEntry>> SqlStore::GetLogs(ExecutionId id, int limit) {
  TE_RETURN_IF_ERROR(ValidateLogLimit(limit));
  return ReadValue<std::vector<LogEntry>>([&](SqlSession& s) -> Result<std::vector<LogEntry>> {
    TE_RETURN_IF_ERROR(RequireExecution(s, id));
    return s.All(kGetLogs, SqlArgs().Add(id.value).Add(limit), ReadLogRow);
  });
}

// --- retention (I7) ---

namespace {

Result<std::int64_t> CountOne(SqlSession& s, const char* sql, const SqlArgs& args) {
  std::int64_t n = 0;
  TE_RETURN_IF_ERROR(s.Run(sql, args, [&](const Row& r) { n = r.Int(0); }).status());
  return n;
}

// Removes the oldest rows by id while they are older than `before`, up to
// `max_rows`; adds how many to *removed and returns whether the batch was
// full of old rows.
Result<bool> PurgeOldest(SqlSession& s, const char* oldest_sql, const char* delete_sql,
                         Millis before, int max_rows, std::int64_t* removed) {
  std::int64_t last_old = 0;
  int old_rows = 0;
  bool young = false;
  TE_RETURN_IF_ERROR(s.Run(oldest_sql, SqlArgs().Add(max_rows), [&](const Row& r) {
                        if (young || r.Int(1) >= before) {
                          young = true;
                          return;
                        }
                        last_old = r.Int(0);
                        ++old_rows;
                      }).status());
  if (old_rows == 0) return false;
  TE_ASSIGN_OR_RETURN(std::int64_t n, s.Exec(delete_sql, SqlArgs().Add(last_old).Add(before)));
  *removed += n;
  return old_rows == max_rows;
}

}  // namespace

Result<PurgeReport> CountPurgeable(SqlSession& s, const RetentionCutoffs& cutoffs) {
  PurgeReport r;
  const Millis ended = cutoffs.executions_ended_before;
  if (ended > 0) {
    TE_RETURN_IF_ERROR(s.Run(kCountPurgeable, SqlArgs().Add(ended), [&](const Row& row) {
                          r.executions = row.Int(0);
                          r.oldest_ended_at = row.Int(1);
                          r.newest_ended_at = row.Int(2);
                        }).status());
    TE_ASSIGN_OR_RETURN(r.attempts, CountOne(s, kCountPurgeableAttempts, SqlArgs().Add(ended)));
    TE_ASSIGN_OR_RETURN(r.effects, CountOne(s, kCountPurgeableEffects, SqlArgs().Add(ended)));
  }
  // Log lines: those of the executions that go, and those old enough.
  TE_ASSIGN_OR_RETURN(
      r.logs, CountOne(s, kCountPurgeableLogs, SqlArgs().Add(ended).Add(cutoffs.logs_before)));
  if (cutoffs.audit_before > 0) {
    TE_ASSIGN_OR_RETURN(r.audit, CountOne(s, kCountOldAudit, SqlArgs().Add(cutoffs.audit_before)));
  }
  return r;
}

Status PurgeOldLogsAndAudit(SqlSession& s, const RetentionCutoffs& cutoffs, int max_rows,
                            PurgeReport& r) {
  if (cutoffs.logs_before > 0) {
    TE_ASSIGN_OR_RETURN(bool more, PurgeOldest(s, kOldestLogs, kDeleteLogsUpTo, cutoffs.logs_before,
                                               max_rows, &r.logs));
    r.more = r.more || more;
  }
  if (cutoffs.audit_before > 0) {
    TE_ASSIGN_OR_RETURN(bool more, PurgeOldest(s, kOldestAudit, kDeleteAuditUpTo,
                                               cutoffs.audit_before, max_rows, &r.audit));
    r.more = r.more || more;
  }
  return Status::Ok();
}

// --- SqlActionTx ---

Result<bool> SqlActionTx::MayHaveEscapedEffects(ExecutionId id) {
  TE_ASSIGN_OR_RETURN(std::optional<bool> escaped,
                      s_.One(kMayHaveEscapedEffects, SqlArgs().Add(id.value),
                             [](const Row& r) { return r.Int(0) != 0; }));
  return escaped.value_or(false);
}

Status SqlActionTx::InsertAudit(const AuditRecord& record) { return InsertAuditRow(s_, record); }

Result<std::optional<PendingReplay>> SqlActionTx::GetPendingReplay(ExecutionId id) {
  return s_.One(kGetPendingReplay, SqlArgs().Add(id.value), ReadPendingReplayRow);
}

Status SqlActionTx::InsertPendingReplay(const ReplayRequest& request, Millis now) {
  SqlArgs a;
  a.Add(request.id.value).Add(request.action.actor).Add(request.action.reason).Add(now);
  a.Add(static_cast<int>(request.ambiguous));
  return s_.Exec(kInsertPendingReplay, a).status();
}

Status SqlActionTx::DeletePendingReplay(ExecutionId id) {
  return s_.Exec(kDeletePendingReplay, SqlArgs().Add(id.value)).status();
}

Status SqlActionTx::AssumeEffectsDone(ExecutionId id, Millis now, const std::string& detail) {
  return s_.Exec(kAssumeEffectsDone, SqlArgs().Add(id.value).Add(now).Add(detail)).status();
}

Status SqlActionTx::DropUnconfirmedEffects(ExecutionId id) {
  return s_.Exec(kDropUnconfirmedEffects, SqlArgs().Add(id.value)).status();
}

Result<std::optional<StoredEffect>> SqlActionTx::GetEffect(ExecutionId id, std::string_view name) {
  return s_.One(kGetEffect, SqlArgs().Add(id.value).Add(name), ReadStoredEffectRow);
}

Status SqlActionTx::InsertEffect(const LeaseRef& lease, std::string_view name, int attempt,
                                 Millis now) {
  SqlArgs a;
  a.Add(lease.id.value).Add(name).Add(lease.version.value).Add(attempt).Add(now);
  return s_.Exec(kReserveEffect, a).status();
}

Status SqlActionTx::UpdateCommittedEffect(const LeaseRef& lease, std::string_view name,
                                          std::string_view detail, int attempt, Millis now) {
  SqlArgs a;
  a.Add(lease.id.value).Add(name).Add(now).Add(detail).Add(lease.version.value).Add(attempt);
  return s_.Exec(kCommitEffect, a).status();
}

Status SqlActionTx::DeleteReservedEffect(const LeaseRef& lease, std::string_view name) {
  SqlArgs a;
  a.Add(lease.id.value).Add(name).Add(lease.version.value);
  return s_.Exec(kReleaseEffect, a).status();
}

Status SqlActionTx::ConfirmToken(std::int64_t token_id, Millis now) {
  return storage_internal::ConfirmToken(s_, token_id, now, tokens_);
}

}  // namespace taskengine::storage_internal
