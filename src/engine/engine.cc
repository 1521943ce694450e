// The engine: composition of store, dispatcher, worker pool and sweeper.
#include "taskengine/engine.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <thread>
#include <unordered_map>

#include "core/mutex.h"
#include "engine/dispatcher.h"
#include "engine/engine_internal.h"
#include "engine/worker_pool.h"
#include "platform/thread_name.h"
#include "storage/open_store.h"
#include "transport/work_transport.h"
#ifdef TASKENGINE_HAVE_REDIS
#include "transport/redis_transport.h"
#endif

namespace taskengine {
namespace {

std::string HostName() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "localhost";
  return host;
}

// "<hostname>:<pid>:pool": unique per process, apart from the ids of remote
// workers (the C++ SDK's default is "<hostname>:<pid>") even in one process.
std::string DefaultWorkerId() { return HostName() + ":" + std::to_string(getpid()) + ":pool"; }

// The default Authorizer: the store's grants table.
class GrantsAuthorizer final : public Authorizer {
 public:
  explicit GrantsAuthorizer(Store* store) : store_(store) {}
  Result<bool> MayAccess(std::string_view principal, const TenantId& tenant) override {
    // No identity: dispatched by the embedding application itself.
    if (principal.empty() || principal.rfind("cli:", 0) == 0 ||
        principal.rfind("system:", 0) == 0) {
      return true;
    }
    return store_->IsGranted(principal, tenant.empty() ? "*" : tenant.value);
  }

 private:
  Store* const store_;
};

// Cancel latency (EngineStats): the cancels of running executions not yet
// seen ending, and the histogram. Thread-safe.
class CancelLatency {
 public:
  // Pending cancels older than this are dropped unobserved.
  static constexpr Millis kMaxPendingMs = 24 * 3'600'000;
  // Pending cancels kept at most (the oldest are dropped beyond).
  static constexpr std::size_t kMaxPending = 100'000;

  void Observe(Millis latency_ms) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    ObserveLocked(latency_ms);
  }

  // A cancel of a running execution, requested at `at`.
  void Requested(ExecutionId id, Millis at) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (pending_.size() >= kMaxPending) {
      auto oldest =
          std::min_element(pending_.begin(), pending_.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; });
      pending_.erase(oldest);
    }
    pending_.emplace(id.value, at);  // a repeated cancel keeps the first request time
  }

  // This engine saw `id` reach `status` at `now`.
  void Observed(ExecutionId id, ExecutionStatus status, Millis now) EXCLUDES(mu_) {
    if (!IsTerminal(status)) return;
    MutexLock lock(mu_);
    auto it = pending_.find(id.value);
    if (it == pending_.end()) return;
    ObserveLocked(std::max<Millis>(0, now - it->second));
    pending_.erase(it);
  }

  void Forget(ExecutionId id) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    pending_.erase(id.value);
  }

  // Up to `max` pending ids to recheck; drops those older than kMaxPendingMs.
  std::vector<ExecutionId> Pending(std::size_t max, Millis now) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    std::vector<ExecutionId> ids;
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (now - it->second > kMaxPendingMs) {
        it = pending_.erase(it);
        continue;
      }
      if (ids.size() < max) ids.push_back(ExecutionId(it->first));
      ++it;
    }
    return ids;
  }

  void Fill(EngineStats* s) const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    s->cancel_latency_buckets = buckets_;
    s->cancel_latency_count = count_;
    s->cancel_latency_sum_ms = sum_ms_;
  }

 private:
  void ObserveLocked(Millis latency_ms) REQUIRES(mu_) {
    const auto& bounds = EngineStats::kCancelLatencyBoundsMs;
    std::size_t i = 0;
    while (i < bounds.size() && latency_ms > bounds[i]) ++i;
    ++buckets_[i];
    ++count_;
    sum_ms_ += latency_ms;
  }

  mutable Mutex mu_;
  // execution id -> requested at
  std::unordered_map<std::int64_t, Millis> pending_ GUARDED_BY(mu_);
  std::array<std::int64_t, EngineStats::kCancelLatencyBoundsMs.size() + 1> buckets_
      GUARDED_BY(mu_){};
  std::int64_t count_ GUARDED_BY(mu_) = 0;
  Millis sum_ms_ GUARDED_BY(mu_) = 0;
};

