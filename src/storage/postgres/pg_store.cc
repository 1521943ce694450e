// PostgreSQL backend of the storage contract. See pg_store.h for the design.
#include "storage/postgres/pg_store.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <functional>
#include <map>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/mutex.h"
#include "core/state_machine.h"
#include "platform/thread_name.h"
#include "storage/batch_rows.h"
#include "storage/list_codec.h"
#include "storage/postgres/pg_conn.h"
#include "storage/postgres/pg_schema.h"
#include "storage/sql_pool.h"
#include "storage/sql_statements.h"
#include "storage/sql_store.h"
#include "storage/store_actions.h"
#include "storage/store_rows.h"
#include "storage/store_rules.h"

namespace taskengine {
namespace {

// The list codec, the contract's rules and the row readers shared with the
// SQLite backend (list_codec.h, store_rules.h,
// store_rows.h, store_actions.h).
using namespace storage_internal;
using namespace storage_internal::sql;  // the shared statements (?N, read as $N)

using pg::Params;
using pg::PgConn;
using pg::PgResult;

// --- SQL -------------------------------------------------------------------

// Every call about an execution locks its row first: concurrent calls about
// one execution (on any node) are serialized by it.
constexpr const char* kLockState =
    "SELECT " TE_SQL_STATE_COLUMNS " FROM executions WHERE id = $1 FOR UPDATE";
// Batches lock their executions in id order first, so two batches over the
// same executions never deadlock.
constexpr const char* kLockInOrder =
    "SELECT " TE_SQL_STATE_COLUMNS
    " FROM executions WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE";
// What enqueue() admits from SQL (version 11); a write only when it changes.
constexpr const char* kSetPayloadLimit =
    "INSERT INTO settings (name, value) VALUES ('max_payload_bytes', $1)"
    " ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value"
    " WHERE settings.value <> EXCLUDED.value";

// I6: the ending of execution $1 at $2 waits in the outbox for its
// notification (a newer ending of the same execution replaces an older one).

constexpr const char* kApplyTransition =
    "UPDATE executions SET status = $2, run_at = $3, attempt = $4, consecutive_lease_expiries = $5,"
    " permanent_failures = $6, ambiguous_failures = $7, failure_class = $8, cancel_requested = $9,"
    " lease_expires_at = CASE WHEN $10::boolean THEN 0 ELSE lease_expires_at END,"
    " worker = CASE WHEN $10::boolean THEN '' ELSE worker END, finished_at = $11,"
    " result = COALESCE($12, result), error = COALESCE($13, error),"
    " progress = COALESCE($14, progress), trigger = COALESCE($15::int, trigger) WHERE id = $1";

// The due executions of one queue, oldest run_at first, that no other
// transaction holds: the batch a claim takes (an index seek into executions_due).
constexpr const char* kClaimDue =
    "SELECT " TE_SQL_STATE_COLUMNS
    ", job, payload, COALESCE(idempotency_key, '')"
    " FROM executions WHERE queue = $1 AND status = 0 AND lane_parked = 0 AND run_at <= $2"
    " ORDER BY run_at, id LIMIT $3 FOR UPDATE SKIP LOCKED";
// kClaimDue for a claimer that names the handlers it can run ($4: a
// HandlerFilter list): executions of other handlers are skipped.
constexpr const char* kClaimDueForHandlers =
    "SELECT " TE_SQL_STATE_COLUMNS
    ", job, payload, COALESCE(idempotency_key, '')"
    " FROM executions WHERE queue = $1 AND status = 0 AND lane_parked = 0 AND run_at <= $2"
    " AND job IN (SELECT name FROM job_definitions"
    " WHERE strpos($4, chr(31) || handler || chr(31)) > 0)"
    " ORDER BY run_at, id LIMIT $3 FOR UPDATE OF executions SKIP LOCKED";
// One UPDATE for the whole batch: parallel arrays (id, status, attempt, claim
// version, lease expiry).
constexpr const char* kClaimUpdate =
    "UPDATE executions AS e SET status = v.status, attempt = v.attempt, claim_version = v.version,"
    " worker = $6, started_at = $7, lease_expires_at = v.expires, finished_at = 0,"
    " handler_started = $8"
    " FROM unnest($1::bigint[], $2::int[], $3::int[], $4::bigint[], $5::bigint[])"
    " AS v(id, status, attempt, version, expires) WHERE e.id = v.id";
// L4: the current claims' handlers start (parallel arrays: id, claim version).
// REQUIRES: the rows are locked in id order first (LockInOrder).
constexpr const char* kMarkStarted =
    "UPDATE executions AS e SET handler_started = 1"
    " FROM unnest($1::bigint[], $2::bigint[]) AS v(id, version)"
    " WHERE e.id = v.id AND e.claim_version = v.version AND e.status = 1";

// Many successes at once (FinishBatch): parallel arrays, one element per
// execution; the columns as kApplyTransition writes them for a success.
constexpr const char* kApplySuccesses =
    "UPDATE executions AS e SET status = v.status, attempt = v.attempt,"
    " consecutive_lease_expiries = v.expiries, permanent_failures = v.permanent,"
    " ambiguous_failures = v.ambiguous, failure_class = v.failure_class,"
    " cancel_requested = v.cancel_requested,"
    " lease_expires_at = CASE WHEN v.clear_lease <> 0 THEN 0 ELSE e.lease_expires_at END,"
    " worker = CASE WHEN v.clear_lease <> 0 THEN '' ELSE e.worker END,"
    " finished_at = v.finished_at, result = COALESCE(v.result, e.result), error = '',"
    " progress = 100"
    " FROM unnest($1::bigint[], $2::int[], $3::int[], $4::int[], $5::int[], $6::int[], $7::int[],"
    " $8::int[], $9::int[], $10::bigint[], $11::text[]) AS v(id, status, attempt, expiries,"
    " permanent, ambiguous, failure_class, cancel_requested, clear_lease, finished_at, result)"
    " WHERE e.id = v.id";

constexpr const char* kExpired = "SELECT " TE_SQL_STATE_COLUMNS
                                 " FROM executions WHERE status = 1 AND lease_expires_at < $1"
                                 " ORDER BY lease_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED";

// ON CONFLICT on the idempotency index: of two concurrent admissions with one
// key, one inserts and the other finds nothing returned and reads the winner.
constexpr const char* kInsertExecution =
    "INSERT INTO executions (job, tenant, queue, status, trigger, requester, idempotency_key,"
    " payload, fingerprint, scheduled_at, run_at, queued_at, lane_key, parent_id, max_attempts,"
    " backoff_base_ms, backoff_cap_ms, max_permanent_attempts, max_ambiguous_attempts,"
    " max_consecutive_lease_expiries, lease_ms, max_unsupported_schema_attempts, lane_parked)"
    " VALUES ($1, $2, $3, 0, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,"
    " $19, $20, $21, $22)"
    " ON CONFLICT (job, tenant, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING"
    " RETURNING id";
// A batch of admissions outside lanes as ONE statement (AdmitBatch): ids are
// drawn first, in request order (kNextIds), so each row's id is known before
// the insert; RETURNING names the rows inserted, and a keyed row that is
// not among them met an existing key (of an earlier admission or of an
// earlier row of this batch). The sequence is looked up once per statement
// (OFFSET 0 keeps the planner from pulling the lookup into every row: per row,
// it cost about 2.5 us an id, six times the nextval itself).
constexpr const char* kNextIds =
    "SELECT nextval(s.seq) FROM (SELECT pg_get_serial_sequence('executions', 'id')::regclass"
    " AS seq OFFSET 0) AS s, generate_series(1, $1)";
constexpr const char* kInsertExecutions =
    "INSERT INTO executions (id, job, tenant, queue, status, trigger, requester, idempotency_key,"
    " payload, fingerprint, scheduled_at, run_at, queued_at, lane_key, parent_id, max_attempts,"
    " backoff_base_ms, backoff_cap_ms, max_permanent_attempts, max_ambiguous_attempts,"
    " max_consecutive_lease_expiries, lease_ms, max_unsupported_schema_attempts, lane_parked)"
    " SELECT v.id, v.job, v.tenant, v.queue, 0, v.trigger, v.requester, v.key, v.payload,"
    " v.fingerprint, v.scheduled_at, v.run_at, $21, '', v.parent_id, v.max_attempts,"
    " v.backoff_base_ms, v.backoff_cap_ms, v.max_permanent, v.max_ambiguous, v.max_expiries,"
    " v.lease_ms, v.max_unsupported, 0"
    " FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[],"
    " $7::text[], $8::text[], $9::text[], $10::bigint[], $11::bigint[], $12::bigint[],"
    " $13::int[], $14::bigint[], $15::bigint[], $16::int[], $17::int[], $18::int[],"
    " $19::bigint[], $20::int[]) WITH ORDINALITY AS v(id, job, tenant, queue, trigger,"
    " requester, key, payload, fingerprint, scheduled_at, run_at, parent_id, max_attempts,"
    " backoff_base_ms, backoff_cap_ms, max_permanent, max_ambiguous, max_expiries, lease_ms,"
    " max_unsupported, ord) ORDER BY v.ord"
    " ON CONFLICT (job, tenant, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING"
    " RETURNING id";

// Lanes (O1). A lane is (tenant, lane key): $1 is the tenant, $2 the key.
// Lane bookkeeping of one lane is serialized by an advisory lock on
// "<tenant>/<key>" (tenant ids hold no '/'); admit_from_sql takes the same one.
constexpr const char* kLockLane =
    "SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2, 7))";
constexpr const char* kLaneUnparkNext =
    "UPDATE executions SET lane_parked = 0, run_at = GREATEST(run_at, $3) WHERE id = ("
    "SELECT id FROM executions WHERE tenant = $1 AND lane_key = $2 AND lane_key <> ''"
    " AND status IN (0, 1, 3, 4) AND lane_parked = 1 ORDER BY id LIMIT 1) RETURNING queue, status";
// Retention (I7): what may go (TE_SQL_PURGEABLE), oldest ended first.
// Candidates are locked and skipped when another node holds them.
constexpr const char* kPurgeCandidates =
    "SELECT id, tenant, queue, status, finished_at FROM executions WHERE" TE_SQL_PURGEABLE
    " ORDER BY finished_at LIMIT ?2 FOR UPDATE SKIP LOCKED";
constexpr const char* kDeleteExecutionsLogs =
    "DELETE FROM execution_logs WHERE execution_id = ANY($1::bigint[])";
constexpr const char* kDeleteExecutionsAttempts =
    "DELETE FROM execution_attempts WHERE execution_id = ANY($1::bigint[])";
constexpr const char* kDeleteExecutionsEffects =
    "DELETE FROM effects WHERE execution_id = ANY($1::bigint[])";
constexpr const char* kDeleteExecutions = "DELETE FROM executions WHERE id = ANY($1::bigint[])";

constexpr const char* kInsertAttempt =
    "INSERT INTO execution_attempts (execution_id, attempt, claim_version, worker,"
    " started_at, ended_at, outcome, failure_class, released, error)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (execution_id, claim_version)"
    " DO UPDATE SET attempt = $2, worker = $4, started_at = $5, ended_at = $6, outcome = $7,"
    " failure_class = $8, released = $9, error = $10";
constexpr const char* kUpdateScheduleState =
    "INSERT INTO schedule_state AS s (job, last_fire_at, last_evaluated_at, skipped_fires,"
    " last_skipped_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (job) DO UPDATE SET"
    " last_fire_at = GREATEST(s.last_fire_at, $2), last_evaluated_at = "
    "GREATEST(s.last_evaluated_at, $3),"
    " skipped_fires = s.skipped_fires + $4, last_skipped_at = GREATEST(s.last_skipped_at, $5)";
// Counters (P8).
// A transaction's counter changes in one statement, into the stripe of its
// connection (migration 5): concurrent writers on other connections do not
// wait for each other's commits. Rows come in (tenant, queue, status) and
// (hour, tenant, status) order, so two transactions on one stripe lock them
// in one order.
constexpr const char* kAddCounts =
    "WITH s AS (INSERT INTO status_counts AS c (tenant, queue, status, stripe, count)"
    " SELECT v.tenant, v.queue, v.status, pg_backend_pid() % 16, v.n"
    " FROM unnest($1::text[], $2::text[], $3::int[], $4::bigint[]) AS v(tenant, queue, status, n)"
    " ON CONFLICT (tenant, queue, status, stripe) DO UPDATE SET count = c.count + EXCLUDED.count)"
    " INSERT INTO hourly_outcomes AS o (hour, tenant, status, stripe, count)"
    " SELECT v.hour, v.tenant, v.status, pg_backend_pid() % 16, v.n"
    " FROM unnest($5::bigint[], $6::text[], $7::int[], $8::bigint[]) AS v(hour, tenant, status, n)"
    " ON CONFLICT (hour, tenant, status, stripe) DO UPDATE SET count = o.count + EXCLUDED.count";
constexpr const char* kStatusCounts =
    "SELECT tenant, queue, status, SUM(count)::bigint FROM status_counts"
    " GROUP BY tenant, queue, status ORDER BY tenant, queue, status";
constexpr const char* kRecentOutcomes =
    "SELECT tenant, status, SUM(count)::bigint FROM hourly_outcomes WHERE hour >= $1"
    " GROUP BY tenant, status ORDER BY tenant";
constexpr const char* kOldestDue =
    "SELECT MIN(run_at) FROM executions"
    " WHERE queue = $1 AND status = 0 AND lane_parked = 0 AND run_at <= $2";
constexpr const char* kOldestQuarantined =
    "SELECT finished_at FROM executions WHERE status = 4 ORDER BY id LIMIT 1";
// $2 / $1: NULL for every tenant, else the tenants in scope.
constexpr const char* kQueuedDepths =
    "SELECT queue, COUNT(*), COUNT(*) FILTER (WHERE run_at <= $1), MIN(queued_at) FROM executions"
    " WHERE status = 0 AND ($2::text[] IS NULL OR tenant = ANY($2::text[])) GROUP BY queue";
constexpr const char* kRunningDepths =
    "SELECT queue, COUNT(*) FROM executions"
    " WHERE status = 1 AND ($1::text[] IS NULL OR tenant = ANY($1::text[])) GROUP BY queue";
// Schema (D4).
constexpr const char* kHasVersionTable = "SELECT to_regclass('schema_version') IS NOT NULL";
constexpr const char* kReadVersion = "SELECT COALESCE(MAX(version), 0) FROM schema_version";

// A3: wakes the engines LISTENing on the channel; delivered at COMMIT.
constexpr const char* kNotifyWork = "SELECT pg_notify($1, $2)";

constexpr const char* kBeginWrite = "BEGIN ISOLATION LEVEL READ COMMITTED";
constexpr const char* kBeginRead = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

// --- row mapping -------------------------------------------------------------

// Row `i` of a result, as the shared readers (store_rows.h) see it.
class PgRow final : public storage_internal::Row {
 public:
  PgRow(const PgResult& r, int i) : r_(r), i_(i) {}
  std::int64_t Int(int col) const override { return r_.Int(i_, col); }
  std::string Text(int col) const override { return r_.Text(i_, col); }
  std::string_view TextView(int col) const override { return r_.TextView(i_, col); }
  bool IsNull(int col) const override { return r_.IsNull(i_, col); }

