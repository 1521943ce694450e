// MariaDB backend of the storage contract. See maria_store.h for the design.
#include "storage/mariadb/maria_store.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/state_machine.h"
#include "storage/list_codec.h"
#include "storage/mariadb/maria_conn.h"
#include "storage/mariadb/maria_schema.h"
#include "storage/mariadb/maria_statements.h"
#include "storage/sql_pool.h"
#include "storage/sql_statements.h"
#include "storage/sql_store.h"
#include "storage/store_rows.h"
#include "storage/store_rules.h"

namespace taskengine {
namespace {

using namespace storage_internal;
using namespace storage_internal::sql;  // the shared statements
using maria::MariaConn;
using maria::MariaSession;

// --- SQL -------------------------------------------------------------------

// Every call about an execution locks its row first.
constexpr char kLockState[] =
    "SELECT " TE_SQL_STATE_COLUMNS " FROM executions WHERE id = ?1 FOR UPDATE";
// The state columns, then what a worker needs (from kStateColumnCount on).
// Rows another node is claiming are skipped, not waited for.
constexpr char kClaimDue[] = "SELECT " TE_SQL_STATE_COLUMNS
                             ", job, payload, COALESCE(idempotency_key, '') FROM executions"
                             " WHERE queue = ?1 AND status = 0 AND lane_parked = 0 AND run_at <= ?2"
                             " ORDER BY run_at, id LIMIT ?3 FOR UPDATE SKIP LOCKED";
// kClaimDue for a claimer that names the handlers it can run (?4: a
// HandlerFilter list): executions of other handlers are skipped.
constexpr char kClaimDueForHandlers[] =
    "SELECT " TE_SQL_STATE_COLUMNS
    ", job, payload, COALESCE(idempotency_key, '') FROM executions"
    " WHERE queue = ?1 AND status = 0 AND lane_parked = 0 AND run_at <= ?2"
    " AND job IN (SELECT name FROM job_definitions"
    " WHERE INSTR(?4, CONCAT(CHAR(31 USING utf8mb4), handler, CHAR(31 USING utf8mb4))) > 0)"
    " ORDER BY run_at, id LIMIT ?3 FOR UPDATE SKIP LOCKED";
constexpr char kExpired[] = "SELECT " TE_SQL_STATE_COLUMNS
                            " FROM executions WHERE status = 1 AND lease_expires_at < ?1"
                            " ORDER BY lease_expires_at LIMIT ?2 FOR UPDATE SKIP LOCKED";
// Lanes (O1): the admissions and un-parking of lane (?1, ?2) take turns on a
// named lock of this database, waited for at most ?3 seconds (1: taken).
constexpr char kLockLane[] =
    "SELECT GET_LOCK(CONCAT('te/', SHA1(CONCAT(DATABASE(), '/', ?1, '/', ?2))), ?3)";
constexpr char kReleaseLocks[] = "SELECT RELEASE_ALL_LOCKS()";
constexpr char kLaneFirstParked[] =
    "SELECT id FROM executions WHERE tenant = ?1 AND lane_key = ?2 AND lane_key <> ''"
    " AND status IN (0, 1, 3, 4) AND lane_parked = 1 ORDER BY id LIMIT 1 FOR UPDATE";
constexpr char kUnpark[] =
    "UPDATE executions SET lane_parked = 0, run_at = GREATEST(run_at, ?2) WHERE id = ?1";
// Counters (P8), striped by connection as on PostgreSQL: concurrent writers
// on other connections do not wait for each other's commits.
constexpr char kAddStatusCount[] =
    "INSERT INTO status_counts (tenant, queue, status, stripe, count)"
    " VALUES (?1, ?2, ?3, CONNECTION_ID() % 16, ?4) ON DUPLICATE KEY UPDATE count = count + ?4";
constexpr char kAddOutcome[] =
    "INSERT INTO hourly_outcomes (hour, tenant, status, stripe, count)"
    " VALUES (?1, ?2, ?3, CONNECTION_ID() % 16, ?4) ON DUPLICATE KEY UPDATE count = count + ?4";
constexpr char kStatusCounts[] =
    "SELECT tenant, queue, status, SUM(count) FROM status_counts"
    " GROUP BY tenant, queue, status ORDER BY tenant, queue, status";
constexpr char kRecentOutcomes[] =
    "SELECT tenant, status, SUM(count) FROM hourly_outcomes WHERE hour >= ?1"
    " GROUP BY tenant, status ORDER BY tenant";
constexpr char kOldestDue[] =
    "SELECT MIN(run_at) FROM executions"
    " WHERE queue = ?1 AND status = 0 AND lane_parked = 0 AND run_at <= ?2";
constexpr char kOldestQuarantined[] =
    "SELECT finished_at FROM executions WHERE status = 4 ORDER BY id LIMIT 1";
// ?2 (?1 for running): NULL for every tenant, else the tenants in scope as a
// comma-separated list (tenant ids hold no comma: IsValidTenantId).
constexpr char kQueuedDepths[] =
    "SELECT queue, COUNT(*), SUM(run_at <= ?1), MIN(queued_at) FROM executions"
    " WHERE status = 0 AND (?2 IS NULL OR FIND_IN_SET(tenant, ?2) > 0) GROUP BY queue";
constexpr char kRunningDepths[] =
    "SELECT queue, COUNT(*) FROM executions"
    " WHERE status = 1 AND (?1 IS NULL OR FIND_IN_SET(tenant, ?1) > 0) GROUP BY queue";
// Retention (I7): what may go (TE_SQL_PURGEABLE), oldest ended first.
constexpr char kPurgeCandidates[] =
    "SELECT id, tenant, queue, status, finished_at FROM executions WHERE" TE_SQL_PURGEABLE
    " ORDER BY finished_at LIMIT ?2 FOR UPDATE SKIP LOCKED";
constexpr char kDeleteExecutionLogs[] = "DELETE FROM execution_logs WHERE execution_id = ?1";
constexpr char kDeleteExecutionAttempts[] =
    "DELETE FROM execution_attempts WHERE execution_id = ?1";
constexpr char kDeleteExecutionEffects[] = "DELETE FROM effects WHERE execution_id = ?1";
// Schema version.
constexpr char kHasVersionTable[] =
    "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()"
    " AND table_name = 'schema_version'";
constexpr char kReadVersion[] = "SELECT MAX(version) FROM schema_version";

constexpr const char* kBeginWrite = "START TRANSACTION";
constexpr const char* kBeginRead =
    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;"
    " START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY";
// Seconds a lane's lock is waited for before the transaction is retried.
constexpr int kLaneLockWaitSeconds = 10;

// Batches of rows go to the server in statements of a power-of-two number of
// rows (at most kMaxBatchRows), so that a connection prepares few distinct
// texts whatever the batch sizes.
constexpr int kMaxBatchRows = 256;

// The size of the next statement for `remaining` rows.
int ChunkRows(std::size_t remaining) {
  int n = 1;
  while (n * 2 <= kMaxBatchRows && static_cast<std::size_t>(n * 2) <= remaining) n *= 2;
  return n;
}

// "(?1, ?2, ...)" style placeholders for `count` values from `first`.
std::string Placeholders(int first, int count) {
  std::string out;
  for (int i = 0; i < count; ++i) {
    if (i > 0) out += ", ";
    out += "?" + std::to_string(first + i);
  }
  return out;
}

// SELECT <state columns> of executions `rows` ids, locked in id order.
std::string LockRowsSql(int rows) {
  return "SELECT " TE_SQL_STATE_COLUMNS " FROM executions WHERE id IN (" + Placeholders(1, rows) +
         ") ORDER BY id FOR UPDATE";
}

// UPDATE executions e JOIN (<rows> rows of `columns`, the first being id) v
// ON e.id = v.id <on> SET <set>: the row values are ?1.. in row order; the
// statement's other arguments follow them.
std::string BatchUpdateSql(const std::vector<const char*>& columns, int rows, std::string_view on,
                           std::string_view set) {
  std::string values;
  int p = 1;
  for (int r = 0; r < rows; ++r) {
    values += r == 0 ? "SELECT " : " UNION ALL SELECT ";
    for (std::size_t c = 0; c < columns.size(); ++c) {
      if (c > 0) values += ", ";
      values += "?" + std::to_string(p++);
      if (r == 0) values += std::string(" AS ") + columns[c];
    }
  }
  return "UPDATE executions e JOIN (" + values + ") v ON e.id = v.id" + std::string(on) + " SET " +
         std::string(set);
}

using Pool = SqlPool<MariaConn>;
using PooledConn = Pool::Slot;

// One transaction's connection, its counter deltas (P8, flushed just before
// COMMIT in key order so concurrent writers lock counter rows in one order)
// and whether it holds lane locks (released when it ends).
struct Tx {
  MariaConn& c;
  MariaSession s;
  StatusCounters counters;
  bool lane_locked = false;