// Store::AdmissionClaimer for the engine's pool: forwards to the pool once
// Start published it (pool_ptr_; before that, and for an engine without
// workers, nothing is reserved). The pool lives as long as the engine, which
// unsets this claimer before the store is gone.
class PoolAdmissionClaimer final : public Store::AdmissionClaimer {
 public:
  PoolAdmissionClaimer(const std::atomic<WorkerPool*>* pool, WorkerId worker)
      : pool_(pool), worker_(std::move(worker)) {}
  bool Reserve(const std::string& queue) override {
    WorkerPool* pool = pool_->load(std::memory_order_acquire);
    return pool != nullptr && pool->ReserveForAdmission(queue);
  }
  // Reserve returned true, so the pool is there.
  void Deliver(Lease lease) override {
    pool_->load(std::memory_order_acquire)->DeliverAdmitted(std::move(lease));
  }
  void Unreserve(const std::string& queue) override {
    pool_->load(std::memory_order_acquire)->UnreserveAdmission(queue);
  }
  WorkerId worker() const override { return worker_; }

 private:
  const std::atomic<WorkerPool*>* const pool_;
  const WorkerId worker_;
};

class EngineImpl final : public EngineInternal {
 public:
  EngineImpl(EngineOptions options, std::unique_ptr<Clock> owned_clock,
             std::unique_ptr<Store> store, std::unique_ptr<RandomSource> owned_random,
             std::unique_ptr<WorkTransport> transport)
      : options_(std::move(options)),
        owned_clock_(std::move(owned_clock)),
        owned_random_(std::move(owned_random)),
        transport_(std::move(transport)),
        store_(std::move(store)),
        dispatcher_(store_.get(), options_.clock, options_.max_payload_bytes,
                    options_.lifecycle_listener),
        grants_(store_.get()),
        authorizer_(options_.authorizer != nullptr ? options_.authorizer : &grants_) {
    // A3: work made due by another node wakes the workers at once.
    store_->SetWorkListener([this] { WakeWorkers(); });
    // Work made due by this engine's own commits (admissions of the API and
    // the scheduler, requeues, replays, recovered leases, a lane's next job)
    // wakes its workers right after the commit, and, through the transport,
    // every other node (D3; the database is the queue of record).
    store_->SetWorkPublisher([this, transport = transport_.get()](const std::string& queue) {
      WakeWorkers(&queue);
      if (transport != nullptr) transport->Publish(queue);
    });
    if (transport_) transport_->Start([this] { WakeWorkers(); });
    // P2: an idle worker may take an execution in its admission's transaction.
    store_->SetAdmissionClaimer(&admission_claimer_);
  }

  // The store's listener and the transport go first: they must not call into
  // a half-destroyed engine. The transport outlives the store (declared
  // before it): the store's last commits may still publish.
  ~EngineImpl() override {
    AwaitAsyncCalls();
    store_->SetWorkListener(nullptr);
    if (transport_) transport_->Stop();
    Stop();
    store_->SetWorkPublisher(nullptr);
    store_->SetAdmissionClaimer(nullptr);
  }

  Status DefineJob(const JobDefinition& job) override { return store_->UpsertJob(job); }

