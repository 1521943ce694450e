// taskengine-bench: the benchmarks of quality.md §1 that issue 2 covers.
//
//   taskengine-bench [p1|p2|p6|p9|purge|all] [--jobs N] [--workers N] [--runs N] [--dir PATH]
//                    [--p2-spin]
//   taskengine-bench fill --jobs N --db PATH
//
// `fill` is not a figure: it writes the database that P10 (the dashboard with
// millions of executions, bench/p10.sh) opens with `taskengine serve`.
// Each figure is printed with its setup. Client and engine share the
// process (and the machine's cores); thread counts are printed.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "core/mutex.h"
#include "core/pickup_trace.h"
#include "engine/engine_internal.h"
#include "engine/retention.h"
#include "storage/store.h"
#include "taskengine/engine.h"

namespace te = taskengine;
using Clock = std::chrono::steady_clock;

namespace {

using taskengine::bench::Median;
using taskengine::bench::Percentile;
using taskengine::bench::WakeupFloor;

struct Args {
  std::string which = "all";
  long jobs = 100'000;
  int workers = 4;
  int prefetch = 1024;
  int runs = 3;
  long purge_budget_ms = -1;  // purge: RetentionPolicy::max_transaction_ms (-1 = its default)
  std::string dir;
  std::string db;          // fill: the database file to create
  long payload_bytes = 0;  // p1: each payload carries a string of this many bytes
  long lanes = 0;          // p1: job i goes to lane "lane-<i mod lanes>" (0: no lanes)
  // p2: the bench thread spins until the handler starts instead of sleeping
  // (the waiting of P2 before issue 19: it keeps one of the cores busy).
  bool p2_spin = false;
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

long ReadStatusKb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + std::strlen(field));
  }
  return -1;
}

te::JobDefinition NoopJob(const std::string& name, const std::string& queue) {
  te::JobDefinition j;
  j.name = te::JobName(name);
  j.handler = "noop";
  j.queue = queue;
  return j;
}

namespace trace = te::pickup_trace;

// The floor of a durable commit: a 4 KiB write and fdatasync on `path`.
class SyncFloor {
 public:
  explicit SyncFloor(const std::string& path)
      : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600)) {
    if (fd_ < 0) {
      std::perror("open");
      std::exit(1);
    }
  }
  ~SyncFloor() { ::close(fd_); }
  // One write + fdatasync; ms.
  double Sample() {
    char block[4096];
    std::memset(block, static_cast<int>(++n_), sizeof block);
    const auto t0 = Clock::now();
    if (::pwrite(fd_, block, sizeof block, 0) != static_cast<ssize_t>(sizeof block) ||
        ::fdatasync(fd_) != 0) {
      std::perror("write + fdatasync");
      std::exit(1);
    }
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }

 private:
  const int fd_;
  long n_ = 0;
};

// One P2 sample: the pickup trace's points (steady ns; 0 = not passed).
using TracePoints = std::array<std::int64_t, trace::kPointCount>;

// The segment that ends at each point, as the breakdown prints it.
constexpr std::array<const char*, trace::kPointCount> kPointSegment = {
    "",  // kDispatchCall
    "dispatch call -> admission queued for the writer",
    "writer wakes, begins the batch",
    "admission statements",
    "COMMIT (fdatasync)",
    "caller wakes after the commit",
    "caller signals the pool",
    "claimer (or the parked worker) wakes",
    "claim queued for the writer",
    "writer wakes, begins the batch",
    "claim statements",
    "COMMIT",
    "claiming thread wakes with the lease (or delivered)",
    "worker has the lease (woken, or claimed it)",
    "mark-started queued for the writer",
    "writer wakes, begins the batch",
    "mark statements",
    "COMMIT",
    "worker wakes after the mark",
    "handler starts",
    "",  // kAckHeard
};

struct P2Figures {
  double ack_p50 = 0, ack_p99 = 0;        // dispatch acknowledged -> handler start
  double commit_p50 = 0, commit_p99 = 0;  // admission committed -> handler start
  double floor_p50 = 0, floor_p99 = 0;    // condition-variable handoff
  double sync_p50 = 0, sync_p99 = 0;      // 4 KiB write + fdatasync
  std::vector<TracePoints> samples;
};

