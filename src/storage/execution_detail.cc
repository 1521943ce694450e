#include "storage/execution_detail.h"

#include <string>
#include <utility>

namespace taskengine {

std::vector<EffectRecord> ExecutionDetail::EscapedEffects() const {
  if (execution.status != ExecutionStatus::kCanceled &&
      execution.status != ExecutionStatus::kPartiallyCanceled) {
    return {};
  }
  return effects;
}

std::string ExecutionAuditTarget(ExecutionId id) { return "execution:" + std::to_string(id.value); }

Result<ExecutionDetail> LoadExecutionDetail(Store& store, Execution execution, int log_limit,
                                            int audit_limit) {
  ExecutionDetail d;
  const ExecutionId id = execution.id;
  d.execution = std::move(execution);
  TE_ASSIGN_OR_RETURN(d.logs, store.GetLogs(id, log_limit));
  TE_ASSIGN_OR_RETURN(d.effects, store.GetEffects(id));
  TE_ASSIGN_OR_RETURN(d.attempts, store.GetAttempts(id));
  AuditFilter audit;
  audit.target = ExecutionAuditTarget(id);
  audit.limit = audit_limit;
  TE_ASSIGN_OR_RETURN(d.audit, store.ListAudit(audit));
  return d;
}

}  // namespace taskengine
