// Conformance cases for admission: A1 (what an execution snapshots), A2
// (idempotency by job, tenant and key), A4 (re-admission still runs) and A5
// (batches).
#include <map>
#include <set>

#include "storage/testing/conformance.h"

namespace taskengine {
namespace {

JobDefinition PolicyJob(const std::string& name) {
  JobDefinition job;
  job.name = JobName(name);
  job.handler = "noop";
  job.queue = "reports";
  job.scope = JobScope::kPerTenant;
  job.lease_ms = 12'000;
  job.retry.max_attempts = 9;
  job.retry.backoff_base_ms = 700;
  job.retry.backoff_cap_ms = 90'000;
  job.retry.max_permanent_attempts = 2;
  job.retry.max_ambiguous_attempts = 3;
  job.retry.max_consecutive_lease_expiries = 4;
  return job;
}

}  // namespace

// --- A1 ---

TEST_P(StoreConformance, A1_AdmitCreatesQueuedExecutionWithJobSnapshot) {
  const JobDefinition job = PolicyJob("report");
  DefineJob(job);
  const ExecutionId parent = AdmitOne(MakeRequest("report", 0, "acme"));
  Advance(kSecond);

  AdmitRequest r = MakeRequest("report", 1, "acme", "key-1");
  r.payload_json = "{\"account\":\"a-1\",\"n\":1}";
  r.requester = "alice";
  r.trigger = Trigger::kManual;
  r.scheduled_at = Now() - 500;
  r.lane_key = "acme:a-1";
  r.parent = parent;
  ASSERT_OK_AND_ASSIGN(AdmitResult admitted, store().Admit(r));
  EXPECT_EQ(admitted.outcome, AdmitOutcome::kCreated);
  EXPECT_EQ(admitted.status, ExecutionStatus::kQueued);
  EXPECT_GT(admitted.id.value, parent.value);

  const Execution e = Get(admitted.id);
  EXPECT_EQ(e.id, admitted.id);
  EXPECT_EQ(e.job.value, "report");
  EXPECT_EQ(e.tenant.value, "acme");
  EXPECT_EQ(e.queue, job.queue);
  EXPECT_EQ(e.status, ExecutionStatus::kQueued);
  EXPECT_EQ(e.trigger, Trigger::kManual);
  EXPECT_EQ(e.requester, "alice");
  EXPECT_TRUE(e.worker.empty());
  EXPECT_EQ(e.attempt, 0);
  EXPECT_EQ(e.idempotency_key, "key-1");
  EXPECT_EQ(e.payload_json, r.payload_json);
  EXPECT_EQ(e.fingerprint, r.fingerprint);
  EXPECT_EQ(e.result_json, "");
  EXPECT_EQ(e.progress, 0);
  EXPECT_EQ(e.error, "");
  EXPECT_EQ(e.failure_class, FailureClass::kNone);
  EXPECT_EQ(e.scheduled_at, r.scheduled_at);
  EXPECT_EQ(e.run_at, Now()) << "run_at 0 means now";
  EXPECT_EQ(e.queued_at, Now());
  EXPECT_EQ(e.started_at, 0);
  EXPECT_EQ(e.finished_at, 0);
  EXPECT_EQ(e.lease_expires_at, 0);
  EXPECT_FALSE(e.cancel_requested);
  EXPECT_EQ(e.lane_key, "acme:a-1");
  EXPECT_EQ(e.parent, parent);
  EXPECT_EQ(e.consecutive_lease_expiries, 0);
  EXPECT_EQ(e.permanent_failures, 0);
  EXPECT_EQ(e.ambiguous_failures, 0);
  EXPECT_EQ(e.retry.max_attempts, job.retry.max_attempts);
  EXPECT_EQ(e.retry.backoff_base_ms, job.retry.backoff_base_ms);
  EXPECT_EQ(e.retry.backoff_cap_ms, job.retry.backoff_cap_ms);
  EXPECT_EQ(e.retry.max_permanent_attempts, job.retry.max_permanent_attempts);
  EXPECT_EQ(e.retry.max_ambiguous_attempts, job.retry.max_ambiguous_attempts);
  EXPECT_EQ(e.retry.max_consecutive_lease_expiries, job.retry.max_consecutive_lease_expiries);
  EXPECT_EQ(e.lease_ms, job.lease_ms);
}

TEST_P(StoreConformance, A1_FutureRunAtIsKept) {
  DefineJob("report");
  AdmitRequest r = MakeRequest("report", 1);
  r.run_at = Now() + 60 * kSecond;
  const ExecutionId id = AdmitOne(r);
  const Execution e = Get(id);
  EXPECT_EQ(e.run_at, Now() + 60 * kSecond);
  EXPECT_EQ(e.queued_at, Now());
  EXPECT_EQ(e.status, ExecutionStatus::kQueued);
}

TEST_P(StoreConformance, A1_ExecutionKeepsThePolicyOfItsAdmission) {
  const JobDefinition before = PolicyJob("report");
  DefineJob(before);
  const ExecutionId old_id = AdmitOne(MakeRequest("report", 1, "acme"));

  JobDefinition after = MakeJob("report", "elsewhere");
  after.lease_ms = 99'000;
  after.retry.max_attempts = 1;
  DefineJob(after);
  const ExecutionId new_id = AdmitOne(MakeRequest("report", 2, "acme"));

  const Execution old_e = Get(old_id);
  EXPECT_EQ(old_e.queue, before.queue);
  EXPECT_EQ(old_e.lease_ms, before.lease_ms);
  EXPECT_EQ(old_e.retry.max_attempts, before.retry.max_attempts);
  const Execution new_e = Get(new_id);
  EXPECT_EQ(new_e.queue, after.queue);
  EXPECT_EQ(new_e.lease_ms, after.lease_ms);
  EXPECT_EQ(new_e.retry.max_attempts, after.retry.max_attempts);

  // The old execution is claimed from its snapshotted queue with its lease.
  const Lease lease = ClaimOne(before.queue);
  EXPECT_EQ(lease.id, old_id);
  EXPECT_EQ(lease.lease_ms, before.lease_ms);
  EXPECT_EQ(lease.lease_expires_at, Now() + before.lease_ms);
}

TEST_P(StoreConformance, A1_UndefinedJobIsNotFound) {
  DefineJob("report");
  Result<AdmitResult> r = store().Admit(MakeRequest("nope", 1, "", "k"));
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound) << r.status().ToString();
  EXPECT_EQ(CountExecutions(), 0);
}

