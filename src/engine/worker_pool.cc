#include "engine/worker_pool.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <nlohmann/json.hpp>

#include "core/pickup_trace.h"
#include "platform/thread_name.h"

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
    Status s =
        store_->AppendLog(LeaseRef{lease_.id, lease_.version}, level, message.substr(0, kMaxLine));
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
  LeaseState state() const {
    return static_cast<LeaseState>(state_.load(std::memory_order_acquire));
  }
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
  bool started = false;  // handed to a worker (its handler runs or is about to)
  bool marked = false;   // the store knows its handler starts (MarkStarted)
  bool lost = false;     // found stale before its context existed
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
  std::stable_sort(configs.begin(), configs.end(), [](const QueueConfig& a, const QueueConfig& b) {
    return a.priority > b.priority;
  });
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
  MutexLock lock(mu_);
  if (started_) return Conflict("worker pool already started");
  if (options_.worker_threads < 1) return InvalidArgument("worker pool needs at least one thread");
  started_ = true;
  started_at_ = clock_->NowMillis();
  reported_at_ = started_at_;
  {
    // The registration without mu_ (Registration takes it).
    WorkerInfo w;
    w.id = WorkerId(options_.worker_id);
    w.kind = WorkerKind::kPool;
    w.hostname = options_.hostname;
    w.pid = options_.pid;
    w.threads = options_.worker_threads;
    w.started_at = started_at_;
    if (Status s = store_->ReportWorker(w); !s.ok()) {
      spdlog::warn("worker pool {}: registration failed: {}", options_.worker_id, s.ToString());
    }
  }
  claimer_ = NamedThread("te-claimer", [this] { ClaimLoop(); });
  completer_ = NamedThread("te-outcomes", [this] { CompleteLoop(); });
  keeper_ = NamedThread("te-keeper", [this] { KeepLoop(); });
  for (int i = 0; i < options_.worker_threads; ++i) {
    workers_.push_back(NamedThread("te-worker", [this] { WorkLoop(); }));
  }
  return Status::Ok();
}

void WorkerPool::Wake() { WakeFor(nullptr); }

void WorkerPool::Wake(const std::string& queue) { WakeFor(&queue); }

void WorkerPool::WakeFor(const std::string* queue) {
  bool to_worker = false;
  {
    MutexLock lock(mu_);
    // Work this pool does not claim (a queue left to remote workers or to
    // other nodes) wakes nobody here.
    if (queue != nullptr && !queue_index_.contains(*queue)) return;
    // A parked worker claims the new work itself (one claim, marked started,
    // no hop through the claimer); with none parked, the claimer claims it.
    to_worker = !stop_claiming_ && parked_workers_ > direct_claims_ + admission_reserved_;
    if (to_worker) {
      ++direct_claims_;
    } else {
      wake_ = true;
    }
  }
  pickup_trace::Mark(pickup_trace::kWakeSignalled);
  if (to_worker) {
    work_cv_.NotifyOne();
  } else {
    claim_cv_.NotifyOne();
  }
}

bool WorkerPool::ReserveForAdmission(const std::string& queue) {
  // Every admission asks, on the store's writer thread: a busy pool answers
  // without its lock.
  if (parked_hint_.load(std::memory_order_relaxed) == 0) return false;
  MutexLock lock(mu_);
  if (!started_ || stop_claiming_ || parked_workers_ <= direct_claims_ + admission_reserved_) {
    return false;
  }
  auto it = queue_index_.find(queue);
  if (it == queue_index_.end()) return false;  // a queue this pool does not serve
  QueueState& q = queues_[it->second];
  if (!MayStartOneMore(q)) return false;
  ++q.reserved;
  ++admission_reserved_;
  return true;
}

void WorkerPool::UnreserveAdmission(const std::string& queue) {
  MutexLock lock(mu_);
  auto it = queue_index_.find(queue);
  if (it == queue_index_.end()) return;
  --queues_[it->second].reserved;
  if (--admission_reserved_ == 0) idle_cv_.NotifyAll();  // Stop may wait for it
}

