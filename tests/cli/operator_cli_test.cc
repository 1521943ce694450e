// Process-level tests of the operator verbs of the `taskengine` binary
// (execution:cancel|replay|approve, quarantine:list, lane:status, audit:list,
// grant:add|revoke) and of the effect verbs that `command` job scripts call
// (effect:reserve|commit|release), against a throwaway database and, where
// work must run, a real `serve` child process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>

#include "drill_support.h"

namespace taskengine::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr milliseconds kRunTimeout{20'000};

// Runs every effect verb once from inside a job and records "<step> <exit
// code> <stdout>" lines in <dir>/verbs.txt.
std::string VerbsScript(const DrillFiles& f) {
  const std::string out = "'" + f.dir() + "/verbs.txt'";
  return R"(te="$TASKENGINE_BIN"
echo "env $TASKENGINE_BIN $TASKENGINE_DB" >> )" +
         out + R"(
r=$("$te" effect:reserve notice); echo "reserve $? $r" >> )" +
         out + R"(
r=$("$te" effect:reserve notice); echo "reserve-again $? $r" >> )" +
         out + R"(
r=$("$te" effect:commit notice --detail msg-1); echo "commit $? $r" >> )" +
         out + R"(
r=$("$te" effect:commit notice --detail msg-2); echo "commit-again $? $r" >> )" +
         out + R"(
r=$("$te" effect:reserve notice); echo "reserve-done $? $r" >> )" +
         out + R"(
"$te" --json effect:reserve notice > ')" +
         f.dir() + R"(/reserve.json'; echo "reserve-json $?" >> )" + out + R"(
r=$("$te" effect:commit never 2>/dev/null); echo "commit-unreserved $? $r" >> )" +
         out + R"(
r=$("$te" effect:reserve draft); echo "reserve-draft $? $r" >> )" +
         out + R"(
r=$("$te" effect:release draft); echo "release $? $r" >> )" +
         out + R"(
r=$("$te" effect:reserve 'bad name' 2>/dev/null); echo "bad-name $? $r" >> )" +
         out + R"(
exit 0
)";
}

// Reserves "notice"; the first claim "loses the connection" after the
// reservation (exit 75, nothing performed, nothing committed), so the retry
// meets `ambiguous` and exits 76.
std::string FlakySinkScript(const DrillFiles& f) {
  return StartLine(f) + R"(answer=$("$TASKENGINE_BIN" effect:reserve notice); rc=$?
echo "notice $id $v ${answer:-error} $rc" >> ')" +
         f.answers() + R"('
case $rc in
  0) if [ "$v" = 1 ]; then echo "connection reset before the confirmation" >&2; exit 75; fi
     echo "$id" >> ')" +
         f.Effects() + R"('
     "$TASKENGINE_BIN" effect:commit notice --detail sent > /dev/null || exit 75 ;;
  10) ;;
  11) echo "notice: outcome unknown" >&2; exit 76 ;;
  *) exit 75 ;;
esac
)";
}

std::string Config(const DrillFiles& f, bool four_eyes) {
  const std::string fast = "max_attempts = 5\nbackoff_base_ms = 50\nbackoff_cap_ms = 100\n";
  return EngineSection(2, 100, 100, "full", four_eyes ? "replay_requires_approval = true\n" : "") +
         ShellJob("noop", "exit 0\n") +
         ShellJob("broken", "echo 'bad input' >&2\nexit 65\n", fast) +
         ShellJob("verbs", VerbsScript(f), fast) + ShellJob("flaky-sink", FlakySinkScript(f), fast);
}

class OperatorCliTest : public ::testing::Test {
 protected:
  OperatorCliTest() : te_(Config(files_, /*four_eyes=*/false)) {}

  void SetUp() override {
    ProcessResult r = te_.Run({"migrate"});
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  }

