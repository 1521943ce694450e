#include "taskengine/lifecycle.h"

#include <array>

namespace taskengine {

std::string_view LifecycleEventName(LifecycleKind kind) {
  static constexpr std::array<std::string_view, 9> kNames = {
      "execution.dispatched", "execution.retried",   "execution.orphaned",
      "execution.replayed",   "execution.completed", "execution.failed",
      "execution.aborted",    "worker.started",      "worker.stopped"};
  return kNames.at(static_cast<std::size_t>(kind));
}

std::optional<LifecycleKind> LifecycleKindOf(ExecutionStatus from, ExecutionStatus to,
                                             FailureClass failure_class,
                                             std::optional<Trigger> requeued_as) {
  if (from == to) return std::nullopt;
  switch (to) {
    case ExecutionStatus::kSucceeded:
      return LifecycleKind::kCompleted;
    case ExecutionStatus::kFailed:
    case ExecutionStatus::kQuarantined:
      return LifecycleKind::kFailed;
    case ExecutionStatus::kCanceled:
    case ExecutionStatus::kPartiallyCanceled:
      return LifecycleKind::kAborted;
    case ExecutionStatus::kQueued:
      if (requeued_as == Trigger::kReplay) return LifecycleKind::kReplayed;
      if (requeued_as == Trigger::kRetry) {
        return failure_class == FailureClass::kLeaseExpired ? LifecycleKind::kOrphaned
                                                            : LifecycleKind::kRetried;
      }
      return std::nullopt;  // a release or a prefetched lease given back
    case ExecutionStatus::kRunning:
      return std::nullopt;  // a claim
  }
  return std::nullopt;
}

}  // namespace taskengine
