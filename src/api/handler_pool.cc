#include "api/handler_pool.h"

#include <algorithm>
#include <semaphore>
#include <utility>

namespace taskengine::api {

// One thread's hand-off: Post (or Stop) sets `task` and releases `wake`,
// which orders the write before the thread's read.
struct HandlerPool::Worker {
  std::binary_semaphore wake{0};
  std::function<void()> task;  // empty on a wake by Stop
};

HandlerPool::HandlerPool(int threads) {
  const int n = std::max(1, threads);
  for (int i = 0; i < n; ++i) workers_.push_back(std::make_unique<Worker>());
  for (int i = 0; i < n; ++i) threads_.emplace_back([this, w = workers_[i].get()] { Run(*w); });
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
  w->task = std::move(task);
  w->wake.release();
}

void HandlerPool::Stop() {
  std::vector<Worker*> idle;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    idle.swap(idle_);
  }
  for (Worker* w : idle) w->wake.release();
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
      w.wake.acquire();
      if (!w.task) return;  // woken by Stop
      task = std::exchange(w.task, nullptr);
    }
    task();
  }
}

}  // namespace taskengine::api
