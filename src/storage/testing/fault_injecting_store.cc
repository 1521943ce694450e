#include "storage/testing/fault_injecting_store.h"

#include <algorithm>
#include <thread>
#include <utility>

namespace taskengine {
namespace {

class FaultInjectingStore final : public Store {
 public:
  FaultInjectingStore(std::unique_ptr<Store> inner, std::shared_ptr<StoreFaults> faults)
      : inner_(std::move(inner)), faults_(std::move(faults)) {}

  Status Migrate() override {
    TE_RETURN_IF_ERROR(faults_->Enter("Migrate"));
    return inner_->Migrate();
  }
  Result<int> SchemaVersion() override {
    TE_RETURN_IF_ERROR(faults_->Enter("SchemaVersion"));
    return inner_->SchemaVersion();
  }
  void SetLifecycleObserver(std::function<void(std::vector<LifecycleEvent>&&)> observer) override {
    inner_->SetLifecycleObserver(std::move(observer));
  }
  Status SetPayloadLimit(std::int64_t bytes) override {
    TE_RETURN_IF_ERROR(faults_->Enter("SetPayloadLimit"));
    return inner_->SetPayloadLimit(bytes);
  }
  Status UpsertJob(const JobDefinition& job) override {
    TE_RETURN_IF_ERROR(faults_->Enter("UpsertJob"));
    return inner_->UpsertJob(job);
  }
  Status ChangeJob(const JobChange& change) override {
    TE_RETURN_IF_ERROR(faults_->Enter("ChangeJob"));
    return inner_->ChangeJob(change);
  }
  Result<JobDefinition> GetJob(const JobName& name) override {
    TE_RETURN_IF_ERROR(faults_->Enter("GetJob"));
    return inner_->GetJob(name);
  }
  Result<std::vector<JobDefinition>> ListJobs() override {
    TE_RETURN_IF_ERROR(faults_->Enter("ListJobs"));
    return inner_->ListJobs();
  }
  Result<AdmitResult> Admit(const AdmitRequest& request) override {
    TE_RETURN_IF_ERROR(faults_->Enter("Admit"));
    return inner_->Admit(request);
  }
  Result<std::vector<AdmitResult>> AdmitBatch(const std::vector<AdmitRequest>& requests) override {
    TE_RETURN_IF_ERROR(faults_->Enter("AdmitBatch"));
    return inner_->AdmitBatch(requests);
  }
  void AdmitBatchAsync(std::vector<AdmitRequest> requests, AdmitDone done) override {
    if (Status s = faults_->Enter("AdmitBatch"); !s.ok()) return done(s);
    inner_->AdmitBatchAsync(std::move(requests), std::move(done));
  }
  Result<std::vector<Lease>> Claim(const ClaimRequest& request) override {
    TE_RETURN_IF_ERROR(faults_->Enter("Claim"));
    Result<std::vector<Lease>> leases = inner_->Claim(request);
    if (leases.ok()) {
      int marked = 0;
      for (const Lease& lease : *leases) {
        for (const QueueSlot& slot : request.slots) {
          if (slot.queue == lease.queue) {
            marked += ClaimMarksStarted(request, slot) ? 1 : 0;
            break;
          }
        }
      }
      faults_->CountMarks(marked, 0);
    }
    return leases;
  }
  Result<Millis> NextDueIn(const std::vector<std::string>& queues) override {
    TE_RETURN_IF_ERROR(faults_->Enter("NextDueIn"));
    return inner_->NextDueIn(queues);
  }
  std::vector<Status> MarkStarted(const std::vector<LeaseRef>& leases) override {
    if (Status s = faults_->Enter("MarkStarted"); !s.ok())
      return std::vector<Status>(leases.size(), s);
    faults_->CountMarks(0, static_cast<int>(leases.size()));
    return inner_->MarkStarted(leases);
  }
  std::vector<Result<HeartbeatReply>> HeartbeatBatch(
      const std::vector<HeartbeatRequest>& requests) override {
    if (Status s = faults_->Enter("HeartbeatBatch"); !s.ok())
      return std::vector<Result<HeartbeatReply>>(requests.size(), s);
    return inner_->HeartbeatBatch(requests);
  }
  Status AppendLog(const LeaseRef& lease, LogLevel level, std::string_view message) override {
    TE_RETURN_IF_ERROR(faults_->Enter("AppendLog"));
    return inner_->AppendLog(lease, level, message);
  }
  std::vector<Result<FinishReply>> FinishBatch(
      const std::vector<FinishRequest>& requests) override {
    if (Status s = faults_->Enter("FinishBatch"); !s.ok())
      return std::vector<Result<FinishReply>>(requests.size(), s);
    return inner_->FinishBatch(requests);
  }
  void FinishBatchAsync(std::vector<FinishRequest> requests, FinishDone done) override {
    if (Status s = faults_->Enter("FinishBatch"); !s.ok()) {
      return done(std::vector<Result<FinishReply>>(requests.size(), s));
    }
    inner_->FinishBatchAsync(std::move(requests), std::move(done));
  }
  Result<SweepReport> SweepExpired(int max_batch) override {
    TE_RETURN_IF_ERROR(faults_->Enter("SweepExpired"));
    return inner_->SweepExpired(max_batch);
  }
  Result<PurgeReport> Purge(const RetentionCutoffs& cutoffs, int max_rows, bool dry_run) override {
    TE_RETURN_IF_ERROR(faults_->Enter("Purge"));
    return inner_->Purge(cutoffs, max_rows, dry_run);
  }
  Result<std::int64_t> ReclaimSpace(int max_pages) override {
    TE_RETURN_IF_ERROR(faults_->Enter("ReclaimSpace"));
    return inner_->ReclaimSpace(max_pages);
  }
  Result<NotifyOutbox> ReadNotifyOutbox(int max_pending) override {
    TE_RETURN_IF_ERROR(faults_->Enter("ReadNotifyOutbox"));
    return inner_->ReadNotifyOutbox(max_pending);
  }
  Status UpdateNotifyOutbox(const NotifyOutboxUpdate& update) override {
    TE_RETURN_IF_ERROR(faults_->Enter("UpdateNotifyOutbox"));
    return inner_->UpdateNotifyOutbox(update);
  }
  Result<EffectReply> ReserveEffect(const LeaseRef& lease, std::string_view name) override {
    TE_RETURN_IF_ERROR(faults_->Enter("ReserveEffect"));
    return inner_->ReserveEffect(lease, name);
  }
  Result<EffectRecord> CommitEffect(const LeaseRef& lease, std::string_view name,
                                    std::string_view detail) override {
    TE_RETURN_IF_ERROR(faults_->Enter("CommitEffect"));
    return inner_->CommitEffect(lease, name, detail);
  }
  Status ReleaseEffect(const LeaseRef& lease, std::string_view name) override {
    TE_RETURN_IF_ERROR(faults_->Enter("ReleaseEffect"));
    return inner_->ReleaseEffect(lease, name);
  }
  Result<std::vector<EffectRecord>> GetEffects(ExecutionId id) override {
    TE_RETURN_IF_ERROR(faults_->Enter("GetEffects"));
    return inner_->GetEffects(id);
  }
  Result<ExecutionStatus> RequestCancel(ExecutionId id, const OperatorAction& action) override {
    TE_RETURN_IF_ERROR(faults_->Enter("RequestCancel"));
    return inner_->RequestCancel(id, action);
  }
  Result<ReplayReply> Replay(const ReplayRequest& request) override {
    TE_RETURN_IF_ERROR(faults_->Enter("Replay"));
    return inner_->Replay(request);
  }
  Result<ReplayReply> ApproveReplay(ExecutionId id, const OperatorAction& approver) override {
    TE_RETURN_IF_ERROR(faults_->Enter("ApproveReplay"));
    return inner_->ApproveReplay(id, approver);
  }
  Status AppendAudit(const AuditRecord& record) override {
    TE_RETURN_IF_ERROR(faults_->Enter("AppendAudit"));
    return inner_->AppendAudit(record);
  }
  Result<std::vector<AuditRecord>> ListAudit(const AuditFilter& filter) override {
    TE_RETURN_IF_ERROR(faults_->Enter("ListAudit"));
    return inner_->ListAudit(filter);
  }
  Status Grant(std::string_view principal, std::string_view tenant) override {
    TE_RETURN_IF_ERROR(faults_->Enter("Grant"));
    return inner_->Grant(principal, tenant);
  }
  Status Revoke(std::string_view principal, std::string_view tenant) override {
    TE_RETURN_IF_ERROR(faults_->Enter("Revoke"));
    return inner_->Revoke(principal, tenant);
  }
  Result<bool> IsGranted(std::string_view principal, std::string_view tenant) override {
    TE_RETURN_IF_ERROR(faults_->Enter("IsGranted"));
    return inner_->IsGranted(principal, tenant);
  }
  Result<LaneStatus> GetLane(const TenantId& tenant, std::string_view lane) override {
    TE_RETURN_IF_ERROR(faults_->Enter("GetLane"));
    return inner_->GetLane(tenant, lane);
  }
  Result<std::vector<LaneStatus>> ListLanes(const LaneFilter& filter) override {
    TE_RETURN_IF_ERROR(faults_->Enter("ListLanes"));
    return inner_->ListLanes(filter);
  }
  Status UpsertTenant(const Tenant& tenant) override {
    TE_RETURN_IF_ERROR(faults_->Enter("UpsertTenant"));
    return inner_->UpsertTenant(tenant);
  }
  Result<Tenant> GetTenant(const TenantId& id) override {
    TE_RETURN_IF_ERROR(faults_->Enter("GetTenant"));
    return inner_->GetTenant(id);
  }
  Result<std::vector<Tenant>> ListTenants(bool active_only) override {
    TE_RETURN_IF_ERROR(faults_->Enter("ListTenants"));
    return inner_->ListTenants(active_only);
  }
  Result<bool> AcquireLock(std::string_view name, std::string_view holder, Millis ttl_ms) override {
    TE_RETURN_IF_ERROR(faults_->Enter("AcquireLock"));
    return inner_->AcquireLock(name, holder, ttl_ms);
  }
  Status ReleaseLock(std::string_view name, std::string_view holder) override {
    TE_RETURN_IF_ERROR(faults_->Enter("ReleaseLock"));
    return inner_->ReleaseLock(name, holder);
  }
  Result<std::vector<ScheduleState>> ListScheduleStates() override {
    TE_RETURN_IF_ERROR(faults_->Enter("ListScheduleStates"));
    return inner_->ListScheduleStates();
  }
  Result<std::vector<AdmitResult>> CommitSchedule(
      const std::vector<AdmitRequest>& admissions,
      const std::vector<ScheduleUpdate>& updates) override {
    TE_RETURN_IF_ERROR(faults_->Enter("CommitSchedule"));
    return inner_->CommitSchedule(admissions, updates);
  }
  Status UpsertUser(const User& user) override {
    TE_RETURN_IF_ERROR(faults_->Enter("UpsertUser"));
    return inner_->UpsertUser(user);
  }
  Result<User> GetUser(std::string_view name) override {
    TE_RETURN_IF_ERROR(faults_->Enter("GetUser"));
    return inner_->GetUser(name);
  }
  Result<std::vector<User>> ListUsers() override {
    TE_RETURN_IF_ERROR(faults_->Enter("ListUsers"));
    return inner_->ListUsers();
  }
  Result<std::int64_t> CreateToken(const ApiToken& token) override {
    TE_RETURN_IF_ERROR(faults_->Enter("CreateToken"));
    return inner_->CreateToken(token);
  }
  Result<ApiToken> FindToken(std::string_view secret_hash) override {
    TE_RETURN_IF_ERROR(faults_->Enter("FindToken"));
    return inner_->FindToken(secret_hash);
  }
  Status RevokeToken(std::int64_t id) override {
    TE_RETURN_IF_ERROR(faults_->Enter("RevokeToken"));
    return inner_->RevokeToken(id);
  }
  Result<std::vector<ApiToken>> ListTokens() override {
    TE_RETURN_IF_ERROR(faults_->Enter("ListTokens"));
    return inner_->ListTokens();
  }
  Status TouchToken(std::int64_t id) override {
    TE_RETURN_IF_ERROR(faults_->Enter("TouchToken"));
    return inner_->TouchToken(id);
  }
  Status CreateSession(const Session& session) override {
    TE_RETURN_IF_ERROR(faults_->Enter("CreateSession"));
    return inner_->CreateSession(session);
  }
  Result<Session> GetSession(std::string_view id_hash) override {
    TE_RETURN_IF_ERROR(faults_->Enter("GetSession"));
    return inner_->GetSession(id_hash);
  }
  Status TouchSession(std::string_view id_hash) override {
    TE_RETURN_IF_ERROR(faults_->Enter("TouchSession"));
    return inner_->TouchSession(id_hash);
  }
  Status DeleteSession(std::string_view id_hash) override {
    TE_RETURN_IF_ERROR(faults_->Enter("DeleteSession"));
    return inner_->DeleteSession(id_hash);
  }
  Status ReportWorker(const WorkerInfo& worker) override {
    TE_RETURN_IF_ERROR(faults_->Enter("ReportWorker"));
    return inner_->ReportWorker(worker);
  }
  Result<std::vector<WorkerInfo>> ListWorkers(Millis seen_within_ms) override {
    TE_RETURN_IF_ERROR(faults_->Enter("ListWorkers"));
    return inner_->ListWorkers(seen_within_ms);
  }
  void SetWorkListener(std::function<void()> listener) override {
    inner_->SetWorkListener(std::move(listener));
  }
  void SetAdmissionClaimer(AdmissionClaimer* claimer) override {
    inner_->SetAdmissionClaimer(claimer);
  }
  void SetWorkPublisher(std::function<void(const std::string& queue)> publisher) override {
    if (!publisher) {
      inner_->SetWorkPublisher(nullptr);
      return;
    }
    inner_->SetWorkPublisher(
        [faults = faults_, publisher = std::move(publisher)](const std::string& queue) {
          faults->BeforePublishWork();
          publisher(queue);
        });
  }
  Result<Execution> GetExecution(ExecutionId id) override {
    TE_RETURN_IF_ERROR(faults_->Enter("GetExecution"));
    return inner_->GetExecution(id);
  }
  Result<std::vector<AttemptRecord>> GetAttempts(ExecutionId id) override {
    TE_RETURN_IF_ERROR(faults_->Enter("GetAttempts"));
    return inner_->GetAttempts(id);
  }
  Result<ExecutionPage> ListExecutions(const ExecutionFilter& filter) override {
    TE_RETURN_IF_ERROR(faults_->Enter("ListExecutions"));
    return inner_->ListExecutions(filter);
  }
  Result<std::vector<LogEntry>> GetLogs(ExecutionId id, int limit) override {
    TE_RETURN_IF_ERROR(faults_->Enter("GetLogs"));
    return inner_->GetLogs(id, limit);
  }
  Result<StoreStats> GetStats(const TenantScope& scope) override {
    TE_RETURN_IF_ERROR(faults_->Enter("GetStats"));
    return inner_->GetStats(scope);
  }
  Result<std::vector<QueueDepth>> QueueDepths(const TenantScope& scope) override {
    TE_RETURN_IF_ERROR(faults_->Enter("QueueDepths"));
    return inner_->QueueDepths(scope);
  }

