#include "api/lease_broker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "platform/thread_name.h"

namespace taskengine::api {

LeaseBroker::LeaseBroker(Store* store, Clock* clock, LeaseBrokerOptions options)
    : store_(store), clock_(clock), options_(options), signal_(std::make_shared<Signal>()) {
  TE_CHECK(store_ != nullptr);
  TE_CHECK(clock_ != nullptr);
  thread_ = NamedThread("te-lease-broker", [this] { Loop(); });
}

LeaseBroker::~LeaseBroker() { Stop(); }

void LeaseBroker::Wake() { signal_->Bump(); }

std::function<void()> LeaseBroker::WakeCallback() const {
  // The signal outlives the broker when a listener holds it; waking a stopped
  // broker's signal only bumps a counter nobody reads.
  std::shared_ptr<Signal> signal = signal_;
  return [signal] { signal->Bump(); };
}

std::size_t LeaseBroker::parked() const {
  MutexLock lock(signal_->mu);
  return parked_.size() + in_round_;
}

namespace {

// The handler filter of `poll` as text: "*" for any, else the names, each
// after a NUL.
std::string HandlersKey(const LeasePoll& poll) {
  if (!poll.handlers) return "*";
  std::string key;
  for (const std::string& h : *poll.handlers) key += '\0' + h;
  return key;
}

// `queue` drained for the handler filter of `poll`.
std::string DrainedKey(const LeasePoll& poll, const std::string& queue) {
  return queue + '\1' + HandlersKey(poll);
}

}  // namespace

LeaseBroker::Claimed LeaseBroker::ClaimFor(const LeasePoll& poll, int max,
                                           std::set<std::string>* drained) {
  Claimed out;
  for (const std::string& queue : poll.queues) {
    const int wanted = max - static_cast<int>(out.leases.size());
    if (wanted <= 0) break;
    const std::string drained_key = DrainedKey(poll, queue);
    if (drained->count(drained_key) > 0) continue;
    ClaimRequest request;
    request.worker = poll.worker;
    request.slots.push_back(QueueSlot{queue, wanted});
    request.mark_started = poll.mark_started;
    request.handlers = poll.handlers;
    Result<std::vector<Lease>> got = store_->Claim(request);
    if (!got.ok()) {
      out.status = got.status();
      break;
    }
    if (static_cast<int>(got->size()) < wanted) drained->insert(drained_key);
    for (Lease& lease : *got) out.leases.push_back(std::move(lease));
  }
  return out;
}

Status LeaseBroker::Submit(LeasePoll poll) {
  TE_CHECK(poll.deliver != nullptr);
  std::uint64_t generation = 0;
  bool stopping = false;
  {
    MutexLock lock(signal_->mu);
    stopping = stopping_;
    generation = signal_->generation;
  }
  if (stopping) {
    poll.deliver({});
    return Status::Ok();
  }
  std::set<std::string> drained;
  Claimed claimed = ClaimFor(poll, poll.max, &drained);
  if (!claimed.status.ok() && claimed.leases.empty()) return claimed.status;
  if (!claimed.leases.empty() || poll.wait.count() <= 0) {
    poll.deliver(std::move(claimed.leases));
    return Status::Ok();
  }
  {
    MutexLock lock(signal_->mu);
    if (!stopping_) {
      if (parked_.size() + in_round_ >= options_.max_parked) {
        return Unavailable("too many workers are waiting for leases (" +
                           std::to_string(options_.max_parked) + "); retry later");
      }
      // A wake between our claim and now found nothing parked: serve at once.
      if (signal_->generation != generation) round_due_ = true;
      const Clock::SteadyTime deadline = clock_->Steady() + poll.wait;
      parked_.push_back(Parked{std::move(poll), deadline});
      signal_->cv.NotifyAll();
      return Status::Ok();
    }
  }
  poll.deliver({});
  return Status::Ok();
}

std::vector<LeaseBroker::Parked> LeaseBroker::ServeRound(std::vector<Parked> batch) {
  // Group the polls of one worker for the same queues (in FIFO order of
  // their first member): one claim serves the whole group.
  struct Group {
    std::vector<std::size_t> members;  // indexes into batch, FIFO
    int wanted = 0;
  };
  std::vector<Group> groups;
  std::map<std::string, std::size_t> group_of;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const LeasePoll& p = batch[i].poll;
    std::string key = p.worker.value + (p.mark_started ? "\1" : "\2") + HandlersKey(p) + '\3';
    for (const std::string& q : p.queues) key += '\0' + q;
    auto [it, inserted] = group_of.emplace(std::move(key), groups.size());
    if (inserted) groups.emplace_back();
    Group& g = groups[it->second];
    g.members.push_back(i);
    g.wanted = std::min(options_.max_claim, g.wanted + p.max);
  }
  std::vector<bool> answered(batch.size(), false);
  std::set<std::string> drained;
  for (const Group& g : groups) {
    const LeasePoll& first = batch[g.members.front()].poll;
    bool all_drained = true;
    for (const std::string& q : first.queues) {
      all_drained = all_drained && drained.count(DrainedKey(first, q)) > 0;
    }
    if (all_drained) continue;
    Claimed claimed = ClaimFor(first, g.wanted, &drained);
    if (!claimed.status.ok()) {
      spdlog::warn("lease broker: claim for worker {} failed: {}", first.worker.value,
                   claimed.status.ToString());
    }
    std::size_t next = 0;
    for (std::size_t m : g.members) {
      if (next >= claimed.leases.size()) break;
      const std::size_t n =
          std::min(claimed.leases.size() - next, static_cast<std::size_t>(batch[m].poll.max));
      std::vector<Lease> mine(std::make_move_iterator(claimed.leases.begin() + next),
                              std::make_move_iterator(claimed.leases.begin() + next + n));
      next += n;
      answered[m] = true;
      batch[m].poll.deliver(std::move(mine));
    }
  }
  std::vector<Parked> waiting;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    if (!answered[i]) waiting.push_back(std::move(batch[i]));
  }
  return waiting;
}

