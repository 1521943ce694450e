// The execution-level logic of the contract that is the same for every
// backend: finishing, effects, operator actions (cancel, replay, replay
// approval) and the lease sweep, written once over the few steps a backend
// provides inside one of its transactions (ActionTx). Each backend keeps its
// SQL and its transactions: it validates the request, opens the
// transaction, and calls these.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "storage/store.h"
#include "storage/store_rules.h"
#include "taskengine/random.h"
#include "taskengine/status.h"

namespace taskengine::storage_internal {

// The steps of one backend transaction the shared actions use.
class ActionTx {
 public:
  // The execution's state, nullopt when it does not exist. A backend with
  // row locks locks the row for the rest of the transaction.
  virtual Result<std::optional<StateRow>> LoadState(ExecutionId id) = 0;
  // C1: an effect of the execution may have escaped (committed, or reserved
  // and never confirmed).
  virtual Result<bool> MayHaveEscapedEffects(ExecutionId id) = 0;
  // Writes a state-machine transition decided for `row` (and what follows
  // from it: counters, attempt history, lanes).
  virtual Status Apply(const StateRow& row, const Transition& t, Millis now,
                       std::optional<std::string_view> result,
                       std::optional<std::string_view> error, std::optional<int> progress) = 0;
  virtual Status InsertAudit(const AuditRecord& record) = 0;
  virtual Result<std::optional<PendingReplay>> GetPendingReplay(ExecutionId id) = 0;
  virtual Status InsertPendingReplay(const ReplayRequest& request, Millis now) = 0;
  virtual Status DeletePendingReplay(ExecutionId id) = 0;
  // Marks the execution's unconfirmed effects committed, with `detail`.
  virtual Status AssumeEffectsDone(ExecutionId id, Millis now, const std::string& detail) = 0;
  // Forgets the execution's unconfirmed effects.
  virtual Status DropUnconfirmedEffects(ExecutionId id) = 0;
  // E1: the effect's stored row (nullopt: none), a new reservation, a
  // commit, and the release of an unconfirmed reservation of `lease`.
  virtual Result<std::optional<StoredEffect>> GetEffect(ExecutionId id, std::string_view name) = 0;
  virtual Status InsertEffect(const LeaseRef& lease, std::string_view name, int attempt,
                              Millis now) = 0;
  virtual Status UpdateCommittedEffect(const LeaseRef& lease, std::string_view name,
                                       std::string_view detail, int attempt, Millis now) = 0;
  virtual Status DeleteReservedEffect(const LeaseRef& lease, std::string_view name) = 0;
  // FinishRequest::token_id: kUnauthenticated unless API token `token_id`
  // exists, is not revoked and has not expired at `now`; any other error is
  // the transaction's.
  virtual Status ConfirmToken(std::int64_t token_id, Millis now) = 0;

