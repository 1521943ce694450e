// notify:test.
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli.h"
#include "engine/engine_internal.h"
#include "engine/notifier.h"

namespace taskengine::cli {
namespace {

struct NotifyTestFlags {
  std::string job;
  int timeout_seconds = 60;
  bool no_wait = false;
};

int RunNotifyTest(const GlobalFlags& flags, const NotifyTestFlags& f) {
  ServerConfig config;
  auto engine = OpenClient(flags, &config);
  if (!engine.ok()) return Fail(engine.status());
  NotifierOptions options;
  options.settings = config.notifications;
  Notifier notifier(engine->get(), &StoreOf(**engine), (*engine)->clock(), options);
  auto sent = notifier.SendTest(JobName(f.job));
  if (!sent.ok()) return Fail(sent.status());
  // The deliveries are executions of taskengine.notify, run by serve's pool:
  // wait for each to end, unless asked not to.
  struct Row {
    std::string target;
    ExecutionId id;
    std::optional<Execution> ended;
  };
  std::vector<Row> rows;
  for (const auto& [target, id] : *sent) rows.push_back({target, id, std::nullopt});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(f.timeout_seconds);
  bool pending = !f.no_wait;
  while (pending) {
    pending = false;
    for (Row& r : rows) {
      if (r.ended) continue;
      auto e = (*engine)->GetExecution(r.id);
      if (!e.ok()) return Fail(e.status());
      if (IsTerminal(e->status)) {
        r.ended = std::move(e).value();
      } else {
        pending = true;
      }
    }
    if (!pending || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  bool all_sent = true;
  nlohmann::ordered_json items = nlohmann::ordered_json::array();
  Table t({"TARGET", "EXECUTION", "RESULT", "DETAIL"});
  for (const Row& r : rows) {
    std::string result = "queued";
    std::string detail = f.no_wait ? "" : "not delivered yet: is `taskengine serve` running?";
    if (r.ended) {
      result = r.ended->status == ExecutionStatus::kSucceeded
                   ? "sent"
                   : std::string(ToString(r.ended->status));
      detail =
          r.ended->status == ExecutionStatus::kSucceeded ? r.ended->result_json : r.ended->error;
    }
    all_sent = all_sent && result == "sent";
    items.push_back({{"target", r.target},
                     {"execution_id", r.id.value},
                     {"result", result},
                     {"detail", detail}});
    t.Add({r.target, std::to_string(r.id.value), result, Cut(detail, 80)});
  }
  if (flags.json) {
    PrintJson({{"job", f.job}, {"deliveries", items}});
  } else {
    t.Print(std::cout);
  }
  if (f.no_wait) return kExitOk;
  return all_sent ? kExitOk : kExitOther;
}

}  // namespace

void AddNotifyVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs) {
  auto f = std::make_shared<NotifyTestFlags>();
  CLI::App* test = AddVerb(
      app, "notify:test",
      "Sends a test notification to the targets of JOB (its notify_targets, else [notifications] "
      "targets), whatever the rate limit, and reports each delivery's result. Deliveries are "
      "executions of the internal job taskengine.notify that a running `serve` performs; this "
      "waits for them (exit 0 when every target accepted it).");
  test->add_option("job", f->job, "The job whose targets to test")->required();
  test->add_option("--timeout", f->timeout_seconds, "Seconds to wait for the deliveries")
      ->check(CLI::Range(1, 3600));
  test->add_flag("--no-wait", f->no_wait, "Only queue the deliveries; print their execution ids");
  verbs->push_back({test, [&flags, f] { return RunNotifyTest(flags, *f); }});
}

}  // namespace taskengine::cli
