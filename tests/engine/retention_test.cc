// Retention (I7) through a real engine on SQLite: the pass, its batches and
// progress, the lock of the loop, store errors, and the space given back.
// The clock is a FakeClock moved past the retention ages; nothing sleeps for
// the ages themselves.
#include "engine/retention.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "engine/engine_internal.h"
#include "storage/sqlite/sqlite_db.h"
#include "storage/testing/fault_injecting_store.h"
#include "taskengine/engine.h"
#include "testing_support/test_util.h"

namespace taskengine {
namespace {

using namespace std::chrono_literals;

TEST(RetentionPolicyTest, CutoffsAreNowMinusEachAgeAndZeroKeepsForever) {
  RetentionPolicy p;
  const Millis now = 1'800'000'000'000;
  RetentionCutoffs c = CutoffsAt(p, now);
  EXPECT_EQ(c.executions_ended_before, now - 30 * kRetentionDayMs);
  EXPECT_EQ(c.logs_before, now - 7 * kRetentionDayMs);
  EXPECT_EQ(c.audit_before, now - 365 * kRetentionDayMs);
  p.logs_ms = 0;
  p.audit_ms = 0;
  c = CutoffsAt(p, now);
  EXPECT_EQ(c.logs_before, 0);
  EXPECT_EQ(c.audit_before, 0);
  EXPECT_GT(c.executions_ended_before, 0);
}

TEST(RetentionPolicyTest, RangesAreChecked) {
  EXPECT_OK(ValidateRetentionPolicy(RetentionPolicy{}));
  RetentionPolicy p;
  p.batch = 0;
  EXPECT_EQ(ValidateRetentionPolicy(p).code(), ErrorCode::kInvalidArgument);
  p = {};
  p.batch = 10'001;
  EXPECT_EQ(ValidateRetentionPolicy(p).code(), ErrorCode::kInvalidArgument);
  p = {};
  p.executions_ms = -1;
  EXPECT_NE(ValidateRetentionPolicy(p).message().find("executions"), std::string::npos);
  p = {};
  p.interval_ms = 999;
  EXPECT_EQ(ValidateRetentionPolicy(p).code(), ErrorCode::kInvalidArgument);
}

class RetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineOptions o;
    o.database_path = dir_.File("te.db");
    o.clock = &clock_;
    o.worker_threads = 2;
    o.poll_interval_ms = 20;
    o.sweep_interval_ms = 50;
    ASSERT_OK_AND_ASSIGN(engine_, OpenEngine(o, WrapStoreWithFaults(faults_)));
    JobDefinition ok;
    ok.name = JobName("ok");
    ok.handler = "ok";
    ASSERT_OK(engine_->DefineJob(ok));
    JobDefinition bad = ok;
    bad.name = JobName("bad");
    bad.handler = "bad";
    bad.retry.max_attempts = 1;
    ASSERT_OK(engine_->DefineJob(bad));
    ASSERT_OK(engine_->RegisterHandler("ok", [](JobContext& ctx) {
      ctx.Log(LogLevel::kInfo, "did it");
      return HandlerResult::Success();
    }));
    ASSERT_OK(engine_->RegisterHandler("bad",
                                       [](JobContext&) { return HandlerResult::Retryable("no"); }));
  }

  Store& store() { return StoreOf(*engine_); }

  // Runs `n` jobs of "ok" (each with a log line) to their end.
  void RunOk(int n, const std::string& payload = "{}") {
    std::vector<DispatchRequest> batch;
    for (int i = 0; i < n; ++i) {
      DispatchRequest r;
      r.job = JobName("ok");
      r.payload_json = payload;
      batch.push_back(r);
    }
    ASSERT_OK(engine_->DispatchBatch(batch).status());
    ASSERT_TRUE(WaitFor([&] { return engine_->stats().completed >= completed_ + n; }, 30s));
    completed_ += n;
  }

  Retention MakeRetention(int batch = 500) {
    RetentionOptions o;
    o.policy.batch = batch;
    o.policy.max_pause_ms = 1;
    o.policy.max_transaction_ms = 0;  // fixed batches: the test counts them
    return Retention(&store(), &clock_, o);
  }

  std::int64_t Total(ExecutionStatus s) {
    auto stats = store().GetStats(TenantScope{});
    EXPECT_OK(stats.status());
    return stats.ok() ? stats->totals[static_cast<int>(s)] : -1;
  }

  FakeClock clock_;
  std::shared_ptr<StoreFaults> faults_ = std::make_shared<StoreFaults>();
  TempDir dir_;
  std::unique_ptr<Engine> engine_;
  std::int64_t completed_ = 0;
};

