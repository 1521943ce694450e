#include "engine/worker_pool.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <exception>

namespace taskengine {

// --- registry ---------------------------------------------------------------

Status HandlerRegistry::Register(const std::string& name, Handler handler) {
  if (name.empty() || name.size() > 100) return InvalidArgument("handler names are 1..100 chars");
  if (!handler) return InvalidArgument("handler '" + name + "' is empty");
  if (!handlers_.emplace(name, std::move(handler)).second) {
    return Conflict("a handler named '" + name + "' is already registered");
  }
  return Status::Ok();
}

const Handler* HandlerRegistry::Find(const std::string& name) const {
  auto it = handlers_.find(name);
  return it == handlers_.end() ? nullptr : &it->second;
}

// --- task and context ---------------------------------------------------------

// What the handler sees. Thread-safe where job.h says so.
class WorkerPool::Context final : public JobContext {
 public:
  // `effect_duplicates` (not owned) counts reservations answered already_done.
  Context(Store* store, const Lease& lease, std::shared_ptr<const JobDefinition> def,
          std::atomic<std::int64_t>* effect_duplicates)
      : store_(store), lease_(lease), def_(std::move(def)), effect_duplicates_(effect_duplicates) {}

  ExecutionId execution_id() const override { return lease_.id; }
  const JobName& job() const override { return lease_.job; }
  const TenantId& tenant() const override { return lease_.tenant; }
  int attempt() const override { return lease_.attempt; }
  ClaimVersion claim_version() const override { return lease_.version; }
  const std::string& payload_json() const override { return lease_.payload_json; }
  const std::string& config_json() const override { return def_->config_json; }
  Millis timeout_ms() const override { return def_->timeout_ms; }
  std::string effect_key_prefix() const override { return std::to_string(lease_.id.value) + ":"; }

  void SetProgress(int percent) override {
    progress_.store(std::clamp(percent, 0, 100), std::memory_order_relaxed);
    progress_dirty_.store(true, std::memory_order_relaxed);
  }

  void Log(LogLevel level, std::string_view message) override {
    if (state() == LeaseState::kLost) return;
    constexpr std::size_t kMaxLine = 16 * 1024;
    Status s = store_->AppendLog(LeaseRef{lease_.id, lease_.version}, level,
                                 message.substr(0, kMaxLine));
    if (s.code() == ErrorCode::kStale || s.code() == ErrorCode::kNotFound) MarkLost();
  }

  LeaseState Heartbeat() override {
    if (state() == LeaseState::kLost) return LeaseState::kLost;
    auto reply = store_->Heartbeat(LeaseRef{lease_.id, lease_.version}, TakeProgress());
    Observe(reply);
    return state();
  }

  LeaseState Checkpoint() override { return state(); }

  Result<EffectResult> ReserveEffect(std::string_view name) override {
    TE_ASSIGN_OR_RETURN(EffectReply reply, store_->ReserveEffect(Ref(), name));
    if (reply.answer == EffectAnswer::kStale) MarkLost();
    if (reply.answer == EffectAnswer::kCanceled) MarkCancelRequested();
    if (reply.answer == EffectAnswer::kAlreadyDone) ++*effect_duplicates_;
    EffectResult r;
    r.answer = reply.answer;
    r.key = std::move(reply.key);
    r.detail = std::move(reply.detail);
    return r;
  }

  Status CommitEffect(std::string_view name, std::string_view detail) override {
    auto committed = store_->CommitEffect(Ref(), name, detail);
    if (committed.status().code() == ErrorCode::kStale) MarkLost();
    return committed.status();
  }

  Status ReleaseEffect(std::string_view name) override {
    Status s = store_->ReleaseEffect(Ref(), name);
    if (s.code() == ErrorCode::kStale) MarkLost();
    return s;
  }

