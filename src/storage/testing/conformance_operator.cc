// Conformance cases for the operator actions on executions and the failure
// classes that lead to them: C1/C2 (cancellation; drill RD7 at store level),
// Q1 (unsupported payload schemas have their own bound), R1/R2 (replay,
// four-eyes approval, ambiguous reservations; drill RD5 at store level). Each
// action must write its audit record (X4) in the same transaction; an illegal
// one changes nothing, audit log included.
#include <string>
#include <string_view>
#include <vector>

#include "storage/testing/conformance.h"

namespace taskengine {
namespace {

JobDefinition WorkJob(const std::string& name = "work") {
  JobDefinition job;
  job.name = JobName(name);
  job.handler = "noop";
  job.lease_ms = kCaseLeaseMs;
  return job;
}

// Whether a JSON text names `status` as a string value ("queued", ...).
bool MentionsStatus(const std::string& json, ExecutionStatus status) {
  return json.find("\"" + std::string(ToString(status)) + "\"") != std::string::npos;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// The audit records among `all` whose action starts with `prefix`.
std::vector<AuditRecord> WithAction(const std::vector<AuditRecord>& all, std::string_view prefix) {
  std::vector<AuditRecord> out;
  for (const AuditRecord& r : all) {
    if (StartsWith(r.action, prefix)) out.push_back(r);
  }
  return out;
}

// Fails `lease` as permanent because its payload schema is not accepted (Q1).
Result<FinishReply> FailUnsupportedSchema(Store& store, const Lease& lease) {
  FinishRequest request;
  request.lease = LeaseRef{lease.id, lease.version};
  request.kind = FinishRequest::Kind::kFail;
  request.failure_class = FailureClass::kPermanent;
  request.error = "payload schema_version 9 is not accepted";
  request.unsupported_schema = true;
  std::vector<Result<FinishReply>> replies = store.FinishBatch({request});
  if (replies.size() != 1) {
    return Internal("FinishBatch of one request gave " + std::to_string(replies.size()) +
                    " replies");
  }
  return std::move(replies[0]);
}

ReplayRequest MakeReplay(ExecutionId id, const std::string& actor, const std::string& reason,
                         AmbiguousResolution ambiguous = AmbiguousResolution::kKeep,
                         bool require_approval = false) {
  ReplayRequest r;
  r.id = id;
  r.action = OperatorAction{actor, reason};
  r.ambiguous = ambiguous;
  r.require_approval = require_approval;
  return r;
}

}  // namespace

// --- C1: cancellation ---

TEST_P(StoreConformance, C1_CancelOfQueuedEndsCanceledAtOnceAndIsAudited) {
  DefineJob(WorkJob());
  const ExecutionId id = AdmitOne(MakeRequest("work", 1, "acme"));
  Advance(kSecond);

  ASSERT_OK_AND_ASSIGN(ExecutionStatus status,
                       store().RequestCancel(id, By("alice", "customer asked")));
  EXPECT_EQ(status, ExecutionStatus::kCanceled);
  const Execution e = Get(id);
  EXPECT_EQ(e.status, ExecutionStatus::kCanceled);
  EXPECT_EQ(e.finished_at, Now());
  EXPECT_TRUE(e.worker.empty());
  EXPECT_TRUE(ClaimN("default", 10).empty()) << "canceled is terminal";

  const std::vector<AuditRecord> audit = Audit(Target(id));
  ASSERT_EQ(audit.size(), 1u);
  const AuditRecord& a = audit[0];
  EXPECT_GT(a.id, 0);
  EXPECT_EQ(a.at, Now());
  EXPECT_EQ(a.actor, "alice");
  EXPECT_EQ(a.tenant, "acme");
  EXPECT_TRUE(StartsWith(a.action, "execution.cancel")) << a.action;
  EXPECT_EQ(a.target, "execution:" + std::to_string(id.value));
  EXPECT_EQ(a.reason, "customer asked");
  EXPECT_TRUE(MentionsStatus(a.before_json, ExecutionStatus::kQueued)) << a.before_json;
  EXPECT_TRUE(MentionsStatus(a.after_json, ExecutionStatus::kCanceled)) << a.after_json;
  EXPECT_EQ(Audit().size(), 1u) << "one action, one record";
}

TEST_P(StoreConformance, C1_CancelOfRunningIsRequestedAndTheWorkerLearnsIt) {
  DefineJob(WorkJob());
  const ExecutionId id = AdmitOne(MakeRequest("work", 1, "acme"));
  const Lease lease = ClaimOne("default", "w1");
  Advance(kSecond);

  ASSERT_OK_AND_ASSIGN(ExecutionStatus status, store().RequestCancel(id, By("alice")));
  EXPECT_EQ(status, ExecutionStatus::kRunning);
  const Execution e = Get(id);
  EXPECT_EQ(e.status, ExecutionStatus::kRunning);
  EXPECT_TRUE(e.cancel_requested);
  EXPECT_EQ(e.worker.value, "w1");
  EXPECT_EQ(e.finished_at, 0);

  const std::vector<AuditRecord> audit = Audit(Target(id));
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_EQ(audit[0].actor, "alice");
  EXPECT_EQ(audit[0].tenant, "acme");
  EXPECT_EQ(audit[0].at, Now());
  EXPECT_TRUE(StartsWith(audit[0].action, "execution.cancel")) << audit[0].action;
  EXPECT_TRUE(MentionsStatus(audit[0].before_json, ExecutionStatus::kRunning))
      << audit[0].before_json;

  // The worker learns at its next heartbeat or effect reservation.
  ASSERT_OK_AND_ASSIGN(HeartbeatReply hb, store().Heartbeat(Ref(lease), std::nullopt));
  EXPECT_TRUE(hb.cancel_requested);
  EXPECT_EQ(Reserve(lease, "send").answer, EffectAnswer::kCanceled);
}

TEST_P(StoreConformance, C1_SecondCancelOfRunningChangesNothing) {
  DefineJob(WorkJob());
  const ExecutionId id = AdmitOne(MakeRequest("work", 1));
  ClaimOne();
  ASSERT_OK(store().RequestCancel(id, By("alice")));
  const std::string before = Snapshot();
  Advance(kSecond);

  ASSERT_OK_AND_ASSIGN(ExecutionStatus status, store().RequestCancel(id, By("bob", "again")));
  EXPECT_EQ(status, ExecutionStatus::kRunning);
  EXPECT_EQ(Snapshot(), before) << "no second audit record, nothing else";
  EXPECT_EQ(Audit(Target(id)).size(), 1u);
}

TEST_P(StoreConformance, RD7_CancelWhileRunningBeforeAnyEffectEndsCanceled) {
  DefineJob(WorkJob());
  const ExecutionId released = AdmitOne(MakeRequest("work", 1));
  const ExecutionId failed = AdmitOne(MakeRequest("work", 2));
  const std::vector<Lease> leases = ClaimN("default", 2);
  ASSERT_EQ(leases.size(), 2u);
  const Lease& lr = leases[0].id == released ? leases[0] : leases[1];
  const Lease& lf = leases[0].id == released ? leases[1] : leases[0];
  ASSERT_OK(store().RequestCancel(released, By("alice")));
  ASSERT_OK(store().RequestCancel(failed, By("alice")));
  Advance(kSecond);

  // The worker stops: it gives the execution back, or reports the stop as a
  // failure; either way the execution ends canceled.
  ASSERT_OK_AND_ASSIGN(FinishReply r1, store().Release(Ref(lr)));
  EXPECT_EQ(r1.status, ExecutionStatus::kCanceled);
  ASSERT_OK_AND_ASSIGN(FinishReply r2,
                       store().Fail(Ref(lf), FailureClass::kRetryable, "stopped: canceled"));
  EXPECT_EQ(r2.status, ExecutionStatus::kCanceled);
  for (ExecutionId id : {released, failed}) {
    SCOPED_TRACE("execution " + std::to_string(id.value));
    const Execution e = Get(id);
    EXPECT_EQ(e.status, ExecutionStatus::kCanceled);
    EXPECT_EQ(e.finished_at, Now());
    EXPECT_TRUE(e.worker.empty());
    EXPECT_EQ(e.lease_expires_at, 0);
    EXPECT_TRUE(Effects(id).empty());
  }
  Advance(3'600'000);
  EXPECT_TRUE(ClaimN("default", 10).empty());
  EXPECT_EQ(store().Heartbeat(Ref(lr), std::nullopt).status().code(), ErrorCode::kStale);
}

TEST_P(StoreConformance, RD7_CancelAfterTheNoticeEndsPartiallyCanceledListingIt) {
  DefineJob(WorkJob());
  const ExecutionId id = AdmitOne(MakeRequest("work", 1));
  const Lease lease = ClaimOne();
  ReserveAndCommit(lease, "notice", "msg-9");
  const Millis committed_at = Now();
  Advance(kSecond);
  ASSERT_OK_AND_ASSIGN(ExecutionStatus status, store().RequestCancel(id, By("alice")));
  ASSERT_EQ(status, ExecutionStatus::kRunning);
  EXPECT_EQ(Reserve(lease, "second-notice").answer, EffectAnswer::kCanceled);

  ASSERT_OK_AND_ASSIGN(FinishReply reply, store().Release(Ref(lease)));
  EXPECT_EQ(reply.status, ExecutionStatus::kPartiallyCanceled);
  const Execution e = Get(id);
  EXPECT_EQ(e.status, ExecutionStatus::kPartiallyCanceled);
  EXPECT_EQ(e.finished_at, Now());

  // C2: the escaped effect is listed with its time; cancellation does not
  // claim to undo it.
  std::vector<EffectRecord> committed;
  for (const EffectRecord& r : Effects(id)) {
    if (r.committed) committed.push_back(r);
  }
  ASSERT_EQ(committed.size(), 1u);
  EXPECT_EQ(committed[0].name, "notice");
  EXPECT_EQ(committed[0].detail, "msg-9");
  EXPECT_EQ(committed[0].committed_at, committed_at);
}

// C1: a handler that finishes after the cancel was requested never hides it.
// The script had reserved its notice, the cancel came, the script committed
// the notice and reported success before any heartbeat: the execution ends
// partially_canceled and the notice is listed as escaped; a success without
// any effect ends canceled. Neither publishes a result.
TEST_P(StoreConformance, C1_CompleteAfterTheCancelRequestEndsPartiallyCanceledOrCanceled) {
  DefineJob(WorkJob());
  const ExecutionId with_effect = AdmitOne(MakeRequest("work", 1));
  const ExecutionId without = AdmitOne(MakeRequest("work", 2));
  const std::vector<Lease> leases = ClaimN("default", 2);
  ASSERT_EQ(leases.size(), 2u);
  const Lease& le = leases[0].id == with_effect ? leases[0] : leases[1];
  const Lease& ln = leases[0].id == with_effect ? leases[1] : leases[0];
  ASSERT_EQ(Reserve(le, "notice").answer, EffectAnswer::kProceed);
  Advance(kSecond);
  ASSERT_OK_AND_ASSIGN(ExecutionStatus status, store().RequestCancel(with_effect, By("alice")));
  ASSERT_EQ(status, ExecutionStatus::kRunning);
  ASSERT_OK(store().RequestCancel(without, By("alice")));
  Advance(kSecond);
  ASSERT_OK(store().CommitEffect(Ref(le), "notice", "msg-3").status());
  const Millis committed_at = Now();
  Advance(kSecond);

  ASSERT_OK_AND_ASSIGN(FinishReply r1, store().Complete(Ref(le), R"({"sent":true})"));
  EXPECT_EQ(r1.status, ExecutionStatus::kPartiallyCanceled);
  ASSERT_OK_AND_ASSIGN(FinishReply r2, store().Complete(Ref(ln), R"({"sent":false})"));
  EXPECT_EQ(r2.status, ExecutionStatus::kCanceled);

  const Execution e = Get(with_effect);
  EXPECT_EQ(e.status, ExecutionStatus::kPartiallyCanceled);
  EXPECT_TRUE(e.cancel_requested);
  EXPECT_EQ(e.finished_at, Now());
  EXPECT_TRUE(e.result_json.empty()) << "a canceled execution publishes no result";
  EXPECT_NE(e.error.find("after the cancel was requested"), std::string::npos) << e.error;
  const std::vector<EffectRecord> effects = Effects(with_effect);
  ASSERT_EQ(effects.size(), 1u);
  EXPECT_TRUE(effects[0].committed);
  EXPECT_EQ(effects[0].committed_at, committed_at);
  EXPECT_EQ(Get(without).status, ExecutionStatus::kCanceled);
  EXPECT_TRUE(Get(without).result_json.empty());
  // The finish was the current claim's last word: a second one is stale.
  EXPECT_EQ(store().Complete(Ref(le), "{}").status().code(), ErrorCode::kStale);
}

TEST_P(StoreConformance, C1_CancelOfQueuedAfterAnEscapedEffectIsPartiallyCanceled) {
  DefineJob(WorkJob());
  const ExecutionId id = AdmitOne(MakeRequest("work", 1));
  const Lease lease = ClaimOne();
  ReserveAndCommit(lease, "notice", "msg-1");
  ASSERT_OK_AND_ASSIGN(FinishReply retry, store().Fail(Ref(lease), FailureClass::kRetryable, "x"));
  ASSERT_EQ(retry.status, ExecutionStatus::kQueued);

  ASSERT_OK_AND_ASSIGN(ExecutionStatus status, store().RequestCancel(id, By("alice")));
  EXPECT_EQ(status, ExecutionStatus::kPartiallyCanceled);
  EXPECT_EQ(Get(id).status, ExecutionStatus::kPartiallyCanceled);
  const std::vector<AuditRecord> audit = Audit(Target(id));
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_TRUE(MentionsStatus(audit[0].after_json, ExecutionStatus::kPartiallyCanceled))
      << audit[0].after_json;
}

TEST_P(StoreConformance, C1_CancelOfFailedOrQuarantinedEndsCanceled) {
  JobDefinition job = WorkJob();
  job.retry.max_attempts = 1;
  DefineJob(job);
  const ExecutionId failed = AdmitOne(MakeRequest("work", 1));
  ASSERT_OK_AND_ASSIGN(FinishReply f1,
                       store().Fail(Ref(ClaimOne()), FailureClass::kRetryable, "x"));
  ASSERT_EQ(f1.status, ExecutionStatus::kFailed);
  const ExecutionId quarantined = AdmitOne(MakeRequest("work", 2));
  ASSERT_OK_AND_ASSIGN(FinishReply f2,
                       store().Fail(Ref(ClaimOne()), FailureClass::kPermanent, "x"));
  ASSERT_EQ(f2.status, ExecutionStatus::kQuarantined);
  const ExecutionId escaped = AdmitOne(MakeRequest("work", 3));
  const Lease lease = ClaimOne();
  ReserveAndCommit(lease, "notice", "msg-1");
  ASSERT_OK_AND_ASSIGN(FinishReply f3, store().Fail(Ref(lease), FailureClass::kAmbiguous, "x"));
  ASSERT_EQ(f3.status, ExecutionStatus::kQuarantined);
  Advance(kSecond);

  const struct {
    ExecutionId id;
    ExecutionStatus from;
    ExecutionStatus to;
  } cases[] = {
      {failed, ExecutionStatus::kFailed, ExecutionStatus::kCanceled},
      {quarantined, ExecutionStatus::kQuarantined, ExecutionStatus::kCanceled},
      {escaped, ExecutionStatus::kQuarantined, ExecutionStatus::kPartiallyCanceled},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE("execution " + std::to_string(c.id.value));
    ASSERT_OK_AND_ASSIGN(ExecutionStatus status, store().RequestCancel(c.id, By("alice")));
    EXPECT_EQ(status, c.to);
    const Execution e = Get(c.id);
    EXPECT_EQ(e.status, c.to);
    EXPECT_EQ(e.finished_at, Now());
    const std::vector<AuditRecord> audit = Audit(Target(c.id));
    ASSERT_EQ(audit.size(), 1u);
    EXPECT_TRUE(MentionsStatus(audit[0].before_json, c.from)) << audit[0].before_json;
    EXPECT_TRUE(MentionsStatus(audit[0].after_json, c.to)) << audit[0].after_json;
  }
  const std::string before = Snapshot();
  EXPECT_EQ(store().Replay(MakeReplay(failed, "alice", "too late")).status().code(),
            ErrorCode::kConflict)
      << "a canceled execution is not replayable";
  EXPECT_EQ(Snapshot(), before);
}

TEST_P(StoreConformance, C1_CancelOfFinishedIsConflictAndChangesNothing) {
  DefineJob(WorkJob());
  const ExecutionId succeeded = AdmitOne(MakeRequest("work", 1));
  ASSERT_OK(store().Complete(Ref(ClaimOne()), "{}").status());
  const ExecutionId canceled = AdmitOne(MakeRequest("work", 2));
  ASSERT_OK(store().RequestCancel(canceled, By("alice")));
  const ExecutionId partial = AdmitOne(MakeRequest("work", 3));
  const Lease lease = ClaimOne();
  ReserveAndCommit(lease, "notice", "msg-1");
  ASSERT_OK(store().RequestCancel(partial, By("alice")));
  ASSERT_OK(store().Release(Ref(lease)));
  ASSERT_EQ(Get(partial).status, ExecutionStatus::kPartiallyCanceled);
  Advance(kSecond);

  const std::string before = Snapshot();
  for (ExecutionId id : {succeeded, canceled, partial}) {
    Result<ExecutionStatus> r = store().RequestCancel(id, By("bob"));
    EXPECT_EQ(r.status().code(), ErrorCode::kConflict)
        << "execution " << id.value << " is " << ToString(Get(id).status);
  }
  EXPECT_EQ(Snapshot(), before) << "an illegal cancel writes no audit record";
}

TEST_P(StoreConformance, C1_SweeperFinishesACancelWhoseWorkerDied) {
  DefineJob(WorkJob());
  const ExecutionId clean = AdmitOne(MakeRequest("work", 1));
  const ExecutionId escaped = AdmitOne(MakeRequest("work", 2));
  const ExecutionId untouched = AdmitOne(MakeRequest("work", 3));
  const std::vector<Lease> leases = ClaimN("default", 3);
  ASSERT_EQ(leases.size(), 3u);
  for (const Lease& l : leases) {
    if (l.id == escaped) ReserveAndCommit(l, "notice", "msg-1");
  }
  ASSERT_OK(store().RequestCancel(clean, By("alice")));
  ASSERT_OK(store().RequestCancel(escaped, By("alice")));
  // The workers die without learning of the cancellation.
  Advance(kCaseLeaseMs + 1);

  ASSERT_OK_AND_ASSIGN(SweepReport report, store().SweepExpired(100));
  EXPECT_EQ(report.recovered, 3);
  EXPECT_EQ(report.canceled, 2);
  EXPECT_EQ(report.requeued, 1);
  EXPECT_EQ(report.failed, 0);
  EXPECT_EQ(report.quarantined, 0);
  EXPECT_EQ(Get(clean).status, ExecutionStatus::kCanceled);
  EXPECT_EQ(Get(clean).finished_at, Now());
  EXPECT_EQ(Get(escaped).status, ExecutionStatus::kPartiallyCanceled);
  EXPECT_EQ(Get(escaped).finished_at, Now());
  EXPECT_EQ(Get(untouched).status, ExecutionStatus::kQueued);
}

TEST_P(StoreConformance, C1_BadCancelRequestsChangeNothing) {
  DefineJob(WorkJob());
  const ExecutionId queued = AdmitOne(MakeRequest("work", 1));
  const ExecutionId running = AdmitOne(MakeRequest("work", 2));
  ClaimOne();
  const std::string before = Snapshot();

  EXPECT_EQ(store().RequestCancel(ExecutionId(running.value + 1000), By("alice")).status().code(),
            ErrorCode::kNotFound);
  EXPECT_EQ(store().RequestCancel(queued, By("")).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(store().RequestCancel(running, By("", "no actor")).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(Snapshot(), before);
}

// --- Q1: failure classes ---

TEST_P(StoreConformance, Q1_UnsupportedSchemaRetriesUpToItsBoundThenQuarantines) {
  DefineJob(WorkJob());  // default: 3 attempts for an unsupported schema, 1 for other permanent
  const ExecutionId id = AdmitOne(MakeRequest("work", 1));
  EXPECT_EQ(Get(id).retry.max_unsupported_schema_attempts, 3);

  const Millis delays[] = {5'000, 10'000};
  for (int attempt = 1; attempt <= 2; ++attempt) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    ASSERT_OK_AND_ASSIGN(FinishReply reply, FailUnsupportedSchema(store(), ClaimOne()));
    EXPECT_EQ(reply.status, ExecutionStatus::kQueued)
        << "a rolling deploy may bring a worker that accepts it";
    EXPECT_EQ(reply.run_at, Now() + delays[attempt - 1]);
    const Execution e = Get(id);
    EXPECT_EQ(e.status, ExecutionStatus::kQueued);
    EXPECT_EQ(e.failure_class, FailureClass::kPermanent);
    EXPECT_EQ(e.permanent_failures, attempt);
    EXPECT_EQ(e.error, "payload schema_version 9 is not accepted");
    Advance(delays[attempt - 1]);
  }
  ASSERT_OK_AND_ASSIGN(FinishReply last, FailUnsupportedSchema(store(), ClaimOne()));
  EXPECT_EQ(last.status, ExecutionStatus::kQuarantined);
  const Execution e = Get(id);
  EXPECT_EQ(e.status, ExecutionStatus::kQuarantined);
  EXPECT_EQ(e.failure_class, FailureClass::kPermanent);
  EXPECT_EQ(e.permanent_failures, 3);
  EXPECT_EQ(e.attempt, 3);
  EXPECT_EQ(e.finished_at, Now());

  // The same job's plain permanent failure keeps its own bound: at once.
  const ExecutionId plain = AdmitOne(MakeRequest("work", 2));
  ASSERT_OK_AND_ASSIGN(FinishReply reply,
                       store().Fail(Ref(ClaimOne()), FailureClass::kPermanent, "bad input"));
  EXPECT_EQ(reply.status, ExecutionStatus::kQuarantined);
  EXPECT_EQ(Get(plain).failure_class, FailureClass::kPermanent);
}

TEST_P(StoreConformance, Q1_UnsupportedSchemaBoundIsTheJobsAtAdmission) {
  JobDefinition job = WorkJob();
  job.retry.max_unsupported_schema_attempts = 2;
  job.retry.max_permanent_attempts = 5;
  DefineJob(job);
  const ExecutionId id = AdmitOne(MakeRequest("work", 1));
  EXPECT_EQ(Get(id).retry.max_unsupported_schema_attempts, 2);
  job.retry.max_unsupported_schema_attempts = 9;  // a later edit does not apply to it
  DefineJob(job);

  ASSERT_OK_AND_ASSIGN(FinishReply first, FailUnsupportedSchema(store(), ClaimOne()));
  EXPECT_EQ(first.status, ExecutionStatus::kQueued);
  Advance(kFirstBackoffMs);
  ASSERT_OK_AND_ASSIGN(FinishReply second, FailUnsupportedSchema(store(), ClaimOne()));
  EXPECT_EQ(second.status, ExecutionStatus::kQuarantined);
  EXPECT_EQ(Get(id).failure_class, FailureClass::kPermanent);
}

// --- R1 / R2: replay ---

TEST_P(StoreConformance, R1_ReplayOfQuarantinedOrFailedQueuesTheSameExecution) {
  JobDefinition job = WorkJob();
  job.retry.max_attempts = 2;
  DefineJob(job);
  const ExecutionId quarantined = AdmitOne(MakeRequest("work", 1, "acme"));
  const Lease first = ClaimOne();
  ASSERT_OK(store().Fail(Ref(first), FailureClass::kPermanent, "bad input"));
  const ExecutionId failed = AdmitOne(MakeRequest("work", 2, "globex"));
  ASSERT_OK(store().Fail(Ref(ClaimOne()), FailureClass::kRetryable, "503"));
  Advance(kFirstBackoffMs);
  ASSERT_OK(store().Fail(Ref(ClaimOne()), FailureClass::kRetryable, "503"));
  ASSERT_EQ(Get(failed).status, ExecutionStatus::kFailed);
  ASSERT_EQ(Get(failed).attempt, 2);
  Advance(kSecond);
  const int executions = CountExecutions();

  const struct {
    ExecutionId id;
    const char* tenant;
    ExecutionStatus from;
  } cases[] = {{quarantined, "acme", ExecutionStatus::kQuarantined},
               {failed, "globex", ExecutionStatus::kFailed}};
  for (const auto& c : cases) {
    SCOPED_TRACE("execution " + std::to_string(c.id.value));
    const Execution old = Get(c.id);
    ASSERT_OK_AND_ASSIGN(ReplayReply reply,
                         store().Replay(MakeReplay(c.id, "alice", "input fixed upstream")));
    EXPECT_EQ(reply.outcome, ReplayOutcome::kReplayed);
    EXPECT_EQ(reply.status, ExecutionStatus::kQueued);
    const Execution e = Get(c.id);
    EXPECT_EQ(e.status, ExecutionStatus::kQueued);
    EXPECT_EQ(e.attempt, 0) << "attempts start over";
    EXPECT_EQ(e.permanent_failures, 0);
    EXPECT_EQ(e.ambiguous_failures, 0);
    EXPECT_EQ(e.consecutive_lease_expiries, 0);
    EXPECT_LE(e.run_at, Now()) << "due at once";
    EXPECT_EQ(e.finished_at, 0) << "queued again: not finished";
    EXPECT_FALSE(e.cancel_requested);
    EXPECT_TRUE(e.worker.empty());
    EXPECT_EQ(e.payload_json, old.payload_json);
    EXPECT_EQ(e.fingerprint, old.fingerprint);

    const std::vector<AuditRecord> audit = Audit(Target(c.id));
    ASSERT_EQ(audit.size(), 1u);
    EXPECT_EQ(audit[0].actor, "alice");
    EXPECT_EQ(audit[0].reason, "input fixed upstream");
    EXPECT_EQ(audit[0].tenant, c.tenant);
    EXPECT_EQ(audit[0].at, Now());
    EXPECT_TRUE(StartsWith(audit[0].action, "execution.replay")) << audit[0].action;
    EXPECT_TRUE(MentionsStatus(audit[0].before_json, c.from)) << audit[0].before_json;
    EXPECT_TRUE(MentionsStatus(audit[0].after_json, ExecutionStatus::kQueued))
        << audit[0].after_json;
  }
  EXPECT_EQ(CountExecutions(), executions) << "the same executions, no new ones";

  const std::vector<Lease> leases = ClaimN("default", 10);
  ASSERT_EQ(leases.size(), 2u);
  for (const Lease& l : leases) {
    EXPECT_EQ(l.attempt, 1);
    if (l.id == quarantined) {
      EXPECT_GT(l.version, first.version);
    }
  }
}

// The trigger tells how the current attempt came (product.md §1, seed 001's
// triggerType): the admission's trigger first; `retry` once a failed or
// expired attempt is queued again; `replay` after an operator replay. A
// release (shutdown) or a prefetched lease given back is no new attempt.
TEST_P(StoreConformance, R1_TriggerBecomesRetryThenReplay) {
  JobDefinition job = WorkJob();
  job.retry.max_attempts = 3;
  DefineJob(job);
  AdmitRequest request = MakeRequest("work", 1);
  request.trigger = Trigger::kScheduled;
  const ExecutionId id = AdmitOne(request);
  EXPECT_EQ(Get(id).trigger, Trigger::kScheduled);

  ASSERT_OK(store().Release(Ref(ClaimOne())).status());
  EXPECT_EQ(Get(id).trigger, Trigger::kScheduled) << "a release is no retry";

  ASSERT_OK(store().Fail(Ref(ClaimOne()), FailureClass::kRetryable, "503"));
  EXPECT_EQ(Get(id).status, ExecutionStatus::kQueued);
  EXPECT_EQ(Get(id).trigger, Trigger::kRetry);
  Advance(kFirstBackoffMs);

  // An expired lease whose handler ran is retried too.
  const Lease second = ClaimOne();
  EXPECT_EQ(Get(id).trigger, Trigger::kRetry) << "a claim keeps the trigger";
  Advance(kCaseLeaseMs + 1);
  ASSERT_OK(store().SweepExpired(100).status());
  EXPECT_EQ(Get(id).status, ExecutionStatus::kQueued);
  EXPECT_EQ(Get(id).attempt, 2);
  EXPECT_EQ(Get(id).trigger, Trigger::kRetry);
  Advance(60 * kSecond);

  ASSERT_OK(store().Fail(Ref(ClaimOne()), FailureClass::kRetryable, "503"));
  ASSERT_EQ(Get(id).status, ExecutionStatus::kFailed);
  EXPECT_EQ(Get(id).trigger, Trigger::kRetry) << "ending keeps the last attempt's trigger";
  (void)second;

  ASSERT_OK(store().Replay(MakeReplay(id, "alice", "fixed")).status());
  EXPECT_EQ(Get(id).trigger, Trigger::kReplay);
  ASSERT_OK(store().Complete(Ref(ClaimOne()), "{}").status());
  EXPECT_EQ(Get(id).status, ExecutionStatus::kSucceeded);
  EXPECT_EQ(Get(id).trigger, Trigger::kReplay);

  // The search finds executions by their current trigger.
  ExecutionFilter by_replay;
  by_replay.triggers = {Trigger::kReplay};
  ASSERT_OK_AND_ASSIGN(ExecutionPage page, store().ListExecutions(by_replay));
  ASSERT_EQ(page.items.size(), 1u);
  EXPECT_EQ(page.items[0].id, id);
}

// Lifecycle events (issue 14 item 9): after each commit, the observer gets one
// event per status change worth a log line, with the execution's job, tenant,
// queue and the attempt that ended; claims, releases and refused or stale
// calls report nothing.
TEST_P(StoreConformance, LifecycleEventsFollowCommittedStatusChanges) {
  std::vector<LifecycleEvent> seen;
  store().SetLifecycleObserver([&seen](std::vector<LifecycleEvent>&& events) {
    for (LifecycleEvent& e : events) seen.push_back(std::move(e));
  });
  JobDefinition job = WorkJob();
  job.retry.max_attempts = 2;
  DefineJob(job);
  const ExecutionId id = AdmitOne(MakeRequest("work", 1));
  const ExecutionId other = AdmitOne(MakeRequest("work", 2));
  EXPECT_TRUE(seen.empty()) << "admissions are the engine's events";

  const Lease first = ClaimOne();
  ASSERT_EQ(first.id, id);
  ASSERT_OK(store().Release(Ref(first)).status());
  EXPECT_TRUE(seen.empty()) << "claims and releases are no events";

  const Millis started = Now();
  ASSERT_OK(store().Fail(Ref(ClaimOne()), FailureClass::kRetryable, "503"));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].kind, LifecycleKind::kRetried);
  EXPECT_EQ(seen[0].id, id);
  EXPECT_EQ(seen[0].job.value, "work");
  EXPECT_EQ(seen[0].queue, "default");
  EXPECT_EQ(seen[0].status, ExecutionStatus::kQueued);
  EXPECT_EQ(seen[0].attempt, 1);
  EXPECT_EQ(seen[0].failure_class, FailureClass::kRetryable);
  EXPECT_EQ(seen[0].started_at, started);
  EXPECT_EQ(seen[0].worker, "w1");
  EXPECT_EQ(seen[0].run_at, Now() + kFirstBackoffMs);