  Status RegisterHandler(const std::string& name, Handler handler) override EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (pool_) return Conflict("handlers must be registered before Start()");
    return handlers_.Register(name, std::move(handler));
  }

  Result<DispatchResult> Dispatch(const DispatchRequest& request) override {
    return dispatcher_.Dispatch(request);
  }

  Result<std::vector<DispatchResult>> DispatchBatch(
      const std::vector<DispatchRequest>& requests) override {
    return dispatcher_.DispatchBatch(requests);
  }

  Status Start() override EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (started_) return Conflict("engine already started");
    started_ = true;
    // The queues this engine's pool claims from: every queue but those left
    // to remote workers (none declared = the queue "default").
    std::vector<QueueConfig> pool_queues;
    for (const QueueConfig& q : options_.queues) {
      if (q.pool) pool_queues.push_back(q);
    }
    if (options_.queues.empty()) pool_queues.push_back(QueueConfig{});
    if (options_.worker_threads > 0 && !pool_queues.empty()) {
      WorkerPoolOptions po;
      static_cast<EngineOptions&>(po) = options_;
      po.queues = std::move(pool_queues);
      po.hostname = HostName();
      po.pid = getpid();
      po.on_published = [this](ExecutionId id, ExecutionStatus status) {
        cancel_latency_.Observed(id, status, options_.clock->NowMillis());
      };
      pool_ = std::make_unique<WorkerPool>(store_.get(), options_.clock, &handlers_, po);
      TE_RETURN_IF_ERROR(pool_->Start());
      pool_ptr_.store(pool_.get(), std::memory_order_release);
      WorkerEvent(LifecycleKind::kWorkerStarted);
    }
    if (options_.run_sweeper) sweeper_ = NamedThread("te-sweeper", [this] { SweepLoop(); });
    return Status::Ok();
  }

  void Stop() override EXCLUDES(mu_, sweep_mu_) {
    WorkerPool* pool = nullptr;
    {
      MutexLock lock(mu_);
      if (stopped_) return;
      stopped_ = true;
      pool = pool_.get();
    }
    if (pool != nullptr) {
      pool->Stop();
      WorkerEvent(LifecycleKind::kWorkerStopped);
    }
    {
      MutexLock lock(sweep_mu_);
      stop_sweeper_ = true;
    }
    sweep_cv_.NotifyAll();
    if (sweeper_.joinable()) sweeper_.join();
  }

  // worker.started / worker.stopped of the in-process pool.
  void WorkerEvent(LifecycleKind kind) {
    if (!options_.lifecycle_listener) return;
    LifecycleEvent e;
    e.kind = kind;
    e.worker = options_.worker_id;
    e.threads = options_.worker_threads;
    e.at = options_.clock->NowMillis();
    options_.lifecycle_listener(e);
  }

  Result<ExecutionStatus> Cancel(ExecutionId id, const std::string& actor,
                                 const std::string& reason) override {
    const Millis requested_at = options_.clock->NowMillis();
    TE_ASSIGN_OR_RETURN(ExecutionStatus status,
                        store_->RequestCancel(id, OperatorAction{actor, reason}));
    if (IsTerminal(status)) {
      cancel_latency_.Observe(std::max<Millis>(0, options_.clock->NowMillis() - requested_at));
    } else if (status == ExecutionStatus::kRunning) {
      cancel_latency_.Requested(id, requested_at);
    }
    // Durably requested: a handler running it in this process learns now.
    WorkerPool* pool = pool_ptr_.load(std::memory_order_acquire);
    if (pool != nullptr && status == ExecutionStatus::kRunning) pool->NotifyCancel(id);
    return status;
  }

  Result<ReplayResult> Replay(ExecutionId id, const ReplayOptions& options) override {
    TE_ASSIGN_OR_RETURN(Execution e, store_->GetExecution(id));
    TE_RETURN_IF_ERROR(CheckRequester(e));
    ReplayRequest r;
    r.id = id;
    r.action = OperatorAction{options.actor, options.reason};
    r.require_approval = options_.replay_requires_approval;
    r.ambiguous = options.ambiguous;
    TE_ASSIGN_OR_RETURN(ReplayReply reply, store_->Replay(r));
    return ReplayResult{reply.outcome, reply.status};
  }

  Result<ReplayResult> ApproveReplay(ExecutionId id, const std::string& approver) override {
    TE_ASSIGN_OR_RETURN(Execution e, store_->GetExecution(id));
    TE_RETURN_IF_ERROR(CheckRequester(e));
    TE_ASSIGN_OR_RETURN(ReplayReply reply, store_->ApproveReplay(id, OperatorAction{approver, {}}));
    return ReplayResult{reply.outcome, reply.status};
  }

  Result<int> SweepOnce() override {
    int total = 0;
    while (true) {
      TE_ASSIGN_OR_RETURN(SweepReport report, store_->SweepExpired(options_.sweep_batch));
      total += report.recovered;
      lease_expirations_ += report.recovered;
      if (report.recovered > 0) {
        spdlog::info("sweeper recovered {} expired leases ({} requeued, {} failed, {} quarantined)",
                     report.recovered, report.requeued, report.failed, report.quarantined);
      }
      if (!report.more) break;
    }
    return total;
  }

  Result<Execution> GetExecution(ExecutionId id) override { return store_->GetExecution(id); }

  Clock* clock() override { return options_.clock; }
  EngineStats stats() const override {
    WorkerPool* pool = pool_ptr_.load(std::memory_order_acquire);
    EngineStats s = pool != nullptr ? pool->stats() : EngineStats{};
    s.lease_expirations = lease_expirations_.load();
    cancel_latency_.Fill(&s);
    if (transport_) s.transport = transport_->stats();
    return s;
  }

 protected:
  Store& store() override { return *store_; }
  std::vector<Result<FinishReply>> PublishOutcomesImpl(
      const std::vector<FinishRequest>& requests) override {
    std::vector<Result<FinishReply>> replies = store_->FinishBatch(requests);
    OutcomesPublished(LeaseIds(requests), replies);
    return replies;
  }

  void DispatchBatchAsyncImpl(std::vector<DispatchRequest> requests, DispatchDone done) override {
    dispatcher_.DispatchBatchAsync(
        std::move(requests), [hold = HoldForAsyncCall(),
                              done = std::move(done)](Result<std::vector<DispatchResult>> results) {
          (void)hold;
          done(std::move(results));
        });
  }

  void PublishOutcomesAsyncImpl(std::vector<FinishRequest> requests, OutcomesDone done) override {
    // The callback needs the leases' ids (cancel latency) once the requests
    // are gone to the store.
    std::vector<ExecutionId> ids = LeaseIds(requests);
    store_->FinishBatchAsync(std::move(requests),
                             [this, hold = HoldForAsyncCall(), ids = std::move(ids),
                              done = std::move(done)](std::vector<Result<FinishReply>> replies) {
                               (void)hold;
                               OutcomesPublished(ids, replies);
                               done(std::move(replies));
                             });
  }

 private:
  // R1: the original requester must still be authorized for the tenant.
  Status CheckRequester(const Execution& e) {
    TE_ASSIGN_OR_RETURN(bool allowed, authorizer_->MayAccess(e.requester, e.tenant));
    if (!allowed) {
      return InvalidArgument(
          "the original requester '" + e.requester + "' is no longer authorized for " +
          (e.tenant.empty() ? std::string("global jobs") : "tenant " + e.tenant.value) +
          "; replay refused");
    }
    return Status::Ok();
  }

  void AddWorkListener(std::function<void()> listener) override EXCLUDES(listeners_mu_) {
    MutexLock lock(listeners_mu_);
    listeners_.push_back(std::move(listener));
  }

  // New work is due in *queue (nullptr: in a queue not named, as the
  // database's and the transport's wakeups from other nodes are).
  void WakeWorkers(const std::string* queue = nullptr) EXCLUDES(listeners_mu_) {
    // pool_ptr_ is published once by Start(); admissions before that need no wakeup.
    WorkerPool* pool = pool_ptr_.load(std::memory_order_acquire);
    if (pool != nullptr) {
      if (queue != nullptr) {
        pool->Wake(*queue);  // only a pool that claims from the queue
      } else {
        pool->Wake();
      }
    }
    MutexLock lock(listeners_mu_);
    for (const auto& listener : listeners_) listener();
  }

  // The executions of `requests`, in order.
  static std::vector<ExecutionId> LeaseIds(const std::vector<FinishRequest>& requests) {
    std::vector<ExecutionId> ids;
    ids.reserve(requests.size());
    for (const FinishRequest& r : requests) ids.push_back(r.lease.id);
    return ids;
  }
  // After outcomes of workers outside the engine were published (the
  // executions `ids`): their cancel latency. No wakeup here: an outcome that
  // made work due (a release, a retry, a lane's next execution) woke the
  // workers through the store's work publisher at its commit, and one that
  // made nothing due would only cost each woken worker a claim.
  void OutcomesPublished(const std::vector<ExecutionId>& ids,
                         const std::vector<Result<FinishReply>>& replies) {
    const Millis now = options_.clock->NowMillis();
    for (std::size_t i = 0; i < replies.size(); ++i) {
      if (replies[i].ok()) cancel_latency_.Observed(ids[i], replies[i]->status, now);
    }
  }

  // Keeps the engine from being destroyed while an asynchronous call is out:
  // from now until the last copy of the callback holding the result is gone
  // (after it ran, or unrun when the call threw before the store took it).
  std::shared_ptr<void> HoldForAsyncCall() EXCLUDES(async_mu_) {
    {
      MutexLock lock(async_mu_);
      ++async_calls_;
    }
    return std::shared_ptr<void>(nullptr, [this](void*) { EndAsyncCall(); });
  }
  void EndAsyncCall() EXCLUDES(async_mu_) {
    MutexLock lock(async_mu_);
    if (--async_calls_ == 0) async_cv_.NotifyAll();
  }
  // Until no asynchronous call is out (the store's writer still works: they
  // finish within a commit or two).
  void AwaitAsyncCalls() EXCLUDES(async_mu_) {
    MutexLock lock(async_mu_);
    while (async_calls_ != 0) async_cv_.Wait(async_mu_);
  }

  // Cancel latency of executions that ended without this engine publishing
  // their outcome (another node, its sweeper): a bounded read per pass.
  void RecheckPendingCancels() {
    constexpr std::size_t kMaxRechecks = 100;
    for (ExecutionId id : cancel_latency_.Pending(kMaxRechecks, options_.clock->NowMillis())) {
      auto e = store_->GetExecution(id);
      if (e.ok()) {
        cancel_latency_.Observed(id, e->status, options_.clock->NowMillis());
      } else if (e.status().code() == ErrorCode::kNotFound) {
        cancel_latency_.Forget(id);  // purged: nothing to observe
      }
    }
  }

  void SweepLoop() EXCLUDES(sweep_mu_) {
    MutexLock lock(sweep_mu_);
    while (!stop_sweeper_) {
      lock.Unlock();
      auto swept = SweepOnce();
      if (!swept.ok()) spdlog::warn("sweep failed: {}", swept.status().ToString());
      RecheckPendingCancels();
      lock.Lock();
      // Until the next pass is due, or Stop.
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.sweep_interval_ms);
      while (!stop_sweeper_ && sweep_cv_.WaitUntil(sweep_mu_, deadline)) {
      }
    }
  }

 private:
  // Constant after construction.
  const EngineOptions options_;
  // The DatabaseClock OpenStore made (PostgreSQL without an injected clock);
  // options_.clock points at it. Outlives everything that reads the clock.
  const std::unique_ptr<Clock> owned_clock_;
  const std::unique_ptr<RandomSource> owned_random_;
  const std::unique_ptr<WorkTransport> transport_;  // may be null
  const std::unique_ptr<Store> store_;
  Dispatcher dispatcher_;
  GrantsAuthorizer grants_;
  Authorizer* const authorizer_;

  Mutex mu_;
  // Protected by mu_. The pool reads handlers_ (registered before Start)
  // without it.
  HandlerRegistry handlers_ GUARDED_BY(mu_);
  std::unique_ptr<WorkerPool> pool_ GUARDED_BY(mu_);  // set in Start
  bool started_ GUARDED_BY(mu_) = false;
  bool stopped_ GUARDED_BY(mu_) = false;
  // pool_, published once by Start for readers that take no lock.
  std::atomic<WorkerPool*> pool_ptr_{nullptr};
  PoolAdmissionClaimer admission_claimer_{&pool_ptr_, WorkerId(options_.worker_id)};

  CancelLatency cancel_latency_;
  std::atomic<std::int64_t> lease_expirations_{0};

  Mutex listeners_mu_;
  std::vector<std::function<void()>> listeners_ GUARDED_BY(listeners_mu_);

  Mutex sweep_mu_;
  CondVar sweep_cv_;
  bool stop_sweeper_ GUARDED_BY(sweep_mu_) = false;
  std::thread sweeper_;

  // Asynchronous calls (DispatchBatchAsync, PublishOutcomesAsync) out now
  // (HoldForAsyncCall).
  Mutex async_mu_;
  CondVar async_cv_;
  int async_calls_ GUARDED_BY(async_mu_) = 0;
};

}  // namespace

