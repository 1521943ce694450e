// Pieces shared by the benchmarks: quantiles of samples, this machine's
// wakeup floor (a condition-variable handoff after an idle gap, as
// /work/shared/tools/wakeup-floor.c measures it), taken in the same run as
// the figure it is compared with, and the CPU a run cost (CpuMeter).
#pragma once

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
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

// The machine's hardware threads (at least 1): what the CPU figures divide.
inline int Cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// CPU seconds of this process's threads named `name` (the engine names its
// threads: te-writer, te-http-io, ...; docs/operations.md), from the
// kernel's per-thread scheduler statistics (nanoseconds on a CPU); -1 when
// the kernel does not give them.
inline double ThreadCpuSeconds(const std::string& name) {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  double total = 0;
  bool readable = false;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const std::string task = std::string("/proc/self/task/") + e->d_name;
    std::string comm;
    std::getline(std::ifstream(task + "/comm"), comm);
    if (comm != name) continue;
    double ns = 0;
    if (std::ifstream(task + "/schedstat") >> ns) {
      total += ns / 1e9;
      readable = true;
    }
  }
  closedir(dir);
  return readable ? total : -1;
}

// The CPU a measured stretch of a benchmark cost, per unit of work (a
// dispatch, a job): this process's threads together (the engine's and the
// benchmark client's, which share the machine's cores), the part of it in
// the kernel, and the store's writer thread alone (te-writer), which does
// every SQLite write in turn. From them, the rates the machine cannot pass
// at that cost: cores / CPU per unit for the process, 1 / writer CPU per unit
// for the writer.
class CpuMeter {
 public:
  CpuMeter() : start_(Now()) {}

  struct Cost {
    double us_per_unit = 0;          // user + system, all threads of the process
    double system_percent = 0;       // of that, in the kernel
    double writer_us_per_unit = -1;  // the te-writer thread; -1: not measured
  };
  Cost Per(double units) const {
    const Sample end = Now();
    Cost c;
    const double user = end.user - start_.user;
    const double system = end.system - start_.system;
    c.us_per_unit = (user + system) * 1e6 / units;
    c.system_percent = user + system > 0 ? 100 * system / (user + system) : 0;
    if (start_.writer >= 0 && end.writer >= 0) {
      c.writer_us_per_unit = (end.writer - start_.writer) * 1e6 / units;
    }
    return c;
  }

 private:
  struct Sample {
    double user = 0, system = 0, writer = -1;
  };
  static Sample Now() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    Sample s;
    s.user = static_cast<double>(ru.ru_utime.tv_sec) + ru.ru_utime.tv_usec / 1e6;
    s.system = static_cast<double>(ru.ru_stime.tv_sec) + ru.ru_stime.tv_usec / 1e6;
    s.writer = ThreadCpuSeconds("te-writer");
    return s;
  }
  Sample start_;
};

// The costs of a figure's runs, printed after it as figures of their own
// (`id`, e.g. "P3cpu"): CPU per `unit` and its kernel share, and the rates
// in `rate_unit` that the cores and the writer allow at that cost.
class CpuSeries {
 public:
  void Add(const CpuMeter::Cost& c) { costs_.push_back(c); }

  // One line for a run's report.
  static std::string Line(const CpuMeter::Cost& c, const std::string& unit) {
    char buf[256];
    const int cores = Cores();
    int n = std::snprintf(
        buf, sizeof buf, "CPU %.1f us per %s (%.0f%% in the kernel; %d cores: %.0f/s at most)",
        c.us_per_unit, unit.c_str(), c.system_percent, cores, cores * 1e6 / c.us_per_unit);
    if (c.writer_us_per_unit > 0 && n > 0 && n < static_cast<int>(sizeof buf)) {
      std::snprintf(buf + n, sizeof buf - n, "; writer %.1f us per %s: %.0f/s at most",
                    c.writer_us_per_unit, unit.c_str(), 1e6 / c.writer_us_per_unit);
    }
    return buf;
  }

  void Print(const std::string& id, const std::string& what, const std::string& unit,
             const std::string& rate_unit) const {
    std::vector<double> us, system, ceiling, writer, writer_ceiling;
    const int cores = Cores();
    for (const CpuMeter::Cost& c : costs_) {
      us.push_back(c.us_per_unit);
      system.push_back(c.system_percent);
      ceiling.push_back(cores * 1e6 / c.us_per_unit);
      if (c.writer_us_per_unit > 0) {
        writer.push_back(c.writer_us_per_unit);
        writer_ceiling.push_back(1e6 / c.writer_us_per_unit);
      }
    }
    PrintFigure(id, what + ": CPU per " + unit + " (all threads of the process, user + system)", us,
                "us");
    PrintFigure(id, what + ": share of that CPU in the kernel", system, "%");
    PrintFigure(id,
                what + ": the most the " + std::to_string(cores) + " cores allow at that CPU per " +
                    unit + " (cores / CPU per " + unit + ")",
                ceiling, rate_unit);
    if (writer.size() == costs_.size()) {
      PrintFigure(id, what + ": CPU of the store's writer thread per " + unit, writer, "us");
      PrintFigure(id,
                  what + ": the most the writer allows at that CPU per " + unit +
                      " (1 / writer CPU per " + unit + ")",
                  writer_ceiling, rate_unit);
    }
  }

 private:
  std::vector<CpuMeter::Cost> costs_;
};

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