void WorkerPool::DeliverAdmitted(Lease lease) {
  pickup_trace::Mark(pickup_trace::kClaimReturned);
  ++claimed_;
  MutexLock lock(mu_);
  std::shared_ptr<Task> task = TakeLease(std::move(lease));
  task->marked = true;
  if (stop_claiming_) {
    // Stopping: nothing new starts (L6). GiveBack queues the release for the
    // completer, with mu_ let go meanwhile, so the reservation below ends
    // only after it: Stop waits for that and then drains the completer.
    GiveBack({task});
  } else {
    // Ready before any unmarked lease of its queue: a parked worker takes it.
    EnqueueMarked(queues_[task->queue], task);
    work_cv_.NotifyOne();
  }
  auto it = queue_index_.find(task->lease.queue);
  if (it != queue_index_.end()) {
    --queues_[it->second].reserved;
    if (--admission_reserved_ == 0) idle_cv_.NotifyAll();  // Stop may wait for it
  }
}

void WorkerPool::NotifyCancel(ExecutionId id) {
  MutexLock lock(mu_);
  auto [begin, end] = in_hand_.equal_range(id.value);
  for (auto it = begin; it != end; ++it) {
    it->second->cancel_requested = true;
    if (it->second->context) it->second->context->MarkCancelRequested();
  }
}

void WorkerPool::EraseInHand(const std::shared_ptr<Task>& task) {
  auto [begin, end] = in_hand_.equal_range(task->lease.id.value);
  for (auto it = begin; it != end; ++it) {
    if (it->second == task) {
      in_hand_.erase(it);
      return;
    }
  }
}

void WorkerPool::DropUnstarted(const std::shared_ptr<Task>& task) {
  if (task->finished) return;
  task->finished = true;
  QueueState& q = queues_[task->queue];
  auto it = std::find(q.ready.begin(), q.ready.end(), task);
  if (it != q.ready.end()) {
    if (task->marked) --q.marked_ready;
    q.ready.erase(it);
  }
  --q.in_hand;
  EraseInHand(task);
  ++stale_;
  wake_ = true;
  claim_cv_.NotifyOne();
}

WorkerInfo WorkerPool::Registration(bool stopped) {
  WorkerInfo w;
  w.id = WorkerId(options_.worker_id);
  w.kind = WorkerKind::kPool;
  w.hostname = options_.hostname;
  w.pid = options_.pid;
  w.threads = options_.worker_threads;
  w.started_at = started_at_;
  w.processed = succeeded_.load() + failed_.load();
  w.failed = failed_.load();
  if (!stopped) {
    MutexLock lock(mu_);
    for (const QueueState& q : queues_) w.busy += q.running;
    for (const auto& [id, task] : in_hand_) {
      if (task->started && !task->finished && w.current.size() < kMaxWorkerCurrent) {
        w.current.push_back(task->lease.id);
      }
    }
    std::sort(w.current.begin(), w.current.end(),
              [](ExecutionId a, ExecutionId b) { return a.value < b.value; });
  }
  w.state = stopped ? WorkerState::kStopped : w.busy > 0 ? WorkerState::kBusy : WorkerState::kIdle;
  return w;
}

void WorkerPool::Report(bool stopped) {
  if (Status s = store_->ReportWorker(Registration(stopped)); !s.ok()) {
    spdlog::warn("worker pool {}: registration failed: {}", options_.worker_id, s.ToString());
  }
}

EngineStats WorkerPool::stats() const {
  EngineStats s;
  s.claimed = claimed_.load();
  s.succeeded = succeeded_.load();
  s.failed = failed_.load();
  s.stale = stale_.load();
  s.released = released_.load();
  s.published = published_.load();
  s.completed = completed_.load();
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
  const Clock::SteadyTime now = clock_->Steady();
  const bool first = !rate_sampled_at_.has_value();
  const double elapsed = first ? 0 : std::chrono::duration<double>(now - *rate_sampled_at_).count();
  if (!first && elapsed < 0.05) return;
  rate_sampled_at_ = now;
  for (QueueState& q : queues_) {
    const double observed = first ? 0 : static_cast<double>(q.done - q.done_at_sample) / elapsed;
    q.done_at_sample = q.done;
    q.rate = 0.5 * q.rate + 0.5 * observed;
    if (!first) q.rate_known = true;
  }
}

