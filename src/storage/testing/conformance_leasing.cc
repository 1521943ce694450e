// Conformance cases for leasing and fencing: L1 (claim), L2 (stale versions
// change nothing), L3 (heartbeats), L6 (release), L7 (missing executions) and
// S2 (lease calls on executions that are not running).
#include <algorithm>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "core/mutex.h"
#include "storage/testing/conformance.h"

// Every lease call with `ref`, each expected to answer `want`; together they
// change nothing observable (Snapshot() before and after).
#define EXPECT_EVERY_LEASE_CALL_FAILS(ref, want)                                           \
  do {                                                                                     \
    const std::string te_before = Snapshot();                                              \
    const LeaseRef te_ref = (ref);                                                         \
    EXPECT_EQ(store().Heartbeat(te_ref, 50).status().code(), (want)) << "Heartbeat";       \
    EXPECT_EQ(store().AppendLog(te_ref, LogLevel::kInfo, "x").code(), (want)) << "Log";    \
    EXPECT_EQ(store().Complete(te_ref, "{}").status().code(), (want)) << "Complete";       \
    EXPECT_EQ(store().Fail(te_ref, FailureClass::kRetryable, "e").status().code(), (want)) \
        << "Fail(retryable)";                                                              \
    EXPECT_EQ(store().Fail(te_ref, FailureClass::kPermanent, "e").status().code(), (want)) \
        << "Fail(permanent)";                                                              \
    EXPECT_EQ(store().Release(te_ref).status().code(), (want)) << "Release";               \
    EXPECT_EQ(Snapshot(), te_before) << "a rejected lease call changed something";         \
  } while (0)

