// Drill RD7 (quality.md §2, C1, C2): cancel while running before any effect
// -> `canceled`; cancel after the notice was sent -> `partially_canceled`,
// and execution:show lists the escaped notice with its time. A third case
// cancels right before the script reserves its effect: the ledger answers
// `canceled` (exit 13), the script starts nothing, the execution ends
// `canceled`. A quarantined execution whose effect was reserved and never
// confirmed ends `partially_canceled` when canceled, the reservation listed
// among the escaped effects as `reserved` (its outcome is unknown).
#include "drill_support.h"

namespace taskengine::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

// Shell: reserves countable effect `name` (exit 75 unless `proceed`), waits
// for the test's go, then performs and commits it.
std::string ReserveThenCommitAfterGo(const DrillFiles& f, const std::string& name) {
  return R"(answer=$("$TASKENGINE_BIN" effect:reserve )" + name + R"(); rc=$?
echo ")" +
         name +
         R"( $TASKENGINE_EXECUTION_ID $TASKENGINE_CLAIM_VERSION ${answer:-error} $rc" >> ')" +
         f.answers() + "'\n[ $rc -eq 0 ] || exit 75\n" + WaitForGo(f) +
         "echo \"$TASKENGINE_EXECUTION_ID\" >> '" + f.Effects(name) + R"('
"$TASKENGINE_BIN" effect:commit )" +
         name + R"( --detail "$TASKENGINE_EXECUTION_ID-)" + name +
         R"(" > /dev/null || exit 75
exit 0
)";
}

std::string DrillConfig(const DrillFiles& f) {
  // Short leases (heartbeat every 500 ms) so a running script learns of the
  // cancellation quickly; the "at-reserve" job heartbeats only every 20 s, so
  // the effect reservation is where it learns.
  const std::string keys =
      "timeout_ms = 30000\nmax_attempts = 3\nbackoff_base_ms = 50\n"
      "backoff_cap_ms = 100\n";
  return EngineSection(3) +
         ShellJob("before-effect",
                  StartLine(f) + WaitForGo(f) + CountableEffect(f, "notice") + "exit 0\n",
                  keys + "lease_ms = 1500\n") +
         ShellJob("after-effect",
                  StartLine(f) + CountableEffect(f, "notice") + WaitForGo(f) + "exit 0\n",
                  keys + "lease_ms = 1500\n") +
         ShellJob("at-reserve",
                  StartLine(f) + WaitForGo(f) + CountableEffect(f, "notice") + "exit 0\n",
                  keys + "lease_ms = 60000\n") +
         // Reserves its notice, waits, then sends and commits it and exits 0
         // before its next heartbeat (20 s away): it never hears of a cancel
         // that came while it waited.
         ShellJob("commit-after-cancel", StartLine(f) + ReserveThenCommitAfterGo(f, "notice"),
                  keys + "lease_ms = 60000\n") +
         ShellJob("succeed-after-cancel", StartLine(f) + WaitForGo(f) + "exit 0\n",
                  keys + "lease_ms = 60000\n") +
         // Reserves its notice and ends without confirming it (exit 76: the
         // outcome is unknown): quarantined as ambiguous, the reservation open.
         ShellJob("unconfirmed",
                  StartLine(f) +
                      "\"$TASKENGINE_BIN\" effect:reserve notice > /dev/null || exit 75\nexit 76\n",
                  keys + "lease_ms = 60000\n");
}

class Rd7Drill : public ::testing::Test {
 protected:
  Rd7Drill() : te_(DrillConfig(files_)) {}