bool WorkerPool::AnyRunning() const {
  for (const QueueState& q : queues_) {
    if (q.running > 0) return true;
  }
  return false;
}

int WorkerPool::TargetInHand(const QueueState& q) const {
  const int fixed = std::max(0, options_.prefetch);
  if (options_.max_prefetch <= 0) return q.limit + fixed;
  // Until the rate is known, the configured prefetch: a queue's first claim
  // takes what is due in priority order (O2) instead of one lease at a time.
  if (!q.rate_known) return q.limit + fixed;
  const double wanted = std::ceil(q.rate * kPrefetchHorizonSeconds);
  const int most = std::max(fixed, options_.max_prefetch);
  return q.limit + static_cast<int>(std::clamp<double>(wanted, 1, most));
}

bool WorkerPool::MayStartOneMore(const QueueState& q) const {
  return q.running + q.reserved < q.limit && q.in_hand + q.reserved < TargetInHand(q);
}

// A queue keeps about this much work (at its completion rate) marked started
// ahead of its workers, refilled in one store call (a claim that marks, or a
// MarkStarted of leases claimed before) when half of it is used: the workers
// of a fast queue never wait for a mark, and should the node die, at most
// this much work was marked started without its handler having run. A queue
// slower than two jobs in this time is marked one lease at a time, as each
// handler starts. Where marking takes longer (a database whose commit waits
// for a slow disk flush), the horizon is two such calls' time, so that a
// refill is done before the marked work runs out.
constexpr double kMarkAheadSeconds = 0.005;
constexpr int kMaxMarkBatch = 1024;

int WorkerPool::MarkBatch(const QueueState& q) const {
  const double ahead = std::max(kMarkAheadSeconds, 2 * mark_seconds_);
  return static_cast<int>(std::clamp<double>(q.rate * ahead, 1, kMaxMarkBatch));
}

