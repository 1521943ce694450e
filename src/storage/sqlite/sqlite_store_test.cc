// SQLite-specific behaviour the backend-neutral conformance suite cannot
// express: a full database, a schema newer than the binary, durability modes.
#include "storage/sqlite/sqlite_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <set>
#include <thread>

#include "core/canonical_json.h"
#include "core/mutex.h"
#include "storage/sql_statements.h"
#include "storage/sqlite/schema.h"
#include "storage/sqlite/sqlite_vacuum.h"
#include "storage/store_rules.h"
#include "testing_support/test_util.h"

namespace taskengine {
namespace {

JobDefinition Job() {
  JobDefinition j;
  j.name = JobName("fill");
  j.handler = "noop";
  return j;
}

AdmitRequest Request(int i) {
  AdmitRequest r;
  r.job = JobName("fill");
  r.payload_json = "{\"pad\":\"" + std::string(2000, 'x') + "\",\"i\":" + std::to_string(i) + "}";
  r.fingerprint = Sha256Hex(r.payload_json);
  r.idempotency_key = "k" + std::to_string(i);
  return r;
}

// RD13 at the store level: when the database cannot grow, admission answers
// kUnavailable with a clear message, nothing half-written remains, every
// acknowledged row is there, and admissions work again once space is freed.
// A migrated store at `path` on `clock`, with the job Job() defined.
Result<std::unique_ptr<Store>> OpenWithJob(const std::string& path, FakeClock* clock) {
  SqliteStoreOptions o;
  o.path = path;
  o.clock = clock;
  TE_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenSqliteStore(o));
  TE_RETURN_IF_ERROR(store->Migrate());
  TE_RETURN_IF_ERROR(store->UpsertJob(Job()));
  return store;
}

// Options of a database at `path` that fills up after a few hundred admissions.
SqliteStoreOptions SmallDatabase(const std::string& path, FakeClock* clock) {
  SqliteStoreOptions o;
  o.path = path;
  o.clock = clock;
  o.max_page_count = 64;  // 256 KiB with 4 KiB pages
  return o;
}

// Reopened with room to grow, the database at `o.path` holds exactly the
// `acknowledged` executions.
void ExpectExactlyAcknowledged(SqliteStoreOptions o, const std::vector<ExecutionId>& acknowledged) {
  o.max_page_count = 0;  // space freed
  ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(o));
  for (ExecutionId id : acknowledged) EXPECT_OK(store->GetExecution(id));
  ExecutionFilter all;
  all.limit = 1000;
  ASSERT_OK_AND_ASSIGN(ExecutionPage page, store->ListExecutions(all));
  EXPECT_EQ(page.items.size(), acknowledged.size());  // nothing beyond the acknowledged
}

TEST(SqliteStoreTest, FullDatabaseIsUnavailableAndRecovers) {
  TempDir dir;
  FakeClock clock;
  SqliteStoreOptions o = SmallDatabase(dir.File("full.db"), &clock);
  std::vector<ExecutionId> acknowledged;
  Status failure;
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(o));
    ASSERT_OK(store->Migrate());
    ASSERT_OK(store->UpsertJob(Job()));
    for (int i = 0; i < 1000; ++i) {
      auto r = store->Admit(Request(i));
      if (!r.ok()) {
        failure = r.status();
        break;
      }
      acknowledged.push_back(r->id);
    }
    ASSERT_FALSE(failure.ok()) << "the database never filled up";
    EXPECT_EQ(failure.code(), ErrorCode::kUnavailable);
    EXPECT_NE(failure.message().find("full"), std::string::npos) << failure.message();
    // The store keeps answering (reads, and writes that need no space).
    ASSERT_OK_AND_ASSIGN(Execution first, store->GetExecution(acknowledged.front()));
    EXPECT_EQ(first.status, ExecutionStatus::kQueued);
  }
  ExpectExactlyAcknowledged(o, acknowledged);
  o.max_page_count = 0;
  ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(o));
  ASSERT_OK_AND_ASSIGN(AdmitResult again, store->Admit(Request(5000)));
  EXPECT_EQ(again.outcome, AdmitOutcome::kCreated);
}

// The answers of asynchronous store calls, collected from the thread that
// delivers them. Thread-safe.
template <typename Answer>
class Answers {
 public:
  std::function<void(Answer)> Callback() {
    return [this](Answer a) {
      MutexLock lock(mu_);
      answers_.push_back(std::move(a));
      threads_.insert(std::this_thread::get_id());
      cv_.NotifyAll();
    };
  }
  // Every answer once `n` arrived (fails the test after 10 s).
  std::vector<Answer> Await(std::size_t n) EXCLUDES(mu_) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    MutexLock lock(mu_);
    while (answers_.size() < n && cv_.WaitUntil(mu_, deadline)) {
    }
    EXPECT_GE(answers_.size(), n) << "answered in 10 s";
    return answers_;
  }
  std::set<std::thread::id> threads() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return threads_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<Answer> answers_ GUARDED_BY(mu_);
  std::set<std::thread::id> threads_ GUARDED_BY(mu_);
};