  Result<std::int64_t> Run(const char* sql, const SqlArgs& args = SqlArgs()) {
    return s.Exec(sql, args);
  }
};

// --- the store -----------------------------------------------------------------

class MariaStore final : public SqlStore {
 public:
  explicit MariaStore(const MariaStoreOptions& o)
      : SqlStore(maria::kMariaDialect, o.clock != nullptr ? o.clock : SystemClock::Get()),
        options_(o),
        owned_random_(o.random != nullptr
                          ? nullptr
                          : std::make_unique<SeededRandom>(
                                static_cast<std::uint64_t>(SystemClock::Get()->NowMillis()))),
        random_(o.random != nullptr ? o.random : owned_random_.get()),
        pool_(
            Pool::Options{o.pool_size, o.reconnect_backoff_min, o.reconnect_backoff_max, "MariaDB"},
            clock_, [this](MariaConn& c) { return c.Connect(options_.url); }) {}

  // Opens one connection: the server must be reachable at open.
  Status Init() {
    TE_ASSIGN_OR_RETURN(PooledConn * pc, pool_.Acquire());
    pool_.Release(pc);
    return Status::Ok();
  }

  // --- schema ---

  // DDL commits by itself in MariaDB: each version is applied and recorded
  // in turn, under a named lock so that nodes starting together take turns.
  Status Migrate() override {
    TE_ASSIGN_OR_RETURN(PooledConn * pc, pool_.Acquire());
    MariaConn& c = pc->conn;
    MariaSession s(c);
    Status st = [&]() -> Status {
      TE_ASSIGN_OR_RETURN(std::optional<std::int64_t> locked,
                          s.One("SELECT GET_LOCK(CONCAT('te/migrate/', DATABASE()), 60)", SqlArgs(),
                                [](const Row& r) { return r.Int(0); }));
      if (locked.value_or(0) != 1) return Unavailable("MariaDB: another node is migrating");
      TE_ASSIGN_OR_RETURN(int version, ReadVersion(s));
      if (version > maria::kSchemaVersion) {
        return NewerSchemaError(version, maria::kSchemaVersion);
      }
      for (int v = version; v < maria::kSchemaVersion; ++v) {
        TE_RETURN_IF_ERROR(c.Exec(maria::kMigrations[v]));
        TE_RETURN_IF_ERROR(
            c.Exec("DELETE FROM schema_version; INSERT INTO schema_version"
                   " (version) VALUES (" +
                   std::to_string(v + 1) + ")"));
      }
      return Status::Ok();
    }();
    if (c.healthy()) (void)c.Exec("SELECT RELEASE_ALL_LOCKS()");
    pool_.Release(pc);
    return st;
  }

  Result<int> SchemaVersion() override {
    return ReadValue<int>([](SqlSession& s) { return ReadVersion(s); });
  }

  // No admission from SQL yet: the dispatcher's check is the only one.
  Status SetPayloadLimit(std::int64_t) override { return Status::Ok(); }

  // --- admission ---

  Result<AdmitResult> Admit(const AdmitRequest& request) override {
    TE_ASSIGN_OR_RETURN(auto results, AdmitBatch({request}));
    return std::move(results.front());
  }