void WorkerPool::ClaimLoop() {
  MutexLock lock(mu_);
  while (!stop_claiming_) {
    // When this pass began (only while a pickup trace is installed).
    const std::int64_t awake_ns = pickup_trace::Installed() != nullptr ? pickup_trace::NowNs() : 0;
    ClaimRequest request;
    request.worker = WorkerId(options_.worker_id);
    int wanted = 0;
    // By queue index: this claim marks the queue's leases started.
    std::vector<bool> marks_queue(queues_.size(), false);
    SampleRates();
    int idle_workers = options_.worker_threads;
    for (const QueueState& q : queues_) idle_workers -= q.running;
    for (std::size_t qi = 0; qi < queues_.size(); ++qi) {
      const QueueState& q = queues_[qi];
      const int target = TargetInHand(q);
      // A slot reserved for a claim at admission gets its lease from the
      // writer: it is not room for this claim.
      const int room = target - q.in_hand - q.reserved;
      if (room <= 0) continue;
      if (const int ahead = MarkBatch(q); ahead >= 2) {
        // A fast queue: its workers run what is claimed within moments, so
        // the claim marks it started (L4) instead of a MarkStarted after
        // it. Enough for its idle workers and its mark horizon, once fewer
        // than half of that wait marked; while leases wait unmarked (claimed
        // before the queue was fast), its workers mark those first.
        const int idle = std::clamp(q.limit - q.running, 0, std::max(0, idle_workers));
        const int marked = static_cast<int>(q.marked_ready);
        if (q.ready.size() > q.marked_ready || marked >= idle + ahead / 2) continue;
        const int n = std::min({room, idle + ahead - marked, std::max(1, options_.claim_batch)});
        request.slots.push_back(QueueSlot{.queue = q.config.name, .max = n, .mark_started = true});
        marks_queue[qi] = true;
        wanted += n;
        continue;
      }
      // Claim in batches: while leases still wait in `ready`, only once half
      // of the queue's allowance is free (one transaction for many leases);
      // at once when nothing waits.
      if (!q.ready.empty() && room < std::max(1, (target - q.limit) / 2)) continue;
      const int n = std::min(room, std::max(1, options_.claim_batch));
      request.slots.push_back(QueueSlot{q.config.name, n});
      wanted += n;
    }
    if (wanted == 0) {
      // Full: wait until a worker frees room.
      while (!stop_claiming_ && !wake_) claim_cv_.Wait(mu_);
      wake_ = false;
      continue;
    }
    wake_ = false;
    lock.Unlock();
    // L4: the leases of the other queues are marked when a handler takes them.
    request.mark_started = false;
    const bool marks = std::find(marks_queue.begin(), marks_queue.end(), true) != marks_queue.end();
    const Clock::SteadyTime claim_start = clock_->Steady();
    auto leases = store_->Claim(request);
    const double claim_seconds =
        std::chrono::duration<double>(clock_->Steady() - claim_start).count();
    // Short: how long until more of these queues is due (-1: unknown).
    Millis due_in = -1;
    if (leases.ok() && static_cast<int>(leases->size()) < wanted) {
      std::vector<std::string> queues;
      for (const QueueSlot& slot : request.slots) queues.push_back(slot.queue);
      Result<Millis> next = store_->NextDueIn(queues);
      if (next.ok()) due_in = *next;
    }
    if (pickup_trace::PickupTrace* trace = pickup_trace::Installed();
        trace != nullptr && leases.ok() && !leases->empty()) [[unlikely]] {
      pickup_trace::MarkAt(trace, pickup_trace::kClaimerAwake, awake_ns);
      pickup_trace::MarkWrite(trace, pickup_trace::kClaimQueued, pickup_trace::last_write);
      pickup_trace::MarkAt(trace, pickup_trace::kClaimReturned, pickup_trace::NowNs());
    }
    lock.Lock();
    if (!leases.ok()) {
      spdlog::warn("claim failed: {}", leases.status().ToString());
      const auto retry_at =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.poll_interval_ms);
      while (!stop_claiming_ && claim_cv_.WaitUntil(mu_, retry_at)) {
      }
      continue;
    }
    // A claim that marks is how a fast queue's marked work is refilled: its
    // time sizes the mark horizon as a MarkStarted's does.
    if (marks) mark_seconds_ = 0.8 * mark_seconds_ + 0.2 * claim_seconds;
    const int got = static_cast<int>(leases->size());
    for (Lease& lease : *leases) {
      std::shared_ptr<Task> task = TakeLease(std::move(lease));
      QueueState& q = queues_[task->queue];
      if (marks_queue[task->queue]) {
        EnqueueMarked(q, task);  // in claim order
      } else {
        q.ready.push_back(task);
      }
    }
    claimed_ += got;
    if (got > 0) work_cv_.NotifyAll();
    if (got < wanted) {
      // Nothing more is due now: sleep until woken, the poll interval, or
      // (sooner) when the next queued execution of these queues is due.
      const Millis sleep_ms = due_in >= 0 ? std::clamp<Millis>(due_in, 1, options_.poll_interval_ms)
                                          : options_.poll_interval_ms;
      const auto poll_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(sleep_ms);
      while (!stop_claiming_ && !wake_ && claim_cv_.WaitUntil(mu_, poll_at)) {
      }
    }
  }
}

std::shared_ptr<WorkerPool::Task> WorkerPool::NextReady() {
  for (QueueState& q : queues_) {
    if (q.ready.empty() || q.running >= q.limit) continue;
    auto task = q.ready.front();
    q.ready.pop_front();
    if (task->marked) --q.marked_ready;
    return task;
  }
  return nullptr;
}

std::shared_ptr<WorkerPool::Task> WorkerPool::TakeLease(Lease lease) {
  auto task = std::make_shared<Task>();
  auto it = queue_index_.find(lease.queue);
  task->queue = it == queue_index_.end() ? 0 : it->second;
  task->next_heartbeat_at = clock_->NowMillis() + std::max<Millis>(1, lease.lease_ms / 3);
  task->lease = std::move(lease);
  // An older lease of the same execution is stale now (the store hands
  // out a new claim only once the old one is gone, e.g. recovered while
  // this process stalled): drop it, or tell its handler the claim is lost.
  std::vector<std::shared_ptr<Task>> older;
  auto [begin, end] = in_hand_.equal_range(task->lease.id.value);
  for (auto it = begin; it != end; ++it) older.push_back(it->second);
  for (auto& old : older) {
    if (!old->started) {
      DropUnstarted(old);
    } else {
      old->lost = true;
      if (old->context) old->context->MarkLost();
    }
  }
  ++queues_[task->queue].in_hand;
  in_hand_.emplace(task->lease.id.value, task);
  return task;
}