namespace taskengine {

// --- L1: claim ---

TEST_P(StoreConformance, L1_ClaimMovesToRunningWithANewLease) {
  JobDefinition job = MakeJob("report", "reports");
  job.lease_ms = 20'000;
  DefineJob(job);
  const ExecutionId id = AdmitOne(MakeRequest("report", 1, "acme", "k1"));
  const Execution queued = Get(id);
  Advance(kSecond);

  const Lease lease = ClaimOne("reports", "w-7");
  EXPECT_EQ(lease.id, id);
  EXPECT_EQ(lease.version.value, queued.claim_version.value + 1) << "claim version + 1";
  EXPECT_EQ(lease.job.value, "report");
  EXPECT_EQ(lease.tenant.value, "acme");
  EXPECT_EQ(lease.queue, "reports");
  EXPECT_EQ(lease.attempt, 1);
  EXPECT_EQ(lease.payload_json, "{\"n\":1}");
  EXPECT_EQ(lease.idempotency_key, "k1");
  EXPECT_EQ(lease.lease_ms, 20'000);
  EXPECT_EQ(lease.lease_expires_at, Now() + 20'000);

  const Execution e = Get(id);
  EXPECT_EQ(e.status, ExecutionStatus::kRunning);
  EXPECT_EQ(e.worker.value, "w-7");
  EXPECT_EQ(e.attempt, 1);
  EXPECT_EQ(e.claim_version, lease.version);
  EXPECT_EQ(e.started_at, Now());
  EXPECT_EQ(e.lease_expires_at, Now() + 20'000);
  EXPECT_EQ(e.finished_at, 0);

  EXPECT_TRUE(ClaimN("reports", 10).empty()) << "a running execution is not claimed again";
}

TEST_P(StoreConformance, L1_NothingDueClaimsNothing) {
  DefineJob("report");
  EXPECT_TRUE(ClaimN("default", 10).empty());
  AdmitOne(MakeRequest("report", 1));
  ClaimRequest none;
  none.worker = WorkerId("w1");
  ASSERT_OK_AND_ASSIGN(std::vector<Lease> leases, store().Claim(none));
  EXPECT_TRUE(leases.empty()) << "no slots";
  EXPECT_TRUE(ClaimN("default", 0).empty()) << "a slot of max 0";
  EXPECT_TRUE(ClaimN("unknown-queue", 10).empty());
  EXPECT_EQ(All().at(0).status, ExecutionStatus::kQueued);
}

// W4: a claimer that names the handlers it can run gets only executions of
// jobs with one of those handlers; the others stay queued, untouched (attempt
// 0, claim version unchanged), in their place for a claimer that can run them.
TEST_P(StoreConformance, W4_ClaimWithHandlersTakesOnlyThoseHandlersJobs) {
  JobDefinition http = MakeJob("call-sink");
  http.handler = "http";
  DefineJob(http);
  JobDefinition command = MakeJob("script");
  command.handler = "command";
  DefineJob(command);
  const ExecutionId h1 = AdmitOne(MakeRequest("call-sink", 1));
  const ExecutionId c1 = AdmitOne(MakeRequest("script", 2));
  const ExecutionId h2 = AdmitOne(MakeRequest("call-sink", 3));
  const ExecutionId c2 = AdmitOne(MakeRequest("script", 4));
  const Execution h1_before = Get(h1);
  const Execution h2_before = Get(h2);

  ClaimRequest request;
  request.worker = WorkerId("remote-1");
  request.slots.push_back(QueueSlot{"default", 10});
  request.handlers = std::vector<std::string>{"command"};
  ASSERT_OK_AND_ASSIGN(std::vector<Lease> leases, store().Claim(request));
  ASSERT_EQ(leases.size(), 2u);
  EXPECT_EQ(leases[0].id, c1);
  EXPECT_EQ(leases[1].id, c2);
  EXPECT_EQ(Describe(Get(h1)), Describe(h1_before)) << "an http job is left as it was";
  EXPECT_EQ(Describe(Get(h2)), Describe(h2_before));
  EXPECT_EQ(Get(h1).attempt, 0);

  ASSERT_OK_AND_ASSIGN(leases, store().Claim(request));
  EXPECT_TRUE(leases.empty()) << "nothing of its handlers is left";

  // An empty list runs nothing; several names run each.
  request.handlers = std::vector<std::string>{};
  ASSERT_OK_AND_ASSIGN(leases, store().Claim(request));
  EXPECT_TRUE(leases.empty());
  request.handlers = std::vector<std::string>{"command", "http"};
  request.slots[0].max = 1;
  ASSERT_OK_AND_ASSIGN(leases, store().Claim(request));
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].id, h1) << "oldest first among the allowed handlers";

  // No list: any handler (the behaviour for claimers that do not say).
  ClaimRequest any;
  any.worker = WorkerId("pool");
  any.slots.push_back(QueueSlot{"default", 10});
  ASSERT_OK_AND_ASSIGN(leases, store().Claim(any));
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0].id, h2);
}