  // --- for the pool ---
  LeaseState state() const { return static_cast<LeaseState>(state_.load(std::memory_order_acquire)); }
  void MarkLost() { state_.store(static_cast<int>(LeaseState::kLost), std::memory_order_release); }
  void MarkCancelRequested() {
    int active = static_cast<int>(LeaseState::kActive);
    state_.compare_exchange_strong(active, static_cast<int>(LeaseState::kCancelRequested));
  }
  LeaseRef Ref() const { return LeaseRef{lease_.id, lease_.version}; }
  std::optional<int> TakeProgress() {
    if (!progress_dirty_.exchange(false, std::memory_order_relaxed)) return std::nullopt;
    return progress_.load(std::memory_order_relaxed);
  }
  void Observe(const Result<HeartbeatReply>& reply) {
    if (reply.ok()) {
      if (reply->cancel_requested) MarkCancelRequested();
    } else if (reply.status().code() == ErrorCode::kStale ||
               reply.status().code() == ErrorCode::kNotFound) {
      MarkLost();
    }
  }
  const JobDefinition& definition() const { return *def_; }

 private:
  Store* const store_;
  const Lease lease_;
  const std::shared_ptr<const JobDefinition> def_;
  std::atomic<std::int64_t>* const effect_duplicates_;
  std::atomic<int> progress_{0};
  std::atomic<bool> progress_dirty_{false};
  std::atomic<int> state_{static_cast<int>(LeaseState::kActive)};
};

struct WorkerPool::Task {
  Lease lease;
  int queue = 0;
  std::shared_ptr<Context> context;  // set when the handler starts
  // Protected by the pool's mu_.
  bool started = false;
  bool finished = false;
  Millis started_at = 0;
  Millis next_heartbeat_at = 0;
  bool timed_out = false;
  bool cancel_requested = false;  // learned in-process before the handler started
};

namespace {

// Q1: the payload's "schema_version" (1 when absent) must be one the job
// accepts; an empty list accepts any. The error names both.
Result<int> PayloadSchemaVersion(const std::string& payload, const JobDefinition& def) {
  if (def.accepted_schema_versions.empty()) return 1;
  int version = 1;
  auto doc = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (doc.is_object()) {
    auto it = doc.find("schema_version");
    if (it != doc.end()) {
      if (!it->is_number_integer()) {
        return InvalidArgument("payload schema_version must be an integer");
      }
      version = it->get<int>();
    }
  }
  for (int v : def.accepted_schema_versions) {
    if (v == version) return version;
  }
  std::string accepted;
  for (int v : def.accepted_schema_versions) {
    accepted += (accepted.empty() ? "" : ", ") + std::to_string(v);
  }
  return InvalidArgument("unsupported payload schema version " + std::to_string(version) +
                         " for job " + def.name.value + " (accepts " + accepted + ")");
}

}  // namespace

// --- pool -------------------------------------------------------------------------

WorkerPool::WorkerPool(Store* store, Clock* clock, const HandlerRegistry* handlers,
                       WorkerPoolOptions options)
    : store_(store), clock_(clock), handlers_(handlers), options_(std::move(options)) {
  std::vector<QueueConfig> configs = options_.queues;
  if (configs.empty()) configs.push_back(QueueConfig{});
  std::stable_sort(configs.begin(), configs.end(),
                   [](const QueueConfig& a, const QueueConfig& b) { return a.priority > b.priority; });
  for (const QueueConfig& c : configs) {
    QueueState q;
    q.config = c;
    q.limit = c.concurrency > 0 ? c.concurrency : std::max(1, options_.worker_threads);
    queue_index_[c.name] = static_cast<int>(queues_.size());
    queues_.push_back(std::move(q));
  }
}

WorkerPool::~WorkerPool() { Stop(); }

Status WorkerPool::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return Conflict("worker pool already started");
  if (options_.worker_threads < 1) return InvalidArgument("worker pool needs at least one thread");
  started_ = true;
  claimer_ = std::thread([this] { ClaimLoop(); });
  completer_ = std::thread([this] { CompleteLoop(); });
  keeper_ = std::thread([this] { KeepLoop(); });
  for (int i = 0; i < options_.worker_threads; ++i) workers_.emplace_back([this] { WorkLoop(); });
  return Status::Ok();
}

