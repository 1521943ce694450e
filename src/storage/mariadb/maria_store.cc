// MariaDB backend of the storage contract. See maria_store.h for the design.
#include "storage/mariadb/maria_store.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/state_machine.h"
#include "storage/batch_rows.h"
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
constexpr char kExpired[] = "SELECT " TE_SQL_STATE_COLUMNS
                            " FROM executions WHERE status = 1 AND lease_expires_at < ?1"
                            " ORDER BY lease_expires_at LIMIT ?2 FOR UPDATE SKIP LOCKED";
// Lanes (O1): the admissions and un-parking of lane (?1, ?2) take turns on
// its row of lane_locks, locked until the transaction ends (maria_schema.h,
// version 3: enqueue() from an application's transaction takes it too).
constexpr char kLockLane[] =
    "INSERT INTO lane_locks (tenant, lane_key, version) VALUES (?1, ?2, 1)"
    " ON DUPLICATE KEY UPDATE version = version + 1";
constexpr char kUnpark[] =
    "UPDATE executions SET lane_parked = 0, run_at = GREATEST(run_at, ?2) WHERE id = ?1";
// The payload limit enqueue() admits (A1, [engine] max_payload_bytes).
constexpr char kSetPayloadLimit[] =
    "INSERT INTO settings (name, value) VALUES ('max_payload_bytes', ?1)"
    " ON DUPLICATE KEY UPDATE value = ?1";
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

// The store's connections run with autocommit off: a write transaction
// begins with its first statement (READ COMMITTED, the session's level) and
// ends with COMMIT or ROLLBACK, one round trip less than START TRANSACTION.
constexpr const char* kSessionSetup = "SET SESSION autocommit = 0";
constexpr const char* kBeginRead =
    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;"
    " START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY";

// A batch's rows are locked (LockInOrder) and its executions admitted
// (AdmitAll) in statements of a power-of-two number of rows, at most 256, so
// that a connection prepares few distinct texts whatever the batch sizes: a
// lock of n rows names the ids of the next power of two (the last one
// repeated), an admission of n rows takes the largest power of two that
// fits, then the next. A batch's updates run the shared one-row statement:
// the rows whose arguments differ only in their id in statements over an id
// list (InListUpdate; the common case, e.g. a claim of first attempts), the
// others in one bulk execution (MariaConn::RunBulk).
constexpr int kBatchSizes = 9;  // 1, 2, 4, ... 256 rows
// The payloads of one admission statement stay below this many bytes (far
// below max_allowed_packet) unless a single row is larger.
constexpr std::size_t kMaxAdmissionBytes = 4 << 20;

// log2 of the largest power of two <= min(remaining, kMaxBatchRows).
int FloorChunk(std::size_t remaining) {
  int k = 0;
  while (k + 1 < kBatchSizes && (std::size_t{1} << (k + 1)) <= remaining) ++k;
  return k;
}
// log2 of the smallest power of two >= min(remaining, kMaxBatchRows).
int CeilChunk(std::size_t remaining) {
  int k = 0;
  while (k + 1 < kBatchSizes && (std::size_t{1} << k) < remaining) ++k;
  return k;
}

// "?first, ?first+1, ..." for `count` values.
std::string Placeholders(int first, int count) {
  std::string out;
  for (int i = 0; i < count; ++i) {
    if (i > 0) out += ", ";
    out += "?" + std::to_string(first + i);
  }
  return out;
}

// SELECT <state columns> of the executions with 2^k ids, locked in id order.
const char* LockRowsSql(int k) {
  static const std::array<std::string, kBatchSizes> texts = [] {
    std::array<std::string, kBatchSizes> out;
    for (int i = 0; i < kBatchSizes; ++i) {
      out[i] = "SELECT " TE_SQL_STATE_COLUMNS " FROM executions WHERE id IN (" +
               Placeholders(1, 1 << i) + ") ORDER BY id FOR UPDATE";
    }
    return out;
  }();
  return texts[k].c_str();
}