TEST_P(StoreConformance, W4_ClaimWithHandlersMatchesWholeNamesOnly) {
  JobDefinition job = MakeJob("script");
  job.handler = "command";
  DefineJob(job);
  AdmitOne(MakeRequest("script", 1));
  ClaimRequest request;
  request.worker = WorkerId("remote-1");
  request.slots.push_back(QueueSlot{"default", 10});
  for (const std::vector<std::string>& names :
       std::vector<std::vector<std::string>>{{"comm"}, {"command2"}, {"ommand"}, {"Command"}}) {
    request.handlers = names;
    ASSERT_OK_AND_ASSIGN(std::vector<Lease> leases, store().Claim(request));
    EXPECT_TRUE(leases.empty()) << names[0];
  }
  request.handlers = std::vector<std::string>{"bad\nname"};
  EXPECT_EQ(store().Claim(request).status().code(), ErrorCode::kInvalidArgument);
  request.handlers = std::vector<std::string>{""};
  EXPECT_EQ(store().Claim(request).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(All().at(0).status, ExecutionStatus::kQueued);
}

TEST_P(StoreConformance, L1_FutureRunAtIsNotClaimedBeforeItIsDue) {
  DefineJob("report");
  AdmitRequest r = MakeRequest("report", 1);
  r.run_at = Now() + 10 * kSecond;
  const ExecutionId id = AdmitOne(r);

  EXPECT_TRUE(ClaimN("default", 10).empty());
  Advance(10 * kSecond - 1);
  EXPECT_TRUE(ClaimN("default", 10).empty()) << "1 ms before run_at";
  Advance(1);
  const Lease lease = ClaimOne();
  EXPECT_EQ(lease.id, id) << "due at run_at == now";
}

// How long a claimer that found nothing may sleep: until the earliest
// queued execution of its queues is due (0 when one is due now), -1 when
// none is queued. A parked lane member waits for its lane, not for a time,
// and the other queues' executions are not this claimer's.
TEST_P(StoreConformance, L1_NextDueInIsTheWaitForTheEarliestQueuedExecution) {
  DefineJob("report");
  DefineJob("sync");
  DefineJob("other-job", "other");
  const std::vector<std::string> mine = {"default"};
  auto next_due_in = [&](const std::vector<std::string>& queues) {
    Result<Millis> in = store().NextDueIn(queues);
    EXPECT_OK(in.status());
    return in.ok() ? *in : Millis{-2};
  };
  EXPECT_EQ(next_due_in(mine), -1) << "nothing queued";

  AdmitRequest later = MakeRequest("report", 1);
  later.run_at = Now() + 10 * kSecond;
  AdmitOne(later);
  EXPECT_EQ(next_due_in(mine), 10 * kSecond);
  AdmitRequest sooner = MakeRequest("report", 2);
  sooner.run_at = Now() + 4 * kSecond;
  const ExecutionId sooner_id = AdmitOne(sooner);
  EXPECT_EQ(next_due_in(mine), 4 * kSecond);
  Advance(kSecond);
  EXPECT_EQ(next_due_in(mine), 3 * kSecond);

  // The lane's head runs; its next member, due now, is parked behind it.
  AdmitRequest head = MakeRequest("sync", 3);
  head.lane_key = "meeting:1";
  const ExecutionId head_id = AdmitOne(head);
  EXPECT_EQ(next_due_in(mine), 0);
  EXPECT_EQ(ClaimOne().id, head_id);
  AdmitRequest parked = MakeRequest("sync", 4);
  parked.lane_key = "meeting:1";
  AdmitOne(parked);
  EXPECT_EQ(next_due_in(mine), 3 * kSecond) << "a parked member is not due";

  AdmitOne(MakeRequest("other-job", 5));
  EXPECT_EQ(next_due_in(mine), 3 * kSecond) << "another queue's execution";
  EXPECT_EQ(next_due_in({"default", "other"}), 0);
  EXPECT_EQ(next_due_in({}), -1);

  Advance(3 * kSecond);
  EXPECT_EQ(next_due_in(mine), 0);
  EXPECT_EQ(ClaimOne().id, sooner_id);
  EXPECT_EQ(next_due_in(mine), 6 * kSecond);
}

TEST_P(StoreConformance, L1_SlotMaxIsRespected) {
  DefineJob("report");
  std::vector<AdmitRequest> requests;
  for (int i = 0; i < 10; ++i) requests.push_back(MakeRequest("report", i));
  ASSERT_OK(store().AdmitBatch(requests));

  EXPECT_EQ(ClaimN("default", 4).size(), 4u);
  EXPECT_EQ(ClaimN("default", 4).size(), 4u);
  EXPECT_EQ(ClaimN("default", 4).size(), 2u);
  EXPECT_EQ(ClaimN("default", 4).size(), 0u);
}

TEST_P(StoreConformance, L1_FirstQueueIsDrainedFirst) {
  DefineJob("urgent", "high");
  DefineJob("bulk", "low");
  // The low queue's work is older: priority still wins.
  for (int i = 0; i < 5; ++i) AdmitOne(MakeRequest("bulk", i));
  Advance(kSecond);
  for (int i = 0; i < 2; ++i) AdmitOne(MakeRequest("urgent", i));

  auto claim = [&] {
    ClaimRequest req;
    req.worker = WorkerId("w1");
    req.slots = {QueueSlot{"high", 3}, QueueSlot{"low", 3}};
    Result<std::vector<Lease>> r = store().Claim(req);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::map<std::string, int> per_queue;
    if (r.ok()) {
      for (const Lease& l : *r) ++per_queue[l.queue];
      // The first queue is drained first: its leases come first.
      auto first_low =
          std::find_if(r->begin(), r->end(), [](const Lease& l) { return l.queue == "low"; });
      EXPECT_TRUE(std::all_of(first_low, r->end(), [](const Lease& l) { return l.queue == "low"; }))
          << "a lease of the high queue after one of the low queue";
    }
    return per_queue;
  };
  EXPECT_EQ(claim(), (std::map<std::string, int>{{"high", 2}, {"low", 3}}));
  EXPECT_EQ(claim(), (std::map<std::string, int>{{"low", 2}}));

  for (int i = 0; i < 4; ++i) AdmitOne(MakeRequest("urgent", 10 + i));
  for (int i = 0; i < 4; ++i) AdmitOne(MakeRequest("bulk", 10 + i));
  EXPECT_EQ(claim(), (std::map<std::string, int>{{"high", 3}, {"low", 3}}));

  // Only the high queue: the low queue is not looked at.
  ClaimRequest high_only;
  high_only.worker = WorkerId("w1");
  high_only.slots = {QueueSlot{"high", 10}};
  ASSERT_OK_AND_ASSIGN(std::vector<Lease> rest, store().Claim(high_only));
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].queue, "high");
}