std::shared_ptr<WorkerPool::Task> WorkerPool::ClaimDirect() {
  const std::int64_t awake_ns = pickup_trace::Installed() != nullptr ? pickup_trace::NowNs() : 0;
  // One lease for this worker and one for each other parked worker no wake
  // is on its way to, from the queues in priority order that may take more.
  const int most = 1 + std::max(0, parked_workers_ - direct_claims_ - admission_reserved_);
  ClaimRequest request;
  request.worker = WorkerId(options_.worker_id);
  request.mark_started = true;  // L4: each lease goes to an idle worker at once
  for (const QueueState& q : queues_) {
    if (!MayStartOneMore(q)) continue;
    if (static_cast<int>(request.slots.size()) == most) break;
    request.slots.push_back(QueueSlot{q.config.name, 1});
  }
  if (request.slots.empty()) {
    // No queue may start more now; the claimer still prefetches for them.
    wake_ = true;
    claim_cv_.NotifyOne();
    return nullptr;
  }
  Result<std::vector<Lease>> leases = std::vector<Lease>{};
  {
    MutexUnlock unlock(mu_);
    leases = store_->Claim(request);
  }
  if (pickup_trace::PickupTrace* trace = pickup_trace::Installed();
      trace != nullptr && leases.ok() && !leases->empty()) [[unlikely]] {
    pickup_trace::MarkAt(trace, pickup_trace::kClaimerAwake, awake_ns);
    pickup_trace::MarkWrite(trace, pickup_trace::kClaimQueued, pickup_trace::last_write);
    pickup_trace::MarkAt(trace, pickup_trace::kClaimReturned, pickup_trace::NowNs());
  }
  if (!leases.ok()) {
    spdlog::warn("claim failed: {}", leases.status().ToString());
    wake_ = true;  // the claimer retries at its poll interval
    claim_cv_.NotifyOne();
    return nullptr;
  }
  const auto got = static_cast<int>(leases->size());
  claimed_ += got;
  // The claimer goes on: more may be due (a queue answered all it was asked,
  // or was not asked), which it claims in batches; or less than asked was,
  // and it learns when the rest is due (Store::NextDueIn: a wake may come
  // from a node whose clock is a little ahead of this one's).
  wake_ = true;
  claim_cv_.NotifyOne();
  std::vector<std::shared_ptr<Task>> tasks;
  for (Lease& lease : *leases) tasks.push_back(TakeLease(std::move(lease)));
  if (tasks.empty()) return nullptr;
  if (stop_claiming_) {
    GiveBack(tasks);  // stopping: nothing new starts (L6)
    return nullptr;
  }
  // This worker runs the lease of the highest-priority queue; the others
  // wait, marked started, first in their queues for the other parked workers.
  std::stable_sort(tasks.begin(), tasks.end(),
                   [](const auto& a, const auto& b) { return a->queue < b->queue; });
  tasks.front()->marked = true;
  for (std::size_t i = 1; i < tasks.size(); ++i) {
    EnqueueMarked(queues_[tasks[i]->queue], tasks[i]);
    work_cv_.NotifyOne();
  }
  return tasks.front();
}

void WorkerPool::GiveBack(const std::vector<std::shared_ptr<Task>>& tasks) {
  for (const auto& t : tasks) {
    QueueState& q = queues_[t->queue];
    --q.in_hand;
    EraseInHand(t);
    FinishRequest r;
    r.lease = LeaseRef{t->lease.id, t->lease.version};
    r.kind = FinishRequest::Kind::kRelease;
    MutexUnlock unlock(mu_);
    Finish(t, std::move(r));
  }
  if (!tasks.empty()) {
    wake_ = true;
    claim_cv_.NotifyOne();
  }
}