 private:
  const std::unique_ptr<Store> inner_;
  const std::shared_ptr<StoreFaults> faults_;
};

}  // namespace

const std::vector<std::string_view>& StoreMethodNames() {
  static const std::vector<std::string_view> names = {"Migrate",
                                                      "SchemaVersion",
                                                      "SetPayloadLimit",
                                                      "UpsertJob",
                                                      "ChangeJob",
                                                      "GetJob",
                                                      "ListJobs",
                                                      "Admit",
                                                      "AdmitBatch",
                                                      "Claim",
                                                      "MarkStarted",
                                                      "HeartbeatBatch",
                                                      "AppendLog",
                                                      "FinishBatch",
                                                      "SweepExpired",
                                                      "Purge",
                                                      "ReclaimSpace",
                                                      "ReadNotifyOutbox",
                                                      "UpdateNotifyOutbox",
                                                      "ReserveEffect",
                                                      "CommitEffect",
                                                      "ReleaseEffect",
                                                      "GetEffects",
                                                      "RequestCancel",
                                                      "Replay",
                                                      "ApproveReplay",
                                                      "AppendAudit",
                                                      "ListAudit",
                                                      "Grant",
                                                      "Revoke",
                                                      "IsGranted",
                                                      "GetLane",
                                                      "ListLanes",
                                                      "UpsertTenant",
                                                      "GetTenant",
                                                      "ListTenants",
                                                      "AcquireLock",
                                                      "ReleaseLock",
                                                      "ListScheduleStates",
                                                      "CommitSchedule",
                                                      "UpsertUser",
                                                      "GetUser",
                                                      "ListUsers",
                                                      "CreateToken",
                                                      "FindToken",
                                                      "RevokeToken",
                                                      "ListTokens",
                                                      "TouchToken",
                                                      "CreateSession",
                                                      "GetSession",
                                                      "TouchSession",
                                                      "DeleteSession",
                                                      "ReportWorker",
                                                      "ListWorkers",
                                                      "GetExecution",
                                                      "GetAttempts",
                                                      "ListExecutions",
                                                      "GetLogs",
                                                      "GetStats",
                                                      "QueueDepths"};
  return names;
}

Status StoreFaults::Fail(std::string_view method, Status status, When when) {
  if (status.ok()) return InvalidArgument("a fault must fail with an error status");
  return Add(Fault{std::string(method), when, std::move(status), {}});
}

Status StoreFaults::Delay(std::string_view method, std::chrono::milliseconds delay, When when) {
  return Add(Fault{std::string(method), when, Status::Ok(), delay});
}

Status StoreFaults::Add(Fault fault) {
  const auto& names = StoreMethodNames();
  if (fault.method != "*" && std::find(names.begin(), names.end(), fault.method) == names.end()) {
    return InvalidArgument("the Store has no method '" + fault.method + "'");
  }
  if (fault.when.skip < 0) return InvalidArgument("skip must be >= 0");
  MutexLock lock(mu_);
  faults_.push_back(std::move(fault));
  return Status::Ok();
}

void StoreFaults::Clear() {
  MutexLock lock(mu_);
  faults_.clear();
  before_publish_work_ = nullptr;
}

void StoreFaults::OnPublishWork(std::function<void()> action) {
  MutexLock lock(mu_);
  before_publish_work_ = std::move(action);
}

void StoreFaults::BeforePublishWork() {
  std::function<void()> action;
  {
    MutexLock lock(mu_);
    action = before_publish_work_;
  }
  if (action) action();
}

int StoreFaults::Calls(std::string_view method) const {
  MutexLock lock(mu_);
  auto it = calls_.find(method);
  return it == calls_.end() ? 0 : it->second;
}

StoreFaults::Marks StoreFaults::marks() const {
  MutexLock lock(mu_);
  return marks_;
}

void StoreFaults::CountMarks(int by_claim, int by_mark_started) {
  MutexLock lock(mu_);
  marks_.by_claim += by_claim;
  marks_.by_mark_started += by_mark_started;
}

int StoreFaults::Failed(std::string_view method) const {
  MutexLock lock(mu_);
  auto it = failed_.find(method);
  return it == failed_.end() ? 0 : it->second;
}

Status StoreFaults::Enter(std::string_view method) {
  std::chrono::milliseconds delay{0};
  Status result = Status::Ok();
  {
    MutexLock lock(mu_);
    for (const std::string_view counted : {method, std::string_view("*")}) {
      auto it = calls_.find(counted);
      if (it == calls_.end()) it = calls_.emplace(std::string(counted), 0).first;
      ++it->second;
    }
    for (Fault& f : faults_) {
      if (f.method != "*" && f.method != method) continue;
      if (!f.status.ok() && !result.ok()) continue;  // one failure per call
      if (f.when.skip > 0) {
        --f.when.skip;
        continue;
      }
      if (f.when.times == 0) continue;
      if (f.when.times > 0) --f.when.times;
      if (f.status.ok()) {
        delay += f.delay;
      } else if (result.ok()) {
        result = f.status;
      }
    }
    if (!result.ok()) {
      ++failed_[std::string(method)];
      ++failed_["*"];
    }
  }
  if (delay.count() > 0) std::this_thread::sleep_for(delay);
  return result;
}

std::unique_ptr<Store> WrapStoreWithFaults(std::unique_ptr<Store> inner,
                                           std::shared_ptr<StoreFaults> faults) {
  return std::make_unique<FaultInjectingStore>(std::move(inner), std::move(faults));
}

std::function<std::unique_ptr<Store>(std::unique_ptr<Store>)> WrapStoreWithFaults(
    std::shared_ptr<StoreFaults> faults) {
  return [faults = std::move(faults)](std::unique_ptr<Store> inner) {
    return WrapStoreWithFaults(std::move(inner), faults);
  };
}

}  // namespace taskengine