TEST_P(StoreConformance, L1_ClaimOrderIsRunAtThenId) {
  DefineJob("report");
  const Millis t0 = Now();
  auto admit_at = [&](int n, Millis run_at) {
    AdmitRequest r = MakeRequest("report", n);
    r.run_at = run_at;
    return AdmitOne(r);
  };
  const ExecutionId late = admit_at(1, t0 + 2 * kSecond);
  const ExecutionId mid_a = admit_at(2, t0 + kSecond);
  const ExecutionId mid_b = admit_at(3, t0 + kSecond);
  const ExecutionId now_id = admit_at(4, 0);
  Advance(2 * kSecond);

  std::vector<ExecutionId> order;
  for (int i = 0; i < 4; ++i) order.push_back(ClaimOne().id);
  EXPECT_EQ(order, (std::vector<ExecutionId>{now_id, mid_a, mid_b, late}));
}

namespace {

// 8 threads claim batches of 7 until nothing is due; thread t uses
// stores[t % stores.size()]. Checks that no lease is handed out twice and that
// every one of `total` queued executions is claimed exactly once.
void ClaimConcurrently(const std::vector<Store*>& stores, int total) {
  constexpr int kThreads = 8;
  constexpr int kBatch = 7;
  Mutex mu;
  std::vector<std::pair<std::int64_t, std::int64_t>> claimed;  // (id, version)
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    Store* s = stores[t % stores.size()];
    threads.emplace_back([&, s, t] {
      ClaimRequest req;
      req.worker = WorkerId("w" + std::to_string(t));
      req.slots = {QueueSlot{"default", kBatch}};
      for (;;) {
        Result<std::vector<Lease>> r = s->Claim(req);
        MutexLock lock(mu);
        if (!r.ok()) {
          errors.push_back(r.status().ToString());
          return;
        }
        if (r->empty()) return;
        if (static_cast<int>(r->size()) > kBatch) errors.push_back("a claim exceeded its max");
        for (const Lease& l : *r) claimed.emplace_back(l.id.value, l.version.value);
      }
    });
  }
  for (std::thread& th : threads) th.join();

  EXPECT_TRUE(errors.empty()) << errors.size() << " errors, first: " << errors.front();
  std::set<std::pair<std::int64_t, std::int64_t>> leases(claimed.begin(), claimed.end());
  EXPECT_EQ(leases.size(), claimed.size()) << "two claimers got the same (id, version)";
  std::set<std::int64_t> ids;
  for (const auto& [id, version] : claimed) ids.insert(id);
  EXPECT_EQ(ids.size(), claimed.size()) << "an execution was claimed twice";
  EXPECT_EQ(static_cast<int>(ids.size()), total) << "every execution is claimed once";
}

}  // namespace