// RD13 for admissions nobody waits for: each is answered exactly once, on a
// store thread, ok only when it is durable, kUnavailable when the database
// cannot grow (and then nothing of it was written).
TEST(SqliteStoreTest, AsyncAdmissionsAreAnsweredOnceAfterTheirCommit) {
  TempDir dir;
  FakeClock clock;
  const SqliteStoreOptions o = SmallDatabase(dir.File("async.db"), &clock);
  constexpr int kCalls = 400;
  using Admitted = Result<std::vector<AdmitResult>>;
  Answers<Admitted> answers;
  std::vector<Admitted> got;
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(o));
    ASSERT_OK(store->Migrate());
    ASSERT_OK(store->UpsertJob(Job()));
    // The first alone in its commit, into an empty database: it fits. (A
    // commit that fills the database fails whole, and the writer may take
    // all the others into one.)
    store->AdmitBatchAsync({Request(0)}, answers.Callback());
    answers.Await(1);
    for (int i = 1; i < kCalls; ++i) store->AdmitBatchAsync({Request(i)}, answers.Callback());
    got = answers.Await(kCalls);
    EXPECT_FALSE(answers.threads().contains(std::this_thread::get_id()))
        << "answered on the store's thread, not the caller's";
  }  // closing the store must not answer anything twice
  got = answers.Await(kCalls);
  ASSERT_EQ(got.size(), static_cast<std::size_t>(kCalls));
  std::vector<ExecutionId> acknowledged;
  int full = 0;
  for (const Admitted& a : got) {
    if (a.ok()) {
      ASSERT_EQ(a->size(), 1u);
      EXPECT_EQ(a->front().outcome, AdmitOutcome::kCreated);
      acknowledged.push_back(a->front().id);
    } else {
      EXPECT_EQ(a.status().code(), ErrorCode::kUnavailable) << a.status().ToString();
      ++full;
    }
  }
  EXPECT_GT(full, 0) << "the database never filled up";
  EXPECT_FALSE(acknowledged.empty());
  ExpectExactlyAcknowledged(o, acknowledged);
}

// Finishes nobody waits for are fenced as FinishBatch's: a stale claim
// version answers kStale and changes nothing; the current one publishes.
// Calls still queued when the store closes are committed and answered.
TEST(SqliteStoreTest, AsyncFinishesAreFencedAndAnsweredBeforeTheStoreCloses) {
  TempDir dir;
  FakeClock clock;
  constexpr int kLeases = 50;
  using Replies = std::vector<Result<FinishReply>>;
  Answers<Replies> stale;
  Answers<Replies> current;
  std::vector<Lease> leases;
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenWithJob(dir.File("finish.db"), &clock));
    std::vector<AdmitRequest> requests;
    for (int i = 0; i < kLeases; ++i) requests.push_back(Request(i));
    ASSERT_OK(store->AdmitBatch(requests));
    ClaimRequest c;
    c.worker = WorkerId("w");
    c.slots = {QueueSlot{"default", kLeases}};
    ASSERT_OK_AND_ASSIGN(leases, store->Claim(c));
    ASSERT_EQ(leases.size(), static_cast<std::size_t>(kLeases));
    for (const Lease& l : leases) {
      FinishRequest f;
      f.kind = FinishRequest::Kind::kComplete;
      f.lease = LeaseRef{l.id, ClaimVersion(l.version.value + 1)};
      store->FinishBatchAsync({f}, stale.Callback());
    }
    for (const Replies& r : stale.Await(kLeases)) {
      ASSERT_EQ(r.size(), 1u);
      EXPECT_EQ(r.front().status().code(), ErrorCode::kStale);
    }
    for (const Lease& l : leases) {
      ASSERT_OK_AND_ASSIGN(Execution e, store->GetExecution(l.id));
      EXPECT_EQ(e.status, ExecutionStatus::kRunning) << "a stale finish changed nothing";
    }
    for (const Lease& l : leases) {
      FinishRequest f;
      f.kind = FinishRequest::Kind::kComplete;
      f.lease = LeaseRef{l.id, l.version};
      store->FinishBatchAsync({f}, current.Callback());
    }
  }  // closed with the finishes possibly still queued
  std::vector<Replies> replies = current.Await(kLeases);
  ASSERT_EQ(replies.size(), static_cast<std::size_t>(kLeases));
  for (const Replies& r : replies) {
    ASSERT_EQ(r.size(), 1u);
    ASSERT_OK(r.front().status());
    EXPECT_EQ(r.front()->status, ExecutionStatus::kSucceeded);
  }
  ASSERT_OK_AND_ASSIGN(auto store, OpenWithJob(dir.File("finish.db"), &clock));
  for (const Lease& l : leases) {
    ASSERT_OK_AND_ASSIGN(Execution e, store->GetExecution(l.id));
    EXPECT_EQ(e.status, ExecutionStatus::kSucceeded);
  }
}