// kInsertExecution for 2^k rows, answering their ids in row order: row r's
// ?N is ?(N + r * kInsertExecutionArgs).
constexpr int kInsertExecutionArgs = 22;
const char* InsertExecutionsSql(int k) {
  static const std::array<std::string, kBatchSizes> texts = [] {
    const std::string_view shared = kInsertExecution;
    const std::size_t values = shared.find(" VALUES ");
    const std::string_view head = shared.substr(0, values + 8);
    const std::string_view tuple = shared.substr(values + 8);
    std::array<std::string, kBatchSizes> out;
    for (int i = 0; i < kBatchSizes; ++i) {
      std::string sql(head);
      for (int r = 0; r < (1 << i); ++r) {
        if (r > 0) sql += ", ";
        for (std::size_t at = 0; at < tuple.size(); ++at) {
          if (tuple[at] != '?') {
            sql += tuple[at];
            continue;
          }
          std::size_t end = at + 1;
          while (end < tuple.size() && tuple[end] >= '0' && tuple[end] <= '9') ++end;
          const int n = std::stoi(std::string(tuple.substr(at + 1, end - at - 1)));
          sql += "?" + std::to_string(n + r * kInsertExecutionArgs);
          at = end - 1;
        }
      }
      out[i] = sql + " RETURNING id";
    }
    return out;
  }();
  return texts[k].c_str();
}

// A shared one-row UPDATE ("... WHERE id = ?1 ...", `args` arguments) for
// 2^k ids at once: "WHERE id IN (?1, ?args+1, ...)", the other arguments as
// in the one-row text. Immutable.
class InListUpdate {
 public:
  InListUpdate(const char* one_row, int args) : one_row_(one_row) {
    const std::string_view text = one_row;
    constexpr std::string_view kWhere = " WHERE id = ?1";
    const std::size_t at = text.find(kWhere);
    TE_CHECK(at != std::string_view::npos && text.find(kWhere, at + 1) == std::string_view::npos);
    const std::size_t after = at + kWhere.size();
    TE_CHECK(after == text.size() || text[after] == ' ');
    for (int k = 0; k < kBatchSizes; ++k) {
      std::string ids = "?1";
      for (int i = 1; i < (1 << k); ++i) ids += ", ?" + std::to_string(args + i);
      texts_[k] = std::string(text.substr(0, at)) + " WHERE id IN (" + ids + ")" +
                  std::string(text.substr(after));
    }
  }
  const char* one_row() const { return one_row_; }
  const char* Sql(int k) const { return texts_[k].c_str(); }

 private:
  const char* one_row_;
  std::array<std::string, kBatchSizes> texts_;
};
const InListUpdate kClaimUpdates(kClaimUpdate, 8);
const InListUpdate kMarkStartedMany(kMarkStartedOne, 2);
const InListUpdate kApplyTransitions(kApplyTransition, 15);

using Pool = SqlPool<MariaConn>;
using PooledConn = Pool::Slot;

// One transaction's connection and its counter deltas (P8, flushed just
// before COMMIT in key order so concurrent writers lock counter rows in one
// order).
struct Tx {
  MariaConn& c;
  MariaSession s;
  StatusCounters counters;
  // The queues this transaction made work due in, for the work publisher
  // after COMMIT (SetWorkPublisher).
  DueQueues wake_queues;

  void MarkWork(const std::string& queue) { wake_queues.Mark(queue); }

  Result<std::int64_t> Run(const char* sql, const SqlArgs& args = SqlArgs()) {
    return s.Exec(sql, args);
  }
  Result<std::int64_t> RunBulk(const char* sql, const std::vector<SqlArgs>& rows) {
    return c.RunBulk(sql, rows);
  }

