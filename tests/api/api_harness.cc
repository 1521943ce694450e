#include "api_harness.h"

#include <thread>

#include "engine/engine_internal.h"
#include "storage/store.h"

namespace taskengine::api::testing {
namespace {

JobDefinition Job(const std::string& name, const std::string& handler, JobScope scope,
                  const std::string& queue = "default") {
  JobDefinition job;
  job.name = JobName(name);
  job.display_name = "Test job " + name;
  job.handler = handler;
  job.scope = scope;
  job.queue = queue;
  job.lease_ms = 3000;
  job.retry.max_attempts = 2;
  job.retry.backoff_base_ms = 50;
  job.retry.backoff_cap_ms = 100;
  return job;
}

// Runs until cancellation is requested (-> Canceled) or `release` is set (-> Success).
HandlerResult RunUntilCanceled(JobContext& ctx, const std::atomic<bool>& release) {
  while (!release) {
    if (ctx.Heartbeat() != LeaseState::kActive) return HandlerResult::Canceled();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return HandlerResult::Success(R"({"released":true})");
}

}  // namespace

bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return done();
}

ApiHarness::ApiHarness(HarnessOptions options) : options_(std::move(options)) {}

ApiHarness::~ApiHarness() {
  release_blockers_ = true;
  if (server_) server_->Stop(1000);
  if (engine_) engine_->Stop();
}

Status ApiHarness::Start() {
  EngineOptions eo;
  eo.database_path = dir_.File("taskengine.db");
  eo.worker_threads = options_.worker_threads + 2;
  eo.queues = {{"default", 1, 0}, {"slow", 0, 2}};
  eo.poll_interval_ms = 50;
  eo.sweep_interval_ms = 200;
  eo.shutdown_grace_ms = 1000;
  eo.replay_requires_approval = options_.replay_requires_approval;
  auto engine = OpenEngine(eo, WrapStoreWithFaults(faults_));
  if (!engine.ok()) return engine.status();
  engine_ = std::move(engine).value();

  TE_RETURN_IF_ERROR(engine_->DefineJob(Job("echo", "echo", JobScope::kGlobal)));
  TE_RETURN_IF_ERROR(engine_->DefineJob(Job("tenant-echo", "echo", JobScope::kPerTenant)));
  TE_RETURN_IF_ERROR(engine_->DefineJob(Job("poison", "poison", JobScope::kPerTenant)));
  TE_RETURN_IF_ERROR(engine_->DefineJob(Job("blocker", "blocker", JobScope::kPerTenant, "slow")));
  TE_RETURN_IF_ERROR(
      engine_->DefineJob(Job("effectful", "effectful", JobScope::kPerTenant, "slow")));
  // No worker takes queue "parked": dispatch-only measurements.
  TE_RETURN_IF_ERROR(engine_->DefineJob(Job("parked", "echo", JobScope::kGlobal, "parked")));
  JobDefinition off = Job("off", "echo", JobScope::kGlobal);
  off.enabled = false;
  TE_RETURN_IF_ERROR(engine_->DefineJob(off));

  TE_RETURN_IF_ERROR(engine_->RegisterHandler("echo", [](JobContext& ctx) {
    return HandlerResult::Success(R"({"echo":)" + ctx.payload_json() + "}");
  }));
  TE_RETURN_IF_ERROR(engine_->RegisterHandler(
      "poison", [](JobContext&) { return HandlerResult::Permanent("poisoned payload"); }));
  TE_RETURN_IF_ERROR(engine_->RegisterHandler(
      "blocker", [this](JobContext& ctx) { return RunUntilCanceled(ctx, release_blockers_); }));
  TE_RETURN_IF_ERROR(engine_->RegisterHandler("effectful", [this](JobContext& ctx) {
    EffectResult r =
        ctx.Effect("notice", EffectSink::kNotIdempotent,
                   [](const std::string&) -> Result<std::string> { return std::string("sent"); });
    if (!r.done()) return r.ToHandlerResult();
    return RunUntilCanceled(ctx, release_blockers_);
  }));

  Store& store = StoreOf(*engine_);
  TE_RETURN_IF_ERROR(store.Grant("alice", "a"));
  TE_RETURN_IF_ERROR(store.Grant("bob", "b"));
  for (const char* global : {"admin", "oper", "oper2", "disp", "reader"}) {
    TE_RETURN_IF_ERROR(store.Grant(global, "*"));
  }
  TE_RETURN_IF_ERROR(engine_->Start());

  auth_.Add(kAdmin, Principal::Make("admin", {Scope::kAdmin}, true));
  auth_.Add(kOperator, Principal::Make("oper", {Scope::kOperate}, true));
  auth_.Add(kOperator2, Principal::Make("oper2", {Scope::kOperate}, true));
  auth_.Add(kReader, Principal::Make("reader", {Scope::kRead}, true));
  auth_.Add(kDispatcher, Principal::Make("disp", {Scope::kDispatch}, true));
  auth_.Add(kTenantA, Principal::Make("alice", {Scope::kRead, Scope::kDispatch, Scope::kOperate},
                                      false, {"a"}));
  auth_.Add(kTenantB, Principal::Make("bob", {Scope::kRead, Scope::kDispatch, Scope::kOperate},
                                      false, {"b"}));
  auth_.Add(kWorker, Principal::Make("wrk", {Scope::kWorker}, true));

  ApiOptions ao;
  ao.metrics_open = options_.metrics_open;
  api_ = std::make_unique<Api>(engine_.get(), &auth_, ao);
  if (options_.extra_routes) options_.extra_routes(api_->router());
  HttpServerOptions ho = options_.http;
  ho.host = "127.0.0.1";
  ho.port = 0;
  server_ = std::make_unique<HttpServer>(ho, api_->handler(), api_->inline_handler());
  return server_->Start();
}

nlohmann::json ApiHarness::WaitForStatus(std::int64_t id, const std::string& status,
                                         std::chrono::milliseconds timeout) {
  TestClient client(port());
  nlohmann::json last;
  WaitUntil(
      [&] {
        ClientResponse r = client.Get("/api/v1/executions/" + std::to_string(id), kAdmin);
        last = r.json();
        return r.status == 200 && last.value("status", "") == status;
      },
      timeout);
  return last;
}

}  // namespace taskengine::api::testing
