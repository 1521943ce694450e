// Tests of the domain vocabulary: name rules (product.md §1), enum names and
// their parsers, IsTerminal; and the UTF-8 cut of bounded text fields.
#include "taskengine/types.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/utf8.h"

namespace taskengine {
namespace {

TEST(CutUtf8, NeverSplitsASequence) {
  EXPECT_EQ(CutUtf8("abc", 5), "abc");
  EXPECT_EQ(CutUtf8("abc", 3), "abc");
  EXPECT_EQ(CutUtf8("abcdef", 3), "abc");
  const std::string e_acute =
      "a\xC3\xA9"
      "b";                              // a é b: é is 2 bytes
  EXPECT_EQ(CutUtf8(e_acute, 2), "a");  // would end inside é
  EXPECT_EQ(CutUtf8(e_acute, 3), "a\xC3\xA9");
  const std::string euro = "\xE2\x82\xAC\xE2\x82\xAC";  // two 3-byte signs
  EXPECT_EQ(CutUtf8(euro, 5), "\xE2\x82\xAC");
  EXPECT_EQ(CutUtf8(euro, 2), "");
  EXPECT_EQ(CutUtf8("", 0), "");
}

TEST(JobName, Boundaries) {
  EXPECT_TRUE(IsValidJobName("a"));
  EXPECT_TRUE(IsValidJobName("0"));
  EXPECT_TRUE(IsValidJobName("9lives"));
  EXPECT_TRUE(IsValidJobName("nightly.report_v2-eu"));
  EXPECT_TRUE(IsValidJobName("a._-"));
  EXPECT_TRUE(IsValidJobName(std::string(100, 'x')));
  EXPECT_FALSE(IsValidJobName(std::string(101, 'x')));
  EXPECT_FALSE(IsValidJobName(""));
  // First character: [a-z0-9] only.
  EXPECT_FALSE(IsValidJobName(".a"));
  EXPECT_FALSE(IsValidJobName("_a"));
  EXPECT_FALSE(IsValidJobName("-a"));
  // Nothing outside the alphabet.
  EXPECT_FALSE(IsValidJobName("A"));
  EXPECT_FALSE(IsValidJobName("aB"));
  EXPECT_FALSE(IsValidJobName("a b"));
  EXPECT_FALSE(IsValidJobName("a/b"));
  EXPECT_FALSE(IsValidJobName("a:b"));
  EXPECT_FALSE(IsValidJobName("caf\xC3\xA9"));
  EXPECT_FALSE(IsValidJobName(std::string("a\0b", 3)));
}

TEST(TenantId, Boundaries) {
  EXPECT_TRUE(IsValidTenantId("a"));
  EXPECT_TRUE(IsValidTenantId("store_42-eu"));
  EXPECT_TRUE(IsValidTenantId(std::string(50, 't')));
  EXPECT_FALSE(IsValidTenantId(std::string(51, 't')));
  EXPECT_FALSE(IsValidTenantId(""));
  EXPECT_FALSE(IsValidTenantId("a.b"));  // no dots in tenant ids
  EXPECT_FALSE(IsValidTenantId("_a"));
  EXPECT_FALSE(IsValidTenantId("-a"));
  EXPECT_FALSE(IsValidTenantId("Store"));
  EXPECT_FALSE(IsValidTenantId("a b"));
}

TEST(QueueName, SameRuleAsJobNames) {
  EXPECT_TRUE(IsValidQueueName("default"));
  EXPECT_TRUE(IsValidQueueName("high.priority_1-x"));
  EXPECT_TRUE(IsValidQueueName(std::string(100, 'q')));
  EXPECT_FALSE(IsValidQueueName(std::string(101, 'q')));
  EXPECT_FALSE(IsValidQueueName(""));
  EXPECT_FALSE(IsValidQueueName(".q"));
  EXPECT_FALSE(IsValidQueueName("High"));
  for (const std::string s : {"a", "0.b", "a-", "x_y.z", "-a", "", "A", "a b"}) {
    EXPECT_EQ(IsValidQueueName(s), IsValidJobName(s)) << s;
  }
}

TEST(IdempotencyKey, Boundaries) {
  EXPECT_TRUE(IsValidIdempotencyKey("k"));
  EXPECT_TRUE(IsValidIdempotencyKey("order:1234/ABC_def-~!"));
  EXPECT_TRUE(IsValidIdempotencyKey(std::string(200, 'k')));
  EXPECT_FALSE(IsValidIdempotencyKey(std::string(201, 'k')));
  EXPECT_FALSE(IsValidIdempotencyKey(""));
  // Visible ASCII 0x21..0x7E only: no space, control characters, DEL or non-ASCII.
  EXPECT_TRUE(IsValidIdempotencyKey("\x21"));
  EXPECT_TRUE(IsValidIdempotencyKey("\x7E"));
  EXPECT_FALSE(IsValidIdempotencyKey("a b"));
  EXPECT_FALSE(IsValidIdempotencyKey("a\tb"));
  EXPECT_FALSE(IsValidIdempotencyKey("a\nb"));
  EXPECT_FALSE(IsValidIdempotencyKey("\x7F"));
  EXPECT_FALSE(IsValidIdempotencyKey("\x80"));
  EXPECT_FALSE(IsValidIdempotencyKey("caf\xC3\xA9"));
  EXPECT_FALSE(IsValidIdempotencyKey(std::string("a\0b", 3)));
}

TEST(ExecutionStatusNames, RoundTrip) {
  const std::vector<std::pair<ExecutionStatus, std::string>> all = {
      {ExecutionStatus::kQueued, "queued"},
      {ExecutionStatus::kRunning, "running"},
      {ExecutionStatus::kSucceeded, "succeeded"},
      {ExecutionStatus::kFailed, "failed"},
      {ExecutionStatus::kQuarantined, "quarantined"},
      {ExecutionStatus::kCanceled, "canceled"},
      {ExecutionStatus::kPartiallyCanceled, "partially_canceled"},
  };
  ASSERT_EQ(static_cast<int>(all.size()), kExecutionStatusCount);
  for (const auto& [status, name] : all) {
    EXPECT_EQ(ToString(status), name);
    EXPECT_EQ(ParseExecutionStatus(name), status) << name;
  }
  EXPECT_EQ(ParseExecutionStatus(""), std::nullopt);
  EXPECT_EQ(ParseExecutionStatus("Queued"), std::nullopt);
  EXPECT_EQ(ParseExecutionStatus("cancelled"), std::nullopt);
  EXPECT_EQ(ParseExecutionStatus("queued "), std::nullopt);
}

TEST(FailureClassNames, RoundTrip) {
  const std::vector<std::pair<FailureClass, std::string>> all = {
      {FailureClass::kNone, "none"},
      {FailureClass::kRetryable, "retryable"},
      {FailureClass::kPermanent, "permanent"},
      {FailureClass::kAmbiguous, "ambiguous"},
      {FailureClass::kLeaseExpired, "lease_expired"},
  };
  for (const auto& [c, name] : all) {
    EXPECT_EQ(ToString(c), name);
    EXPECT_EQ(ParseFailureClass(name), c) << name;
  }
  EXPECT_EQ(ParseFailureClass(""), std::nullopt);
  EXPECT_EQ(ParseFailureClass("lease-expired"), std::nullopt);
}

TEST(TriggerNames, RoundTrip) {
  const std::vector<std::pair<Trigger, std::string>> all = {
      {Trigger::kScheduled, "scheduled"}, {Trigger::kManual, "manual"}, {Trigger::kApi, "api"},
      {Trigger::kRetry, "retry"},         {Trigger::kReplay, "replay"},
  };
  for (const auto& [t, name] : all) {
    EXPECT_EQ(ToString(t), name);
    EXPECT_EQ(ParseTrigger(name), t) << name;
  }
  EXPECT_EQ(ParseTrigger("API"), std::nullopt);
  EXPECT_EQ(ParseTrigger(""), std::nullopt);
}

TEST(JobScopeNames, RoundTrip) {
  EXPECT_EQ(ToString(JobScope::kGlobal), "global");
  EXPECT_EQ(ToString(JobScope::kPerTenant), "per_tenant");
  EXPECT_EQ(ParseJobScope("global"), JobScope::kGlobal);
  EXPECT_EQ(ParseJobScope("per_tenant"), JobScope::kPerTenant);
  EXPECT_EQ(ParseJobScope("per-tenant"), std::nullopt);
  EXPECT_EQ(ParseJobScope(""), std::nullopt);
}

TEST(LogLevelNames, RoundTrip) {
  const std::vector<std::pair<LogLevel, std::string>> all = {
      {LogLevel::kDebug, "debug"},
      {LogLevel::kInfo, "info"},
      {LogLevel::kWarn, "warn"},
      {LogLevel::kError, "error"},
  };
  for (const auto& [l, name] : all) {
    EXPECT_EQ(ToString(l), name);
    EXPECT_EQ(ParseLogLevel(name), l) << name;
  }
  EXPECT_EQ(ParseLogLevel("warning"), std::nullopt);
  EXPECT_EQ(ParseLogLevel("INFO"), std::nullopt);
}

TEST(ExecutionStatusNames, AreDistinct) {
  for (int a = 0; a < kExecutionStatusCount; ++a) {
    for (int b = a + 1; b < kExecutionStatusCount; ++b) {
      EXPECT_NE(ToString(static_cast<ExecutionStatus>(a)),
                ToString(static_cast<ExecutionStatus>(b)));
    }
  }
}

TEST(IsTerminal, OnlyQueuedAndRunningAreLive) {
  EXPECT_FALSE(IsTerminal(ExecutionStatus::kQueued));
  EXPECT_FALSE(IsTerminal(ExecutionStatus::kRunning));
  EXPECT_TRUE(IsTerminal(ExecutionStatus::kSucceeded));
  EXPECT_TRUE(IsTerminal(ExecutionStatus::kFailed));
  EXPECT_TRUE(IsTerminal(ExecutionStatus::kQuarantined));
  EXPECT_TRUE(IsTerminal(ExecutionStatus::kCanceled));
  EXPECT_TRUE(IsTerminal(ExecutionStatus::kPartiallyCanceled));
}

TEST(Execution, DurationMillis) {
  Execution e;
  EXPECT_EQ(e.DurationMillis(), 0);
  e.started_at = 1000;
  EXPECT_EQ(e.DurationMillis(), 0);  // not finished
  e.finished_at = 1500;
  EXPECT_EQ(e.DurationMillis(), 500);
  e.finished_at = 900;
  EXPECT_EQ(e.DurationMillis(), 0);  // clock went backwards: no negative durations
}

TEST(RetryPolicy, DefaultsMatchTheSpec) {
  const RetryPolicy p;
  EXPECT_EQ(p.max_attempts, 5);
  EXPECT_EQ(p.backoff_base_ms, 5'000);
  EXPECT_EQ(p.backoff_cap_ms, 3'600'000);
  EXPECT_EQ(p.max_ambiguous_attempts, 1);
  EXPECT_EQ(p.max_consecutive_lease_expiries, 3);
}

}  // namespace
}  // namespace taskengine
