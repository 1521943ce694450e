// Conformance cases for recovery: L4 (the sweeper and its staleness gate),
// RD3 at store level (only the current claim publishes) and L5 (failures,
// backoff, exhaustion and quarantine).
#include <thread>

#include "core/mutex.h"
#include "storage/testing/conformance.h"

namespace taskengine {
namespace {

// A job whose lease is `lease_ms` and whose policy the caller adjusts.
JobDefinition LeaseJob(const std::string& name, Millis lease_ms) {
  JobDefinition job;
  job.name = JobName(name);
  job.handler = "noop";
  job.lease_ms = lease_ms;
  return job;
}

}  // namespace

// --- L4: the sweeper ---

TEST_P(StoreConformance, L4_SweepNeverRecoversAnInFlightLease) {
  DefineJob(LeaseJob("report", 30'000));
  const ExecutionId id = AdmitOne(MakeRequest("report", 1));
  const Lease lease = ClaimOne();
  ASSERT_EQ(lease.lease_expires_at, Now() + 30'000);

  Advance(30'000 - 1);
  std::string before = Snapshot();
  ASSERT_OK_AND_ASSIGN(SweepReport early, store().SweepExpired(100));
  EXPECT_EQ(early.recovered, 0) << "1 ms before expiry";
  EXPECT_FALSE(early.more);
  EXPECT_EQ(Snapshot(), before);

  Advance(1);  // now == lease_expires_at: expired only strictly before now
  ASSERT_OK_AND_ASSIGN(SweepReport at, store().SweepExpired(100));
  EXPECT_EQ(at.recovered, 0) << "at exactly the expiry";
  EXPECT_EQ(Snapshot(), before);

  Advance(1);
  ASSERT_OK_AND_ASSIGN(SweepReport after, store().SweepExpired(100));
  EXPECT_EQ(after.recovered, 1) << "1 ms after expiry";
  EXPECT_EQ(Get(id).status, ExecutionStatus::kQueued);
}

TEST_P(StoreConformance, L4_ExpiredLeaseIsRequeuedWithBackoff) {
  DefineJob(LeaseJob("report", 10'000));
  const ExecutionId id = AdmitOne(MakeRequest("report", 1));
  const Lease lease = ClaimOne();
  Advance(10'001);

  ASSERT_OK_AND_ASSIGN(SweepReport report, store().SweepExpired(100));
  EXPECT_EQ(report.recovered, 1);
  EXPECT_EQ(report.requeued, 1);
  EXPECT_EQ(report.failed, 0);
  EXPECT_EQ(report.quarantined, 0);
  EXPECT_EQ(report.canceled, 0);
  EXPECT_FALSE(report.more);

  const Execution e = Get(id);
  EXPECT_EQ(e.status, ExecutionStatus::kQueued);
  EXPECT_EQ(e.run_at, Now() + 5'000) << "default policy, attempt 1, no jitter";
  EXPECT_EQ(e.attempt, 1) << "the expired attempt counts";
  EXPECT_EQ(e.failure_class, FailureClass::kLeaseExpired);
  EXPECT_EQ(e.consecutive_lease_expiries, 1);
  EXPECT_TRUE(e.worker.empty());
  EXPECT_EQ(e.lease_expires_at, 0);
  EXPECT_EQ(e.finished_at, 0);
  EXPECT_EQ(e.claim_version, lease.version) << "only a claim bumps the version";

  Advance(5'000 - 1);
  EXPECT_TRUE(ClaimN("default", 10).empty()) << "backing off";
  Advance(1);
  const Lease again = ClaimOne("default", "w2");
  EXPECT_EQ(again.id, id);
  EXPECT_EQ(again.attempt, 2);
  EXPECT_EQ(again.version.value, lease.version.value + 1);
}

TEST_P(StoreConformance, L4_ExpiryExhaustingTheAttemptsFails) {
  JobDefinition job = LeaseJob("report", 1'000);
  job.retry.max_attempts = 2;
  job.retry.max_consecutive_lease_expiries = 10;
  DefineJob(job);
  const ExecutionId id = AdmitOne(MakeRequest("report", 1));

  ClaimOne();
  Advance(1'001);
  ASSERT_OK_AND_ASSIGN(SweepReport first, store().SweepExpired(100));
  EXPECT_EQ(first.requeued, 1);
  Advance(5'000);
  EXPECT_EQ(ClaimOne().attempt, 2);
  Advance(1'001);
  ASSERT_OK_AND_ASSIGN(SweepReport last, store().SweepExpired(100));
  EXPECT_EQ(last.recovered, 1);
  EXPECT_EQ(last.failed, 1);
  EXPECT_EQ(last.requeued, 0);

  const Execution e = Get(id);
  EXPECT_EQ(e.status, ExecutionStatus::kFailed);
  EXPECT_EQ(e.failure_class, FailureClass::kLeaseExpired);
  EXPECT_EQ(e.attempt, 2);
  EXPECT_EQ(e.finished_at, Now());
  EXPECT_TRUE(e.worker.empty());
  Advance(3'600'000);
  EXPECT_TRUE(ClaimN("default", 10).empty()) << "failed is terminal";
}

TEST_P(StoreConformance, L4_RepeatedExpiriesQuarantine) {
  JobDefinition job = LeaseJob("poison", 1'000);
  job.retry.max_attempts = 10;
  job.retry.max_consecutive_lease_expiries = 2;
  DefineJob(job);
  const ExecutionId id = AdmitOne(MakeRequest("poison", 1));

  ClaimOne();
  Advance(1'001);
  ASSERT_OK_AND_ASSIGN(SweepReport first, store().SweepExpired(100));
  EXPECT_EQ(first.requeued, 1);
  Advance(5'000);
  ClaimOne();
  Advance(1'001);
  ASSERT_OK_AND_ASSIGN(SweepReport second, store().SweepExpired(100));
  EXPECT_EQ(second.quarantined, 1);
  EXPECT_EQ(second.requeued, 0);

  const Execution e = Get(id);
  EXPECT_EQ(e.status, ExecutionStatus::kQuarantined);
  EXPECT_EQ(e.consecutive_lease_expiries, 2);
  EXPECT_EQ(e.failure_class, FailureClass::kLeaseExpired);
  EXPECT_EQ(e.finished_at, Now());
}

// --- L4: leases whose handler never started ---

namespace {

// Claims up to `max` from the default queue as a prefetching pool does: the
// handlers start later (MarkStarted).
std::vector<Lease> ClaimUnstarted(Store& store, int max) {
  ClaimRequest request;
  request.worker = WorkerId("pool");
  request.slots.push_back(QueueSlot{"default", max});
  request.mark_started = false;
  auto leases = store.Claim(request);
  EXPECT_TRUE(leases.ok()) << leases.status().ToString();
  return leases.ok() ? *leases : std::vector<Lease>{};
}

}  // namespace

// Prefetched work of a node that died: the expiry of a lease whose handler
// never started burns no attempt and counts toward no poison limit, even on
// the last attempt with one expiry left before quarantine.
TEST_P(StoreConformance, L4_ExpiryOfANeverStartedLeaseIsAFreeRequeue) {
  JobDefinition job = LeaseJob("report", 1'000);
  job.retry.max_attempts = 1;
  job.retry.max_consecutive_lease_expiries = 1;
  DefineJob(job);
  const ExecutionId id = AdmitOne(MakeRequest("report", 1));
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::vector<Lease> leases = ClaimUnstarted(store(), 10);
    ASSERT_EQ(leases.size(), 1u);
    EXPECT_EQ(leases[0].attempt, 1);
    Advance(1'001);
    ASSERT_OK_AND_ASSIGN(SweepReport report, store().SweepExpired(100));
    EXPECT_EQ(report.recovered, 1);
    EXPECT_EQ(report.requeued, 1);
    EXPECT_EQ(report.quarantined + report.failed, 0);
    const Execution e = Get(id);
    EXPECT_EQ(e.status, ExecutionStatus::kQueued);
    EXPECT_EQ(e.attempt, 0) << "the attempt is given back";
    EXPECT_EQ(e.consecutive_lease_expiries, 0) << "no expiry counted";
    EXPECT_EQ(e.failure_class, FailureClass::kNone);
    EXPECT_EQ(e.run_at, Now()) << "due at once";
    EXPECT_TRUE(e.worker.empty());
    EXPECT_EQ(e.lease_expires_at, 0);
  }
  ASSERT_OK_AND_ASSIGN(std::vector<AttemptRecord> attempts, store().GetAttempts(id));
  ASSERT_EQ(attempts.size(), 3u) << "each lease that lapsed unstarted is in the history";
  for (const AttemptRecord& a : attempts) {
    EXPECT_TRUE(a.released) << "not counted";
    EXPECT_NE(a.error.find("before its handler started"), std::string::npos) << a.error;
  }

  // Once its handler starts, the same expiry counts: quarantined (bound 1).
  const std::vector<Lease> leases = ClaimUnstarted(store(), 10);
  ASSERT_EQ(leases.size(), 1u);
  const std::vector<Status> marked = store().MarkStarted({Ref(leases[0])});
  ASSERT_EQ(marked.size(), 1u);
  ASSERT_OK(marked[0]);
  Advance(1'001);
  ASSERT_OK_AND_ASSIGN(SweepReport report, store().SweepExpired(100));
  EXPECT_EQ(report.quarantined, 1);
  const Execution e = Get(id);
  EXPECT_EQ(e.status, ExecutionStatus::kQuarantined);
  EXPECT_EQ(e.attempt, 1);
  EXPECT_EQ(e.consecutive_lease_expiries, 1);
  EXPECT_EQ(e.failure_class, FailureClass::kLeaseExpired);
}

// A claim that does not prefetch (a remote worker leases only what it runs)
// marks its leases started: their expiries count as before.
TEST_P(StoreConformance, L4_ALeaseClaimedToStartAtOnceCountsItsExpiry) {
  JobDefinition job = LeaseJob("report", 1'000);
  job.retry.max_consecutive_lease_expiries = 1;
  DefineJob(job);
  const ExecutionId id = AdmitOne(MakeRequest("report", 1));
  ClaimOne();
  Advance(1'001);
  ASSERT_OK_AND_ASSIGN(SweepReport report, store().SweepExpired(100));
  EXPECT_EQ(report.quarantined, 1);
  EXPECT_EQ(Get(id).status, ExecutionStatus::kQuarantined);
}

// A prefetching claim may mark the leases of some of its queues started (a
// fast queue whose workers run them within moments): those expiries count,
// the other queues' leases stay unstarted and lapse for free.
TEST_P(StoreConformance, L4_AClaimMarksStartedOnlyTheSlotsThatSaySo) {
  JobDefinition fast = LeaseJob("fast", 1'000);
  fast.queue = "fast";
  fast.retry.max_consecutive_lease_expiries = 1;
  JobDefinition slow = LeaseJob("slow", 1'000);
  slow.queue = "slow";
  slow.retry.max_consecutive_lease_expiries = 1;
  DefineJob(fast);
  DefineJob(slow);
  const ExecutionId fast_id = AdmitOne(MakeRequest("fast", 1));
  const ExecutionId slow_id = AdmitOne(MakeRequest("slow", 1));

  ClaimRequest request;
  request.worker = WorkerId("pool");
  request.mark_started = false;
  request.slots = {QueueSlot{.queue = "fast", .max = 5, .mark_started = true},
                   QueueSlot{.queue = "slow", .max = 5}};
  ASSERT_OK_AND_ASSIGN(std::vector<Lease> leases, store().Claim(request));
  ASSERT_EQ(leases.size(), 2u);
  EXPECT_EQ(leases[0].queue, "fast");
  EXPECT_EQ(leases[1].queue, "slow");

  Advance(1'001);
  ASSERT_OK_AND_ASSIGN(SweepReport report, store().SweepExpired(100));
  EXPECT_EQ(report.recovered, 2);
  EXPECT_EQ(report.quarantined, 1) << "the marked lease's expiry counts";
  EXPECT_EQ(report.requeued, 1);
  const Execution f = Get(fast_id);
  EXPECT_EQ(f.status, ExecutionStatus::kQuarantined);
  EXPECT_EQ(f.attempt, 1);
  const Execution s = Get(slow_id);
  EXPECT_EQ(s.status, ExecutionStatus::kQueued);
  EXPECT_EQ(s.attempt, 0) << "the unstarted lease burns no attempt";
  EXPECT_EQ(s.consecutive_lease_expiries, 0);
}

// MarkStarted answers each lease alone: a lease that is not current must not
// start its handler (kStale), a missing execution is kNotFound, and neither
// changes anything.
TEST_P(StoreConformance, L4_MarkStartedOfAStaleOrMissingLeaseChangesNothing) {
  DefineJob(LeaseJob("report", 1'000));
  const ExecutionId a = AdmitOne(MakeRequest("report", 1));
  const ExecutionId b = AdmitOne(MakeRequest("report", 2));
  std::vector<Lease> first = ClaimUnstarted(store(), 10);
  ASSERT_EQ(first.size(), 2u);
  Advance(1'001);
  ASSERT_OK_AND_ASSIGN(SweepReport report, store().SweepExpired(100));
  ASSERT_EQ(report.requeued, 2);
  std::vector<Lease> second = ClaimUnstarted(store(), 10);
  ASSERT_EQ(second.size(), 2u);
  const std::string before = Snapshot();
  const std::vector<Status> replies = store().MarkStarted(
      {Ref(first[0]), LeaseRef{ExecutionId(999'999), ClaimVersion(1)}, Ref(first[1])});
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_EQ(replies[0].code(), ErrorCode::kStale) << replies[0].ToString();
  EXPECT_EQ(replies[1].code(), ErrorCode::kNotFound) << replies[1].ToString();
  EXPECT_EQ(replies[2].code(), ErrorCode::kStale) << replies[2].ToString();
  EXPECT_EQ(Snapshot(), before);
  // The current leases are marked, in one call.
  const std::vector<Status> current = store().MarkStarted({Ref(second[0]), Ref(second[1])});
  ASSERT_EQ(current.size(), 2u);
  EXPECT_OK(current[0]);
  EXPECT_OK(current[1]);
  Advance(1'001);
  ASSERT_OK_AND_ASSIGN(SweepReport counted, store().SweepExpired(100));
  EXPECT_EQ(counted.requeued, 2);
  for (ExecutionId id : {a, b}) {
    EXPECT_EQ(Get(id).attempt, 1) << "started: the expired attempt counts";
    EXPECT_EQ(Get(id).consecutive_lease_expiries, 1);
  }
}

TEST_P(StoreConformance, L4_AReportedFailureResetsTheExpiryCount) {
  JobDefinition job = LeaseJob("report", 1'000);
  job.retry.max_attempts = 10;
  job.retry.max_consecutive_lease_expiries = 2;
  DefineJob(job);
  const ExecutionId id = AdmitOne(MakeRequest("report", 1));

  ClaimOne();
  Advance(1'001);
  ASSERT_OK(store().SweepExpired(100));
  EXPECT_EQ(Get(id).consecutive_lease_expiries, 1);
  Advance(5'000);
  ASSERT_OK(store().Fail(Ref(ClaimOne()), FailureClass::kRetryable, "reported"));
  EXPECT_EQ(Get(id).consecutive_lease_expiries, 0) << "the worker reported: it did not die";
  Advance(10'000);
  ClaimOne();
  Advance(1'001);
  ASSERT_OK_AND_ASSIGN(SweepReport report, store().SweepExpired(100));
  EXPECT_EQ(report.requeued, 1);
  const Execution e = Get(id);
  EXPECT_EQ(e.status, ExecutionStatus::kQueued) << "not two expiries in a row";
  EXPECT_EQ(e.consecutive_lease_expiries, 1);
  EXPECT_EQ(e.attempt, 3);
}

TEST_P(StoreConformance, L4_SweepOnlyTouchesExpiredLeases) {
  DefineJob(LeaseJob("short", 1'000));
  DefineJob(LeaseJob("long", 60'000));
  const ExecutionId short_id = AdmitOne(MakeRequest("short", 1));
  const ExecutionId long_id = AdmitOne(MakeRequest("long", 2));
  const ExecutionId queued_id = AdmitOne(MakeRequest("long", 3));
  ASSERT_EQ(ClaimN("default", 2).size(), 2u);
  Advance(2'000);
  const std::string long_before = Describe(Get(long_id));
  const std::string queued_before = Describe(Get(queued_id));

  ASSERT_OK_AND_ASSIGN(SweepReport report, store().SweepExpired(100));
  EXPECT_EQ(report.recovered, 1);
  EXPECT_EQ(Get(short_id).status, ExecutionStatus::kQueued);
  EXPECT_EQ(Describe(Get(long_id)), long_before);
  EXPECT_EQ(Describe(Get(queued_id)), queued_before);
}

TEST_P(StoreConformance, L4_SweepIsBoundedByMaxBatch) {
  DefineJob(LeaseJob("report", 1'000));
  for (int i = 0; i < 5; ++i) AdmitOne(MakeRequest("report", i));
  ASSERT_EQ(ClaimN("default", 5).size(), 5u);
  Advance(1'001);

  ASSERT_OK_AND_ASSIGN(SweepReport a, store().SweepExpired(2));
  EXPECT_EQ(a.recovered, 2);
  EXPECT_TRUE(a.more) << "a full batch says: call again";
  ASSERT_OK_AND_ASSIGN(SweepReport b, store().SweepExpired(2));
  EXPECT_EQ(b.recovered, 2);
  EXPECT_TRUE(b.more);
  ASSERT_OK_AND_ASSIGN(SweepReport c, store().SweepExpired(2));
  EXPECT_EQ(c.recovered, 1);
  EXPECT_FALSE(c.more);
  ASSERT_OK_AND_ASSIGN(SweepReport d, store().SweepExpired(2));
  EXPECT_EQ(d.recovered, 0);
  EXPECT_FALSE(d.more);
  for (const Execution& e : All()) EXPECT_EQ(e.status, ExecutionStatus::kQueued);
}

TEST_P(StoreConformance, L4_ConcurrentSweepsRecoverEachOnce) {
  constexpr int kExecutions = 60;
  constexpr int kThreads = 4;
  DefineJob(LeaseJob("report", 1'000));
  std::vector<AdmitRequest> requests;
  for (int i = 0; i < kExecutions; ++i) requests.push_back(MakeRequest("report", i));
  ASSERT_OK(store().AdmitBatch(requests));
  ASSERT_EQ(ClaimN("default", kExecutions).size(), static_cast<std::size_t>(kExecutions));
  Advance(1'001);

  std::unique_ptr<Store> other;
  if (GetParam().shares_data_between_opens) {
    ASSERT_OK_AND_ASSIGN(other, OpenAnother());
  }
  Mutex mu;
  int recovered = 0;
  int requeued = 0;
  std::vector<std::string> errors;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    Store* s = (other && t % 2 == 1) ? other.get() : &store();
    threads.emplace_back([&, s] {
      for (;;) {
        Result<SweepReport> r = s->SweepExpired(5);
        MutexLock lock(mu);
        if (!r.ok()) {
          errors.push_back(r.status().ToString());
          return;
        }
        recovered += r->recovered;
        requeued += r->requeued;
        if (r->recovered == 0 && !r->more) return;
      }
    });
  }
  for (std::thread& th : threads) th.join();

  EXPECT_TRUE(errors.empty()) << errors.size() << " errors, first: " << errors.front();
  EXPECT_EQ(recovered, kExecutions) << "each expired lease is recovered exactly once";
  EXPECT_EQ(requeued, kExecutions);
  for (const Execution& e : All()) {
    EXPECT_EQ(e.status, ExecutionStatus::kQueued);
    EXPECT_EQ(e.consecutive_lease_expiries, 1) << "execution " << e.id.value;
    EXPECT_EQ(e.run_at, Now() + 5'000) << "execution " << e.id.value;
  }
}

// --- RD3 at store level: the lease expires while worker 1 still runs ---

TEST_P(StoreConformance, RD3_OnlyTheCurrentClaimPublishes) {
  DefineJob(LeaseJob("report", 10'000));
  const ExecutionId id = AdmitOne(MakeRequest("report", 1));
  const Lease w1 = ClaimOne("default", "w1");
  ASSERT_OK(store().AppendLog(Ref(w1), LogLevel::kInfo, "w1 started"));
  Advance(10'001);  // w1 is stuck (GC pause, SIGSTOP, partition)
  ASSERT_OK_AND_ASSIGN(SweepReport report, store().SweepExpired(100));
  ASSERT_EQ(report.requeued, 1);
  Advance(5'000);
  const Lease w2 = ClaimOne("default", "w2");
  ASSERT_EQ(w2.id, id);
  EXPECT_EQ(w2.attempt, 2);
  ASSERT_OK(store().AppendLog(Ref(w2), LogLevel::kInfo, "w2 started"));

  // w1 wakes up: everything it says is stale and changes nothing.
  const std::string before = Snapshot();
  EXPECT_EQ(store().Heartbeat(Ref(w1), 99).status().code(), ErrorCode::kStale);
  EXPECT_EQ(store().AppendLog(Ref(w1), LogLevel::kInfo, "w1 done").code(), ErrorCode::kStale);
  EXPECT_EQ(store().Complete(Ref(w1), "{\"by\":\"w1\"}").status().code(), ErrorCode::kStale);
  EXPECT_EQ(store().Fail(Ref(w1), FailureClass::kRetryable, "w1").status().code(),
            ErrorCode::kStale);
  EXPECT_EQ(store().Release(Ref(w1)).status().code(), ErrorCode::kStale);
  EXPECT_EQ(Snapshot(), before);

  ASSERT_OK_AND_ASSIGN(FinishReply done, store().Complete(Ref(w2), "{\"by\":\"w2\"}"));
  EXPECT_EQ(done.status, ExecutionStatus::kSucceeded);
  const Execution e = Get(id);
  EXPECT_EQ(e.result_json, "{\"by\":\"w2\"}");
  EXPECT_EQ(e.consecutive_lease_expiries, 0);
  EXPECT_EQ(e.failure_class, FailureClass::kNone);
  EXPECT_EQ(store().Complete(Ref(w1), "{\"by\":\"w1\"}").status().code(), ErrorCode::kStale);

  ASSERT_OK_AND_ASSIGN(std::vector<LogEntry> logs, store().GetLogs(id, 10));
  ASSERT_EQ(logs.size(), 2u);
  EXPECT_EQ(logs[0].message, "w1 started");
  EXPECT_EQ(logs[0].attempt, 1);
  EXPECT_EQ(logs[1].message, "w2 started");
  EXPECT_EQ(logs[1].attempt, 2);
}

// --- L5: failures ---

TEST_P(StoreConformance, L5_RetryableFailureRequeuesWithBackoff) {
  DefineJob("report");  // default policy: base 5 s, cap 1 h, 5 attempts
  const ExecutionId id = AdmitOne(MakeRequest("report", 1));
  const Millis expected_delay[] = {5'000, 10'000, 20'000, 40'000};
  for (int attempt = 1; attempt <= 4; ++attempt) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    const Lease lease = ClaimOne();
    ASSERT_EQ(lease.attempt, attempt);
    Advance(kSecond);
    ASSERT_OK_AND_ASSIGN(FinishReply reply,
                         store().Fail(Ref(lease), FailureClass::kRetryable, "boom"));
    const Millis delay = expected_delay[attempt - 1];
    EXPECT_EQ(reply.status, ExecutionStatus::kQueued);
    EXPECT_EQ(reply.run_at, Now() + delay);
    const Execution e = Get(id);
    EXPECT_EQ(e.status, ExecutionStatus::kQueued);
    EXPECT_EQ(e.run_at, Now() + delay);
    EXPECT_EQ(e.attempt, attempt);
    EXPECT_EQ(e.failure_class, FailureClass::kRetryable);
    EXPECT_EQ(e.error, "boom");
    EXPECT_TRUE(e.worker.empty());
    EXPECT_EQ(e.lease_expires_at, 0);
    EXPECT_EQ(e.finished_at, 0);
    Advance(delay - 1);
    EXPECT_TRUE(ClaimN("default", 1).empty()) << "still backing off";
    Advance(1);
  }
}

TEST_P(StoreConformance, L5_BackoffIsCappedAndJittered) {
  JobDefinition job = MakeJob("report");
  job.retry.max_attempts = 10;
  job.retry.backoff_base_ms = 1'000;
  job.retry.backoff_cap_ms = 3'000;
  DefineJob(job);
  AdmitOne(MakeRequest("report", 1));
  auto fail_once = [&] {
    Result<FinishReply> r = store().Fail(Ref(ClaimOne()), FailureClass::kRetryable, "x");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    const Millis delay = r.ok() ? r->run_at - Now() : -1;
    Advance(3'600'000);
    return delay;
  };
  EXPECT_EQ(fail_once(), 1'000);
  EXPECT_EQ(fail_once(), 2'000);
  EXPECT_EQ(fail_once(), 3'000) << "4 s capped at 3 s";
  SetJitter(0.5);
  EXPECT_EQ(fail_once(), 3'150) << "plus jitter: 10% x 0.5 of the capped delay";
  SetJitter(0.999);
  EXPECT_EQ(fail_once(), 3'299) << "jitter stays under 10%";
}

TEST_P(StoreConformance, L5_RetryAfterRaisesTheDelay) {
  DefineJob("report");
  const ExecutionId id = AdmitOne(MakeRequest("report", 1));
  ASSERT_OK_AND_ASSIGN(FinishReply slow,
                       store().Fail(Ref(ClaimOne()), FailureClass::kRetryable, "429", 60'000));
  EXPECT_EQ(slow.run_at, Now() + 60'000);
  EXPECT_EQ(Get(id).run_at, Now() + 60'000);
  Advance(60'000);
  ASSERT_OK_AND_ASSIGN(FinishReply fast,
                       store().Fail(Ref(ClaimOne()), FailureClass::kRetryable, "429", 1'000));
  EXPECT_EQ(fast.run_at, Now() + 10'000) << "retry_after below the backoff does not shorten it";
}

TEST_P(StoreConformance, L5_ExhaustedRetryableFailureFails) {
  JobDefinition job = MakeJob("report");
  job.retry.max_attempts = 2;
  DefineJob(job);
  const ExecutionId id = AdmitOne(MakeRequest("report", 1));
  ASSERT_OK(store().Fail(Ref(ClaimOne()), FailureClass::kRetryable, "first"));
  Advance(5'000);
  ASSERT_OK_AND_ASSIGN(FinishReply last,
                       store().Fail(Ref(ClaimOne()), FailureClass::kRetryable, "second"));
  EXPECT_EQ(last.status, ExecutionStatus::kFailed);

  const Execution e = Get(id);
  EXPECT_EQ(e.status, ExecutionStatus::kFailed);
  EXPECT_EQ(e.failure_class, FailureClass::kRetryable);
  EXPECT_EQ(e.error, "second");
  EXPECT_EQ(e.attempt, 2);
  EXPECT_EQ(e.finished_at, Now());
  EXPECT_TRUE(e.worker.empty());
  Advance(3'600'000);
  EXPECT_TRUE(ClaimN("default", 10).empty()) << "failed is terminal";
}

TEST_P(StoreConformance, L5_PermanentFailureQuarantines) {
  DefineJob("report");  // default: quarantined after 1 permanent failure
  const ExecutionId id = AdmitOne(MakeRequest("report", 1));
  ASSERT_OK_AND_ASSIGN(FinishReply reply,
                       store().Fail(Ref(ClaimOne()), FailureClass::kPermanent, "bad input"));
  EXPECT_EQ(reply.status, ExecutionStatus::kQuarantined);
  const Execution e = Get(id);
  EXPECT_EQ(e.status, ExecutionStatus::kQuarantined);
  EXPECT_EQ(e.failure_class, FailureClass::kPermanent);
  EXPECT_EQ(e.permanent_failures, 1);
  EXPECT_EQ(e.error, "bad input");
  EXPECT_EQ(e.finished_at, Now());
  Advance(3'600'000);
  EXPECT_TRUE(ClaimN("default", 10).empty());
}

TEST_P(StoreConformance, L5_PermanentFailureBelowItsBoundRetries) {
  JobDefinition job = MakeJob("report");
  job.retry.max_permanent_attempts = 2;
  DefineJob(job);
  const ExecutionId id = AdmitOne(MakeRequest("report", 1));
  ASSERT_OK_AND_ASSIGN(FinishReply first,
                       store().Fail(Ref(ClaimOne()), FailureClass::kPermanent, "schema v9"));
  EXPECT_EQ(first.status, ExecutionStatus::kQueued);
  EXPECT_EQ(first.run_at, Now() + 5'000);
  EXPECT_EQ(Get(id).permanent_failures, 1);
  Advance(5'000);
  ASSERT_OK_AND_ASSIGN(FinishReply second,
                       store().Fail(Ref(ClaimOne()), FailureClass::kPermanent, "schema v9"));
  EXPECT_EQ(second.status, ExecutionStatus::kQuarantined);
  EXPECT_EQ(Get(id).permanent_failures, 2);
}

TEST_P(StoreConformance, L5_AmbiguousFailureQuarantines) {
  DefineJob("report");  // default: quarantined after 1 ambiguous failure
  const ExecutionId id = AdmitOne(MakeRequest("report", 1));
  ASSERT_OK_AND_ASSIGN(FinishReply reply,
                       store().Fail(Ref(ClaimOne()), FailureClass::kAmbiguous, "timeout"));
  EXPECT_EQ(reply.status, ExecutionStatus::kQuarantined);
  const Execution e = Get(id);
  EXPECT_EQ(e.status, ExecutionStatus::kQuarantined);
  EXPECT_EQ(e.failure_class, FailureClass::kAmbiguous);
  EXPECT_EQ(e.ambiguous_failures, 1);
  EXPECT_EQ(e.finished_at, Now());
}

TEST_P(StoreConformance, L5_FailWithAClassWorkersCannotReportIsInvalidArgument) {
  DefineJob("report");
  const ExecutionId id = AdmitOne(MakeRequest("report", 1));
  const Lease lease = ClaimOne();
  const std::string before = Snapshot();
  EXPECT_EQ(store().Fail(Ref(lease), FailureClass::kNone, "x").status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(store().Fail(Ref(lease), FailureClass::kLeaseExpired, "x").status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(Snapshot(), before);
  EXPECT_EQ(Get(id).status, ExecutionStatus::kRunning);
}

}  // namespace taskengine
