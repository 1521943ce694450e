#include "engine/notifier.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/canonical_json.h"
#include "core/prometheus_text.h"
#include "core/time_text.h"
#include "core/utf8.h"
#include "platform/thread_name.h"

namespace taskengine {
namespace {

using Json = nlohmann::ordered_json;

constexpr Millis kOrphanAlertGapMs = 15 * 60'000;
constexpr std::size_t kMaxErrorInText = 1'000;
constexpr int kMaxRoundsPerPass = 20;

std::string Excerpt(std::string_view text, std::size_t max) {
  if (text.size() <= max) return std::string(text);
  return std::string(CutUtf8(text, max)) + "...";
}

bool IsHttpUrl(std::string_view url) {
  return (url.starts_with("https://") && url.size() > 8) ||
         (url.starts_with("http://") && url.size() > 7);
}

// The execution's page on the dashboard, or "" without a dashboard_url.
std::string ExecutionLink(const Execution& e, std::string_view dashboard_url) {
  if (dashboard_url.empty()) return "";
  std::string base(dashboard_url);
  while (!base.empty() && base.back() == '/') base.pop_back();
  const std::string scope = e.tenant.value.empty() ? "tasks" : e.tenant.value + "/tasks";
  return base + "/admin/" + scope + "/executions/" + std::to_string(e.id.value);
}

std::string HowItEnded(const Execution& e) {
  switch (e.status) {
    case ExecutionStatus::kFailed:
      return "failed";
    case ExecutionStatus::kQuarantined:
      return "was quarantined (" + std::string(ToString(e.failure_class)) + ")";
    case ExecutionStatus::kPartiallyCanceled:
      return "was canceled after some of its effects had happened (partially_canceled)";
    default:
      return "ended " + std::string(ToString(e.status));
  }
}

std::string SuppressedLine(const Notice& n) {
  if (n.suppressed <= 0) return "";
  return "And " + std::to_string(n.suppressed) + " more failure" + (n.suppressed == 1 ? "" : "s") +
         " of job " + n.job.value + " since " + FormatTimeSeconds(n.suppressed_since) +
         " that were not notified (rate limit).";
}

}  // namespace

JobDefinition NotifyJobDefinition() {
  JobDefinition job;
  job.name = JobName(std::string(kNotifyJobName));
  job.display_name = "Failure notification delivery";
  job.handler = std::string(kNotifyHandlerName);
  job.queue = std::string(kNotifyQueueName);
  job.timeout_ms = 60'000;
  job.lease_ms = 30'000;
  job.retry.max_attempts = 5;
  job.retry.backoff_base_ms = 30'000;
  job.retry.backoff_cap_ms = 600'000;
  job.retry.max_permanent_attempts = 1;
  job.retry.max_ambiguous_attempts = 1;
  job.notify_on_failure = false;
  return job;
}

Status ValidateNotifySettings(const NotifySettings& s) {
  if (s.per_job_per_hour < 1 || s.per_job_per_hour > 10'000) {
    return InvalidArgument("[notifications] per_job_per_hour must be 1..10000");
  }
  if (s.orphan_threshold < 1 || s.orphan_threshold > 100'000) {
    return InvalidArgument("[notifications] orphan_threshold must be 1..100000");
  }
  if (auto t = ParseNotifyTargets(s.targets); !t.ok()) {
    return InvalidArgument("[notifications] targets: " + t.status().message());
  }
  if (!s.dashboard_url.empty() && !IsHttpUrl(s.dashboard_url)) {
    return InvalidArgument("[notifications] dashboard_url must start with https:// or http://");
  }
  if (!IsEmailAddress(s.from)) {
    return InvalidArgument(
        "[notifications] from must be an e-mail address, e.g. taskengine@example.com");
  }
  if (!s.smtp_url.empty() && !s.smtp_url.starts_with("smtp://") &&
      !s.smtp_url.starts_with("smtps://")) {
    return InvalidArgument("[notifications] smtp_url must start with smtp:// or smtps://");
  }
  if (!s.sendmail.empty() && (s.sendmail[0].empty() || s.sendmail[0].front() != '/')) {
    return InvalidArgument("[notifications] sendmail[0] must be an absolute path");
  }
  if (s.interval_ms < 100 || s.interval_ms > 60'000) {
    return InvalidArgument("[notifications] interval must be 100 ms..1 min");
  }
  return Status::Ok();
}

// --- what a notification says ---

std::string NoticeSubject(const Notice& n) {
  switch (n.kind) {
    case Notice::Kind::kFailure: {
      const Execution& e = *n.execution;
      std::string what = e.status == ExecutionStatus::kFailed        ? "failed"
                         : e.status == ExecutionStatus::kQuarantined ? "quarantined"
                                                                     : "partially canceled";
      std::string s = "[taskengine] job " + n.job.value +
                      (e.tenant.value.empty() ? "" : " (tenant " + e.tenant.value + ")") + " " +
                      what + " (execution " + std::to_string(e.id.value) + ")";
      if (n.suppressed > 0) s += " and " + std::to_string(n.suppressed) + " more";
      return s;
    }
    case Notice::Kind::kSummary:
      return "[taskengine] job " + n.job.value + ": " + std::to_string(n.suppressed) +
             " failures not notified (rate limit)";
    case Notice::Kind::kOrphans:
      return "[taskengine] " + std::to_string(n.orphans) + " expired leases recovered at once on " +
             n.node;
    case Notice::Kind::kTest:
      return "[taskengine] test notification for job " + n.job.value;
  }
  return "[taskengine]";
}

std::string NoticeText(const Notice& n, std::string_view dashboard_url) {
  std::string text;
  switch (n.kind) {
    case Notice::Kind::kFailure: {
      const Execution& e = *n.execution;
      text = "Execution " + std::to_string(e.id.value) + " of job " + n.job.value +
             (e.tenant.value.empty() ? "" : " (tenant " + e.tenant.value + ")") + " " +
             HowItEnded(e) + " after attempt " + std::to_string(e.attempt) + " of " +
             std::to_string(e.retry.max_attempts) + ".";
      if (!e.error.empty()) text += "\nError: " + Excerpt(e.error, kMaxErrorInText);
      text += "\nQueued " + FormatTimeSeconds(e.queued_at);
      if (e.started_at > 0) text += ", started " + FormatTimeSeconds(e.started_at);
      text += ", ended " + FormatTimeSeconds(e.finished_at > 0 ? e.finished_at : n.ended_at) + ".";
      if (e.status == ExecutionStatus::kQuarantined) {
        text += "\nIt waits for an operator: replay it once the cause is fixed, or cancel it.";
      }
      if (std::string link = ExecutionLink(e, dashboard_url); !link.empty()) {
        text += "\n" + link;
      }
      if (n.suppressed > 0) text += "\n" + SuppressedLine(n);
      break;
    }
    case Notice::Kind::kSummary:
      text = SuppressedLine(n);
      break;
    case Notice::Kind::kOrphans:
      text = "The sweeper of " + n.node + " recovered " + std::to_string(n.orphans) +
             " executions whose workers stopped heartbeating (expired leases) at " +
             FormatTimeSeconds(n.at) +
             ". Workers may have crashed or lost the database; the executions were queued again "
             "or, past their limits, quarantined.";
      break;
    case Notice::Kind::kTest:
      text = "A test notification for job " + n.job.value + ", sent at " + FormatTimeSeconds(n.at) +
             " by `taskengine notify:test`. Nothing failed.";
      break;
  }
  return text;
}

namespace {

Json NoticeJson(const Notice& n, std::string_view dashboard_url) {
  static constexpr const char* kKinds[] = {"failure", "summary", "orphans", "test"};
  Json doc = {{"kind", kKinds[static_cast<int>(n.kind)]},
              {"subject", NoticeSubject(n)},
              {"text", NoticeText(n, dashboard_url)}};
  if (!n.job.value.empty()) doc["job"] = n.job.value;
  if (n.execution) {
    const Execution& e = *n.execution;
    const std::string link = ExecutionLink(e, dashboard_url);
    doc["execution"] = {
        {"id", e.id.value},
        {"tenant", e.tenant.value.empty() ? Json(nullptr) : Json(e.tenant.value)},
        {"status", std::string(ToString(e.status))},
        {"failure_class", std::string(ToString(e.failure_class))},
        {"error", Excerpt(e.error, kMaxErrorInText)},
        {"attempt", e.attempt},
        {"max_attempts", e.retry.max_attempts},
        {"queued_at", FormatTime(e.queued_at)},
        {"started_at", e.started_at > 0 ? Json(FormatTime(e.started_at)) : Json(nullptr)},
        {"finished_at", FormatTime(e.finished_at > 0 ? e.finished_at : n.ended_at)},
        {"url", link.empty() ? Json(nullptr) : Json(link)},
    };
  }
  if (n.suppressed > 0) {
    doc["suppressed"] = {{"count", n.suppressed}, {"since", FormatTime(n.suppressed_since)}};
  }
  if (n.kind == Notice::Kind::kOrphans) {
    doc["orphans"] = {{"recovered", n.orphans}, {"node", n.node}, {"at", FormatTime(n.at)}};
  }
  return doc;
}

}  // namespace

std::string NoticeDocument(const Notice& n, std::string_view dashboard_url) {
  return NoticeJson(n, dashboard_url).dump();
}

std::string DeliveryPayload(const Notice& n, const NotifyTarget& target,
                            std::string_view dashboard_url) {
  Json payload = {{"target", target.ToString()},
                  {"subject", NoticeSubject(n)},
                  {"text", NoticeText(n, dashboard_url)},
                  {"document", NoticeJson(n, dashboard_url)}};
  return payload.dump();
}

std::string DeliveryKey(const Notice& n, const NotifyTarget& target) {
  // The target can be long (an e-mail address): a digest keeps keys short.
  const std::string to = Sha256Hex(target.ToString()).substr(0, 16);
  switch (n.kind) {
    case Notice::Kind::kFailure:
      return "notify:" + std::to_string(n.execution->id.value) + ":" + std::to_string(n.ended_at) +
             ":" + to;
    case Notice::Kind::kSummary:
      return "notify-summary:" + n.job.value + ":" + std::to_string(n.suppressed_since) + ":" + to;
    case Notice::Kind::kOrphans:
      return "notify-orphans:" + n.node + ":" + std::to_string(n.at) + ":" + to;
    case Notice::Kind::kTest:
      return "notify-test:" + n.job.value + ":" + std::to_string(n.at) + ":" + to;
  }
  return {};
}

// --- the rate limit ---

JobPlan PlanNotices(NotifyJobState state, const std::vector<NotifyPending>& pending, int per_hour,
                    Millis now) {
  JobPlan plan;
  // The window: sends of the last hour.
  std::erase_if(state.sent_at, [&](Millis t) { return t <= now - kNotifyWindowMs; });
  auto room = [&] { return static_cast<int>(state.sent_at.size()) < per_hour; };
  auto send = [&](std::optional<NotifyPending> failure) {
    plan.notices.push_back({std::move(failure), state.suppressed, state.suppressed_since});
    state.suppressed = 0;
    state.suppressed_since = 0;
    state.sent_at.push_back(now);
  };
  for (const NotifyPending& p : pending) {
    if (room()) {
      send(p);
      continue;
    }
    if (state.suppressed == 0 || p.ended_at < state.suppressed_since) {
      state.suppressed_since = p.ended_at;
    }
    ++state.suppressed;
    ++plan.suppressed_now;
  }
  if (pending.empty() && state.suppressed > 0 && room()) send(std::nullopt);
  plan.state = std::move(state);
  return plan;
}

// --- the loop ---

Notifier::Notifier(Engine* engine, Store* store, const Clock* clock, NotifierOptions options)
    : engine_(engine),
      store_(store),
      clock_(clock),
      options_(std::move(options)),
      global_targets_([&] {
        auto t = ParseNotifyTargets(options_.settings.targets);
        return t.ok() ? std::move(t).value() : std::vector<NotifyTarget>{};
      }()) {}

Notifier::~Notifier() { Stop(); }

Result<std::vector<NotifyTarget>> Notifier::ConfiguredTargets(const JobDefinition& job) const {
  if (job.notify_targets.empty()) return global_targets_;
  return ParseNotifyTargets(job.notify_targets);
}

Result<std::vector<NotifyTarget>> Notifier::FailureTargets(const JobName& name) const {
  Result<JobDefinition> job = store_->GetJob(name);
  if (!job.ok() && job.status().code() == ErrorCode::kNotFound) {
    return std::vector<NotifyTarget>{};  // the job is gone
  }
  if (!job.ok()) return job.status();
  if (!job->notify_on_failure || IsReservedJobName(name.value)) return std::vector<NotifyTarget>{};
  auto targets = ConfiguredTargets(*job);
  if (!targets.ok()) {
    spdlog::warn("notifier: job {}: {}", name.value, targets.status().ToString());
    return std::vector<NotifyTarget>{};
  }
  return targets;
}

DispatchRequest Notifier::DeliveryRequest(const Notice& notice, const NotifyTarget& target) const {
  DispatchRequest r;
  r.job = JobName(std::string(kNotifyJobName));
  r.payload_json = DeliveryPayload(notice, target, options_.settings.dashboard_url);
  r.idempotency_key = DeliveryKey(notice, target);
  r.requester = std::string(kNotifierRequester);
  return r;
}

Result<int> Notifier::Admit(const Notice& notice, const std::vector<NotifyTarget>& targets) {
  int admitted = 0;
  for (const NotifyTarget& target : targets) {
    Result<DispatchResult> d = engine_->Dispatch(DeliveryRequest(notice, target));
    // A conflict is an earlier pass's admission of this same delivery whose
    // text differed (e.g. a later suppressed count): it stands.
    if (!d.ok() && d.status().code() != ErrorCode::kConflict) return d.status();
    ++admitted;
  }
  return admitted;
}

Status Notifier::WorkOutbox(NotifyPassReport* report) {
  TE_ASSIGN_OR_RETURN(NotifyOutbox outbox, store_->ReadNotifyOutbox(options_.max_pending_per_pass));
  const Millis now = clock_->NowMillis();
  // Endings by job, oldest first; every job with a state too (summaries due).
  std::map<std::string, std::vector<NotifyPending>> by_job;
  for (const NotifyPending& p : outbox.pending) by_job[p.job.value].push_back(p);
  std::map<std::string, NotifyJobState> states;
  for (NotifyJobState& s : outbox.jobs) states[s.job.value] = std::move(s);
  for (const auto& [name, unused] : states) by_job.try_emplace(name);

  for (auto& [name, pending] : by_job) {
    const JobName job(name);
    NotifyJobState state{job, {}, 0, 0};
    if (auto s = states.find(name); s != states.end()) state = s->second;
    JobPlan plan = PlanNotices(state, pending, options_.settings.per_job_per_hour, now);
    report->endings += static_cast<int>(pending.size());
    if (pending.empty() && plan.notices.empty()) {
      // An idle job: its window only ages. No definition to read; a write
      // only when a send left the window.
      if (plan.state.sent_at != state.sent_at) {
        TE_RETURN_IF_ERROR(store_->UpdateNotifyOutbox({{}, {plan.state}}));
      }
      continue;
    }
    TE_ASSIGN_OR_RETURN(std::vector<NotifyTarget> targets, FailureTargets(job));
    if (targets.empty()) {
      // Nobody to tell (or the job is gone): the endings are decided, the state forgotten.
      report->skipped += static_cast<int>(pending.size());
      TE_RETURN_IF_ERROR(store_->UpdateNotifyOutbox({pending, {NotifyJobState{job, {}, 0, 0}}}));
      continue;
    }
    for (const PlannedNotice& planned : plan.notices) {
      Notice notice;
      notice.job = job;
      notice.suppressed = planned.suppressed;
      notice.suppressed_since = planned.suppressed_since;
      if (planned.failure) {
        Result<Execution> e = engine_->GetExecution(planned.failure->execution);
        if (!e.ok() && e.status().code() != ErrorCode::kNotFound) return e.status();
        if (!e.ok()) continue;  // purged meanwhile: nothing left to tell about
        notice.kind = Notice::Kind::kFailure;
        notice.execution = std::move(e).value();
        notice.ended_at = planned.failure->ended_at;
      } else {
        notice.kind = Notice::Kind::kSummary;
      }
      TE_ASSIGN_OR_RETURN(int admitted, Admit(notice, targets));
      report->deliveries += admitted;
    }
    report->suppressed += plan.suppressed_now;
    TE_RETURN_IF_ERROR(store_->UpdateNotifyOutbox({pending, {plan.state}}));
  }
  return Status::Ok();
}

Status Notifier::CheckOrphans(NotifyPassReport* report) {
  const std::int64_t expirations = engine_->stats().lease_expirations;
  const Millis now = clock_->NowMillis();
  std::int64_t recovered = 0;
  {
    MutexLock lock(mu_);
    if (seen_lease_expirations_ >= 0) recovered = expirations - seen_lease_expirations_;
    seen_lease_expirations_ = expirations;
    if (recovered <= options_.settings.orphan_threshold) return Status::Ok();
    if (last_orphan_alert_at_ > 0 && now - last_orphan_alert_at_ < kOrphanAlertGapMs) {
      return Status::Ok();
    }
    last_orphan_alert_at_ = now;
  }
  spdlog::warn("notifier: {} expired leases recovered since the last pass (threshold {})",
               recovered, options_.settings.orphan_threshold);
  if (global_targets_.empty()) return Status::Ok();
  Notice notice;
  notice.kind = Notice::Kind::kOrphans;
  notice.orphans = static_cast<int>(recovered);
  notice.node = options_.node_id;
  notice.at = now;
  TE_ASSIGN_OR_RETURN(int admitted, Admit(notice, global_targets_));
  report->deliveries += admitted;
  report->orphan_alert = true;
  return Status::Ok();
}

Status Notifier::Pass(bool as_leader, NotifyPassReport* report) {
  TE_RETURN_IF_ERROR(CheckOrphans(report));
  bool leader = as_leader;
  if (!leader) {
    TE_ASSIGN_OR_RETURN(
        leader, store_->AcquireLock(kNotifierLockName, options_.node_id, options_.lock_ttl_ms));
  }
  report->leader = leader;
  // A full read means more is waiting (a failure storm): more rounds, bounded
  // so that a pass ends and the lock is renewed.
  for (int round = 0; leader && round < kMaxRoundsPerPass; ++round) {
    const int before = report->endings;
    TE_RETURN_IF_ERROR(WorkOutbox(report));
    if (report->endings - before < options_.max_pending_per_pass) break;
  }
  return Status::Ok();
}

Result<NotifyPassReport> Notifier::RunPass(bool as_leader) {
  NotifyPassReport report;
  const Status status = Pass(as_leader, &report);
  {
    // Also what a failed pass did before its error.
    MutexLock lock(mu_);
    totals_.deliveries += report.deliveries;
    totals_.suppressed += report.suppressed;
    totals_.skipped += report.skipped;
    totals_.orphan_alerts += report.orphan_alert ? 1 : 0;
    if (!status.ok()) ++totals_.passes_failed;
  }
  if (!status.ok()) return status;
  return report;
}

Result<std::vector<std::pair<std::string, ExecutionId>>> Notifier::SendTest(const JobName& name) {
  TE_ASSIGN_OR_RETURN(JobDefinition job, store_->GetJob(name));
  TE_ASSIGN_OR_RETURN(std::vector<NotifyTarget> targets, ConfiguredTargets(job));
  if (targets.empty()) {
    return InvalidArgument("job " + name.value +
                           " has no notify_targets and [notifications] targets is empty");
  }
  Notice notice;
  notice.kind = Notice::Kind::kTest;
  notice.job = name;
  notice.at = clock_->NowMillis();
  std::vector<std::pair<std::string, ExecutionId>> out;
  for (const NotifyTarget& target : targets) {
    Result<DispatchResult> d = engine_->Dispatch(DeliveryRequest(notice, target));
    if (!d.ok() && d.status().code() == ErrorCode::kNotFound) {
      return Unavailable("the job " + std::string(kNotifyJobName) +
                         " is not defined yet: `taskengine serve` defines it when it starts");
    }
    if (!d.ok()) return d.status();
    out.emplace_back(target.ToString(), d->id);
  }
  return out;
}

bool Notifier::Pause(Millis ms) {
  MutexLock lock(mu_);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!stopping_ && cv_.WaitUntil(mu_, until)) {
  }
  return !stopping_;
}