Clock* Engine::clock() { return SystemClock::Get(); }

Store& StoreOf(Engine& engine) {
  auto* internal = dynamic_cast<EngineInternal*>(&engine);
  TE_CHECK(internal != nullptr);
  return internal->store();
}

std::vector<Result<FinishReply>> PublishOutcomes(Engine& engine,
                                                 const std::vector<FinishRequest>& requests) {
  auto* internal = dynamic_cast<EngineInternal*>(&engine);
  TE_CHECK(internal != nullptr);
  return internal->PublishOutcomesImpl(requests);
}

void DispatchBatchAsync(Engine& engine, std::vector<DispatchRequest> requests,
                        EngineInternal::DispatchDone done) {
  auto* internal = dynamic_cast<EngineInternal*>(&engine);
  TE_CHECK(internal != nullptr);
  internal->DispatchBatchAsyncImpl(std::move(requests), std::move(done));
}

void PublishOutcomesAsync(Engine& engine, std::vector<FinishRequest> requests,
                          EngineInternal::OutcomesDone done) {
  auto* internal = dynamic_cast<EngineInternal*>(&engine);
  TE_CHECK(internal != nullptr);
  internal->PublishOutcomesAsyncImpl(std::move(requests), std::move(done));
}

Result<std::unique_ptr<Engine>> Engine::Open(EngineOptions options) {
  return OpenEngine(std::move(options), nullptr);
}

