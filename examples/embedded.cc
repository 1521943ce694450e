// Embedding taskengine in a C++ application: define a job, register its
// handler, dispatch work, and let the in-process pool run it.
//
//   ./embedded [database-path]
#include <chrono>
#include <cstdio>
#include <thread>

#include "taskengine/engine.h"

using namespace taskengine;

int main(int argc, char** argv) {
  EngineOptions options;
  options.database_path = argc > 1 ? argv[1] : "data/example.db";
  options.worker_threads = 2;
  auto opened = Engine::Open(options);
  if (!opened.ok()) {
    std::fprintf(stderr, "open: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<Engine> engine = std::move(opened).value();

  JobDefinition resize;
  resize.name = JobName("resize-image");
  resize.handler = "resize";
  resize.retry.max_attempts = 3;
  if (Status s = engine->DefineJob(resize); !s.ok()) {
    std::fprintf(stderr, "define: %s\n", s.ToString().c_str());
    return 1;
  }

  // The handler: payload in, progress and logs out, a result at the end.
  Status registered = engine->RegisterHandler("resize", [](JobContext& ctx) {
    ctx.Log(LogLevel::kInfo, "resizing " + ctx.payload_json());
    for (int step = 1; step <= 4; ++step) {
      if (ctx.Checkpoint() != LeaseState::kActive) return HandlerResult::Canceled();
      ctx.SetProgress(step * 25);
    }
    return HandlerResult::Success(R"({"width":640})");
  });
  if (!registered.ok() || !engine->Start().ok()) return 1;

  DispatchRequest request;
  request.job = JobName("resize-image");
  request.payload_json = R"({"image":"cat.png"})";
  request.idempotency_key = "cat.png:640";  // dispatching again returns the same execution
  auto dispatched = engine->Dispatch(request);
  if (!dispatched.ok()) {
    std::fprintf(stderr, "dispatch: %s\n", dispatched.status().ToString().c_str());
    return 1;
  }
  std::printf("accepted execution %lld (%s)\n", static_cast<long long>(dispatched->id.value),
              dispatched->created ? "created" : "existing");

  for (int i = 0; i < 500; ++i) {
    auto e = engine->GetExecution(dispatched->id);
    if (e.ok() && IsTerminal(e->status)) {
      std::printf("execution %lld %s, result %s\n", static_cast<long long>(e->id.value),
                  std::string(ToString(e->status)).c_str(), e->result_json.c_str());
      engine->Stop();
      return e->status == ExecutionStatus::kSucceeded ? 0 : 2;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::fprintf(stderr, "execution did not finish in 5 s\n");
  return 3;
}
