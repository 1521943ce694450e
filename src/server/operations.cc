#include "server/operations.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

#include "core/time_text.h"
#include "engine/engine_internal.h"

namespace taskengine {
namespace {

// Dispatch refuses more than this; checked here too so the message speaks of seconds.
constexpr double kMaxDelaySeconds = 366.0 * 24 * 3600;

}  // namespace

std::string CliRequester() {
  const uid_t uid = geteuid();
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr &&
      found->pw_name != nullptr && found->pw_name[0] != '\0') {
    return std::string("cli:") + found->pw_name;
  }
  return "cli:uid-" + std::to_string(uid);
}

Result<DispatchRequest> BuildCliDispatch(const CliDispatch& in) {
  DispatchRequest r;
  r.job = JobName(in.job);
  r.tenant = TenantId(in.tenant);
  r.payload_json = in.payload_json;
  r.idempotency_key = in.idempotency_key;
  r.requester = CliRequester();
  r.trigger = Trigger::kManual;
  r.lane_key = in.lane_key;
  if (in.delay_seconds && !in.run_at.empty()) {
    return InvalidArgument("give either --delay or --run-at, not both");
  }
  if (in.delay_seconds) {
    const double d = *in.delay_seconds;
    if (!std::isfinite(d) || d < 0 || d > kMaxDelaySeconds) {
      return InvalidArgument("--delay must be between 0 and 31622400 seconds (366 days)");
    }
    r.delay_ms = static_cast<Millis>(std::llround(d * 1000.0));
  }
  if (!in.run_at.empty()) {
    TE_ASSIGN_OR_RETURN(r.run_at, ParseTime(in.run_at));
    if (r.run_at <= 0) return InvalidArgument("--run-at must be after 1970-01-01T00:00:00Z");
  }
  return r;
}

Result<std::vector<QueueView>> QueueStatus(Store& store, const ServerConfig& config, Millis now) {
  TE_ASSIGN_OR_RETURN(std::vector<QueueDepth> depths, store.QueueDepths());
  return QueueViews(std::move(depths), config.queues, now);
}

Result<std::string> CliActor(std::string_view as_name) {
  if (as_name.empty()) return CliRequester();
  constexpr std::size_t kMaxName = 64;
  bool ok = as_name.size() <= kMaxName;
  for (char c : as_name) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == '@' || c == '-');
  }
  if (!ok) {
    return InvalidArgument("--as '" + std::string(as_name) +
                           "' must be 1..64 characters of A-Z a-z 0-9 . _ @ -");
  }
  return "cli:" + std::string(as_name);
}

Result<ExecutionDetail> ShowExecution(Engine& engine, ExecutionId id, int log_limit) {
  auto e = engine.GetExecution(id);
  if (!e.ok()) {
    if (e.status().code() == ErrorCode::kNotFound) {
      return NotFound("no execution " + std::to_string(id.value));
    }
    return e.status();
  }
  return LoadExecutionDetail(StoreOf(engine), std::move(e).value(), log_limit, kDetailAuditLimit);
}

Result<LeaseRef> LeaseFromEnvironment(const EnvLookup& env) {
  auto read = [&](const char* name) -> Result<std::int64_t> {
    std::optional<std::string> v = env(name);
    if (!v || v->empty()) {
      return InvalidArgument(std::string(name) +
                             " is not set: effect verbs run inside a `command` job, whose "
                             "handler sets it");
    }
    errno = 0;
    char* end = nullptr;
    const long long n = std::strtoll(v->c_str(), &end, 10);
    if (errno != 0 || end == v->c_str() || *end != '\0' || n <= 0) {
      return InvalidArgument(std::string(name) + "='" + *v + "' is not a positive integer");
    }
    return static_cast<std::int64_t>(n);
  };
  TE_ASSIGN_OR_RETURN(std::int64_t id, read("TASKENGINE_EXECUTION_ID"));
  TE_ASSIGN_OR_RETURN(std::int64_t version, read("TASKENGINE_CLAIM_VERSION"));
  return LeaseRef{ExecutionId(id), ClaimVersion(version)};
}

}  // namespace taskengine