// ms from the last point passed before `p` (from kDispatchCall on, and not
// after `p`: with a claim at admission the writer hands the lease over
// while the dispatching caller is still waking) to `p`; negative when
// either was not passed.
double SegmentMs(const TracePoints& t, int p) {
  if (t[p] == 0) return -1;
  for (int q = p - 1; q >= 0; --q) {
    if (t[q] != 0 && t[q] <= t[p]) return (t[p] - t[q]) / 1e6;
  }
  return -1;
}

double PickupMs(const TracePoints& t) {
  return (t[trace::kHandlerStart] - t[trace::kAdmitCommitted]) / 1e6;
}

class Bench {
 public:
  explicit Bench(const Args& a) : args_(a) {}

  // Opens an engine on a fresh database in `args_.dir`.
  // `noop`, when given, is the handler of the job "noop" instead of one that
  // counts in done_.
  std::unique_ptr<te::Engine> Open(int workers, const std::string& name, te::Clock* clock = nullptr,
                                   te::Handler noop = nullptr) {
    std::filesystem::path dir = std::filesystem::path(args_.dir) / name;
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    te::EngineOptions o;
    o.database_path = (dir / "bench.db").string();
    o.worker_threads = workers;
    o.prefetch = args_.prefetch;
    o.claim_batch = 512;
    o.clock = clock;
    auto e = te::Engine::Open(o);
    if (!e.ok()) {
      std::fprintf(stderr, "open: %s\n", e.status().ToString().c_str());
      std::exit(1);
    }
    auto engine = std::move(e).value();
    Check(engine->DefineJob(NoopJob("noop", "default")));
    Check(engine->DefineJob(NoopJob("backlog", "backlog")));
    if (!noop) {
      noop = [this](te::JobContext&) {
        done_.fetch_add(1, std::memory_order_relaxed);
        return te::HandlerResult::Success();
      };
    }
    Check(engine->RegisterHandler("noop", std::move(noop)));
    return engine;
  }

  static void Check(const te::Status& s) {
    if (!s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
      std::exit(1);
    }
  }

  // Admits `n` jobs of `job` in batches of 1,000. Returns seconds.
  double BulkDispatch(te::Engine& e, long n, const std::string& job, te::Millis delay_ms = 0) {
    auto t0 = Clock::now();
    std::vector<te::DispatchRequest> batch;
    for (long i = 0; i < n;) {
      batch.clear();
      for (int k = 0; k < 1000 && i < n; ++k, ++i) {
        te::DispatchRequest r;
        r.job = te::JobName(job);
        r.payload_json = "{\"i\":" + std::to_string(i) + "}";
        if (args_.payload_bytes > 0) {
          r.payload_json.pop_back();
          r.payload_json += ",\"pad\":\"" + std::string(args_.payload_bytes, 'x') + "\"}";
        }
        r.delay_ms = delay_ms;
        if (args_.lanes > 0) r.lane_key = "lane-" + std::to_string(i % args_.lanes);
        batch.push_back(std::move(r));
      }
      auto res = e.DispatchBatch(batch);
      if (!res.ok()) {
        std::fprintf(stderr, "dispatch: %s\n", res.status().ToString().c_str());
        std::exit(1);
      }
    }
    return Seconds(Clock::now() - t0);
  }

  // Starts the pool and waits until every queued job of the default queue is
  // durably succeeded. Returns seconds.
  double Drain(te::Engine& e, long n) {
    done_ = 0;
    auto t0 = Clock::now();
    Check(e.Start());
    while (done_.load(std::memory_order_relaxed) < n) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    // ... and every outcome is durably recorded.
    while (e.stats().published < n) std::this_thread::sleep_for(std::chrono::microseconds(200));
    return Seconds(Clock::now() - t0);
  }

