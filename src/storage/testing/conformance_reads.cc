// Conformance cases for the read side: listing with filters and cursors, logs
// and queue depths.
#include <set>

#include "storage/testing/conformance.h"

namespace taskengine {
TEST_P(StoreConformance, Reads_ListFiltersByJobTenantStatusAndQueuedTime) {
  DefineJob("report");
  DefineJob("export", "exports");
  const Millis t0 = Now();
  const std::int64_t n1 = AdmitOne(MakeRequest("report", 1, "acme")).value;
  Advance(kSecond);
  const std::int64_t n2 = AdmitOne(MakeRequest("report", 2, "globex")).value;
  Advance(kSecond);
  const std::int64_t n3 = AdmitOne(MakeRequest("export", 3, "acme")).value;
  Advance(kSecond);
  const std::int64_t n4 = AdmitOne(MakeRequest("report", 4, "acme")).value;
  ASSERT_OK(store().Complete(Ref(ClaimOne()), ""));  // n1: oldest run_at
  ClaimOne();                                        // n2
  ASSERT_EQ(Get(ExecutionId(n1)).status, ExecutionStatus::kSucceeded);
  ASSERT_EQ(Get(ExecutionId(n2)).status, ExecutionStatus::kRunning);

  auto list = [&](ExecutionFilter f) {
    f.limit = 100;
    Result<ExecutionPage> page = store().ListExecutions(f);
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    if (!page.ok()) return std::vector<std::int64_t>{-1};
    EXPECT_EQ(page->next_before.value, 0);
    return ExecutionIds(page->items);
  };
  using V = std::vector<std::int64_t>;
  ExecutionFilter f;
  EXPECT_EQ(list(f), (V{n4, n3, n2, n1}));

  f = {};
  f.job = JobName("report");
  EXPECT_EQ(list(f), (V{n4, n2, n1}));
  f = {};
  f.tenant = TenantId("acme");
  EXPECT_EQ(list(f), (V{n4, n3, n1}));
  f = {};
  f.status = ExecutionStatus::kQueued;
  EXPECT_EQ(list(f), (V{n4, n3}));
  f.status = ExecutionStatus::kRunning;
  EXPECT_EQ(list(f), (V{n2}));
  f.status = ExecutionStatus::kSucceeded;
  EXPECT_EQ(list(f), (V{n1}));
  f.status = ExecutionStatus::kFailed;
  EXPECT_EQ(list(f), V{});
  f = {};
  f.job = JobName("report");
  f.tenant = TenantId("acme");
  EXPECT_EQ(list(f), (V{n4, n1}));
  f.status = ExecutionStatus::kQueued;
  EXPECT_EQ(list(f), (V{n4}));
  f = {};
  f.job = JobName("nothing-here");
  EXPECT_EQ(list(f), V{});

  f = {};
  f.queued_from = t0 + kSecond;    // inclusive
  f.queued_to = t0 + 3 * kSecond;  // exclusive
  EXPECT_EQ(list(f), (V{n3, n2}));
  f = {};
  f.queued_from = t0 + 3 * kSecond;
  EXPECT_EQ(list(f), (V{n4}));
  f = {};
  f.queued_to = t0 + kSecond;
  EXPECT_EQ(list(f), (V{n1}));
}

TEST_P(StoreConformance, Reads_ListPaginatesNewestFirstWithACursor) {
  DefineJob("report");
  std::vector<AdmitRequest> requests;
  for (int i = 0; i < 250; ++i) requests.push_back(MakeRequest("report", i, i % 2 ? "acme" : ""));
  ASSERT_OK(store().AdmitBatch(requests));

  auto walk = [&](ExecutionFilter f, std::vector<std::size_t>* page_sizes) {
    std::vector<std::int64_t> ids;
    for (int pages = 0; pages < 20; ++pages) {
      Result<ExecutionPage> page = store().ListExecutions(f);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) break;
      page_sizes->push_back(page->items.size());
      for (const Execution& e : page->items) ids.push_back(e.id.value);
      if (page->next_before.value == 0) break;
      f.before = page->next_before;
    }
    return ids;
  };

  ExecutionFilter f;
  f.limit = 100;
  std::vector<std::size_t> sizes;
  std::vector<std::int64_t> ids = walk(f, &sizes);
  EXPECT_EQ(sizes, (std::vector<std::size_t>{100, 100, 50}));
  EXPECT_EQ(ids.size(), 250u);
  EXPECT_EQ(std::set<std::int64_t>(ids.begin(), ids.end()).size(), 250u) << "each row once";
  for (std::size_t i = 1; i < ids.size(); ++i) {
    ASSERT_GT(ids[i - 1], ids[i]) << "newest first at position " << i;
  }

  // The cursor composes with a filter.
  f.tenant = TenantId("acme");
  f.limit = 40;
  sizes.clear();
  std::vector<std::int64_t> acme = walk(f, &sizes);
  EXPECT_EQ(sizes, (std::vector<std::size_t>{40, 40, 40, 5}));
  EXPECT_EQ(std::set<std::int64_t>(acme.begin(), acme.end()).size(), 125u);
  for (std::int64_t id : acme) EXPECT_EQ(Get(ExecutionId(id)).tenant.value, "acme");
}