  Result<std::vector<AdmitResult>> AdmitBatch(const std::vector<AdmitRequest>& requests) override {
    const Millis now = clock_->NowMillis();
    return Write<std::vector<AdmitResult>>([&](Tx& tx) { return AdmitAll(tx, requests, now); });
  }

  Result<std::vector<AdmitResult>> CommitSchedule(
      const std::vector<AdmitRequest>& admissions,
      const std::vector<ScheduleUpdate>& updates) override {
    const Millis now = clock_->NowMillis();
    return Write<std::vector<AdmitResult>>([&](Tx& tx) -> Result<std::vector<AdmitResult>> {
      TE_ASSIGN_OR_RETURN(std::vector<AdmitResult> out, AdmitAll(tx, admissions, now));
      for (const ScheduleUpdate& u : updates) {
        SqlArgs a;
        a.Add(u.job.value).Add(u.last_fire_at).Add(u.evaluated_until).Add(u.skipped);
        a.Add(u.last_skipped_at);
        TE_RETURN_IF_ERROR(tx.Run(maria::sql::kUpdateScheduleState, a).status());
      }
      return out;
    });
  }

  // --- leasing ---

  Result<std::vector<Lease>> Claim(const ClaimRequest& request) override {
    return Write<std::vector<Lease>>([&](Tx& tx) -> Result<std::vector<Lease>> {
      const Millis now = clock_->NowMillis();
      std::string handler_filter;
      if (request.handlers) {
        TE_ASSIGN_OR_RETURN(handler_filter, HandlerFilter(*request.handlers));
      }
      std::vector<Lease> out;
      for (const QueueSlot& slot : request.slots) {
        if (slot.max <= 0) continue;
        SqlArgs due;
        due.Add(slot.queue).Add(now).Add(slot.max);
        if (request.handlers) due.Add(handler_filter);
        TE_ASSIGN_OR_RETURN(
            std::vector<ClaimRow> rows,
            tx.s.All(request.handlers ? kClaimDueForHandlers : kClaimDue, due, ReadClaimRow));
        std::vector<std::vector<SqlValue>> updates;
        for (const ClaimRow& claim : rows) {
          const StateRow& row = claim.row;
          Event e;
          e.kind = EventKind::kClaim;
          e.now = now;
          auto t = Decide(row.state, e);
          if (!t.ok()) continue;  // cannot happen for a queued row; never guess
          Lease lease = NewLease(claim, *t, now, slot.queue);
          updates.push_back({Int(row.id.value), Int(static_cast<int>(t->to)), Int(t->attempt),
                             Int(lease.version.value), Int(lease.lease_expires_at)});
          tx.counters.CountTransition(row, *t, now);
          out.push_back(std::move(lease));
        }
        TE_RETURN_IF_ERROR(
            BatchUpdate(tx, {"id", "status", "attempt", "version", "expires"}, updates, "",
                        "e.status = v.status, e.attempt = v.attempt, e.claim_version = v.version,"
                        " e.worker = ?T1, e.started_at = ?T2, e.lease_expires_at = v.expires,"
                        " e.finished_at = 0, e.handler_started = ?T3",
                        {SqlValue{SqlValue::Kind::kText, 0, request.worker.value}, Int(now),
                         Int(request.mark_started ? 1 : 0)}));
      }
      return out;
    });
  }

  std::vector<Status> MarkStarted(const std::vector<LeaseRef>& leases) override {
    using Replies = std::vector<Status>;
    auto r = Write<Replies>([&](Tx& tx) -> Result<Replies> {
      TE_ASSIGN_OR_RETURN(LockedRows rows,
                          LockInOrder(tx, IdsOf(leases, [](const LeaseRef& l) { return l.id; })));
      Replies out;
      out.reserve(leases.size());
      std::vector<std::vector<SqlValue>> marks;
      for (const LeaseRef& lease : leases) {
        TE_ASSIGN_OR_RETURN(std::optional<StateRow> row, rows.Get(tx, lease.id));
        out.push_back(CheckLease(row, lease));
        if (out.back().ok()) marks.push_back({Int(lease.id.value), Int(lease.version.value)});
      }
      TE_RETURN_IF_ERROR(BatchUpdate(tx, {"id", "version"}, marks,
                                     " AND e.claim_version = v.version AND e.status = 1",
                                     "e.handler_started = 1"));
      return out;
    });
    if (!r.ok()) return Replies(leases.size(), r.status());
    return std::move(r).value();
  }

  std::vector<Result<HeartbeatReply>> HeartbeatBatch(
      const std::vector<HeartbeatRequest>& requests) override {
    using Replies = std::vector<Result<HeartbeatReply>>;
    auto r = Write<Replies>([&](Tx& tx) -> Result<Replies> {
      const Millis now = clock_->NowMillis();
      TE_ASSIGN_OR_RETURN(
          LockedRows rows,
          LockInOrder(tx, IdsOf(requests, [](const HeartbeatRequest& h) { return h.lease.id; })));
      Replies out;
      out.reserve(requests.size());
      for (const HeartbeatRequest& h : requests) {
        TE_ASSIGN_OR_RETURN(std::optional<StateRow> row, rows.Get(tx, h.lease.id));
        Status check = CheckLease(row, h.lease);
        if (!check.ok()) {
          out.emplace_back(check);
          continue;
        }
        HeartbeatReply reply = HeartbeatReplyFor(*row, now);
        SqlArgs a;
        a.Add(h.lease.id.value).Add(reply.lease_expires_at);
        if (h.progress) {
          a.Add(std::clamp(*h.progress, 0, 100));
        } else {
          a.AddNull();
        }
        TE_RETURN_IF_ERROR(tx.Run(kHeartbeat, a).status());
        rows.Touch(h.lease.id);
        out.emplace_back(reply);
      }
      return out;
    });
    if (!r.ok()) return Replies(requests.size(), r.status());
    return std::move(r).value();
  }