TEST_P(StoreConformance, L1_ConcurrentClaimersNeverShareALease) {
  constexpr int kExecutions = 2000;
  DefineJob("report");
  std::vector<AdmitRequest> requests;
  for (int i = 0; i < kExecutions; ++i) requests.push_back(MakeRequest("report", i));
  ASSERT_OK(store().AdmitBatch(requests));

  ClaimConcurrently({&store()}, kExecutions);
  for (const Execution& e : All()) {
    if (e.status != ExecutionStatus::kRunning || e.attempt != 1) {
      ADD_FAILURE() << "execution " << e.id.value << " is " << ToString(e.status) << " attempt "
                    << e.attempt;
      break;
    }
  }
}

// Two store objects over the same data stand for two processes or nodes.
TEST_P(StoreConformance, L1_ConcurrentClaimersOnTwoStoresNeverShareALease) {
  if (!GetParam().shares_data_between_opens) {
    GTEST_SKIP() << GetParam().name << " cannot open a second store over the same data";
  }
  constexpr int kExecutions = 1000;
  DefineJob("report");
  std::vector<AdmitRequest> requests;
  for (int i = 0; i < kExecutions; ++i) requests.push_back(MakeRequest("report", i));
  ASSERT_OK(store().AdmitBatch(requests));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> other, OpenAnother());

  ClaimConcurrently({&store(), other.get()}, kExecutions);
  for (const Execution& e : All()) {
    if (e.status != ExecutionStatus::kRunning || e.attempt != 1) {
      ADD_FAILURE() << "execution " << e.id.value << " is " << ToString(e.status) << " attempt "
                    << e.attempt;
      break;
    }
  }
}

// --- L2 / F: fencing ---

TEST_P(StoreConformance, L2_WrongVersionIsStaleAndChangesNothing) {
  DefineJob("report");
  AdmitOne(MakeRequest("report", 1));
  const Lease first = ClaimOne();
  ASSERT_OK(store().AppendLog(Ref(first), LogLevel::kInfo, "first attempt"));
  ASSERT_OK(store().Release(Ref(first)));
  const Lease second = ClaimOne("default", "w2");
  ASSERT_GT(second.version, first.version);

  EXPECT_EVERY_LEASE_CALL_FAILS(Ref(first), ErrorCode::kStale);
  EXPECT_EVERY_LEASE_CALL_FAILS((LeaseRef{second.id, ClaimVersion(second.version.value + 1)}),
                                ErrorCode::kStale);
  EXPECT_EVERY_LEASE_CALL_FAILS((LeaseRef{second.id, ClaimVersion(0)}), ErrorCode::kStale);

  const Execution e = Get(second.id);
  EXPECT_EQ(e.status, ExecutionStatus::kRunning);
  EXPECT_EQ(e.worker.value, "w2");
  EXPECT_EQ(e.claim_version, second.version);
}

TEST_P(StoreConformance, L2_CurrentVersionWorks) {
  DefineJob("report");
  AdmitOne(MakeRequest("report", 1));
  const Lease lease = ClaimOne();
  Advance(kSecond);
  ASSERT_OK_AND_ASSIGN(HeartbeatReply hb, store().Heartbeat(Ref(lease), 10));
  EXPECT_FALSE(hb.cancel_requested);
  ASSERT_OK(store().AppendLog(Ref(lease), LogLevel::kWarn, "halfway"));
  Advance(kSecond);
  ASSERT_OK_AND_ASSIGN(FinishReply done, store().Complete(Ref(lease), "{\"rows\":3}"));
  EXPECT_EQ(done.status, ExecutionStatus::kSucceeded);

  const Execution e = Get(lease.id);
  EXPECT_EQ(e.status, ExecutionStatus::kSucceeded);
  EXPECT_EQ(e.result_json, "{\"rows\":3}");
  EXPECT_EQ(e.finished_at, Now());
  EXPECT_EQ(e.attempt, 1);
  EXPECT_EQ(e.failure_class, FailureClass::kNone);
  EXPECT_EQ(e.DurationMillis(), 2 * kSecond);
  EXPECT_TRUE(e.worker.empty()) << "a finished execution holds no lease";
  EXPECT_EQ(e.lease_expires_at, 0);
  ASSERT_OK_AND_ASSIGN(std::vector<LogEntry> logs, store().GetLogs(lease.id, 10));
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].message, "halfway");
}

