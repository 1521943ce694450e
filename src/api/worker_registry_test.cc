// WorkerRegistry (worker_registry.h), driven directly with a fake monotonic
// clock: registration, last-seen updates, report throttling, executions in
// hand, and forgetting silent workers.
#include "api/worker_registry.h"

#include <gtest/gtest.h>

#include <chrono>

namespace taskengine::api {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

constexpr Millis kT0 = 1'767'225'600'000;  // 2026-01-01T00:00Z

class WorkerRegistryTest : public ::testing::Test {
 protected:
  // The registry's monotonic clock; moves only when a test says so.
  FakeClock clock_{kT0};
  WorkerRegistry registry_{&clock_};

  static WorkerRegistry::Registration Reg(const std::string& id) {
    WorkerRegistry::Registration r;
    r.id = WorkerId(id);
    r.queues = {"default"};
    return r;
  }

  static Lease LeaseOf(std::int64_t id) {
    Lease l;
    l.id = ExecutionId(id);
    return l;
  }

  std::map<std::string, WorkerDetails> Details() const {
    std::map<std::string, WorkerDetails> details;
    std::map<std::string, WorkerInfo> rows;
    registry_.Snapshot(&details, &rows);
    return details;
  }

  std::map<std::string, WorkerInfo> Rows() const {
    std::map<std::string, WorkerDetails> details;
    std::map<std::string, WorkerInfo> rows;
    registry_.Snapshot(&details, &rows);
    return rows;
  }
};

TEST_F(WorkerRegistryTest, FirstLeaseRegistersTheWorkerAndIsReported) {
  WorkerRegistry::Registration r = Reg("host-1:42");
  r.name = "w1";
  r.host = "host-1";
  r.version = "taskengine 0.1.0";
  r.pid = 42;
  r.concurrency = 4;
  r.queues = {"high", "default"};
  r.handlers = std::vector<std::string>{"command"};

  std::optional<WorkerInfo> row = registry_.OnLease(r, kT0);
  ASSERT_TRUE(row.has_value()) << "a new worker is reported at once";
  EXPECT_EQ(row->id.value, "host-1:42");
  EXPECT_EQ(row->hostname, "host-1");
  EXPECT_EQ(row->pid, 42);
  EXPECT_EQ(row->kind, WorkerKind::kRemote);
  EXPECT_EQ(row->state, WorkerState::kIdle);
  EXPECT_EQ(row->threads, 4);
  EXPECT_EQ(row->busy, 0);
  EXPECT_EQ(row->started_at, kT0);
  EXPECT_EQ(row->last_heartbeat_at, kT0);

  const auto details = Details();
  ASSERT_EQ(details.count("host-1:42"), 1u);
  const WorkerDetails& d = details.at("host-1:42");
  EXPECT_EQ(d.name, "w1");
  EXPECT_EQ(d.version, "taskengine 0.1.0");
  EXPECT_EQ(d.queues, (std::vector<std::string>{"high", "default"}));
  EXPECT_EQ(d.handlers, (std::vector<std::string>{"command"}));
  EXPECT_EQ(d.concurrency, 4);
  EXPECT_EQ(d.last_seen_at, kT0);
  EXPECT_TRUE(d.current.empty());
}

TEST_F(WorkerRegistryTest, LaterCallsUpdateLastSeenAndKeepUnsetFields) {
  WorkerRegistry::Registration first = Reg("w");
  first.name = "named";
  first.pid = 7;
  first.handlers = std::vector<std::string>{"command"};
  (void)registry_.OnLease(first, kT0);

  // A later request without the optional fields keeps name and pid; queues
  // and handlers are what it says now (no handlers = any).
  WorkerRegistry::Registration later = Reg("w");
  later.queues = {"other"};
  (void)registry_.OnLease(later, kT0 + 5'000);
  (void)registry_.OnHeartbeat(WorkerId("w"), {}, std::nullopt, std::nullopt, kT0 + 9'000);

  const WorkerDetails d = Details().at("w");
  EXPECT_EQ(d.name, "named");
  EXPECT_EQ(d.queues, std::vector<std::string>{"other"});
  EXPECT_TRUE(d.handlers.empty());
  EXPECT_EQ(d.last_seen_at, kT0 + 9'000);
  const WorkerInfo row = Rows().at("w");
  EXPECT_EQ(row.pid, 7);
  EXPECT_EQ(row.started_at, kT0) << "started_at is the first contact";
  EXPECT_EQ(row.last_heartbeat_at, kT0 + 9'000);
}

TEST_F(WorkerRegistryTest, ReportsAtMostOnceAnIntervalUnlessTheStateChanges) {
  ASSERT_TRUE(registry_.OnLease(Reg("w"), kT0).has_value());
  EXPECT_FALSE(registry_.OnLease(Reg("w"), kT0 + 1).has_value());
  clock_.Advance(kWorkerReportInterval - std::chrono::milliseconds(1));
  EXPECT_FALSE(registry_.OnLease(Reg("w"), kT0 + 2).has_value());
  clock_.Advance(std::chrono::milliseconds(1));
  std::optional<WorkerInfo> row = registry_.OnLease(Reg("w"), kT0 + 3);
  ASSERT_TRUE(row.has_value()) << "an interval passed";
  EXPECT_EQ(row->last_heartbeat_at, kT0 + 3);

  // idle -> busy is reported at once, and busy -> idle too.
  row = registry_.OnHeartbeat(WorkerId("w"), {ExecutionId(5)}, std::nullopt, std::nullopt, kT0 + 4);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->state, WorkerState::kBusy);
  EXPECT_FALSE(
      registry_.OnHeartbeat(WorkerId("w"), {ExecutionId(5)}, std::nullopt, std::nullopt, kT0 + 5)
          .has_value());
  row = registry_.OnHeartbeat(WorkerId("w"), {}, 3, 1, kT0 + 6);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->state, WorkerState::kIdle);
  EXPECT_EQ(row->processed, 3);
  EXPECT_EQ(row->failed, 1);
}

TEST_F(WorkerRegistryTest, TracksTheExecutionsInHand) {
  (void)registry_.OnLease(Reg("a"), kT0);
  (void)registry_.OnLease(Reg("b"), kT0);
  registry_.OnLeased(WorkerId("a"), {LeaseOf(1), LeaseOf(2)});
  registry_.OnLeased(WorkerId("b"), {LeaseOf(3)});
  registry_.OnLeased(WorkerId("unknown"), {LeaseOf(4)});  // ignored

  EXPECT_EQ(Details().at("a").current, (std::vector<ExecutionId>{ExecutionId(1), ExecutionId(2)}));
  EXPECT_EQ(Rows().at("a").busy, 2);
  EXPECT_EQ(Rows().at("a").state, WorkerState::kBusy);
  EXPECT_EQ(Details().count("unknown"), 0u);

  // The worker's own list wins.
  (void)registry_.OnHeartbeat(WorkerId("a"), {ExecutionId(2), ExecutionId(9)}, std::nullopt,
                              std::nullopt, kT0 + 1);
  EXPECT_EQ(Details().at("a").current, (std::vector<ExecutionId>{ExecutionId(2), ExecutionId(9)}));

  registry_.OnFinished({ExecutionId(9), ExecutionId(3), ExecutionId(77)});
  EXPECT_EQ(Details().at("a").current, std::vector<ExecutionId>{ExecutionId(2)});
  EXPECT_TRUE(Details().at("b").current.empty());
  EXPECT_EQ(Rows().at("b").state, WorkerState::kIdle);
}

TEST_F(WorkerRegistryTest, AHeartbeatOfAnUnknownWorkerRegistersIt) {
  std::optional<WorkerInfo> row =
      registry_.OnHeartbeat(WorkerId("late"), {ExecutionId(8)}, 1, 0, kT0);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->started_at, kT0);
  EXPECT_EQ(row->state, WorkerState::kBusy);
  EXPECT_EQ(Details().at("late").current, std::vector<ExecutionId>{ExecutionId(8)});
}

TEST_F(WorkerRegistryTest, AWorkerThatStopsCallingIsForgottenAfterItsWindow) {
  (void)registry_.OnLease(Reg("silent"), kT0);
  (void)registry_.OnLease(Reg("busy"), kT0);
  registry_.OnLeased(WorkerId("silent"), {LeaseOf(1)});

  // Silent for just under the window: kept.
  clock_.Advance(kForgetWorkerAfter - seconds(1));
  (void)registry_.OnLease(Reg("busy"), kT0 + 1);
  EXPECT_EQ(Details().count("silent"), 1u);

  // Past the window, but the last look was under kWorkerForgetCheckEvery ago.
  clock_.Advance(kWorkerForgetCheckEvery - seconds(1));
  (void)registry_.OnLease(Reg("busy"), kT0 + 2);
  EXPECT_EQ(Details().count("silent"), 1u) << "looked for at most once a minute";

  clock_.Advance(seconds(1));
  (void)registry_.OnLease(Reg("busy"), kT0 + 3);
  EXPECT_EQ(Details().count("silent"), 0u) << "silent for more than kForgetWorkerAfter";
  EXPECT_EQ(Rows().count("silent"), 0u);
  EXPECT_EQ(Details().count("busy"), 1u);

  // Its executions went with it; coming back is a new registration.
  registry_.OnFinished({ExecutionId(1)});
  std::optional<WorkerInfo> row = registry_.OnLease(Reg("silent"), kT0 + 4);
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->started_at, kT0 + 4);
  EXPECT_TRUE(Details().at("silent").current.empty());
}

TEST_F(WorkerRegistryTest, HeartbeatsKeepAWorkerFromBeingForgotten) {
  (void)registry_.OnLease(Reg("a"), kT0);
  (void)registry_.OnLease(Reg("b"), kT0);
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(minutes(40));
    (void)registry_.OnHeartbeat(WorkerId("a"), {}, std::nullopt, std::nullopt, kT0 + i);
    (void)registry_.OnLease(Reg("b"), kT0 + i);
  }
  EXPECT_EQ(Details().count("a"), 1u) << "2 h since its registration, 40 min since its heartbeat";
}

}  // namespace
}  // namespace taskengine::api
