// The engine: composition of store, dispatcher, worker pool and sweeper.
#include "taskengine/engine.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "engine/dispatcher.h"
#include "engine/worker_pool.h"
#include "storage/sqlite/sqlite_store.h"

namespace taskengine {
namespace {

std::string DefaultWorkerId() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "localhost");
  return std::string(host) + ":" + std::to_string(getpid());
}

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

class EngineImpl final : public Engine {
 public:
  EngineImpl(EngineOptions options, std::unique_ptr<Store> store,
             std::unique_ptr<RandomSource> owned_random)
      : options_(std::move(options)),
        owned_random_(std::move(owned_random)),
        store_(std::move(store)),
        dispatcher_(store_.get(), options_.clock, [this] { WakeWorkers(); }),
        grants_(store_.get()),
        authorizer_(options_.authorizer != nullptr ? options_.authorizer : &grants_) {}

  ~EngineImpl() override { Stop(); }

  Status DefineJob(const JobDefinition& job) override { return store_->UpsertJob(job); }

  Status RegisterHandler(const std::string& name, Handler handler) override {
    std::lock_guard<std::mutex> lock(mu_);
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

  Status Start() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_) return Conflict("engine already started");
    started_ = true;
    if (options_.worker_threads > 0) {
      WorkerPoolOptions po;
      po.worker_threads = options_.worker_threads;
      po.queues = options_.queues;
      po.claim_batch = options_.claim_batch;
      po.prefetch = options_.prefetch;
      po.poll_interval_ms = options_.poll_interval_ms;
      po.shutdown_grace_ms = options_.shutdown_grace_ms;
      po.worker_id = options_.worker_id;
      pool_ = std::make_unique<WorkerPool>(store_.get(), options_.clock, &handlers_, po);
      TE_RETURN_IF_ERROR(pool_->Start());
      pool_ptr_.store(pool_.get(), std::memory_order_release);
    }
    if (options_.run_sweeper) sweeper_ = std::thread([this] { SweepLoop(); });
    return Status::Ok();
  }

  void Stop() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    if (pool_) pool_->Stop();
    {
      std::lock_guard<std::mutex> lock(sweep_mu_);
      stop_sweeper_ = true;
    }
    sweep_cv_.notify_all();
    if (sweeper_.joinable()) sweeper_.join();
  }

  Result<ExecutionStatus> Cancel(ExecutionId id, const std::string& actor,
                                 const std::string& reason) override {
    TE_ASSIGN_OR_RETURN(ExecutionStatus status,
                        store_->RequestCancel(id, OperatorAction{actor, reason}));
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
    if (reply.outcome == ReplayOutcome::kReplayed) WakeWorkers();
    return ReplayResult{reply.outcome, reply.status};
  }

  Result<ReplayResult> ApproveReplay(ExecutionId id, const std::string& approver) override {
    TE_ASSIGN_OR_RETURN(Execution e, store_->GetExecution(id));
    TE_RETURN_IF_ERROR(CheckRequester(e));
    TE_ASSIGN_OR_RETURN(ReplayReply reply, store_->ApproveReplay(id, OperatorAction{approver, {}}));
    WakeWorkers();
    return ReplayResult{reply.outcome, reply.status};
  }

  Result<int> SweepOnce() override {
    int total = 0;
    while (true) {
      TE_ASSIGN_OR_RETURN(SweepReport report, store_->SweepExpired(options_.sweep_batch));
      total += report.recovered;
      if (report.recovered > 0) {
        spdlog::info("sweeper recovered {} expired leases ({} requeued, {} failed, {} quarantined)",
                     report.recovered, report.requeued, report.failed, report.quarantined);
      }
      if (!report.more) break;
    }
    if (total > 0) WakeWorkers();
    return total;
  }

  Result<Execution> GetExecution(ExecutionId id) override { return store_->GetExecution(id); }
  Store& store() override { return *store_; }
  EngineStats stats() const override {
    WorkerPool* pool = pool_ptr_.load(std::memory_order_acquire);
    return pool != nullptr ? pool->stats() : EngineStats{};
  }

 private:
  // R1: the original requester must still be authorized for the tenant.
  Status CheckRequester(const Execution& e) {
    TE_ASSIGN_OR_RETURN(bool allowed, authorizer_->MayAccess(e.requester, e.tenant));
    if (!allowed) {
      return InvalidArgument("the original requester '" + e.requester +
                             "' is no longer authorized for " +
                             (e.tenant.empty() ? std::string("global jobs")
                                               : "tenant " + e.tenant.value) +
                             "; replay refused");
    }
    return Status::Ok();
  }

  void AddWorkListener(std::function<void()> listener) override {
    std::lock_guard<std::mutex> lock(listeners_mu_);
    listeners_.push_back(std::move(listener));
  }

  void WakeWorkers() {
    // pool_ptr_ is published once by Start(); admissions before that need no wakeup.
    WorkerPool* pool = pool_ptr_.load(std::memory_order_acquire);
    if (pool != nullptr) pool->Wake();
    std::lock_guard<std::mutex> lock(listeners_mu_);
    for (const auto& listener : listeners_) listener();
  }

  void SweepLoop() {
    std::unique_lock<std::mutex> lock(sweep_mu_);
    while (!stop_sweeper_) {
      lock.unlock();
      auto swept = SweepOnce();
      if (!swept.ok()) spdlog::warn("sweep failed: {}", swept.status().ToString());
      lock.lock();
      sweep_cv_.wait_for(lock, std::chrono::milliseconds(options_.sweep_interval_ms),
                         [&] { return stop_sweeper_; });
    }
  }

 private:
  // Constant after construction.
  const EngineOptions options_;
  const std::unique_ptr<RandomSource> owned_random_;
  const std::unique_ptr<Store> store_;
  Dispatcher dispatcher_;
  GrantsAuthorizer grants_;
  Authorizer* const authorizer_;

  std::mutex mu_;
  HandlerRegistry handlers_;          // written before Start, read-only after
  std::unique_ptr<WorkerPool> pool_;  // set in Start
  std::atomic<WorkerPool*> pool_ptr_{nullptr};
  bool started_ = false;
  bool stopped_ = false;

  std::mutex listeners_mu_;
  std::vector<std::function<void()>> listeners_;  // protected by listeners_mu_

  std::mutex sweep_mu_;
  std::condition_variable sweep_cv_;
  bool stop_sweeper_ = false;  // protected by sweep_mu_
  std::thread sweeper_;
};

}  // namespace

