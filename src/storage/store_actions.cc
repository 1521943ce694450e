#include "storage/store_actions.h"

namespace taskengine::storage_internal {
namespace {

// Performs a replay decided legal: resolves unconfirmed effects as told,
// requeues through the state machine, and audits it.
Result<ExecutionStatus> DoReplay(ActionTx& tx, const StateRow& row, Millis now,
                                 AmbiguousResolution ambiguous, const std::string& actor,
                                 const std::string& reason, const std::string& action) {
  Event e;
  e.kind = EventKind::kReplay;
  e.now = now;
  TE_ASSIGN_OR_RETURN(Transition t, Decide(row.state, e));
  if (ambiguous == AmbiguousResolution::kAssumeDone) {
    TE_RETURN_IF_ERROR(tx.AssumeEffectsDone(row.id, now, AssumedDoneDetail(actor)));
  } else if (ambiguous == AmbiguousResolution::kAssumeNotDone) {
    TE_RETURN_IF_ERROR(tx.DropUnconfirmedEffects(row.id));
  }
  TE_RETURN_IF_ERROR(tx.Apply(row, t, now, std::nullopt, std::string_view(), std::nullopt));
  TE_RETURN_IF_ERROR(tx.InsertAudit(
      ExecutionAudit(now, actor, row.tenant, action, row.id, row.state.status, t.to, reason)));
  return t.to;
}

Status NoExecution(ExecutionId id) { return NotFound("no execution " + std::to_string(id.value)); }

constexpr std::string_view kFinishedAfterCancel =
    "the handler finished after the cancel was requested; any effect it committed is listed "
    "as escaped";

}  // namespace

Result<EffectReply> ReserveEffectIn(ActionTx& tx, const LeaseRef& lease, std::string_view name,
                                    Millis now) {
  EffectReply reply;
  reply.key = EffectKey(lease.id, name);
  TE_ASSIGN_OR_RETURN(std::optional<StateRow> row, tx.LoadState(lease.id));
  Status check = CheckLease(row, lease);
  if (check.code() == ErrorCode::kNotFound) return check;
  if (!check.ok()) {
    reply.answer = EffectAnswer::kStale;
    return reply;
  }
  TE_ASSIGN_OR_RETURN(std::optional<StoredEffect> stored, tx.GetEffect(lease.id, name));
  if (AnswerReserve(stored, row->state.cancel_requested, lease, reply)) return reply;
  TE_RETURN_IF_ERROR(tx.InsertEffect(lease, name, row->state.attempt, now));
  reply.answer = EffectAnswer::kProceed;
  return reply;
}

Result<EffectRecord> CommitEffectIn(ActionTx& tx, const LeaseRef& lease, std::string_view name,
                                    std::string_view detail, Millis now) {
  TE_ASSIGN_OR_RETURN(std::optional<StateRow> row, tx.LoadState(lease.id));
  TE_RETURN_IF_ERROR(CheckLease(row, lease));
  TE_ASSIGN_OR_RETURN(std::optional<StoredEffect> stored, tx.GetEffect(lease.id, name));
  TE_ASSIGN_OR_RETURN(EffectCommit commit,
                      PlanCommit(lease, name, detail, stored, row->state.attempt, now));
  if (commit.write) {
    TE_RETURN_IF_ERROR(tx.UpdateCommittedEffect(lease, name, detail, row->state.attempt, now));
  }
  return commit.record;
}

Status ReleaseEffectIn(ActionTx& tx, const LeaseRef& lease, std::string_view name) {
  TE_ASSIGN_OR_RETURN(std::optional<StateRow> row, tx.LoadState(lease.id));
  TE_RETURN_IF_ERROR(CheckLease(row, lease));
  return tx.DeleteReservedEffect(lease, name);
}

Result<FinishDecision> DecideFinish(ActionTx& tx, const std::optional<StateRow>& row,
                                    const FinishRequest& f, Millis now, RandomSource& random) {
  FinishDecision d;
  if (f.token_id != 0) {
    Status token = tx.ConfirmToken(f.token_id, now);
    if (token.code() != ErrorCode::kUnauthenticated) TE_RETURN_IF_ERROR(token);
    d.status = token;
    if (!d.status.ok()) return d;
  }
  d.status = CheckLease(row, f.lease);
  if (!d.status.ok()) return d;
  d.plan = PlanFinish(f, now, random.Uniform01());
  Event& e = d.plan.event;
  if (row->state.cancel_requested) {
    TE_ASSIGN_OR_RETURN(e.has_committed_effects, tx.MayHaveEscapedEffects(row->id));
  }
  auto t = Decide(row->state, e);
  if (!t.ok()) {
    d.status = t.status();
    return d;
  }
  d.transition = *t;
  if (e.kind == EventKind::kSucceed && t->to != ExecutionStatus::kSucceeded) {
    // C1: the handler finished after the cancel was requested. The cancel
    // stands (the escaped effects are listed); no result is published.
    d.plan.result = std::nullopt;
    d.plan.error = kFinishedAfterCancel;
  }
  return d;
}

FinishReply FinishReplyFor(const Transition& t) {
  return FinishReply{t.to, t.to == ExecutionStatus::kQueued ? t.run_at : 0};
}

Result<ExecutionStatus> CancelExecution(ActionTx& tx, ExecutionId id, const OperatorAction& action,
                                        Millis now) {
  TE_ASSIGN_OR_RETURN(std::optional<StateRow> row, tx.LoadState(id));
  if (!row) return NoExecution(id);
  Event e;
  e.kind = EventKind::kCancel;
  e.now = now;
  TE_ASSIGN_OR_RETURN(e.has_committed_effects, tx.MayHaveEscapedEffects(id));
  TE_ASSIGN_OR_RETURN(Transition t, Decide(row->state, e));
  if (!t.changed) return t.to;
  TE_RETURN_IF_ERROR(tx.Apply(*row, t, now, std::nullopt, std::nullopt, std::nullopt));
  TE_RETURN_IF_ERROR(
      tx.InsertAudit(ExecutionAudit(now, action.actor, row->tenant, CancelAuditAction(t.to), id,
                                    row->state.status, t.to, action.reason)));
  return t.to;
}

Result<ReplayReply> ReplayExecution(ActionTx& tx, const ReplayRequest& request, Millis now) {
  TE_ASSIGN_OR_RETURN(std::optional<StateRow> row, tx.LoadState(request.id));
  if (!row) return NoExecution(request.id);
  {
    TE_ASSIGN_OR_RETURN(std::optional<PendingReplay> pending, tx.GetPendingReplay(request.id));
    if (pending) return ReplayAlreadyPending(request.id, pending->requested_by);
  }
  ReplayReply reply;
  if (request.require_approval) {
    Event e;
    e.kind = EventKind::kReplay;
    e.now = now;
    TE_RETURN_IF_ERROR(Decide(row->state, e).status());  // legal now?
    TE_RETURN_IF_ERROR(tx.InsertPendingReplay(request, now));
    TE_RETURN_IF_ERROR(tx.InsertAudit(
        ExecutionAudit(now, request.action.actor, row->tenant, "execution.replay_requested",
                       request.id, row->state.status, std::nullopt, request.action.reason)));
    reply.outcome = ReplayOutcome::kPendingApproval;
    reply.status = row->state.status;
    return reply;
  }
  TE_ASSIGN_OR_RETURN(reply.status, DoReplay(tx, *row, now, request.ambiguous, request.action.actor,
                                             request.action.reason, "execution.replay"));
  return reply;
}

Result<ReplayReply> ApprovePendingReplay(ActionTx& tx, ExecutionId id,
                                         const OperatorAction& approver, Millis now) {
  // The execution's row first, as every other call about it (a row lock
  // where the backend takes one).
  TE_ASSIGN_OR_RETURN(std::optional<StateRow> row, tx.LoadState(id));
  TE_ASSIGN_OR_RETURN(std::optional<PendingReplay> pending, tx.GetPendingReplay(id));
  if (!pending) return NoPendingReplay(id);
  TE_RETURN_IF_ERROR(CheckFourEyes(*pending, approver));
  if (!row) return NoExecution(id);
  TE_RETURN_IF_ERROR(tx.DeletePendingReplay(id));
  ReplayReply reply;
  TE_ASSIGN_OR_RETURN(reply.status,
                      DoReplay(tx, *row, now, pending->ambiguous, approver.actor,
                               ApprovedReplayReason(*pending), "execution.replay_approved"));
  return reply;
}

Result<SweepReport> RecoverExpired(ActionTx& tx, const std::vector<StateRow>& expired,
                                   int max_batch, Millis now, RandomSource& random) {
  SweepReport report;
  report.more = static_cast<int>(expired.size()) == max_batch;
  for (const StateRow& row : expired) {
    Event e;
    e.kind = EventKind::kLeaseExpired;
    e.now = now;
    e.jitter01 = random.Uniform01();
    if (row.state.cancel_requested) {
      TE_ASSIGN_OR_RETURN(e.has_committed_effects, tx.MayHaveEscapedEffects(row.id));
    }
    auto t = Decide(row.state, e);
    if (!t.ok()) continue;
    const std::string error = row.state.handler_started
                                  ? LeaseExpiredError(row.state.attempt)
                                  : UnstartedLeaseExpiredError(row.state.attempt);
    TE_RETURN_IF_ERROR(tx.Apply(row, *t, now, std::nullopt, error, std::nullopt));
    CountRecovered(report, t->to);
  }
  return report;
}

// --- ActionStore ----------------------------------------------------------------

template <typename T, typename F>
Result<T> ActionStore::InActionTx(F&& body) {
  std::optional<Result<T>> out;
  Status st = WithActionTx([&](ActionTx& tx, Millis now) -> Status {
    out.emplace(body(tx, now));
    return out->status();
  });
  if (!st.ok()) return st;
  return std::move(*out);
}

Result<EffectReply> ActionStore::ReserveEffect(const LeaseRef& lease, std::string_view name) {
  TE_RETURN_IF_ERROR(ValidateEffectName(name));
  return InActionTx<EffectReply>(
      [&](ActionTx& tx, Millis now) { return ReserveEffectIn(tx, lease, name, now); });
}

Result<EffectRecord> ActionStore::CommitEffect(const LeaseRef& lease, std::string_view name,
                                               std::string_view detail) {
  TE_RETURN_IF_ERROR(ValidateEffectCommit(name, detail));
  return InActionTx<EffectRecord>(
      [&](ActionTx& tx, Millis now) { return CommitEffectIn(tx, lease, name, detail, now); });
}

Status ActionStore::ReleaseEffect(const LeaseRef& lease, std::string_view name) {
  TE_RETURN_IF_ERROR(ValidateEffectName(name));
  return WithActionTx([&](ActionTx& tx, Millis) { return ReleaseEffectIn(tx, lease, name); });
}

Result<ExecutionStatus> ActionStore::RequestCancel(ExecutionId id, const OperatorAction& action) {
  TE_RETURN_IF_ERROR(ValidateCancel(action));
  return InActionTx<ExecutionStatus>(
      [&](ActionTx& tx, Millis now) { return CancelExecution(tx, id, action, now); });
}

Result<ReplayReply> ActionStore::Replay(const ReplayRequest& request) {
  TE_RETURN_IF_ERROR(ValidateReplay(request));
  return InActionTx<ReplayReply>(
      [&](ActionTx& tx, Millis now) { return ReplayExecution(tx, request, now); });
}

Result<ReplayReply> ActionStore::ApproveReplay(ExecutionId id, const OperatorAction& approver) {
  TE_RETURN_IF_ERROR(ValidateApproval(approver));
  return InActionTx<ReplayReply>(
      [&](ActionTx& tx, Millis now) { return ApprovePendingReplay(tx, id, approver, now); });
}

}  // namespace taskengine::storage_internal
