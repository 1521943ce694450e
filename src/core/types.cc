#include "taskengine/types.h"

#include <array>

namespace taskengine {
namespace {

template <typename E, std::size_t N>
std::optional<E> ParseByName(std::string_view s, const std::array<std::string_view, N>& names) {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == s) return static_cast<E>(i);
  }
  return std::nullopt;
}

constexpr std::array<std::string_view, 7> kStatusNames = {
    "queued", "running", "succeeded", "failed", "quarantined", "canceled", "partially_canceled"};
constexpr std::array<std::string_view, 5> kFailureNames = {"none", "retryable", "permanent",
                                                           "ambiguous", "lease_expired"};
constexpr std::array<std::string_view, 5> kTriggerNames = {"scheduled", "manual", "api", "retry",
                                                           "replay"};
constexpr std::array<std::string_view, 2> kScopeNames = {"global", "per_tenant"};
constexpr std::array<std::string_view, 3> kCatchUpNames = {"coalesce", "all", "none"};
constexpr std::array<std::string_view, 4> kLevelNames = {"debug", "info", "warn", "error"};

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// [a-z0-9][a-z0-9<extra>]{0,max-1}
bool MatchesNameRule(std::string_view s, std::size_t max_len, std::string_view extra) {
  if (s.empty() || s.size() > max_len || !IsLowerAlnum(s[0])) return false;
  for (char c : s.substr(1)) {
    if (!IsLowerAlnum(c) && extra.find(c) == std::string_view::npos) return false;
  }
  return true;
}

}  // namespace

std::string_view ToString(ExecutionStatus s) { return kStatusNames.at(static_cast<int>(s)); }
std::string_view ToString(FailureClass c) { return kFailureNames.at(static_cast<int>(c)); }
std::string_view ToString(Trigger t) { return kTriggerNames.at(static_cast<int>(t)); }
std::string_view ToString(JobScope s) { return kScopeNames.at(static_cast<int>(s)); }
std::string_view ToString(CatchUpPolicy p) { return kCatchUpNames.at(static_cast<int>(p)); }
std::optional<CatchUpPolicy> ParseCatchUpPolicy(std::string_view s) {
  return ParseByName<CatchUpPolicy>(s, kCatchUpNames);
}
constexpr std::array<std::string_view, 4> kWorkerStateNames = {"idle", "busy", "stopped", "stale"};
std::string_view ToString(WorkerState s) { return kWorkerStateNames.at(static_cast<int>(s)); }
std::optional<WorkerState> ParseWorkerState(std::string_view s) {
  return ParseByName<WorkerState>(s, kWorkerStateNames);
}
constexpr std::array<std::string_view, 2> kWorkerKindNames = {"remote", "pool"};
std::string_view ToString(WorkerKind k) { return kWorkerKindNames.at(static_cast<int>(k)); }

Millis WorkerStaleAfterMs(WorkerKind kind) {
  return kind == WorkerKind::kPool ? 5 * kPoolReportIntervalMs : 3 * kRemoteIdleHeartbeatMs + 5'000;
}

WorkerState LiveState(const WorkerInfo& w, Millis now) {
  if (w.state == WorkerState::kStopped) return w.state;
  if (now - w.last_heartbeat_at > WorkerStaleAfterMs(w.kind)) return WorkerState::kStale;
  return w.state;
}
std::string_view ToString(LogLevel l) { return kLevelNames.at(static_cast<int>(l)); }

std::optional<ExecutionStatus> ParseExecutionStatus(std::string_view s) {
  return ParseByName<ExecutionStatus>(s, kStatusNames);
}
std::optional<FailureClass> ParseFailureClass(std::string_view s) {
  return ParseByName<FailureClass>(s, kFailureNames);
}
std::optional<Trigger> ParseTrigger(std::string_view s) {
  return ParseByName<Trigger>(s, kTriggerNames);
}
std::optional<JobScope> ParseJobScope(std::string_view s) {
  return ParseByName<JobScope>(s, kScopeNames);
}
std::optional<LogLevel> ParseLogLevel(std::string_view s) {
  return ParseByName<LogLevel>(s, kLevelNames);
}

bool IsTerminal(ExecutionStatus s) {
  switch (s) {
    case ExecutionStatus::kQueued:
    case ExecutionStatus::kRunning:
      return false;
    default:
      return true;
  }
}

bool IsValidJobName(std::string_view name) { return MatchesNameRule(name, 100, "._-"); }
bool IsReservedJobName(std::string_view name) { return name.starts_with("taskengine."); }
bool IsReservedQueueName(std::string_view name) {
  return name == "taskengine" || name.starts_with("taskengine.");
}
bool IsValidTenantId(std::string_view tenant) { return MatchesNameRule(tenant, 50, "_-"); }
bool IsValidQueueName(std::string_view queue) { return MatchesNameRule(queue, 100, "._-"); }

std::string_view ToString(EffectAnswer a) {
  switch (a) {
    case EffectAnswer::kProceed:
      return "proceed";
    case EffectAnswer::kAlreadyDone:
      return "already_done";
    case EffectAnswer::kAmbiguous:
      return "ambiguous";
    case EffectAnswer::kStale:
      return "stale";
    case EffectAnswer::kCanceled:
      return "canceled";
  }
  return "?";
}

bool IsValidEffectName(std::string_view name) {
  if (name.empty() || name.size() > 120) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string EffectKey(ExecutionId id, std::string_view name) {
  std::string key = std::to_string(id.value);
  key += ':';
  key += name;
  return key;
}

bool IsValidIdempotencyKey(std::string_view key) {
  if (key.empty() || key.size() > 200) return false;
  for (char c : key) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace taskengine