  // Runs `update`'s one-row statement for each of `rows` (its arguments, the
  // id first): rows whose other arguments are equal go in statements over
  // their ids, in id order; the rest in one bulk execution. Returns the rows
  // matched.
  Result<std::int64_t> RunUpdates(const InListUpdate& update, std::vector<SqlArgs> rows) {
    const auto id_of = [](const SqlArgs& a) { return a.values()[0].number; };
    const auto rest_less = [](const SqlArgs& a, const SqlArgs& b) {
      return std::lexicographical_compare(
          a.values().begin() + 1, a.values().end(), b.values().begin() + 1, b.values().end(),
          [](const SqlValue& x, const SqlValue& y) {
            return std::tie(x.kind, x.number, x.text) < std::tie(y.kind, y.number, y.text);
          });
    };
    std::sort(rows.begin(), rows.end(), [&](const SqlArgs& a, const SqlArgs& b) {
      if (rest_less(a, b)) return true;
      if (rest_less(b, a)) return false;
      return id_of(a) < id_of(b);
    });
    std::int64_t matched = 0;
    std::vector<SqlArgs> singles;
    for (std::size_t i = 0; i < rows.size();) {
      std::size_t end = i + 1;
      while (end < rows.size() && !rest_less(rows[i], rows[end])) ++end;
      if (end - i == 1) {
        singles.push_back(std::move(rows[i]));
        i = end;
        continue;
      }
      while (i < end) {
        const int k = CeilChunk(end - i);
        const std::size_t n = std::min(end - i, std::size_t{1} << k);
        SqlArgs a = rows[i];
        for (std::size_t j = 1; j < (std::size_t{1} << k); ++j) {
          a.Add(id_of(rows[i + std::min(j, n - 1)]));
        }
        TE_ASSIGN_OR_RETURN(std::int64_t m, s.Exec(update.Sql(k), a));
        matched += m;
        i += n;
      }
    }
    std::sort(singles.begin(), singles.end(),
              [&](const SqlArgs& a, const SqlArgs& b) { return id_of(a) < id_of(b); });
    TE_ASSIGN_OR_RETURN(std::int64_t m, c.RunBulk(update.one_row(), singles));
    return matched + m;
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
            clock_, [this](MariaConn& c) -> Status {
              TE_RETURN_IF_ERROR(c.Connect(options_.url));
              Status setup = c.Exec(kSessionSetup);
              if (!setup.ok()) c.Close();
              return setup;
            }) {}

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
                   std::to_string(v + 1) + "); COMMIT"));
      }
      return Status::Ok();
    }();
    // Autocommit is off: nothing of a failed version stays uncommitted.
    if (c.healthy()) (void)c.Exec("ROLLBACK; SELECT RELEASE_ALL_LOCKS()");
    pool_.Release(pc);
    return st;
  }

  Result<int> SchemaVersion() override {
    return ReadValue<int>([](SqlSession& s) { return ReadVersion(s); });
  }

  // No admission from SQL yet: the dispatcher's check is the only one.
  // What enqueue() admits from SQL (maria_schema.h, version 3).
  Status SetPayloadLimit(std::int64_t bytes) override {
    return Write<bool>([&](Tx& tx) -> Result<bool> {
             TE_RETURN_IF_ERROR(tx.Run(kSetPayloadLimit, SqlArgs().Add(bytes)).status());
             return true;
           })
        .status();
  }

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
            tx.s.All(request.handlers ? maria::sql::kClaimDueForHandlers : maria::sql::kClaimDue,
                     due, ReadClaimRow));
        std::vector<SqlArgs> updates;
        for (const ClaimRow& claim : rows) {
          const StateRow& row = claim.row;
          Event e;
          e.kind = EventKind::kClaim;
          e.now = now;
          auto t = Decide(row.state, e);
          if (!t.ok()) continue;  // cannot happen for a queued row; never guess
          Lease lease = NewLease(claim, *t, now, slot.queue);
          SqlArgs u;
          u.Add(row.id.value).Add(static_cast<int>(t->to)).Add(t->attempt);
          u.Add(lease.version.value).Add(request.worker.value).Add(now);
          u.Add(lease.lease_expires_at).Add(ClaimMarksStarted(request, slot) ? 1 : 0);
          updates.push_back(std::move(u));
          tx.counters.CountTransition(row, *t, now);
          out.push_back(std::move(lease));
        }
        TE_RETURN_IF_ERROR(tx.RunUpdates(kClaimUpdates, std::move(updates)).status());
      }
      return out;
    });
  }

  std::vector<Status> MarkStarted(const std::vector<LeaseRef>& leases) override {
    using Replies = std::vector<Status>;
    auto r = Write<Replies>([&](Tx& tx) -> Result<Replies> {
      // Usually every lease is current: one statement marks them all, in id
      // order (rows are locked in id order). A row it did not match (a stale
      // or unknown lease) is answered below; the rows it matched are current
      // leases, marked as the answers below say.
      std::vector<LeaseRef> sorted = leases;
      std::sort(sorted.begin(), sorted.end(),
                [](const LeaseRef& a, const LeaseRef& b) { return a.id.value < b.id.value; });
      const bool distinct = std::adjacent_find(sorted.begin(), sorted.end(),
                                               [](const LeaseRef& a, const LeaseRef& b) {
                                                 return a.id.value == b.id.value;
                                               }) == sorted.end();
      if (distinct) {
        TE_ASSIGN_OR_RETURN(std::int64_t marked, tx.RunUpdates(kMarkStartedMany, MarkArgs(sorted)));
        if (marked == static_cast<std::int64_t>(sorted.size())) {
          return Replies(leases.size(), Status::Ok());
        }
      }
      TE_ASSIGN_OR_RETURN(BatchRows rows,
                          LockInOrder(tx, IdsOf(leases, [](const LeaseRef& l) { return l.id; })));
      Replies out;
      out.reserve(leases.size());
      std::vector<LeaseRef> current;
      for (const LeaseRef& lease : leases) {
        TE_ASSIGN_OR_RETURN(std::optional<StateRow> row, RowOf(rows, tx, lease.id));
        out.push_back(CheckLease(row, lease));
        if (out.back().ok()) current.push_back(lease);
      }
      std::sort(current.begin(), current.end(),
                [](const LeaseRef& a, const LeaseRef& b) { return a.id.value < b.id.value; });
      TE_RETURN_IF_ERROR(tx.RunUpdates(kMarkStartedMany, MarkArgs(current)).status());
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
          BatchRows rows,
          LockInOrder(tx, IdsOf(requests, [](const HeartbeatRequest& h) { return h.lease.id; })));
      Replies out;
      out.reserve(requests.size());
      for (const HeartbeatRequest& h : requests) {
        TE_ASSIGN_OR_RETURN(std::optional<StateRow> row, RowOf(rows, tx, h.lease.id));
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
          BatchRows rows,
          LockInOrder(tx, IdsOf(requests, [](const FinishRequest& f) { return f.lease.id; })));
      Replies out;
      out.reserve(requests.size());
      MariaActionTx actions(*this, tx);
      std::vector<SqlArgs> successes;
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
          successes.push_back(
              TransitionArgs(*row, t, now, d.plan.result, d.plan.error, d.plan.progress));
          tx.counters.CountTransition(*row, t, now);
        } else {
          TE_RETURN_IF_ERROR(Apply(tx, *row, t, now, d.plan.result, d.plan.error, d.plan.progress));
        }
        rows.Touch(f.lease.id);
        out.emplace_back(FinishReplyFor(t));
      }
      TE_RETURN_IF_ERROR(tx.RunUpdates(kApplyTransitions, std::move(successes)).status());
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

  // A row of `rows`; one the batch has written is locked and read again.
  static Result<std::optional<StateRow>> RowOf(const BatchRows& rows, Tx& tx, ExecutionId id) {
    return rows.Get(id, [&](ExecutionId touched) { return LockState(tx, touched); });
  }

  // Locks the executions `ids` (those that exist) in id order, so two
  // batches over the same executions never deadlock, and reads them.
  static Result<BatchRows> LockInOrder(Tx& tx, std::vector<std::int64_t> ids) {
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    BatchRows out;
    for (std::size_t i = 0; i < ids.size();) {
      const int k = CeilChunk(ids.size() - i);
      const std::size_t n = std::min(ids.size() - i, std::size_t{1} << k);
      SqlArgs a;
      for (std::size_t j = 0; j < (std::size_t{1} << k); ++j) a.Add(ids[i + std::min(j, n - 1)]);
      TE_RETURN_IF_ERROR(
          tx.s.Run(LockRowsSql(k), a, [&](const Row& r) { out.Add(ReadStateRow(r)); }).status());
      i += n;
    }
    return out;
  }

  // The arguments of kMarkStartedOne for each of `leases`.
  static std::vector<SqlArgs> MarkArgs(const std::vector<LeaseRef>& leases) {
    std::vector<SqlArgs> out;
    out.reserve(leases.size());
    for (const LeaseRef& l : leases) out.push_back(SqlArgs().Add(l.id.value).Add(l.version.value));
    return out;
  }

  // Admits `requests` in order inside `tx`. Runs of requests without an
  // idempotency key or a lane are inserted a chunk at a time (InsertPending);
  // the others one by one (AdmitOne), each after the ones before it.
  Result<std::vector<AdmitResult>> AdmitAll(Tx& tx, const std::vector<AdmitRequest>& requests,
                                            Millis now) {
    std::unordered_set<std::int64_t> tokens;
    TE_RETURN_IF_ERROR(ConfirmAdmissionTokens(tx.s, requests, now, tokens));
    std::vector<AdmitResult> out;
    out.reserve(requests.size());
    std::unordered_map<std::string, JobPolicy> jobs;
    std::vector<std::pair<const AdmitRequest*, const JobPolicy*>> pending;
    for (const AdmitRequest& r : requests) {
      if (!r.idempotency_key.empty() || !r.lane_key.empty()) {
        TE_RETURN_IF_ERROR(InsertPending(tx, pending, now, out));
        TE_ASSIGN_OR_RETURN(AdmitResult res, AdmitOne(tx, r, now, jobs));
        out.push_back(res);
        continue;
      }
      TE_ASSIGN_OR_RETURN(const JobPolicy* p, PolicyOf(tx, r.job, jobs));
      TE_RETURN_IF_ERROR(CheckPreparedTerms(r, *p));
      pending.emplace_back(&r, p);
    }
    TE_RETURN_IF_ERROR(InsertPending(tx, pending, now, out));
    return out;
  }

  // The policy of `job`, read once per transaction (kNotFound: no such job).
  static Result<const JobPolicy*> PolicyOf(Tx& tx, const JobName& job,
                                           std::unordered_map<std::string, JobPolicy>& jobs) {
    auto it = jobs.find(job.value);
    if (it == jobs.end()) {
      TE_ASSIGN_OR_RETURN(std::optional<JobPolicy> policy,
                          tx.s.One(kJobPolicy, SqlArgs().Add(job.value), ReadJobPolicyRow));
      if (!policy) return NotFound("no job named '" + job.value + "'");
      it = jobs.emplace(job.value, std::move(*policy)).first;
    }
    return &it->second;
  }

  // Appends the arguments of kInsertExecution for `r` to `a`.
  static void AddInsertArgs(SqlArgs& a, const AdmitRequest& r, const JobPolicy& p, Millis now,
                            bool parked) {
    a.Add(r.job.value).Add(r.tenant.value).Add(p.queue);
    a.Add(static_cast<int>(r.trigger)).Add(r.requester).AddOrNull(r.idempotency_key);
    a.Add(r.payload_json).Add(r.fingerprint).Add(r.scheduled_at);
    a.Add(AdmissionRunAt(r, now)).Add(now).Add(r.lane_key);
    a.Add(r.parent.value).Add(p.retry.max_attempts).Add(p.retry.backoff_base_ms);
    a.Add(p.retry.backoff_cap_ms).Add(p.retry.max_permanent_attempts);
    a.Add(p.retry.max_ambiguous_attempts).Add(p.retry.max_consecutive_lease_expiries);
    a.Add(p.lease_ms).Add(p.retry.max_unsupported_schema_attempts);
    a.Add(parked ? 1 : 0);
  }

  // Inserts the admissions `pending` (no idempotency key, no lane) in
  // multi-row statements, in order, appends their results to `out` and
  // empties `pending`.
  static Status InsertPending(
      Tx& tx, std::vector<std::pair<const AdmitRequest*, const JobPolicy*>>& pending, Millis now,
      std::vector<AdmitResult>& out) {
    for (std::size_t i = 0; i < pending.size();) {
      int k = FloorChunk(pending.size() - i);
      const auto bytes = [&](int rows) {
        std::size_t total = 0;
        for (int j = 0; j < rows; ++j) total += pending[i + j].first->payload_json.size();
        return total;
      };
      while (k > 0 && bytes(1 << k) > kMaxAdmissionBytes) --k;
      const int rows = 1 << k;
      SqlArgs a;
      for (int j = 0; j < rows; ++j) {
        AddInsertArgs(a, *pending[i + j].first, *pending[i + j].second, now, /*parked=*/false);
      }
      std::vector<std::int64_t> ids;
      ids.reserve(rows);
      TE_RETURN_IF_ERROR(
          tx.s.Run(InsertExecutionsSql(k), a, [&](const Row& r) { ids.push_back(r.Int(0)); })
              .status());
      if (static_cast<int>(ids.size()) != rows) {
        return Internal("MariaDB: an insert of " + std::to_string(rows) + " executions answered " +
                        std::to_string(ids.size()) + " ids");
      }
      for (int j = 0; j < rows; ++j) {
        AdmitResult res;
        res.outcome = AdmitOutcome::kCreated;
        res.id = ExecutionId(ids[j]);
        res.status = ExecutionStatus::kQueued;
        out.push_back(res);
        tx.counters.CountAdmission(pending[i + j].second->queue,
                                   pending[i + j].first->tenant.value);
        tx.MarkWork(pending[i + j].second->queue);  // no lane: never parked
      }
      i += rows;
    }
    pending.clear();
    return Status::Ok();
  }

  Result<AdmitResult> AdmitOne(Tx& tx, const AdmitRequest& r, Millis now,
                               std::unordered_map<std::string, JobPolicy>& jobs) {
    if (r.prepared_with) {
      // Before the key: a dispatch to a disabled job is refused, a repeat too.
      TE_ASSIGN_OR_RETURN(const JobPolicy* policy, PolicyOf(tx, r.job, jobs));
      TE_RETURN_IF_ERROR(CheckPreparedTerms(r, *policy));
    }
    if (!r.idempotency_key.empty()) {
      TE_ASSIGN_OR_RETURN(std::optional<AdmitResult> existing, FindByKey(tx, r));
      if (existing) return *existing;
    }
    TE_ASSIGN_OR_RETURN(const JobPolicy* policy, PolicyOf(tx, r.job, jobs));
    const JobPolicy& p = *policy;
    bool parked = false;
    if (!r.lane_key.empty()) {
      // Admissions and un-parking of one lane take turns (O1).
      TE_RETURN_IF_ERROR(LockLane(tx, r.tenant.value, r.lane_key));
      TE_ASSIGN_OR_RETURN(
          std::optional<bool> open,
          tx.s.One(maria::sql::kLaneOpen, SqlArgs().Add(r.tenant.value).Add(r.lane_key),
                   [](const Row&) { return true; }));
      parked = open.has_value();
    }
    SqlArgs a;
    AddInsertArgs(a, r, p, now, parked);
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
    if (!parked) tx.MarkWork(p.queue);
    return res;
  }

  static Result<std::optional<AdmitResult>> FindByKey(Tx& tx, const AdmitRequest& r) {
    return tx.s.One(kFindByKey,
                    SqlArgs().Add(r.job.value).Add(r.tenant.value).Add(r.idempotency_key),
                    [&](const Row& row) { return ReadExistingAdmissionRow(row, r); });
  }

  // Waits, at most the session's innodb_lock_wait_timeout (then the
  // transaction runs again), for the lane's lock.
  static Status LockLane(Tx& tx, const std::string& tenant, const std::string& lane) {
    return tx.Run(kLockLane, SqlArgs().Add(tenant).Add(lane)).status();
  }

  // The arguments of kApplyTransition for `row` moving by `t` at `now`.
  static SqlArgs TransitionArgs(const StateRow& row, const Transition& t, Millis now,
                                std::optional<std::string_view> result,
                                std::optional<std::string_view> error,
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
    return a;
  }

  // Writes a state-machine transition decided for `row`.
  // REQUIRES: the row is locked by this transaction.
  Status Apply(Tx& tx, const StateRow& row, const Transition& t, Millis now,
               std::optional<std::string_view> result, std::optional<std::string_view> error,
               std::optional<int> progress) {
    TE_RETURN_IF_ERROR(
        tx.Run(kApplyTransition, TransitionArgs(row, t, now, result, error, progress)).status());
    tx.counters.CountTransition(row, t, now);
    if (t.to == ExecutionStatus::kQueued && row.state.status != ExecutionStatus::kQueued) {
      tx.MarkWork(row.queue);
    }
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
      TE_ASSIGN_OR_RETURN(std::optional<std::string> unparked,
                          UnparkLane(tx, row.tenant, row.lane_key, now));
      if (unparked) tx.MarkWork(*unparked);  // the lane's next execution's queue
    }
    return Status::Ok();
  }

  // When the lane (tenant, lane) has no open, un-parked execution left, the
  // oldest parked one becomes due: its queue then.
  static Result<std::optional<std::string>> UnparkLane(Tx& tx, const std::string& tenant,
                                                       const std::string& lane, Millis now) {
    TE_RETURN_IF_ERROR(LockLane(tx, tenant, lane));
    const SqlArgs key = SqlArgs().Add(tenant).Add(lane);
    TE_ASSIGN_OR_RETURN(std::optional<bool> busy, tx.s.One(maria::sql::kLaneHasUnparkedOpen, key,
                                                           [](const Row&) { return true; }));
    if (busy) return std::optional<std::string>();
    using Next = std::pair<std::int64_t, std::string>;
    TE_ASSIGN_OR_RETURN(std::optional<Next> next,
                        tx.s.One(maria::sql::kLaneFirstParked, key,
                                 [](const Row& r) { return Next(r.Int(0), r.Text(1)); }));
    if (!next) return std::optional<std::string>();
    TE_RETURN_IF_ERROR(tx.Run(kUnpark, SqlArgs().Add(next->first).Add(now)).status());
    return std::optional<std::string>(std::move(next->second));
  }

  // One statement per counter table, its rows in key order.
  static Status FlushCounts(Tx& tx) {
    std::vector<SqlArgs> counts;
    for (const auto& [k, v] : tx.counters.counts) {
      if (v == 0) continue;
      counts.push_back(
          SqlArgs().Add(std::get<0>(k)).Add(std::get<1>(k)).Add(std::get<2>(k)).Add(v));
    }
    TE_RETURN_IF_ERROR(tx.RunBulk(kAddStatusCount, counts).status());
    std::vector<SqlArgs> outcomes;
    for (const auto& [k, v] : tx.counters.outcomes) {
      if (v == 0) continue;
      outcomes.push_back(
          SqlArgs().Add(std::get<0>(k)).Add(std::get<1>(k)).Add(std::get<2>(k)).Add(v));
    }
    return tx.RunBulk(kAddOutcome, outcomes).status();
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
      TE_RETURN_IF_ERROR(
          s.Run(maria::sql::kOldestDue, SqlArgs().Add(q.queue).Add(now), [&](const Row& r) {
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
    return Transact<T>(nullptr, std::forward<F>(body));
  }

  // Runs body(tx) in one transaction: `begin_sql` (none for a write: its
  // first statement begins it), body, counter deltas, COMMIT. Any error rolls
  // everything back. A deadlock or lock wait timeout runs the whole
  // transaction again (up to max_retries); a connection that turns out dead
  // at the transaction's first request (it died while idle; the server rolls
  // back whatever that request did) is replaced once.
  template <typename T, typename F>
  Result<T> Transact(const char* begin_sql, F&& body) {
    bool replaced_dead = false;
    for (int attempt = 0;; ++attempt) {
      TE_ASSIGN_OR_RETURN(PooledConn * pc, pool_.Acquire());
      MariaConn& c = pc->conn;
      const std::uint64_t first_request = c.requests() + 1;
      const auto died_idle = [&] {
        return !c.healthy() && c.requests() == first_request && !replaced_dead;
      };
      if (begin_sql != nullptr) {
        Status begin = c.Exec(begin_sql);
        if (!begin.ok()) {
          const bool lost = !c.healthy();
          const bool replace = died_idle();
          pool_.Release(pc);
          if (replace) {
            replaced_dead = true;
            continue;
          }
          return AsUnavailable(begin, lost);
        }
      }
      Tx tx{c, MariaSession(c), {}, {}};
      tx.counters.record_events = ObservesLifecycle();
      Result<T> r = body(tx);
      Status st = r.status();
      if (st.ok()) st = FlushCounts(tx);
      if (st.ok() && begin_sql == nullptr && options_.before_commit_for_testing) {
        st = options_.before_commit_for_testing(tx.s, attempt);
      }
      if (st.ok()) {
        st = c.Exec("COMMIT");
        if (st.ok()) {
          pool_.Release(pc);
          PublishLifecycle(std::move(tx.counters.events));
          PublishWork(tx.wake_queues);
          return r;
        }
      }
      const bool retry = maria::IsRetryable(c.last_error());
      if (c.healthy()) {
        if (!c.Exec("ROLLBACK").ok()) c.Close();
      }
      const bool lost = !c.healthy();
      const bool replace = died_idle();
      pool_.Release(pc);
      if (replace) {
        replaced_dead = true;
        continue;
      }
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
