// The threads that run the HTTP server's request handlers.
//
// A task posted while a thread is idle goes to that thread directly (the one
// idle most recently, whose caches are warmest) and wakes it alone, with a
// signal of that thread's own condition variable. Otherwise it waits in a
// FIFO queue for the next thread that finishes a task. The pool's mutex is
// held only to pick the thread or queue the task. A single queue under one
// mutex and condition variable that every thread waits on (asio's
// thread_pool) costs about twice the futex calls per request
// (docs/architecture.md, "The HTTP server").
//
// Thread-safe.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "core/mutex.h"

namespace taskengine::api {

class HandlerPool {
 public:
  // Starts `threads` threads (at least 1).
  explicit HandlerPool(int threads);
  // Stop, then Join.
  ~HandlerPool();
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;

  // Runs `task` on a pool thread. Posted after Stop, it is dropped unrun.
  void Post(std::function<void()> task) EXCLUDES(mu_);
  // No queued task starts after this, nor one posted later; running tasks
  // finish, and so does one being handed to an idle thread meanwhile.
  void Stop() EXCLUDES(mu_);
  // Waits for the threads to end (after Stop), then drops the tasks still
  // queued.
  void Join() EXCLUDES(mu_);

 private:
  struct Worker;
  void Run(Worker& w) EXCLUDES(mu_);

  Mutex mu_;
  std::deque<std::function<void()>> queue_ GUARDED_BY(mu_);
  std::vector<Worker*> idle_ GUARDED_BY(mu_);  // the most recently idle last
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::thread> threads_;
};

}  // namespace taskengine::api
