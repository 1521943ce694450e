// taskengine-bench: the benchmarks of quality.md §1 that issue 2 covers.
//
//   taskengine-bench [p1|p2|p6|p9|purge|all] [--jobs N] [--workers N] [--runs N] [--dir PATH]
//   taskengine-bench fill --jobs N --db PATH
//
// `fill` is not a figure: it writes the database that P10 (the dashboard with
// millions of executions, bench/p10.sh) opens with `taskengine serve`.
// Each figure is printed with its setup. Client and engine share the
// process (and the machine's cores); thread counts are printed.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_internal.h"
#include "engine/retention.h"
#include "storage/store.h"
#include "taskengine/engine.h"

namespace te = taskengine;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string which = "all";
  long jobs = 100'000;
  int workers = 4;
  int prefetch = 1024;
  int runs = 3;
  long purge_budget_ms = -1;  // purge: RetentionPolicy::max_transaction_ms (-1 = its default)
  std::string dir;
  std::string db;  // fill: the database file to create
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

// The p-quantile (0..1) of a non-empty sample, by nearest rank.
double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * v.size()))];
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

te::JobDefinition NoopJob(const std::string& name, const std::string& queue) {
  te::JobDefinition j;
  j.name = te::JobName(name);
  j.handler = "noop";
  j.queue = queue;
  return j;
}

class Bench {
 public:
  explicit Bench(const Args& a) : args_(a) {}

