#include "engine/retention.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/prometheus_text.h"
#include "platform/thread_name.h"
#include "storage/store_rules.h"

namespace taskengine {
namespace {

constexpr Millis kMaxAgeMs = 100 * 366 * kRetentionDayMs;
// Pages one ReclaimSpace call gives back (4 KiB pages: 8 MiB), so that giving
// back the space of a large purge is bounded steps too.
constexpr int kReclaimPagesPerStep = 2'048;

Millis Cutoff(Millis now, Millis age) { return age > 0 ? std::max<Millis>(1, now - age) : 0; }

// The rows of the next purge transaction after one of `rows` rows took
// `took_us`: scaled toward half the budget (so that a batch's usual
// variation stays under it), at most doubling or quartering at a time,
// between 1 and the policy's batch.
int NextBatchRows(int rows, std::int64_t took_us, const RetentionPolicy& policy) {
  if (policy.max_transaction_ms == 0) return policy.batch;
  const std::int64_t target_us = policy.max_transaction_ms * 1000 / 2;
  const std::int64_t r = rows;
  std::int64_t next = took_us <= 0 ? 2 * r : r * target_us / took_us;
  next = std::clamp<std::int64_t>(next, std::max<std::int64_t>(1, r / 4), 2 * r);
  return static_cast<int>(std::clamp<std::int64_t>(next, 1, policy.batch));
}

}  // namespace

RetentionCutoffs CutoffsAt(const RetentionPolicy& policy, Millis now) {
  RetentionCutoffs c;
  c.executions_ended_before = Cutoff(now, policy.executions_ms);
  c.logs_before = Cutoff(now, policy.logs_ms);
  c.audit_before = Cutoff(now, policy.audit_ms);
  return c;
}

Status ValidateRetentionPolicy(const RetentionPolicy& p) {
  const struct {
    const char* name;
    Millis value;
  } ages[] = {{"executions", p.executions_ms}, {"logs", p.logs_ms}, {"audit", p.audit_ms}};
  for (const auto& a : ages) {
    if (a.value < 0 || a.value > kMaxAgeMs) {
      return InvalidArgument(std::string("retention of ") + a.name +
                             " must be 0 (keep forever) up to 100 years");
    }
  }
  if (p.batch < 1 || p.batch > storage_internal::kMaxPurgeBatch) {
    return InvalidArgument("retention batch must be in 1.." +
                           std::to_string(storage_internal::kMaxPurgeBatch));
  }
  if (p.interval_ms < 1'000 || p.interval_ms > kRetentionDayMs) {
    return InvalidArgument("retention interval must be from 1 second to 1 day");
  }
  if (p.max_pause_ms < 0 || p.max_pause_ms > 10'000) {
    return InvalidArgument("retention pause must be 0..10000 ms");
  }
  if (p.max_transaction_ms < 0 || p.max_transaction_ms > 10'000) {
    return InvalidArgument("retention transaction budget must be 0..10000 ms");
  }
  return Status::Ok();
}

void PurgeTotals::Add(const PurgeTotals& o) {
  executions += o.executions;
  logs += o.logs;
  attempts += o.attempts;
  effects += o.effects;
  audit += o.audit;
  if (o.oldest_ended_at > 0 && (oldest_ended_at == 0 || o.oldest_ended_at < oldest_ended_at)) {
    oldest_ended_at = o.oldest_ended_at;
  }
  newest_ended_at = std::max(newest_ended_at, o.newest_ended_at);
  batches += o.batches;
}

void PurgeTotals::Add(const PurgeReport& b) {
  Add(PurgeTotals{b.executions, b.logs, b.attempts, b.effects, b.audit, b.oldest_ended_at,
                  b.newest_ended_at, 1});
}

Retention::Retention(Store* store, const Clock* clock, RetentionOptions options)
    : store_(store), clock_(clock), options_(std::move(options)) {}

Retention::~Retention() { Stop(); }

Result<PurgeReport> Retention::DryRun() {
  TE_RETURN_IF_ERROR(ValidateRetentionPolicy(options_.policy));
  return store_->Purge(CutoffsAt(options_.policy, clock_->NowMillis()), options_.policy.batch,
                       /*dry_run=*/true);
}

Result<PurgeTotals> Retention::RunPass(const Progress& progress) {
  bool lost_lock = false;
  PurgeTotals totals;
  TE_RETURN_IF_ERROR(Pass(progress, /*locked=*/false, &lost_lock, &totals));
  return totals;
}

Status Retention::Pass(const Progress& progress, bool locked, bool* lost_lock, PurgeTotals* out) {
  const RetentionPolicy& policy = options_.policy;
  TE_RETURN_IF_ERROR(ValidateRetentionPolicy(policy));
  const RetentionCutoffs cutoffs = CutoffsAt(policy, clock_->NowMillis());
  PurgeTotals& totals = *out;
  auto failed = [&](const Status& s) {
    return Status(s.code(), "retention stopped after removing " + std::to_string(totals.rows()) +
                                " rows (" + std::to_string(totals.executions) +
                                " executions): " + s.message());
  };
  int rows = policy.batch;
  auto renewed_at = clock_->Steady();
  const auto renew_every = std::chrono::milliseconds(std::max<Millis>(1, options_.lock_ttl_ms / 3));
  while (true) {
    // Real time: the budget is about how long the writer is held.
    const auto started = std::chrono::steady_clock::now();
    Result<PurgeReport> batch = store_->Purge(cutoffs, rows, /*dry_run=*/false);
    if (!batch.ok()) return failed(batch.status());
    const std::int64_t took_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                     std::chrono::steady_clock::now() - started)
                                     .count();
    totals.Add(*batch);
    if (progress) progress(*batch, totals);
    if (!batch->more) break;
    rows = NextBatchRows(rows, took_us, policy);
    if (locked && clock_->Steady() - renewed_at >= renew_every) {
      Result<bool> held =
          store_->AcquireLock(kRetentionLockName, options_.node_id, options_.lock_ttl_ms);
      if (!held.ok()) return failed(held.status());
      if (!*held) {
        *lost_lock = true;
        break;
      }
      renewed_at = clock_->Steady();
    }
    // As long as the batch took: the writer is free at least half the time.
    const Millis pause_ms =
        std::clamp<Millis>((took_us + 999) / 1000, 1, std::max<Millis>(1, policy.max_pause_ms));
    if (!Pause(pause_ms)) break;
  }
  // Space back: SQLite's freed pages go to the file system in steps.
  if (totals.rows() > 0) {
    while (true) {
      Result<std::int64_t> pages = store_->ReclaimSpace(kReclaimPagesPerStep);
      if (!pages.ok()) {
        spdlog::warn("retention: giving space back failed: {}", pages.status().ToString());
        break;
      }
      if (*pages < kReclaimPagesPerStep || !Pause(1)) break;
    }
  }
  return Status::Ok();
}

