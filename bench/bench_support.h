// Pieces shared by the benchmarks: quantiles of samples and this machine's
// wakeup floor (a condition-variable handoff after an idle gap, as
// /work/shared/tools/wakeup-floor.c measures it), taken in the same run as
// the figure it is compared with.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "core/mutex.h"

namespace taskengine::bench {

// The p-quantile (0..1) of a non-empty sample, by nearest rank.
inline double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * v.size()))];
}

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One machine-readable line per figure, read by bench/run.sh to write
// docs/benchmarks.md:
//   @figure|ID|WHAT|MEDIAN|MIN|MAX|RUNS|UNIT|OP|TARGET
// `runs` holds the figure of each run; OP is ">=" or "<=" (the direction of
// the quality.md target) or "-" for a figure without a target (then TARGET
// is 0). WHAT must not contain '|'.
inline void PrintFigure(const std::string& id, const std::string& what,
                        const std::vector<double>& runs, const std::string& unit,
                        const char* op = "-", double target = 0) {
  if (runs.empty()) return;
  const auto [lo, hi] = std::minmax_element(runs.begin(), runs.end());
  std::printf("@figure|%s|%s|%.4f|%.4f|%.4f|%zu|%s|%s|%.4f\n", id.c_str(), what.c_str(),
              Median(runs), *lo, *hi, runs.size(), unit.c_str(), op, target);
  std::fflush(stdout);
}

// The floor of a thread handoff: a thread sleeping on a condition variable is
// signalled and wakes (/work/shared/tools/wakeup-floor.c, in process).
class WakeupFloor {
 public:
  WakeupFloor() : waiter_([this] { Loop(); }) {}
  ~WakeupFloor() {
    {
      taskengine::MutexLock lock(mu_);
      stop_ = true;
      ++sent_seq_;
    }
    cv_.NotifyOne();
    waiter_.join();
  }

  // Signals the waiter and waits (polling every 50 us, as the reference tool)
  // until it woke. Returns ms from the signal to the waiter running.
  double Handoff() {
    long seq = 0;
    {
      taskengine::MutexLock lock(mu_);
      sent_at_ = std::chrono::steady_clock::now();
      seq = ++sent_seq_;
      cv_.NotifyOne();
    }
    while (true) {
      {
        taskengine::MutexLock lock(mu_);
        if (seen_seq_ == seq) return latency_ms_;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

 private:
  void Loop() {
    taskengine::MutexLock lock(mu_);
    while (true) {
      while (seen_seq_ == sent_seq_) cv_.Wait(mu_);
      if (stop_) return;
      latency_ms_ =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - sent_at_)
              .count();
      seen_seq_ = sent_seq_;
    }
  }

  taskengine::Mutex mu_;
  taskengine::CondVar cv_;
  long sent_seq_ GUARDED_BY(mu_) = 0;
  long seen_seq_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point sent_at_ GUARDED_BY(mu_);
  double latency_ms_ GUARDED_BY(mu_) = 0;
  std::thread waiter_;  // last: starts after the fields above exist
};

}  // namespace taskengine::bench