TEST_P(StoreConformance, L2_AfterCompleteTheVersionIsStale) {
  DefineJob("report");
  AdmitOne(MakeRequest("report", 1));
  const Lease lease = ClaimOne();
  ASSERT_OK(store().Complete(Ref(lease), "{\"first\":true}"));

  EXPECT_EVERY_LEASE_CALL_FAILS(Ref(lease), ErrorCode::kStale);
  const Execution e = Get(lease.id);
  EXPECT_EQ(e.status, ExecutionStatus::kSucceeded);
  EXPECT_EQ(e.result_json, "{\"first\":true}") << "only the first result is published";
}

TEST_P(StoreConformance, L2_BatchesJudgeEachLeaseAlone) {
  DefineJob("report");
  for (int i = 0; i < 5; ++i) AdmitOne(MakeRequest("report", i));
  std::vector<Lease> leases = ClaimN("default", 5);
  ASSERT_EQ(leases.size(), 5u);
  const LeaseRef stale{leases[0].id, ClaimVersion(leases[0].version.value + 1)};
  const LeaseRef missing{ExecutionId(leases[4].id.value + 1000), ClaimVersion(1)};
  Advance(kSecond);

  std::vector<Result<HeartbeatReply>> hb = store().HeartbeatBatch(
      {HeartbeatRequest{stale, 5}, HeartbeatRequest{Ref(leases[1]), 60},
       HeartbeatRequest{missing, 5}, HeartbeatRequest{Ref(leases[2]), std::nullopt}});
  ASSERT_EQ(hb.size(), 4u);
  EXPECT_EQ(hb[0].status().code(), ErrorCode::kStale);
  EXPECT_OK(hb[1]);
  EXPECT_EQ(hb[2].status().code(), ErrorCode::kNotFound);
  EXPECT_OK(hb[3]);
  EXPECT_EQ(Get(leases[0].id).progress, 0);
  EXPECT_EQ(Get(leases[0].id).lease_expires_at, leases[0].lease_expires_at);
  EXPECT_EQ(Get(leases[1].id).progress, 60);
  EXPECT_EQ(Get(leases[1].id).lease_expires_at, Now() + leases[1].lease_ms);

  FinishRequest complete_stale;
  complete_stale.lease = stale;
  complete_stale.result_json = "{\"stale\":true}";
  FinishRequest complete;
  complete.lease = Ref(leases[1]);
  complete.result_json = "{\"ok\":1}";
  FinishRequest fail;
  fail.lease = Ref(leases[2]);
  fail.kind = FinishRequest::Kind::kFail;
  fail.failure_class = FailureClass::kRetryable;
  fail.error = "flaky";
  FinishRequest release;
  release.lease = Ref(leases[3]);
  release.kind = FinishRequest::Kind::kRelease;
  FinishRequest complete_missing;
  complete_missing.lease = missing;
  std::vector<Result<FinishReply>> done =
      store().FinishBatch({complete_stale, complete, fail, release, complete_missing});
  ASSERT_EQ(done.size(), 5u);
  EXPECT_EQ(done[0].status().code(), ErrorCode::kStale);
  ASSERT_OK(done[1]);
  EXPECT_EQ(done[1]->status, ExecutionStatus::kSucceeded);
  ASSERT_OK(done[2]);
  EXPECT_EQ(done[2]->status, ExecutionStatus::kQueued);
  EXPECT_EQ(done[2]->run_at, Now() + 5 * kSecond);
  ASSERT_OK(done[3]);
  EXPECT_EQ(done[3]->status, ExecutionStatus::kQueued);
  EXPECT_EQ(done[3]->run_at, Now());
  EXPECT_EQ(done[4].status().code(), ErrorCode::kNotFound);

  EXPECT_EQ(Get(leases[0].id).status, ExecutionStatus::kRunning);
  EXPECT_EQ(Get(leases[0].id).result_json, "");
  EXPECT_EQ(Get(leases[1].id).result_json, "{\"ok\":1}");
  EXPECT_EQ(Get(leases[2].id).error, "flaky");
  EXPECT_EQ(Get(leases[3].id).attempt, 0);
  EXPECT_EQ(Get(leases[4].id).status, ExecutionStatus::kRunning);
}