void WorkerPool::WorkLoop() {
  MutexLock lock(mu_);
  while (true) {
    std::shared_ptr<Task> task;
    while (!stop_workers_ && (task = NextReady()) == nullptr) {
      if (direct_claims_ > 0) {
        // Woken by Wake: claim for this worker (and the other parked ones).
        --direct_claims_;
        if (!stop_claiming_ && (task = ClaimDirect()) != nullptr) break;
        continue;
      }
      parked_hint_.store(++parked_workers_, std::memory_order_relaxed);
      work_cv_.Wait(mu_);
      parked_hint_.store(--parked_workers_, std::memory_order_relaxed);
    }
    if (!task) return;
    pickup_trace::Mark(pickup_trace::kWorkerAwake);
    if (direct_claims_ > parked_workers_) {
      // A wake meant for a worker that found other work: the claimer takes it.
      direct_claims_ = parked_workers_;
      wake_ = true;
      claim_cv_.NotifyOne();
    }
    QueueState& q = queues_[task->queue];
    ++q.running;
    task->started = true;
    if (!task->marked) {
      // L4: the store learns the handler starts before it runs (with the
      // next leases of a fast queue, which its workers run within moments).
      std::vector<std::shared_ptr<Task>> batch{task};
      TakeUnmarked(q, MarkBatch(q) - 1, &batch);
      if (MarkStarted(batch, /*first_is_mine=*/true) == nullptr) {
        // Stale, or given back: this worker runs nothing of it.
        --q.running;
        idle_cv_.NotifyAll();
        continue;
      }
    }
    RefillMarked(q);
    task->started_at = clock_->NowMillis();
    lock.Unlock();
    RunTask(task);
    lock.Lock();
    --q.running;
    --q.in_hand;
    ++q.done;
    EraseInHand(task);
    wake_ = true;
    claim_cv_.NotifyOne();
    idle_cv_.NotifyAll();
    if (!q.ready.empty()) work_cv_.NotifyOne();
  }
}

void WorkerPool::EnqueueMarked(QueueState& q, std::shared_ptr<Task> task) {
  task->marked = true;
  q.ready.insert(q.ready.begin() + static_cast<std::ptrdiff_t>(q.marked_ready), std::move(task));
  ++q.marked_ready;
}

void WorkerPool::TakeUnmarked(QueueState& q, int n, std::vector<std::shared_ptr<Task>>* out) {
  const auto first = q.ready.begin() + static_cast<std::ptrdiff_t>(q.marked_ready);
  const auto count = std::min<std::ptrdiff_t>(std::max(0, n), q.ready.end() - first);
  out->insert(out->end(), first, first + count);
  q.ready.erase(first, first + count);
}

void WorkerPool::RefillMarked(QueueState& q) {
  const int n = MarkBatch(q);
  if (n < 2 || q.refilling || q.marked_ready >= static_cast<std::size_t>(n / 2) || stop_claiming_) {
    return;
  }
  std::vector<std::shared_ptr<Task>> batch;
  TakeUnmarked(q, n, &batch);
  if (batch.empty()) return;
  q.refilling = true;
  MarkStarted(batch, /*first_is_mine=*/false);
  q.refilling = false;
}

