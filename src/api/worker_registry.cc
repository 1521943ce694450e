// WorkerRegistry: see worker_registry.h for the contract.
#include "api/worker_registry.h"

#include <utility>

namespace taskengine::api {

WorkerRegistry::WorkerRegistry(const Clock* clock) : clock_(clock) {}

std::optional<WorkerInfo> WorkerRegistry::OnLease(const Registration& r, Millis now) {
  MutexLock lock(mu_);
  Forget(clock_->Steady());
  Entry& e = Touch(r.id, now);
  if (r.name) e.details.name = *r.name;
  if (r.host) e.host = *r.host;
  if (r.version) e.details.version = *r.version;
  if (r.pid) e.pid = *r.pid;
  if (r.concurrency) e.details.concurrency = *r.concurrency;
  e.details.queues = r.queues;
  e.details.handlers = r.handlers.value_or(std::vector<std::string>{});
  return ReportIfDue(r.id, e);
}

void WorkerRegistry::OnLeased(const WorkerId& worker, const std::vector<Lease>& leases) {
  if (leases.empty()) return;
  MutexLock lock(mu_);
  auto it = workers_.find(worker.value);
  if (it == workers_.end()) return;
  for (const Lease& l : leases) {
    it->second.current.insert(l.id.value);
    owner_[l.id.value] = worker.value;
  }
}

std::optional<WorkerInfo> WorkerRegistry::OnHeartbeat(const WorkerId& worker,
                                                      const std::vector<ExecutionId>& in_hand,
                                                      std::optional<std::int64_t> processed,
                                                      std::optional<std::int64_t> failed,
                                                      Millis now) {
  MutexLock lock(mu_);
  Entry& e = Touch(worker, now);
  for (std::int64_t id : e.current) owner_.erase(id);
  e.current.clear();
  for (ExecutionId id : in_hand) {
    e.current.insert(id.value);
    owner_[id.value] = worker.value;
  }
  if (processed) e.processed = *processed;
  if (failed) e.failed = *failed;
  return ReportIfDue(worker, e);
}

void WorkerRegistry::OnFinished(const std::vector<ExecutionId>& ids) {
  MutexLock lock(mu_);
  for (ExecutionId id : ids) {
    auto it = owner_.find(id.value);
    if (it == owner_.end()) continue;
    auto w = workers_.find(it->second);
    if (w != workers_.end()) w->second.current.erase(id.value);
    owner_.erase(it);
  }
}

void WorkerRegistry::Snapshot(std::map<std::string, WorkerDetails>* details,
                              std::map<std::string, WorkerInfo>* rows) const {
  MutexLock lock(mu_);
  for (const auto& [id, e] : workers_) {
    WorkerDetails d = e.details;
    d.current.clear();
    for (std::int64_t x : e.current) d.current.push_back(ExecutionId(x));
    (*details)[id] = std::move(d);
    (*rows)[id] = Row(WorkerId(id), e);
  }
}

WorkerRegistry::Entry& WorkerRegistry::Touch(const WorkerId& id, Millis now) {
  auto [it, inserted] = workers_.try_emplace(id.value);
  Entry& e = it->second;
  if (inserted) e.started_at = now;
  e.details.last_seen_at = now;
  e.last_seen = clock_->Steady();
  return e;
}

WorkerInfo WorkerRegistry::Row(const WorkerId& id, const Entry& e) {
  WorkerInfo w;
  w.id = id;
  w.hostname = e.host;
  w.pid = e.pid;
  w.kind = WorkerKind::kRemote;
  w.state = e.current.empty() ? WorkerState::kIdle : WorkerState::kBusy;
  w.threads = e.details.concurrency;
  w.busy = static_cast<int>(e.current.size());
  for (std::int64_t x : e.current) {
    if (w.current.size() >= kMaxWorkerCurrent) break;
    w.current.push_back(ExecutionId(x));
  }
  w.processed = e.processed;
  w.failed = e.failed;
  w.started_at = e.started_at;
  w.last_heartbeat_at = e.details.last_seen_at;
  return w;
}

std::optional<WorkerInfo> WorkerRegistry::ReportIfDue(const WorkerId& id, Entry& e) {
  WorkerInfo row = Row(id, e);
  const SteadyTime now = clock_->Steady();
  if (e.reported && row.state == e.reported_state && now - e.last_report < kWorkerReportInterval) {
    return std::nullopt;
  }
  e.reported = true;
  e.reported_state = row.state;
  e.last_report = now;
  return row;
}

void WorkerRegistry::Forget(SteadyTime now) {
  if (now - last_forget_ < kWorkerForgetCheckEvery) return;
  last_forget_ = now;
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (now - it->second.last_seen > kForgetWorkerAfter) {
      for (std::int64_t id : it->second.current) owner_.erase(id);
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace taskengine::api