// Three store calls queued for one commit around `change`, an operation of
// the store that returns after its own commit. Another connection holds the
// write lock, so the writer waits in BEGIN with the call `first` makes; the
// calls `before` makes, `change` (on its own thread) and the calls `after`
// makes queue up behind it in that order.
void QueueAroundAChange(const std::string& path, const std::function<void()>& first,
                        const std::function<void()>& before, const std::function<void()>& change,
                        const std::function<void()>& after) {
  sqlite3* blocker = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &blocker), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(blocker, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  first();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  before();
  std::thread changing(change);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  after();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(sqlite3_exec(blocker, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(blocker);
  changing.join();
}

// The one answer `answers` gets (`none` when it gets none).
template <typename T>
T OnlyAnswer(Answers<T>& answers, T none) {
  std::vector<T> all = answers.Await(1);
  EXPECT_EQ(all.size(), 1u);
  if (all.empty()) return none;
  return std::move(all.front());
}
const Status kNotAnswered = Internal("not answered");

// The answers of three admissions queued around `change` (QueueAroundAChange).
struct AroundAChange {
  Result<std::vector<AdmitResult>> first, before, after;
};
AroundAChange AdmitAroundAChange(Store& store, const std::string& path, const AdmitRequest& first,
                                 const AdmitRequest& before, const std::function<void()>& change,
                                 const AdmitRequest& after) {
  using Admitted = Result<std::vector<AdmitResult>>;
  Answers<Admitted> f, b, a;
  QueueAroundAChange(
      path, [&] { store.AdmitBatchAsync({first}, f.Callback()); },
      [&] { store.AdmitBatchAsync({before}, b.Callback()); }, change,
      [&] { store.AdmitBatchAsync({after}, a.Callback()); });
  Admitted answered_first = OnlyAnswer<Admitted>(f, kNotAnswered);
  Admitted answered_before = OnlyAnswer<Admitted>(b, kNotAnswered);
  return {std::move(answered_first), std::move(answered_before),
          OnlyAnswer<Admitted>(a, kNotAnswered)};
}

// The admissions of one commit read each job's definition once, but never
// across an operation that may change it: an admission queued behind a
// change of its job's queue, in the same commit, gets the new queue.
TEST(SqliteStoreTest, AnAdmissionAfterADefinitionChangeInItsCommitReadsTheNewDefinition) {
  TempDir dir;
  FakeClock clock;
  const std::string path = dir.File("defs.db");
  ASSERT_OK_AND_ASSIGN(auto store, OpenWithJob(path, &clock));
  JobDefinition changed = Job();
  changed.queue = "other";
  const AroundAChange r = AdmitAroundAChange(
      *store, path, Request(0), Request(1), [&] { EXPECT_OK(store->UpsertJob(changed)); },
      Request(2));
  ASSERT_OK(r.before.status());
  ASSERT_OK(r.after.status());
  ASSERT_OK_AND_ASSIGN(Execution e1, store->GetExecution(r.before->front().id));
  ASSERT_OK_AND_ASSIGN(Execution e2, store->GetExecution(r.after->front().id));
  EXPECT_EQ(e1.queue, "default");
  EXPECT_EQ(e2.queue, "other") << "admitted on the definition read before it changed";
}

// A token "ci" with `scope`, for every tenant.
ApiToken Token(const std::string& scope) {
  ApiToken token;
  token.name = "ci";
  token.secret_hash = Sha256Hex("te_secret");
  token.principal = "ci";
  token.scopes = {scope};
  token.tenants = {"*"};
  return token;
}

// Likewise for API tokens: the admissions of one commit confirm a token once,
// but an admission queued behind the token's revocation, in the same commit,
// is refused.
TEST(SqliteStoreTest, AnAdmissionAfterItsTokensRevocationInItsCommitIsRefused) {
  TempDir dir;
  FakeClock clock;
  const std::string path = dir.File("tokens.db");
  ASSERT_OK_AND_ASSIGN(auto store, OpenWithJob(path, &clock));
  ASSERT_OK_AND_ASSIGN(std::int64_t id, store->CreateToken(Token("dispatch")));
  const auto asked = [&](int i) {
    AdmitRequest r = Request(i);
    r.token_id = id;
    return r;
  };
  const AroundAChange r = AdmitAroundAChange(
      *store, path, asked(0), asked(1), [&] { EXPECT_OK(store->RevokeToken(id)); }, asked(2));
  EXPECT_OK(r.first.status());
  EXPECT_OK(r.before.status());
  EXPECT_EQ(r.after.status().code(), ErrorCode::kUnauthenticated)
      << "admitted on the token confirmed before its revocation";
}

// The finishes of one commit confirm a token once too, and so do an
// admission and the finishes after it: a finish queued behind the token's
// revocation, in the same commit, is refused and changes nothing.
TEST(SqliteStoreTest, AFinishAfterItsTokensRevocationInItsCommitIsRefused) {
  TempDir dir;
  FakeClock clock;
  const std::string path = dir.File("tokens.db");
  ASSERT_OK_AND_ASSIGN(auto store, OpenWithJob(path, &clock));
  ASSERT_OK_AND_ASSIGN(std::int64_t id, store->CreateToken(Token("worker")));
  ASSERT_OK(store->AdmitBatch({Request(0), Request(1)}));
  ClaimRequest c;
  c.worker = WorkerId("w");
  c.slots = {QueueSlot{"default", 2}};
  ASSERT_OK_AND_ASSIGN(std::vector<Lease> leases, store->Claim(c));
  ASSERT_EQ(leases.size(), 2u);
  const auto asked = [&](const Lease& lease) {
    FinishRequest f;
    f.lease = LeaseRef{lease.id, lease.version};
    f.token_id = id;
    return f;
  };
  AdmitRequest admission = Request(2);
  admission.token_id = id;
  using Admitted = Result<std::vector<AdmitResult>>;
  using Replies = std::vector<Result<FinishReply>>;
  Answers<Admitted> first;
  Answers<Replies> before, after;
  QueueAroundAChange(
      path, [&] { store->AdmitBatchAsync({admission}, first.Callback()); },
      [&] { store->FinishBatchAsync({asked(leases[0])}, before.Callback()); },
      [&] { EXPECT_OK(store->RevokeToken(id)); },
      [&] { store->FinishBatchAsync({asked(leases[1])}, after.Callback()); });
  EXPECT_OK(OnlyAnswer<Admitted>(first, kNotAnswered).status());
  const Replies answered_before = OnlyAnswer<Replies>(before, Replies{kNotAnswered});
  const Replies answered_after = OnlyAnswer<Replies>(after, Replies{kNotAnswered});
  ASSERT_EQ(answered_before.size(), 1u);
  ASSERT_EQ(answered_after.size(), 1u);
  EXPECT_OK(answered_before[0].status());
  EXPECT_EQ(answered_after[0].status().code(), ErrorCode::kUnauthenticated)
      << "finished on the token confirmed before its revocation";
  ASSERT_OK_AND_ASSIGN(Execution e, store->GetExecution(leases[1].id));
  EXPECT_EQ(e.status, ExecutionStatus::kRunning);
}

// Checkpoints run on the store's checkpointer thread, not in the writer's
// commits: once the WAL passes 1,000 pages, its pages reach the database file
// while the store stays open.
TEST(SqliteStoreTest, WalIsCheckpointedIntoTheDatabaseFileWhileOpen) {
  TempDir dir;
  SqliteStoreOptions o;
  o.path = dir.File("ckpt.db");
  ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(o));
  ASSERT_OK(store->Migrate());
  ASSERT_OK(store->UpsertJob(Job()));
  const auto before = std::filesystem::file_size(o.path);
  // About 2 KiB per row: 3,000 rows are some 1,500 pages of WAL at least.
  for (int i = 0; i < 3000; i += 100) {
    std::vector<AdmitRequest> batch;
    for (int k = i; k < i + 100; ++k) batch.push_back(Request(k));
    ASSERT_OK(store->AdmitBatch(batch).status());
  }
  EXPECT_TRUE(WaitFor([&] { return std::filesystem::file_size(o.path) > before + 2'000'000; }))
      << "database file: " << std::filesystem::file_size(o.path) << " bytes";
}

// Under writes that never pause, the WAL still starts over after each
// checkpoint, so it stays a few checkpoint sizes long: the checkpointer
// copies it beside the writer, and the writer copies what it committed
// meanwhile before its next transaction. (A checkpoint running beside a
// writer that never pauses never catches up with it alone: the WAL would
// grow with every commit, and every commit would ask for a checkpoint.)
TEST(SqliteStoreTest, WalStartsOverUnderWritesThatNeverPause) {
  TempDir dir;
  SqliteStoreOptions o;
  o.path = dir.File("busy.db");
  o.checkpoint_pages = 200;
  ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(o));
  ASSERT_OK(store->Migrate());
  ASSERT_OK(store->UpsertJob(Job()));
  // 8,000 admissions of about 2 KiB each, one per call, with 32 calls
  // queued at all times: the writer is never idle. They write about 4,000
  // pages of WAL.
  constexpr int kCalls = 8000;
  constexpr int kInFlight = 32;
  std::atomic<int> next{0};
  std::atomic<int> answered{0};
  std::atomic<int> failed{0};
  std::function<void()> submit = [&] {
    const int i = next.fetch_add(1);
    if (i >= kCalls) return;
    store->AdmitBatchAsync({Request(i)}, [&](Result<std::vector<AdmitResult>> r) {
      if (!r.ok()) ++failed;
      ++answered;
      submit();
    });
  };
  for (int i = 0; i < kInFlight; ++i) submit();
  ASSERT_TRUE(WaitFor([&] { return answered.load() == kCalls; }, std::chrono::seconds(120)))
      << answered.load() << " of " << kCalls << " answered";
  EXPECT_EQ(failed.load(), 0);
  // A WAL file keeps its largest size: never more than 5 checkpoints' worth.
  const auto wal = std::filesystem::file_size(o.path + "-wal");
  EXPECT_LE(wal, 5u * 200 * (4096 + 24)) << "WAL file: " << wal << " bytes";
}