void WorkerPool::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = true;
  }
  claim_cv_.notify_one();
}

void WorkerPool::NotifyCancel(ExecutionId id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_hand_.find(id.value);
  if (it == in_hand_.end()) return;
  it->second->cancel_requested = true;
  if (it->second->context) it->second->context->MarkCancelRequested();
}

EngineStats WorkerPool::stats() const {
  EngineStats s;
  s.claimed = claimed_.load();
  s.succeeded = succeeded_.load();
  s.failed = failed_.load();
  s.stale = stale_.load();
  s.released = released_.load();
  s.published = published_.load();
  s.failed_retryable = failed_retryable_.load();
  s.failed_permanent = failed_permanent_.load();
  s.failed_ambiguous = failed_ambiguous_.load();
  s.failed_unsupported_schema = failed_unsupported_schema_.load();
  s.effect_duplicates = effect_duplicates_.load();
  return s;
}

// How much work a fast queue keeps in hand: its prefetch grows with its
// completion rate, so one claim transaction serves many short jobs.
constexpr double kPrefetchHorizonSeconds = 0.1;

void WorkerPool::SampleRates() {
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - rate_sampled_at_).count();
  if (elapsed < 0.05) return;
  const bool first = rate_sampled_at_ == std::chrono::steady_clock::time_point{};
  rate_sampled_at_ = now;
  for (QueueState& q : queues_) {
    const double observed = first ? 0 : static_cast<double>(q.done - q.done_at_sample) / elapsed;
    q.done_at_sample = q.done;
    q.rate = 0.5 * q.rate + 0.5 * observed;
  }
}

int WorkerPool::TargetInHand(const QueueState& q) const {
  int prefetch = std::max(0, options_.prefetch);
  if (options_.max_prefetch > prefetch) {
    const double grown = q.rate * kPrefetchHorizonSeconds;
    prefetch = static_cast<int>(
        std::min<double>(options_.max_prefetch, std::max<double>(prefetch, grown)));
  }
  return q.limit + prefetch;
}

void WorkerPool::ClaimLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_claiming_) {
    ClaimRequest request;
    request.worker = WorkerId(options_.worker_id);
    int wanted = 0;
    SampleRates();
    for (const QueueState& q : queues_) {
      const int target = TargetInHand(q);
      const int room = target - q.in_hand;
      // Claim in batches: while leases still wait in `ready`, only once half
      // of the queue's allowance is free (one transaction for many leases);
      // at once when nothing waits.
      if (room <= 0 || (!q.ready.empty() && room < std::max(1, (target - q.limit) / 2))) continue;
      const int n = std::min(room, std::max(1, options_.claim_batch));
      request.slots.push_back(QueueSlot{q.config.name, n});
      wanted += n;
    }
    if (wanted == 0) {
      // Full: wait until a worker frees room.
      claim_cv_.wait(lock, [&] { return stop_claiming_ || wake_; });
      wake_ = false;
      continue;
    }
    wake_ = false;
    lock.unlock();
    auto leases = store_->Claim(request);
    lock.lock();
    if (!leases.ok()) {
      spdlog::warn("claim failed: {}", leases.status().ToString());
      claim_cv_.wait_for(lock, std::chrono::milliseconds(options_.poll_interval_ms),
                         [&] { return stop_claiming_; });
      continue;
    }
    const int got = static_cast<int>(leases->size());
    for (Lease& lease : *leases) {
      auto task = std::make_shared<Task>();
      auto it = queue_index_.find(lease.queue);
      task->queue = it == queue_index_.end() ? 0 : it->second;
      task->next_heartbeat_at = clock_->NowMillis() + std::max<Millis>(1, lease.lease_ms / 3);
      task->lease = std::move(lease);
      QueueState& q = queues_[task->queue];
      ++q.in_hand;
      q.ready.push_back(task);
      in_hand_.emplace(task->lease.id.value, task);
    }
    claimed_ += got;
    if (got > 0) work_cv_.notify_all();
    if (got < wanted) {
      // Nothing more is due now: sleep until woken or the poll interval.
      claim_cv_.wait_for(lock, std::chrono::milliseconds(options_.poll_interval_ms),
                         [&] { return stop_claiming_ || wake_; });
    }
  }
}

