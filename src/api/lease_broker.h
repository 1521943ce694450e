// Server side of the remote worker protocol's long poll (W4), and group
// commit of concurrent worker calls.
//
// LeaseBroker: POST /api/v1/worker/lease claims at once on the handler
// thread; when nothing is due and the worker may wait, the request's
// Responder is parked here instead of holding a thread. One broker thread
// serves the parked polls in FIFO order when
//   - Wake() is called (the engine's work listener: an in-process admission,
//     replay, sweep, or a published outcome that queued work again or let a
//     lane move on, made work due),
//   - the bounded poll interval passes (other processes may admit), or
//   - a poll's deadline passes (it is answered with an empty list).
// Intervals and deadlines are read from the Clock's monotonic reading
// (Clock::Steady); the thread blocks for the time left by that reading, so
// with a FakeClock time passes only when the test advances it (and wakes the
// broker).
// Concurrent polls of the same worker for the same queues (and the same
// LeasePoll::mark_started and handlers) are merged into one store Claim. Stop() answers every
// parked poll with an empty list. The HTTP layer does not tell when a waiting client went away: its
// poll is still served, and leases handed to it lapse and are recovered by the sweeper like those
// of a crashed worker (L4).
//
// CallBatcher: callers that arrive while a store batch call runs are handed
// to the next batch together (leader/follower group commit), so N concurrent
// heartbeats cost about two store transactions instead of N.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "storage/store.h"
#include "taskengine/clock.h"
#include "taskengine/status.h"
#include "taskengine/types.h"

namespace taskengine::api {

struct LeaseBrokerOptions {
  // Parked polls are served at least this often, woken or not, so work
  // admitted by other processes is picked up. Default: 250 ms.
  std::chrono::milliseconds poll_interval{250};
  // Most polls parked at once; Submit answers kUnavailable beyond. Default: 10,000.
  std::size_t max_parked = 10'000;
  // Most executions one merged store claim may take. Default: 1,000.
  int max_claim = 1'000;
};

// One lease request of a remote worker.
struct LeasePoll {
  WorkerId worker;
  std::vector<std::string> queues;    // 1..n queue names, in priority order
  int max = 1;                        // 1..max_claim executions at most
  std::chrono::milliseconds wait{0};  // how long it may be parked; 0 = answer at once
  // L4: whether the leases count as started when claimed (true), or only
  // once the worker confirms it started their handlers (Store::MarkStarted,
  // through the batch heartbeat): then the leases of a worker that went away
  // before it received them expire as free requeues.
  bool mark_started = true;
  // W4: the handlers the worker can run (ClaimRequest::handlers); nullopt =
  // any.
  std::optional<std::vector<std::string>> handlers;
  // Receives the leases (possibly none) exactly once: on the submitting
  // thread or on the broker thread. Must not block for long (it renders and
  // sends a response). REQUIRES: set.
  std::function<void(std::vector<Lease>)> deliver;
};

// Thread-safe. Owns one thread (started by the constructor, joined by Stop).
class LeaseBroker {
 public:
  // `store` and `clock` are not owned and must outlive the broker.
  LeaseBroker(Store* store, Clock* clock, LeaseBrokerOptions options);
  ~LeaseBroker();  // Stop()
  LeaseBroker(const LeaseBroker&) = delete;
  LeaseBroker& operator=(const LeaseBroker&) = delete;

  // Claims for `poll` on the calling thread. Delivers what it got when that
  // is at least one lease or the poll may not wait; otherwise parks the poll.
  // After Stop(), delivers an empty list at once without claiming.
  // Errors (nothing delivered, nothing claimed): the store's error when the
  // first claim failed; kUnavailable when max_parked polls are parked.
  Status Submit(LeasePoll poll) EXCLUDES(signal_->mu);

  // Work may be due: serve the parked polls now. Cheap, never blocks on the
  // store (safe as an Engine work listener).
  void Wake() EXCLUDES(signal_->mu);
  // A callable that forwards to Wake() while the broker lives and is a no-op
  // after, for listeners that may outlive the broker.
  std::function<void()> WakeCallback() const;

  // Answers every parked poll with an empty list, stops the broker thread and
  // makes later Submits answer empty lists at once. Idempotent.
  void Stop() EXCLUDES(signal_->mu);

