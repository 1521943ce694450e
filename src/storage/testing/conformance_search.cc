// Conformance cases for the execution search (I1): every criterion and their
// combinations answer what a filter over all executions answers, in id order,
// with cursor and offset pages, and totals exact from the counters or
// counted and labelled as a lower bound.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "storage/testing/conformance.h"

namespace taskengine {
namespace {

using Predicate = std::function<bool(const Execution&)>;

std::vector<std::int64_t> Matching(const std::vector<Execution>& all, const Predicate& keep) {
  std::vector<std::int64_t> out;
  for (const Execution& e : all) {
    if (keep(e)) out.push_back(e.id.value);
  }
  return out;
}

bool In(ExecutionStatus s, std::initializer_list<ExecutionStatus> set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

}  // namespace

std::vector<std::int64_t> StoreConformance::SearchIds(ExecutionFilter filter) {
  std::vector<std::int64_t> out;
  for (int pages = 0; pages < 100; ++pages) {
    Result<ExecutionPage> page = store().ListExecutions(filter);
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    if (!page.ok()) return out;
    for (const Execution& e : page->items) out.push_back(e.id.value);
    if (page->next_before.value == 0) break;
    filter.before = page->next_before;
  }
  return out;
}

std::vector<Millis> StoreConformance::PopulateSearchMix() {
  DefineJob("a", "default");
  DefineJob("b", "high");
  const std::vector<std::string> tenants = {"", "t1", "t2"};
  std::vector<Millis> marks;
  int n = 0;
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < 8; ++i, ++n) {
      AdmitRequest r = MakeRequest(i % 2 ? "a" : "b", n, tenants[n % 3]);
      r.trigger = n % 4 == 0 ? Trigger::kScheduled : Trigger::kApi;
      AdmitOne(r);
    }
    marks.push_back(Now());
    Advance(60'000);
    for (const Lease& l : ClaimN("default", 2)) EXPECT_OK(store().Complete(Ref(l), ""));
    for (const Lease& l : ClaimN("high", 2)) {
      EXPECT_OK(store().Fail(Ref(l), FailureClass::kPermanent, "bad"));
    }
    ClaimN("default", 1);  // left running
    Advance(60'000);
  }
  return marks;
}

TEST_P(StoreConformance, I1_SearchCriteriaAndTheirCombinationsMatchAFilter) {
  const std::vector<Millis> marks = PopulateSearchMix();
  const std::vector<Execution> all = All();
  ASSERT_EQ(all.size(), 24u);
  struct Case {
    const char* name;
    std::function<void(ExecutionFilter&)> set;
    Predicate keep;
  };
  const std::vector<Case> cases = {
      {"all", [](ExecutionFilter&) {}, [](const Execution&) { return true; }},
      {"job", [](ExecutionFilter& f) { f.job = JobName("a"); },
       [](const Execution& e) { return e.job.value == "a"; }},
      {"tenant+job",
       [](ExecutionFilter& f) {
         f.tenant = TenantId("t1");
         f.job = JobName("a");
       },
       [](const Execution& e) { return e.tenant.value == "t1" && e.job.value == "a"; }},
      {"tenant", [](ExecutionFilter& f) { f.tenant = TenantId("t1"); },
       [](const Execution& e) { return e.tenant.value == "t1"; }},
      {"global tenant", [](ExecutionFilter& f) { f.tenant = TenantId(""); },
       [](const Execution& e) { return e.tenant.value.empty(); }},
      {"status", [](ExecutionFilter& f) { f.status = ExecutionStatus::kSucceeded; },
       [](const Execution& e) { return e.status == ExecutionStatus::kSucceeded; }},
      {"statuses",
       [](ExecutionFilter& f) {
         f.statuses = {ExecutionStatus::kQueued, ExecutionStatus::kQuarantined,
                       ExecutionStatus::kRunning};
       },
       [](const Execution& e) {
         return In(e.status, {ExecutionStatus::kQueued, ExecutionStatus::kQuarantined,
                              ExecutionStatus::kRunning});
       }},
      {"tenant+running",
       [](ExecutionFilter& f) {
         f.tenant = TenantId("t1");
         f.status = ExecutionStatus::kRunning;
       },
       [](const Execution& e) {
         return e.tenant.value == "t1" && e.status == ExecutionStatus::kRunning;
       }},
      {"trigger", [](ExecutionFilter& f) { f.triggers = {Trigger::kScheduled}; },
       [](const Execution& e) { return e.trigger == Trigger::kScheduled; }},
      {"job+status",
       [](ExecutionFilter& f) {
         f.job = JobName("b");
         f.statuses = {ExecutionStatus::kQueued, ExecutionStatus::kQuarantined};
       },
       [](const Execution& e) {
         return e.job.value == "b" &&
                In(e.status, {ExecutionStatus::kQueued, ExecutionStatus::kQuarantined});
       }},
      {"tenants scope",
       [](ExecutionFilter& f) {
         f.tenants = std::vector<TenantId>{TenantId("t1"), TenantId("t2")};
       },
       [](const Execution& e) { return e.tenant.value == "t1" || e.tenant.value == "t2"; }},
      {"tenant outside the scope",
       [](ExecutionFilter& f) {
         f.tenants = std::vector<TenantId>{TenantId("t1")};
         f.tenant = TenantId("t2");
       },
       [](const Execution&) { return false; }},
      {"empty scope", [](ExecutionFilter& f) { f.tenants = std::vector<TenantId>{}; },
       [](const Execution&) { return false; }},
      {"queued range",
       [&marks](ExecutionFilter& f) {
         f.queued_from = marks[0] + 1;
         f.queued_to = marks[2];
       },
       [&marks](const Execution& e) {
         return e.queued_at >= marks[0] + 1 && e.queued_at < marks[2];
       }},
      {"ended range",
       [&marks](ExecutionFilter& f) {
         f.ended_from = marks[0];
         f.ended_to = marks[2];
       },
       [&marks](const Execution& e) {
         return e.finished_at > 0 && e.finished_at >= marks[0] && e.finished_at < marks[2];
       }},
      {"tenant+status+job+trigger",
       [](ExecutionFilter& f) {
         f.tenant = TenantId("t2");
         f.job = JobName("b");
         f.status = ExecutionStatus::kQueued;
         f.triggers = {Trigger::kApi, Trigger::kScheduled};
       },
       [](const Execution& e) {
         return e.tenant.value == "t2" && e.job.value == "b" &&
                e.status == ExecutionStatus::kQueued;
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ExecutionFilter f;
    f.limit = 4;
    c.set(f);
    const std::vector<std::int64_t> want = Matching(all, c.keep);
    EXPECT_EQ(SearchIds(f), want);
    // Offset pages and their total.
    f.with_total = true;
    f.offset = 3;
    ASSERT_OK_AND_ASSIGN(ExecutionPage page, store().ListExecutions(f));
    std::vector<std::int64_t> expected_page;
    for (std::size_t i = 3; i < want.size() && i < 7; ++i) expected_page.push_back(want[i]);
    EXPECT_EQ(ExecutionIds(page.items), expected_page);
    EXPECT_EQ(page.total, static_cast<std::int64_t>(want.size()));
    EXPECT_FALSE(page.total_is_lower_bound);
    EXPECT_EQ(page.next_before.value != 0, want.size() > 7);
  }
}

TEST_P(StoreConformance, I1_SearchTotalsFromCountersAndCountedTotals) {
  PopulateSearchMix();
  const std::vector<Execution> all = All();
  // Tenant and status criteria only: the counters answer, whatever the cursor.
  ExecutionFilter f;
  f.with_total = true;
  f.limit = 1;
  f.tenants = std::vector<TenantId>{TenantId("t1"), TenantId("")};
  f.statuses = {ExecutionStatus::kQueued, ExecutionStatus::kSucceeded};
  ASSERT_OK_AND_ASSIGN(ExecutionPage page, store().ListExecutions(f));
  const auto want = Matching(all, [](const Execution& e) {
    return (e.tenant.value == "t1" || e.tenant.value.empty()) &&
           In(e.status, {ExecutionStatus::kQueued, ExecutionStatus::kSucceeded});
  });
  EXPECT_EQ(page.total, static_cast<std::int64_t>(want.size()));
  // Counted totals stop at the cap, labelled as a lower bound.
  std::vector<AdmitRequest> many;
  for (int i = 0; i < kListCountCap + 5; ++i) many.push_back(MakeRequest("a", 1000 + i));
  ASSERT_OK(store().AdmitBatch(many));
  ExecutionFilter by_job;
  by_job.job = JobName("a");
  by_job.with_total = true;
  ASSERT_OK_AND_ASSIGN(ExecutionPage capped, store().ListExecutions(by_job));
  EXPECT_EQ(capped.total, kListCountCap);
  EXPECT_TRUE(capped.total_is_lower_bound);
  EXPECT_EQ(capped.items.size(), 50u);
  ExecutionFilter exact = by_job;
  exact.job.reset();
  exact.status = ExecutionStatus::kQueued;
  ASSERT_OK_AND_ASSIGN(ExecutionPage counted, store().ListExecutions(exact));
  EXPECT_GT(counted.total, kListCountCap);
  EXPECT_FALSE(counted.total_is_lower_bound);
}

TEST_P(StoreConformance, I1_SearchBadPagesAreRefused) {
  DefineJob("a");
  ExecutionFilter f;
  f.offset = kMaxListOffset + 1;
  EXPECT_EQ(store().ListExecutions(f).status().code(), ErrorCode::kInvalidArgument);
  f.offset = -1;
  EXPECT_EQ(store().ListExecutions(f).status().code(), ErrorCode::kInvalidArgument);
  f.offset = 0;
  f.limit = 0;
  EXPECT_EQ(store().ListExecutions(f).status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace taskengine