  // The other execution's lease expires: an orphan, queued again.
  const Lease other_lease = ClaimOne();
  ASSERT_EQ(other_lease.id, other);
  Advance(kCaseLeaseMs + 1);
  ASSERT_OK(store().SweepExpired(100).status());
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].kind, LifecycleKind::kOrphaned);
  EXPECT_EQ(seen[1].id, other);
  EXPECT_EQ(seen[1].failure_class, FailureClass::kLeaseExpired);

  // A stale finish changes nothing and reports nothing.
  EXPECT_FALSE(store().Complete(Ref(other_lease), "{}").ok());
  EXPECT_EQ(seen.size(), 2u);

  // The last attempt fails: one terminal event.
  Advance(kFirstBackoffMs);
  std::vector<Lease> leases = ClaimN("default", 10);
  ASSERT_EQ(leases.size(), 2u);
  for (const Lease& l : leases) {
    if (l.id == id) ASSERT_OK(store().Fail(Ref(l), FailureClass::kRetryable, "503"));
    if (l.id == other) ASSERT_OK(store().Complete(Ref(l), "{}").status());
  }
  ASSERT_EQ(seen.size(), 4u);
  for (std::size_t i = 2; i < 4; ++i) {
    if (seen[i].id == id) {
      EXPECT_EQ(seen[i].kind, LifecycleKind::kFailed);
      EXPECT_EQ(seen[i].status, ExecutionStatus::kFailed);
      EXPECT_EQ(seen[i].attempt, 2);
    } else {
      EXPECT_EQ(seen[i].kind, LifecycleKind::kCompleted);
      EXPECT_EQ(seen[i].status, ExecutionStatus::kSucceeded);
      EXPECT_EQ(seen[i].failure_class, FailureClass::kNone);
    }
  }

  // An operator's replay, then a cancel of the queued execution.
  ASSERT_OK(store().Replay(MakeReplay(id, "alice", "fixed")).status());
  ASSERT_EQ(seen.size(), 5u);
  EXPECT_EQ(seen[4].kind, LifecycleKind::kReplayed);
  EXPECT_EQ(seen[4].attempt, 0) << "no attempt ended";
  ASSERT_OK(store().RequestCancel(id, OperatorAction{"alice", "not needed"}).status());
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_EQ(seen[5].kind, LifecycleKind::kAborted);
  EXPECT_EQ(seen[5].status, ExecutionStatus::kCanceled);
  EXPECT_EQ(seen[5].started_at, 0) << "it was queued";
  store().SetLifecycleObserver(nullptr);
}