Result<std::unique_ptr<Engine>> OpenEngine(EngineOptions options, const StoreWrapper& wrap) {
  if (options.database_path.empty() && options.database_url.empty()) {
    return InvalidArgument("engine needs a database path or url");
  }
  std::unique_ptr<RandomSource> owned_random;
  if (options.random == nullptr) {
    const Clock* seed_clock = options.clock != nullptr ? options.clock : SystemClock::Get();
    owned_random = std::make_unique<SeededRandom>(
        static_cast<std::uint64_t>(seed_clock->NowMillis()) ^ static_cast<std::uint64_t>(getpid()));
    options.random = owned_random.get();
  }
  if (options.worker_id.empty()) options.worker_id = DefaultWorkerId();
  if (options.poll_interval_ms < 1 || options.sweep_interval_ms < 1 || options.sweep_batch < 1 ||
      options.claim_batch < 1 || options.worker_threads < 0 || options.prefetch < 0 ||
      options.max_prefetch < 0) {
    return InvalidArgument("engine options: intervals, batches must be >= 1, counts >= 0");
  }
  if (options.max_payload_bytes < kMinPayloadLimit ||
      options.max_payload_bytes > kMaxPayloadLimit) {
    return InvalidArgument("engine options: max_payload_bytes must be between " +
                           std::to_string(kMinPayloadLimit) + " and " +
                           std::to_string(kMaxPayloadLimit));
  }
  // Before the store: a bad URL changes nothing (no migration).
  std::unique_ptr<WorkTransport> transport;
  if (!options.redis_url.empty()) {
#ifdef TASKENGINE_HAVE_REDIS
    RedisTransportOptions t;
    t.url = options.redis_url;
    t.prefix = options.redis_prefix;
    TE_ASSIGN_OR_RETURN(transport, OpenRedisTransport(std::move(t)));
#else
    return InvalidArgument(
        "redis_url: this build has no Redis transport (install libhiredis-dev "
        "and build again)");
#endif
  }
  StoreLocation location;
  location.path = options.database_path;
  location.sync = options.sync;
  location.url = options.database_url;
  if (!options.database_schema.empty()) location.schema = options.database_schema;
  // With PostgreSQL and no injected clock, OpenStore makes a DatabaseClock:
  // every node then judges leases, backoff and schedules by one clock.
  TE_ASSIGN_OR_RETURN(OpenedStore opened, OpenStore(location, options.clock, options.random));
  options.clock = opened.clock;
  std::unique_ptr<Store> store = std::move(opened.store);
  if (options.migrate) {
    TE_RETURN_IF_ERROR(store->Migrate());
    TE_RETURN_IF_ERROR(
        store->SetPayloadLimit(static_cast<std::int64_t>(options.max_payload_bytes)));
  } else {
    TE_ASSIGN_OR_RETURN(int version, store->SchemaVersion());
    if (version == 0) return Unavailable("database is not initialized: run `taskengine migrate`");
  }
  if (wrap) store = wrap(std::move(store));
  if (options.lifecycle_listener) {
    store->SetLifecycleObserver(
        [listener = options.lifecycle_listener](std::vector<LifecycleEvent>&& events) {
          for (const LifecycleEvent& e : events) listener(e);
        });
  }
  auto engine =
      std::make_unique<EngineImpl>(std::move(options), std::move(opened.owned_clock),
                                   std::move(store), std::move(owned_random), std::move(transport));
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace taskengine