  Status AppendLog(const LeaseRef& lease, LogLevel level, std::string_view message) override {
    return Write<bool>([&](Tx& tx) -> Result<bool> {
             TE_ASSIGN_OR_RETURN(std::optional<StateRow> row, LockState(tx, lease.id));
             TE_RETURN_IF_ERROR(CheckLease(row, lease));
             SqlArgs a;
             a.Add(lease.id.value).Add(row->state.attempt).Add(clock_->NowMillis());
             a.Add(static_cast<int>(level)).Add(message);
             TE_RETURN_IF_ERROR(tx.Run(kInsertLog, a).status());
             return true;
           })
        .status();
  }

  std::vector<Result<FinishReply>> FinishBatch(
      const std::vector<FinishRequest>& requests) override {
    using Replies = std::vector<Result<FinishReply>>;
    auto r = Write<Replies>([&](Tx& tx) -> Result<Replies> {
      const Millis now = clock_->NowMillis();
      std::unordered_map<std::int64_t, int> occurrences;
      for (const FinishRequest& f : requests) ++occurrences[f.lease.id.value];
      TE_ASSIGN_OR_RETURN(
          LockedRows rows,
          LockInOrder(tx, IdsOf(requests, [](const FinishRequest& f) { return f.lease.id; })));
      Replies out;
      out.reserve(requests.size());
      MariaActionTx actions(*this, tx);
      std::vector<std::vector<SqlValue>> successes;
      for (const FinishRequest& f : requests) {
        TE_ASSIGN_OR_RETURN(std::optional<StateRow> row, rows.Get(tx, f.lease.id));
        TE_ASSIGN_OR_RETURN(FinishDecision d, DecideFinish(actions, row, f, now, *random_));
        if (!d.status.ok()) {
          out.emplace_back(d.status);
          continue;
        }
        const Transition& t = d.transition;
        if (t.to == ExecutionStatus::kSucceeded && row->lane_key.empty() &&
            occurrences[f.lease.id.value] == 1) {
          // Nothing else in this batch reads this row again, and a success
          // outside a lane touches no other row: write it with the others.
          const std::string_view result = f.result_json;
          successes.push_back({Int(row->id.value), Int(static_cast<int>(t.to)), Int(t.attempt),
                               Int(t.consecutive_lease_expiries), Int(t.permanent_failures),
                               Int(t.ambiguous_failures), Int(static_cast<int>(t.failure_class)),
                               Int(t.cancel_requested ? 1 : 0), Int(t.clear_lease ? 1 : 0),
                               Int(t.finished ? now : Millis{0}),
                               result.empty()
                                   ? SqlValue{}
                                   : SqlValue{SqlValue::Kind::kText, 0, std::string(result)}});
          tx.counters.CountTransition(*row, t, now);
        } else {
          TE_RETURN_IF_ERROR(Apply(tx, *row, t, now, d.plan.result, d.plan.error, d.plan.progress));
        }
        rows.Touch(f.lease.id);
        out.emplace_back(FinishReplyFor(t));
      }
      TE_RETURN_IF_ERROR(BatchUpdate(
          tx,
          {"id", "status", "attempt", "expiries", "permanent", "ambiguous", "failure_class",
           "cancel_requested", "clear_lease", "finished_at", "result"},
          successes, "",
          "e.status = v.status, e.attempt = v.attempt,"
          " e.consecutive_lease_expiries = v.expiries, e.permanent_failures = v.permanent,"
          " e.ambiguous_failures = v.ambiguous, e.failure_class = v.failure_class,"
          " e.cancel_requested = v.cancel_requested,"
          " e.lease_expires_at = CASE WHEN v.clear_lease <> 0 THEN 0 ELSE e.lease_expires_at END,"
          " e.worker = CASE WHEN v.clear_lease <> 0 THEN '' ELSE e.worker END,"
          " e.finished_at = v.finished_at, e.result = COALESCE(v.result, e.result),"
          " e.error = '', e.progress = 100"));
      return out;
    });
    if (!r.ok()) return Replies(requests.size(), r.status());
    return std::move(r).value();
  }

  Result<SweepReport> SweepExpired(int max_batch) override {
    TE_RETURN_IF_ERROR(ValidateSweepBatch(max_batch));
    return Write<SweepReport>([&](Tx& tx) -> Result<SweepReport> {
      const Millis now = clock_->NowMillis();
      TE_ASSIGN_OR_RETURN(std::vector<StateRow> expired,
                          tx.s.All(kExpired, SqlArgs().Add(now).Add(max_batch), ReadStateRow));
      MariaActionTx actions(*this, tx);
      return RecoverExpired(actions, expired, max_batch, now, *random_);
    });
  }

  // --- retention (I7) ---

  Result<PurgeReport> Purge(const RetentionCutoffs& cutoffs, int max_rows, bool dry_run) override {
    TE_RETURN_IF_ERROR(ValidatePurge(cutoffs, max_rows));
    if (dry_run) {
      return ReadValue<PurgeReport>([&](SqlSession& s) { return CountPurgeable(s, cutoffs); });
    }
    return Write<PurgeReport>([&](Tx& tx) -> Result<PurgeReport> {
      PurgeReport r;
      if (cutoffs.executions_ended_before > 0) {
        TE_RETURN_IF_ERROR(PurgeExecutions(tx, cutoffs.executions_ended_before, max_rows, r));
      }
      TE_RETURN_IF_ERROR(PurgeOldLogsAndAudit(tx.s, cutoffs, max_rows, r));
      return r;
    });
  }

  // InnoDB reuses the space of deleted rows; nothing to do here.
  Result<std::int64_t> ReclaimSpace(int max_pages) override {
    TE_RETURN_IF_ERROR(ValidateReclaim(max_pages));
    return std::int64_t{0};
  }

  // --- reads ---