std::shared_ptr<WorkerPool::Task> WorkerPool::NextReady() {
  for (QueueState& q : queues_) {
    if (q.ready.empty() || q.running >= q.limit) continue;
    auto task = q.ready.front();
    q.ready.pop_front();
    return task;
  }
  return nullptr;
}

void WorkerPool::WorkLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    std::shared_ptr<Task> task;
    work_cv_.wait(lock, [&] { return stop_workers_ || (task = NextReady()) != nullptr; });
    if (!task) return;
    ++queues_[task->queue].running;
    task->started = true;
    task->started_at = clock_->NowMillis();
    lock.unlock();
    RunTask(task);
    lock.lock();
    QueueState& q = queues_[task->queue];
    --q.running;
    --q.in_hand;
    ++q.done;
    in_hand_.erase(task->lease.id.value);
    wake_ = true;
    claim_cv_.notify_one();
    idle_cv_.notify_all();
    if (!q.ready.empty()) work_cv_.notify_one();
  }
}

Result<std::shared_ptr<const JobDefinition>> WorkerPool::Definition(const JobName& job) {
  {
    std::lock_guard<std::mutex> lock(defs_mu_);
    auto it = defs_.find(job.value);
    if (it != defs_.end()) return it->second;
  }
  TE_ASSIGN_OR_RETURN(JobDefinition def, store_->GetJob(job));
  auto shared = std::make_shared<const JobDefinition>(std::move(def));
  std::lock_guard<std::mutex> lock(defs_mu_);
  defs_[job.value] = shared;
  return shared;
}

void WorkerPool::RunTask(const std::shared_ptr<Task>& task) {
  FinishRequest finish;
  finish.lease = LeaseRef{task->lease.id, task->lease.version};
  auto def = Definition(task->lease.job);
  if (!def.ok()) {
    finish.kind = def.status().code() == ErrorCode::kNotFound ? FinishRequest::Kind::kFail
                                                               : FinishRequest::Kind::kRelease;
    finish.failure_class = FailureClass::kPermanent;
    finish.error = "job definition unavailable: " + def.status().ToString();
    Finish(task, std::move(finish));
    return;
  }
  const Handler* handler = handlers_->Find((*def)->handler);
  if (handler == nullptr) {
    finish.kind = FinishRequest::Kind::kFail;
    finish.failure_class = FailureClass::kPermanent;
    finish.error = "no handler named '" + (*def)->handler + "' is registered";
    Finish(task, std::move(finish));
    return;
  }
  if (auto version = PayloadSchemaVersion(task->lease.payload_json, **def); !version.ok()) {
    finish.kind = FinishRequest::Kind::kFail;
    finish.failure_class = FailureClass::kPermanent;
    finish.unsupported_schema = true;
    finish.error = version.status().message();
    Finish(task, std::move(finish));
    return;
  }
  auto context = std::make_shared<Context>(store_, task->lease, *def, &effect_duplicates_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    task->context = context;
    if (task->cancel_requested) context->MarkCancelRequested();
  }
  HandlerResult result;
  try {
    result = (*handler)(*context);
  } catch (const std::exception& e) {
    result = HandlerResult::Retryable(std::string("handler threw: ") + e.what());
  } catch (...) {
    result = HandlerResult::Retryable("handler threw a non-standard exception");
  }
  if (context->state() == LeaseState::kLost) {
    // Someone else holds the execution now (or it is gone): publish nothing.
    ++stale_;
    return;
  }
  switch (result.kind) {
    case HandlerResult::Kind::kSuccess:
      finish.kind = FinishRequest::Kind::kComplete;
      finish.result_json = std::move(result.result_json);
      break;
    case HandlerResult::Kind::kRetryable:
      finish.kind = FinishRequest::Kind::kFail;
      finish.failure_class = FailureClass::kRetryable;
      break;
    case HandlerResult::Kind::kPermanent:
      finish.kind = FinishRequest::Kind::kFail;
      finish.failure_class = FailureClass::kPermanent;
      break;
    case HandlerResult::Kind::kAmbiguous:
      finish.kind = FinishRequest::Kind::kFail;
      finish.failure_class = FailureClass::kAmbiguous;
      break;
    case HandlerResult::Kind::kCanceled:
      // The handler stopped at a cancellation point; the state machine ends it
      // canceled because cancellation was requested (release while requested).
      finish.kind = FinishRequest::Kind::kRelease;
      break;
  }
  finish.error = std::move(result.error);
  finish.retry_after_ms = result.retry_after_ms;
  if (auto progress = context->TakeProgress(); progress && finish.kind != FinishRequest::Kind::kComplete) {
    (void)store_->Heartbeat(finish.lease, progress);
  }
  Finish(task, std::move(finish));
}

