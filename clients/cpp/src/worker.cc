#include "taskengine_client/worker.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <random>

namespace taskengine_client {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string DefaultWorkerId() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::string name = host[0] != '\0' ? host : "worker";
  return name + ":" + std::to_string(getpid());
}

bool LostClaim(const Status& status) { return status.stale() || status.not_found(); }

}  // namespace

// ---------------------------------------------------------------- LeaseContext

void LeaseContext::SetProgress(int percent) { progress_ = std::clamp(percent, 0, 100); }

void LeaseContext::Log(const std::string& level, const std::string& message) {
  if (lost_) return;
  Status s = client_->Log(lease_.id, lease_.claim_version, level, message);
  if (LostClaim(s)) lost_ = true;
}

LeaseState LeaseContext::Heartbeat() {
  HeartbeatItem item{lease_.id, lease_.claim_version, TakeProgress()};
  auto reply = client_->Heartbeat(item);
  if (reply.ok()) {
    Apply(*reply);
  } else if (LostClaim(reply.status())) {
    lost_ = true;
  }
  return Checkpoint();
}

LeaseState LeaseContext::Checkpoint() const {
  if (lost_) return LeaseState::kLost;
  if (cancel_requested_) return LeaseState::kCancelRequested;
  return LeaseState::kActive;
}

Result<EffectReservation> LeaseContext::ReserveEffect(const std::string& name) {
  auto reply = client_->ReserveEffect(lease_.id, lease_.claim_version, name);
  if (!reply.ok() && LostClaim(reply.status())) lost_ = true;
  if (reply.ok() && reply->answer == "canceled") cancel_requested_ = true;
  return reply;
}

Status LeaseContext::CommitEffect(const std::string& name, const std::string& detail) {
  auto reply = client_->CommitEffect(lease_.id, lease_.claim_version, name, detail);
  if (!reply.ok() && LostClaim(reply.status())) lost_ = true;
  return reply.status();
}

Status LeaseContext::ReleaseEffect(const std::string& name) {
  Status s = client_->ReleaseEffect(lease_.id, lease_.claim_version, name);
  if (LostClaim(s)) lost_ = true;
  return s;
}

void LeaseContext::Apply(const HeartbeatResult& result) {
  if (!result.status.ok()) {
    if (LostClaim(result.status)) lost_ = true;
    return;
  }
  if (result.cancel_requested) cancel_requested_ = true;
}

std::optional<int> LeaseContext::TakeProgress() {
  int p = progress_.load();
  if (p < 0 || p == sent_progress_.load()) return std::nullopt;
  sent_progress_ = p;
  return p;
}

// ---------------------------------------------------------------- Worker

Worker::Worker(Client* client, WorkerOptions options, WorkerHandler handler)
    : client_(client), options_(std::move(options)), handler_(std::move(handler)) {
  if (options_.worker_id.empty()) options_.worker_id = DefaultWorkerId();
  options_.concurrency = std::max(1, std::min(options_.concurrency, 100));
  if (options_.queues.empty()) options_.queues = {"default"};
  if (options_.reconnect_min.count() <= 0) options_.reconnect_min = milliseconds(10);
  if (options_.reconnect_max < options_.reconnect_min)
    options_.reconnect_max = options_.reconnect_min;
}

Worker::~Worker() = default;

void Worker::Log(const std::string& line) {
  if (options_.logger) {
    options_.logger(line);
  } else {
    std::cerr << "taskengine worker " << options_.worker_id << ": " << line << std::endl;
  }
}

WorkerStats Worker::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Worker::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    abort_poll_ = true;
  }
  cv_.notify_all();
}

bool Worker::SleepUnlessStopping(milliseconds d) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, d, [&] { return stopping_.load(); });
}