  Result<ExecutionPage> ListExecutions(const ExecutionFilter& f) override {
    TE_RETURN_IF_ERROR(ValidateExecutionFilter(f));
    const Millis now = clock_->NowMillis();
    return ReadValue<ExecutionPage>([&](SqlSession& s) -> Result<ExecutionPage> {
      const std::vector<ListPart> parts = PlanListParts(f);
      std::vector<std::vector<Execution>> rows(parts.size());
      for (std::size_t i = 0; i < parts.size(); ++i) {
        ListSql q = BuildListSql(f, parts[i], TE_SQL_EXECUTION_COLUMNS, ListPartRowLimit(f),
                                 /*count_only=*/false, '?');
        TE_RETURN_IF_ERROR(s.RunText(q.sql, ListArgs(q), [&](const Row& r) {
                              rows[i].push_back(ReadExecutionRow(r));
                            }).status());
      }
      ExecutionPage page = MergeListParts(std::move(rows), f);
      if (!f.with_total) return page;
      if (TotalFromCounters(f)) {
        TE_ASSIGN_OR_RETURN(StoreStats stats, ReadStats(s, ListTotalScope(f), now));
        page.total = TotalOfStatuses(stats, f);
        return page;
      }
      ExecutionFilter whole = f;
      whole.before = ExecutionId(0);
      std::vector<std::int64_t> counts;
      for (const ListPart& part : parts) {
        ListSql q = BuildListSql(whole, part, "", kListCountCap + 1, /*count_only=*/true, '?');
        std::int64_t n = 0;
        TE_RETURN_IF_ERROR(
            s.RunText(q.sql, ListArgs(q), [&](const Row& r) { n = r.Int(0); }).status());
        counts.push_back(n);
      }
      SetCountedTotal(page, counts);
      return page;
    });
  }

  Result<StoreStats> GetStats(const TenantScope& scope) override {
    const Millis now = clock_->NowMillis();
    return ReadValue<StoreStats>([&](SqlSession& s) { return ReadStats(s, scope, now); });
  }

  Result<std::vector<QueueDepth>> QueueDepths(const TenantScope& scope) override {
    const Millis now = clock_->NowMillis();
    std::optional<std::string> tenants;
    if (scope.tenants) {
      std::vector<std::string> ids;
      for (const TenantId& t : *scope.tenants) ids.push_back(t.value);
      tenants = JoinList(ids);
    }
    auto add_tenants = [&](SqlArgs& a) -> SqlArgs& {
      return tenants ? a.Add(*tenants) : a.AddNull();
    };
    return ReadValue<std::vector<QueueDepth>>(
        [&](SqlSession& s) -> Result<std::vector<QueueDepth>> {
          QueueDepthMap by_queue;
          SqlArgs queued;
          queued.Add(now);
          TE_RETURN_IF_ERROR(s.Run(kQueuedDepths, add_tenants(queued), [&](const Row& r) {
                                AddQueuedDepthRow(r, by_queue);
                              }).status());
          SqlArgs running;
          TE_RETURN_IF_ERROR(s.Run(kRunningDepths, add_tenants(running), [&](const Row& r) {
                                AddRunningDepthRow(r, by_queue);
                              }).status());
          return QueueDepthList(by_queue);
        });
  }

 protected:
  Status WithActionTx(const std::function<Status(ActionTx&, Millis)>& body) override {
    return Write<bool>([&](Tx& tx) -> Result<bool> {
             MariaActionTx actions(*this, tx);
             TE_RETURN_IF_ERROR(body(actions, clock_->NowMillis()));
             return true;
           })
        .status();
  }

  Status InRead(SessionBody body) override {
    return Transact<bool>(kBeginRead,
                          [&](Tx& tx) -> Result<bool> {
                            TE_RETURN_IF_ERROR(body(tx.s));
                            return true;
                          })
        .status();
  }
  Status InWrite(SessionBody body) override {
    return Write<bool>([&](Tx& tx) -> Result<bool> {
             TE_RETURN_IF_ERROR(body(tx.s));
             return true;
           })
        .status();
  }

 private:
  // The steps of the shared operator actions and sweep (store_actions.h) in
  // one transaction. LoadState locks the execution's row.
  class MariaActionTx final : public SqlActionTx {
   public:
    MariaActionTx(MariaStore& store, Tx& tx) : SqlActionTx(tx.s), store_(store), tx_(tx) {}

    Result<std::optional<StateRow>> LoadState(ExecutionId id) override {
      return LockState(tx_, id);
    }
    Status Apply(const StateRow& row, const Transition& t, Millis now,
                 std::optional<std::string_view> result, std::optional<std::string_view> error,
                 std::optional<int> progress) override {
      return store_.Apply(tx_, row, t, now, result, error, progress);
    }

   private:
    MariaStore& store_;
    Tx& tx_;
  };

  static Result<int> ReadVersion(SqlSession& s) {
    TE_ASSIGN_OR_RETURN(std::optional<std::int64_t> has,
                        s.One(kHasVersionTable, SqlArgs(), [](const Row& r) { return r.Int(0); }));
    if (has.value_or(0) == 0) return 0;
    TE_ASSIGN_OR_RETURN(std::optional<std::int64_t> v,
                        s.One(kReadVersion, SqlArgs(), [](const Row& r) { return r.Int(0); }));
    return static_cast<int>(v.value_or(0));
  }

  static Result<std::optional<StateRow>> LockState(Tx& tx, ExecutionId id) {
    return tx.s.One(kLockState, SqlArgs().Add(id.value), ReadStateRow);
  }

  template <typename T, typename IdOf>
  static std::vector<std::int64_t> IdsOf(const std::vector<T>& items, IdOf id_of) {
    std::vector<std::int64_t> ids;
    ids.reserve(items.size());
    for (const T& item : items) ids.push_back(id_of(item).value);
    return ids;
  }

  // The rows a batch locked up front, as they were when locked. A row the
  // batch changed since is read again (the same execution may appear twice).
  class LockedRows {
   public:
    void Add(StateRow row) { rows_.emplace(row.id.value, std::move(row)); }
    void Touch(ExecutionId id) {
      rows_.erase(id.value);
      touched_.push_back(id.value);
    }
    Result<std::optional<StateRow>> Get(Tx& tx, ExecutionId id) const {
      auto it = rows_.find(id.value);
      if (it != rows_.end()) return std::optional<StateRow>(it->second);
      if (std::find(touched_.begin(), touched_.end(), id.value) != touched_.end()) {
        return LockState(tx, id);
      }
      return std::optional<StateRow>();  // does not exist
    }