  // One P1 run: returns {dispatch jobs/s, drain jobs/s, end-to-end jobs/s};
  // `cost` (when set) gets the CPU of the dispatch and the drain per job.
  std::array<double, 3> P1Run(long backlog, int run, te::bench::CpuMeter::Cost* cost = nullptr) {
    auto e = Open(args_.workers, "p1-" + std::to_string(backlog) + "-" + std::to_string(run));
    if (backlog > 0) BulkDispatch(*e, backlog, "backlog");
    const te::bench::CpuMeter meter;
    double d = BulkDispatch(*e, args_.jobs, "noop");
    double r = Drain(*e, args_.jobs);
    if (cost != nullptr) *cost = meter.Per(static_cast<double>(args_.jobs));
    e->Stop();
    return {args_.jobs / d, args_.jobs / r, args_.jobs / (d + r)};
  }

  void P1() {
    std::vector<double> disp, drain, e2e;
    te::bench::CpuSeries cpu;
    for (int i = 0; i < args_.runs; ++i) {
      te::bench::CpuMeter::Cost cost;
      auto r = P1Run(0, i, &cost);
      cpu.Add(cost);
      disp.push_back(r[0]);
      drain.push_back(r[1]);
      e2e.push_back(r[2]);
      std::printf("  run %d: dispatch %.0f/s, drain %.0f jobs/s, dispatch+drain %.0f jobs/s; %s\n",
                  i + 1, r[0], r[1], r[2], te::bench::CpuSeries::Line(cost, "job").c_str());
    }
    std::printf(
        "P1 SQLite end-to-end: bulk-dispatch %ld no-op jobs (batches of 1000), then drain\n"
        "   with the in-process pool (%d worker threads, prefetch %d, claim batch 512);\n"
        "   WAL, synchronous=FULL. Medians of %d runs:\n"
        "   dispatch %.0f jobs/s | drain %.0f jobs/s | dispatch+drain %.0f jobs/s"
        "  (target >= 100000)\n\n",
        args_.jobs, args_.workers, args_.prefetch, args_.runs, Median(disp), Median(drain),
        Median(e2e));
    std::string setup = std::to_string(args_.jobs) + " no-op jobs, " +
                        std::to_string(args_.workers) + " worker threads, synchronous=FULL";
    if (args_.payload_bytes > 0) {
      setup += ", payloads of " + std::to_string(args_.payload_bytes) + " bytes";
    }
    const std::string laned =
        args_.lanes > 0 ? ", in " + std::to_string(args_.lanes) + " lanes" : "";
    setup += laned;
    // The target is for quality.md's no-op jobs with small payloads, no lanes.
    if (args_.payload_bytes > 0 || args_.lanes > 0) {
      te::bench::PrintFigure("P1", "SQLite dispatch + drain, " + setup, e2e, "jobs/s");
    } else {
      te::bench::PrintFigure("P1", "SQLite dispatch + drain, " + setup, e2e, "jobs/s",
                             ">=", 100'000);
    }
    const std::string sized =
        (args_.payload_bytes > 0 ? ", payloads of " + std::to_string(args_.payload_bytes) + " bytes"
                                 : "") +
        laned;
    te::bench::PrintFigure("P1", "SQLite bulk dispatch alone" + sized, disp, "jobs/s");
    te::bench::PrintFigure("P1", "SQLite drain alone" + sized, drain, "jobs/s");
    cpu.Print("P1cpu", "P1 dispatch + drain" + sized, "job", "jobs/s");
  }

  // Bulk admission alone (a profiling aid).
  void DispatchOnly() {
    auto e = Open(0, "dispatch");
    double d = BulkDispatch(*e, args_.jobs, "noop");
    std::printf("bulk dispatch of %ld jobs in batches of 1000: %.0f jobs/s\n\n", args_.jobs,
                args_.jobs / d);
  }

  static constexpr int kP2Samples = 1000;

  // One P2 run on a fresh database: kP2Samples pickups, each followed by one
  // sample of each floor.
  P2Figures P2Run(int run) {
    std::atomic<std::int64_t> started_ns{0};
    auto engine = Open(1, "p2-" + std::to_string(run), nullptr, [&](te::JobContext&) {
      const std::int64_t now = trace::NowNs();
      if (trace::PickupTrace* t = trace::Installed(); t != nullptr) {
        trace::MarkAt(t, trace::kHandlerStart, now);
      }
      started_ns.store(now, std::memory_order_release);
      started_ns.notify_one();
      return te::HandlerResult::Success();
    });
    Check(engine->Start());
    WakeupFloor wakeup;
    SyncFloor sync(
        (std::filesystem::path(args_.dir) / ("p2-" + std::to_string(run)) / "floor").string());
    std::mt19937 gap_random(42 + run);
    std::uniform_int_distribution<int> gap_us(500, 2000);
    P2Figures f;
    std::vector<double> from_ack, from_commit, floor, fsync;
    trace::PickupTrace points;
    for (int i = 0; i < kP2Samples; ++i) {
      for (auto& p : points.at) p.store(0, std::memory_order_relaxed);
      started_ns = 0;
      trace::g_installed.store(&points, std::memory_order_release);
      te::DispatchRequest r;
      r.job = te::JobName("noop");
      trace::MarkAt(&points, trace::kDispatchCall, trace::NowNs());
      auto d = engine->Dispatch(r);
      const std::int64_t ack = trace::NowNs();
      trace::MarkAt(&points, trace::kAckHeard, ack);
      Check(d.status());
      if (args_.p2_spin) {
        while (started_ns.load(std::memory_order_acquire) == 0) {
        }
      } else {
        started_ns.wait(0, std::memory_order_acquire);
      }
      const std::int64_t start = started_ns.load(std::memory_order_acquire);
      from_ack.push_back(std::max<std::int64_t>(0, start - ack) / 1e6);
      // Idle again: the outcome is durably published before the next sample.
      while (engine->stats().published < i + 1) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      trace::g_installed.store(nullptr, std::memory_order_release);
      TracePoints t;
      for (int p = 0; p < trace::kPointCount; ++p) t[p] = points.at[p].load();
      from_commit.push_back(PickupMs(t));
      f.samples.push_back(t);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      // The floors, in the same loop.
      std::this_thread::sleep_for(std::chrono::microseconds(gap_us(gap_random)));
      floor.push_back(wakeup.Handoff());
      fsync.push_back(sync.Sample());
    }
    engine->Stop();
    f.ack_p50 = Percentile(from_ack, 0.5);
    f.ack_p99 = Percentile(from_ack, 0.99);
    f.commit_p50 = Percentile(from_commit, 0.5);
    f.commit_p99 = Percentile(from_commit, 0.99);
    f.floor_p50 = Percentile(floor, 0.5);
    f.floor_p99 = Percentile(floor, 0.99);
    f.sync_p50 = Percentile(fsync, 0.5);
    f.sync_p99 = Percentile(fsync, 0.99);
    return f;
  }

  // The per-stage breakdown of P2: for each segment between consecutive
  // points of the pickup trace, its p50 and p99 (medians over the runs), how
  // many samples passed it, and its mean share in each run's slowest 1% of
  // pickups (committed -> handler start).
  static void PrintStages(const std::vector<P2Figures>& runs) {
    std::printf(
        "P2 per-stage breakdown (ms; p50/p99 are medians over the runs; 'slowest 1%%' is the\n"
        "   stage's mean over each run's 1%% slowest pickups, committed -> handler start):\n"
        "   %-52s %7s %7s %7s %12s\n",
        "stage (segment ending at the point)", "p50", "p99", "max", "slowest 1%");
    for (int p = 1; p < trace::kAckHeard; ++p) {
      std::vector<double> p50s, p99s, tail;
      double most = 0;
      long passed = 0;
      for (const P2Figures& f : runs) {
        std::vector<double> v;
        for (const TracePoints& t : f.samples) {
          const double ms = SegmentMs(t, p);
          if (t[p] == 0) continue;
          v.push_back(ms);
          most = std::max(most, ms);
        }
        passed += static_cast<long>(v.size());
        if (v.empty()) continue;
        p50s.push_back(Percentile(v, 0.5));
        p99s.push_back(Percentile(v, 0.99));
        std::vector<const TracePoints*> by_total;
        for (const TracePoints& t : f.samples) by_total.push_back(&t);
        std::sort(by_total.begin(), by_total.end(), [](const TracePoints* a, const TracePoints* b) {
          return PickupMs(*a) > PickupMs(*b);
        });
        const std::size_t top = std::max<std::size_t>(1, by_total.size() / 100);
        double sum = 0;
        for (std::size_t k = 0; k < top; ++k) sum += std::max(0.0, SegmentMs(*by_total[k], p));
        tail.push_back(sum / static_cast<double>(top));
      }
      if (p == 1) std::printf("   -- admission (dispatch call -> committed):\n");
      if (p == trace::kAdmitReturned)
        std::printf("   -- pickup (admission committed -> handler start):\n");
      if (passed == 0) {
        std::printf("   %-52s %7s %7s %7s %12s\n", kPointSegment[p], "-", "-", "-", "(not passed)");
        continue;
      }
      std::printf("   %-52s %7.3f %7.3f %7.3f %12.3f\n", kPointSegment[p], Median(p50s),
                  Median(p99s), most, Median(tail));
    }
    std::printf("\n");
  }

  // P2: pickup latency, with the per-stage breakdown of each sample
  // (core/pickup_trace.h) and this machine's floors measured in the same
  // loop, one floor sample after each pickup sample: a condition-variable
  // handoff to a sleeping thread after an idle gap of 0.5-2 ms (as
  // /work/shared/tools/wakeup-floor.c) and a 4 KiB write + fdatasync.
  void P2() {
    std::vector<P2Figures> runs;
    for (int run = 0; run < std::max(1, args_.runs); ++run) {
      runs.push_back(P2Run(run));
      const P2Figures& f = runs.back();
      std::printf(
          "  run %d: ack -> handler start p50 %.3f p99 %.3f ms | commit -> handler start p50 %.3f "
          "p99 %.3f ms | wakeup floor p50 %.3f p99 %.3f ms | fdatasync p50 %.3f p99 %.3f ms | "
          "p99 (from commit) / wakeup-floor p99 %.2f\n",
          run + 1, f.ack_p50, f.ack_p99, f.commit_p50, f.commit_p99, f.floor_p50, f.floor_p99,
          f.sync_p50, f.sync_p99, f.commit_p99 / f.floor_p99);
    }
    auto med = [&](double P2Figures::*field) {
      std::vector<double> v;
      for (const P2Figures& f : runs) v.push_back(f.*field);
      return Median(v);
    };
    std::vector<double> ratios;
    for (const P2Figures& f : runs) ratios.push_back(f.commit_p99 / f.floor_p99);
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) < 0) load[0] = load[1] = load[2] = -1;
    std::printf(
        "P2 SQLite pickup latency: idle in-process worker (1 worker thread; the engine's claimer,\n"
        "   writer, completer, keeper and sweeper threads; the bench thread dispatches and\n"
        "   %s until the handler starts); single dispatch, 1 ms idle between samples;\n"
        "   %d samples per run, medians of %d runs; load average %.2f %.2f %.2f:\n"
        "   admission committed -> handler start: p50 %.3f ms, p99 %.3f ms"
        "  (target p50 <= 0.1, p99 <= 1)\n"
        "   dispatch acknowledged -> handler start: p50 %.3f ms, p99 %.3f ms (before the ack: 0)\n"
        "   wakeup floor (cv handoff after 0.5-2 ms idle), same loop: p50 %.3f ms, p99 %.3f ms\n"
        "   fdatasync floor (4 KiB write + fdatasync), same loop: p50 %.3f ms, p99 %.3f ms\n"
        "   p99 (committed -> start) / wakeup-floor p99: %.2f  (target <= 3)\n\n",
        args_.p2_spin ? "spins" : "sleeps", kP2Samples, static_cast<int>(runs.size()), load[0],
        load[1], load[2], med(&P2Figures::commit_p50), med(&P2Figures::commit_p99),
        med(&P2Figures::ack_p50), med(&P2Figures::ack_p99), med(&P2Figures::floor_p50),
        med(&P2Figures::floor_p99), med(&P2Figures::sync_p50), med(&P2Figures::sync_p99),
        Median(ratios));
    auto all = [&](double P2Figures::*field) {
      std::vector<double> v;
      for (const P2Figures& f : runs) v.push_back(f.*field);
      return v;
    };
    te::bench::PrintFigure("P2", "SQLite pickup p50 (committed -> handler start)",
                           all(&P2Figures::commit_p50), "ms", "<=", 0.1);
    te::bench::PrintFigure("P2", "SQLite pickup p99 (committed -> handler start)",
                           all(&P2Figures::commit_p99), "ms", "<=", 1);
    te::bench::PrintFigure("P2", "pickup p99 / wakeup-floor p99 (same run)", ratios, "x", "<=", 3);
    te::bench::PrintFigure("floor", "wakeup floor p50 (cv handoff after 0.5-2 ms idle)",
                           all(&P2Figures::floor_p50), "ms");
    te::bench::PrintFigure("floor", "wakeup floor p99", all(&P2Figures::floor_p99), "ms");
    te::bench::PrintFigure("floor", "fdatasync floor p50 (4 KiB write)", all(&P2Figures::sync_p50),
                           "ms");
    te::bench::PrintFigure("floor", "fdatasync floor p99", all(&P2Figures::sync_p99), "ms");
    PrintStages(runs);
  }
  void P6() {
    std::vector<double> shallow, deep, ratios;
    for (int i = 0; i < std::max(1, args_.runs - 1); ++i) {
      shallow.push_back(P1Run(1'000, i)[1]);
      deep.push_back(P1Run(1'000'000, i)[1]);
      ratios.push_back(deep.back() / shallow.back());
      std::printf("  run %d: drain with 1k queued %.0f jobs/s, with 1M queued %.0f jobs/s\n", i + 1,
                  shallow.back(), deep.back());
    }
    std::printf(
        "P6 depth independence: drain of %ld jobs with 1,000 vs 1,000,000 other executions\n"
        "   queued (in a queue no worker serves; same table and indexes). Medians:\n"
        "   %.0f vs %.0f jobs/s, ratio %.2f  (target >= 0.8)\n\n",
        args_.jobs, Median(shallow), Median(deep), Median(deep) / Median(shallow));
    te::bench::PrintFigure("P6", "drain with 1,000,000 queued / with 1,000 queued", ratios, "x",
                           ">=", 0.8);
  }

  void P9() {
    auto e = Open(args_.workers, "p9");
    Check(e->Start());
    std::this_thread::sleep_for(std::chrono::seconds(2));
    long idle = ReadStatusKb("VmRSS:");
    e->Stop();
    e.reset();
    auto e2 = Open(args_.workers, "p9b");
    const long n = 1'000'000;
    BulkDispatch(*e2, n, "noop");
    double secs = Drain(*e2, n);
    long peak = ReadStatusKb("VmHWM:");
    e2->Stop();
    std::printf(
        "P9 memory: RSS idle (engine open, %d workers, sweeper, idle 2 s): %.1f MB (target < 30)\n"
        "   peak RSS (VmHWM) while bulk-dispatching then draining %ld jobs: %.1f MB"
        " (target < 150); drain took %.1f s (%.0f jobs/s)\n\n",
        args_.workers, idle / 1024.0, n, peak / 1024.0, secs, n / secs);
    te::bench::PrintFigure("P9", "RSS idle", {idle / 1024.0}, "MB", "<=", 30);
    te::bench::PrintFigure("P9", "peak RSS draining 1,000,000 jobs", {peak / 1024.0}, "MB",
                           "<=", 150);
  }

  // Dispatch latency (one Dispatch call, its durable commit included) while
  // retention purges --jobs ended executions (I7), against the same figure
  // on the idle database just before and after. The executions end at the
  // engine's clock, which then moves 31 days ahead.
  // --runs runs on fresh databases: the figure is the median of their ratios.
  void Purge() {
    std::vector<double> ratios;
    for (int run = 0; run < std::max(1, args_.runs); ++run) ratios.push_back(PurgeRun(run));
    te::bench::PrintFigure("I7",
                           "dispatch p99 during a retention purge / idle before (a bound of "
                           "this bench, not of quality.md)",
                           ratios, "x", "<=", 2);
  }

  // One run of Purge: returns p99 during / p99 idle before.
  double PurgeRun(int run) {
    te::FakeClock clock(te::SystemClock::Get()->NowMillis());
    auto e = Open(args_.workers, "purge-" + std::to_string(run), &clock);
    const double fill = BulkDispatch(*e, args_.jobs, "noop") + Drain(*e, args_.jobs);
    std::printf("  purge: %ld executions run to success in %.1f s\n", args_.jobs, fill);
    clock.Advance(std::chrono::milliseconds(31 * te::kRetentionDayMs));
    // Dispatches of a job no worker serves: the latency is the admission's.
    auto sample = [&](std::vector<double>* out) {
      te::DispatchRequest r;
      r.job = te::JobName("backlog");
      auto t0 = Clock::now();
      Check(e->Dispatch(r).status());
      out->push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    };
    std::vector<double> before, during, after;
    for (int i = 0; i < 2000; ++i) sample(&before);
    te::RetentionOptions ro;
    if (args_.purge_budget_ms >= 0) ro.policy.max_transaction_ms = args_.purge_budget_ms;
    te::Retention retention(&te::StoreOf(*e), &clock, ro);
    std::atomic<bool> done{false};
    te::PurgeTotals totals;
    double purge_s = 0;
    std::thread purger([&] {
      auto t0 = Clock::now();
      auto r = retention.RunPass();
      purge_s = Seconds(Clock::now() - t0);
      Check(r.status());
      totals = *r;
      done = true;
    });
    while (!done.load()) sample(&during);
    purger.join();
    for (int i = 0; i < 2000; ++i) sample(&after);
    e->Stop();
    std::printf(
        "I7 run %d, dispatch latency during a purge: %ld ended executions (+ their attempts, "
        "logs),\n"
        "   at most %d rows per transaction, sized to take half of %lld ms (0: fixed);\n"
        "   single dispatches 1 ms apart, each timed\n"
        "   from the call to its durable commit (synchronous=FULL).\n"
        "   purge: %lld executions, %lld attempts in %d batches, %.1f s (%.0f executions/s)\n"
        "   idle before: %zu samples, p50 %.3f ms, p99 %.3f ms\n"
        "   during:      %zu samples, p50 %.3f ms, p99 %.3f ms\n"
        "   idle after:  %zu samples, p50 %.3f ms, p99 %.3f ms\n"
        "   p99 during / p99 idle before: %.2f  (target <= 2)\n\n",
        run + 1, args_.jobs, ro.policy.batch, static_cast<long long>(ro.policy.max_transaction_ms),
        static_cast<long long>(totals.executions), static_cast<long long>(totals.attempts),
        totals.batches, purge_s, totals.executions / std::max(purge_s, 1e-9), before.size(),
        Percentile(before, 0.5), Percentile(before, 0.99), during.size(), Percentile(during, 0.5),
        Percentile(during, 0.99), after.size(), Percentile(after, 0.5), Percentile(after, 0.99),
        Percentile(during, 0.99) / Percentile(before, 0.99));
    return Percentile(during, 0.99) / Percentile(before, 0.99);
  }

  // Creates args_.db (which must not exist) with --jobs executions, as a
  // dashboard meets them: of the jobs `report` (global) and `sync` (per
  // tenant, over 20 tenants) about 97% succeeded, 1% failed, 0.5% quarantined;
  // 1% of `report` queued for an hour from now. The handler reads each
  // payload's number to choose its outcome.
  void Fill() {
    if (args_.db.empty() || std::filesystem::exists(args_.db)) {
      std::fprintf(stderr, "fill: --db must name a file that does not exist yet\n");
      std::exit(2);
    }
    te::EngineOptions o;
    o.database_path = args_.db;
    o.worker_threads = args_.workers;
    o.prefetch = args_.prefetch;
    o.claim_batch = 512;
    auto opened = te::Engine::Open(o);
    Check(opened.status());
    auto e = std::move(opened).value();
    for (const char* name : {"report", "sync"}) {
      te::JobDefinition j = NoopJob(name, "default");
      j.handler = "fill";
      j.retry.max_attempts = 1;
      if (std::string(name) == "sync") j.scope = te::JobScope::kPerTenant;
      Check(e->DefineJob(j));
    }
    Check(e->RegisterHandler("fill", [this](te::JobContext& ctx) {
      done_.fetch_add(1, std::memory_order_relaxed);
      const std::string& p = ctx.payload_json();  // {"i":N}
      const long i = std::atol(p.c_str() + std::min<std::size_t>(5, p.size()));
      if (i % 200 == 7) return te::HandlerResult::Permanent("fill: refused (i % 200 == 7)");
      if (i % 100 == 3) return te::HandlerResult::Retryable("fill: failed (i % 100 == 3)");
      return te::HandlerResult::Success("{\"i\":" + std::to_string(i) + "}");
    }));
    const auto t0 = Clock::now();
    long due = 0;
    std::vector<te::DispatchRequest> batch;
    for (long i = 0; i < args_.jobs;) {
      batch.clear();
      for (int k = 0; k < 1000 && i < args_.jobs; ++k, ++i) {
        te::DispatchRequest r;
        r.payload_json = "{\"i\":" + std::to_string(i) + "}";
        if (i % 3 == 2) {
          r.job = te::JobName("sync");
          char tenant[8];
          std::snprintf(tenant, sizeof tenant, "t%02d", static_cast<int>(i % 20));
          r.tenant = te::TenantId(tenant);
        } else {
          r.job = te::JobName("report");
          if (i % 100 == 51) r.delay_ms = 3'600'000;
        }
        if (r.delay_ms == 0) ++due;
        batch.push_back(std::move(r));
      }
      Check(e->DispatchBatch(batch).status());
    }
    const double dispatched = Seconds(Clock::now() - t0);
    done_ = 0;
    Check(e->Start());
    while (e->stats().published < due) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    e->Stop();
    std::printf("fill: %ld executions in %s (%ld ran) in %.1f s (dispatch %.1f s)\n", args_.jobs,
                args_.db.c_str(), due, Seconds(Clock::now() - t0), dispatched);
  }

 private:
  Args args_;
  std::atomic<long> done_{0};
};

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (s == "--jobs")
      a.jobs = std::stol(next());
    else if (s == "--workers")
      a.workers = std::stoi(next());
    else if (s == "--prefetch")
      a.prefetch = std::stoi(next());
    else if (s == "--runs")
      a.runs = std::stoi(next());
    else if (s == "--dir")
      a.dir = next();
    else if (s == "--db")
      a.db = next();
    else if (s == "--payload-bytes")
      a.payload_bytes = std::stol(next());
    else if (s == "--lanes")
      a.lanes = std::stol(next());
    else if (s == "--p2-spin")
      a.p2_spin = true;
    else if (s == "--purge-budget-ms")
      a.purge_budget_ms = std::stol(next());
    else if (s == "-h" || s == "--help") {
      std::printf(
          "usage: taskengine-bench [p1|p2|p6|p9|purge|all] [--jobs N] [--workers N] "
          "[--prefetch N] [--runs N] [--dir PATH] [--purge-budget-ms N] [--p2-spin]\n"
          "       [--payload-bytes N]  (p1: a string of N bytes in each payload)\n"
          "       [--lanes N]  (p1: job i in lane lane-<i mod N>; a lane runs its jobs one\n"
          "                    at a time, so N at least --jobs measures lanes' cost alone)\n"
          "       taskengine-bench fill --jobs N --db PATH\n");
      return 0;
    } else
      a.which = s;
  }
  if (a.dir.empty()) a.dir = (std::filesystem::temp_directory_path() / "taskengine-bench").string();
  spdlog::set_level(spdlog::level::warn);
  std::printf("taskengine-bench: %u hardware threads; database under %s\n\n",
              std::thread::hardware_concurrency(), a.dir.c_str());
  Bench b(a);
  if (a.which == "fill") {
    b.Fill();
    return 0;
  }
  if (a.which == "p9") {
    b.P9();  // first: its RSS figures must not include the other runs
  } else {
    if (a.which == "dispatch") b.DispatchOnly();
    if (a.which == "purge") b.Purge();
    if (a.which == "p1" || a.which == "all") b.P1();
    if (a.which == "p2" || a.which == "all") b.P2();
    if (a.which == "p6" || a.which == "all") b.P6();
  }
  std::filesystem::remove_all(a.dir);
  return 0;
}