Status Notifier::Start() {
  TE_RETURN_IF_ERROR(ValidateNotifySettings(options_.settings));
  if (options_.node_id.empty()) return InvalidArgument("the notifier needs a node id for its lock");
  MutexLock lock(mu_);
  if (started_) return Conflict("the notifier is already started");
  started_ = true;
  stopping_ = false;
  loop_ = NamedThread("te-notifier", [this] { Loop(); });
  return Status::Ok();
}

void Notifier::Stop() {
  {
    MutexLock lock(mu_);
    if (!started_ || stopping_) return;
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (loop_.joinable()) loop_.join();
  Status released = store_->ReleaseLock(kNotifierLockName, options_.node_id);
  if (!released.ok()) {
    spdlog::warn("notifier {}: releasing the lock failed: {}", options_.node_id,
                 released.ToString());
  }
}

void Notifier::Loop() {
  while (true) {
    Result<NotifyPassReport> pass = RunPass();
    if (!pass.ok()) {
      spdlog::warn("notifier: {}", pass.status().ToString());
    } else if (pass->deliveries > 0 || pass->suppressed > 0) {
      spdlog::info("notifier: {} endings decided, {} deliveries admitted, {} suppressed",
                   pass->endings, pass->deliveries, pass->suppressed);
    }
    if (!Pause(options_.settings.interval_ms)) return;
  }
}

NotifierTotals Notifier::totals() const {
  MutexLock lock(mu_);
  return totals_;
}

void AppendNotifierMetrics(const NotifierTotals& t, std::string* out) {
  MetricsWriter w(out);
  w.Family("taskengine_notifications_total", "counter",
           "Failure notifications this node's notifier decided, by result: admitted (a delivery "
           "execution per target), suppressed (rate limit; told in the next notification), "
           "skipped (the job notifies nobody) (I6).");
  w.Sample("taskengine_notifications_total", "{result=\"admitted\"}",
           static_cast<double>(t.deliveries));
  w.Sample("taskengine_notifications_total", "{result=\"suppressed\"}",
           static_cast<double>(t.suppressed));
  w.Sample("taskengine_notifications_total", "{result=\"skipped\"}",
           static_cast<double>(t.skipped));
  w.Single("taskengine_notification_orphan_alerts_total", "counter",
           "Orphan alerts this node raised: one sweep recovered more expired leases than "
           "[notifications] orphan_threshold.",
           static_cast<double>(t.orphan_alerts));
  w.Single("taskengine_notifier_passes_failed_total", "counter",
           "Notifier passes a store or dispatch error ended early (retried next pass).",
           static_cast<double>(t.passes_failed));
}

}  // namespace taskengine