  void SetUp() override {
    ASSERT_EQ(te_.Run({"migrate"}).exit_code, 0);
    ASSERT_NO_FATAL_FAILURE(te_.StartServe(&serve_));
    ASSERT_TRUE(te_.WaitServing(1, milliseconds(15'000))) << ReadFile(te_.serve_log());
  }
  void TearDown() override { StopServe(&serve_); }

  // Waits until the script of `id` has started.
  bool WaitStarted(std::int64_t id) {
    return WaitUntil(milliseconds(15'000), [&] {
      for (const std::string& line : ReadLines(files_.started())) {
        if (std::stoll(line) == id) return true;
      }
      return false;
    });
  }

  nlohmann::json WaitTerminal(std::int64_t id) {
    nlohmann::json j;
    EXPECT_TRUE(WaitExecution(
        te_, id, milliseconds(15'000),
        [](const nlohmann::json& e) { return IsTerminalStatus(e["status"].get<std::string>()); },
        &j))
        << j.dump() << "\nserve log:\n"
        << ReadFile(te_.serve_log());
    return j;
  }

  DrillFiles files_;
  TaskengineInstall te_;
  ChildProcess serve_;
};

TEST_F(Rd7Drill, CancelBeforeAnyEffectEndsCanceled) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t id = DispatchJob(te_, "before-effect");
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitStarted(id)) << ReadFile(te_.serve_log());
  ProcessResult cancel =
      te_.Run({"execution:cancel", std::to_string(id), "--reason", "customer withdrew"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.Describe();
  EXPECT_THAT(cancel.out, HasSubstr("cancel requested (running)"));
  const auto t_cancel = std::chrono::steady_clock::now();
  nlohmann::json j = WaitTerminal(id);
  const long long cancel_ms = MillisSince(t_cancel);
  EXPECT_EQ(j["status"], "canceled") << j.dump();
  EXPECT_TRUE(j["effects"].empty());
  EXPECT_TRUE(j["escaped_effects"].empty());
  ExpectInvariants(te_, files_, {id}, {{id, 0}});
  files_.Go(id);  // nothing may happen after the cancellation, even if the script were alive
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_TRUE(ReadLines(files_.Effects()).empty());
  ProcessResult show = te_.Run({"execution:show", std::to_string(id)});
  EXPECT_THAT(show.out, ContainsRegex("status +canceled"));
  EXPECT_THAT(show.out, HasSubstr("effects (0)"));
  EXPECT_THAT(show.out, ::testing::Not(HasSubstr("escaped effects")));
  std::printf(
      "[ measure ] RD7 before the effect: canceled %lld ms after the cancel; case %lld ms\n",
      cancel_ms, MillisSince(t0));
}

TEST_F(Rd7Drill, CancelAfterTheNoticeEndsPartiallyCanceledWithTheEscapedNotice) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t id = DispatchJob(te_, "after-effect");
  ASSERT_GT(id, 0);
  nlohmann::json j;
  ASSERT_TRUE(WaitExecution(
      te_, id, milliseconds(15'000),
      [](const nlohmann::json& e) {
        return !e["effects"].empty() && e["effects"][0]["state"] == "committed";
      },
      &j))
      << j.dump();
  EXPECT_EQ(j["status"], "running");
  const std::string committed_at = j["effects"][0]["committed_at"].get<std::string>();
  ProcessResult cancel = te_.Run({"execution:cancel", std::to_string(id)});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.Describe();
  j = WaitTerminal(id);
  EXPECT_EQ(j["status"], "partially_canceled") << j.dump();
  ASSERT_EQ(j["escaped_effects"].size(), 1u) << j.dump();
  const nlohmann::json& escaped = j["escaped_effects"][0];
  EXPECT_EQ(escaped["key"], std::to_string(id) + ":notice");
  EXPECT_EQ(escaped["committed_at"], committed_at);
  EXPECT_EQ(escaped["detail"], std::to_string(id) + "-notice");
  ExpectInvariants(te_, files_, {id}, {{id, 1}});

  ProcessResult show = te_.Run({"execution:show", std::to_string(id)});
  ASSERT_EQ(show.exit_code, 0) << show.Describe();
  EXPECT_THAT(show.out, ContainsRegex("status +partially_canceled"));
  EXPECT_THAT(show.out, HasSubstr("escaped effects (1)"));
  EXPECT_THAT(show.out, HasSubstr(std::to_string(id) + ":notice  committed at " + committed_at));
  EXPECT_THAT(show.out, ContainsRegex("execution.cancel_requested"));
  std::printf("[ measure ] RD7 after the notice: case %lld ms\n", MillisSince(t0));
}

TEST_F(Rd7Drill, CancelBeforeTheReservationIsAnsweredCanceled) {
  const std::int64_t id = DispatchJob(te_, "at-reserve");
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitStarted(id)) << ReadFile(te_.serve_log());
  ASSERT_EQ(te_.Run({"execution:cancel", std::to_string(id)}).exit_code, 0);
  files_.Go(id);
  nlohmann::json j = WaitTerminal(id);
  EXPECT_EQ(j["status"], "canceled") << j.dump();
  EXPECT_EQ(Answers(files_, "notice", id),
            (std::vector<std::pair<std::int64_t, std::string>>{{1, "canceled"}}));
  ExpectInvariants(te_, files_, {id}, {{id, 0}});
}

// C1: the cancel comes while the script holds its reserved notice; the script
// never checks again, sends and commits the notice and exits 0. The success
// does not hide the cancel: partially_canceled, the notice listed as escaped.
TEST_F(Rd7Drill, HandlerThatCommitsAndSucceedsAfterTheCancelEndsPartiallyCanceled) {
  const std::int64_t id = DispatchJob(te_, "commit-after-cancel");
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitUntil(milliseconds(15'000), [&] {
    return !Answers(files_, "notice", id).empty();
  })) << ReadFile(te_.serve_log());
  ASSERT_EQ(Answers(files_, "notice", id),
            (std::vector<std::pair<std::int64_t, std::string>>{{1, "proceed"}}));
  ProcessResult cancel = te_.Run({"execution:cancel", std::to_string(id)});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.Describe();
  EXPECT_THAT(cancel.out, HasSubstr("cancel requested (running)"));
  files_.Go(id);
  nlohmann::json j = WaitTerminal(id);
  EXPECT_EQ(j["status"], "partially_canceled") << j.dump();
  EXPECT_EQ(j["cancel_requested"], true) << j.dump();
  ASSERT_EQ(j["escaped_effects"].size(), 1u) << j.dump();
  EXPECT_EQ(j["escaped_effects"][0]["key"], std::to_string(id) + ":notice");
  EXPECT_EQ(j["escaped_effects"][0]["detail"], std::to_string(id) + "-notice");
  ExpectInvariants(te_, files_, {id}, {{id, 1}});
  ProcessResult show = te_.Run({"execution:show", std::to_string(id)});
  EXPECT_THAT(show.out, ContainsRegex("status +partially_canceled"));
  EXPECT_THAT(show.out, HasSubstr("escaped effects (1)"));
}

// C1: a handler with no effect that exits 0 after the cancel was requested
// ends canceled, not succeeded.
TEST_F(Rd7Drill, HandlerThatSucceedsAfterTheCancelWithoutEffectsEndsCanceled) {
  const std::int64_t id = DispatchJob(te_, "succeed-after-cancel");
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitStarted(id)) << ReadFile(te_.serve_log());
  ASSERT_EQ(te_.Run({"execution:cancel", std::to_string(id)}).exit_code, 0);
  files_.Go(id);
  nlohmann::json j = WaitTerminal(id);
  EXPECT_EQ(j["status"], "canceled") << j.dump();
  EXPECT_TRUE(j["escaped_effects"].empty()) << j.dump();
  ExpectInvariants(te_, files_, {id}, {{id, 0}});
}

TEST_F(Rd7Drill, CancelOfAnAmbiguousExecutionListsTheUnconfirmedEffectAsEscaped) {
  const std::int64_t id = DispatchJob(te_, "unconfirmed");
  ASSERT_GT(id, 0);
  nlohmann::json j = WaitTerminal(id);
  ASSERT_EQ(j["status"], "quarantined") << j.dump();
  EXPECT_EQ(j["failure_class"], "ambiguous") << j.dump();
  ASSERT_EQ(j["effects"].size(), 1u) << j.dump();
  EXPECT_EQ(j["effects"][0]["state"], "reserved");

  ProcessResult cancel = te_.Run({"execution:cancel", std::to_string(id), "--reason", "give up"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.Describe();
  j = ShowJson(te_, id);
  EXPECT_EQ(j["status"], "partially_canceled") << j.dump();
  ASSERT_EQ(j["escaped_effects"].size(), 1u) << j.dump();
  EXPECT_EQ(j["escaped_effects"][0]["key"], std::to_string(id) + ":notice");
  EXPECT_EQ(j["escaped_effects"][0]["state"], "reserved");
  EXPECT_TRUE(j["escaped_effects"][0]["committed_at"].is_null());

  ProcessResult show = te_.Run({"execution:show", std::to_string(id)});
  ASSERT_EQ(show.exit_code, 0) << show.Describe();
  EXPECT_THAT(show.out, HasSubstr("escaped effects (1)"));
  EXPECT_THAT(show.out, ContainsRegex(std::to_string(id) +
                                      ":notice  reserved at [0-9T:.Z-]+, never confirmed: outcome "
                                      "unknown"));
}

}  // namespace
}  // namespace taskengine::testing
