// The part of the storage contract that is the same SQL on every SQL backend,
// written once over SqlSession (sql_session.h): job definitions, grants,
// tenants, locks, principals, sessions, workers, audit, notifications and the
// reads of one execution, plus the steps of the shared operator actions
// (SqlActionTx). A backend derives from SqlStore and provides its read and
// write transactions (InRead, InWrite), the dialect's statements, and what is
// its own: schema, admission, claims, finishing, the sweep, retention,
// searches and counters.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "storage/sql_session.h"
#include "storage/sql_statements.h"
#include "storage/store_actions.h"
#include "taskengine/clock.h"

namespace taskengine::storage_internal {

class SqlStore : public ActionStore {
 public:
  // --- leasing ---
  Result<Millis> NextDueIn(const std::vector<std::string>& queues) override;

  // --- job definitions ---
  Status UpsertJob(const JobDefinition& job) override;
  Status ChangeJob(const JobChange& change) override;
  Result<JobDefinition> GetJob(const JobName& name) override;
  Result<std::vector<JobDefinition>> ListJobs() override;

  // --- effects, audit, grants, lanes ---
  Result<std::vector<EffectRecord>> GetEffects(ExecutionId id) override;
  Status AppendAudit(const AuditRecord& record) override;
  Result<std::vector<AuditRecord>> ListAudit(const AuditFilter& filter) override;
  Status Grant(std::string_view principal, std::string_view tenant) override;
  Status Revoke(std::string_view principal, std::string_view tenant) override;
  Result<bool> IsGranted(std::string_view principal, std::string_view tenant) override;
  Result<LaneStatus> GetLane(const TenantId& tenant, std::string_view lane) override;
  Result<std::vector<LaneStatus>> ListLanes(const LaneFilter& filter) override;

  // --- failure notifications (I6) ---
  Result<NotifyOutbox> ReadNotifyOutbox(int max_pending) override;
  Status UpdateNotifyOutbox(const NotifyOutboxUpdate& update) override;

  // --- tenants, locks, schedule states ---
  Status UpsertTenant(const Tenant& tenant) override;
  Result<Tenant> GetTenant(const TenantId& id) override;
  Result<std::vector<Tenant>> ListTenants(bool active_only) override;
  Result<bool> AcquireLock(std::string_view name, std::string_view holder, Millis ttl_ms) override;
  Status ReleaseLock(std::string_view name, std::string_view holder) override;
  Result<std::vector<ScheduleState>> ListScheduleStates() override;

  // --- principals, sessions, workers ---
  Status UpsertUser(const User& user) override;
  Result<User> GetUser(std::string_view name) override;
  Result<std::vector<User>> ListUsers() override;
  Result<std::int64_t> CreateToken(const ApiToken& token) override;
  Result<ApiToken> FindToken(std::string_view secret_hash) override;
  Status RevokeToken(std::int64_t id) override;
  Result<std::vector<ApiToken>> ListTokens() override;
  Status TouchToken(std::int64_t id) override;
  Status CreateSession(const Session& session) override;
  Result<Session> GetSession(std::string_view id_hash) override;
  Status TouchSession(std::string_view id_hash) override;
  Status DeleteSession(std::string_view id_hash) override;
  Status ReportWorker(const WorkerInfo& worker) override;
  Result<std::vector<WorkerInfo>> ListWorkers(Millis seen_within_ms) override;

  // --- reads of one execution ---
  Result<Execution> GetExecution(ExecutionId id) override;
  Result<std::vector<AttemptRecord>> GetAttempts(ExecutionId id) override;
  Result<std::vector<LogEntry>> GetLogs(ExecutionId id, int limit) override;

 protected:
  SqlStore(const SqlDialect& dialect, Clock* clock) : dialect_(dialect), clock_(clock) {}

  using SessionBody = FunctionRef<Status(SqlSession&)>;
  // Runs `body` in one read transaction (one consistent snapshot where the
  // backend has them).
  virtual Status InRead(SessionBody body) = 0;
  // Runs `body` in one write transaction, committed when it returns OK and
  // rolled back otherwise. The backend may run `body` again when it retries
  // the whole transaction.
  virtual Status InWrite(SessionBody body) = 0;