// Store::SetWorkPublisher (A3, D3): each commit that made work due tells the
// publisher each of its queues once (the engine wakes the workers of that
// queue and, through the transport, other nodes); claims, finishes that
// requeue nothing, cancels and a parked lane admission do not.
TEST_P(StoreConformance, WorkPublisherHearsOfCommitsThatMadeWorkDue) {
  std::vector<std::string> heard;
  store().SetWorkPublisher([&heard](const std::string& queue) { heard.push_back(queue); });
  JobDefinition job = WorkJob();
  job.retry.max_attempts = 2;
  DefineJob(job);
  const ExecutionId id = AdmitOne(MakeRequest("work", 1));
  ASSERT_EQ(heard, std::vector<std::string>{"default"});
  const ExecutionId other = AdmitOne(MakeRequest("work", 2));
  EXPECT_EQ(heard.size(), 2u);

  const Lease first = ClaimOne();
  ASSERT_EQ(first.id, id);
  EXPECT_EQ(heard.size(), 2u) << "a claim makes nothing due";
  ASSERT_OK(store().Fail(Ref(first), FailureClass::kRetryable, "503"));
  EXPECT_EQ(heard.size(), 3u) << "a retry is queued again";
  const Lease second = ClaimOne();
  ASSERT_EQ(second.id, other);
  ASSERT_OK(store().Complete(Ref(second), "{}").status());
  EXPECT_EQ(heard.size(), 3u) << "a success makes nothing due";
  ASSERT_OK(store().RequestCancel(id, OperatorAction{"alice", "not needed"}).status());
  EXPECT_EQ(heard.size(), 3u) << "a cancel makes nothing due";

  // A lane: the second admission is parked (nothing due), and becomes due
  // when the first ends.
  AdmitRequest a = MakeRequest("work", 3);
  a.lane_key = "orders-7";
  AdmitRequest b = MakeRequest("work", 4);
  b.lane_key = "orders-7";
  AdmitOne(a);
  EXPECT_EQ(heard.size(), 4u);
  AdmitOne(b);
  EXPECT_EQ(heard.size(), 4u) << "a parked admission makes nothing due";
  ASSERT_OK(store().Complete(Ref(ClaimOne()), "{}").status());
  EXPECT_EQ(heard.size(), 5u) << "the lane's next execution became due";
  for (const std::string& q : heard) EXPECT_EQ(q, "default");

  // One commit that makes work due in two queues names each once, so that
  // the workers of each hear of it (an engine wakes only the pool that
  // serves the queue).
  DefineJob("elsewhere", "elsewhere");
  heard.clear();
  std::vector<AdmitRequest> mixed = {MakeRequest("work", 5), MakeRequest("elsewhere", 6),
                                     MakeRequest("work", 7)};
  ASSERT_OK_AND_ASSIGN(std::vector<AdmitResult> admitted, store().AdmitBatch(mixed));
  ASSERT_EQ(admitted.size(), 3u);
  EXPECT_EQ(heard, (std::vector<std::string>{"default", "elsewhere"}));
  // Nothing stays due (the lane's second member, these three).
  for (const char* queue : {"default", "elsewhere"}) {
    for (const Lease& lease : ClaimN(queue, 10)) {
      ASSERT_OK(store().Complete(Ref(lease), "{}").status());
    }
  }

  // A lane shared by two jobs of different queues: the execution its end
  // makes due is named by its own queue, not by the one that ended.
  AdmitRequest head = MakeRequest("work", 8);
  head.lane_key = "orders-8";
  AdmitRequest next = MakeRequest("elsewhere", 9);
  next.lane_key = "orders-8";
  AdmitOne(head);
  AdmitOne(next);
  heard.clear();
  ASSERT_OK(store().Complete(Ref(ClaimOne()), "{}").status());
  EXPECT_EQ(heard, std::vector<std::string>{"elsewhere"}) << "the lane's next execution's queue";
  store().SetWorkPublisher(nullptr);
}