TEST(SqliteStoreTest, NewerSchemaIsRefused) {
  TempDir dir;
  SqliteStoreOptions o;
  o.path = dir.File("newer.db");
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(o));
    ASSERT_OK(store->Migrate());
  }
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(o.path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 999", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(o));
  Status s = store->Migrate();
  EXPECT_EQ(s.code(), ErrorCode::kUnavailable);
  EXPECT_NE(s.message().find("newer"), std::string::npos) << s.message();
  ASSERT_OK_AND_ASSIGN(int version, store->SchemaVersion());
  EXPECT_EQ(version, 999);
}

// O1, version 8: lanes became (tenant, lane key). A database of version 7
// holds executions parked behind another tenant's member of the same key;
// the migration makes each tenant's oldest open member its lane's head.
// Runs `sql` on the database at `path` through a connection of its own (a
// test's downgrade to an older schema).
void RunRaw(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
}

// The store at `o` after Migrate, which brought it to the current version.
Result<std::unique_ptr<Store>> OpenMigrated(const SqliteStoreOptions& o) {
  TE_ASSIGN_OR_RETURN(auto store, OpenSqliteStore(o));
  TE_RETURN_IF_ERROR(store->Migrate());
  TE_ASSIGN_OR_RETURN(int version, store->SchemaVersion());
  if (version != sqlite::kSchemaVersion) return Internal("migrated to " + std::to_string(version));
  return store;
}

// Undoes version 15: each payload back in its execution's row.
constexpr const char* kDowngradePayloads =
    "ALTER TABLE executions ADD COLUMN payload TEXT NOT NULL DEFAULT '';"
    "UPDATE executions SET payload = (SELECT payload FROM execution_payloads"
    "  WHERE execution_id = executions.id);"
    "DROP TABLE execution_payloads;";

// Version 15 moves each payload out of its execution's row, unchanged: a
// database of version 14 keeps every payload, and a claim and the reads of
// one execution and of a list answer it. Claims and endings no longer touch
// the payload's row.
TEST(SqliteStoreTest, P1_MigrationMovesPayloadsToARowWrittenOnce) {
  TempDir dir;
  FakeClock clock;
  SqliteStoreOptions o;
  o.path = dir.File("payloads.db");
  o.clock = &clock;
  const std::string large = "{\"blob\":\"" + std::string(20000, 'x') + "\"}";
  std::vector<ExecutionId> ids;
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(o));
    ASSERT_OK(store->Migrate());
    ASSERT_OK(store->UpsertJob(Job()));
    for (int i = 0; i < 3; ++i) {
      AdmitRequest r = Request(i);
      if (i == 1) r.payload_json = large;
      ASSERT_OK_AND_ASSIGN(AdmitResult a, store->Admit(r));
      ids.push_back(a.id);
    }
    ASSERT_NO_FATAL_FAILURE(
        RunRaw(o.path, std::string(kDowngradePayloads) + "PRAGMA user_version = 14;"));
  }
  ASSERT_OK_AND_ASSIGN(auto store, OpenMigrated(o));
  auto payload_of = [&](int i) { return i == 1 ? large : Request(i).payload_json; };
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(Execution e, store->GetExecution(ids[i]));
    EXPECT_EQ(e.payload_json, payload_of(i)) << i;
  }
  ASSERT_OK_AND_ASSIGN(ExecutionPage page, store->ListExecutions(ExecutionFilter{}));
  ASSERT_EQ(page.items.size(), 3u);
  for (const Execution& e : page.items) {
    const auto at = std::find(ids.begin(), ids.end(), e.id) - ids.begin();
    EXPECT_EQ(e.payload_json, payload_of(static_cast<int>(at))) << e.id.value;
  }
  ClaimRequest claim;
  claim.worker = WorkerId("w1");
  claim.slots = {{"default", 10}};
  ASSERT_OK_AND_ASSIGN(std::vector<Lease> leases, store->Claim(claim));
  ASSERT_EQ(leases.size(), 3u);
  for (const Lease& l : leases) {
    const auto at = std::find(ids.begin(), ids.end(), l.id) - ids.begin();
    EXPECT_EQ(l.payload_json, payload_of(static_cast<int>(at))) << l.id.value;
  }
  // The payloads' rows stay as admission wrote them: neither the claims nor
  // the ending below write to execution_payloads.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(o.path.c_str(), &db), SQLITE_OK);
  auto changes = [&] {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(
        sqlite3_prepare_v2(db, "SELECT COUNT(*), SUM(length(payload)) FROM execution_payloads", -1,
                           &st, nullptr),
        SQLITE_OK);
    EXPECT_EQ(sqlite3_step(st), SQLITE_ROW);
    std::pair<std::int64_t, std::int64_t> out{sqlite3_column_int64(st, 0),
                                              sqlite3_column_int64(st, 1)};
    sqlite3_finalize(st);
    return out;
  };
  const auto before = changes();
  EXPECT_EQ(before.first, 3);
  ASSERT_OK(store->Complete(LeaseRef{leases[0].id, leases[0].version}, "{\"ok\":true}").status());
  EXPECT_EQ(changes(), before);
  sqlite3_close(db);
}

