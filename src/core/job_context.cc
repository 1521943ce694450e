// The non-virtual parts of the handler API (include/taskengine/job.h): the
// reserve-perform-commit protocol of the effect ledger (E1-E3).
#include "taskengine/job.h"

namespace taskengine {

HandlerResult EffectResult::ToHandlerResult() const {
  if (!error.ok()) return HandlerResult::Retryable("effect " + key + ": " + error.message());
  switch (answer) {
    case EffectAnswer::kAmbiguous:
      return HandlerResult::Ambiguous("effect " + key +
                                      " was reserved by an earlier attempt that never confirmed "
                                      "it; its outcome is unknown");
    case EffectAnswer::kCanceled:
      return HandlerResult::Canceled();
    case EffectAnswer::kStale:
      return HandlerResult::Retryable("claim lost before effect " + key);
    case EffectAnswer::kProceed:
    case EffectAnswer::kAlreadyDone:
      break;
  }
  return HandlerResult::Success();
}

EffectResult JobContext::Effect(
    std::string_view name, EffectSink sink,
    const std::function<Result<std::string>(const std::string& key)>& perform) {
  auto reserved = ReserveEffect(name);
  if (!reserved.ok()) {
    EffectResult r;
    r.key = EffectKey(execution_id(), name);
    r.error = reserved.status();
    return r;
  }
  EffectResult r = std::move(reserved).value();
  const bool perform_now =
      r.answer == EffectAnswer::kProceed ||
      (r.answer == EffectAnswer::kAmbiguous && sink == EffectSink::kIdempotent);
  if (!perform_now) return r;
  auto performed = perform(r.key);
  if (!performed.ok()) {
    r.error = performed.status();
    if (performed.status().code() == ErrorCode::kUnavailable &&
        r.answer == EffectAnswer::kProceed) {
      (void)ReleaseEffect(name);  // certainly not performed: a retry may proceed
    }
    return r;
  }
  r.detail = std::move(performed).value();
  r.error = CommitEffect(name, r.detail);
  if (r.error.ok()) r.answer = EffectAnswer::kProceed;
  return r;
}

}  // namespace taskengine