  void StartServe() {
    ASSERT_NO_FATAL_FAILURE(te_.StartServe(&serve_));
    ASSERT_TRUE(te_.WaitServing(1, milliseconds(15'000))) << ReadFile(te_.serve_log());
  }

  nlohmann::json WaitTerminal(std::int64_t id) {
    nlohmann::json j;
    EXPECT_TRUE(WaitExecution(
        te_, id, kRunTimeout,
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

TEST_F(OperatorCliTest, HelpListsTheVerbsAndTheEffectExitCodes) {
  ProcessResult help = te_.Run({"--help"});
  ASSERT_EQ(help.exit_code, 0) << help.Describe();
  for (const char* verb : {"execution:cancel", "execution:replay", "execution:approve",
                           "quarantine:list", "lane:status", "audit:list", "grant:add",
                           "grant:revoke", "effect:reserve", "effect:commit", "effect:release"}) {
    EXPECT_THAT(help.out, HasSubstr(verb));
    ProcessResult verb_help = te_.Run({verb, "--help"});
    EXPECT_EQ(verb_help.exit_code, 0) << verb << ": " << verb_help.Describe();
    EXPECT_THAT(verb_help.out, HasSubstr("Usage")) << verb;
  }
  EXPECT_THAT(help.out, HasSubstr("10 already_done, 11 ambiguous"));
  EXPECT_THAT(help.out, HasSubstr("12 stale, 13 canceled"));
  ProcessResult reserve_help = te_.Run({"effect:reserve", "--help"});
  EXPECT_THAT(reserve_help.out, HasSubstr("TASKENGINE_EXECUTION_ID"));
  ProcessResult replay_help = te_.Run({"execution:replay", "--help"});
  EXPECT_THAT(replay_help.out, HasSubstr("--assume-done"));
  EXPECT_THAT(replay_help.out, HasSubstr("--as"));
}

TEST_F(OperatorCliTest, CancelOfAQueuedExecutionIsImmediateAndAudited) {
  const std::int64_t id = DispatchJob(te_, "noop");
  ASSERT_GT(id, 0);
  ProcessResult r = te_.Run({"execution:cancel", std::to_string(id), "--reason", "wrong tenant"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.out, "execution " + std::to_string(id) + ": canceled\n");

  nlohmann::json j = ShowJson(te_, id);
  EXPECT_EQ(j["status"], "canceled");
  EXPECT_EQ(j["cancel_requested"], true);
  EXPECT_TRUE(j["escaped_effects"].empty());
  ASSERT_EQ(j["audit"].size(), 1u) << j.dump();
  EXPECT_EQ(j["audit"][0]["action"], "execution.cancel");
  EXPECT_EQ(j["audit"][0]["reason"], "wrong tenant");
  EXPECT_THAT(j["audit"][0]["actor"].get<std::string>(), StartsWith("cli:"));

  ProcessResult show = te_.Run({"execution:show", std::to_string(id)});
  EXPECT_THAT(show.out, ContainsRegex("cancel requested +yes"));
  EXPECT_THAT(show.out, ContainsRegex("execution.cancel +wrong tenant"));

  // The action is illegal now: a conflict, and no second audit record.
  ProcessResult again = te_.Run({"execution:cancel", std::to_string(id)});
  EXPECT_EQ(again.exit_code, 4) << again.Describe();
  EXPECT_THAT(again.err, StartsWith("taskengine: "));
  EXPECT_THAT(again.err, HasSubstr("canceled"));
  ProcessResult missing = te_.Run({"execution:cancel", "99999"});
  EXPECT_EQ(missing.exit_code, 2) << missing.Describe();
  ProcessResult bad = te_.Run({"execution:cancel", "-3"});
  EXPECT_EQ(bad.exit_code, 1) << bad.Describe();

  nlohmann::json audit = te_.RunJson({"audit:list", "--target", "execution:" + std::to_string(id)});
  ASSERT_TRUE(audit.is_object());
  EXPECT_EQ(audit["items"].size(), 1u) << audit.dump();
  EXPECT_TRUE(audit["next_cursor"].is_null());
  nlohmann::json json_cancel =
      te_.RunJson({"execution:cancel", std::to_string(DispatchJob(te_, "noop"))});
  EXPECT_EQ(json_cancel["status"], "canceled");
}

TEST_F(OperatorCliTest, ReplayAndApproveRefuseBadRequestsClearly) {
  const std::int64_t id = DispatchJob(te_, "noop");
  ASSERT_GT(id, 0);
  const std::string sid = std::to_string(id);
  ProcessResult queued = te_.Run({"execution:replay", sid, "--reason", "again"});
  EXPECT_EQ(queued.exit_code, 4) << queued.Describe();
  ProcessResult no_reason = te_.Run({"execution:replay", sid});
  EXPECT_EQ(no_reason.exit_code, 1) << no_reason.Describe();
  EXPECT_THAT(no_reason.err, HasSubstr("--reason"));
  ProcessResult both =
      te_.Run({"execution:replay", sid, "--reason", "x", "--assume-done", "--assume-not-done"});
  EXPECT_EQ(both.exit_code, 1) << both.Describe();
  ProcessResult bad_as = te_.Run({"execution:replay", sid, "--reason", "x", "--as", "two words"});
  EXPECT_EQ(bad_as.exit_code, 1) << bad_as.Describe();
  EXPECT_THAT(bad_as.err, HasSubstr("--as"));
  ProcessResult missing = te_.Run({"execution:replay", "99999", "--reason", "x"});
  EXPECT_EQ(missing.exit_code, 2) << missing.Describe();
  ProcessResult nothing_pending = te_.Run({"execution:approve", sid, "--as", "bob"});
  EXPECT_EQ(nothing_pending.exit_code, 2) << nothing_pending.Describe();
  EXPECT_THAT(nothing_pending.err, HasSubstr("no replay"));
  // None of these wrote an audit record.
  nlohmann::json audit = te_.RunJson({"audit:list"});
  EXPECT_TRUE(audit["items"].empty()) << audit.dump();
  ProcessResult empty = te_.Run({"audit:list"});
  EXPECT_EQ(empty.out, "no audit records\n");
}

TEST_F(OperatorCliTest, LaneStatusShowsHeadsCountsAndBlockedLanes) {
  ProcessResult none = te_.Run({"lane:status"});
  ASSERT_EQ(none.exit_code, 0) << none.Describe();
  EXPECT_EQ(none.out, "no lanes with open work\n");

  std::vector<std::int64_t> doc7;
  for (int i = 0; i < 3; ++i) {
    nlohmann::json j = te_.RunJson({"job:dispatch", "noop", "--lane", "doc:7"});
    doc7.push_back(j.value("id", std::int64_t{0}));
  }
  nlohmann::json doc8 = te_.RunJson({"job:dispatch", "noop", "--lane", "doc:8"});

  nlohmann::json one = te_.RunJson({"lane:status", "doc:7"});
  ASSERT_EQ(one["items"].size(), 1u) << one.dump();
  EXPECT_EQ(one["items"][0]["lane"], "doc:7");
  EXPECT_EQ(one["items"][0]["head"], doc7[0]);
  EXPECT_EQ(one["items"][0]["head_status"], "queued");
  EXPECT_EQ(one["items"][0]["blocked"], false);
  EXPECT_EQ(one["items"][0]["queued"], 3);
  EXPECT_EQ(one["items"][0]["running"], 0);

  nlohmann::json all = te_.RunJson({"lane:status"});
  ASSERT_EQ(all["items"].size(), 2u) << all.dump();
  ProcessResult table = te_.Run({"lane:status"});
  EXPECT_THAT(table.out, ContainsRegex("LANE +HEAD +HEAD STATUS +BLOCKED +QUEUED +RUNNING"));
  EXPECT_THAT(table.out, ContainsRegex("doc:7 +" + std::to_string(doc7[0]) + " +queued +no +3 +0"));

  // Canceling the head hands the lane to the next member, in id order.
  ASSERT_EQ(te_.Run({"execution:cancel", std::to_string(doc7[0])}).exit_code, 0);
  one = te_.RunJson({"lane:status", "doc:7"});
  EXPECT_EQ(one["items"][0]["head"], doc7[1]) << one.dump();
  EXPECT_EQ(one["items"][0]["queued"], 2);

  nlohmann::json unknown = te_.RunJson({"lane:status", "doc:404"});
  EXPECT_TRUE(unknown["items"][0]["head"].is_null()) << unknown.dump();
  EXPECT_GT(doc8.value("id", 0), 0);
}

TEST_F(OperatorCliTest, GrantAddAndRevokeAreIdempotentAndAudited) {
  ProcessResult add = te_.Run({"grant:add", "alice", "acme"});
  ASSERT_EQ(add.exit_code, 0) << add.Describe();
  EXPECT_EQ(add.out, "granted alice access to tenant acme\n");
  ASSERT_EQ(te_.Run({"grant:add", "alice", "acme"}).exit_code, 0) << "idempotent";
  nlohmann::json all = te_.RunJson({"grant:add", "alice", "*"});
  EXPECT_EQ(all["tenant"], "*");
  EXPECT_EQ(all["effective"], true);
  ProcessResult revoke = te_.Run({"grant:revoke", "alice", "acme"});
  ASSERT_EQ(revoke.exit_code, 0) << revoke.Describe();
  EXPECT_THAT(revoke.out, HasSubstr("access remains through the grant for every tenant (*)"));
  nlohmann::json gone = te_.RunJson({"grant:revoke", "alice", "*"});
  EXPECT_EQ(gone["effective"], false) << gone.dump();
  ProcessResult bad = te_.Run({"grant:add", "alice", "Not A Tenant"});
  EXPECT_EQ(bad.exit_code, 1) << bad.Describe();
  EXPECT_THAT(bad.err, HasSubstr("Not A Tenant"));
  ProcessResult missing_arg = te_.Run({"grant:add", "alice"});
  EXPECT_EQ(missing_arg.exit_code, 1) << missing_arg.Describe();

  nlohmann::json audit = te_.RunJson({"audit:list", "--target", "principal:alice"});
  ASSERT_EQ(audit["items"].size(), 5u) << audit.dump();
  EXPECT_EQ(audit["items"][0]["action"], "grant.revoke");
  EXPECT_EQ(audit["items"][0]["before"]["tenant"], "*");
  EXPECT_EQ(audit["items"][4]["action"], "grant.add");
  EXPECT_EQ(audit["items"][4]["tenant"], "acme");
  // Pages of two, newest first, through the cursor.
  nlohmann::json page = te_.RunJson({"audit:list", "--limit", "2"});
  ASSERT_EQ(page["items"].size(), 2u);
  ASSERT_TRUE(page["next_cursor"].is_string()) << page.dump();
  nlohmann::json next = te_.RunJson(
      {"audit:list", "--limit", "2", "--before", page["next_cursor"].get<std::string>()});
  ASSERT_EQ(next["items"].size(), 2u);
  EXPECT_LT(next["items"][0]["id"].get<int>(), page["items"][1]["id"].get<int>());
  ProcessResult table = te_.Run({"audit:list", "--limit", "2"});
  EXPECT_THAT(table.out, ContainsRegex("ID +AT +ACTOR +ACTION +TARGET +TENANT +REASON"));
  EXPECT_THAT(table.out, HasSubstr("more: --before="));
}

TEST_F(OperatorCliTest, EffectVerbsOutsideACommandJobFailClearly) {
  ProcessResult no_env = te_.Run({"effect:reserve", "notice"});
  EXPECT_EQ(no_env.exit_code, 1) << no_env.Describe();
  EXPECT_THAT(no_env.err, HasSubstr("TASKENGINE_EXECUTION_ID is not set"));
  EXPECT_TRUE(no_env.out.empty());
  ProcessResult no_version =
      te_.Run({"effect:commit", "notice"}, "", {"TASKENGINE_EXECUTION_ID=1"});
  EXPECT_EQ(no_version.exit_code, 1) << no_version.Describe();
  EXPECT_THAT(no_version.err, HasSubstr("TASKENGINE_CLAIM_VERSION"));
  const std::vector<std::string> lease = {"TASKENGINE_EXECUTION_ID=99999",
                                          "TASKENGINE_CLAIM_VERSION=1"};
  ProcessResult missing = te_.Run({"effect:reserve", "notice"}, "", lease);
  EXPECT_EQ(missing.exit_code, 2) << missing.Describe();
  ProcessResult bad_name = te_.Run({"effect:reserve", "no spaces"}, "", lease);
  EXPECT_EQ(bad_name.exit_code, 1) << bad_name.Describe();
  EXPECT_THAT(bad_name.err, HasSubstr("effect name"));

  // A queued execution has no current claim: every call is stale.
  const std::int64_t id = DispatchJob(te_, "noop");
  const std::vector<std::string> queued = {"TASKENGINE_EXECUTION_ID=" + std::to_string(id),
                                           "TASKENGINE_CLAIM_VERSION=1"};
  for (const char* verb : {"effect:reserve", "effect:commit", "effect:release"}) {
    ProcessResult r = te_.Run({verb, "notice"}, "", queued);
    EXPECT_EQ(r.exit_code, 12) << verb << ": " << r.Describe();
    EXPECT_EQ(r.out, "stale\n") << verb;
  }
  // TASKENGINE_DB finds the database without --db or a config.
  ProcessResult via_env = RunProcess(
      {TASKENGINE_BIN, "effect:reserve", "notice"}, "", kCliTimeout,
      ChildEnvironment({"TASKENGINE_DB=" + te_.db_path(), queued[0], queued[1]}), files_.dir());
  EXPECT_EQ(via_env.exit_code, 12) << via_env.Describe();
}

// Every effect verb from inside a running `command` job, with the variables
// the server sets.
TEST_F(OperatorCliTest, EffectVerbsInsideACommandJob) {
  ASSERT_NO_FATAL_FAILURE(StartServe());
  const std::int64_t id = DispatchJob(te_, "verbs");
  ASSERT_GT(id, 0);
  nlohmann::json j = WaitTerminal(id);
  EXPECT_EQ(j["status"], "succeeded") << j.dump();

  std::map<std::string, std::string> steps;
  for (const std::string& line : ReadLines(files_.dir() + "/verbs.txt")) {
    const std::size_t space = line.find(' ');
    steps[line.substr(0, space)] = line.substr(space + 1);
  }
  EXPECT_EQ(steps["env"], std::filesystem::canonical(TASKENGINE_BIN).string() + " " +
                              std::filesystem::absolute(te_.db_path()).string());
  EXPECT_EQ(steps["reserve"], "0 proceed");
  EXPECT_EQ(steps["reserve-again"], "0 proceed") << "the same claim may reserve again";
  EXPECT_EQ(steps["commit"], "0 committed");
  EXPECT_EQ(steps["commit-again"], "0 committed") << "commit is idempotent";
  EXPECT_EQ(steps["reserve-done"], "10 already_done");
  EXPECT_EQ(steps["reserve-json"], "10");
  EXPECT_EQ(steps["commit-unreserved"], "4 ");
  EXPECT_EQ(steps["reserve-draft"], "0 proceed");
  EXPECT_EQ(steps["release"], "0 released");
  EXPECT_EQ(steps["bad-name"], "1 ");

  nlohmann::json reply =
      nlohmann::json::parse(ReadFile(files_.dir() + "/reserve.json"), nullptr, false);
  ASSERT_TRUE(reply.is_object()) << ReadFile(files_.dir() + "/reserve.json");
  EXPECT_EQ(reply["answer"], "already_done");
  EXPECT_EQ(reply["key"], std::to_string(id) + ":notice");
  EXPECT_EQ(reply["detail"], "msg-1") << "the first detail stays";
  EXPECT_TRUE(reply["committed_at"].is_string());

  int committed = 0;
  for (const auto& e : j["effects"]) {
    if (e["state"] == "committed") {
      ++committed;
      EXPECT_EQ(e["key"], std::to_string(id) + ":notice");
      EXPECT_EQ(e["detail"], "msg-1");
    }
  }
  EXPECT_EQ(committed, 1) << j["effects"].dump();
  ProcessResult show = te_.Run({"execution:show", std::to_string(id)});
  EXPECT_THAT(show.out, ContainsRegex(std::to_string(id) + ":notice +committed .* 1 +msg-1"));
  StopServe(&serve_);
}

// Exit 76 from a script is `ambiguous`: quarantined at once (bound 1). A
// replay makes the operator say what happened to the unconfirmed effect.
TEST_F(OperatorCliTest, AmbiguousEffectIsQuarantinedAndReplayResolvesIt) {
  ASSERT_NO_FATAL_FAILURE(StartServe());
  const std::int64_t not_done = DispatchJob(te_, "flaky-sink");
  const std::int64_t done = DispatchJob(te_, "flaky-sink");
  ASSERT_GT(done, 0);
  for (std::int64_t id : {not_done, done}) {
    nlohmann::json j = WaitTerminal(id);
    EXPECT_EQ(j["status"], "quarantined") << j.dump();
    EXPECT_EQ(j["failure_class"], "ambiguous");
    EXPECT_THAT(j["error"].get<std::string>(), HasSubstr("exit code 76"));
    EXPECT_THAT(j["error"].get<std::string>(), HasSubstr("notice: outcome unknown"));
    EXPECT_EQ(j["attempt"], 2);
    EXPECT_EQ(Answers(files_, "notice", id), (std::vector<std::pair<std::int64_t, std::string>>{
                                                 {1, "proceed"}, {2, "ambiguous"}}));
  }
  nlohmann::json quarantined = te_.RunJson({"quarantine:list", "--job", "flaky-sink"});
  ASSERT_EQ(quarantined["items"].size(), 2u) << quarantined.dump();
  EXPECT_EQ(quarantined["items"][0]["id"], done) << "newest first";
  ProcessResult table = te_.Run({"quarantine:list"});
  EXPECT_THAT(table.out, ContainsRegex(std::to_string(done) + " +flaky-sink +- +2/5 +ambiguous"));

  ProcessResult r1 = te_.Run({"execution:replay", std::to_string(not_done), "--reason",
                              "checked the sink: nothing was sent", "--assume-not-done"});
  ASSERT_EQ(r1.exit_code, 0) << r1.Describe();
  EXPECT_EQ(r1.out, "execution " + std::to_string(not_done) + " replayed: queued\n");
  nlohmann::json r2 = te_.RunJson({"execution:replay", std::to_string(done), "--reason",
                                   "the sink shows the notice", "--assume-done"});
  EXPECT_EQ(r2["outcome"], "replayed");
  EXPECT_EQ(r2["status"], "queued");

  nlohmann::json a = WaitTerminal(not_done);
  EXPECT_EQ(a["status"], "succeeded") << a.dump();
  nlohmann::json b = WaitTerminal(done);
  EXPECT_EQ(b["status"], "succeeded") << b.dump();
  EXPECT_EQ(Answers(files_, "notice", not_done).back(),
            (std::pair<std::int64_t, std::string>{3, "proceed"}));
  EXPECT_EQ(Answers(files_, "notice", done).back(),
            (std::pair<std::int64_t, std::string>{3, "already_done"}));
  // Performed once where the operator said it had not happened, never where it had.
  EXPECT_EQ(EffectLines(files_.Effects()), (std::map<std::int64_t, int>{{not_done, 1}}));
  ASSERT_EQ(b["effects"].size(), 1u);
  EXPECT_EQ(b["effects"][0]["state"], "committed");
  EXPECT_THAT(b["effects"][0]["detail"].get<std::string>(), HasSubstr("assumed"));
  ExpectInvariants(te_, files_, {not_done}, {{not_done, 1}});
  EXPECT_TRUE(te_.RunJson({"quarantine:list"})["items"].empty());
  StopServe(&serve_);
}

// Four-eyes (R1): with replay_requires_approval the replay waits for a second
// operator; the requester cannot approve it.
TEST(FourEyesCliTest, ReplayNeedsASecondOperator) {
  DrillFiles files;
  TaskengineInstall te(Config(files, /*four_eyes=*/true));
  ASSERT_EQ(te.Run({"migrate"}).exit_code, 0);
  ChildProcess serve;
  ASSERT_NO_FATAL_FAILURE(te.StartServe(&serve));
  ASSERT_TRUE(te.WaitServing(1, milliseconds(15'000))) << ReadFile(te.serve_log());
  const std::int64_t id = DispatchJob(te, "broken");
  const std::string sid = std::to_string(id);
  nlohmann::json j;
  ASSERT_TRUE(WaitExecution(
      te, id, kRunTimeout, [](const nlohmann::json& e) { return e["status"] == "quarantined"; },
      &j))
      << j.dump();
  EXPECT_EQ(j["failure_class"], "permanent");

  ProcessResult asked =
      te.Run({"execution:replay", sid, "--reason", "fixed the input", "--as", "alice"});
  ASSERT_EQ(asked.exit_code, 0) << asked.Describe();
  EXPECT_THAT(asked.out, HasSubstr("pending approval"));
  EXPECT_THAT(asked.out, HasSubstr("taskengine execution:approve " + sid));
  EXPECT_EQ(ShowJson(te, id)["status"], "quarantined") << "nothing runs before the approval";
  ProcessResult twice = te.Run({"execution:replay", sid, "--reason", "again", "--as", "bob"});
  EXPECT_EQ(twice.exit_code, 4) << twice.Describe();
  ProcessResult self = te.Run({"execution:approve", sid, "--as", "alice"});
  EXPECT_EQ(self.exit_code, 4) << self.Describe();
  EXPECT_THAT(self.err, HasSubstr("four-eyes"));

  nlohmann::json approved = te.RunJson({"execution:approve", sid, "--as", "bob"});
  EXPECT_EQ(approved["outcome"], "replayed") << approved.dump();
  EXPECT_EQ(approved["actor"], "cli:bob");
  // It runs again (and, still broken, is quarantined again).
  ASSERT_TRUE(WaitExecution(
      te, id, kRunTimeout,
      [](const nlohmann::json& e) {
        return e["status"] == "quarantined" && e["attempts"].size() >= 2;
      },
      &j))
      << j.dump();
  std::vector<std::string> actions;
  for (const auto& r : j["audit"]) {
    actions.push_back(r["action"].get<std::string>() + " " + r["actor"].get<std::string>());
  }
  EXPECT_EQ(actions, (std::vector<std::string>{"execution.replay_approved cli:bob",
                                               "execution.replay_requested cli:alice"}));
  StopServe(&serve);
}

}  // namespace
}  // namespace taskengine::testing