std::shared_ptr<WorkerPool::Task> WorkerPool::MarkStarted(
    const std::vector<std::shared_ptr<Task>>& batch, bool first_is_mine) {
  std::vector<LeaseRef> refs;
  refs.reserve(batch.size());
  for (const auto& t : batch) refs.push_back(LeaseRef{t->lease.id, t->lease.version});
  std::vector<Status> replies;
  const Clock::SteadyTime mark_start = clock_->Steady();
  {
    MutexUnlock unlock(mu_);
    replies = store_->MarkStarted(refs);
  }
  if (pickup_trace::PickupTrace* trace = pickup_trace::Installed(); trace != nullptr) [[unlikely]] {
    pickup_trace::MarkWrite(trace, pickup_trace::kMarkQueued, pickup_trace::last_write);
    pickup_trace::MarkAt(trace, pickup_trace::kMarkReturned, pickup_trace::NowNs());
  }
  const double took = std::chrono::duration<double>(clock_->Steady() - mark_start).count();
  mark_seconds_ = 0.8 * mark_seconds_ + 0.2 * took;
  std::shared_ptr<Task> mine;
  std::vector<std::shared_ptr<Task>> followers;
  std::vector<std::shared_ptr<Task>> give_back;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const std::shared_ptr<Task>& t = batch[i];
    const Status& st = replies[i];
    if (t->finished) continue;  // dropped meanwhile: a newer lease of it came
    if (st.code() == ErrorCode::kStale || st.code() == ErrorCode::kNotFound || t->lost) {
      DropUnstarted(t);
      continue;
    }
    if (!st.ok()) {
      spdlog::warn("execution {}: cannot mark its handler started ({}); lease given back",
                   t->lease.id.value, st.ToString());
      give_back.push_back(t);
      continue;
    }
    t->marked = true;
    if (i == 0 && first_is_mine) {
      mine = t;
    } else if (stop_claiming_) {
      give_back.push_back(t);  // stopping: unstarted leases go back (L6)
    } else {
      followers.push_back(t);
    }
  }
  // The followers wait, marked, after the marked leases of their queue, in order.
  if (!followers.empty()) {
    QueueState& q = queues_[followers.front()->queue];
    q.ready.insert(q.ready.begin() + static_cast<std::ptrdiff_t>(q.marked_ready), followers.begin(),
                   followers.end());
    q.marked_ready += followers.size();
    work_cv_.NotifyAll();
  }
  GiveBack(give_back);
  return mine;
}

Result<std::shared_ptr<const JobDefinition>> WorkerPool::Definition(const JobName& job) {
  {
    MutexLock lock(defs_mu_);
    auto it = defs_.find(job.value);
    if (it != defs_.end()) return it->second;
  }
  TE_ASSIGN_OR_RETURN(JobDefinition def, store_->GetJob(job));
  auto shared = std::make_shared<const JobDefinition>(std::move(def));
  MutexLock lock(defs_mu_);
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
    MutexLock lock(mu_);
    task->context = context;
    if (task->cancel_requested) context->MarkCancelRequested();
    if (task->lost) context->MarkLost();
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
  if (auto progress = context->TakeProgress();
      progress && finish.kind != FinishRequest::Kind::kComplete) {
    (void)store_->Heartbeat(finish.lease, progress);
  }
  Finish(task, std::move(finish));
}

void WorkerPool::Finish(const std::shared_ptr<Task>& task, FinishRequest request) {
  {
    MutexLock lock(mu_);
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
    MutexLock lock(finish_mu_);
    finishes_.push_back(std::move(request));
  }
  finish_cv_.NotifyOne();
}