bool Retention::Pause(Millis ms) {
  MutexLock lock(mu_);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!stopping_ && cv_.WaitUntil(mu_, until)) {
  }
  return !stopping_;
}

Status Retention::Start() {
  TE_RETURN_IF_ERROR(ValidateRetentionPolicy(options_.policy));
  if (options_.node_id.empty()) return InvalidArgument("retention needs a node id for its lock");
  MutexLock lock(mu_);
  if (started_) return Conflict("the retention loop is already started");
  started_ = true;
  stopping_ = false;
  loop_ = NamedThread("te-retention", [this] { Loop(); });
  return Status::Ok();
}

void Retention::Stop() {
  {
    MutexLock lock(mu_);
    if (!started_ || stopping_) return;
    stopping_ = true;
  }
  cv_.NotifyAll();
  if (loop_.joinable()) loop_.join();
  Status released = store_->ReleaseLock(kRetentionLockName, options_.node_id);
  if (!released.ok()) {
    spdlog::warn("retention {}: releasing the lock failed: {}", options_.node_id,
                 released.ToString());
  }
}

void Retention::Loop() {
  while (true) {
    const auto started = clock_->Steady();
    Result<bool> held =
        store_->AcquireLock(kRetentionLockName, options_.node_id, options_.lock_ttl_ms);
    if (!held.ok()) {
      spdlog::warn("retention: taking the lock failed: {}", held.status().ToString());
    } else if (*held) {
      bool lost_lock = false;
      PurgeTotals pass;
      const Status status = Pass({}, /*locked=*/true, &lost_lock, &pass);
      const Millis took =
          std::chrono::duration_cast<std::chrono::milliseconds>(clock_->Steady() - started).count();
      {
        MutexLock lock(mu_);
        ++totals_.passes;
        totals_.purged.Add(pass);  // also what a failed pass removed before its error
        if (status.ok()) {
          totals_.last_pass_finished_at = clock_->NowMillis();
          totals_.last_pass_duration_ms = took;
        } else {
          ++totals_.passes_failed;
        }
      }
      if (!status.ok()) {
        spdlog::warn("retention: {}", status.ToString());
      } else if (pass.rows() > 0) {
        spdlog::info(
            "retention: removed {} executions, {} log lines, {} attempts, {} effects, {} audit "
            "records in {} batches ({} ms)",
            pass.executions, pass.logs, pass.attempts, pass.effects, pass.audit, pass.batches,
            took);
      }
      if (lost_lock) spdlog::info("retention {}: another node took the lock", options_.node_id);
    }
    const Millis took =
        std::chrono::duration_cast<std::chrono::milliseconds>(clock_->Steady() - started).count();
    if (!Pause(std::max<Millis>(1, options_.policy.interval_ms - took))) return;
  }
}

RetentionTotals Retention::totals() const {
  MutexLock lock(mu_);
  return totals_;
}

void AppendRetentionMetrics(const RetentionTotals& t, std::string* out) {
  MetricsWriter w(out);
  w.Family("taskengine_retention_purged_total", "counter",
           "Rows this node's retention loop removed, by kind (I7).");
  const struct {
    const char* kind;
    std::int64_t value;
  } kinds[] = {{"executions", t.purged.executions},
               {"logs", t.purged.logs},
               {"attempts", t.purged.attempts},
               {"effects", t.purged.effects},
               {"audit", t.purged.audit}};
  for (const auto& k : kinds) {
    w.Sample("taskengine_retention_purged_total", Label("kind", k.kind),
             static_cast<double>(k.value));
  }
  w.Family("taskengine_retention_passes_total", "counter",
           "Retention passes this node ran as the holder of the retention lock, by result.");
  w.Sample("taskengine_retention_passes_total", "{result=\"ok\"}",
           static_cast<double>(t.passes - t.passes_failed));
  w.Sample("taskengine_retention_passes_total", "{result=\"failed\"}",
           static_cast<double>(t.passes_failed));
  w.Single("taskengine_retention_last_purge_timestamp_seconds", "gauge",
           "Unix time this node's last successful retention pass ended; 0 before the first.",
           static_cast<double>(t.last_pass_finished_at) / 1000.0);
  w.Single("taskengine_retention_last_purge_duration_seconds", "gauge",
           "Wall-clock duration of this node's last successful retention pass.",
           static_cast<double>(t.last_pass_duration_ms) / 1000.0);
}

}  // namespace taskengine