// A1: an admission that names the definition its dispatch was prepared from
// (AdmitRequest::prepared_with) is checked against the stored definition in
// its transaction; one that names none (schedules, replays) is not. In a
// batch, one failed check admits nothing: row by row, in one statement
// (PostgreSQL's array insert), and in MariaDB's multi-row inserts alike.
TEST_P(StoreConformance, A1_AdmissionChecksTheDefinitionItsDispatchWasPreparedFrom) {
  JobDefinition job;
  job.name = JobName("report");
  job.handler = "noop";
  job.queue = "reports";
  DefineJob(job);
  const JobTerms terms{"reports", JobScope::kGlobal, ""};
  const auto prepared = [&](int n, JobTerms t, const std::string& key = "") {
    AdmitRequest r = MakeRequest("report", n, "", key);
    r.prepared_with = std::move(t);
    return r;
  };
  ASSERT_OK(store().Admit(prepared(1, terms)).status());
  ASSERT_OK(store().Admit(prepared(2, terms, "k2")).status());
  AdmitRequest laned_keyed = prepared(2, terms, "k2-lane");
  laned_keyed.lane_key = "acct-1";
  ASSERT_OK(store().Admit(laned_keyed).status());
  EXPECT_EQ(CountExecutions(), 3);

  JobTerms other_queue = terms;
  other_queue.queue = "default";
  JobTerms per_tenant = terms;
  per_tenant.scope = JobScope::kPerTenant;
  JobTerms laned = terms;
  laned.lane_template = "{account}";
  for (const JobTerms& stale : {other_queue, per_tenant, laned}) {
    for (const std::string& key : {std::string(), std::string("k3")}) {
      Result<AdmitResult> one = store().Admit(prepared(3, stale, key));
      EXPECT_EQ(one.status().code(), ErrorCode::kConflict) << one.status().ToString();
      Result<std::vector<AdmitResult>> batch = store().AdmitBatch(
          {prepared(4, terms, key.empty() ? "" : "k4"), prepared(5, terms), prepared(6, stale)});
      EXPECT_EQ(batch.status().code(), ErrorCode::kConflict) << batch.status().ToString();
    }
  }
  EXPECT_EQ(CountExecutions(), 3) << "a failed check admitted something";

  job.enabled = false;
  DefineJob(job);
  Result<AdmitResult> disabled = store().Admit(prepared(7, terms));
  EXPECT_EQ(disabled.status().code(), ErrorCode::kInvalidArgument) << disabled.status().ToString();
  Result<std::vector<AdmitResult>> batch =
      store().AdmitBatch({prepared(8, terms), prepared(9, terms)});
  EXPECT_EQ(batch.status().code(), ErrorCode::kInvalidArgument) << batch.status().ToString();
  // A repeat of an admitted key is refused too: the check comes before the key.
  for (const AdmitRequest& repeat : {prepared(2, terms, "k2"), laned_keyed}) {
    Result<AdmitResult> again = store().Admit(repeat);
    EXPECT_EQ(again.status().code(), ErrorCode::kInvalidArgument) << again.status().ToString();
  }
  EXPECT_EQ(CountExecutions(), 3);
  // Without prepared terms the store admits as before (a schedule's fire
  // checks its job itself).
  ASSERT_OK(store().Admit(MakeRequest("report", 10)).status());
  EXPECT_EQ(CountExecutions(), 4);
}