 private:
  const PgResult& r_;
  const int i_;
};

// A pooled connection inside one transaction, as the shared store logic
// (sql_store.h) sees it.
class PgSession final : public SqlSession {
 public:
  explicit PgSession(PgConn& c) : c_(c) {}

  Result<std::int64_t> Run(const char* sql, const SqlArgs& args, RowSink each) override {
    TE_ASSIGN_OR_RETURN(PgResult r, c_.Query(sql, Params::From(args)));
    return Rows(r, each);
  }
  Result<std::int64_t> RunText(const std::string& sql, const SqlArgs& args, RowSink each) override {
    TE_ASSIGN_OR_RETURN(PgResult r, c_.QueryText(sql, Params::From(args)));
    return Rows(r, each);
  }

 private:
  static std::int64_t Rows(const PgResult& r, RowSink each) {
    for (int i = 0; i < r.rows(); ++i) each(PgRow(r, i));
    return r.affected();
  }

  PgConn& c_;
};

std::string QuoteIdentifier(const std::string& name) { return "\"" + name + "\""; }

// --- the connection pool -----------------------------------------------------

using Pool = SqlPool<PgConn>;
using PooledConn = Pool::Slot;

// One transaction's connection and its counter deltas (P8), flushed just
// before COMMIT in key order (so concurrent writers lock counter rows in one
// order and never deadlock on them).
struct Tx {
  PgConn& c;
  StatusCounters counters;
  // A3: the queues this transaction made work due in; a notification for
  // each, sent just before COMMIT.
  DueQueues wake_queues;