TEST_P(StoreConformance, L2_SameLeaseTwiceInOneBatchFinishesOnce) {
  DefineJob("report");
  AdmitOne(MakeRequest("report", 1));
  const Lease lease = ClaimOne();
  FinishRequest first;
  first.lease = Ref(lease);
  first.result_json = "{\"n\":1}";
  FinishRequest second = first;
  second.result_json = "{\"n\":2}";
  std::vector<Result<FinishReply>> done = store().FinishBatch({first, second});
  ASSERT_EQ(done.size(), 2u);
  EXPECT_OK(done[0]);
  EXPECT_EQ(done[1].status().code(), ErrorCode::kStale) << "the first finish ended the claim";
  EXPECT_EQ(Get(lease.id).result_json, "{\"n\":1}");
}

// --- L3: heartbeats ---

TEST_P(StoreConformance, L3_HeartbeatExtendsTheLeaseAndRecordsProgress) {
  JobDefinition job = MakeJob("report");
  job.lease_ms = 30'000;
  DefineJob(job);
  AdmitOne(MakeRequest("report", 1));
  const Lease lease = ClaimOne();
  Advance(10 * kSecond);

  ASSERT_OK_AND_ASSIGN(HeartbeatReply hb, store().Heartbeat(Ref(lease), 40));
  EXPECT_FALSE(hb.cancel_requested);
  EXPECT_EQ(hb.lease_expires_at, Now() + 30'000);
  Execution e = Get(lease.id);
  EXPECT_EQ(e.lease_expires_at, Now() + 30'000);
  EXPECT_EQ(e.progress, 40);
  EXPECT_EQ(e.status, ExecutionStatus::kRunning);
  EXPECT_EQ(e.claim_version, lease.version) << "a heartbeat is not a new claim";
  EXPECT_EQ(e.attempt, 1);

  Advance(5 * kSecond);
  ASSERT_OK_AND_ASSIGN(HeartbeatReply again, store().Heartbeat(Ref(lease), std::nullopt));
  EXPECT_EQ(again.lease_expires_at, Now() + 30'000);
  e = Get(lease.id);
  EXPECT_EQ(e.progress, 40) << "no progress given: unchanged";
  EXPECT_EQ(e.lease_expires_at, Now() + 30'000);

  // Past the original expiry the extended lease is still in flight.
  Advance(20 * kSecond);
  ASSERT_OK_AND_ASSIGN(SweepReport sweep, store().SweepExpired(100));
  EXPECT_EQ(sweep.recovered, 0);
  EXPECT_EQ(Get(lease.id).status, ExecutionStatus::kRunning);
}

// --- L6: release ---

TEST_P(StoreConformance, L6_ReleaseRequeuesAtOnceAndGivesTheAttemptBack) {
  DefineJob("report");
  const ExecutionId id = AdmitOne(MakeRequest("report", 1));
  const Lease lease = ClaimOne();
  Advance(5 * kSecond);

  ASSERT_OK_AND_ASSIGN(FinishReply reply, store().Release(Ref(lease)));
  EXPECT_EQ(reply.status, ExecutionStatus::kQueued);
  EXPECT_EQ(reply.run_at, Now());
  const Execution e = Get(id);
  EXPECT_EQ(e.status, ExecutionStatus::kQueued);
  EXPECT_EQ(e.attempt, 0);
  EXPECT_EQ(e.run_at, Now());
  EXPECT_TRUE(e.worker.empty());
  EXPECT_EQ(e.lease_expires_at, 0);
  EXPECT_EQ(e.finished_at, 0);

  const Lease again = ClaimOne("default", "w2");
  EXPECT_EQ(again.id, id) << "claimable at once";
  EXPECT_EQ(again.attempt, 1);
  EXPECT_EQ(again.version.value, lease.version.value + 1);
}

TEST_P(StoreConformance, L6_ReleaseKeepsEarlierAttempts) {
  DefineJob("report");
  const ExecutionId id = AdmitOne(MakeRequest("report", 1));
  ASSERT_OK(store().Fail(Ref(ClaimOne()), FailureClass::kRetryable, "flaky"));
  Advance(5 * kSecond);
  const Lease second = ClaimOne();
  EXPECT_EQ(second.attempt, 2);
  ASSERT_OK(store().Release(Ref(second)));
  EXPECT_EQ(Get(id).attempt, 1) << "only the released attempt is given back";
}

// --- L7: missing executions ---

TEST_P(StoreConformance, L7_MissingExecutionIsNotFoundAndChangesNothing) {
  DefineJob("report");
  AdmitOne(MakeRequest("report", 1));
  const Lease lease = ClaimOne();
  const ExecutionId missing(lease.id.value + 1000);

  EXPECT_EVERY_LEASE_CALL_FAILS((LeaseRef{missing, lease.version}), ErrorCode::kNotFound);
  EXPECT_EVERY_LEASE_CALL_FAILS((LeaseRef{missing, ClaimVersion(0)}), ErrorCode::kNotFound);
  EXPECT_EQ(store().GetExecution(missing).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(store().GetLogs(missing, 10).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(store().GetExecution(ExecutionId(0)).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(Get(lease.id).status, ExecutionStatus::kRunning);
}

// --- S2: lease calls on executions that are not running ---

TEST_P(StoreConformance, S2_LeaseCallsOnAQueuedExecutionAreStale) {
  DefineJob("report");
  const ExecutionId id = AdmitOne(MakeRequest("report", 1));
  // Never claimed: even its current (initial) version holds no lease.
  EXPECT_EVERY_LEASE_CALL_FAILS((LeaseRef{id, Get(id).claim_version}), ErrorCode::kStale);

  // Released: its current version no longer holds a lease either.
  const Lease lease = ClaimOne();
  ASSERT_OK(store().Release(Ref(lease)));
  ASSERT_EQ(Get(id).claim_version, lease.version);
  EXPECT_EVERY_LEASE_CALL_FAILS(Ref(lease), ErrorCode::kStale);
  EXPECT_EQ(Get(id).status, ExecutionStatus::kQueued);
}

TEST_P(StoreConformance, S2_LeaseCallsOnFinishedExecutionsAreStale) {
  JobDefinition job = MakeJob("report");
  job.retry.max_attempts = 1;
  DefineJob(job);
  AdmitOne(MakeRequest("report", 1));
  AdmitOne(MakeRequest("report", 2));
  const Lease failed = ClaimOne();
  const Lease quarantined = ClaimOne();
  ASSERT_OK_AND_ASSIGN(FinishReply f, store().Fail(Ref(failed), FailureClass::kRetryable, "x"));
  ASSERT_EQ(f.status, ExecutionStatus::kFailed);
  ASSERT_OK_AND_ASSIGN(FinishReply q,
                       store().Fail(Ref(quarantined), FailureClass::kPermanent, "bad input"));
  ASSERT_EQ(q.status, ExecutionStatus::kQuarantined);

  EXPECT_EVERY_LEASE_CALL_FAILS(Ref(failed), ErrorCode::kStale);
  EXPECT_EVERY_LEASE_CALL_FAILS(Ref(quarantined), ErrorCode::kStale);
}

}  // namespace taskengine