void WorkerPool::CompleteLoop() {
  std::vector<FinishRequest> batch;
  MutexLock lock(finish_mu_);
  while (true) {
    while (!stop_completer_ && finishes_.empty()) finish_cv_.Wait(finish_mu_);
    if (finishes_.empty()) return;  // stopping and drained
    batch.swap(finishes_);
    finishes_in_flight_ = static_cast<int>(batch.size());
    lock.Unlock();
    // While the store is unavailable (e.g. a database restart) the outcomes
    // are kept and offered again every 100 ms: their leases may well still
    // hold, and an outcome given up on is a second run of its handler after
    // the lease expires. Once the pool is stopping, for at most 2 s more.
    int retries_when_stopping = 0;
    while (!batch.empty()) {
      auto replies = store_->FinishBatch(batch);
      bool give_up = false;
      if (std::any_of(replies.begin(), replies.end(),
                      [](const auto& r) { return r.status().code() == ErrorCode::kUnavailable; })) {
        MutexLock stop_lock(finish_mu_);
        give_up = stop_completer_ && ++retries_when_stopping > 20;
      }
      std::vector<FinishRequest> retry;
      for (std::size_t i = 0; i < replies.size(); ++i) {
        if (replies[i].ok()) {
          ++published_;
          if (replies[i]->status == ExecutionStatus::kSucceeded) ++completed_;
          if (options_.on_published) options_.on_published(batch[i].lease.id, replies[i]->status);
          continue;
        }
        const Status& s = replies[i].status();
        if (s.code() == ErrorCode::kUnavailable && !give_up) {
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
    lock.Lock();
    finishes_in_flight_ = 0;
    idle_cv_.NotifyAll();
  }
}

// Handlers that enforce their own timeout (the command handler) get this long
// past the job's timeout to report before the pool gives up on them.
constexpr Millis kTimeoutSlackMs = 10'000;

void WorkerPool::KeepLoop() {
  MutexLock keep_lock(keep_mu_);
  while (!stop_keeper_) {
    const auto tick_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    while (!stop_keeper_ && keep_cv_.WaitUntil(keep_mu_, tick_at)) {
    }
    if (stop_keeper_) break;
    keep_lock.Unlock();
    const Millis now = clock_->NowMillis();
    if (now - reported_at_ >= options_.report_interval_ms) {
      reported_at_ = now;
      Report(/*stopped=*/false);
    }
    std::vector<std::shared_ptr<Task>> due;
    std::vector<HeartbeatRequest> requests;
    {
      MutexLock lock(mu_);
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
        const ErrorCode code = replies[i].status().code();
        const bool lost = code == ErrorCode::kStale || code == ErrorCode::kNotFound;
        std::shared_ptr<Context> ctx;
        {
          MutexLock lock(mu_);
          ctx = due[i]->context;
          if (lost && !due[i]->started) {
            // Recovered elsewhere before its handler started: drop it now,
            // so it neither runs nor holds room the claimer could use.
            DropUnstarted(due[i]);
            continue;
          }
          if (lost) due[i]->lost = true;
        }
        if (ctx) ctx->Observe(replies[i]);
        if (lost) ++stale_;
      }
    }
    keep_lock.Lock();
  }
}

void WorkerPool::Stop() {
  std::vector<std::shared_ptr<Task>> unstarted;
  {
    MutexLock lock(mu_);
    if (!started_ || stopped_) return;
    stopped_ = true;
    stop_claiming_ = true;
    // Claims at admission reserved before now have their transactions in
    // the store's writer: their leases arrive within a commit and go back
    // (DeliverAdmitted) while the completer still runs.
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.shutdown_grace_ms);
    while (admission_reserved_ > 0 && idle_cv_.WaitUntil(mu_, until)) {
    }
  }
  claim_cv_.NotifyAll();
  claimer_.join();
  // Leases not yet started go back at once.
  {
    MutexLock lock(mu_);
    for (QueueState& q : queues_) {
      for (auto& task : q.ready) unstarted.push_back(task);
      q.in_hand -= static_cast<int>(q.ready.size());
      q.ready.clear();
      q.marked_ready = 0;
    }
    for (auto& task : unstarted) EraseInHand(task);
  }
  for (auto& task : unstarted) {
    FinishRequest r;
    r.lease = LeaseRef{task->lease.id, task->lease.version};
    r.kind = FinishRequest::Kind::kRelease;
    Finish(task, std::move(r));
  }
  // Running handlers may finish within the grace period.
  {
    MutexLock lock(mu_);
    const auto grace_end =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.shutdown_grace_ms);
    while (AnyRunning() && idle_cv_.WaitUntil(mu_, grace_end)) {
    }
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
        MutexLock flock(finish_mu_);
        finishes_.push_back(std::move(r));
      }
      ++released_;
      spdlog::warn("execution {} still running after the shutdown grace; lease released", id);
    }
    stop_workers_ = true;
  }
  finish_cv_.NotifyOne();
  work_cv_.NotifyAll();
  for (auto& w : workers_) w.join();
  {
    MutexLock lock(finish_mu_);
    stop_completer_ = true;
  }
  finish_cv_.NotifyOne();
  completer_.join();
  {
    MutexLock lock(keep_mu_);
    stop_keeper_ = true;
  }
  keep_cv_.NotifyAll();
  keeper_.join();
  Report(/*stopped=*/true);
}

}  // namespace taskengine