   private:
    std::unordered_map<std::int64_t, StateRow> rows_;
    std::vector<std::int64_t> touched_;
  };

  // Locks the executions `ids` (those that exist) in id order, so two
  // batches over the same executions never deadlock, and reads them.
  static Result<LockedRows> LockInOrder(Tx& tx, std::vector<std::int64_t> ids) {
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    LockedRows out;
    for (std::size_t i = 0; i < ids.size();) {
      const int n = ChunkRows(ids.size() - i);
      SqlArgs a;
      for (int k = 0; k < n; ++k) a.Add(ids[i + k]);
      TE_RETURN_IF_ERROR(
          tx.s.RunText(LockRowsSql(n), a, [&](const Row& r) { out.Add(ReadStateRow(r)); })
              .status());
      i += n;
    }
    return out;
  }

  // Runs BatchUpdateSql(columns, ..., on, set) over `rows` (each a list of
  // values in `columns` order), in chunks; `tail` holds the statement's other
  // arguments.
  static Status BatchUpdate(Tx& tx, const std::vector<const char*>& columns,
                            const std::vector<std::vector<SqlValue>>& rows, std::string_view on,
                            std::string_view set, const std::vector<SqlValue>& tail = {}) {
    for (std::size_t i = 0; i < rows.size();) {
      const int n = ChunkRows(rows.size() - i);
      SqlArgs a;
      for (int k = 0; k < n; ++k) {
        for (const SqlValue& v : rows[i + k]) AddValue(a, v);
      }
      for (const SqlValue& v : tail) AddValue(a, v);
      const int first_tail = n * static_cast<int>(columns.size()) + 1;
      std::string sql = BatchUpdateSql(columns, n, on, set);
      // The tail's placeholders are written ?T1, ?T2... in `set`: number them.
      for (std::size_t t = 0; t < tail.size(); ++t) {
        const std::string from = "?T" + std::to_string(t + 1);
        const std::string to = "?" + std::to_string(first_tail + static_cast<int>(t));
        for (std::size_t at = sql.find(from); at != std::string::npos; at = sql.find(from, at)) {
          sql.replace(at, from.size(), to);
        }
      }
      TE_RETURN_IF_ERROR(tx.s.RunText(sql, a, [](const Row&) {}).status());
      i += n;
    }
    return Status::Ok();
  }

  static void AddValue(SqlArgs& a, const SqlValue& v) {
    switch (v.kind) {
      case SqlValue::Kind::kNull:
        a.AddNull();
        break;
      case SqlValue::Kind::kInt:
        a.Add(v.number);
        break;
      case SqlValue::Kind::kText:
        a.Add(std::string_view(v.text));
        break;
    }
  }
  static SqlValue Int(std::int64_t v) { return SqlValue{SqlValue::Kind::kInt, v, {}}; }

  // Admits `requests` in order inside `tx`.
  Result<std::vector<AdmitResult>> AdmitAll(Tx& tx, const std::vector<AdmitRequest>& requests,
                                            Millis now) {
    std::vector<AdmitResult> out;
    out.reserve(requests.size());
    std::unordered_map<std::string, JobPolicy> jobs;
    for (const AdmitRequest& r : requests) {
      TE_ASSIGN_OR_RETURN(AdmitResult res, AdmitOne(tx, r, now, jobs));
      out.push_back(res);
    }
    return out;
  }

  Result<AdmitResult> AdmitOne(Tx& tx, const AdmitRequest& r, Millis now,
                               std::unordered_map<std::string, JobPolicy>& jobs) {
    if (!r.idempotency_key.empty()) {
      TE_ASSIGN_OR_RETURN(std::optional<AdmitResult> existing, FindByKey(tx, r));
      if (existing) return *existing;
    }
    auto it = jobs.find(r.job.value);
    if (it == jobs.end()) {
      TE_ASSIGN_OR_RETURN(std::optional<JobPolicy> policy,
                          tx.s.One(kJobPolicy, SqlArgs().Add(r.job.value), ReadJobPolicyRow));
      if (!policy) return NotFound("no job named '" + r.job.value + "'");
      it = jobs.emplace(r.job.value, std::move(*policy)).first;
    }
    const JobPolicy& p = it->second;
    bool parked = false;
    if (!r.lane_key.empty()) {
      // Admissions and un-parking of one lane take turns (O1).
      TE_RETURN_IF_ERROR(LockLane(tx, r.tenant.value, r.lane_key));
      TE_ASSIGN_OR_RETURN(std::optional<bool> open,
                          tx.s.One(kLaneOpen, SqlArgs().Add(r.tenant.value).Add(r.lane_key),
                                   [](const Row&) { return true; }));
      parked = open.has_value();
    }
    SqlArgs a;
    a.Add(r.job.value).Add(r.tenant.value).Add(p.queue);
    a.Add(static_cast<int>(r.trigger)).Add(r.requester).AddOrNull(r.idempotency_key);
    a.Add(r.payload_json).Add(r.fingerprint).Add(r.scheduled_at);
    a.Add(AdmissionRunAt(r, now)).Add(now).Add(r.lane_key);
    a.Add(r.parent.value).Add(p.retry.max_attempts).Add(p.retry.backoff_base_ms);
    a.Add(p.retry.backoff_cap_ms).Add(p.retry.max_permanent_attempts);
    a.Add(p.retry.max_ambiguous_attempts).Add(p.retry.max_consecutive_lease_expiries);
    a.Add(p.lease_ms).Add(p.retry.max_unsupported_schema_attempts);
    a.Add(parked ? 1 : 0);
    Result<std::int64_t> ins = tx.Run(kInsertExecution, a);
    if (!ins.ok()) {
      if (ins.status().code() != ErrorCode::kConflict || r.idempotency_key.empty()) {
        return ins.status();
      }
      // The key was admitted by a concurrent transaction that committed while
      // this INSERT waited for it: answer with its execution.
      TE_ASSIGN_OR_RETURN(std::optional<AdmitResult> existing, FindByKey(tx, r));
      if (existing) return *existing;
      return Unavailable("idempotency key " + r.idempotency_key +
                         " is being admitted concurrently");
    }
    AdmitResult res;
    res.outcome = AdmitOutcome::kCreated;
    res.id = ExecutionId(tx.c.last_insert_id());
    res.status = ExecutionStatus::kQueued;
    tx.counters.CountAdmission(p.queue, r.tenant.value);
    return res;
  }