TEST_F(RetentionTest, APassRemovesWhatAgedOutInBatchesAndKeepsTheRest) {
  ASSERT_OK(engine_->Start());
  RunOk(1'200);
  // A lane's blocking head: failed with a lane key.
  DispatchRequest blocker;
  blocker.job = JobName("bad");
  blocker.lane_key = "customer-7";
  ASSERT_OK_AND_ASSIGN(DispatchResult head, engine_->Dispatch(blocker));
  ASSERT_TRUE(WaitFor([&] {
    auto e = engine_->GetExecution(head.id);
    return e.ok() && e->status == ExecutionStatus::kFailed;
  }));
  // Queued as long ago: due in 60 days.
  DispatchRequest later;
  later.job = JobName("ok");
  later.delay_ms = 60 * kRetentionDayMs;
  ASSERT_OK_AND_ASSIGN(DispatchResult queued, engine_->Dispatch(later));
  AuditRecord audit;
  audit.at = clock_.NowMillis();
  audit.actor = "cli:ops";
  audit.action = "job.update";
  audit.target = "job:ok";
  ASSERT_OK(store().AppendAudit(audit));
  ExecutionFilter succeeded;
  succeeded.status = ExecutionStatus::kSucceeded;
  ASSERT_OK_AND_ASSIGN(ExecutionPage first, store().ListExecutions(succeeded));
  ASSERT_FALSE(first.items.empty());

  // Nothing is due yet.
  Retention retention = MakeRetention(500);
  ASSERT_OK_AND_ASSIGN(PurgeReport none, retention.DryRun());
  EXPECT_EQ(none.executions, 0);

  clock_.Advance(std::chrono::milliseconds(31 * kRetentionDayMs));
  ASSERT_OK_AND_ASSIGN(PurgeReport due, retention.DryRun());
  EXPECT_EQ(due.executions, 1'200);
  EXPECT_EQ(due.logs, 1'200);
  EXPECT_EQ(due.audit, 0);                               // 365 days
  EXPECT_EQ(Total(ExecutionStatus::kSucceeded), 1'200);  // the dry run removed nothing

  std::vector<std::int64_t> batches;
  ASSERT_OK_AND_ASSIGN(PurgeTotals removed,
                       retention.RunPass([&](const PurgeReport& b, const PurgeTotals& so_far) {
                         batches.push_back(b.executions);
                         EXPECT_EQ(so_far.batches, static_cast<int>(batches.size()));
                       }));
  EXPECT_EQ(removed.executions, 1'200);
  EXPECT_EQ(removed.logs, 1'200);
  EXPECT_EQ(removed.attempts, 0);  // the history keeps attempts that did not succeed
  EXPECT_EQ(removed.audit, 0);
  EXPECT_EQ(batches, (std::vector<std::int64_t>{500, 500, 200}));
  EXPECT_GT(removed.oldest_ended_at, 0);
  EXPECT_GE(removed.newest_ended_at, removed.oldest_ended_at);

  EXPECT_EQ(engine_->GetExecution(first.items.front().id).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(Total(ExecutionStatus::kSucceeded), 0);
  EXPECT_EQ(Total(ExecutionStatus::kFailed), 1);
  EXPECT_EQ(Total(ExecutionStatus::kQueued), 1);
  ASSERT_OK_AND_ASSIGN(Execution h, engine_->GetExecution(head.id));
  EXPECT_EQ(h.status, ExecutionStatus::kFailed);
  ASSERT_OK_AND_ASSIGN(Execution q, engine_->GetExecution(queued.id));
  EXPECT_EQ(q.status, ExecutionStatus::kQueued);
  ASSERT_OK_AND_ASSIGN(auto kept_audit, store().ListAudit(AuditFilter{}));
  EXPECT_FALSE(kept_audit.empty());

  // A second pass finds nothing.
  ASSERT_OK_AND_ASSIGN(PurgeTotals again, retention.RunPass());
  EXPECT_EQ(again.rows(), 0);
  EXPECT_EQ(again.batches, 1);
}

TEST_F(RetentionTest, ANewDatabaseGivesTheFreedSpaceBack) {
  ASSERT_OK(engine_->Start());
  const std::string big = "{\"blob\":\"" + std::string(8'000, 'x') + "\"}";
  RunOk(600, big);
  sqlite::Connection reader;
  ASSERT_OK(reader.Open(dir_.File("te.db"), /*create=*/false, 5'000));
  auto pages = [&]() -> std::int64_t {
    auto s = reader.Prepare("PRAGMA page_count");
    EXPECT_OK(s.status());
    auto row = s->Step();
    EXPECT_TRUE(row.ok() && *row);
    return s->Int(0);
  };
  {
    auto s = reader.Prepare("PRAGMA auto_vacuum");
    ASSERT_OK(s.status());
    ASSERT_OK_AND_ASSIGN(bool row, s->Step());
    ASSERT_TRUE(row);
    EXPECT_EQ(s->Int(0), 2) << "new databases use incremental auto-vacuum";
  }
  const std::int64_t full = pages();
  EXPECT_GT(full, 600 * 2);  // at least two 4 KiB pages per payload
  clock_.Advance(std::chrono::milliseconds(31 * kRetentionDayMs));
  Retention retention = MakeRetention(200);
  const int reclaims_before = faults_->Calls("ReclaimSpace");
  ASSERT_OK_AND_ASSIGN(PurgeTotals removed, retention.RunPass());
  EXPECT_EQ(removed.executions, 600);
  EXPECT_GT(faults_->Calls("ReclaimSpace"), reclaims_before);
  const std::int64_t after = pages();
  EXPECT_LT(after, full / 3) << "pages before " << full << ", after " << after;
  ASSERT_OK_AND_ASSIGN(std::int64_t more, store().ReclaimSpace(1'000));
  EXPECT_EQ(more, 0);
  EXPECT_EQ(store().ReclaimSpace(0).status().code(), ErrorCode::kInvalidArgument);
}

TEST_F(RetentionTest, AStoreErrorEndsThePassAndSaysWhatWasRemovedBefore) {
  ASSERT_OK(engine_->Start());
  RunOk(300);
  clock_.Advance(std::chrono::milliseconds(31 * kRetentionDayMs));
  ASSERT_OK(faults_->Fail("Purge", Unavailable("disk gone"), {.skip = 1, .times = 1}));
  Retention retention = MakeRetention(100);
  Result<PurgeTotals> pass = retention.RunPass();
  ASSERT_EQ(pass.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(pass.status().message().find("retention stopped after removing"), std::string::npos)
      << pass.status().message();
  EXPECT_NE(pass.status().message().find("(100 executions)"), std::string::npos)
      << pass.status().message();
  EXPECT_NE(pass.status().message().find("disk gone"), std::string::npos);
  // The next pass takes the rest.
  ASSERT_OK_AND_ASSIGN(PurgeTotals rest, retention.RunPass());
  EXPECT_EQ(rest.executions, 200);
  EXPECT_EQ(Total(ExecutionStatus::kSucceeded), 0);
}

TEST_F(RetentionTest, OneLoopPurgesAtATimeAndAnotherTakesOverWhenItStops) {
  ASSERT_OK(engine_->Start());
  RunOk(50);
  clock_.Advance(std::chrono::milliseconds(31 * kRetentionDayMs));
  RetentionOptions a_options;
  a_options.node_id = "node-a";
  a_options.policy.interval_ms = 1'000;
  RetentionOptions b_options = a_options;
  b_options.node_id = "node-b";
  Retention a(&store(), &clock_, a_options);
  Retention b(&store(), &clock_, b_options);
  ASSERT_OK(a.Start());
  ASSERT_TRUE(WaitFor([&] { return a.totals().passes >= 1; }));
  EXPECT_EQ(a.totals().purged.executions, 50);
  EXPECT_GT(a.totals().last_pass_finished_at, 0);
  EXPECT_EQ(a.Start().code(), ErrorCode::kConflict);
  ASSERT_OK(b.Start());
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(b.totals().passes, 0) << "node-a holds the lock";
  a.Stop();  // gives the lock up
  RunOk(20);
  clock_.Advance(std::chrono::milliseconds(31 * kRetentionDayMs));
  ASSERT_TRUE(WaitFor([&] { return b.totals().purged.executions == 20; }, 5s))
      << b.totals().purged.executions;
  b.Stop();

  std::string metrics;
  AppendRetentionMetrics(b.totals(), &metrics);
  EXPECT_NE(metrics.find("taskengine_retention_purged_total{kind=\"executions\"} 20\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("taskengine_retention_last_purge_timestamp_seconds "), std::string::npos);
}

TEST_F(RetentionTest, TheLoopCountsAFailedPassAndGoesOn) {
  ASSERT_OK(engine_->Start());
  RunOk(10);
  clock_.Advance(std::chrono::milliseconds(31 * kRetentionDayMs));
  ASSERT_OK(faults_->Fail("Purge", Unavailable("restarting"), {.times = 1}));
  RetentionOptions o;
  o.node_id = "node-a";
  o.policy.interval_ms = 1'000;
  Retention r(&store(), &clock_, o);
  ASSERT_OK(r.Start());
  ASSERT_TRUE(WaitFor([&] { return r.totals().passes >= 2; }, 5s));
  const RetentionTotals t = r.totals();
  EXPECT_EQ(t.passes_failed, 1);
  EXPECT_EQ(t.purged.executions, 10);
}

// What a pass removed before a store error ended it counts in the loop's
// totals (and so in /metrics) like any other removal.
TEST_F(RetentionTest, RowsAFailedPassRemovedStillCount) {
  ASSERT_OK(engine_->Start());
  RunOk(10);
  clock_.Advance(std::chrono::milliseconds(31 * kRetentionDayMs));
  ASSERT_OK(faults_->Fail("Purge", Unavailable("restarting"), {.skip = 1, .times = 1}));
  RetentionOptions o;
  o.node_id = "node-a";
  o.policy.interval_ms = 1'000;
  o.policy.batch = 4;
  o.policy.max_transaction_ms = 0;
  Retention r(&store(), &clock_, o);
  ASSERT_OK(r.Start());
  ASSERT_TRUE(WaitFor([&] { return r.totals().passes >= 2; }, 5s));
  const RetentionTotals t = r.totals();
  EXPECT_EQ(t.passes_failed, 1);
  EXPECT_EQ(t.purged.executions, 10);
  EXPECT_EQ(Total(ExecutionStatus::kSucceeded), 0);
}

}  // namespace
}  // namespace taskengine