  // Records that this transaction makes work in `queue` due.
  void MarkWork(const std::string& queue) { wake_queues.Mark(queue); }

  Result<PgResult> Q(const char* sql, const Params& p = Params()) { return c.Query(sql, p); }
  // A write whose result is not read: sent with the next statement or the
  // COMMIT (PgConn::QueryLater); its error fails the transaction there.
  void Later(const char* sql, Params p) { c.QueryLater(sql, std::move(p)); }
};

// --- the store -----------------------------------------------------------------

// See pg_store.h. Thread-safe: each call takes its own pooled connection.
class PostgresStore final : public SqlStore {
 public:
  explicit PostgresStore(const PostgresStoreOptions& o)
      : SqlStore(kPostgresDialect, o.clock != nullptr ? o.clock : SystemClock::Get()),
        options_(o),
        owned_random_(o.random != nullptr
                          ? nullptr
                          : std::make_unique<SeededRandom>(
                                static_cast<std::uint64_t>(SystemClock::Get()->NowMillis()))),
        random_(o.random != nullptr ? o.random : owned_random_.get()),
        pool_(Pool::Options{o.pool_size, o.reconnect_backoff_min, o.reconnect_backoff_max,
                            "PostgreSQL"},
              clock_, [this](PgConn& c) { return c.Connect(options_.url, options_.schema); }),
        channel_(o.schema + "_work") {}

  ~PostgresStore() override {
    {
      MutexLock lock(listen_mu_);
      stop_listening_ = true;
    }
    listen_cv_.NotifyAll();
    if (listen_thread_.joinable()) listen_thread_.join();
  }

  // Opens one connection: the server must be reachable at open.
  Status Init() {
    TE_ASSIGN_OR_RETURN(PooledConn * pc, pool_.Acquire());
    pool_.Release(pc);
    return Status::Ok();
  }

  // --- schema ---

  Status Migrate() override {
    return Write<bool>([&](Tx& tx) -> Result<bool> {
             // Nodes migrating at once take turns; the lock ends with the transaction.
             TE_RETURN_IF_ERROR(
                 tx.c.Exec("SELECT pg_advisory_xact_lock(hashtextextended('taskengine.migrate." +
                           options_.schema + "', 7))")
                     .status());
             TE_RETURN_IF_ERROR(
                 tx.c.Exec("CREATE SCHEMA IF NOT EXISTS " + QuoteIdentifier(options_.schema))
                     .status());
             TE_RETURN_IF_ERROR(
                 tx.c.Exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                     .status());
             TE_ASSIGN_OR_RETURN(int version, ReadVersion(tx));
             if (version > pg::kSchemaVersion) {
               return NewerSchemaError(version, pg::kSchemaVersion);
             }
             for (int v = version; v < pg::kSchemaVersion; ++v) {
               TE_RETURN_IF_ERROR(tx.c.Exec(pg::kMigrations[v]).status());
               TE_RETURN_IF_ERROR(
                   tx.c.Exec("DELETE FROM schema_version; INSERT INTO schema_version "
                             "(version) VALUES (" +
                             std::to_string(v + 1) + ")")
                       .status());
             }
             return true;
           })
        .status();
  }

  Result<int> SchemaVersion() override {
    return ReadTx<int>([&](Tx& tx) { return ReadVersion(tx); });
  }

  Status SetPayloadLimit(std::int64_t bytes) override {
    return Write<bool>([&](Tx& tx) -> Result<bool> {
             TE_RETURN_IF_ERROR(tx.Q(kSetPayloadLimit, Params().Add(bytes)).status());
             return true;
           })
        .status();
  }