  static Result<std::optional<AdmitResult>> FindByKey(Tx& tx, const AdmitRequest& r) {
    return tx.s.One(kFindByKey,
                    SqlArgs().Add(r.job.value).Add(r.tenant.value).Add(r.idempotency_key),
                    [&](const Row& row) { return ReadExistingAdmissionRow(row, r); });
  }

  static Status LockLane(Tx& tx, const std::string& tenant, const std::string& lane) {
    TE_ASSIGN_OR_RETURN(
        std::optional<std::int64_t> got,
        tx.s.One(kLockLane, SqlArgs().Add(tenant).Add(lane).Add(kLaneLockWaitSeconds),
                 [](const Row& r) { return r.Int(0); }));
    tx.lane_locked = true;
    if (got.value_or(0) != 1) {
      return Unavailable("MariaDB: timed out waiting for the lock of lane '" + lane + "'");
    }
    return Status::Ok();
  }

  // Writes a state-machine transition decided for `row`.
  // REQUIRES: the row is locked by this transaction.
  Status Apply(Tx& tx, const StateRow& row, const Transition& t, Millis now,
               std::optional<std::string_view> result, std::optional<std::string_view> error,
               std::optional<int> progress) {
    SqlArgs a;
    a.Add(row.id.value).Add(static_cast<int>(t.to));
    a.Add(t.to == ExecutionStatus::kQueued ? t.run_at : row.run_at);
    a.Add(t.attempt).Add(t.consecutive_lease_expiries).Add(t.permanent_failures);
    a.Add(t.ambiguous_failures).Add(static_cast<int>(t.failure_class));
    a.Add(t.cancel_requested ? 1 : 0).Add(t.clear_lease ? 1 : 0);
    a.Add(t.finished ? now : Millis{0});
    if (result && !result->empty()) {
      a.Add(*result);
    } else {
      a.AddNull();
    }
    if (error) {
      a.Add(*error);
    } else {
      a.AddNull();
    }
    if (progress) {
      a.Add(*progress);
    } else {
      a.AddNull();
    }
    if (t.trigger) {
      a.Add(static_cast<int>(*t.trigger));
    } else {
      a.AddNull();
    }
    TE_RETURN_IF_ERROR(tx.Run(kApplyTransition, a).status());
    tx.counters.CountTransition(row, t, now);
    if (EndsFailedAttempt(row.state.status, t.to)) {
      // History of an attempt that did not succeed (the success path writes nothing extra).
      SqlArgs h;
      h.Add(row.id.value).Add(row.state.attempt).Add(row.version.value);
      h.Add(row.worker).Add(row.started_at).Add(now).Add(static_cast<int>(t.to));
      h.Add(static_cast<int>(t.failure_class));
      h.Add(t.attempt < row.state.attempt ? 1 : 0);  // a release gives the attempt back
      h.Add(error ? *error : std::string_view());
      TE_RETURN_IF_ERROR(tx.Run(kReplaceAttempt, h).status());
    }
    if (EndsWithFailureNotice(row.state.status, t.to)) {
      TE_RETURN_IF_ERROR(
          tx.Run(maria::sql::kInsertNotifyPending, SqlArgs().Add(row.id.value).Add(now)).status());
    }
    if (LeavesLane(row, t.to)) {
      TE_RETURN_IF_ERROR(UnparkLane(tx, row.tenant, row.lane_key, now));
    }
    return Status::Ok();
  }

  // When the lane (tenant, lane) has no open, un-parked execution left, the
  // oldest parked one becomes due.
  static Status UnparkLane(Tx& tx, const std::string& tenant, const std::string& lane, Millis now) {
    TE_RETURN_IF_ERROR(LockLane(tx, tenant, lane));
    const SqlArgs key = SqlArgs().Add(tenant).Add(lane);
    TE_ASSIGN_OR_RETURN(std::optional<bool> busy,
                        tx.s.One(kLaneHasUnparkedOpen, key, [](const Row&) { return true; }));
    if (busy) return Status::Ok();
    TE_ASSIGN_OR_RETURN(std::optional<std::int64_t> next,
                        tx.s.One(kLaneFirstParked, key, [](const Row& r) { return r.Int(0); }));
    if (!next) return Status::Ok();
    return tx.Run(kUnpark, SqlArgs().Add(*next).Add(now)).status();
  }

  Status FlushCounts(Tx& tx) {
    for (const auto& [k, v] : tx.counters.counts) {
      if (v == 0) continue;
      SqlArgs a;
      a.Add(std::get<0>(k)).Add(std::get<1>(k)).Add(std::get<2>(k)).Add(v);
      TE_RETURN_IF_ERROR(tx.Run(kAddStatusCount, a).status());
    }
    for (const auto& [k, v] : tx.counters.outcomes) {
      if (v == 0) continue;
      SqlArgs a;
      a.Add(std::get<0>(k)).Add(std::get<1>(k)).Add(std::get<2>(k)).Add(v);
      TE_RETURN_IF_ERROR(tx.Run(kAddOutcome, a).status());
    }
    return Status::Ok();
  }

