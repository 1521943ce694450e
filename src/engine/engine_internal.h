// The engine as the product's own layers see it (src/api, src/server, the CLI
// verbs of apps/taskengine and their tests): the public Engine of
// include/taskengine/engine.h plus what must not leak into the installed
// headers, i.e. the internal storage contract (src/storage/store.h).
//
// Every Engine in the tree is an EngineInternal: the one Engine::Open (and
// OpenEngine) returns. Tests that need a failing store wrap the store, not
// the engine (OpenEngine below). The store and the outcome publishing
// are reached through StoreOf() and PublishOutcomes() below, never otherwise.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "storage/store.h"
#include "taskengine/engine.h"

namespace taskengine {

class EngineInternal : public Engine {
 protected:
  // The storage behind this engine. Owned by the engine; lives as long as it.
  virtual Store& store() = 0;
  // See PublishOutcomes() below.
  virtual std::vector<Result<FinishReply>> PublishOutcomesImpl(
      const std::vector<FinishRequest>& requests) = 0;
  // See DispatchBatchAsync() and PublishOutcomesAsync() below.
  using DispatchDone = std::function<void(Result<std::vector<DispatchResult>>)>;
  using OutcomesDone = std::function<void(std::vector<Result<FinishReply>>)>;
  virtual void DispatchBatchAsyncImpl(std::vector<DispatchRequest> requests, DispatchDone done) = 0;
  virtual void PublishOutcomesAsyncImpl(std::vector<FinishRequest> requests, OutcomesDone done) = 0;

 private:
  friend Store& StoreOf(Engine& engine);
  friend std::vector<Result<FinishReply>> PublishOutcomes(
      Engine& engine, const std::vector<FinishRequest>& requests);
  friend void DispatchBatchAsync(Engine& engine, std::vector<DispatchRequest> requests,
                                 DispatchDone done);
  friend void PublishOutcomesAsync(Engine& engine, std::vector<FinishRequest> requests,
                                   OutcomesDone done);
};

// The storage behind `engine`, for the reads and tools of the API, the server
// and the CLI. Owned by the engine. REQUIRES: `engine` is an EngineInternal
// (checked: anything else is a programmer error).
Store& StoreOf(Engine& engine);

// Publishes outcomes that workers outside `engine` reported (the HTTP worker
// protocol, W4) in one transaction: Store::FinishBatch, so each one is fenced
// by its claim version (kStale, kNotFound change nothing). An outcome that
// made work due (a release or a retry queues it again; a finished lane head
// lets its lane move on) wakes the engine's workers and work listeners at its
// commit, through the store's work publisher (Store::SetWorkPublisher); one
// that made nothing due (a success, a failure for good) wakes nobody.
// Replies are in request order, each independent. Thread-safe.
// REQUIRES: `engine` is an EngineInternal.
std::vector<Result<FinishReply>> PublishOutcomes(Engine& engine,
                                                 const std::vector<FinishRequest>& requests);

// Engine::DispatchBatch without a thread waiting for the commit (the HTTP
// routes): the same checks on the calling thread, then `done` receives what
// DispatchBatch would return, once, only after the admissions are durable
// (or the error: nothing was admitted), on a thread of the store or on the
// calling thread before this returns. `done` must be quick, must not
// block and must not call the engine. The engine outlives every pending
// `done` (its destructor waits for them). Thread-safe.
// REQUIRES: `engine` is an EngineInternal.
void DispatchBatchAsync(Engine& engine, std::vector<DispatchRequest> requests,
                        EngineInternal::DispatchDone done);

// PublishOutcomes without a thread waiting for the commit: `done` receives
// the replies PublishOutcomes would return, once, none ok before it is
// durable; where and how `done` runs as for DispatchBatchAsync. When an
// outcome made work due, the workers were woken before `done` runs.
// REQUIRES: `engine` is an EngineInternal.
void PublishOutcomesAsync(Engine& engine, std::vector<FinishRequest> requests,
                          EngineInternal::OutcomesDone done);

// Engine::Open with the engine's store passed through `wrap` once it is open
// and migrated (e.g. WrapStoreWithFaults of
// src/storage/testing/fault_injecting_store.h). Engine::Open is
// OpenEngine(options, nullptr).
using StoreWrapper = std::function<std::unique_ptr<Store>(std::unique_ptr<Store>)>;
Result<std::unique_ptr<Engine>> OpenEngine(EngineOptions options, const StoreWrapper& wrap);

}  // namespace taskengine