// --- A2 ---

TEST_P(StoreConformance, A2_SameKeySamePayloadReturnsSameExecution) {
  DefineJob("report");
  const ExecutionId id = AdmitOne(MakeRequest("report", 1, "", "k1"));
  const std::string before = Snapshot();
  Advance(kSecond);

  ASSERT_OK_AND_ASSIGN(AdmitResult again, store().Admit(MakeRequest("report", 1, "", "k1")));
  EXPECT_EQ(again.outcome, AdmitOutcome::kDuplicate);
  EXPECT_EQ(again.id, id);
  EXPECT_EQ(again.status, ExecutionStatus::kQueued);
  EXPECT_EQ(Snapshot(), before) << "a duplicate admission changes nothing";
}

TEST_P(StoreConformance, A2_DuplicateReportsTheCurrentStatus) {
  DefineJob("report");
  const ExecutionId id = AdmitOne(MakeRequest("report", 1, "", "k1"));

  const Lease lease = ClaimOne();
  ASSERT_EQ(lease.id, id);
  ASSERT_OK_AND_ASSIGN(AdmitResult running, store().Admit(MakeRequest("report", 1, "", "k1")));
  EXPECT_EQ(running.outcome, AdmitOutcome::kDuplicate);
  EXPECT_EQ(running.id, id);
  EXPECT_EQ(running.status, ExecutionStatus::kRunning);

  ASSERT_OK(store().Complete(Ref(lease), "{\"ok\":true}"));
  const std::string before = Snapshot();
  ASSERT_OK_AND_ASSIGN(AdmitResult done, store().Admit(MakeRequest("report", 1, "", "k1")));
  EXPECT_EQ(done.outcome, AdmitOutcome::kDuplicate);
  EXPECT_EQ(done.id, id);
  EXPECT_EQ(done.status, ExecutionStatus::kSucceeded);
  EXPECT_EQ(Snapshot(), before) << "a duplicate of a finished execution does not rerun it";
  EXPECT_EQ(CountExecutions(), 1);
}