  // The counters of `scope` (GetStats): cost independent of history (P8).
  static Result<StoreStats> ReadStats(SqlSession& s, const TenantScope& scope, Millis now) {
    StoreStats out;
    TE_RETURN_IF_ERROR(s.Run(kStatusCounts, SqlArgs(), [&](const Row& r) {
                          AddStatusCountRow(r, scope, out);
                        }).status());
    TE_RETURN_IF_ERROR(
        s.Run(kRecentOutcomes, SqlArgs().Add(FirstRecentOutcomeHour(now)), [&](const Row& r) {
           AddRecentOutcomeRow(r, scope, out);
         }).status());
    FinishStats(out);
    if (scope.tenants) return out;  // oldest due per queue: global scope only
    for (QueueStats& q : out.queues) {
      TE_RETURN_IF_ERROR(s.Run(kOldestDue, SqlArgs().Add(q.queue).Add(now), [&](const Row& r) {
                            if (!r.IsNull(0)) q.oldest_due_at = r.Int(0);
                          }).status());
    }
    TE_RETURN_IF_ERROR(s.Run(kOldestQuarantined, SqlArgs(), [&](const Row& r) {
                          out.oldest_quarantined_at = r.Int(0);
                        }).status());
    return out;
  }

  // The arguments of a search statement.
  static SqlArgs ListArgs(const ListSql& q) {
    SqlArgs a;
    for (const ListArg& arg : q.args) {
      if (arg.is_text) {
        a.Add(arg.text);
      } else {
        a.Add(arg.number);
      }
    }
    return a;
  }

  // Removes up to `max_rows` due executions with their logs, attempts and
  // effects; their counters go down with them.
  static Status PurgeExecutions(Tx& tx, Millis ended_before, int max_rows, PurgeReport& r) {
    struct Doomed {
      std::int64_t id;
      std::string tenant, queue;
      int status;
      Millis finished_at;
    };
    TE_ASSIGN_OR_RETURN(
        std::vector<Doomed> doomed,
        tx.s.All(kPurgeCandidates, SqlArgs().Add(ended_before).Add(max_rows), [](const Row& row) {
          return Doomed{row.Int(0), row.Text(1), row.Text(2), static_cast<int>(row.Int(3)),
                        row.Int(4)};
        }));
    for (const Doomed& d : doomed) {
      for (auto [sql, count] : {std::pair{kDeleteExecutionLogs, &r.logs},
                                std::pair{kDeleteExecutionAttempts, &r.attempts},
                                std::pair{kDeleteExecutionEffects, &r.effects}}) {
        TE_ASSIGN_OR_RETURN(std::int64_t n, tx.Run(sql, SqlArgs().Add(d.id)));
        *count += n;
      }
      TE_RETURN_IF_ERROR(tx.Run(kDeleteExecution, SqlArgs().Add(d.id)).status());
      tx.counters.counts[{d.tenant, d.queue, d.status}] -= 1;
      ++r.executions;
      if (r.oldest_ended_at == 0 || d.finished_at < r.oldest_ended_at) {
        r.oldest_ended_at = d.finished_at;
      }
      r.newest_ended_at = std::max(r.newest_ended_at, d.finished_at);
    }
    r.more = static_cast<int>(doomed.size()) == max_rows;
    return Status::Ok();
  }

  // --- transactions over the pool ---

  template <typename T, typename F>
  Result<T> Write(F&& body) {
    return Transact<T>(kBeginWrite, std::forward<F>(body));
  }

  // Runs body(tx) in one transaction: BEGIN, body, counter deltas, COMMIT.
  // Any error rolls everything back. A deadlock or lock wait timeout runs the
  // whole transaction again (up to max_retries); a connection that turns out
  // dead at BEGIN (it died while idle: nothing was sent) is replaced once.
  template <typename T, typename F>
  Result<T> Transact(const char* begin_sql, F&& body) {
    bool replaced_dead = false;
    for (int attempt = 0;; ++attempt) {
      TE_ASSIGN_OR_RETURN(PooledConn * pc, pool_.Acquire());
      MariaConn& c = pc->conn;
      Status begin = c.Exec(begin_sql);
      if (!begin.ok()) {
        const bool lost = !c.healthy();
        pool_.Release(pc);
        if (lost && !replaced_dead) {
          replaced_dead = true;
          continue;
        }
        return AsUnavailable(begin, lost);
      }
      Tx tx{c, MariaSession(c), {}, false};
      tx.counters.record_events = ObservesLifecycle();
      Result<T> r = body(tx);
      Status st = r.status();
      if (st.ok()) st = FlushCounts(tx);
      if (st.ok()) {
        st = c.Exec("COMMIT");
        if (st.ok()) {
          if (tx.lane_locked) (void)c.Exec(kReleaseLocks);
          pool_.Release(pc);
          PublishLifecycle(std::move(tx.counters.events));
          return r;
        }
      }
      const bool retry = maria::IsRetryable(c.last_error());
      if (c.healthy()) {
        if (!c.Exec("ROLLBACK").ok()) c.Close();
      }
      if (c.healthy() && tx.lane_locked) (void)c.Exec(kReleaseLocks);
      const bool lost = !c.healthy();
      pool_.Release(pc);
      if (lost) return AsUnavailable(st, true);
      if (retry && attempt < options_.max_retries) continue;
      return st;
    }
  }

  static Status AsUnavailable(const Status& s, bool lost) {
    if (s.code() == ErrorCode::kUnavailable) return s;
    if (lost) return Unavailable("MariaDB connection lost: " + s.message());
    return s;
  }

  // Constant after construction.
  const MariaStoreOptions options_;
  const std::unique_ptr<RandomSource> owned_random_;
  RandomSource* const random_;
  Pool pool_;
};

}  // namespace

Result<std::unique_ptr<Store>> OpenMariaStore(const MariaStoreOptions& options) {
  if (options.url.empty()) return InvalidArgument("MariaDB store needs a connection URL");
  TE_RETURN_IF_ERROR(maria::ParseMariaUrl(options.url).status());
  if (options.pool_size < 1 || options.pool_size > 1000) {
    return InvalidArgument("MariaDB pool size must be 1..1000");
  }
  if (options.reconnect_backoff_min.count() < 1 ||
      options.reconnect_backoff_max < options.reconnect_backoff_min) {
    return InvalidArgument("reconnect backoff needs 1 ms <= min <= max");
  }
  auto store = std::make_unique<MariaStore>(options);
  TE_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace taskengine