  // InRead and InWrite for a body with a value: the value of its last run.
  template <typename T, typename F>
  Result<T> ReadValue(F&& body) {
    return Value<T>(true, std::forward<F>(body));
  }
  template <typename T, typename F>
  Result<T> WriteValue(F&& body) {
    return Value<T>(false, std::forward<F>(body));
  }

  const SqlDialect& dialect_;
  Clock* const clock_;

 private:
  template <typename T, typename F>
  Result<T> Value(bool read, F&& body) {
    std::optional<T> out;
    auto run = [&](SqlSession& s) -> Status {
      Result<T> r = body(s);
      if (!r.ok()) return r.status();
      out.emplace(std::move(*r));
      return Status::Ok();
    };
    TE_RETURN_IF_ERROR(read ? InRead(run) : InWrite(run));
    return std::move(*out);
  }

  Status WriteGrant(const char* sql, std::string_view principal, std::string_view tenant);
};

// Steps shared with the backends' own methods.
// Inserts `job`, or replaces the row of its name (keeping created_at).
Status WriteJobRow(SqlSession& s, const SqlDialect& dialect, const JobDefinition& job, Millis now);
Status InsertAuditRow(SqlSession& s, const AuditRecord& record);
// kNotFound unless execution `id` exists.
Status RequireExecution(SqlSession& s, ExecutionId id);
// AdmitRequest::token_id, FinishRequest::token_id: kUnauthenticated unless
// API token `token_id` exists, is not revoked and has not expired at `now`.
// `confirmed` holds the tokens already confirmed in this transaction: one of
// them is not read again; another is read once and added.
Status ConfirmToken(SqlSession& s, std::int64_t token_id, Millis now,
                    std::unordered_set<std::int64_t>& confirmed);
// ConfirmToken for the token of each of `requests` (none: 0).
Status ConfirmAdmissionTokens(SqlSession& s, const std::vector<AdmitRequest>& requests, Millis now,
                              std::unordered_set<std::int64_t>& confirmed);
// Retention (I7): what Purge would remove under `cutoffs` (its dry run).
Result<PurgeReport> CountPurgeable(SqlSession& s, const RetentionCutoffs& cutoffs);
// Retention (I7): removes the log lines and audit records older than the
// cutoffs, at most `max_rows` of each, oldest first; adds them to `r` (and
// sets r.more when a batch was full).
Status PurgeOldLogsAndAudit(SqlSession& s, const RetentionCutoffs& cutoffs, int max_rows,
                            PurgeReport& r);

// The steps of ActionTx (store_actions.h) that are the same SQL on every SQL
// backend; a backend adds LoadState, Apply and InsertAudit as it writes them.
class SqlActionTx : public ActionTx {
 public:
  // `confirmed_tokens`: the tokens confirmed in this transaction so far
  // (ConfirmToken), when the backend keeps them beyond this object; nullptr:
  // its own set.
  explicit SqlActionTx(SqlSession& session,
                       std::unordered_set<std::int64_t>* confirmed_tokens = nullptr)
      : s_(session), tokens_(confirmed_tokens != nullptr ? *confirmed_tokens : own_tokens_) {}

  Result<bool> MayHaveEscapedEffects(ExecutionId id) override;
  Status InsertAudit(const AuditRecord& record) override;
  Result<std::optional<PendingReplay>> GetPendingReplay(ExecutionId id) override;
  Status InsertPendingReplay(const ReplayRequest& request, Millis now) override;
  Status DeletePendingReplay(ExecutionId id) override;
  Status AssumeEffectsDone(ExecutionId id, Millis now, const std::string& detail) override;
  Status DropUnconfirmedEffects(ExecutionId id) override;
  Result<std::optional<StoredEffect>> GetEffect(ExecutionId id, std::string_view name) override;
  Status InsertEffect(const LeaseRef& lease, std::string_view name, int attempt,
                      Millis now) override;
  Status UpdateCommittedEffect(const LeaseRef& lease, std::string_view name,
                               std::string_view detail, int attempt, Millis now) override;
  Status DeleteReservedEffect(const LeaseRef& lease, std::string_view name) override;
  Status ConfirmToken(std::int64_t token_id, Millis now) override;

 protected:
  ~SqlActionTx() = default;
  SqlSession& s_;

 private:
  std::unordered_set<std::int64_t> own_tokens_;
  std::unordered_set<std::int64_t>& tokens_;
};

}  // namespace taskengine::storage_internal