Status Worker::Run() {
  std::vector<std::thread> threads;
  for (int i = 0; i < options_.concurrency; ++i) threads.emplace_back([this] { HandlerLoop(); });
  std::thread heartbeats([this] { HeartbeatLoop(); });

  std::mt19937_64 random(std::random_device{}());
  milliseconds backoff = options_.reconnect_min;
  bool reported_down = false;
  std::string last_error;
  Status fatal;
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';

  while (!stopping_) {
    int free_slots = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock,
               [&] { return stopping_ || static_cast<int>(held_.size()) < options_.concurrency; });
      if (stopping_) break;
      if (options_.max_jobs > 0 && stats_.leased >= options_.max_jobs) break;
      free_slots = options_.concurrency - static_cast<int>(held_.size());
      if (options_.max_jobs > 0) {
        free_slots =
            static_cast<int>(std::min<std::int64_t>(free_slots, options_.max_jobs - stats_.leased));
      }
    }
    LeaseRequest request;
    request.worker_id = options_.worker_id;
    request.queues = options_.queues;
    request.max = std::min(free_slots, 100);
    request.wait_ms =
        static_cast<int>(std::clamp<std::int64_t>(options_.poll_wait.count(), 0, 30'000));
    request.name = options_.name;
    request.host = host;
    request.pid = static_cast<int>(getpid());
    request.version = options_.version;
    request.concurrency = options_.concurrency;
    request.confirm_start = true;
    request.handlers = options_.handlers;
    auto leases = client_->LeaseExecutions(request, &abort_poll_);
    if (!leases.ok()) {
      if (stopping_) break;
      const Status& s = leases.status();
      if (s.http_status() == 401 || s.http_status() == 403) {
        Log("lease refused: " + s.ToString());
        fatal = s;
        break;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++stats_.reconnects;
      }
      // Logged once per distinct error, not once per retry.
      if (!reported_down || s.ToString() != last_error) {
        Log("cannot lease (" + s.ToString() + "); retrying with backoff");
      }
      last_error = s.ToString();
      reported_down = true;
      std::uniform_int_distribution<std::int64_t> jitter(0, backoff.count() / 2);
      SleepUnlessStopping(backoff + milliseconds(jitter(random)));
      backoff = std::min(backoff * 2, options_.reconnect_max);
      continue;
    }
    if (reported_down) Log("server reachable again");
    reported_down = false;
    backoff = options_.reconnect_min;
    if (leases->empty()) continue;
    ConfirmStarts(&*leases);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (Lease& lease : *leases) {
        auto context = std::make_shared<LeaseContext>(client_, std::move(lease));
        held_[{context->id(), context->claim_version()}] = context;
        queue_.push_back(std::move(context));
        ++stats_.leased;
      }
      new_lease_ = true;
    }
    cv_.notify_all();
  }

  {
    std::lock_guard<std::mutex> lock(mu_);
    leasing_done_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads) t.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    heartbeat_done_ = true;
  }
  cv_.notify_all();
  heartbeats.join();
  return fatal;
}

void Worker::ConfirmStarts(std::vector<Lease>* leases) {
  std::vector<HeartbeatItem> items;
  for (const Lease& lease : *leases) {
    HeartbeatItem item{lease.id, lease.claim_version, std::nullopt};
    item.started = true;
    items.push_back(std::move(item));
  }
  std::int64_t processed = 0, failed = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    processed = stats_.completed + stats_.failed;
    failed = stats_.failed;
  }
  auto reply = client_->HeartbeatBatch(options_.worker_id, items, processed, failed);
  std::vector<Lease> confirmed;
  if (!reply.ok() || reply->size() != leases->size()) {
    // Not confirmed: run none of them. Their leases lapse and, never marked
    // started, are requeued without costing an attempt.
    Log("could not confirm the start of " + std::to_string(leases->size()) + " lease(s): " +
        (reply.ok() ? std::string("unexpected answer") : reply.status().ToString()));
  } else {
    for (std::size_t i = 0; i < leases->size(); ++i) {
      if ((*reply)[i].status.ok()) confirmed.push_back(std::move((*leases)[i]));
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto dropped = static_cast<std::int64_t>(leases->size() - confirmed.size());
    stats_.leased += dropped;
    stats_.lost += dropped;
  }
  leases->swap(confirmed);
}

void Worker::HandlerLoop() {
  while (true) {
    std::shared_ptr<LeaseContext> context;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty() || leasing_done_; });
      if (queue_.empty()) return;
      context = std::move(queue_.front());
      queue_.pop_front();
    }
    if (stopping_) {
      // Not started: give it back so another worker runs it at once.
      Report(context, Outcome::Release());
    } else {
      RunOne(context);
    }
  }
}