TEST(SqliteStoreTest, O1_MigrationToPerTenantLanesUnparksOtherTenantsHeads) {
  TempDir dir;
  FakeClock clock;
  SqliteStoreOptions o;
  o.path = dir.File("lanes.db");
  o.clock = &clock;
  auto in_lane = [](int i, const std::string& tenant) {
    AdmitRequest r = Request(i);
    r.tenant = TenantId(tenant);
    r.lane_key = "orders";
    return r;
  };
  ExecutionId a1, a2, b1;
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(o));
    ASSERT_OK(store->Migrate());
    ASSERT_OK(store->UpsertJob(Job()));
    ASSERT_OK_AND_ASSIGN(AdmitResult r1, store->Admit(in_lane(1, "a")));
    ASSERT_OK_AND_ASSIGN(AdmitResult r2, store->Admit(in_lane(2, "a")));
    ASSERT_OK_AND_ASSIGN(AdmitResult r3, store->Admit(in_lane(3, "b")));
    a1 = r1.id, a2 = r2.id, b1 = r3.id;
  }
  {
    // Back to version 7: one lane per key, so b's member waited behind a's
    // (and no handler_started column, which version 9 adds, nor
    // job_definitions.seed_digest of version 10, the worker columns of
    // version 11, the tenant counters and search indexes of version 12, the
    // notification tables of version 13, the session column name of 14, or
    // the payload table of 15).
    const std::string downgrade =
        std::string(kDowngradePayloads) +
        "DROP INDEX executions_by_status; DROP INDEX executions_by_queued_at;"
        "DROP INDEX executions_by_finished_at;"
        "CREATE INDEX executions_attention ON executions(status, id) WHERE status IN (3, 4);"
        "DROP TABLE status_counts;"
        "CREATE TABLE status_counts (queue TEXT NOT NULL, status INTEGER NOT NULL,"
        "  count INTEGER NOT NULL, PRIMARY KEY (queue, status)) STRICT, WITHOUT ROWID;"
        "DROP TABLE hourly_outcomes;"
        "CREATE TABLE hourly_outcomes (hour INTEGER NOT NULL, status INTEGER NOT NULL,"
        "  count INTEGER NOT NULL, PRIMARY KEY (hour, status)) STRICT, WITHOUT ROWID;"
        "ALTER TABLE executions DROP COLUMN handler_started;"
        "ALTER TABLE job_definitions DROP COLUMN seed_digest;"
        "ALTER TABLE workers DROP COLUMN kind; ALTER TABLE workers DROP COLUMN threads;"
        "ALTER TABLE workers DROP COLUMN busy;"
        "ALTER TABLE workers DROP COLUMN current_executions;"
        "ALTER TABLE job_definitions DROP COLUMN notify_on_failure;"
        "ALTER TABLE job_definitions DROP COLUMN notify_targets;"
        "DROP TABLE notify_outbox; DROP TABLE notify_state;"
        "ALTER TABLE sessions RENAME COLUMN user_name TO user;"
        "DROP INDEX executions_lane_open;"
        "CREATE INDEX executions_lane_open ON executions(lane_key, id)"
        "  WHERE lane_key <> '' AND status IN (0, 1, 3, 4);"
        "UPDATE executions SET lane_parked = 1 WHERE id = " +
        std::to_string(b1.value) + "; PRAGMA user_version = 7;";
    ASSERT_NO_FATAL_FAILURE(RunRaw(o.path, downgrade));
  }
  ASSERT_OK_AND_ASSIGN(auto store, OpenMigrated(o));
  ClaimRequest claim;
  claim.worker = WorkerId("w1");
  claim.slots = {{"default", 10}};
  ASSERT_OK_AND_ASSIGN(std::vector<Lease> leases, store->Claim(claim));
  std::set<std::int64_t> ids;
  for (const Lease& l : leases) ids.insert(l.id.value);
  EXPECT_EQ(ids, (std::set<std::int64_t>{a1.value, b1.value})) << "a2 still waits for a1";
  ASSERT_OK_AND_ASSIGN(LaneStatus lane, store->GetLane(TenantId("a"), "orders"));
  EXPECT_EQ(lane.head, a1);
  EXPECT_EQ(lane.queued, 1);
  EXPECT_NE(a2, ExecutionId());
}

// Store::AdmissionClaimer as the test sees it: reserves while `grant` lasts,
// records what the store delivers and gives back.
class RecordingClaimer final : public Store::AdmissionClaimer {
 public:
  bool Reserve(const std::string& queue) override {
    reserved.push_back(queue);
    if (grant == 0) return false;
    --grant;
    return true;
  }
  void Deliver(Lease lease) override { delivered.push_back(std::move(lease)); }
  void Unreserve(const std::string& queue) override { unreserved.push_back(queue); }
  WorkerId worker() const override { return WorkerId("idle-worker"); }

  int grant = 0;
  std::vector<std::string> reserved, unreserved;
  std::vector<Lease> delivered;
};

