// A remote worker in a few lines: leases executions of queue "default" from a
// taskengine server, "sends" an e-mail once per execution through the effect
// ledger, and completes. Stops gracefully on SIGINT/SIGTERM.
//
//   TASKENGINE_SERVER=http://127.0.0.1:8080 TASKENGINE_TOKEN=... ./taskengine_worker_example
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "taskengine_client/worker.h"

namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop = true; }

const char* EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

}  // namespace

int main() {
  using namespace taskengine_client;
  Client client(
      {EnvOr("TASKENGINE_SERVER", "http://127.0.0.1:8080"), EnvOr("TASKENGINE_TOKEN", "")});

  WorkerOptions options;
  options.queues = {"default"};
  options.concurrency = 4;
  Worker worker(&client, options, [](LeaseContext& ctx) -> Outcome {
    ctx.Log("info", "sending notice for " + ctx.payload().dump());
    auto reservation = ctx.ReserveEffect("notice");
    if (!reservation.ok()) return Outcome::Retryable(reservation.status().ToString());
    if (reservation->answer == "canceled") return Outcome::Canceled();
    if (reservation->answer == "ambiguous") return Outcome::Ambiguous("notice may have been sent");
    if (reservation->answer == "proceed") {
      const std::string message_id = "msg-" + ctx.id();  // send it here, using key as dedup id
      Status committed = ctx.CommitEffect("notice", message_id);
      if (!committed.ok()) return Outcome::Retryable(committed.ToString());
    }
    ctx.SetProgress(100);
    if (ctx.Checkpoint() == LeaseState::kCancelRequested) return Outcome::Canceled();
    return Outcome::Complete(Json{{"notice", reservation->key}});
  });

  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  // Signal handlers may only set a flag: a normal thread calls Stop().
  std::thread watcher([&] {
    while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    worker.Stop();
  });
  Status status = worker.Run();
  g_stop = true;
  watcher.join();
  if (!status.ok()) {
    std::cerr << "worker: " << status.ToString() << std::endl;
    return 1;
  }
  const WorkerStats s = worker.stats();
  std::cout << "completed " << s.completed << ", failed " << s.failed << ", released " << s.released
            << std::endl;
  return 0;
}