void WorkerPool::Finish(const std::shared_ptr<Task>& task, FinishRequest request) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    task->finished = true;
  }
  if (request.kind == FinishRequest::Kind::kComplete) ++succeeded_;
  if (request.kind == FinishRequest::Kind::kFail) {
    ++failed_;
    if (request.unsupported_schema) {
      ++failed_unsupported_schema_;
    } else if (request.failure_class == FailureClass::kRetryable) {
      ++failed_retryable_;
    } else if (request.failure_class == FailureClass::kAmbiguous) {
      ++failed_ambiguous_;
    } else {
      ++failed_permanent_;
    }
  }
  if (request.kind == FinishRequest::Kind::kRelease) ++released_;
  {
    std::lock_guard<std::mutex> lock(finish_mu_);
    finishes_.push_back(std::move(request));
  }
  finish_cv_.notify_one();
}

void WorkerPool::CompleteLoop() {
  std::vector<FinishRequest> batch;
  std::unique_lock<std::mutex> lock(finish_mu_);
  while (true) {
    finish_cv_.wait(lock, [&] { return stop_completer_ || !finishes_.empty(); });
    if (finishes_.empty()) return;  // stopping and drained
    batch.swap(finishes_);
    finishes_in_flight_ = static_cast<int>(batch.size());
    lock.unlock();
    for (int attempt = 0; !batch.empty(); ++attempt) {
      auto replies = store_->FinishBatch(batch);
      std::vector<FinishRequest> retry;
      for (std::size_t i = 0; i < replies.size(); ++i) {
        if (replies[i].ok()) {
          ++published_;
          if (options_.on_published) options_.on_published(batch[i].lease.id, replies[i]->status);
          continue;
        }
        const Status& s = replies[i].status();
        if (s.code() == ErrorCode::kUnavailable && attempt < 20) {
          retry.push_back(std::move(batch[i]));
          continue;
        }
        if (s.code() == ErrorCode::kStale || s.code() == ErrorCode::kNotFound) ++stale_;
        spdlog::warn("outcome of execution {} not published: {}", batch[i].lease.id.value,
                     s.ToString());
      }
      batch.swap(retry);
      if (!batch.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    lock.lock();
    finishes_in_flight_ = 0;
    idle_cv_.notify_all();
  }
}

// Handlers that enforce their own timeout (the command handler) get this long
// past the job's timeout to report before the pool gives up on them.
constexpr Millis kTimeoutSlackMs = 10'000;

void WorkerPool::KeepLoop() {
  std::unique_lock<std::mutex> keep_lock(keep_mu_);
  while (!stop_keeper_) {
    keep_cv_.wait_for(keep_lock, std::chrono::milliseconds(50), [&] { return stop_keeper_; });
    if (stop_keeper_) break;
    keep_lock.unlock();
    const Millis now = clock_->NowMillis();
    std::vector<std::shared_ptr<Task>> due;
    std::vector<HeartbeatRequest> requests;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [id, task] : in_hand_) {
        if (task->finished || task->timed_out) continue;
        if (task->started && task->context &&
            now - task->started_at > task->context->definition().timeout_ms + kTimeoutSlackMs) {
          // Past its timeout: stop extending the lease; the handler learns it
          // lost the claim at its next checkpoint, and the sweeper recovers it.
          task->timed_out = true;
          task->context->MarkLost();
          spdlog::warn("execution {} exceeded its timeout; its lease will lapse", id);
          continue;
        }
        if (task->next_heartbeat_at > now) continue;
        task->next_heartbeat_at = now + std::max<Millis>(1, task->lease.lease_ms / 3);
        HeartbeatRequest h;
        h.lease = LeaseRef{task->lease.id, task->lease.version};
        if (task->context) h.progress = task->context->TakeProgress();
        requests.push_back(h);
        due.push_back(task);
      }
    }
    if (!requests.empty()) {
      auto replies = store_->HeartbeatBatch(requests);
      for (std::size_t i = 0; i < replies.size(); ++i) {
        std::shared_ptr<Context> ctx;
        {
          std::lock_guard<std::mutex> lock(mu_);
          ctx = due[i]->context;
        }
        if (ctx) ctx->Observe(replies[i]);
        if (!replies[i].ok() && replies[i].status().code() != ErrorCode::kUnavailable) {
          ++stale_;
        }
      }
    }
    keep_lock.lock();
  }
}