TEST_P(StoreConformance, R1_ReplayOfOtherStatusesIsConflictAndChangesNothing) {
  DefineJob(WorkJob());
  const ExecutionId succeeded = AdmitOne(MakeRequest("work", 1));
  ASSERT_OK(store().Complete(Ref(ClaimOne()), "{}").status());
  const ExecutionId running = AdmitOne(MakeRequest("work", 2));
  ClaimOne();
  const ExecutionId canceled = AdmitOne(MakeRequest("work", 3));
  ASSERT_OK(store().RequestCancel(canceled, By("alice")));
  AdmitRequest later = MakeRequest("work", 4);
  later.run_at = Now() + 60'000;
  const ExecutionId queued = AdmitOne(later);
  Advance(kSecond);

  const std::string before = Snapshot();
  for (ExecutionId id : {succeeded, running, canceled, queued}) {
    Result<ReplayReply> r = store().Replay(MakeReplay(id, "alice", "try again"));
    EXPECT_EQ(r.status().code(), ErrorCode::kConflict)
        << "execution " << id.value << " is " << ToString(Get(id).status);
    Result<ReplayReply> p =
        store().Replay(MakeReplay(id, "alice", "try again", AmbiguousResolution::kKeep, true));
    EXPECT_EQ(p.status().code(), ErrorCode::kConflict)
        << "a pending replay of execution " << id.value << " is illegal too";
  }
  EXPECT_EQ(
      store().Replay(MakeReplay(ExecutionId(queued.value + 1000), "alice", "x")).status().code(),
      ErrorCode::kNotFound);
  EXPECT_EQ(Snapshot(), before);
}

