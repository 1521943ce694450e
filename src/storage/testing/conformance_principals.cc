// Conformance cases for principals (X1): users, hashed API tokens and
// dashboard sessions.
#include <cstdint>
#include <string>
#include <vector>

#include "core/canonical_json.h"
#include "storage/testing/conformance.h"

namespace taskengine {
namespace {

User MakeUser(const std::string& name) {
  User u;
  u.name = name;
  u.password_hash = "$argon2id$v=19$m=65536,t=2,p=1$c2FsdA$aGFzaA";
  u.scopes = {"read", "operate"};
  u.tenants = {"acme", "globex"};
  return u;
}

ApiToken MakeToken(const std::string& secret, const std::string& principal) {
  ApiToken t;
  t.name = "label-" + principal;
  t.secret_hash = Sha256Hex(secret);
  t.principal = principal;
  t.scopes = {"dispatch"};
  t.tenants = {"*"};
  return t;
}

// The tokens of the X1 confirmation tests: one that stays live, one that
// expires 1 s after `now` and one to be revoked.
struct TokensToConfirm {
  std::int64_t live = 0, dated = 0, doomed = 0;
};
TokensToConfirm CreateTokensToConfirm(Store& store, Millis now) {
  const auto create = [&](const ApiToken& token) {
    Result<std::int64_t> id = store.CreateToken(token);
    EXPECT_OK(id.status());
    return id.ok() ? *id : 0;
  };
  ApiToken expiring = MakeToken("expiring", "ops");
  expiring.expires_at = now + 1000;
  return {create(MakeToken("live", "billing")), create(expiring),
          create(MakeToken("doomed", "ci"))};
}

}  // namespace

TEST_P(StoreConformance, X1_UsersRoundTripAndAreValidated) {
  ASSERT_OK(store().UpsertUser(MakeUser("alice")));
  ASSERT_OK_AND_ASSIGN(User got, store().GetUser("alice"));
  EXPECT_EQ(got.password_hash, MakeUser("alice").password_hash);
  EXPECT_EQ(got.scopes, (std::vector<std::string>{"read", "operate"}));
  EXPECT_EQ(got.tenants, (std::vector<std::string>{"acme", "globex"}));
  EXPECT_FALSE(got.disabled);
  User disabled = MakeUser("alice");
  disabled.disabled = true;
  ASSERT_OK(store().UpsertUser(disabled));
  ASSERT_OK_AND_ASSIGN(got, store().GetUser("alice"));
  EXPECT_TRUE(got.disabled);
  ASSERT_OK_AND_ASSIGN(auto users, store().ListUsers());
  EXPECT_EQ(users.size(), 1u);
  EXPECT_EQ(store().GetUser("bob").status().code(), ErrorCode::kNotFound);
  User bad = MakeUser("Bad Name");
  EXPECT_EQ(store().UpsertUser(bad).code(), ErrorCode::kInvalidArgument);
  bad = MakeUser("carol");
  bad.scopes = {"root"};
  EXPECT_EQ(store().UpsertUser(bad).code(), ErrorCode::kInvalidArgument);
  bad = MakeUser("carol");
  bad.tenants = {"NOT VALID"};
  EXPECT_EQ(store().UpsertUser(bad).code(), ErrorCode::kInvalidArgument);
  bad = MakeUser("carol");
  bad.password_hash.clear();
  EXPECT_EQ(store().UpsertUser(bad).code(), ErrorCode::kInvalidArgument);
}

TEST_P(StoreConformance, X1_TokensAreFoundByHashAndRevocable) {
  ASSERT_OK_AND_ASSIGN(std::int64_t id, store().CreateToken(MakeToken("s3cret", "billing")));
  EXPECT_GT(id, 0);
  ASSERT_OK_AND_ASSIGN(ApiToken t, store().FindToken(Sha256Hex("s3cret")));
  EXPECT_EQ(t.id, id);
  EXPECT_EQ(t.principal, "billing");
  EXPECT_EQ(t.scopes, (std::vector<std::string>{"dispatch"}));
  EXPECT_EQ(t.tenants, (std::vector<std::string>{"*"}));
  EXPECT_EQ(t.created_at, Now());
  EXPECT_EQ(t.revoked_at, 0);
  EXPECT_EQ(store().FindToken(Sha256Hex("other")).status().code(), ErrorCode::kNotFound);
  // The same secret twice is refused: a hash names one token.
  EXPECT_FALSE(store().CreateToken(MakeToken("s3cret", "again")).ok());
  ASSERT_OK(store().TouchToken(id));
  ASSERT_OK(store().RevokeToken(id));
  ASSERT_OK_AND_ASSIGN(t, store().FindToken(Sha256Hex("s3cret")));
  EXPECT_EQ(t.revoked_at, Now());
  ASSERT_OK(store().RevokeToken(id));  // idempotent
  EXPECT_EQ(store().RevokeToken(id + 100).code(), ErrorCode::kNotFound);
  ASSERT_OK_AND_ASSIGN(auto all, store().ListTokens());
  EXPECT_EQ(all.size(), 1u);
  ApiToken bad = MakeToken("x", "p");
  bad.secret_hash = "short";
  EXPECT_EQ(store().CreateToken(bad).status().code(), ErrorCode::kInvalidArgument);
  bad = MakeToken("y", "");
  EXPECT_EQ(store().CreateToken(bad).status().code(), ErrorCode::kInvalidArgument);
}

// X1: an admission asked with an API token (AdmitRequest::token_id) confirms
// the token in its transaction: revoked, expired or unknown, nothing is
// admitted, not even the repeat of an existing key, alone or in a batch (row
// by row, PostgreSQL's array insert, MariaDB's multi-row inserts).
TEST_P(StoreConformance, X1_AnAdmissionConfirmsTheTokenItWasAskedWith) {
  DefineJob("report");
  const auto [live, dated, doomed] = CreateTokensToConfirm(store(), Now());
  const auto asked = [&](int n, std::int64_t token, const std::string& key = "") {
    AdmitRequest r = MakeRequest("report", n, "", key);
    r.token_id = token;
    return r;
  };
  ASSERT_OK(store().Admit(asked(1, live)).status());
  ASSERT_OK(store().Admit(asked(2, dated, "k2")).status());
  ASSERT_OK(store().Admit(asked(3, doomed, "k3")).status());
  ASSERT_OK(store().AdmitBatch({asked(4, live), asked(5, doomed), asked(6, 0)}).status());
  EXPECT_EQ(CountExecutions(), 6);

  ASSERT_OK(store().RevokeToken(doomed));
  Advance(1000);  // `expiring` expires now
  const std::int64_t unknown = live + dated + doomed + 100;
  for (std::int64_t refused : {doomed, dated, unknown}) {
    SCOPED_TRACE(refused);
    Result<AdmitResult> one = store().Admit(asked(7, refused));
    EXPECT_EQ(one.status().code(), ErrorCode::kUnauthenticated) << one.status().ToString();
    Result<AdmitResult> repeat = store().Admit(asked(3, refused, "k3"));
    EXPECT_EQ(repeat.status().code(), ErrorCode::kUnauthenticated) << repeat.status().ToString();
    Result<std::vector<AdmitResult>> batch =
        store().AdmitBatch({asked(8, live), asked(9, 0), asked(10, refused)});
    EXPECT_EQ(batch.status().code(), ErrorCode::kUnauthenticated) << batch.status().ToString();
  }
  EXPECT_EQ(CountExecutions(), 6) << "an admission of a token that no longer holds got in";
  ASSERT_OK(store().AdmitBatch({asked(8, live), asked(9, 0)}).status());
  EXPECT_EQ(CountExecutions(), 8);
}

// X1: a finish asked with an API token (FinishRequest::token_id) confirms
// the token in its transaction: revoked, expired or unknown, that finish is
// refused and changes nothing, of any kind, alone or in a batch, while the
// batch's other finishes are decided as usual.
TEST_P(StoreConformance, X1_AFinishConfirmsTheTokenItWasAskedWith) {
  DefineJob("report");
  const auto [live, dated, doomed] = CreateTokensToConfirm(store(), Now());
  for (int n = 1; n <= 8; ++n) AdmitOne(MakeRequest("report", n));
  std::vector<Lease> leases = ClaimN("default", 8);
  ASSERT_EQ(leases.size(), 8u);
  const auto asked = [&](const Lease& lease, std::int64_t token,
                         FinishRequest::Kind kind = FinishRequest::Kind::kComplete) {
    FinishRequest f;
    f.lease = Ref(lease);
    f.kind = kind;
    f.token_id = token;
    if (kind == FinishRequest::Kind::kFail) f.error = "boom";
    return f;
  };
  std::vector<Result<FinishReply>> first =
      store().FinishBatch({asked(leases[0], live), asked(leases[1], dated), asked(leases[2], 0)});
  for (const Result<FinishReply>& r : first) ASSERT_OK(r.status());

  ASSERT_OK(store().RevokeToken(doomed));
  Advance(1000);  // `expiring` expires now
  const std::int64_t unknown = live + dated + doomed + 100;
  const std::string before = Snapshot();
  for (std::int64_t refused : {doomed, dated, unknown}) {
    SCOPED_TRACE(refused);
    for (FinishRequest::Kind kind : {FinishRequest::Kind::kComplete, FinishRequest::Kind::kFail,
                                     FinishRequest::Kind::kRelease}) {
      std::vector<Result<FinishReply>> one = store().FinishBatch({asked(leases[3], refused, kind)});
      ASSERT_EQ(one.size(), 1u);
      EXPECT_EQ(one[0].status().code(), ErrorCode::kUnauthenticated) << one[0].status().ToString();
    }
    // A refused token answers before the lease is looked at.
    FinishRequest stale = asked(leases[0], refused);
    EXPECT_EQ(store().FinishBatch({stale})[0].status().code(), ErrorCode::kUnauthenticated);
  }
  EXPECT_EQ(Snapshot(), before) << "a finish of a token that no longer holds changed something";

  std::vector<Result<FinishReply>> mixed = store().FinishBatch(
      {asked(leases[3], live), asked(leases[4], doomed), asked(leases[5], 0),
       asked(leases[6], unknown, FinishRequest::Kind::kFail), asked(leases[7], live)});
  ASSERT_EQ(mixed.size(), 5u);
  EXPECT_OK(mixed[0].status());
  EXPECT_EQ(mixed[1].status().code(), ErrorCode::kUnauthenticated);
  EXPECT_OK(mixed[2].status());
  EXPECT_EQ(mixed[3].status().code(), ErrorCode::kUnauthenticated);
  EXPECT_OK(mixed[4].status());
  for (int i : {0, 1, 2, 3, 5, 7}) {
    EXPECT_EQ(Get(leases[i].id).status, ExecutionStatus::kSucceeded) << i;
  }
  for (int i : {4, 6}) EXPECT_EQ(Get(leases[i].id).status, ExecutionStatus::kRunning) << i;
}

TEST_P(StoreConformance, X1_SessionsLiveUntilDeleted) {
  Session s;
  s.id_hash = Sha256Hex("session-id");
  s.user = "alice";
  s.csrf_token = "csrf";
  s.expires_at = Now() + 3600'000;
  ASSERT_OK(store().CreateSession(s));
  ASSERT_OK_AND_ASSIGN(Session got, store().GetSession(s.id_hash));
  EXPECT_EQ(got.user, "alice");
  EXPECT_EQ(got.csrf_token, "csrf");
  EXPECT_EQ(got.created_at, Now());
  EXPECT_EQ(got.expires_at, s.expires_at);
  ASSERT_OK(store().TouchSession(s.id_hash));
  ASSERT_OK(store().DeleteSession(s.id_hash));
  EXPECT_EQ(store().GetSession(s.id_hash).status().code(), ErrorCode::kNotFound);
  ASSERT_OK(store().DeleteSession(s.id_hash));  // idempotent
  Session bad = s;
  bad.csrf_token.clear();
  EXPECT_EQ(store().CreateSession(bad).code(), ErrorCode::kInvalidArgument);
}

}  // namespace taskengine

