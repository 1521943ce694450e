// The fixture of the API integration tests: a real Engine on a throwaway
// SQLite file (workers on, test handlers registered), the REST API behind a
// StaticTokenAuthenticator, and the real HTTP server on an ephemeral port.
//
// Tokens (name -> principal):
//   admin     "admin"  admin, every tenant
//   operator  "oper"   operate, every tenant
//   operator2 "oper2"  operate, every tenant (the second pair of eyes)
//   reader    "reader" read, every tenant
//   dispatch  "disp"   dispatch, every tenant
//   tenant-a  "alice"  read + dispatch + operate, tenant "a"
//   tenant-b  "bob"    read + dispatch + operate, tenant "b"
//   worker    "wrk"    worker, every tenant
//
// Jobs: "echo" (global) and "tenant-echo" (per tenant) succeed with
// {"echo": payload}; "poison" (per tenant) fails permanently -> quarantined;
// "blocker" (per tenant) runs until canceled or released; "effectful" (per
// tenant) commits effect "notice" then runs until canceled; "off" is disabled;
// "parked" (global) sits in queue "parked", which no worker takes.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "api/api.h"
#include "api/auth.h"
#include "api/http_server.h"
#include "engine/engine_internal.h"
#include "storage/store.h"
#include "storage/testing/fault_injecting_store.h"
#include "taskengine/engine.h"
#include "test_client.h"
#include "testing_support/test_util.h"

namespace taskengine::api::testing {

inline constexpr char kAdmin[] = "admin-token";
inline constexpr char kOperator[] = "operator-token";
inline constexpr char kOperator2[] = "operator2-token";
inline constexpr char kReader[] = "reader-token";
inline constexpr char kDispatcher[] = "dispatch-token";
inline constexpr char kTenantA[] = "tenant-a-token";
inline constexpr char kTenantB[] = "tenant-b-token";
inline constexpr char kWorker[] = "worker-token";

struct HarnessOptions {
  bool replay_requires_approval = false;
  bool metrics_open = false;
  int worker_threads = 2;
  HttpServerOptions http;
  // Called with the API's router before the server starts (test-only routes).
  std::function<void(Router&)> extra_routes;
};

class ApiHarness {
 public:
  explicit ApiHarness(HarnessOptions options = {});
  ~ApiHarness();

  // Opens the engine, seeds jobs and grants, starts engine and server.
  // Returns a non-ok status (and the test should stop) when anything fails.
  Status Start();
  void StopServer(Millis grace_ms = 5000) { server_->Stop(grace_ms); }

  int port() const { return server_->port(); }
  Engine& engine() { return *engine_; }
  // Faults of the engine's store (fault_injecting_store.h), e.g. a store
  // that cannot serve: faults().Fail("*", Unavailable(...), {.times = -1}).
  StoreFaults& faults() { return *faults_; }
  Api& api() { return *api_; }
  HttpServer& server() { return *server_; }
  StaticTokenAuthenticator& auth() { return auth_; }

  // Lets "blocker" executions finish successfully.
  void ReleaseBlockers() { release_blockers_ = true; }

  // Polls GET /api/v1/executions/{id} (as admin) until its status is `status`
  // or `timeout` passes; returns the last detail seen.
  nlohmann::json WaitForStatus(std::int64_t id, const std::string& status,
                               std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  HarnessOptions options_;
  TempDir dir_;
  std::unique_ptr<Engine> engine_;
  std::shared_ptr<StoreFaults> faults_ = std::make_shared<StoreFaults>();
  StaticTokenAuthenticator auth_;
  std::unique_ptr<Api> api_;
  std::unique_ptr<HttpServer> server_;
  std::atomic<bool> release_blockers_{false};
};

// Polls `done` every few milliseconds until it holds or `timeout` passes.
bool WaitUntil(const std::function<bool()>& done,
               std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace taskengine::api::testing