TEST_P(StoreConformance, R1_ReplayNeedsAnActorAndAReason) {
  DefineJob(WorkJob());
  const ExecutionId id = AdmitOne(MakeRequest("work", 1));
  ASSERT_OK(store().Fail(Ref(ClaimOne()), FailureClass::kPermanent, "bad input"));
  const std::string before = Snapshot();

  EXPECT_EQ(store().Replay(MakeReplay(id, "", "why")).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(store().Replay(MakeReplay(id, "alice", "")).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(
      store().Replay(MakeReplay(id, "alice", "", AmbiguousResolution::kKeep, true)).status().code(),
      ErrorCode::kInvalidArgument);
  EXPECT_EQ(Snapshot(), before);
  EXPECT_EQ(store().ApproveReplay(id, By("zed")).status().code(), ErrorCode::kNotFound)
      << "nothing was recorded as pending";
}

TEST_P(StoreConformance, RD5_ReplayingTwiceLeavesOneEffect) {
  DefineJob(WorkJob());
  const ExecutionId id = AdmitOne(MakeRequest("work", 1));
  const Lease first = ClaimOne();
  ReserveAndCommit(first, "notice", "msg-1");
  ASSERT_OK(store().Fail(Ref(first), FailureClass::kPermanent, "sink said 422 afterwards"));

  ASSERT_OK(store().Replay(MakeReplay(id, "alice", "first replay")));
  Advance(kSecond);
  const Lease second = ClaimOne();
  ASSERT_EQ(second.id, id);
  const EffectReply r2 = Reserve(second, "notice");
  EXPECT_EQ(r2.answer, EffectAnswer::kAlreadyDone);
  EXPECT_EQ(r2.detail, "msg-1");
  ASSERT_OK_AND_ASSIGN(FinishReply again,
                       store().Fail(Ref(second), FailureClass::kPermanent, "still 422"));
  ASSERT_EQ(again.status, ExecutionStatus::kQuarantined);

  ASSERT_OK(store().Replay(MakeReplay(id, "bob", "second replay")));
  Advance(kSecond);
  const Lease third = ClaimOne();
  ASSERT_EQ(third.id, id);
  const EffectReply r3 = Reserve(third, "notice");
  EXPECT_EQ(r3.answer, EffectAnswer::kAlreadyDone);
  EXPECT_EQ(r3.detail, "msg-1");
  ASSERT_OK(store().Complete(Ref(third), "{}"));

  const std::vector<EffectRecord> effects = Effects(id);
  ASSERT_EQ(effects.size(), 1u) << "one effect per key";
  EXPECT_TRUE(effects[0].committed);
  EXPECT_EQ(effects[0].detail, "msg-1");
  EXPECT_EQ(effects[0].reserved_by, first.version);

  const std::vector<AuditRecord> replays = WithAction(Audit(Target(id)), "execution.replay");
  ASSERT_EQ(replays.size(), 2u) << "the audit has both replays";
  EXPECT_EQ(replays[0].actor, "bob") << "newest first";
  EXPECT_EQ(replays[0].reason, "second replay");
  EXPECT_EQ(replays[1].actor, "alice");
  EXPECT_EQ(replays[1].reason, "first replay");
  EXPECT_GT(replays[0].id, replays[1].id);
}

// --- R1: four-eyes ---

TEST_P(StoreConformance, R1_FourEyesReplayWaitsForASecondOperator) {
  DefineJob(WorkJob());
  const ExecutionId id = AdmitOne(MakeRequest("work", 1, "acme"));
  ASSERT_OK(store().Fail(Ref(ClaimOne()), FailureClass::kPermanent, "bad input"));
  const std::string quarantined = Describe(Get(id));
  Advance(kSecond);

  ASSERT_OK_AND_ASSIGN(ReplayReply pending,
                       store().Replay(MakeReplay(id, "alice", "fixed the mapping",
                                                 AmbiguousResolution::kKeep, true)));
  EXPECT_EQ(pending.outcome, ReplayOutcome::kPendingApproval);
  EXPECT_EQ(pending.status, ExecutionStatus::kQuarantined);
  EXPECT_EQ(Describe(Get(id)), quarantined) << "only a pending replay is recorded";
  EXPECT_TRUE(ClaimN("default", 10).empty());
  std::vector<AuditRecord> audit = Audit(Target(id));
  ASSERT_EQ(audit.size(), 1u) << "the request is audited";
  EXPECT_EQ(audit[0].actor, "alice");
  EXPECT_EQ(audit[0].reason, "fixed the mapping");
  EXPECT_EQ(audit[0].tenant, "acme");

  const std::string before = Snapshot();
  EXPECT_EQ(store().Replay(MakeReplay(id, "bob", "me too")).status().code(), ErrorCode::kConflict)
      << "a pending replay cannot be bypassed";
  EXPECT_EQ(store()
                .Replay(MakeReplay(id, "bob", "me too", AmbiguousResolution::kKeep, true))
                .status()
                .code(),
            ErrorCode::kConflict);
  EXPECT_EQ(store().ApproveReplay(id, By("alice")).status().code(), ErrorCode::kConflict)
      << "the requester cannot approve";
  EXPECT_EQ(Snapshot(), before);

  Advance(kSecond);
  ASSERT_OK_AND_ASSIGN(ReplayReply approved, store().ApproveReplay(id, By("bob", "checked")));
  EXPECT_EQ(approved.outcome, ReplayOutcome::kReplayed);
  EXPECT_EQ(approved.status, ExecutionStatus::kQueued);
  const Execution e = Get(id);
  EXPECT_EQ(e.status, ExecutionStatus::kQueued);
  EXPECT_EQ(e.attempt, 0);

  audit = Audit(Target(id));
  ASSERT_EQ(audit.size(), 2u) << "request and approval";
  EXPECT_EQ(audit[0].actor, "bob");
  EXPECT_EQ(audit[0].at, Now());
  EXPECT_TRUE(StartsWith(audit[0].action, "execution.replay")) << audit[0].action;
  EXPECT_TRUE(MentionsStatus(audit[0].after_json, ExecutionStatus::kQueued)) << audit[0].after_json;
  EXPECT_EQ(audit[1].actor, "alice");
  EXPECT_TRUE(StartsWith(audit[1].action, "execution.replay")) << audit[1].action;

  EXPECT_EQ(store().ApproveReplay(id, By("zed")).status().code(), ErrorCode::kNotFound)
      << "nothing is pending any more";
  const Lease lease = ClaimOne();
  EXPECT_EQ(lease.id, id);
}

TEST_P(StoreConformance, R1_ApproveWithNothingPendingIsNotFound) {
  DefineJob(WorkJob());
  const ExecutionId id = AdmitOne(MakeRequest("work", 1));
  ASSERT_OK(store().Fail(Ref(ClaimOne()), FailureClass::kPermanent, "bad input"));
  const std::string before = Snapshot();
  EXPECT_EQ(store().ApproveReplay(id, By("zed")).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(store().ApproveReplay(ExecutionId(id.value + 1000), By("zed")).status().code(),
            ErrorCode::kNotFound);
  EXPECT_EQ(Snapshot(), before);
  EXPECT_EQ(Get(id).status, ExecutionStatus::kQuarantined);
}

// --- R1 / E3: what a replay assumes about unconfirmed reservations ---

TEST_P(StoreConformance, R1_ReplayResolvesUnconfirmedEffectsAsTheOperatorSays) {
  DefineJob(WorkJob());
  const struct {
    AmbiguousResolution resolution;
    bool four_eyes;
    EffectAnswer answer;
    const char* name;
  } cases[] = {
      {AmbiguousResolution::kKeep, false, EffectAnswer::kAmbiguous, "keep"},
      {AmbiguousResolution::kAssumeDone, false, EffectAnswer::kAlreadyDone, "assume done"},
      {AmbiguousResolution::kAssumeNotDone, false, EffectAnswer::kProceed, "assume not done"},
      {AmbiguousResolution::kAssumeNotDone, true, EffectAnswer::kProceed,
       "assume not done, approved"},
  };
  int n = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const ExecutionId id = AdmitOne(MakeRequest("work", ++n));
    const Lease first = ClaimOne();
    ASSERT_EQ(first.id, id);
    ReserveAndCommit(first, "receipt", "rcpt-1");
    ASSERT_EQ(Reserve(first, "charge").answer, EffectAnswer::kProceed);
    ASSERT_OK_AND_ASSIGN(FinishReply q, store().Fail(Ref(first), FailureClass::kAmbiguous,
                                                     "sink timed out during the charge"));
    ASSERT_EQ(q.status, ExecutionStatus::kQuarantined);
    Advance(kSecond);

    if (c.four_eyes) {
      ASSERT_OK_AND_ASSIGN(ReplayReply p, store().Replay(MakeReplay(id, "carol", "checked the sink",
                                                                    c.resolution, true)));
      ASSERT_EQ(p.outcome, ReplayOutcome::kPendingApproval);
      ASSERT_OK(store().ApproveReplay(id, By("dave")));
    } else {
      ASSERT_OK(store().Replay(MakeReplay(id, "carol", "checked the sink", c.resolution)));
    }
    const Millis replayed_at = Now();
    ASSERT_EQ(Get(id).status, ExecutionStatus::kQueued);
    for (const EffectRecord& r : Effects(id)) {
      if (r.name == "receipt") {
        EXPECT_TRUE(r.committed) << "a committed effect is never touched";
        EXPECT_EQ(r.detail, "rcpt-1");
      }
      if (r.name == "charge" && c.resolution == AmbiguousResolution::kAssumeDone) {
        EXPECT_TRUE(r.committed);
        EXPECT_EQ(r.committed_at, replayed_at);
      }
      if (r.name == "charge" && c.resolution != AmbiguousResolution::kAssumeDone) {
        EXPECT_FALSE(r.committed);
        EXPECT_NE(c.resolution, AmbiguousResolution::kAssumeNotDone)
            << "the reservation is dropped";
      }
    }

    Advance(kSecond);
    const Lease second = ClaimOne();
    ASSERT_EQ(second.id, id);
    const EffectReply charge = Reserve(second, "charge");
    EXPECT_EQ(charge.answer, c.answer);
    if (c.answer == EffectAnswer::kAlreadyDone) {
      EXPECT_NE(charge.detail.find("carol"), std::string::npos)
          << "the detail names who assumed it: " << charge.detail;
      EXPECT_EQ(charge.committed_at, replayed_at);
    }
    const EffectReply receipt = Reserve(second, "receipt");
    EXPECT_EQ(receipt.answer, EffectAnswer::kAlreadyDone);
    EXPECT_EQ(receipt.detail, "rcpt-1");
    ASSERT_OK(store().Complete(Ref(second), "{}"));
  }
}

}  // namespace taskengine

namespace taskengine {

// C1: an effect reserved and never confirmed may have escaped; a cancel then
// ends partially_canceled and the reservation is listed, not hidden.
TEST_P(StoreConformance, C1_CancelWithAnUnconfirmedEffectIsPartiallyCanceled) {
  DefineJob("render");
  ExecutionId id = AdmitOne(MakeRequest("render", 1));
  Lease lease = ClaimOne();
  EXPECT_EQ(Reserve(lease, "notice").answer, EffectAnswer::kProceed);
  ASSERT_OK(store().RequestCancel(id, OperatorAction{"ops", "stop"}));
  ASSERT_OK(store().Release({lease.id, lease.version}));
  EXPECT_EQ(Get(id).status, ExecutionStatus::kPartiallyCanceled);
  std::vector<EffectRecord> effects = Effects(id);
  ASSERT_EQ(effects.size(), 1u);
  EXPECT_FALSE(effects[0].committed);
}

}  // namespace taskengine
