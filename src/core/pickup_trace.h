// Pickup trace: timestamps of the points one dispatch passes on its way to its
// handler in this process (admission commit -> claimer wakeup -> claim in the
// store's writer -> worker wakeup -> mark started -> handler start). The P2
// benchmark (bench/bench_main.cc) installs a PickupTrace around each sample
// and prints the time spent between consecutive points.
//
// Off unless installed: then each mark point costs one relaxed atomic load
// and a not-taken branch, and nothing is stored. Only a benchmark installs a
// trace, and only while a single execution is in flight, so each point is
// recorded once per sample (the first time wins).
//
// The times are steady-clock nanoseconds, read only while a trace is
// installed: a measurement, not a time any decision depends on.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace taskengine::pickup_trace {

// The points, in the order a pickup passes them. The comments name the
// thread that records each.
enum Point : int {
  kDispatchCall,     // the caller (bench) calls Dispatch
  kAdmitQueued,      // caller: the admission handed to the store's writer
  kAdmitBegan,       // writer: the batch holding it begins
  kAdmitCommitting,  // writer: its statements ran; COMMIT starts
  kAdmitCommitted,   // writer: COMMIT returned (durable)
  kAdmitReturned,    // caller: the store answered the admission
  kWakeSignalled,    // caller: the pool was told new work is due
  kClaimerAwake,     // claimer: awake for the claim that took the execution
  kClaimQueued,      // claimer (or worker): the claim handed to the writer
  kClaimBegan,       // writer
  kClaimCommitting,  // writer
  kClaimCommitted,   // writer
  kClaimReturned,    // claimer (or worker): the store answered with the lease;
                     // or, claimed at admission, the writer delivered it
  kWorkerAwake,      // worker: woken with the lease in hand
  kMarkQueued,       // worker: the mark-started call handed to the writer
  kMarkBegan,        // writer
  kMarkCommitting,   // writer
  kMarkCommitted,    // writer
  kMarkReturned,     // worker: the store answered the mark
  kHandlerStart,     // the handler runs (recorded by the handler itself)
  kAckHeard,         // caller: Dispatch returned
  kPointCount
};

// The points of one sample, as steady-clock nanoseconds; 0 = not passed.
struct PickupTrace {
  std::atomic<std::int64_t> at[kPointCount] = {};
};

// The installed trace, or nullptr (the default).
inline std::atomic<PickupTrace*> g_installed{nullptr};

inline PickupTrace* Installed() { return g_installed.load(std::memory_order_relaxed); }

inline std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Records `point` at `ns` unless it was recorded already this sample.
inline void MarkAt(PickupTrace* trace, Point point, std::int64_t ns) {
  std::int64_t unset = 0;
  if (ns != 0) trace->at[point].compare_exchange_strong(unset, ns, std::memory_order_relaxed);
}

// Records `point` now when a trace is installed.
inline void Mark(Point point) {
  if (PickupTrace* t = Installed(); t != nullptr) [[unlikely]]
    MarkAt(t, point, NowNs());
}

// The writer-side times of the last write a thread made through the store
// (filled only while a trace is installed, by stores that have a writer
// thread): when the writer began the batch that held it, when its COMMIT
// started and when it returned. The caller attributes them to its points.
struct WriteTimes {
  std::int64_t queued = 0;
  std::int64_t began = 0;
  std::int64_t committing = 0;
  std::int64_t committed = 0;
};
inline thread_local WriteTimes last_write;

// Records `w` as the points from `queued` on (queued, began, committing,
// committed are consecutive Points).
inline void MarkWrite(PickupTrace* trace, Point queued, const WriteTimes& w) {
  MarkAt(trace, queued, w.queued);
  MarkAt(trace, static_cast<Point>(queued + 1), w.began);
  MarkAt(trace, static_cast<Point>(queued + 2), w.committing);
  MarkAt(trace, static_cast<Point>(queued + 3), w.committed);
}

}  // namespace taskengine::pickup_trace