namespace taskengine {

TEST_P(StoreConformance, W5_WorkersReportAndList) {
  WorkerInfo w;
  w.id = WorkerId("host-a:42");
  w.hostname = "host-a";
  w.pid = 42;
  w.state = WorkerState::kBusy;
  w.current = {ExecutionId(7)};
  w.processed = 3;
  w.failed = 1;
  ASSERT_OK(store().ReportWorker(w));
  ASSERT_OK_AND_ASSIGN(auto workers, store().ListWorkers(0));
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0].hostname, "host-a");
  EXPECT_EQ(workers[0].state, WorkerState::kBusy);
  EXPECT_EQ(workers[0].current, std::vector<ExecutionId>{ExecutionId(7)});
  EXPECT_EQ(workers[0].kind, WorkerKind::kRemote);
  EXPECT_EQ(workers[0].processed, 3);
  EXPECT_EQ(workers[0].started_at, Now());
  EXPECT_EQ(workers[0].last_heartbeat_at, Now());
  Advance(5 * 60'000);
  ASSERT_OK_AND_ASSIGN(workers, store().ListWorkers(60'000));
  EXPECT_TRUE(workers.empty());  // not seen within the last minute
  w.state = WorkerState::kStopped;
  ASSERT_OK(store().ReportWorker(w));
  ASSERT_OK_AND_ASSIGN(workers, store().ListWorkers(60'000));
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0].state, WorkerState::kStopped);
  WorkerInfo bad;
  EXPECT_EQ(store().ReportWorker(bad).code(), ErrorCode::kInvalidArgument);
}

// Issue 14: an in-process pool's row keeps its kind, threads, busy count and
// executions in hand (the first kMaxWorkerCurrent); a later report replaces
// them. Stale is never stored; LiveState shows it from last_heartbeat_at.
TEST_P(StoreConformance, W5_PoolRowKeepsKindThreadsBusyAndExecutions) {
  WorkerInfo w;
  w.id = WorkerId("host-a:42:pool");
  w.kind = WorkerKind::kPool;
  w.hostname = "host-a";
  w.pid = 42;
  w.state = WorkerState::kBusy;
  w.threads = 8;
  for (std::int64_t i = 1; i <= 150; ++i) w.current.push_back(ExecutionId(i * 1'000'000'007LL));
  w.busy = 150;
  w.processed = 10;
  w.failed = 2;
  w.started_at = Now() - 5'000;
  ASSERT_OK(store().ReportWorker(w));
  ASSERT_OK_AND_ASSIGN(auto workers, store().ListWorkers(0));
  ASSERT_EQ(workers.size(), 1u);
  const WorkerInfo& got = workers[0];
  EXPECT_EQ(got.kind, WorkerKind::kPool);
  EXPECT_EQ(got.threads, 8);
  EXPECT_EQ(got.busy, 150);
  ASSERT_EQ(got.current.size(), kMaxWorkerCurrent);
  EXPECT_EQ(got.current.front(), ExecutionId(1'000'000'007LL));
  EXPECT_EQ(got.current.back(), ExecutionId(100 * 1'000'000'007LL));
  EXPECT_EQ(got.started_at, Now() - 5'000);
  EXPECT_EQ(LiveState(got, Now()), WorkerState::kBusy);
  EXPECT_EQ(LiveState(got, Now() + WorkerStaleAfterMs(WorkerKind::kPool) + 1), WorkerState::kStale);

  w.state = WorkerState::kStopped;
  w.current.clear();
  w.busy = 0;
  ASSERT_OK(store().ReportWorker(w));
  ASSERT_OK_AND_ASSIGN(workers, store().ListWorkers(0));
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0].state, WorkerState::kStopped);
  EXPECT_TRUE(workers[0].current.empty());
  EXPECT_EQ(workers[0].busy, 0);
  EXPECT_EQ(LiveState(workers[0], Now() + 3'600'000), WorkerState::kStopped)
      << "a stopped worker stays stopped, never stale";

  WorkerInfo stale = w;
  stale.state = WorkerState::kStale;
  EXPECT_EQ(store().ReportWorker(stale).code(), ErrorCode::kInvalidArgument);
  WorkerInfo negative = w;
  negative.threads = -1;
  EXPECT_EQ(store().ReportWorker(negative).code(), ErrorCode::kInvalidArgument);
}

}  // namespace taskengine