void LeaseBroker::Loop() {
  MutexLock lock(signal_->mu);
  std::uint64_t seen = signal_->generation;
  Clock::SteadyTime last_round = clock_->Steady();
  while (!stopping_) {
    if (parked_.empty()) {
      signal_->idle = true;
      while (!stopping_ && parked_.empty()) signal_->cv.Wait(signal_->mu);
      signal_->idle = false;
      // Wakes while nothing was parked concern nobody: the new poll's own
      // claim saw their work (Submit sets round_due_ for one it may have missed).
      if (!round_due_) seen = signal_->generation;
      last_round = clock_->Steady();
      continue;
    }
    Clock::SteadyTime until = last_round + options_.poll_interval;
    for (const Parked& p : parked_) until = std::min(until, p.deadline);
    while (!stopping_ && !round_due_ && signal_->generation == seen &&
           signal_->cv.WaitFor(signal_->mu, until - clock_->Steady())) {
    }
    if (stopping_) break;
    Clock::SteadyTime now = clock_->Steady();
    const bool woken = round_due_ || signal_->generation != seen;
    if (woken || now - last_round >= options_.poll_interval) {
      seen = signal_->generation;
      round_due_ = false;
      last_round = now;
      std::vector<Parked> batch(std::make_move_iterator(parked_.begin()),
                                std::make_move_iterator(parked_.end()));
      parked_.clear();
      in_round_ = batch.size();
      lock.Unlock();
      std::vector<Parked> waiting = ServeRound(std::move(batch));
      lock.Lock();
      // The unanswered keep their place ahead of polls parked meanwhile.
      for (auto it = waiting.rbegin(); it != waiting.rend(); ++it)
        parked_.push_front(std::move(*it));
      in_round_ = 0;
      now = clock_->Steady();
    }
    std::vector<Parked> expired;
    for (auto it = parked_.begin(); it != parked_.end();) {
      if (it->deadline <= now) {
        expired.push_back(std::move(*it));
        it = parked_.erase(it);
      } else {
        ++it;
      }
    }
    if (!expired.empty()) {
      lock.Unlock();
      for (Parked& p : expired) p.poll.deliver({});
      lock.Lock();
    }
  }
  std::vector<Parked> rest(std::make_move_iterator(parked_.begin()),
                           std::make_move_iterator(parked_.end()));
  parked_.clear();
  lock.Unlock();
  for (Parked& p : rest) p.poll.deliver({});
}

void LeaseBroker::Stop() {
  {
    MutexLock lock(signal_->mu);
    stopping_ = true;
  }
  signal_->cv.NotifyAll();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

}  // namespace taskengine::api