void Worker::RunOne(const std::shared_ptr<LeaseContext>& context) {
  Outcome outcome;
  try {
    outcome = handler_(*context);
  } catch (const std::exception& e) {
    outcome = Outcome::Retryable(std::string("handler threw: ") + e.what());
  } catch (...) {
    outcome = Outcome::Retryable("handler threw");
  }
  Report(context, outcome);
}

void Worker::Report(const std::shared_ptr<LeaseContext>& context, const Outcome& outcome) {
  bool lost = context->Checkpoint() == LeaseState::kLost;
  if (!lost) {
    FinishItem item;
    item.id = context->id();
    item.claim_version = context->claim_version();
    item.kind = outcome.kind == Outcome::Kind::kComplete ? FinishItem::Kind::kComplete
                : outcome.kind == Outcome::Kind::kFail   ? FinishItem::Kind::kFail
                                                         : FinishItem::Kind::kRelease;
    item.result = outcome.result;
    item.failure_class = outcome.failure_class;
    item.error = outcome.error;
    item.retry_after_ms = outcome.retry_after_ms;
    // Progress set after the last heartbeat is sent before a failure/release.
    if (item.kind != FinishItem::Kind::kComplete) {
      if (auto progress = context->TakeProgress()) {
        (void)client_->Heartbeat({item.id, item.claim_version, progress});
      }
    }
    const auto deadline = Clock::now() + options_.finish_retry_for;
    milliseconds backoff = options_.reconnect_min;
    while (true) {
      auto reply = client_->Finish(item);
      if (reply.ok()) break;
      if (LostClaim(reply.status())) {
        lost = true;
        break;
      }
      if (!reply.status().retryable() || Clock::now() >= deadline) {
        Log("could not report execution " + item.id + ": " + reply.status().ToString());
        lost = true;
        break;
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, options_.reconnect_max);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    held_.erase({context->id(), context->claim_version()});
    if (lost) {
      ++stats_.lost;
    } else if (outcome.kind == Outcome::Kind::kComplete) {
      ++stats_.completed;
    } else if (outcome.kind == Outcome::Kind::kFail) {
      ++stats_.failed;
    } else {
      ++stats_.released;
    }
  }
  cv_.notify_all();
}

void Worker::HeartbeatLoop() {
  auto last = Clock::now();
  bool reported_down = false;
  while (true) {
    std::vector<std::shared_ptr<LeaseContext>> held;
    std::int64_t processed = 0, failed = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      while (true) {
        if (heartbeat_done_) return;
        milliseconds interval = options_.idle_heartbeat;
        for (const auto& [key, context] : held_) {
          if (context->lease().lease_ms > 0) {
            interval = std::min(interval, milliseconds(context->lease().lease_ms / 3));
          }
        }
        interval = std::max(interval, milliseconds(20));
        new_lease_ = false;
        const auto due = last + interval;
        if (Clock::now() >= due) break;
        cv_.wait_until(lock, due, [&] { return heartbeat_done_ || new_lease_; });
      }
      for (const auto& [key, context] : held_) held.push_back(context);
      processed = stats_.completed + stats_.failed;
      failed = stats_.failed;
    }
    last = Clock::now();
    std::vector<HeartbeatItem> items;
    for (const auto& context : held) {
      items.push_back({context->id(), context->claim_version(), context->TakeProgress()});
    }
    auto reply = client_->HeartbeatBatch(options_.worker_id, items, processed, failed);
    if (!reply.ok()) {
      if (!reported_down) Log("heartbeat failed: " + reply.status().ToString());
      reported_down = true;
      continue;
    }
    reported_down = false;
    if (reply->size() == held.size()) {
      // Answers come in request order: each applies to its own lease (two
      // leases of one execution, a stale one and its successor, differ).
      for (std::size_t i = 0; i < held.size(); ++i) held[i]->Apply((*reply)[i]);
      continue;
    }
    for (const HeartbeatResult& result : *reply) {
      for (const auto& context : held) {
        if (context->id() == result.id) context->Apply(result);
      }
    }
  }
}

}  // namespace taskengine_client