Result<std::unique_ptr<Engine>> Engine::Open(EngineOptions options) {
  if (options.database_path.empty()) return InvalidArgument("engine needs a database path");
  if (options.clock == nullptr) options.clock = SystemClock::Get();
  std::unique_ptr<RandomSource> owned_random;
  if (options.random == nullptr) {
    owned_random = std::make_unique<SeededRandom>(
        static_cast<std::uint64_t>(options.clock->NowMillis()) ^ static_cast<std::uint64_t>(getpid()));
    options.random = owned_random.get();
  }
  if (options.worker_id.empty()) options.worker_id = DefaultWorkerId();
  if (options.poll_interval_ms < 1 || options.sweep_interval_ms < 1 || options.sweep_batch < 1 ||
      options.claim_batch < 1 || options.worker_threads < 0 || options.prefetch < 0) {
    return InvalidArgument("engine options: intervals, batches must be >= 1, counts >= 0");
  }
  std::error_code ec;
  auto dir = std::filesystem::path(options.database_path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  SqliteStoreOptions so;
  so.path = options.database_path;
  so.sync = options.sync;
  so.clock = options.clock;
  so.random = options.random;
  TE_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenSqliteStore(so));
  if (options.migrate) {
    TE_RETURN_IF_ERROR(store->Migrate());
  } else {
    TE_ASSIGN_OR_RETURN(int version, store->SchemaVersion());
    if (version == 0) return Unavailable("database is not initialized: run `taskengine migrate`");
  }
  auto engine = std::make_unique<EngineImpl>(std::move(options), std::move(store),
                                             std::move(owned_random));
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace taskengine