TEST_P(StoreConformance, A2_SameKeyDifferentFingerprintIsConflict) {
  DefineJob("report");
  const ExecutionId id = AdmitOne(MakeRequest("report", 1, "", "k1"));
  const std::string before = Snapshot();

  ASSERT_OK_AND_ASSIGN(AdmitResult other, store().Admit(MakeRequest("report", 2, "", "k1")));
  EXPECT_EQ(other.outcome, AdmitOutcome::kConflict);
  EXPECT_EQ(other.id, id) << "the conflict names the existing execution";
  EXPECT_EQ(Snapshot(), before) << "nothing is created or changed";
  EXPECT_EQ(CountExecutions(), 1);
}

TEST_P(StoreConformance, A2_IdempotencyScopeIsJobTenantAndKey) {
  DefineJob("report");
  DefineJob("export");
  std::set<std::int64_t> ids;
  ids.insert(AdmitOne(MakeRequest("report", 1, "acme", "k1")).value);
  ids.insert(AdmitOne(MakeRequest("report", 1, "globex", "k1")).value);  // another tenant
  ids.insert(AdmitOne(MakeRequest("report", 1, "", "k1")).value);        // no tenant
  ids.insert(AdmitOne(MakeRequest("export", 1, "acme", "k1")).value);    // another job
  ids.insert(AdmitOne(MakeRequest("report", 1, "acme", "k2")).value);    // another key
  EXPECT_EQ(ids.size(), 5u);
  EXPECT_EQ(CountExecutions(), 5);

  // Each scope now has its own execution: the same admissions are duplicates.
  ASSERT_OK_AND_ASSIGN(AdmitResult dup, store().Admit(MakeRequest("report", 1, "globex", "k1")));
  EXPECT_EQ(dup.outcome, AdmitOutcome::kDuplicate);
  EXPECT_EQ(CountExecutions(), 5);
}

TEST_P(StoreConformance, A2_NoKeyAlwaysCreates) {
  DefineJob("report");
  std::set<std::int64_t> ids;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(AdmitResult r, store().Admit(MakeRequest("report", 1)));
    EXPECT_EQ(r.outcome, AdmitOutcome::kCreated);
    ids.insert(r.id.value);
  }
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(CountExecutions(), 3);
}

// --- A4: the recovery-key trap, at store level ---

TEST_P(StoreConformance, A4_ReadmittedExecutionIsStillClaimed) {
  DefineJob("report");
  // The first admission committed but its wakeup was lost: nobody claimed it.
  const ExecutionId id = AdmitOne(MakeRequest("report", 1, "", "recovery-key"));
  ASSERT_OK_AND_ASSIGN(AdmitResult again,
                       store().Admit(MakeRequest("report", 1, "", "recovery-key")));
  EXPECT_EQ(again.outcome, AdmitOutcome::kDuplicate);
  EXPECT_EQ(again.id, id);
  EXPECT_EQ(again.status, ExecutionStatus::kQueued);

  const Lease lease = ClaimOne();
  EXPECT_EQ(lease.id, id);
  ASSERT_OK_AND_ASSIGN(FinishReply done, store().Complete(Ref(lease), ""));
  EXPECT_EQ(done.status, ExecutionStatus::kSucceeded);
}

// --- A5: batches ---