 protected:
  ~ActionTx() = default;
};

// Store::ReserveEffect, CommitEffect and ReleaseEffect inside `tx`, at `now`
// (names and details already validated).
Result<EffectReply> ReserveEffectIn(ActionTx& tx, const LeaseRef& lease, std::string_view name,
                                    Millis now);
Result<EffectRecord> CommitEffectIn(ActionTx& tx, const LeaseRef& lease, std::string_view name,
                                    std::string_view detail, Millis now);
Status ReleaseEffectIn(ActionTx& tx, const LeaseRef& lease, std::string_view name);

// One request of Store::FinishBatch on its execution's state `row` (nullopt:
// no such execution). A failed Result fails the whole transaction; a failed
// `status` answers only this request (its token no longer stands, a stale
// lease, an illegal transition).
// Otherwise the caller writes `transition` with the plan's result, error and
// progress.
struct FinishDecision {
  Status status;
  FinishPlan plan;
  Transition transition;
};
Result<FinishDecision> DecideFinish(ActionTx& tx, const std::optional<StateRow>& row,
                                    const FinishRequest& request, Millis now, RandomSource& random);
// The answer to a finish call whose transition was `t`.
FinishReply FinishReplyFor(const Transition& t);

// Store::RequestCancel, Replay and ApproveReplay inside `tx`, at `now`
// (requests already validated).
Result<ExecutionStatus> CancelExecution(ActionTx& tx, ExecutionId id, const OperatorAction& action,
                                        Millis now);
Result<ReplayReply> ReplayExecution(ActionTx& tx, const ReplayRequest& request, Millis now);
Result<ReplayReply> ApprovePendingReplay(ActionTx& tx, ExecutionId id,
                                         const OperatorAction& approver, Millis now);

// Store::SweepExpired inside `tx`: recovers the `expired` executions (read
// with a limit of `max_batch`), drawing one jitter per execution from `random`.
Result<SweepReport> RecoverExpired(ActionTx& tx, const std::vector<StateRow>& expired,
                                   int max_batch, Millis now, RandomSource& random);

// The queues a transaction made work due in (Store::SetWorkPublisher), each
// once, in the order they were first marked. Usually one.
class DueQueues {
 public:
  void Mark(const std::string& queue) {
    for (const std::string& q : queues_) {
      if (q == queue) return;
    }
    queues_.push_back(queue);
  }
  // Adds `other`'s queues (a SQLite batch takes each operation's).
  void Take(DueQueues&& other) {
    for (std::string& q : other.queues_) Mark(q);
    other.Clear();
  }
  void Clear() { queues_.clear(); }
  bool empty() const { return queues_.empty(); }
  const std::vector<std::string>& queues() const { return queues_; }

 private:
  std::vector<std::string> queues_;
};

// A Store whose effect calls and operator actions are the shared ones above
// (validation, then one write transaction); a backend provides that
// transaction with its ActionTx (WithActionTx) and the rest of the contract.
class ActionStore : public Store {
 public:
  Result<EffectReply> ReserveEffect(const LeaseRef& lease, std::string_view name) override;
  Result<EffectRecord> CommitEffect(const LeaseRef& lease, std::string_view name,
                                    std::string_view detail) override;
  Status ReleaseEffect(const LeaseRef& lease, std::string_view name) override;
  Result<ExecutionStatus> RequestCancel(ExecutionId id, const OperatorAction& action) override;
  Result<ReplayReply> Replay(const ReplayRequest& request) override;
  Result<ReplayReply> ApproveReplay(ExecutionId id, const OperatorAction& approver) override;
  void SetLifecycleObserver(std::function<void(std::vector<LifecycleEvent>&&)> observer) override {
    lifecycle_observer_ = std::move(observer);
  }
  void SetWorkPublisher(std::function<void(const std::string& queue)> publisher) override {
    work_publisher_ = std::move(publisher);
  }

 protected:
  bool ObservesLifecycle() const { return static_cast<bool>(lifecycle_observer_); }
  // Hands the events of a committed transaction to the observer.
  void PublishLifecycle(std::vector<LifecycleEvent>&& events) const {
    if (lifecycle_observer_ && !events.empty()) lifecycle_observer_(std::move(events));
  }

  // Tells the work publisher of each queue a committed transaction made work
  // due in (SetWorkPublisher).
  void PublishWork(const DueQueues& due) const {
    if (!work_publisher_) return;
    for (const std::string& queue : due.queues()) work_publisher_(queue);
  }

  // Runs `body` in one write transaction, committed when it returns OK and
  // rolled back otherwise; `now` is the store clock's time at its start. The
  // backend may run `body` again when it retries the whole transaction.
  virtual Status WithActionTx(const std::function<Status(ActionTx& tx, Millis now)>& body) = 0;

 private:
  // WithActionTx for a body with a value: the value of its last run.
  template <typename T, typename F>
  Result<T> InActionTx(F&& body);

  std::function<void(std::vector<LifecycleEvent>&&)> lifecycle_observer_;
  std::function<void(const std::string&)> work_publisher_;
};

}  // namespace taskengine::storage_internal