// P2, claim at admission: an admission due now asks the claimer; when it
// reserves, the execution is claimed in the same transaction (running,
// attempt 1, claim version 1, the claimer's worker) and its lease delivered
// after the COMMIT; when it does not, the execution stays queued. An
// admission run later (run_at in the future) does not ask.
TEST(SqliteStoreTest, P2_AdmissionClaimsForAReservedWorkerAndDeliversAfterCommit) {
  TempDir dir;
  FakeClock clock;
  ASSERT_OK_AND_ASSIGN(auto store, OpenWithJob(dir.File("claims.db"), &clock));
  RecordingClaimer claimer;
  claimer.grant = 1;
  store->SetAdmissionClaimer(&claimer);
  ASSERT_OK_AND_ASSIGN(auto admitted, store->AdmitBatch({Request(1), Request(2)}));
  ASSERT_EQ(admitted.size(), 2u);
  EXPECT_EQ(admitted[0].status, ExecutionStatus::kRunning);
  EXPECT_EQ(admitted[1].status, ExecutionStatus::kQueued);
  EXPECT_EQ(claimer.reserved.size(), 2u);
  EXPECT_TRUE(claimer.unreserved.empty());
  ASSERT_EQ(claimer.delivered.size(), 1u);
  const Lease& lease = claimer.delivered.front();
  EXPECT_EQ(lease.id, admitted[0].id);
  EXPECT_EQ(lease.version.value, 1);
  EXPECT_EQ(lease.attempt, 1);
  EXPECT_EQ(lease.queue, "default");
  ASSERT_OK_AND_ASSIGN(Execution e, store->GetExecution(admitted[0].id));
  EXPECT_EQ(e.status, ExecutionStatus::kRunning);
  EXPECT_EQ(e.worker.value, "idle-worker");
  EXPECT_EQ(e.attempt, 1);
  // The lease is the current claim: it finishes the execution.
  ASSERT_OK(store->Complete(LeaseRef{lease.id, lease.version}, "{}").status());
  ASSERT_OK_AND_ASSIGN(e, store->GetExecution(admitted[0].id));
  EXPECT_EQ(e.status, ExecutionStatus::kSucceeded);
  // The unclaimed one is due for an ordinary claim.
  ClaimRequest c;
  c.worker = WorkerId("other");
  c.slots = {QueueSlot{"default", 10}};
  ASSERT_OK_AND_ASSIGN(auto leases, store->Claim(c));
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases.front().id, admitted[1].id);
  // Not due yet: not offered.
  AdmitRequest later = Request(3);
  later.run_at = clock.NowMillis() + 60'000;
  claimer.grant = 1;
  const std::size_t asked = claimer.reserved.size();
  ASSERT_OK_AND_ASSIGN(auto queued, store->Admit(later));
  EXPECT_EQ(queued.status, ExecutionStatus::kQueued);
  EXPECT_EQ(claimer.reserved.size(), asked);
  store->SetAdmissionClaimer(nullptr);
}

// An admission that does not commit (its batch fails on a later request)
// gives its reserved worker back and delivers nothing; nothing was admitted.
TEST(SqliteStoreTest, P2_AdmissionThatDoesNotCommitGivesTheReservedWorkerBack) {
  TempDir dir;
  FakeClock clock;
  ASSERT_OK_AND_ASSIGN(auto store, OpenWithJob(dir.File("rollback.db"), &clock));
  RecordingClaimer claimer;
  claimer.grant = 5;
  store->SetAdmissionClaimer(&claimer);
  AdmitRequest unknown = Request(2);
  unknown.job = JobName("no-such-job");
  auto admitted = store->AdmitBatch({Request(1), unknown});
  EXPECT_EQ(admitted.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(claimer.reserved.size(), 1u);
  EXPECT_EQ(claimer.unreserved, std::vector<std::string>{"default"});
  EXPECT_TRUE(claimer.delivered.empty());
  ExecutionFilter all;
  all.limit = 10;
  ASSERT_OK_AND_ASSIGN(auto page, store->ListExecutions(all));
  EXPECT_TRUE(page.items.empty());
  store->SetAdmissionClaimer(nullptr);
}

// A failing operation changes nothing while the others of its commit still
// commit, whether or not the writer ran them in savepoints (it runs a batch
// of operations on executions alone without them): here an admission of two
// that fails on its second after writing its first, between admissions that
// succeed, with a worker reserved for each admission claimed in the same
// transaction. Every reservation is delivered once its admission commits or
// given back.
TEST(SqliteStoreTest, AFailingOperationChangesNothingWhileTheOthersOfItsCommitCommit) {
  TempDir dir;
  FakeClock clock;
  const std::string path = dir.File("batch.db");
  ASSERT_OK_AND_ASSIGN(auto store, OpenWithJob(path, &clock));
  RecordingClaimer claimer;
  claimer.grant = 100;
  store->SetAdmissionClaimer(&claimer);
  AdmitRequest unknown = Request(3);
  unknown.job = JobName("no-such-job");
  using Admitted = Result<std::vector<AdmitResult>>;
  Answers<Admitted> first, before, failing, after;
  QueueAroundAChange(
      path, [&] { store->AdmitBatchAsync({Request(0)}, first.Callback()); },
      [&] {
        store->AdmitBatchAsync({Request(1)}, before.Callback());
        store->AdmitBatchAsync({Request(2), unknown}, failing.Callback());
      },
      [] {}, [&] { store->AdmitBatchAsync({Request(4)}, after.Callback()); });
  std::vector<ExecutionId> committed;
  for (Answers<Admitted>* answers : {&first, &before, &after}) {
    const Admitted a = OnlyAnswer<Admitted>(*answers, kNotAnswered);
    ASSERT_OK(a.status());
    ASSERT_EQ(a->size(), 1u);
    committed.push_back(a->front().id);
  }
  EXPECT_EQ(OnlyAnswer<Admitted>(failing, kNotAnswered).status().code(), ErrorCode::kNotFound);
  ExecutionFilter all;
  all.limit = 10;
  ASSERT_OK_AND_ASSIGN(auto page, store->ListExecutions(all));
  std::vector<ExecutionId> stored;
  for (const Execution& e : page.items) stored.push_back(e.id);
  std::sort(stored.begin(), stored.end());
  EXPECT_EQ(stored, committed) << "the failing admission's first request was committed";
  std::vector<ExecutionId> delivered;
  for (const Lease& lease : claimer.delivered) delivered.push_back(lease.id);
  std::sort(delivered.begin(), delivered.end());
  EXPECT_EQ(delivered, committed);
  EXPECT_EQ(claimer.reserved.size(), claimer.delivered.size() + claimer.unreserved.size());
  store->SetAdmissionClaimer(nullptr);
}

TEST(SqliteStoreTest, UnopenablePathIsUnavailable) {
  SqliteStoreOptions o;
  o.path = "/nonexistent-dir/sub/te.db";
  auto store = OpenSqliteStore(o);
  EXPECT_EQ(store.status().code(), ErrorCode::kUnavailable) << store.status().ToString();
}

TEST(SqliteStoreTest, NormalSyncModeWorks) {
  TempDir dir;
  SqliteStoreOptions o;
  o.path = dir.File("normal.db");
  o.sync = SyncMode::kNormal;
  ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(o));
  ASSERT_OK(store->Migrate());
  ASSERT_OK(store->UpsertJob(Job()));
  ASSERT_OK_AND_ASSIGN(AdmitResult r, store->Admit(Request(1)));
  EXPECT_EQ(r.outcome, AdmitOutcome::kCreated);
}