TEST_P(StoreConformance, A5_AdmitBatchOfThousandInRequestOrder) {
  DefineJob("report");
  DefineJob("export", "exports");
  std::vector<AdmitRequest> requests;
  for (int i = 0; i < 1000; ++i) {
    AdmitRequest r = MakeRequest(i % 3 == 0 ? "export" : "report", i, i % 2 ? "acme" : "",
                                 i % 5 == 0 ? "key-" + std::to_string(i) : "");
    requests.push_back(r);
  }
  ASSERT_OK_AND_ASSIGN(std::vector<AdmitResult> results, store().AdmitBatch(requests));
  ASSERT_EQ(results.size(), requests.size());

  std::map<std::int64_t, Execution> by_id;
  for (Execution& e : All()) by_id[e.id.value] = std::move(e);
  EXPECT_EQ(by_id.size(), 1000u);
  for (std::size_t i = 0; i < results.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ(results[i].outcome, AdmitOutcome::kCreated);
    EXPECT_EQ(results[i].status, ExecutionStatus::kQueued);
    auto it = by_id.find(results[i].id.value);
    ASSERT_NE(it, by_id.end());
    EXPECT_EQ(it->second.payload_json, requests[i].payload_json);
    EXPECT_EQ(it->second.job, requests[i].job);
    EXPECT_EQ(it->second.tenant, requests[i].tenant);
    EXPECT_EQ(it->second.idempotency_key, requests[i].idempotency_key);
    EXPECT_EQ(it->second.queue, i % 3 == 0 ? "exports" : "default");
    if (i > 0) {
      EXPECT_GT(results[i].id, results[i - 1].id) << "ids follow request order";
    }
  }
}

TEST_P(StoreConformance, A5_AdmitBatchWithAnUndefinedJobAdmitsNone) {
  DefineJob("report");
  std::vector<AdmitRequest> requests = {MakeRequest("report", 1, "", "k1"),
                                        MakeRequest("missing", 2), MakeRequest("report", 3)};
  Result<std::vector<AdmitResult>> r = store().AdmitBatch(requests);
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound) << r.status().ToString();
  EXPECT_EQ(CountExecutions(), 0);

  // The key was not taken by the failed batch.
  ASSERT_OK_AND_ASSIGN(AdmitResult fresh, store().Admit(MakeRequest("report", 1, "", "k1")));
  EXPECT_EQ(fresh.outcome, AdmitOutcome::kCreated);
}

TEST_P(StoreConformance, A5_SameKeyTwiceInOneBatchResolvesToOneExecution) {
  DefineJob("report");
  std::vector<AdmitRequest> requests = {
      MakeRequest("report", 1, "", "same"),   // created
      MakeRequest("report", 1, "", "same"),   // duplicate of the first
      MakeRequest("report", 7, "", "clash"),  // created
      MakeRequest("report", 8, "", "clash"),  // conflict with the previous
      MakeRequest("report", 9),               // created
  };
  ASSERT_OK_AND_ASSIGN(std::vector<AdmitResult> results, store().AdmitBatch(requests));
  ASSERT_EQ(results.size(), 5u);
  EXPECT_EQ(results[0].outcome, AdmitOutcome::kCreated);
  EXPECT_EQ(results[1].outcome, AdmitOutcome::kDuplicate);
  EXPECT_EQ(results[1].id, results[0].id);
  EXPECT_EQ(results[2].outcome, AdmitOutcome::kCreated);
  EXPECT_EQ(results[3].outcome, AdmitOutcome::kConflict);
  EXPECT_EQ(results[3].id, results[2].id);
  EXPECT_EQ(results[4].outcome, AdmitOutcome::kCreated);
  EXPECT_EQ(CountExecutions(), 3);
  EXPECT_EQ(Get(results[2].id).payload_json, requests[2].payload_json);
}

TEST_P(StoreConformance, A5_AdmitBatchSeesEarlierAdmissions) {
  DefineJob("report");
  const ExecutionId id = AdmitOne(MakeRequest("report", 1, "", "k1"));
  ASSERT_OK_AND_ASSIGN(
      std::vector<AdmitResult> results,
      store().AdmitBatch({MakeRequest("report", 1, "", "k1"), MakeRequest("report", 2, "", "k1"),
                          MakeRequest("report", 3, "", "k3")}));
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].outcome, AdmitOutcome::kDuplicate);
  EXPECT_EQ(results[0].id, id);
  EXPECT_EQ(results[1].outcome, AdmitOutcome::kConflict);
  EXPECT_EQ(results[1].id, id);
  EXPECT_EQ(results[2].outcome, AdmitOutcome::kCreated);
  EXPECT_EQ(CountExecutions(), 2);
  EXPECT_EQ(Get(id).payload_json, "{\"n\":1}") << "a conflict does not overwrite";
}

}  // namespace taskengine