  // --- job definitions ---

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
        Params p;
        p.Add(u.job.value).Add(u.last_fire_at).Add(u.evaluated_until).Add(u.skipped);
        p.Add(u.last_skipped_at);
        TE_RETURN_IF_ERROR(tx.Q(kUpdateScheduleState, p).status());
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
        Params due = Params().Add(slot.queue).Add(now).Add(slot.max);
        if (request.handlers) due.Add(handler_filter);
        TE_ASSIGN_OR_RETURN(PgResult s,
                            tx.Q(request.handlers ? kClaimDueForHandlers : kClaimDue, due));
        std::vector<std::int64_t> ids, statuses, attempts, versions, expiries;
        for (int i = 0; i < s.rows(); ++i) {
          const ClaimRow claim = ReadClaimRow(PgRow(s, i));
          const StateRow& row = claim.row;
          Event e;
          e.kind = EventKind::kClaim;
          e.now = now;
          auto t = Decide(row.state, e);
          if (!t.ok()) continue;  // cannot happen for a queued row; never guess
          Lease lease = NewLease(claim, *t, now, slot.queue);
          ids.push_back(row.id.value);
          statuses.push_back(static_cast<int>(t->to));
          attempts.push_back(t->attempt);
          versions.push_back(lease.version.value);
          expiries.push_back(lease.lease_expires_at);
          tx.counters.CountTransition(row, *t, now);
          out.push_back(std::move(lease));
        }
        if (ids.empty()) continue;
        Params u;
        u.AddArray(ids).AddArray(statuses).AddArray(attempts).AddArray(versions).AddArray(expiries);
        u.Add(request.worker.value).Add(now).Add(ClaimMarksStarted(request, slot) ? 1 : 0);
        tx.Later(kClaimUpdate, std::move(u));
      }
      return out;
    });
  }

  std::vector<Status> MarkStarted(const std::vector<LeaseRef>& leases) override {
    using Replies = std::vector<Status>;
    auto r = Write<Replies>([&](Tx& tx) -> Result<Replies> {
      std::vector<std::int64_t> ids;
      for (const LeaseRef& lease : leases) ids.push_back(lease.id.value);
      TE_ASSIGN_OR_RETURN(BatchRows rows, LockInOrder(tx, ids));
      Replies out;
      out.reserve(leases.size());
      std::vector<std::int64_t> mark_ids, mark_versions;
      for (const LeaseRef& lease : leases) {
        TE_ASSIGN_OR_RETURN(std::optional<StateRow> row, RowOf(rows, tx, lease.id));
        out.push_back(CheckLease(row, lease));
        if (out.back().ok()) {
          mark_ids.push_back(lease.id.value);
          mark_versions.push_back(lease.version.value);
        }
      }
      if (!mark_ids.empty()) {
        Params m;
        m.AddArray(mark_ids).AddArray(mark_versions);
        tx.Later(kMarkStarted, std::move(m));
      }
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
      Replies out;
      out.reserve(requests.size());
      std::vector<std::int64_t> ids;
      for (const HeartbeatRequest& h : requests) ids.push_back(h.lease.id.value);
      TE_ASSIGN_OR_RETURN(BatchRows rows, LockInOrder(tx, ids));
      for (const HeartbeatRequest& h : requests) {
        TE_ASSIGN_OR_RETURN(std::optional<StateRow> row, RowOf(rows, tx, h.lease.id));
        Status check = CheckLease(row, h.lease);
        if (!check.ok()) {
          out.emplace_back(check);
          continue;
        }
        HeartbeatReply reply = HeartbeatReplyFor(*row, now);
        Params p;
        p.Add(h.lease.id.value).Add(reply.lease_expires_at);
        if (h.progress) {
          p.Add(std::clamp(*h.progress, 0, 100));
        } else {
          p.AddNull();
        }
        tx.Later(kHeartbeat, std::move(p));
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
             Params p;
             p.Add(lease.id.value).Add(row->state.attempt).Add(clock_->NowMillis());
             p.Add(static_cast<int>(level)).Add(message);
             TE_RETURN_IF_ERROR(tx.Q(kInsertLog, p).status());
             return true;
           })
        .status();
  }

  std::vector<Result<FinishReply>> FinishBatch(
      const std::vector<FinishRequest>& requests) override {
    using Replies = std::vector<Result<FinishReply>>;
    auto r = Write<Replies>([&](Tx& tx) -> Result<Replies> {
      const Millis now = clock_->NowMillis();
      Replies out;
      out.reserve(requests.size());
      std::vector<std::int64_t> ids;
      std::unordered_map<std::int64_t, int> occurrences;
      for (const FinishRequest& f : requests) {
        ids.push_back(f.lease.id.value);
        ++occurrences[f.lease.id.value];
      }
      TE_ASSIGN_OR_RETURN(BatchRows rows, LockInOrder(tx, ids));
      SuccessBatch successes;
      PgSession session(tx.c);
      PgActionTx actions(*this, tx, session);
      for (const FinishRequest& f : requests) {
        TE_ASSIGN_OR_RETURN(std::optional<StateRow> row, RowOf(rows, tx, f.lease.id));
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
          successes.Add(*row, t, now, f.result_json);
          tx.counters.CountTransition(*row, t, now);
        } else {
          TE_RETURN_IF_ERROR(Apply(tx, *row, t, now, d.plan.result, d.plan.error, d.plan.progress));
        }
        rows.Touch(f.lease.id);
        out.emplace_back(FinishReplyFor(t));
      }
      TE_RETURN_IF_ERROR(successes.Write(tx));
      return out;
    });
    if (!r.ok()) return Replies(requests.size(), r.status());
    return std::move(r).value();
  }

  Result<SweepReport> SweepExpired(int max_batch) override {
    TE_RETURN_IF_ERROR(ValidateSweepBatch(max_batch));
    return Write<SweepReport>([&](Tx& tx) -> Result<SweepReport> {
      const Millis now = clock_->NowMillis();
      std::vector<StateRow> expired;
      {
        TE_ASSIGN_OR_RETURN(PgResult s, tx.Q(kExpired, Params().Add(now).Add(max_batch)));
        for (int i = 0; i < s.rows(); ++i) expired.push_back(ReadStateRow(PgRow(s, i)));
      }
      PgSession session(tx.c);
      PgActionTx actions(*this, tx, session);
      return RecoverExpired(actions, expired, max_batch, now, *random_);
    });
  }

  // --- retention (I7) ---

  Result<PurgeReport> Purge(const RetentionCutoffs& cutoffs, int max_rows, bool dry_run) override {
    TE_RETURN_IF_ERROR(ValidatePurge(cutoffs, max_rows));
    if (dry_run) {
      return ReadTx<PurgeReport>([&](Tx& tx) {
        PgSession session(tx.c);
        return CountPurgeable(session, cutoffs);
      });
    }
    return Write<PurgeReport>([&](Tx& tx) -> Result<PurgeReport> {
      PurgeReport r;
      if (cutoffs.executions_ended_before > 0) {
        TE_RETURN_IF_ERROR(PurgeExecutions(tx, cutoffs.executions_ended_before, max_rows, r));
      }
      PgSession session(tx.c);
      TE_RETURN_IF_ERROR(PurgeOldLogsAndAudit(session, cutoffs, max_rows, r));
      return r;
    });
  }

  // Autovacuum makes the space of deleted rows reusable; nothing to do here.
  Result<std::int64_t> ReclaimSpace(int max_pages) override {
    TE_RETURN_IF_ERROR(ValidateReclaim(max_pages));
    return std::int64_t{0};
  }

  // --- effects ---

  // ReserveEffect, CommitEffect, ReleaseEffect: ActionStore (store_actions.h).

  // --- operator actions ---

  // RequestCancel, Replay, ApproveReplay: ActionStore (store_actions.h).

  // --- grants ---

  // --- lanes ---

  // --- failure notifications (I6) ---

  // --- tenants ---

  // --- scheduling ---

  // --- principals ---

  // --- workers ---

  // --- reads ---

  Result<ExecutionPage> ListExecutions(const ExecutionFilter& f) override {
    TE_RETURN_IF_ERROR(ValidateExecutionFilter(f));
    const Millis now = clock_->NowMillis();
    return ReadTx<ExecutionPage>([&](Tx& tx) -> Result<ExecutionPage> {
      const std::vector<ListPart> parts = PlanListParts(f, pg::kListIndexing);
      std::vector<std::vector<Execution>> rows(parts.size());
      for (std::size_t i = 0; i < parts.size(); ++i) {
        ListSql q = BuildListSql(f, parts[i], TE_SQL_EXECUTION_COLUMNS, ListPartRowLimit(f),
                                 /*count_only=*/false, '$', pg::kListIndexing);
        TE_ASSIGN_OR_RETURN(PgResult s, tx.c.QueryText(q.sql, ListParams(q)));
        for (int r = 0; r < s.rows(); ++r) rows[i].push_back(ReadExecutionRow(PgRow(s, r)));
      }
      ExecutionPage page = MergeListParts(std::move(rows), f);
      if (!f.with_total) return page;
      if (TotalFromCounters(f)) {
        TE_ASSIGN_OR_RETURN(StoreStats stats, ReadStats(tx, ListTotalScope(f), now));
        page.total = TotalOfStatuses(stats, f);
        return page;
      }
      ExecutionFilter whole = f;
      whole.before = ExecutionId(0);
      std::vector<std::int64_t> counts;
      for (const ListPart& part : parts) {
        ListSql q = BuildListSql(whole, part, "", kListCountCap + 1, /*count_only=*/true, '$',
                                 pg::kListIndexing);
        TE_ASSIGN_OR_RETURN(PgResult s, tx.c.QueryText(q.sql, ListParams(q)));
        counts.push_back(s.rows() > 0 ? s.Int(0, 0) : 0);
      }
      SetCountedTotal(page, counts);
      return page;
    });
  }

  Result<StoreStats> GetStats(const TenantScope& scope) override {
    const Millis now = clock_->NowMillis();
    return ReadTx<StoreStats>([&](Tx& tx) { return ReadStats(tx, scope, now); });
  }

  Result<std::vector<QueueDepth>> QueueDepths(const TenantScope& scope) override {
    const Millis now = clock_->NowMillis();
    std::vector<std::optional<std::string>> tenants;
    if (scope.tenants) {
      for (const TenantId& t : *scope.tenants) tenants.emplace_back(t.value);
    }
    auto add_tenants = [&](Params& p) -> Params& {
      return scope.tenants ? p.AddTextArray(tenants) : p.AddNull();
    };
    return ReadTx<std::vector<QueueDepth>>([&](Tx& tx) -> Result<std::vector<QueueDepth>> {
      QueueDepthMap by_queue;
      {
        Params p;
        p.Add(now);
        TE_ASSIGN_OR_RETURN(PgResult s, tx.Q(kQueuedDepths, add_tenants(p)));
        for (int i = 0; i < s.rows(); ++i) AddQueuedDepthRow(PgRow(s, i), by_queue);
      }
      {
        Params p;
        TE_ASSIGN_OR_RETURN(PgResult s, tx.Q(kRunningDepths, add_tenants(p)));
        for (int i = 0; i < s.rows(); ++i) AddRunningDepthRow(PgRow(s, i), by_queue);
      }
      return QueueDepthList(by_queue);
    });
  }

  // The counters of `scope` (GetStats): cost independent of history (P8).
  static Result<StoreStats> ReadStats(Tx& tx, const TenantScope& scope, Millis now) {
    StoreStats out;
    {
      TE_ASSIGN_OR_RETURN(PgResult s, tx.Q(kStatusCounts));
      for (int i = 0; i < s.rows(); ++i) AddStatusCountRow(PgRow(s, i), scope, out);
    }
    {
      TE_ASSIGN_OR_RETURN(PgResult s,
                          tx.Q(kRecentOutcomes, Params().Add(FirstRecentOutcomeHour(now))));
      for (int i = 0; i < s.rows(); ++i) AddRecentOutcomeRow(PgRow(s, i), scope, out);
    }
    FinishStats(out);
    if (scope.tenants) return out;  // oldest due per queue: global scope only
    for (QueueStats& q : out.queues) {
      TE_ASSIGN_OR_RETURN(PgResult s, tx.Q(kOldestDue, Params().Add(q.queue).Add(now)));
      if (s.rows() > 0 && !s.IsNull(0, 0)) q.oldest_due_at = s.Int(0, 0);
    }
    TE_ASSIGN_OR_RETURN(PgResult quarantined, tx.Q(kOldestQuarantined, Params()));
    if (quarantined.rows() > 0) out.oldest_quarantined_at = quarantined.Int(0, 0);
    return out;
  }

  // The arguments of a search statement.
  static Params ListParams(const ListSql& q) {
    Params p;
    for (const ListArg& a : q.args) {
      if (a.is_text)
        p.Add(a.text);
      else
        p.Add(a.number);
    }
    return p;
  }

  // --- wakeups (A3) ---

  // The first listener starts the LISTEN thread (its own connection, not one
  // of the pool's). Replacing the listener waits for a call in progress.
  void SetWorkListener(std::function<void()> listener) override
      EXCLUDES(listener_call_mu_, listen_mu_) {
    {
      MutexLock call(listener_call_mu_);
      MutexLock lock(listen_mu_);
      listener_ = std::move(listener);
      if (!listener_ || listen_thread_.joinable()) return;
      listen_thread_ = NamedThread("te-pg-listen", [this] { ListenLoop(); });
    }
  }

 protected:
  Status WithActionTx(const std::function<Status(ActionTx&, Millis)>& body) override {
    return Write<bool>([&](Tx& tx) -> Result<bool> {
             PgSession session(tx.c);
             PgActionTx actions(*this, tx, session);
             TE_RETURN_IF_ERROR(body(actions, clock_->NowMillis()));
             return true;
           })
        .status();
  }

 private:
  // --- retention (I7) ---

  // Removes up to `max_rows` due executions with their logs, attempts and
  // effects; their counters go down with them (flushed with the transaction).
  static Status PurgeExecutions(Tx& tx, Millis ended_before, int max_rows, PurgeReport& r) {
    TE_ASSIGN_OR_RETURN(PgResult s,
                        tx.Q(kPurgeCandidates, Params().Add(ended_before).Add(max_rows)));
    std::vector<std::int64_t> ids;
    for (int i = 0; i < s.rows(); ++i) {
      ids.push_back(s.Int(i, 0));
      tx.counters.counts[{s.Text(i, 1), s.Text(i, 2), static_cast<int>(s.Int(i, 3))}] -= 1;
      const Millis finished_at = s.Int(i, 4);
      if (r.oldest_ended_at == 0 || finished_at < r.oldest_ended_at) {
        r.oldest_ended_at = finished_at;
      }
      r.newest_ended_at = std::max(r.newest_ended_at, finished_at);
    }
    if (ids.empty()) return Status::Ok();
    for (auto [sql, count] : {std::pair{kDeleteExecutionsLogs, &r.logs},
                              std::pair{kDeleteExecutionsAttempts, &r.attempts},
                              std::pair{kDeleteExecutionsEffects, &r.effects}}) {
      TE_ASSIGN_OR_RETURN(PgResult d, tx.Q(sql, Params().AddArray(ids)));
      *count += d.affected();
    }
    TE_ASSIGN_OR_RETURN(PgResult d, tx.Q(kDeleteExecutions, Params().AddArray(ids)));
    r.executions += d.affected();
    r.more = static_cast<int>(ids.size()) == max_rows;
    return Status::Ok();
  }

  // The LISTEN thread: connects, LISTENs on channel_, and calls the listener
  // once per batch of notifications received. When the connection is lost it
  // reconnects with the pool's backoff; after a reconnect it calls the
  // listener once, since notifications sent meanwhile were lost.
  void ListenLoop() EXCLUDES(listener_call_mu_, listen_mu_) {
    auto backoff = options_.reconnect_backoff_min;
    bool listened_before = false;
    while (!StopListening()) {
      PGconn* conn = PQconnectdb(options_.url.c_str());
      bool ok = PQstatus(conn) == CONNECTION_OK;
      if (ok) {
        PGresult* r = PQexec(conn, ("LISTEN " + QuoteIdentifier(channel_)).c_str());
        ok = PQresultStatus(r) == PGRES_COMMAND_OK;
        PQclear(r);
      }
      if (!ok) {
        PQfinish(conn);
        WaitListenBackoff(backoff);
        backoff = std::min(backoff * 2, options_.reconnect_backoff_max);
        continue;
      }
      backoff = options_.reconnect_backoff_min;
      if (listened_before) CallListener();
      listened_before = true;
      const int fd = PQsocket(conn);
      while (!StopListening()) {
        pollfd p{fd, POLLIN, 0};
        // A bounded wait, so a stop is noticed within it.
        const int n = ::poll(&p, 1, 100);
        if (n < 0 && errno != EINTR) break;
        if (n <= 0) continue;
        if (PQconsumeInput(conn) == 0) break;  // connection lost
        bool any = false;
        while (PGnotify* note = PQnotifies(conn)) {
          any = true;
          PQfreemem(note);
        }
        if (any) CallListener();
        if (PQstatus(conn) != CONNECTION_OK) break;
      }
      PQfinish(conn);
      if (!StopListening()) WaitListenBackoff(backoff);
    }
  }

  bool StopListening() EXCLUDES(listen_mu_) {
    MutexLock lock(listen_mu_);
    return stop_listening_;
  }

  void WaitListenBackoff(std::chrono::milliseconds d) EXCLUDES(listen_mu_) {
    MutexLock lock(listen_mu_);
    const auto until = std::chrono::steady_clock::now() + d;
    while (!stop_listening_ && listen_cv_.WaitUntil(listen_mu_, until)) {
    }
  }

  void CallListener() EXCLUDES(listener_call_mu_, listen_mu_) {
    MutexLock call(listener_call_mu_);
    std::function<void()> f;
    {
      MutexLock lock(listen_mu_);
      f = listener_;
    }
    if (f) f();
  }

  static Result<int> ReadVersion(Tx& tx) {
    TE_ASSIGN_OR_RETURN(PgResult has, tx.Q(kHasVersionTable));
    if (has.rows() == 0 || has.Int(0, 0) == 0) return 0;
    TE_ASSIGN_OR_RETURN(PgResult s, tx.Q(kReadVersion));
    if (s.rows() == 0) return 0;
    return static_cast<int>(s.Int(0, 0));
  }

  // Locks the execution's row for the rest of the transaction; nullopt when
  // it does not exist.
  static Result<std::optional<StateRow>> LockState(Tx& tx, ExecutionId id) {
    TE_ASSIGN_OR_RETURN(PgResult s, tx.Q(kLockState, Params().Add(id.value)));
    if (s.rows() == 0) return std::optional<StateRow>();
    return std::optional<StateRow>(ReadStateRow(PgRow(s, 0)));
  }

  // Successes of a FinishBatch, written by one UPDATE (kApplySuccesses).
  class SuccessBatch {
   public:
    void Add(const StateRow& row, const Transition& t, Millis now, std::string_view result) {
      ids_.push_back(row.id.value);
      statuses_.push_back(static_cast<int>(t.to));
      attempts_.push_back(t.attempt);
      expiries_.push_back(t.consecutive_lease_expiries);
      permanent_.push_back(t.permanent_failures);
      ambiguous_.push_back(t.ambiguous_failures);
      failure_classes_.push_back(static_cast<int>(t.failure_class));
      cancel_requested_.push_back(t.cancel_requested ? 1 : 0);
      clear_lease_.push_back(t.clear_lease ? 1 : 0);
      finished_at_.push_back(t.finished ? now : Millis{0});
      results_.push_back(result.empty() ? std::nullopt : std::optional<std::string>(result));
    }
    Status Write(Tx& tx) const {
      if (ids_.empty()) return Status::Ok();
      Params p;
      p.AddArray(ids_).AddArray(statuses_).AddArray(attempts_).AddArray(expiries_);
      p.AddArray(permanent_).AddArray(ambiguous_).AddArray(failure_classes_);
      p.AddArray(cancel_requested_).AddArray(clear_lease_).AddArray(finished_at_);
      p.AddTextArray(results_);
      tx.Later(kApplySuccesses, std::move(p));
      return Status::Ok();
    }

   private:
    std::vector<std::int64_t> ids_, statuses_, attempts_, expiries_, permanent_, ambiguous_,
        failure_classes_, cancel_requested_, clear_lease_, finished_at_;
    std::vector<std::optional<std::string>> results_;
  };

  // A row of `rows`; one the batch has written is locked and read again.
  static Result<std::optional<StateRow>> RowOf(const BatchRows& rows, Tx& tx, ExecutionId id) {
    return rows.Get(id, [&](ExecutionId touched) { return LockState(tx, touched); });
  }

  // Locks the executions `ids` (those that exist) in id order, so two batches
  // over the same executions never deadlock, and reads them in one round trip.
  static Result<BatchRows> LockInOrder(Tx& tx, const std::vector<std::int64_t>& ids) {
    TE_ASSIGN_OR_RETURN(PgResult s, tx.Q(kLockInOrder, Params().AddArray(ids)));
    BatchRows out;
    for (int i = 0; i < s.rows(); ++i) out.Add(ReadStateRow(PgRow(s, i)));
    return out;
  }

  // Writes a state-machine transition decided for `row`.
  // REQUIRES: the row is locked by this transaction.
  Status Apply(Tx& tx, const StateRow& row, const Transition& t, Millis now,
               std::optional<std::string_view> result, std::optional<std::string_view> error,
               std::optional<int> progress) {
    Params p;
    p.Add(row.id.value).Add(static_cast<int>(t.to));
    p.Add(t.to == ExecutionStatus::kQueued ? t.run_at : row.run_at);
    p.Add(t.attempt).Add(t.consecutive_lease_expiries).Add(t.permanent_failures);
    p.Add(t.ambiguous_failures).Add(static_cast<int>(t.failure_class));
    p.Add(t.cancel_requested ? 1 : 0);
    p.Add(t.clear_lease);
    p.Add(t.finished ? now : Millis{0});
    if (result && !result->empty())
      p.Add(*result);
    else
      p.AddNull();
    if (error)
      p.Add(*error);
    else
      p.AddNull();
    if (progress)
      p.Add(*progress);
    else
      p.AddNull();
    if (t.trigger)
      p.Add(static_cast<int>(*t.trigger));
    else
      p.AddNull();
    TE_RETURN_IF_ERROR(tx.Q(kApplyTransition, p).status());
    tx.counters.CountTransition(row, t, now);
    if (t.to == ExecutionStatus::kQueued && row.state.status != ExecutionStatus::kQueued) {
      tx.MarkWork(row.queue);
    }
    if (EndsFailedAttempt(row.state.status, t.to)) {
      // History of an attempt that did not succeed (the success path writes nothing extra).
      Params a;
      a.Add(row.id.value).Add(row.state.attempt).Add(row.version.value);
      a.Add(row.worker).Add(row.started_at).Add(now).Add(static_cast<int>(t.to));
      a.Add(static_cast<int>(t.failure_class));
      a.Add(t.attempt < row.state.attempt ? 1 : 0);  // a release gives the attempt back
      a.Add(error ? *error : std::string_view());
      TE_RETURN_IF_ERROR(tx.Q(kInsertAttempt, a).status());
    }
    if (EndsWithFailureNotice(row.state.status, t.to)) {
      TE_RETURN_IF_ERROR(tx.Q(kInsertNotifyPending, Params().Add(row.id.value).Add(now)).status());
    }
    if (LeavesLane(row, t.to)) {
      TE_RETURN_IF_ERROR(UnparkLane(tx, row.tenant, row.lane_key, now));
    }
    return Status::Ok();
  }

  // The parameters of kAddCounts for the counter deltas of `tx`; nullopt when
  // there are none.
  static std::optional<Params> CountParams(const Tx& tx) {
    std::vector<std::optional<std::string>> tenants, queues, outcome_tenants;
    std::vector<std::int64_t> statuses, deltas, hours, outcome_statuses, outcome_deltas;
    for (const auto& [k, v] : tx.counters.counts) {
      if (v == 0) continue;
      tenants.emplace_back(std::get<0>(k));
      queues.emplace_back(std::get<1>(k));
      statuses.push_back(std::get<2>(k));
      deltas.push_back(v);
    }
    for (const auto& [k, v] : tx.counters.outcomes) {
      if (v == 0) continue;
      hours.push_back(std::get<0>(k));
      outcome_tenants.emplace_back(std::get<1>(k));
      outcome_statuses.push_back(std::get<2>(k));
      outcome_deltas.push_back(v);
    }
    if (queues.empty() && hours.empty()) return std::nullopt;
    Params p;
    p.AddTextArray(tenants).AddTextArray(queues).AddArray(statuses).AddArray(deltas);
    p.AddArray(hours).AddTextArray(outcome_tenants).AddArray(outcome_statuses);
    p.AddArray(outcome_deltas);
    return p;
  }

  // When the lane (tenant, lane) has no open, un-parked execution left, the
  // oldest parked one becomes due.
  static Status UnparkLane(Tx& tx, const std::string& tenant, const std::string& lane, Millis now) {
    TE_RETURN_IF_ERROR(tx.Q(kLockLane, Params().Add(tenant).Add(lane)).status());
    {
      TE_ASSIGN_OR_RETURN(PgResult s, tx.Q(kLaneHasUnparkedOpen, Params().Add(tenant).Add(lane)));
      if (s.rows() > 0) return Status::Ok();
    }
    TE_ASSIGN_OR_RETURN(PgResult u, tx.Q(kLaneUnparkNext, Params().Add(tenant).Add(lane).Add(now)));
    if (u.rows() > 0 && u.Int(0, 1) == static_cast<int>(ExecutionStatus::kQueued)) {
      tx.MarkWork(u.Text(0, 0));
    }
    return Status::Ok();
  }

  // The steps of the shared operator actions and sweep (store_actions.h) in
  // one transaction. LoadState locks the execution's row.
  class PgActionTx final : public SqlActionTx {
   public:
    PgActionTx(PostgresStore& store, Tx& tx, SqlSession& session)
        : SqlActionTx(session), store_(store), tx_(tx) {}

    Result<std::optional<StateRow>> LoadState(ExecutionId id) override {
      return LockState(tx_, id);
    }
    Status Apply(const StateRow& row, const Transition& t, Millis now,
                 std::optional<std::string_view> result, std::optional<std::string_view> error,
                 std::optional<int> progress) override {
      return store_.Apply(tx_, row, t, now, result, error, progress);
    }

   private:
    PostgresStore& store_;
    Tx& tx_;
  };

  // Admits `requests` in order inside `tx`: one INSERT for a batch outside
  // lanes whose jobs all exist, row by row otherwise (lane parking and the
  // "unknown job" answers need the per-row path).
  Result<std::vector<AdmitResult>> AdmitAll(Tx& tx, const std::vector<AdmitRequest>& requests,
                                            Millis now) {
    std::unordered_set<std::int64_t> tokens;
    PgSession session(tx.c);
    TE_RETURN_IF_ERROR(ConfirmAdmissionTokens(session, requests, now, tokens));
    std::vector<AdmitResult> out;
    out.reserve(requests.size());
    std::unordered_map<std::string, JobPolicy> jobs;
    bool bulk = requests.size() > 1;
    for (const AdmitRequest& r : requests) {
      if (!bulk) break;
      if (!r.lane_key.empty()) bulk = false;
    }
    for (const AdmitRequest& r : requests) {
      if (!bulk) break;
      TE_ASSIGN_OR_RETURN(bool found, LoadPolicy(tx, r.job.value, jobs));
      if (!found) bulk = false;
    }
    if (bulk) {
      for (const AdmitRequest& r : requests) {
        TE_RETURN_IF_ERROR(CheckPreparedTerms(r, jobs.at(r.job.value)));
      }
      TE_RETURN_IF_ERROR(AdmitBulk(tx, requests, now, jobs, out));
      return out;
    }
    for (const AdmitRequest& r : requests) {
      TE_ASSIGN_OR_RETURN(AdmitResult res, AdmitOne(tx, r, now, jobs));
      out.push_back(res);
    }
    return out;
  }

  // Reads the policy of job `name` into `jobs` (once per transaction).
  // False when there is no such job.
  static Result<bool> LoadPolicy(Tx& tx, const std::string& name,
                                 std::unordered_map<std::string, JobPolicy>& jobs) {
    if (jobs.count(name) > 0) return true;
    TE_ASSIGN_OR_RETURN(PgResult s, tx.Q(kJobPolicy, Params().Add(name)));
    if (s.rows() == 0) return false;
    jobs.emplace(name, ReadJobPolicyRow(PgRow(s, 0)));
    return true;
  }

  // The one-statement path of AdmitAll. REQUIRES: no request has a lane key
  // and every job is in `jobs`.
  Status AdmitBulk(Tx& tx, const std::vector<AdmitRequest>& requests, Millis now,
                   const std::unordered_map<std::string, JobPolicy>& jobs,
                   std::vector<AdmitResult>& out) {
    const int n = static_cast<int>(requests.size());
    std::vector<std::int64_t> ids;
    {
      TE_ASSIGN_OR_RETURN(PgResult s, tx.Q(kNextIds, Params().Add(n)));
      if (s.rows() != n) return Internal("nextval returned " + std::to_string(s.rows()) + " ids");
      for (int i = 0; i < n; ++i) ids.push_back(s.Int(i, 0));
      std::sort(ids.begin(), ids.end());  // request order is id order, as row by row
    }
    using Text = std::vector<std::optional<std::string>>;
    Text job, tenant, queue, requester, key, payload, fingerprint;
    std::vector<std::int64_t> trigger, scheduled_at, run_at, parent, max_attempts, base, cap,
        max_permanent, max_ambiguous, max_expiries, lease_ms, max_unsupported;
    for (const AdmitRequest& r : requests) {
      const JobPolicy& p = jobs.at(r.job.value);
      job.emplace_back(r.job.value);
      tenant.emplace_back(r.tenant.value);
      queue.emplace_back(p.queue);
      trigger.push_back(static_cast<int>(r.trigger));
      requester.emplace_back(r.requester);
      key.push_back(r.idempotency_key.empty() ? std::nullopt
                                              : std::optional<std::string>(r.idempotency_key));
      payload.emplace_back(r.payload_json);
      fingerprint.emplace_back(r.fingerprint);
      scheduled_at.push_back(r.scheduled_at);
      run_at.push_back(AdmissionRunAt(r, now));
      parent.push_back(r.parent.value);
      max_attempts.push_back(p.retry.max_attempts);
      base.push_back(p.retry.backoff_base_ms);
      cap.push_back(p.retry.backoff_cap_ms);
      max_permanent.push_back(p.retry.max_permanent_attempts);
      max_ambiguous.push_back(p.retry.max_ambiguous_attempts);
      max_expiries.push_back(p.retry.max_consecutive_lease_expiries);
      lease_ms.push_back(p.lease_ms);
      max_unsupported.push_back(p.retry.max_unsupported_schema_attempts);
    }
    Params q;
    q.AddArray(ids).AddTextArray(job).AddTextArray(tenant).AddTextArray(queue);
    q.AddArray(trigger).AddTextArray(requester).AddTextArray(key).AddTextArray(payload);
    q.AddTextArray(fingerprint).AddArray(scheduled_at).AddArray(run_at).AddArray(parent);
    q.AddArray(max_attempts).AddArray(base).AddArray(cap).AddArray(max_permanent);
    q.AddArray(max_ambiguous).AddArray(max_expiries).AddArray(lease_ms).AddArray(max_unsupported);
    q.Add(now);
    std::unordered_map<std::int64_t, bool> inserted;
    {
      TE_ASSIGN_OR_RETURN(PgResult s, tx.Q(kInsertExecutions, q));
      inserted.reserve(static_cast<std::size_t>(s.rows()));
      for (int i = 0; i < s.rows(); ++i) inserted.emplace(s.Int(i, 0), true);
    }
    for (int i = 0; i < n; ++i) {
      const AdmitRequest& r = requests[static_cast<std::size_t>(i)];
      if (inserted.count(ids[static_cast<std::size_t>(i)]) > 0) {
        const std::string& q_name = jobs.at(r.job.value).queue;
        out.push_back(AdmitResult{AdmitOutcome::kCreated,
                                  ExecutionId(ids[static_cast<std::size_t>(i)]),
                                  ExecutionStatus::kQueued});
        tx.counters.CountAdmission(q_name, r.tenant.value);
        tx.MarkWork(q_name);
        continue;
      }
      // The key exists: decided per item, exactly as row by row.
      TE_ASSIGN_OR_RETURN(std::optional<AdmitResult> existing, FindByKey(tx, r));
      if (!existing) {
        return Unavailable("idempotency key " + r.idempotency_key +
                           " is being admitted concurrently");
      }
      out.push_back(*existing);
    }
    return Status::Ok();
  }

  Result<AdmitResult> AdmitOne(Tx& tx, const AdmitRequest& r, Millis now,
                               std::unordered_map<std::string, JobPolicy>& jobs) {
    if (r.prepared_with) {
      // Before the key: a dispatch to a disabled job is refused, a repeat too.
      TE_ASSIGN_OR_RETURN(bool found, LoadPolicy(tx, r.job.value, jobs));
      if (!found) return NotFound("no job named '" + r.job.value + "'");
      TE_RETURN_IF_ERROR(CheckPreparedTerms(r, jobs.at(r.job.value)));
    }
    // A keyed admission outside a lane just tries the INSERT: the
    // idempotency index answers "exists" (ON CONFLICT), one round trip fewer
    // for the common new key. In a lane, look first so that a repeat takes
    // no lane lock.
    if (!r.idempotency_key.empty() && !r.lane_key.empty()) {
      TE_ASSIGN_OR_RETURN(std::optional<AdmitResult> existing, FindByKey(tx, r));
      if (existing) return *existing;
    }
    auto it = jobs.find(r.job.value);
    if (it == jobs.end()) {
      TE_ASSIGN_OR_RETURN(PgResult s, tx.Q(kJobPolicy, Params().Add(r.job.value)));
      if (s.rows() == 0) {
        if (!r.idempotency_key.empty()) {  // an existing execution answers first
          TE_ASSIGN_OR_RETURN(std::optional<AdmitResult> existing, FindByKey(tx, r));
          if (existing) return *existing;
        }
        return NotFound("no job named '" + r.job.value + "'");
      }
      it = jobs.emplace(r.job.value, ReadJobPolicyRow(PgRow(s, 0))).first;
    }
    const JobPolicy& p = it->second;
    bool parked = false;
    if (!r.lane_key.empty()) {
      // Admissions and un-parking of one lane take turns (O1).
      TE_RETURN_IF_ERROR(tx.Q(kLockLane, Params().Add(r.tenant.value).Add(r.lane_key)).status());
      TE_ASSIGN_OR_RETURN(PgResult l,
                          tx.Q(kLaneOpen, Params().Add(r.tenant.value).Add(r.lane_key)));
      parked = l.rows() > 0;
    }
    Params s;
    s.Add(r.job.value).Add(r.tenant.value).Add(p.queue);
    s.Add(static_cast<int>(r.trigger)).Add(r.requester).AddOrNull(r.idempotency_key);
    s.Add(r.payload_json).Add(r.fingerprint).Add(r.scheduled_at);
    s.Add(AdmissionRunAt(r, now)).Add(now).Add(r.lane_key);
    s.Add(r.parent.value).Add(p.retry.max_attempts).Add(p.retry.backoff_base_ms);
    s.Add(p.retry.backoff_cap_ms).Add(p.retry.max_permanent_attempts);
    s.Add(p.retry.max_ambiguous_attempts).Add(p.retry.max_consecutive_lease_expiries);
    s.Add(p.lease_ms).Add(p.retry.max_unsupported_schema_attempts);
    s.Add(parked ? 1 : 0);
    TE_ASSIGN_OR_RETURN(PgResult ins, tx.Q(kInsertExecution, s));
    if (ins.rows() == 0) {
      // The key exists (admitted earlier, or by a concurrent transaction that
      // committed while ON CONFLICT waited for it): answer with its execution.
      TE_ASSIGN_OR_RETURN(std::optional<AdmitResult> existing, FindByKey(tx, r));
      if (existing) return *existing;
      return Unavailable("idempotency key " + r.idempotency_key +
                         " is being admitted concurrently");
    }
    AdmitResult res;
    res.outcome = AdmitOutcome::kCreated;
    res.id = ExecutionId(ins.Int(0, 0));
    res.status = ExecutionStatus::kQueued;
    tx.counters.CountAdmission(p.queue, r.tenant.value);
    if (!parked) tx.MarkWork(p.queue);
    return res;
  }

  static Result<std::optional<AdmitResult>> FindByKey(Tx& tx, const AdmitRequest& r) {
    TE_ASSIGN_OR_RETURN(
        PgResult s,
        tx.Q(kFindByKey, Params().Add(r.job.value).Add(r.tenant.value).Add(r.idempotency_key)));
    if (s.rows() == 0) return std::optional<AdmitResult>();
    return std::optional<AdmitResult>(ReadExistingAdmissionRow(PgRow(s, 0), r));
  }

  // --- transactions over the pool ---

  // The shared store logic's transactions (sql_store.h).
  Status InRead(SessionBody body) override {
    return ReadTx<bool>([&](Tx& tx) -> Result<bool> {
             PgSession session(tx.c);
             TE_RETURN_IF_ERROR(body(session));
             return true;
           })
        .status();
  }
  Status InWrite(SessionBody body) override {
    return Write<bool>([&](Tx& tx) -> Result<bool> {
             PgSession session(tx.c);
             TE_RETURN_IF_ERROR(body(session));
             return true;
           })
        .status();
  }

  template <typename T, typename F>
  Result<T> Write(F&& body) {
    return Transact<T>(kBeginWrite, std::forward<F>(body));
  }
  template <typename T, typename F>
  Result<T> ReadTx(F&& body) {
    return Transact<T>(kBeginRead, std::forward<F>(body));
  }

  // Runs body(tx) in one transaction: BEGIN, body, counter deltas, COMMIT.
  // BEGIN goes with the body's first statement and the counter deltas and the
  // notification with COMMIT, each in one round trip (PgConn::DeferBegin).
  // Any error rolls everything back. A deadlock or serialization failure runs
  // the whole transaction again (up to max_retries); a connection that turns
  // out dead at BEGIN (it died while idle: nothing of the transaction ran) is
  // replaced once.
  template <typename T, typename F>
  Result<T> Transact(const char* begin_sql, F&& body) {
    bool replaced_dead = false;
    for (int attempt = 0;; ++attempt) {
      TE_ASSIGN_OR_RETURN(PooledConn * pc, pool_.Acquire());
      PgConn& c = pc->conn;
      c.DeferBegin(begin_sql);
      Tx tx{c, {}, {}};
      tx.counters.record_events = ObservesLifecycle();
      Result<T> r = body(tx);
      Status st = r.status();
      if (st.ok()) {
        if (std::optional<Params> counts = CountParams(tx))
          tx.Later(kAddCounts, std::move(*counts));
        for (const std::string& queue : tx.wake_queues.queues()) {
          Params notify;
          notify.Add(channel_).Add(queue);
          tx.Later(kNotifyWork, std::move(notify));
        }
        st = c.Commit();
        if (st.ok()) {
          pool_.Release(pc);
          PublishLifecycle(std::move(tx.counters.events));
          PublishWork(tx.wake_queues);
          return r;
        }
      }
      const bool retry = pg::IsRetryable(c.last_sqlstate());
      const bool begun = !c.DropDeferredBegin();
      if (c.lost_at_begin() && !replaced_dead) {
        pool_.Release(pc);
        replaced_dead = true;
        continue;
      }
      if (begun && c.healthy()) {
        auto rb = c.Exec("ROLLBACK");
        if (!rb.ok()) c.Close();
      }
      const bool lost = !c.healthy();
      pool_.Release(pc);
      if (lost) return AsUnavailable(st, true);
      if (retry && attempt < options_.max_retries) continue;
      return st;
    }
  }

  static Status AsUnavailable(const Status& s, bool lost) {
    if (s.code() == ErrorCode::kUnavailable) return s;
    if (lost) return Unavailable("PostgreSQL connection lost: " + s.message());
    return s;
  }

  // Constant after construction.
  const PostgresStoreOptions options_;
  const std::unique_ptr<RandomSource> owned_random_;
  RandomSource* const random_;
  Pool pool_;

  // A3. The channel is constant after construction. listener_call_mu_ is
  // held while the listener runs (so replacing it waits for a call), and
  // always taken before listen_mu_.
  const std::string channel_;
  Mutex listener_call_mu_ ACQUIRED_BEFORE(listen_mu_);
  Mutex listen_mu_;
  CondVar listen_cv_;
  std::function<void()> listener_ GUARDED_BY(listen_mu_);
  bool stop_listening_ GUARDED_BY(listen_mu_) = false;
  std::thread listen_thread_;  // started by the first listener
};

}  // namespace

bool IsValidPostgresSchemaName(std::string_view schema) {
  if (schema.empty() || schema.size() > 63) return false;
  if (!(schema[0] == '_' || (schema[0] >= 'a' && schema[0] <= 'z'))) return false;
  for (char c : schema) {
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

Result<std::unique_ptr<Store>> OpenPostgresStore(const PostgresStoreOptions& options) {
  if (options.url.empty()) return InvalidArgument("PostgreSQL store needs a connection URL");
  if (!IsValidPostgresSchemaName(options.schema)) {
    return InvalidArgument("invalid PostgreSQL schema name '" + options.schema +
                           "': must match [a-z_][a-z0-9_]{0,62}");
  }
  if (options.pool_size < 1 || options.pool_size > 1000) {
    return InvalidArgument("PostgreSQL pool size must be 1..1000");
  }
  if (options.reconnect_backoff_min.count() < 1 ||
      options.reconnect_backoff_max < options.reconnect_backoff_min) {
    return InvalidArgument("reconnect backoff needs 1 ms <= min <= max");
  }
  auto store = std::make_unique<PostgresStore>(options);
  TE_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace taskengine