// Each row of the EXPLAIN (or EXPLAIN QUERY PLAN) of `sql` on `db`: the
// opcode of each instruction (column 1), or each step of the plan (column 3).
std::vector<std::string> Explain(sqlite3* db, const std::string& sql, bool query_plan) {
  std::vector<std::string> out;
  sqlite3_stmt* stmt = nullptr;
  const std::string text = (query_plan ? "EXPLAIN QUERY PLAN " : "EXPLAIN ") + sql;
  EXPECT_EQ(sqlite3_prepare_v2(db, text.c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db) << "\n"
      << text;
  while (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
    const unsigned char* v = sqlite3_column_text(stmt, query_plan ? 3 : 1);
    out.emplace_back(v != nullptr ? reinterpret_cast<const char*>(v) : "");
  }
  sqlite3_finalize(stmt);
  return out;
}

// The migrated schema of a new SQLite store, opened read-only.
class MigratedSchema {
 public:
  MigratedSchema() {
    SqliteStoreOptions o;
    o.path = dir_.File("schema.db");
    o.clock = &clock_;
    {
      auto store = OpenSqliteStore(o);
      EXPECT_TRUE(store.ok() && (*store)->Migrate().ok());
    }
    EXPECT_EQ(sqlite3_open_v2(o.path.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  }
  ~MigratedSchema() { sqlite3_close(db_); }
  sqlite3* db() const { return db_; }

 private:
  TempDir dir_;
  FakeClock clock_;
  sqlite3* db_ = nullptr;
};

// I1: every common combination of search criteria is an index seek, never a
// scan of the whole table (EXPLAIN QUERY PLAN of the statements the store
// builds, on the migrated schema).
TEST(SqliteStoreTest, I1_SearchCombinationsUseAnIndex) {
  MigratedSchema schema;
  sqlite3* db = schema.db();
  struct Combination {
    const char* name;
    ExecutionFilter filter;
  };
  std::vector<Combination> combinations;
  auto add = [&](const char* name, auto set) {
    ExecutionFilter f;
    set(f);
    combinations.push_back({name, f});
  };
  add("job", [](ExecutionFilter& f) { f.job = JobName("a"); });
  add("tenant", [](ExecutionFilter& f) { f.tenant = TenantId("t1"); });
  add("status", [](ExecutionFilter& f) { f.status = ExecutionStatus::kSucceeded; });
  add("statuses", [](ExecutionFilter& f) {
    f.statuses = {ExecutionStatus::kFailed, ExecutionStatus::kQuarantined};
  });
  add("job+status", [](ExecutionFilter& f) {
    f.job = JobName("a");
    f.status = ExecutionStatus::kFailed;
  });
  add("tenant+status", [](ExecutionFilter& f) {
    f.tenant = TenantId("t1");
    f.status = ExecutionStatus::kQueued;
  });
  add("tenant scope+job", [](ExecutionFilter& f) {
    f.tenants = std::vector<TenantId>{TenantId("t1"), TenantId("t2")};
    f.job = JobName("a");
  });
  add("job+trigger", [](ExecutionFilter& f) {
    f.job = JobName("a");
    f.triggers = {Trigger::kRetry};
  });
  add("status+trigger", [](ExecutionFilter& f) {
    f.status = ExecutionStatus::kFailed;
    f.triggers = {Trigger::kReplay};
  });
  add("queued range", [](ExecutionFilter& f) {
    f.queued_from = 1000;
    f.queued_to = 2000;
  });
  add("ended range", [](ExecutionFilter& f) {
    f.ended_from = 1000;
    f.ended_to = 2000;
  });
  add("ended since", [](ExecutionFilter& f) { f.ended_from = 1000; });
  add("trigger+cursor", [](ExecutionFilter& f) {
    f.triggers = {Trigger::kScheduled};
    f.before = ExecutionId(500);
  });
  add("running", [](ExecutionFilter& f) { f.status = ExecutionStatus::kRunning; });
  add("queued+running", [](ExecutionFilter& f) {
    f.statuses = {ExecutionStatus::kQueued, ExecutionStatus::kRunning};
  });
  add("job+running+cursor", [](ExecutionFilter& f) {
    f.job = JobName("a");
    f.status = ExecutionStatus::kRunning;
    f.before = ExecutionId(500);
  });
  add("tenant+running", [](ExecutionFilter& f) {
    f.tenant = TenantId("t1");
    f.status = ExecutionStatus::kRunning;
  });
  for (const Combination& c : combinations) {
    for (bool count_only : {false, true}) {
      for (const storage_internal::ListPart& part : storage_internal::PlanListParts(c.filter)) {
        storage_internal::ListSql q = storage_internal::BuildListSql(
            c.filter, part, "*", 51, count_only, '?', sqlite::kListIndexing);
        sqlite3_stmt* stmt = nullptr;
        const std::string sql = "EXPLAIN QUERY PLAN " + q.sql;
        ASSERT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
            << sqlite3_errmsg(db) << "\n"
            << sql;
        for (std::size_t i = 0; i < q.args.size(); ++i) {
          if (q.args[i].is_text) {
            sqlite3_bind_text(stmt, static_cast<int>(i) + 1, q.args[i].text.c_str(), -1,
                              SQLITE_TRANSIENT);
          } else {
            sqlite3_bind_int64(stmt, static_cast<int>(i) + 1, q.args[i].number);
          }
        }
        std::string plan;
        while (sqlite3_step(stmt) == SQLITE_ROW) {
          plan += reinterpret_cast<const char*>(sqlite3_column_text(stmt, 3));
          plan += "\n";
        }
        sqlite3_finalize(stmt);
        // Running executions are read through the leases index (its rows
        // are the leases held), the others by a seek.
        const bool running = part.status == static_cast<int>(ExecutionStatus::kRunning);
        EXPECT_NE(plan.find(running ? "SCAN executions USING INDEX executions_leases"
                                    : "SEARCH executions USING"),
                  std::string::npos)
            << c.name << (count_only ? " (count)" : "") << ": " << q.sql << "\n"
            << plan;
      }
    }
  }
}

// In a partial index's WHERE, SQLite tests an IN list of more than two values
// against a temporary b-tree (OpenEphemeral) that it builds for each row an
// INSERT or UPDATE writes: a lane's admission, claim and ending cost twice as
// much with the index of open lanes written that way (TE_SQLITE_HOLDS_LANE).
// No partial index names one.
TEST(SqliteStoreTest, O1_NoPartialIndexTestsAnInList) {
  MigratedSchema schema;
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(schema.db(),
                               "SELECT name, sql FROM sqlite_schema WHERE type = 'index'"
                               " AND sql IS NOT NULL",
                               -1, &stmt, nullptr),
            SQLITE_OK);
  int partial = 0;
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    const std::string name = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    const std::string sql = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 1));
    const std::size_t where = sql.find(" WHERE ");
    if (where == std::string::npos) continue;
    ++partial;
    EXPECT_EQ(sql.find(" IN (", where), std::string::npos) << name << ": " << sql;
  }
  sqlite3_finalize(stmt);
  EXPECT_GE(partial, 5);
  // The statements that write an execution's row build no temporary b-tree.
  for (const char* write :
       {storage_internal::sql::kClaimUpdate, storage_internal::sql::kApplyTransition,
        storage_internal::sql::kMarkStartedOne}) {
    for (const std::string& op : Explain(schema.db(), write, /*query_plan=*/false)) {
      EXPECT_NE(op, "OpenEphemeral") << write;
    }
  }
}