  // Opens an engine on a fresh database in `args_.dir`.
  std::unique_ptr<te::Engine> Open(int workers, const std::string& name,
                                   te::Clock* clock = nullptr) {
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
    Check(engine->RegisterHandler("noop", [this](te::JobContext&) {
      done_.fetch_add(1, std::memory_order_relaxed);
      return te::HandlerResult::Success();
    }));
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
        r.delay_ms = delay_ms;
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

  // One P1 run: returns {dispatch jobs/s, drain jobs/s, end-to-end jobs/s}.
  std::array<double, 3> P1Run(long backlog, int run) {
    auto e = Open(args_.workers, "p1-" + std::to_string(backlog) + "-" + std::to_string(run));
    if (backlog > 0) BulkDispatch(*e, backlog, "backlog");
    double d = BulkDispatch(*e, args_.jobs, "noop");
    double r = Drain(*e, args_.jobs);
    e->Stop();
    return {args_.jobs / d, args_.jobs / r, args_.jobs / (d + r)};
  }

  void P1() {
    std::vector<double> disp, drain, e2e;
    for (int i = 0; i < args_.runs; ++i) {
      auto r = P1Run(0, i);
      disp.push_back(r[0]);
      drain.push_back(r[1]);
      e2e.push_back(r[2]);
      std::printf("  run %d: dispatch %.0f/s, drain %.0f jobs/s, dispatch+drain %.0f jobs/s\n",
                  i + 1, r[0], r[1], r[2]);
    }
    std::printf(
        "P1 SQLite end-to-end: bulk-dispatch %ld no-op jobs (batches of 1000), then drain\n"
        "   with the in-process pool (%d worker threads, prefetch %d, claim batch 512);\n"
        "   WAL, synchronous=FULL. Medians of %d runs:\n"
        "   dispatch %.0f jobs/s | drain %.0f jobs/s | dispatch+drain %.0f jobs/s"
        "  (target >= 40000)\n\n",
        args_.jobs, args_.workers, args_.prefetch, args_.runs, Median(disp), Median(drain),
        Median(e2e));
  }

  // Bulk admission alone (a profiling aid).
  void DispatchOnly() {
    auto e = Open(0, "dispatch");
    double d = BulkDispatch(*e, args_.jobs, "noop");
    std::printf("bulk dispatch of %ld jobs in batches of 1000: %.0f jobs/s\n\n", args_.jobs,
                args_.jobs / d);
  }

  void P2() {
    auto e = Open(1, "p2");
    std::atomic<long> started_ns{0};
    e->Stop();
    e.reset();
    // Re-open with a handler that records its start time.
    te::EngineOptions o;
    o.database_path = (std::filesystem::path(args_.dir) / "p2" / "bench.db").string();
    o.worker_threads = 1;
    auto opened = te::Engine::Open(o);
    Check(opened.status());
    auto engine = std::move(opened).value();
    Check(engine->RegisterHandler("noop", [&](te::JobContext&) {
      started_ns.store(Clock::now().time_since_epoch().count(), std::memory_order_release);
      return te::HandlerResult::Success();
    }));
    Check(engine->Start());
    std::vector<double> from_call, from_ack;
    int before_ack = 0;
    const int samples = 1000;
    for (int i = 0; i < samples; ++i) {
      started_ns = 0;
      te::DispatchRequest r;
      r.job = te::JobName("noop");
      auto t0 = Clock::now();
      auto d = engine->Dispatch(r);
      auto t1 = Clock::now();
      Check(d.status());
      while (started_ns.load(std::memory_order_acquire) == 0) {
      }
      long s = started_ns.load();
      from_call.push_back((s - t0.time_since_epoch().count()) / 1e6);
      double after_ack = (s - t1.time_since_epoch().count()) / 1e6;
      if (after_ack < 0) ++before_ack;
      from_ack.push_back(std::max(0.0, after_ack));
      // Idle again: the outcome is durably published before the next sample.
      while (engine->stats().published < i + 1) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    engine->Stop();
    std::printf(
        "P2 SQLite pickup latency: idle in-process worker (1 thread); single dispatch;\n"
        "   %d samples. dispatch acknowledged (committed) -> handler start:\n"
        "   p50 %.3f ms, p99 %.3f ms  (target p50 <= 0.5, p99 <= 2);\n"
        "   in %d samples the handler had started before the caller heard the ack (counted 0)\n"
        "   dispatch call (incl. its durable commit) -> handler start: p50 %.3f ms, p99 %.3f "
        "ms\n\n",
        samples, Percentile(from_ack, 0.5), Percentile(from_ack, 0.99), before_ack,
        Percentile(from_call, 0.5), Percentile(from_call, 0.99));
  }

  void P6() {
    std::vector<double> shallow, deep;
    for (int i = 0; i < std::max(1, args_.runs - 1); ++i) {
      shallow.push_back(P1Run(1'000, i)[1]);
      deep.push_back(P1Run(1'000'000, i)[1]);
      std::printf("  run %d: drain with 1k queued %.0f jobs/s, with 1M queued %.0f jobs/s\n", i + 1,
                  shallow.back(), deep.back());
    }
    std::printf(
        "P6 depth independence: drain of %ld jobs with 1,000 vs 1,000,000 other executions\n"
        "   queued (in a queue no worker serves; same table and indexes). Medians:\n"
        "   %.0f vs %.0f jobs/s, ratio %.2f  (target >= 0.8)\n\n",
        args_.jobs, Median(shallow), Median(deep), Median(deep) / Median(shallow));
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
  }

  // Dispatch latency (one Dispatch call, its durable commit included) while
  // retention purges --jobs ended executions (I7), against the same figure
  // on the idle database just before and after. The executions end at the
  // engine's clock, which then moves 31 days ahead.
  void Purge() {
    te::FakeClock clock(te::SystemClock::Get()->NowMillis());
    auto e = Open(args_.workers, "purge", &clock);
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
        "I7 dispatch latency during a purge: %ld ended executions (+ their attempts, logs),\n"
        "   at most %d rows per transaction, sized to take half of %lld ms (0: fixed);\n"
        "   single dispatches 1 ms apart, each timed\n"
        "   from the call to its durable commit (synchronous=FULL).\n"
        "   purge: %lld executions, %lld attempts in %d batches, %.1f s (%.0f executions/s)\n"
        "   idle before: %zu samples, p50 %.3f ms, p99 %.3f ms\n"
        "   during:      %zu samples, p50 %.3f ms, p99 %.3f ms\n"
        "   idle after:  %zu samples, p50 %.3f ms, p99 %.3f ms\n"
        "   p99 during / p99 idle before: %.2f  (target <= 2)\n\n",
        args_.jobs, ro.policy.batch, static_cast<long long>(ro.policy.max_transaction_ms),
        static_cast<long long>(totals.executions), static_cast<long long>(totals.attempts),
        totals.batches, purge_s, totals.executions / std::max(purge_s, 1e-9), before.size(),
        Percentile(before, 0.5), Percentile(before, 0.99), during.size(), Percentile(during, 0.5),
        Percentile(during, 0.99), after.size(), Percentile(after, 0.5), Percentile(after, 0.99),
        Percentile(during, 0.99) / Percentile(before, 0.99));
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
    else if (s == "--purge-budget-ms")
      a.purge_budget_ms = std::stol(next());
    else if (s == "-h" || s == "--help") {
      std::printf(
          "usage: taskengine-bench [p1|p2|p6|p9|purge|all] [--jobs N] [--workers N] "
          "[--prefetch N] [--runs N] [--dir PATH] [--purge-budget-ms N]\n"
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
