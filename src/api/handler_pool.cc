#include "api/handler_pool.h"

#include <algorithm>
#include <utility>

#include "platform/thread_name.h"

namespace taskengine::api {

// One thread's hand-off: Post (or Stop) sets `task` (or `stop`) under `mu`
// and signals `wake`. A condition variable, not a std::binary_semaphore:
// libstdc++'s semaphore spins with sched_yield before it sleeps, about two
// system calls (and often a context switch) per request on a busy machine.
struct HandlerPool::Worker {
  Mutex mu;
  CondVar wake;
  std::function<void()> task GUARDED_BY(mu);
  bool stop GUARDED_BY(mu) = false;

  void Give(std::function<void()> t, bool end) EXCLUDES(mu) {
    {
      MutexLock lock(mu);
      task = std::move(t);
      stop = end;
    }
    wake.NotifyOne();
  }
  // The task given, or an empty function when stopped.
  std::function<void()> Take() EXCLUDES(mu) {
    MutexLock lock(mu);
    while (!task && !stop) wake.Wait(mu);
    return std::exchange(task, nullptr);
  }
};

HandlerPool::HandlerPool(int threads) {
  const int n = std::max(1, threads);
  for (int i = 0; i < n; ++i) workers_.push_back(std::make_unique<Worker>());
  for (int i = 0; i < n; ++i)
    threads_.push_back(NamedThread("te-http-handler", [this, w = workers_[i].get()] { Run(*w); }));
}

HandlerPool::~HandlerPool() {
  Stop();
  Join();
}

void HandlerPool::Post(std::function<void()> task) {
  Worker* w = nullptr;
  {
    MutexLock lock(mu_);
    if (stopping_) return;  // dropped unrun
    if (idle_.empty()) {
      queue_.push_back(std::move(task));
      return;
    }
    w = idle_.back();
    idle_.pop_back();
  }
  w->Give(std::move(task), /*end=*/false);
}

void HandlerPool::Stop() {
  std::vector<Worker*> idle;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    idle.swap(idle_);
  }
  for (Worker* w : idle) w->Give(nullptr, /*end=*/true);
}

void HandlerPool::Join() {
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  std::deque<std::function<void()>> dropped;
  MutexLock lock(mu_);
  dropped.swap(queue_);
}

void HandlerPool::Run(Worker& w) {
  while (true) {
    std::function<void()> task;
    {
      MutexLock lock(mu_);
      if (stopping_) return;
      if (!queue_.empty()) {
        task = std::move(queue_.front());
        queue_.pop_front();
      } else {
        idle_.push_back(&w);
      }
    }
    if (!task) {
      task = w.Take();
      if (!task) return;  // woken by Stop
    }
    task();
  }
}

}  // namespace taskengine::api
