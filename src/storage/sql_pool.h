// A fixed pool of connections to a database server, shared by the server
// backends (PostgreSQL, MariaDB): each call takes one connection exclusively,
// connecting or reconnecting it as needed, with backoff while the server is
// unreachable. A connection found broken makes every connection made before
// it suspect (the server probably restarted): each reconnects on its next use.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "taskengine/clock.h"
#include "taskengine/status.h"

namespace taskengine::storage_internal {

// Conn: default-constructible, with bool healthy() const and void Close().
template <typename Conn>
class SqlPool {
 public:
  struct Slot {
    Conn conn;
    int index = 0;  // 0..size-1, constant
    bool connected = false;
    // The pool's loss count when this connection was (re)established.
    std::uint64_t connected_after_losses = 0;
  };

  struct Options {
    int size = 4;
    std::chrono::milliseconds backoff_min{100};
    std::chrono::milliseconds backoff_max{2000};
    std::string server_name;  // "PostgreSQL", "MariaDB": for messages
  };

  // `connect` (re)connects a connection; `clock` gives the backoff's time.
  SqlPool(Options options, Clock* clock, std::function<Status(Conn&)> connect)
      : options_(std::move(options)),
        clock_(clock),
        connect_(std::move(connect)),
        backoff_(options_.backoff_min) {
    for (int i = 0; i < std::max(1, options_.size); ++i) {
      all_.push_back(std::make_unique<Slot>());
      all_.back()->index = i;
      idle_.push_back(all_.back().get());
    }
  }

  int size() const { return static_cast<int>(all_.size()); }

  // Takes an idle connection (waiting for one), connecting or reconnecting
  // it as needed. kUnavailable while the server cannot be reached.
  Result<Slot*> Acquire() EXCLUDES(mu_) {
    Slot* slot = nullptr;
    bool reconnect = false;
    {
      MutexLock lock(mu_);
      while (idle_.empty()) cv_.Wait(mu_);
      slot = idle_.back();
      idle_.pop_back();
      reconnect =
          !slot->connected || !slot->conn.healthy() || slot->connected_after_losses < losses_;
      if (reconnect) {
        const Clock::SteadyTime now = clock_->Steady();
        if (now < next_connect_at_) {
          idle_.push_back(slot);
          cv_.NotifyOne();
          return Unavailable(options_.server_name + " is unreachable; reconnecting in " +
                             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                next_connect_at_ - now)
                                                .count()) +
                             " ms (last error: " + last_connect_error_ + ")");
        }
      }
    }
    if (!reconnect) return slot;
    slot->conn.Close();
    slot->connected = false;
    Status st = connect_(slot->conn);
    MutexLock lock(mu_);
    if (!st.ok()) {
      last_connect_error_ = st.message();
      next_connect_at_ = clock_->Steady() + backoff_;
      backoff_ = std::min(backoff_ * 2, options_.backoff_max);
      idle_.push_back(slot);
      cv_.NotifyOne();
      return st;
    }
    backoff_ = options_.backoff_min;
    slot->connected = true;
    slot->connected_after_losses = losses_;
    return slot;
  }

  // Returns a connection. A broken one is closed and makes older ones suspect.
  void Release(Slot* slot) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    if (slot->connected && !slot->conn.healthy()) {
      slot->conn.Close();
      slot->connected = false;
      ++losses_;
    }
    idle_.push_back(slot);
    cv_.NotifyOne();
  }

 private:
  // Constant after construction.
  const Options options_;
  Clock* const clock_;
  const std::function<Status(Conn&)> connect_;
  std::vector<std::unique_ptr<Slot>> all_;

  Mutex mu_;
  CondVar cv_;
  std::vector<Slot*> idle_ GUARDED_BY(mu_);
  // Connections found broken so far (each makes every older one suspect).
  std::uint64_t losses_ GUARDED_BY(mu_) = 0;
  // No reconnect before this (clock_->Steady()): the backoff after a failed one.
  Clock::SteadyTime next_connect_at_ GUARDED_BY(mu_){};
  std::chrono::milliseconds backoff_ GUARDED_BY(mu_);
  std::string last_connect_error_ GUARDED_BY(mu_);
};

}  // namespace taskengine::storage_internal