// O1: SQLite's statements of lanes, the unparking of the next member too,
// name the statuses that hold a lane as its index of open lanes does
// (TE_SQLITE_HOLDS_LANE), so that they seek it.
TEST(SqliteStoreTest, O1_LaneStatementsSeekTheOpenLanesIndex) {
  MigratedSchema schema;
  const storage_internal::SqlLaneReads& reads = storage_internal::kSqliteDialect.lanes;
  for (const char* text :
       {storage_internal::kSqliteLaneOpen, storage_internal::kSqliteLaneHasUnparkedOpen, reads.head,
        reads.counts, reads.open_lanes, reads.open_lanes_of_tenant,
        storage_internal::kSqliteLaneUnparkNext}) {
    std::string plan;
    for (const std::string& step : Explain(schema.db(), text, /*query_plan=*/true)) {
      plan += step + "\n";
    }
    EXPECT_NE(plan.find("USING INDEX executions_lane_open"), std::string::npos) << text << "\n"
                                                                                << plan;
  }
}

// I7: a database made before incremental auto-vacuum gives nothing back
// until db:vacuum (sqlite::Vacuum) converts it; a new one is incremental
// from the start.
TEST(SqliteStoreTest, I7_VacuumConvertsAnOlderDatabaseToIncrementalAutoVacuum) {
  TempDir dir;
  const std::string path = dir.File("old.db");
  auto mode = [&](const std::string& file) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, "PRAGMA auto_vacuum", -1, &st, nullptr), SQLITE_OK);
    EXPECT_EQ(sqlite3_step(st), SQLITE_ROW);
    const int m = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return m;
  };
  {
    // An older version's file: tables created without auto-vacuum.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "PRAGMA journal_mode=WAL; CREATE TABLE t(x BLOB);"
                           "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE "
                           "i < 500) INSERT INTO t SELECT zeroblob(4000) FROM n; DELETE FROM t;",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  ASSERT_EQ(mode(path), 0);
  SqliteStoreOptions o;
  o.path = path;
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(o));
    ASSERT_OK(store->Migrate());
    ASSERT_OK_AND_ASSIGN(std::int64_t pages, store->ReclaimSpace(1'000));
    EXPECT_EQ(pages, 0) << "an older file keeps its free pages";
  }
  ASSERT_OK_AND_ASSIGN(sqlite::VacuumReport r, sqlite::Vacuum(path, 5'000));
  EXPECT_FALSE(r.was_incremental);
  EXPECT_LT(r.bytes_after, r.bytes_before) << "the deleted blobs' pages are gone";
  EXPECT_EQ(mode(path), 2);
  ASSERT_OK_AND_ASSIGN(sqlite::VacuumReport again, sqlite::Vacuum(path, 5'000));
  EXPECT_TRUE(again.was_incremental);
  EXPECT_EQ(sqlite::Vacuum(dir.File("missing.db"), 5'000).status().code(), ErrorCode::kNotFound);

  SqliteStoreOptions fresh;
  fresh.path = dir.File("new.db");
  {
    ASSERT_OK_AND_ASSIGN(auto store, OpenSqliteStore(fresh));
    ASSERT_OK(store->Migrate());
  }
  EXPECT_EQ(mode(fresh.path), 2);
}

}  // namespace
}  // namespace taskengine
