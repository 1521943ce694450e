// An execution with everything its detail view shows (logs, effects,
// attempts, audit), read through the Store contract. The API's
// GET /api/v1/executions/{id} and the CLI's `execution:show` both load it
// here, so both show the same thing.
#pragma once

#include <vector>

#include "storage/store.h"
#include "taskengine/types.h"

namespace taskengine {

// Default detail limits; the API's options and the CLI's flags start from them.
inline constexpr int kDetailLogLimit = 1000;
inline constexpr int kDetailAuditLimit = 100;

struct ExecutionDetail {
  Execution execution;
  std::vector<LogEntry> logs;           // oldest first, at most the limit asked for
  std::vector<EffectRecord> effects;    // by reservation time
  std::vector<AttemptRecord> attempts;  // earlier attempts that did not succeed, oldest first
  std::vector<AuditRecord> audit;       // target "execution:<id>", newest first

  // The escaped effects (C2) of a canceled or partially canceled execution,
  // by reservation time; empty otherwise: every effect that may have happened
  // although the execution was canceled — the committed ones, and the
  // reservations never confirmed (committed = false: their outcome is
  // unknown, which is why the cancel ended `partially_canceled`).
  std::vector<EffectRecord> EscapedEffects() const;
};

// "execution:<id>": the audit target of an execution's records.
std::string ExecutionAuditTarget(ExecutionId id);

// Reads the logs, effects, attempts and audit records of `execution` (read
// by the caller, who has already decided the caller may see it). Errors of
// the store pass through. Thread-safe as the store is.
Result<ExecutionDetail> LoadExecutionDetail(Store& store, Execution execution, int log_limit,
                                            int audit_limit);

}  // namespace taskengine