void WorkerPool::Stop() {
  std::vector<std::shared_ptr<Task>> unstarted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_ || stopped_) return;
    stopped_ = true;
    stop_claiming_ = true;
  }
  claim_cv_.notify_all();
  claimer_.join();
  // Leases not yet started go back at once.
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (QueueState& q : queues_) {
      for (auto& task : q.ready) unstarted.push_back(task);
      q.in_hand -= static_cast<int>(q.ready.size());
      q.ready.clear();
    }
    for (auto& task : unstarted) in_hand_.erase(task->lease.id.value);
  }
  for (auto& task : unstarted) {
    FinishRequest r;
    r.lease = LeaseRef{task->lease.id, task->lease.version};
    r.kind = FinishRequest::Kind::kRelease;
    Finish(task, std::move(r));
  }
  // Running handlers may finish within the grace period.
  {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait_for(lock, std::chrono::milliseconds(options_.shutdown_grace_ms), [&] {
      for (const QueueState& q : queues_) {
        if (q.running > 0) return false;
      }
      return true;
    });
    // Past the grace: release what still runs so others can claim it at once;
    // the handlers learn at their next checkpoint that the claim is gone.
    for (auto& [id, task] : in_hand_) {
      if (task->finished) continue;
      task->finished = true;
      if (task->context) task->context->MarkLost();
      FinishRequest r;
      r.lease = LeaseRef{task->lease.id, task->lease.version};
      r.kind = FinishRequest::Kind::kRelease;
      {
        std::lock_guard<std::mutex> flock(finish_mu_);
        finishes_.push_back(std::move(r));
      }
      ++released_;
      spdlog::warn("execution {} still running after the shutdown grace; lease released", id);
    }
    stop_workers_ = true;
  }
  finish_cv_.notify_one();
  work_cv_.notify_all();
  for (auto& w : workers_) w.join();
  {
    std::lock_guard<std::mutex> lock(finish_mu_);
    stop_completer_ = true;
  }
  finish_cv_.notify_one();
  completer_.join();
  {
    std::lock_guard<std::mutex> lock(keep_mu_);
    stop_keeper_ = true;
  }
  keep_cv_.notify_all();
  keeper_.join();
}

}  // namespace taskengine
