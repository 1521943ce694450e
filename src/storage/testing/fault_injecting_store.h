// A Store that forwards every call to another and fails or delays the calls
// a test chooses (leveldb's ErrorEnv is the model): how the engine, the API
// and the workers meet storage errors is tested through the real code paths,
// not through faults wired into each harness.
//
//   auto faults = std::make_shared<StoreFaults>();
//   auto engine = OpenEngine(options, WrapStoreWithFaults(faults));  // engine_internal.h
//   faults->Fail("FinishBatch", Unavailable("database restarting"), {.times = 25});
//   ...
//   faults->Clear();
//
// A method is named as in store.h ("Admit", "FinishBatch"); "*" is every
// method; AdmitBatchAsync and FinishBatchAsync meet the faults of AdmitBatch
// and FinishBatch (a failed one calls back at once). A failed call does not
// reach the wrapped store; a batch method (MarkStarted, HeartbeatBatch,
// FinishBatch) then answers the status for every request.
// SetLifecycleObserver, SetWorkListener and SetWorkPublisher always forward
// (the publisher after the OnPublishWork action).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/mutex.h"
#include "storage/store.h"

namespace taskengine {

// Which calls a fault meets: the calls of its method after `skip` more of
// them have passed, `times` of them (< 0: every one until Clear()).
struct FaultWhen {
  int skip = 0;
  int times = 1;
};

// The faults of one or more FaultInjectingStores. Thread-safe.
class StoreFaults {
 public:
  using When = FaultWhen;

  // Calls of `method` fail with `status` (not ok). kInvalidArgument for a
  // method the Store does not have, or an ok `status`.
  Status Fail(std::string_view method, Status status, When when = {}) EXCLUDES(mu_);
  // Calls of `method` wait `delay` (real time) before they reach the store.
  Status Delay(std::string_view method, std::chrono::milliseconds delay, When when = {})
      EXCLUDES(mu_);
  // Removes every fault and the OnPublishWork action; counts stay.
  void Clear() EXCLUDES(mu_);
  // Runs `action` right after each commit that made work due, on the
  // committing thread, before the work publisher (Store::SetWorkPublisher)
  // hears of it: e.g. a test stops the transport's server there. Empty = none.
  void OnPublishWork(std::function<void()> action) EXCLUDES(mu_);
  // Calls of `method` so far, failed ones included ("*": of every method).
  int Calls(std::string_view method) const EXCLUDES(mu_);
  // Calls of `method` that a fault failed so far ("*": of every method).
  int Failed(std::string_view method) const EXCLUDES(mu_);
  // Leases marked started (L4) so far: those a Claim returned marked (its
  // slot said so, ClaimMarksStarted), and those given to MarkStarted calls
  // that reached the store.
  struct Marks {
    int by_claim = 0;
    int by_mark_started = 0;
  };
  Marks marks() const EXCLUDES(mu_);

  // For FaultInjectingStore: counts a call of `method`, waits for the delays
  // that meet it, and returns the status of the failure that meets it (ok:
  // none).
  Status Enter(std::string_view method) EXCLUDES(mu_);
  // For FaultInjectingStore: runs the OnPublishWork action, if any.
  void BeforePublishWork() EXCLUDES(mu_);
  // For FaultInjectingStore: counts leases marked started.
  void CountMarks(int by_claim, int by_mark_started) EXCLUDES(mu_);

 private:
  struct Fault {
    std::string method;
    When when;
    Status status;                    // not ok: fail
    std::chrono::milliseconds delay;  // else: wait
  };
  Status Add(Fault fault) EXCLUDES(mu_);

  mutable Mutex mu_;
  std::vector<Fault> faults_ GUARDED_BY(mu_);
  std::map<std::string, int, std::less<>> calls_ GUARDED_BY(mu_);
  std::map<std::string, int, std::less<>> failed_ GUARDED_BY(mu_);
  std::function<void()> before_publish_work_ GUARDED_BY(mu_);
  Marks marks_ GUARDED_BY(mu_);
};

// The names of the Store methods a fault may name, as in store.h.
const std::vector<std::string_view>& StoreMethodNames();

// `inner` with `faults` in front of it.
std::unique_ptr<Store> WrapStoreWithFaults(std::unique_ptr<Store> inner,
                                           std::shared_ptr<StoreFaults> faults);

// For OpenEngine(options, wrap) (engine_internal.h): wraps the engine's store.
std::function<std::unique_ptr<Store>(std::unique_ptr<Store>)> WrapStoreWithFaults(
    std::shared_ptr<StoreFaults> faults);

}  // namespace taskengine
