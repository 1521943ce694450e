#include "server/operations.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "server/time_format.h"

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
    TE_ASSIGN_OR_RETURN(r.run_at, ParseIso8601(in.run_at));
    if (r.run_at <= 0) return InvalidArgument("--run-at must be after 1970-01-01T00:00:00Z");
  }
  return r;
}

Result<std::vector<QueueStatusRow>> QueueStatus(Store& store, const ServerConfig& config,
                                                Millis now) {
  TE_ASSIGN_OR_RETURN(std::vector<QueueDepth> depths, store.QueueDepths());
  std::map<std::string, QueueDepth> by_name;
  for (QueueDepth& d : depths) by_name.emplace(d.queue, std::move(d));

  std::vector<QueueStatusRow> rows;
  auto fill = [&](QueueStatusRow& row) {
    auto it = by_name.find(row.queue);
    if (it == by_name.end()) return;
    row.queued = it->second.queued;
    row.due = it->second.due;
    row.running = it->second.running;
    row.oldest_queued_at = it->second.oldest_queued_at;
    if (row.oldest_queued_at > 0)
      row.oldest_age_ms = std::max<Millis>(0, now - row.oldest_queued_at);
    by_name.erase(it);
  };
  std::vector<QueueConfig> configured = config.queues;
  std::stable_sort(configured.begin(), configured.end(), [](const auto& a, const auto& b) {
    return a.priority != b.priority ? a.priority > b.priority : a.name < b.name;
  });
  for (const QueueConfig& q : configured) {
    QueueStatusRow row;
    row.queue = q.name;
    row.configured = true;
    row.priority = q.priority;
    row.concurrency = q.concurrency;
    fill(row);
    rows.push_back(std::move(row));
  }
  // What remains has work but is not worked by this configuration.
  std::vector<std::string> others;
  for (const auto& [name, depth] : by_name) others.push_back(name);
  for (const std::string& name : others) {
    QueueStatusRow row;
    row.queue = name;
    fill(row);
    rows.push_back(std::move(row));
  }
  return rows;
}

Result<ExecutionDetail> ShowExecution(Engine& engine, ExecutionId id, int log_limit) {
  ExecutionDetail d;
  auto e = engine.GetExecution(id);
  if (!e.ok()) {
    if (e.status().code() == ErrorCode::kNotFound) {
      return NotFound("no execution " + std::to_string(id.value));
    }
    return e.status();
  }
  d.execution = std::move(e).value();
  TE_ASSIGN_OR_RETURN(d.logs, engine.store().GetLogs(id, log_limit));
  return d;
}

}  // namespace taskengine