  // Polls parked now (including those being served).
  std::size_t parked() const EXCLUDES(signal_->mu);

 private:
  struct Parked {
    LeasePoll poll;
    Clock::SteadyTime deadline;  // by clock_->Steady()
  };
  // What wakes the broker thread; shared with WakeCallback()s.
  struct Signal {
    Mutex mu;
    CondVar cv;
    std::uint64_t generation GUARDED_BY(mu) = 0;  // bumped by every Wake()
    // Loop waits for a poll to park: a wake changes nothing for it, so
    // none is signalled.
    bool idle GUARDED_BY(mu) = false;

    void Bump() EXCLUDES(mu) {
      bool signal = false;
      {
        MutexLock lock(mu);
        ++generation;
        signal = !idle;
      }
      if (signal) cv.NotifyAll();
    }
  };
  struct Claimed {
    std::vector<Lease> leases;
    Status status;  // the first claim error, if any (leases may still hold some)
  };

  // Claims up to poll.max (or `max` when set) for the poll's worker from its
  // queues in order, one store claim per queue until the maximum is reached.
  // Skips queues in `*drained` and adds the ones a claim found drained (keys:
  // DrainedKey, since a queue drained of one handler set may hold work of
  // another).
  Claimed ClaimFor(const LeasePoll& poll, int max, std::set<std::string>* drained)
      EXCLUDES(signal_->mu);
  // Serves `batch` (FIFO); returns the polls that got nothing, in order.
  std::vector<Parked> ServeRound(std::vector<Parked> batch) EXCLUDES(signal_->mu);
  void Loop() EXCLUDES(signal_->mu);

  // Constant after construction.
  Store* const store_;
  Clock* const clock_;
  const LeaseBrokerOptions options_;
  const std::shared_ptr<Signal> signal_;

  std::deque<Parked> parked_ GUARDED_BY(signal_->mu);
  // Polls taken out of parked_ by the round being served.
  std::size_t in_round_ GUARDED_BY(signal_->mu) = 0;
  // A poll parked after a wake it may have missed.
  bool round_due_ GUARDED_BY(signal_->mu) = false;
  bool stopping_ GUARDED_BY(signal_->mu) = false;

  std::thread thread_;
};

// Group commit of concurrent calls into one batch call. `flush` receives the
// requests of one batch (at most max_batch) and returns one reply per request,
// in order; it runs on one of the calling threads (the leader) while the
// others wait, and must not throw. Thread-safe.
template <typename Request, typename Reply>
class CallBatcher {
 public:
  using Flush = std::function<std::vector<Reply>(const std::vector<Request>&)>;

  CallBatcher(Flush flush, std::size_t max_batch)
      : flush_(std::move(flush)), max_batch_(max_batch < 1 ? 1 : max_batch) {}

  // Blocks until the batch holding `request` has been flushed; returns its reply.
  Reply Call(Request request) EXCLUDES(mu_) {
    Slot slot{std::move(request), std::nullopt};
    MutexLock lock(mu_);
    queue_.push_back(&slot);
    while (true) {
      while (!slot.reply.has_value() && leader_active_) cv_.Wait(mu_);
      if (slot.reply.has_value()) return std::move(*slot.reply);
      // No flush runs and ours is still queued: lead the next batch.
      leader_active_ = true;
      const std::size_t n = std::min(queue_.size(), max_batch_);
      std::vector<Slot*> batch(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
      lock.Unlock();
      std::vector<Request> requests;
      requests.reserve(batch.size());
      for (Slot* s : batch) requests.push_back(std::move(s->request));
      std::vector<Reply> replies = flush_(requests);
      TE_CHECK(replies.size() == batch.size());
      lock.Lock();
      for (std::size_t i = 0; i < batch.size(); ++i) batch[i]->reply.emplace(std::move(replies[i]));
      leader_active_ = false;
      cv_.NotifyAll();
    }
  }

 private:
  struct Slot {
    Request request;
    std::optional<Reply> reply;
  };

  // Constant after construction.
  const Flush flush_;
  const std::size_t max_batch_;

  Mutex mu_;
  CondVar cv_;
  std::deque<Slot*> queue_ GUARDED_BY(mu_);  // slots live on their callers' stacks
  bool leader_active_ GUARDED_BY(mu_) = false;
};

}  // namespace taskengine::api
