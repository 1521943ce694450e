// Failure notifications (I6) through a real engine on SQLite: the rate
// limit's plan, the outbox worked by the notifier, deliveries admitted once
// per ending and target (also across a failure between admission and the
// outbox update), summaries of what was suppressed, and what is never told.
// Deliveries run on a recording handler registered as taskengine.notify (the
// channels themselves are tested in tests/cli/notify_cli_test.cc).
#include "engine/notifier.h"

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "engine/engine_internal.h"
#include "storage/testing/fault_injecting_store.h"
#include "taskengine/engine.h"
#include "testing_support/test_util.h"

namespace taskengine {
namespace {

using namespace std::chrono_literals;

constexpr Millis kMinute = 60'000;

NotifyPending Ending(std::int64_t id, Millis at) { return {ExecutionId(id), JobName("j"), at}; }

TEST(PlanNoticesTest, EachEndingIsToldWhileTheWindowHasRoomAndTheRestAreCounted) {
  std::vector<NotifyPending> pending;
  for (int i = 1; i <= 12; ++i) pending.push_back(Ending(i, 1'000 + i));
  JobPlan plan = PlanNotices(NotifyJobState{JobName("j"), {}, 0, 0}, pending, 10, 10'000);
  ASSERT_EQ(plan.notices.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(plan.notices[i].failure.has_value());
    EXPECT_EQ(plan.notices[i].failure->execution.value, i + 1);
    EXPECT_EQ(plan.notices[i].suppressed, 0);
  }
  EXPECT_EQ(plan.suppressed_now, 2);
  EXPECT_EQ(plan.state.suppressed, 2);
  EXPECT_EQ(plan.state.suppressed_since, 1'011);
  EXPECT_EQ(plan.state.sent_at.size(), 10u);

  // Half an hour later the window is still full: one more is counted.
  JobPlan later = PlanNotices(plan.state, {Ending(13, 40 * kMinute)}, 10, 40 * kMinute);
  EXPECT_TRUE(later.notices.empty());
  EXPECT_EQ(later.state.suppressed, 3);
  EXPECT_EQ(later.state.suppressed_since, 1'011);

  // Past the hour: the next ending carries the three suppressed ones.
  JobPlan next = PlanNotices(later.state, {Ending(14, 61 * kMinute)}, 10, 61 * kMinute);
  ASSERT_EQ(next.notices.size(), 1u);
  EXPECT_EQ(next.notices[0].failure->execution.value, 14);
  EXPECT_EQ(next.notices[0].suppressed, 3);
  EXPECT_EQ(next.notices[0].suppressed_since, 1'011);
  EXPECT_EQ(next.state.suppressed, 0);
  EXPECT_EQ(next.state.sent_at, (std::vector<Millis>{61 * kMinute}));  // the old sends aged out
}

TEST(PlanNoticesTest, SuppressedFailuresAreSummarizedAloneWhenNoNewOneComes) {
  NotifyJobState full{JobName("j"), std::vector<Millis>(10, 1'000), 4, 2'000};
  EXPECT_TRUE(PlanNotices(full, {}, 10, 30 * kMinute).notices.empty());
  JobPlan plan = PlanNotices(full, {}, 10, 61 * kMinute);
  ASSERT_EQ(plan.notices.size(), 1u);
  EXPECT_FALSE(plan.notices[0].failure.has_value());
  EXPECT_EQ(plan.notices[0].suppressed, 4);
  EXPECT_EQ(plan.notices[0].suppressed_since, 2'000);
  EXPECT_EQ(plan.state.suppressed, 0);
  // Nothing suppressed, nothing pending: nothing to send, the old window forgotten.
  JobPlan idle = PlanNotices(NotifyJobState{JobName("j"), {1'000}, 0, 0}, {}, 10, 2 * 60 * kMinute);
  EXPECT_TRUE(idle.notices.empty());
  EXPECT_TRUE(idle.state.sent_at.empty());
}

TEST(NoticeTest, TextSubjectAndDocumentSayWhatEndedHow) {
  Execution e;
  e.id = ExecutionId(42);
  e.job = JobName("nightly-report");
  e.tenant = TenantId("acme");
  e.status = ExecutionStatus::kQuarantined;
  e.failure_class = FailureClass::kAmbiguous;
  e.error = "connection reset after the request was sent";
  e.attempt = 2;
  e.retry.max_attempts = 5;
  e.queued_at = 1'800'000'000'000;
  e.started_at = e.queued_at + 1'000;
  e.finished_at = e.queued_at + 2'000;
  Notice n;
  n.job = e.job;
  n.execution = e;
  n.ended_at = e.finished_at;
  n.suppressed = 7;
  n.suppressed_since = e.queued_at - 3'600'000;
  EXPECT_EQ(NoticeSubject(n),
            "[taskengine] job nightly-report (tenant acme) quarantined (execution 42) and 7 more");
  const std::string text = NoticeText(n, "https://jobs.example.com/");
  EXPECT_NE(text.find("Execution 42 of job nightly-report (tenant acme) was quarantined "
                      "(ambiguous) after attempt 2 of 5."),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Error: connection reset"), std::string::npos);
  EXPECT_NE(text.find("https://jobs.example.com/admin/acme/tasks/executions/42"),
            std::string::npos);
  EXPECT_NE(text.find("And 7 more failures of job nightly-report since"), std::string::npos);
  const auto doc = nlohmann::json::parse(NoticeDocument(n, ""));
  EXPECT_EQ(doc["kind"], "failure");
  EXPECT_EQ(doc["execution"]["id"], 42);
  EXPECT_EQ(doc["execution"]["status"], "quarantined");
  EXPECT_EQ(doc["execution"]["failure_class"], "ambiguous");
  EXPECT_TRUE(doc["execution"]["url"].is_null());
  EXPECT_EQ(doc["suppressed"]["count"], 7);
  // One key per ending and target; another target or a later ending differ.
  const NotifyTarget ops{NotifyChannel::kEmail, "ops@example.com"};
  const NotifyTarget hook{NotifyChannel::kWebhook, "hook"};
  EXPECT_EQ(DeliveryKey(n, ops), DeliveryKey(n, ops));
  EXPECT_NE(DeliveryKey(n, ops), DeliveryKey(n, hook));
  Notice again = n;
  again.ended_at += 1;
  EXPECT_NE(DeliveryKey(n, ops), DeliveryKey(again, ops));
}

// What the recording delivery handler saw.
struct Delivered {
  std::string target;
  std::string subject;
  std::string text;
};

class NotifierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineOptions o;
    o.database_path = dir_.File("te.db");
    o.clock = &clock_;
    o.worker_threads = 2;
    o.poll_interval_ms = 20;
    o.sweep_interval_ms = 50;
    o.queues = {QueueConfig{}, QueueConfig{std::string(kNotifyQueueName), 1000, 1, true}};
    ASSERT_OK_AND_ASSIGN(engine_, OpenEngine(o, WrapStoreWithFaults(faults_)));
    JobDefinition bad;
    bad.name = JobName("bad");
    bad.handler = "bad";
    bad.retry.max_attempts = 1;
    bad.notify_targets = {"ops@example.com", "webhook:hook"};
    ASSERT_OK(engine_->DefineJob(bad));
    JobDefinition quiet = bad;
    quiet.name = JobName("quiet");
    quiet.notify_on_failure = false;
    ASSERT_OK(engine_->DefineJob(quiet));
    JobDefinition ok = bad;
    ok.name = JobName("ok");
    ok.handler = "ok";
    ASSERT_OK(engine_->DefineJob(ok));
    ASSERT_OK(engine_->DefineJob(NotifyJobDefinition()));
    ASSERT_OK(engine_->RegisterHandler(
        "bad", [](JobContext&) { return HandlerResult::Permanent("the input is bad"); }));
    ASSERT_OK(engine_->RegisterHandler("ok", [](JobContext&) { return HandlerResult::Success(); }));
    ASSERT_OK(engine_->RegisterHandler(std::string(kNotifyHandlerName), [this](JobContext& ctx) {
      const auto p = nlohmann::json::parse(ctx.payload_json());
      MutexLock lock(mu_);
      delivered_.push_back({p["target"].get<std::string>(), p["subject"].get<std::string>(),
                            p["text"].get<std::string>()});
      return HandlerResult::Success();
    }));
    ASSERT_OK(engine_->Start());
  }

  Store& store() { return StoreOf(*engine_); }

  Notifier MakeNotifier(std::vector<std::string> global_targets = {}) {
    NotifierOptions o;
    o.node_id = "test-node";
    o.settings.targets = std::move(global_targets);
    return Notifier(engine_.get(), &store(), &clock_, o);
  }

  // Dispatches `n` executions of `job` and waits until they ended.
  void RunToEnd(const std::string& job, int n) {
    std::vector<ExecutionId> ids;
    for (int i = 0; i < n; ++i) {
      DispatchRequest r;
      r.job = JobName(job);
      r.payload_json = "{\"n\":" + std::to_string(i) + "}";
      ASSERT_OK_AND_ASSIGN(DispatchResult d, engine_->Dispatch(r));
      ids.push_back(d.id);
    }
    ASSERT_TRUE(WaitFor(
        [&] {
          for (ExecutionId id : ids) {
            auto e = engine_->GetExecution(id);
            if (!e.ok() || !IsTerminal(e->status)) return false;
          }
          return true;
        },
        30s));
  }

  // Executions of taskengine.notify admitted so far.
  int Deliveries() {
    ExecutionFilter f;
    f.job = JobName(std::string(kNotifyJobName));
    f.limit = 1000;
    auto page = store().ListExecutions(f);
    EXPECT_OK(page.status());
    return page.ok() ? static_cast<int>(page->items.size()) : -1;
  }

  std::vector<Delivered> WaitDelivered(std::size_t n) {
    EXPECT_TRUE(WaitFor(
        [&] {
          MutexLock lock(mu_);
          return delivered_.size() >= n;
        },
        30s));
    MutexLock lock(mu_);
    return delivered_;
  }

  FakeClock clock_;
  std::shared_ptr<StoreFaults> faults_ = std::make_shared<StoreFaults>();
  TempDir dir_;
  std::unique_ptr<Engine> engine_;
  Mutex mu_;
  std::vector<Delivered> delivered_ GUARDED_BY(mu_);
};

TEST_F(NotifierTest, EachFailureIsToldToEachTargetAndTheOverflowIsSummarized) {
  RunToEnd("bad", 12);
  Notifier notifier = MakeNotifier();
  ASSERT_OK_AND_ASSIGN(NotifyPassReport pass, notifier.RunPass(/*as_leader=*/true));
  EXPECT_EQ(pass.endings, 12);
  EXPECT_EQ(pass.deliveries, 20);  // 10 endings x 2 targets
  EXPECT_EQ(pass.suppressed, 2);
  std::vector<Delivered> seen = WaitDelivered(20);
  ASSERT_EQ(seen.size(), 20u);
  int email = 0;
  for (const Delivered& d : seen) {
    email += d.target == "email:ops@example.com" ? 1 : 0;
    EXPECT_NE(d.subject.find("job bad quarantined"), std::string::npos) << d.subject;
    EXPECT_NE(d.text.find("Error: the input is bad"), std::string::npos) << d.text;
  }
  EXPECT_EQ(email, 10);

  // Nothing new: a pass admits nothing.
  ASSERT_OK_AND_ASSIGN(NotifyPassReport idle, notifier.RunPass(true));
  EXPECT_EQ(idle.deliveries, 0);
  EXPECT_EQ(Deliveries(), 20);

  // An hour later the two suppressed failures go out as one summary per target.
  clock_.Advance(std::chrono::milliseconds(61 * kMinute));
  ASSERT_OK_AND_ASSIGN(NotifyPassReport summary, notifier.RunPass(true));
  EXPECT_EQ(summary.deliveries, 2);
  seen = WaitDelivered(22);
  ASSERT_EQ(seen.size(), 22u);
  EXPECT_NE(seen.back().text.find("And 2 more failures of job bad since"), std::string::npos)
      << seen.back().text;
  ASSERT_OK_AND_ASSIGN(NotifyOutbox outbox, store().ReadNotifyOutbox(100));
  EXPECT_TRUE(outbox.pending.empty());
  ASSERT_EQ(outbox.jobs.size(), 1u);
  EXPECT_EQ(outbox.jobs[0].suppressed, 0);

  // /metrics: what the passes decided.
  const NotifierTotals totals = notifier.totals();
  EXPECT_EQ(totals.deliveries, 22);
  EXPECT_EQ(totals.suppressed, 2);
  std::string metrics;
  AppendNotifierMetrics(totals, &metrics);
  EXPECT_NE(metrics.find("taskengine_notifications_total{result=\"admitted\"} 22\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("taskengine_notifications_total{result=\"suppressed\"} 2\n"),
            std::string::npos)
      << metrics;
}

TEST_F(NotifierTest, AFailureAfterTheAdmissionsAdmitsNothingTwice) {
  RunToEnd("bad", 3);
  Notifier notifier = MakeNotifier();
  ASSERT_OK(faults_->Fail("UpdateNotifyOutbox", Unavailable("disk I/O error")));
  EXPECT_FALSE(notifier.RunPass(true).ok());
  EXPECT_EQ(Deliveries(), 6);  // admitted, but the outbox still holds the endings
  ASSERT_OK_AND_ASSIGN(NotifyOutbox kept, store().ReadNotifyOutbox(100));
  EXPECT_EQ(kept.pending.size(), 3u);

  ASSERT_OK_AND_ASSIGN(NotifyPassReport retry, notifier.RunPass(true));
  EXPECT_EQ(retry.endings, 3);
  EXPECT_EQ(Deliveries(), 6);  // the same keys: found, not admitted again
  EXPECT_EQ(WaitDelivered(6).size(), 6u);
  ASSERT_OK_AND_ASSIGN(NotifyOutbox done, store().ReadNotifyOutbox(100));
  EXPECT_TRUE(done.pending.empty());
}

TEST_F(NotifierTest, SuccessesJobsThatNotifyNobodyAndTheDeliveriesThemselvesAreNeverTold) {
  RunToEnd("ok", 2);
  RunToEnd("quiet", 2);
  Notifier notifier = MakeNotifier();
  ASSERT_OK_AND_ASSIGN(NotifyPassReport pass, notifier.RunPass(true));
  EXPECT_EQ(pass.deliveries, 0);
  EXPECT_EQ(pass.skipped, 2);
  EXPECT_EQ(Deliveries(), 0);
  ASSERT_OK_AND_ASSIGN(NotifyOutbox outbox, store().ReadNotifyOutbox(100));
  EXPECT_TRUE(outbox.pending.empty());
  EXPECT_TRUE(outbox.jobs.empty());
}

TEST_F(NotifierTest, NotifyTestSendsToTheJobsTargetsAndRefusesAJobWithNone) {
  Notifier notifier = MakeNotifier();
  ASSERT_OK_AND_ASSIGN(auto sent, notifier.SendTest(JobName("bad")));
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].first, "email:ops@example.com");
  EXPECT_EQ(sent[1].first, "webhook:hook");
  std::vector<Delivered> seen = WaitDelivered(2);
  EXPECT_NE(seen[0].subject.find("test notification for job bad"), std::string::npos);
  JobDefinition none;
  none.name = JobName("none");
  none.handler = "ok";
  ASSERT_OK(engine_->DefineJob(none));
  EXPECT_EQ(notifier.SendTest(JobName("none")).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(notifier.SendTest(JobName("missing")).status().code(), ErrorCode::kNotFound);
}

TEST_F(NotifierTest, ManyLeasesExpiringAtOnceAlertTheGlobalTargetsOnce) {
  // Work of a queue this engine's pool does not run, claimed by a "worker"
  // that then dies: nothing heartbeats the leases.
  JobDefinition remote;
  remote.name = JobName("remote");
  remote.handler = "ok";
  remote.queue = "remote";
  remote.lease_ms = 1'000;
  ASSERT_OK(engine_->DefineJob(remote));
  Notifier notifier = MakeNotifier({"oncall@example.com"});
  ASSERT_OK_AND_ASSIGN(NotifyPassReport baseline, notifier.RunPass(true));
  EXPECT_FALSE(baseline.orphan_alert);
  for (int i = 0; i < 6; ++i) {
    DispatchRequest r;
    r.job = JobName("remote");
    r.payload_json = "{\"n\":" + std::to_string(i) + "}";
    ASSERT_OK(engine_->Dispatch(r).status());
  }
  ClaimRequest claim;
  claim.worker = WorkerId("doomed");
  claim.slots = {QueueSlot{"remote", 10}};
  ASSERT_OK_AND_ASSIGN(std::vector<Lease> leases, store().Claim(claim));
  ASSERT_EQ(leases.size(), 6u);
  clock_.Advance(5s);
  ASSERT_TRUE(WaitFor([&] { return engine_->stats().lease_expirations >= 6; }, 30s));

  ASSERT_OK_AND_ASSIGN(NotifyPassReport alert, notifier.RunPass(true));
  EXPECT_TRUE(alert.orphan_alert);
  EXPECT_EQ(alert.deliveries, 1);
  std::vector<Delivered> seen = WaitDelivered(1);
  EXPECT_EQ(seen[0].target, "email:oncall@example.com");
  EXPECT_NE(seen[0].subject.find("6 expired leases recovered at once on test-node"),
            std::string::npos)
      << seen[0].subject;
  ASSERT_OK_AND_ASSIGN(NotifyPassReport quiet, notifier.RunPass(true));
  EXPECT_FALSE(quiet.orphan_alert);
}

}  // namespace
}  // namespace taskengine