TEST_P(StoreConformance, Reads_ListLimitIsBounded) {
  DefineJob("report");
  std::vector<AdmitRequest> requests;
  for (int i = 0; i < 3; ++i) requests.push_back(MakeRequest("report", i));
  ASSERT_OK(store().AdmitBatch(requests));

  ExecutionFilter f;
  f.limit = 1;
  ASSERT_OK_AND_ASSIGN(ExecutionPage one, store().ListExecutions(f));
  ASSERT_EQ(one.items.size(), 1u);
  EXPECT_NE(one.next_before.value, 0) << "more rows remain";
  f.limit = 1000;
  ASSERT_OK_AND_ASSIGN(ExecutionPage all, store().ListExecutions(f));
  EXPECT_EQ(all.items.size(), 3u);
  EXPECT_EQ(all.next_before.value, 0);
  for (int bad : {0, -1, 1001}) {
    f.limit = bad;
    EXPECT_EQ(store().ListExecutions(f).status().code(), ErrorCode::kInvalidArgument)
        << "limit " << bad << " is outside 1..1000";
  }
}

TEST_P(StoreConformance, Reads_GetLogsOldestFirstWithAttemptAndLevel) {
  DefineJob("report");
  DefineJob("idle", "idle");
  const ExecutionId id = AdmitOne(MakeRequest("report", 1));
  const ExecutionId quiet = AdmitOne(MakeRequest("idle", 2));  // never claimed
  const Millis t0 = Now();
  const Lease first = ClaimOne();
  ASSERT_EQ(first.id, id);
  ASSERT_OK(store().AppendLog(Ref(first), LogLevel::kDebug, "a"));
  Advance(kSecond);
  ASSERT_OK(store().AppendLog(Ref(first), LogLevel::kInfo, "b"));
  ASSERT_OK(store().Fail(Ref(first), FailureClass::kRetryable, "x"));
  Advance(5 * kSecond);
  const Lease second = ClaimOne();
  ASSERT_EQ(second.id, id);
  ASSERT_OK(store().AppendLog(Ref(second), LogLevel::kWarn, "c"));
  ASSERT_OK(store().AppendLog(Ref(second), LogLevel::kError, "d \"quoted\"\nsecond line"));

  ASSERT_OK_AND_ASSIGN(std::vector<LogEntry> logs, store().GetLogs(id, 10));
  ASSERT_EQ(logs.size(), 4u);
  const struct {
    int attempt;
    Millis at;
    LogLevel level;
    const char* message;
  } expected[] = {{1, t0, LogLevel::kDebug, "a"},
                  {1, t0 + kSecond, LogLevel::kInfo, "b"},
                  {2, t0 + 6 * kSecond, LogLevel::kWarn, "c"},
                  {2, t0 + 6 * kSecond, LogLevel::kError, "d \"quoted\"\nsecond line"}};
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE("log line " + std::to_string(i));
    EXPECT_EQ(logs[i].execution, id);
    EXPECT_EQ(logs[i].attempt, expected[i].attempt);
    EXPECT_EQ(logs[i].at, expected[i].at);
    EXPECT_EQ(logs[i].level, expected[i].level);
    EXPECT_EQ(logs[i].message, expected[i].message);
  }

  ASSERT_OK_AND_ASSIGN(std::vector<LogEntry> two, store().GetLogs(id, 2));
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].message, "a");
  EXPECT_EQ(two[1].message, "b");
  ASSERT_OK_AND_ASSIGN(std::vector<LogEntry> none, store().GetLogs(quiet, 10));
  EXPECT_TRUE(none.empty());
}

TEST_P(StoreConformance, Reads_QueueDepthsCountPerQueue) {
  ASSERT_OK_AND_ASSIGN(std::vector<QueueDepth> empty, store().QueueDepths());
  EXPECT_TRUE(empty.empty());

  DefineJob("alpha", "a");
  DefineJob("beta", "b");
  DefineJob("gamma", "c");
  const Millis t0 = Now();
  for (int i = 0; i < 4; ++i) {  // a1..a4, one second apart
    AdmitOne(MakeRequest("alpha", i));
    Advance(kSecond);
  }
  AdmitRequest later = MakeRequest("alpha", 10);
  later.run_at = Now() + 3'600'000;
  AdmitOne(later);  // a5: queued, not due
  Advance(kSecond);
  AdmitOne(MakeRequest("alpha", 11));    // a6
  ASSERT_EQ(ClaimN("a", 2).size(), 2u);  // a1, a2 run
  AdmitOne(MakeRequest("beta", 1));
  ClaimOne("b");
  AdmitOne(MakeRequest("gamma", 1));
  ASSERT_OK(store().Complete(Ref(ClaimOne("c")), ""));  // c has nothing left

  ASSERT_OK_AND_ASSIGN(std::vector<QueueDepth> depths, store().QueueDepths());
  ASSERT_EQ(depths.size(), 2u) << "a queue with nothing queued or running is not listed";
  EXPECT_EQ(depths[0].queue, "a");
  EXPECT_EQ(depths[0].queued, 4);
  EXPECT_EQ(depths[0].due, 3);
  EXPECT_EQ(depths[0].running, 2);
  EXPECT_EQ(depths[0].oldest_queued_at, t0 + 2 * kSecond) << "a3 is the oldest still queued";
  EXPECT_EQ(depths[1].queue, "b");
  EXPECT_EQ(depths[1].queued, 0);
  EXPECT_EQ(depths[1].due, 0);
  EXPECT_EQ(depths[1].running, 1);
  EXPECT_EQ(depths[1].oldest_queued_at, 0);

  Advance(3'600'000);
  ASSERT_OK_AND_ASSIGN(std::vector<QueueDepth> later_depths, store().QueueDepths());
  ASSERT_FALSE(later_depths.empty());
  EXPECT_EQ(later_depths[0].due, 4) << "due is judged by the store's clock";
}

}  // namespace taskengine
