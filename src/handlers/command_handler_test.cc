// Tests of the `command` handler against real processes (/bin/sh scripts
// written to a TempDir and named by the *config*, never by the payload).

#include "handlers/command_handler.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "handlers/testing/fake_job_context.h"
#include "testing_support/test_util.h"

namespace taskengine {
namespace {

using Json = nlohmann::json;
using Kind = HandlerResult::Kind;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

// Short intervals so every test stays well under 2 s.
CommandHandlerOptions FastOptions() {
  CommandHandlerOptions o;
  o.default_timeout = milliseconds(3000);
  o.kill_grace = milliseconds(200);
  o.checkpoint_interval = milliseconds(20);
  o.exit_drain = milliseconds(100);
  return o;
}

std::string WriteScript(const TempDir& dir, const std::string& name, const std::string& body) {
  const std::string path = dir.File(name);
  std::ofstream(path) << body;
  return path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// {"argv": argv, ...extra}
std::string Config(const std::vector<std::string>& argv, Json extra = Json::object()) {
  extra["argv"] = argv;
  return extra.dump();
}

// Config running `/bin/sh <script>` with `body` as the script.
std::string ShConfig(const TempDir& dir, const std::string& body, Json extra = Json::object()) {
  return Config({"/bin/sh", WriteScript(dir, "script.sh", body)}, std::move(extra));
}

struct Timed {
  HandlerResult result;
  milliseconds elapsed;
};

Timed RunHandler(FakeJobContext& ctx, CommandHandlerOptions options = FastOptions()) {
  Handler handler = MakeCommandHandler(std::move(options));
  const auto start = std::chrono::steady_clock::now();
  HandlerResult result = handler(ctx);
  const auto elapsed =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
  return {std::move(result), elapsed};
}

// True when `pid` no longer runs: gone, or a zombie awaiting its (init) reaper.
bool ProcessDead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  const std::size_t paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] == 'Z';
}

bool WaitDead(pid_t pid, milliseconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < until) {
    if (ProcessDead(pid)) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return ProcessDead(pid);
}

pid_t ReadPid(const std::string& path) {
  const std::string text = ReadFile(path);
  return text.empty() ? 0 : static_cast<pid_t>(std::stol(text));
}

// The handler reaped everything it started: this process has no children.
void ExpectNoChildren() {
  errno = 0;
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(CommandHandlerTest, SuccessWithResult) {
  TempDir dir;
  FakeJobContext ctx;
  ctx.config = ShConfig(dir, "echo '{\"result\": {\"ok\": true, \"n\": 3}}'\nexit 0\n");
  Timed t = RunHandler(ctx);
  ASSERT_EQ(t.result.kind, Kind::kSuccess) << t.result.error;
  EXPECT_EQ(Json::parse(t.result.result_json), Json::parse(R"({"ok": true, "n": 3})"));
  ExpectNoChildren();
}

TEST(CommandHandlerTest, SuccessWithoutResultIsEmpty) {
  TempDir dir;
  FakeJobContext ctx;
  ctx.config = ShConfig(dir, "echo hello\n");
  Timed t = RunHandler(ctx);
  ASSERT_EQ(t.result.kind, Kind::kSuccess) << t.result.error;
  EXPECT_EQ(t.result.result_json, "");
  EXPECT_EQ(ctx.LogsAt(LogLevel::kInfo), std::vector<std::string>{"hello"});
}

TEST(CommandHandlerTest, PayloadArrivesOnStdinVerbatim) {
  TempDir dir;
  FakeJobContext ctx;
  ctx.payload = "{\"text\": \"line1\\nline2\", \"unicode\": \"h\xC3\xA9llo\", \"n\": [1, 2]}";
  const std::string out = dir.File("stdin.out");
  ctx.config = ShConfig(dir, "cat > '" + out + "'\n");
  Timed t = RunHandler(ctx);
  ASSERT_EQ(t.result.kind, Kind::kSuccess) << t.result.error;
  EXPECT_EQ(ReadFile(out), ctx.payload);
}

TEST(CommandHandlerTest, EnvironmentIsExactlyTheDocumentedVariables) {
  ASSERT_EQ(setenv("SECRET_X", "1", 1), 0);
  ASSERT_EQ(setenv("TE_TEST_ALLOWED", "yes", 1), 0);
  TempDir dir;
  FakeJobContext ctx;
  ctx.attempt_value = 3;
  ctx.config = Config({"/usr/bin/env"}, {{"env", {{"FOO", "bar baz"}}}});

  const std::map<std::string, std::string> base = {
      {"TASKENGINE_EXECUTION_ID", "42"},
      {"TASKENGINE_JOB", "demo.job"},
      {"TASKENGINE_ATTEMPT", "3"},
      {"TASKENGINE_TENANT", "acme"},
      {"TASKENGINE_CLAIM_VERSION", "7"},
      {"TASKENGINE_EFFECT_KEY_PREFIX", "42:"},
      {"PATH", "/usr/local/bin:/usr/bin:/bin"},
      {"FOO", "bar baz"},
  };
  auto env_of = [](const FakeJobContext& c) {
    std::map<std::string, std::string> env;
    for (const std::string& line : c.LogsAt(LogLevel::kInfo)) {
      const std::size_t eq = line.find('=');
      env[line.substr(0, eq)] = eq == std::string::npos ? "" : line.substr(eq + 1);
    }
    return env;
  };

  Timed t = RunHandler(ctx);
  ASSERT_EQ(t.result.kind, Kind::kSuccess) << t.result.error;
  EXPECT_EQ(env_of(ctx), base);

  // An allowlisted variable is copied; nothing else leaks.
  FakeJobContext ctx2;
  ctx2.attempt_value = 3;
  ctx2.config = ctx.config;
  CommandHandlerOptions options = FastOptions();
  options.env_allowlist = {"TE_TEST_ALLOWED", "TE_TEST_UNSET_NAME"};
  Timed t2 = RunHandler(ctx2, options);
  ASSERT_EQ(t2.result.kind, Kind::kSuccess) << t2.result.error;
  std::map<std::string, std::string> expected = base;
  expected["TE_TEST_ALLOWED"] = "yes";
  EXPECT_EQ(env_of(ctx2), expected);

  unsetenv("SECRET_X");
  unsetenv("TE_TEST_ALLOWED");
}

// The server's variables (TASKENGINE_DB, TASKENGINE_BIN, ...) reach the
// command; they cannot replace the per-execution variables, and nothing else
// of the server's environment leaks.
TEST(CommandHandlerTest, ServerEnvironmentIsAddedButCannotReplacePerExecutionVariables) {
  ASSERT_EQ(setenv("SECRET_Y", "1", 1), 0);
  FakeJobContext ctx;
  ctx.config = Config({"/usr/bin/env"});
  CommandHandlerOptions options = FastOptions();
  options.server_env = {{"TASKENGINE_DB", "/srv/te/data/te.db"},
                        {"TASKENGINE_BIN", "/usr/local/bin/taskengine"},
                        {"TASKENGINE_EXECUTION_ID", "999"},
                        {"bad name", "x"}};
  Timed t = RunHandler(ctx, options);
  ASSERT_EQ(t.result.kind, Kind::kSuccess) << t.result.error;
  std::map<std::string, std::string> env;
  for (const std::string& line : ctx.LogsAt(LogLevel::kInfo)) {
    const std::size_t eq = line.find('=');
    ASSERT_NE(eq, std::string::npos) << line;
    EXPECT_TRUE(env.emplace(line.substr(0, eq), line.substr(eq + 1)).second)
        << "set twice: " << line;
  }
  const std::map<std::string, std::string> expected = {
      {"TASKENGINE_DB", "/srv/te/data/te.db"},
      {"TASKENGINE_BIN", "/usr/local/bin/taskengine"},
      {"TASKENGINE_EXECUTION_ID", "42"},
      {"TASKENGINE_JOB", "demo.job"},
      {"TASKENGINE_ATTEMPT", "1"},
      {"TASKENGINE_TENANT", "acme"},
      {"TASKENGINE_CLAIM_VERSION", "7"},
      {"TASKENGINE_EFFECT_KEY_PREFIX", "42:"},
      {"PATH", "/usr/local/bin:/usr/bin:/bin"},
  };
  EXPECT_EQ(env, expected);
  unsetenv("SECRET_Y");
}

TEST(CommandHandlerTest, GlobalJobHasEmptyTenantVariable) {
  FakeJobContext ctx;
  ctx.tenant_value = TenantId("");
  ctx.config = Config({"/usr/bin/env"});
  Timed t = RunHandler(ctx);
  ASSERT_EQ(t.result.kind, Kind::kSuccess) << t.result.error;
  const std::vector<std::string> lines = ctx.LogsAt(LogLevel::kInfo);
  EXPECT_NE(std::find(lines.begin(), lines.end(), "TASKENGINE_TENANT="), lines.end());
}

TEST(CommandHandlerTest, ProgressLogsAndResultLines) {
  TempDir dir;
  FakeJobContext ctx;
  ctx.config = ShConfig(dir, R"(echo '{"progress": 42}'
echo '{"progress": 150}'
echo '{"log": "careful", "level": "warn"}'
echo '{"log": "dbg", "level": "debug"}'
echo '{"log": "bad level", "level": "bogus"}'
echo '{"log": "failed thing", "level": "error"}'
echo 'plain text'
echo '{"other": 1}'
echo 'oops' >&2
echo '{"progress": 10.7, "log": "both"}'
echo '{"result": [1, 2]}'
echo '{"result": {"final": true}}'
printf 'no newline at end'
)");
  Timed t = RunHandler(ctx);
  ASSERT_EQ(t.result.kind, Kind::kSuccess) << t.result.error;
  EXPECT_EQ(t.result.result_json, R"({"final":true})");
  EXPECT_EQ(ctx.progress(), (std::vector<int>{42, 100, 10}));
  EXPECT_EQ(ctx.LogsAt(LogLevel::kWarn), (std::vector<std::string>{"careful", "oops"}));
  EXPECT_EQ(ctx.LogsAt(LogLevel::kDebug), std::vector<std::string>{"dbg"});
  EXPECT_EQ(ctx.LogsAt(LogLevel::kError), std::vector<std::string>{"failed thing"});
  EXPECT_EQ(ctx.LogsAt(LogLevel::kInfo),
            (std::vector<std::string>{"bad level", "plain text", R"({"other": 1})", "both",
                                      "no newline at end"}));
}

TEST(CommandHandlerTest, ExitCode75IsRetryable) {
  TempDir dir;
  FakeJobContext ctx;
  ctx.config = ShConfig(dir, "echo 'database busy' >&2\nexit 75\n");
  Timed t = RunHandler(ctx);
  EXPECT_EQ(t.result.kind, Kind::kRetryable);
  EXPECT_THAT(t.result.error, HasSubstr("75"));
  EXPECT_THAT(t.result.error, HasSubstr("database busy"));
}

TEST(CommandHandlerTest, ExitCode65IsPermanent) {
  TempDir dir;
  FakeJobContext ctx;
  ctx.config = ShConfig(dir, "echo 'bad input' >&2\nexit 65\n");
  Timed t = RunHandler(ctx);
  EXPECT_EQ(t.result.kind, Kind::kPermanent);
  EXPECT_THAT(t.result.error, HasSubstr("65"));
  EXPECT_THAT(t.result.error, HasSubstr("bad input"));
}

// A script that met `ambiguous` from `taskengine effect:reserve` exits 76.
TEST(CommandHandlerTest, ExitCode76IsAmbiguous) {
  TempDir dir;
  FakeJobContext ctx;
  ctx.config = ShConfig(dir, "echo 'notice: ambiguous' >&2\nexit 76\n");
  Timed t = RunHandler(ctx);
  EXPECT_EQ(t.result.kind, Kind::kAmbiguous);
  EXPECT_THAT(t.result.error, HasSubstr("76"));
  EXPECT_THAT(t.result.error, HasSubstr("notice: ambiguous"));
  EXPECT_EQ(kCommandExitAmbiguous, 76);
  // Neighbouring codes stay retryable.
  for (int code : {74, 77}) {
    FakeJobContext other;
    other.config = ShConfig(dir, "exit " + std::to_string(code) + "\n");
    EXPECT_EQ(RunHandler(other).result.kind, Kind::kRetryable) << code;
  }
}

TEST(CommandHandlerTest, OtherExitCodeIsRetryableWithLastStderrLine) {
  TempDir dir;
  FakeJobContext ctx;
  ctx.config = ShConfig(dir, "echo 'first' >&2\necho 'boom' >&2\nexit 3\n");
  Timed t = RunHandler(ctx);
  EXPECT_EQ(t.result.kind, Kind::kRetryable);
  EXPECT_EQ(t.result.error, "exit code 3: boom");
}

TEST(CommandHandlerTest, KilledBySignalIsRetryableAndNamesTheSignal) {
  TempDir dir;
  FakeJobContext ctx;
  ctx.config = ShConfig(dir, "kill -USR1 $$\nsleep 5\n");
  Timed t = RunHandler(ctx);
  EXPECT_EQ(t.result.kind, Kind::kRetryable);
  EXPECT_THAT(t.result.error, HasSubstr("SIGUSR1"));
  EXPECT_LT(t.elapsed, milliseconds(2000));
}

TEST(CommandHandlerTest, TimeoutKillsTheProcessGroupIncludingAGrandchild) {
  TempDir dir;
  FakeJobContext ctx;
  const std::string pidfile = dir.File("grandchild.pid");
  ctx.config =
      ShConfig(dir, "sleep 1000 &\necho $! > '" + pidfile + "'\nwait\n", {{"timeout_ms", 300}});
  Timed t = RunHandler(ctx);
  EXPECT_EQ(t.result.kind, Kind::kRetryable);
  EXPECT_EQ(t.result.error, "timed out after 300 ms");
  EXPECT_GE(t.elapsed, milliseconds(300));
  EXPECT_LT(t.elapsed, milliseconds(1500));
  const pid_t grandchild = ReadPid(pidfile);
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(WaitDead(grandchild, milliseconds(1000))) << "grandchild " << grandchild;
  if (!ProcessDead(grandchild)) kill(grandchild, SIGKILL);
  ExpectNoChildren();
}

TEST(CommandHandlerTest, TimeoutEscalatesToSigkillWhenTermIsIgnored) {
  TempDir dir;
  FakeJobContext ctx;
  const std::string pidfile = dir.File("grandchild.pid");
  // `trap '' TERM` makes SIGTERM ignored for the shell and the sleep it starts.
  ctx.config = ShConfig(dir, "trap '' TERM\nsleep 1000 &\necho $! > '" + pidfile + "'\nwait\n",
                        {{"timeout_ms", 200}});
  CommandHandlerOptions options = FastOptions();
  options.kill_grace = milliseconds(300);
  Timed t = RunHandler(ctx, options);
  EXPECT_EQ(t.result.kind, Kind::kRetryable);
  EXPECT_EQ(t.result.error, "timed out after 200 ms");
  EXPECT_GE(t.elapsed, milliseconds(500));  // timeout + grace: TERM did not work
  EXPECT_LT(t.elapsed, milliseconds(1800));
  const pid_t grandchild = ReadPid(pidfile);
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(WaitDead(grandchild, milliseconds(1000)));
  if (!ProcessDead(grandchild)) kill(grandchild, SIGKILL);
  ExpectNoChildren();
}

TEST(CommandHandlerTest, TimeoutComesFromConfigThenJobThenDefault) {
  TempDir dir;
  {
    FakeJobContext ctx;
    ctx.timeout = 150;  // the job definition's timeout
    ctx.config = ShConfig(dir, "sleep 5\n");
    Timed t = RunHandler(ctx);
    EXPECT_EQ(t.result.error, "timed out after 150 ms");
  }
  {
    FakeJobContext ctx;
    ctx.timeout = 10'000;
    ctx.config = ShConfig(dir, "sleep 5\n", {{"timeout_ms", 100}});
    Timed t = RunHandler(ctx);
    EXPECT_EQ(t.result.error, "timed out after 100 ms");
  }
  {
    FakeJobContext ctx;
    ctx.timeout = 0;
    ctx.config = ShConfig(dir, "sleep 5\n");
    CommandHandlerOptions options = FastOptions();
    options.default_timeout = milliseconds(120);
    Timed t = RunHandler(ctx, options);
    EXPECT_EQ(t.result.error, "timed out after 120 ms");
  }
}

TEST(CommandHandlerTest, CancellationViaCheckpointStopsQuickly) {
  TempDir dir;
  FakeJobContext ctx;
  const std::string pidfile = dir.File("grandchild.pid");
  ctx.config = ShConfig(dir, "sleep 1000 &\necho $! > '" + pidfile + "'\nwait\n");
  // Active for the start check and a few ticks, then canceled.
  ctx.lease_state_fn = [](int call) {
    return call < 5 ? LeaseState::kActive : LeaseState::kCancelRequested;
  };
  Timed t = RunHandler(ctx);
  EXPECT_EQ(t.result.kind, Kind::kCanceled) << t.result.error;
  EXPECT_LT(t.elapsed, milliseconds(800));
  EXPECT_GE(ctx.checkpoints(), 5);
  const pid_t grandchild = ReadPid(pidfile);
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(WaitDead(grandchild, milliseconds(1000)));
  if (!ProcessDead(grandchild)) kill(grandchild, SIGKILL);
  ExpectNoChildren();
}

TEST(CommandHandlerTest, LostLeaseStopsTheCommandAndIsRetryable) {
  TempDir dir;
  FakeJobContext ctx;
  ctx.config = ShConfig(dir, "sleep 1000\n");
  ctx.lease_state_fn = [](int call) { return call < 3 ? LeaseState::kActive : LeaseState::kLost; };
  Timed t = RunHandler(ctx);
  EXPECT_EQ(t.result.kind, Kind::kRetryable);
  EXPECT_EQ(t.result.error, "lease lost");
  EXPECT_LT(t.elapsed, milliseconds(800));
  ExpectNoChildren();
}

TEST(CommandHandlerTest, AlreadyCanceledExecutionDoesNotStartTheCommand) {
  TempDir dir;
  FakeJobContext ctx;
  const std::string marker = dir.File("started");
  ctx.config = ShConfig(dir, "touch '" + marker + "'\n");
  ctx.set_lease_state(LeaseState::kCancelRequested);
  Timed t = RunHandler(ctx);
  EXPECT_EQ(t.result.kind, Kind::kCanceled);
  EXPECT_FALSE(std::filesystem::exists(marker));
}

// The handler must survive EPIPE on the child's stdin without SIGPIPE killing
// this process (its disposition here is the default: terminate), and leave the
// thread's signal state as it found it.
TEST(CommandHandlerTest, ChildThatNeverReadsStdinWithLargePayloadDoesNotHangOrCrash) {
  TempDir dir;
  const std::string payload = "{\"blob\": \"" + std::string(1 << 20, 'x') + "\"}";
  sigset_t mask_before;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask_before);

  {  // Exits at once without reading.
    FakeJobContext ctx;
    ctx.payload = payload;
    ctx.config = ShConfig(dir, "exit 0\n");
    Timed t = RunHandler(ctx);
    EXPECT_EQ(t.result.kind, Kind::kSuccess) << t.result.error;
    EXPECT_LT(t.elapsed, milliseconds(1000));
  }
  {  // Lives a while without reading, then fails.
    FakeJobContext ctx;
    ctx.payload = payload;
    ctx.config = ShConfig(dir, "sleep 0.2\necho 'did not read' >&2\nexit 4\n");
    Timed t = RunHandler(ctx);
    EXPECT_EQ(t.result.kind, Kind::kRetryable);
    EXPECT_EQ(t.result.error, "exit code 4: did not read");
    EXPECT_LT(t.elapsed, milliseconds(1000));
  }
  {  // Never reads and never exits: the timeout still applies.
    FakeJobContext ctx;
    ctx.payload = payload;
    ctx.config = ShConfig(dir, "sleep 1000\n", {{"timeout_ms", 200}});
    Timed t = RunHandler(ctx);
    EXPECT_EQ(t.result.error, "timed out after 200 ms");
    EXPECT_LT(t.elapsed, milliseconds(1000));
  }

  sigset_t mask_after;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask_after);
  EXPECT_EQ(sigismember(&mask_after, SIGPIPE), sigismember(&mask_before, SIGPIPE));
  sigset_t pending;
  sigpending(&pending);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0);
  ExpectNoChildren();
}

TEST(CommandHandlerTest, LargeStdoutAndStderrDoNotDeadlock) {
  TempDir dir;
  FakeJobContext ctx;
  // 5 MB on stdout and 3 MB on stderr written concurrently; a reader that
  // drained one stream before the other would deadlock here.
  ctx.config = ShConfig(
      dir, R"((yes 'to stderr 0123456789012345678901234567890123456789' | head -c 3000000 >&2) &
yes 'to stdout 0123456789012345678901234567890123456789' | head -c 5000000
echo
wait
echo '{"progress": 99}'
echo '{"result": "done"}'
)");
  CommandHandlerOptions options = FastOptions();
  options.max_log_bytes = 100'000;
  Timed t = RunHandler(ctx, options);
  ASSERT_EQ(t.result.kind, Kind::kSuccess) << t.result.error;
  EXPECT_EQ(t.result.result_json, "\"done\"");
  EXPECT_EQ(ctx.progress(), std::vector<int>{99});  // protocol works past the log limit
  EXPECT_LT(t.elapsed, milliseconds(2000));

  std::size_t logged = 0;
  const std::vector<FakeJobContext::LogLine> logs = ctx.logs();
  ASSERT_FALSE(logs.empty());
  for (std::size_t i = 0; i + 1 < logs.size(); ++i) logged += logs[i].message.size();
  EXPECT_LE(logged, options.max_log_bytes);
  EXPECT_GT(logged, options.max_log_bytes - 200);
  EXPECT_EQ(logs.back().level, LogLevel::kWarn);
  EXPECT_THAT(logs.back().message, HasSubstr("not logged: log limit of 100000 bytes reached"));
}

TEST(CommandHandlerTest, LongLinesAreTruncated) {
  TempDir dir;
  FakeJobContext ctx;
  ctx.config = ShConfig(dir, R"(head -c 100000 /dev/zero | tr '\0' a
echo
echo '{"result": "0123456789012345678901234567890123456789012345678901234567890123456789"}'
echo short
)");
  CommandHandlerOptions options = FastOptions();
  options.max_line_bytes = 60;
  options.max_log_message_bytes = 40;
  Timed t = RunHandler(ctx, options);
  ASSERT_EQ(t.result.kind, Kind::kSuccess) << t.result.error;
  // The over-long protocol line was cut, so it is text, not a result.
  EXPECT_EQ(t.result.result_json, "");
  const std::vector<std::string> info = ctx.LogsAt(LogLevel::kInfo);
  ASSERT_EQ(info.size(), 3u);
  EXPECT_EQ(info[0], std::string(40, 'a') + " [truncated]");
  EXPECT_EQ(info[1], R"({"result": "0123456789012345678901234567)" + std::string(" [truncated]"));
  EXPECT_EQ(info[2], "short");
}

TEST(CommandHandlerTest, MissingBinaryIsPermanent) {
  FakeJobContext ctx;
  ctx.config = Config({"/nonexistent/dir/tool", "arg"});
  Timed t = RunHandler(ctx);
  EXPECT_EQ(t.result.kind, Kind::kPermanent);
  EXPECT_THAT(t.result.error, HasSubstr("/nonexistent/dir/tool"));
  EXPECT_THAT(t.result.error, HasSubstr("No such file or directory"));
}

TEST(CommandHandlerTest, NonExecutableFileAndBadCwdArePermanent) {
  TempDir dir;
  {
    FakeJobContext ctx;
    ctx.config = Config({WriteScript(dir, "not-exec.sh", "exit 0\n")});
    Timed t = RunHandler(ctx);
    EXPECT_EQ(t.result.kind, Kind::kPermanent);
    EXPECT_THAT(t.result.error, HasSubstr("Permission denied"));
  }
  {
    FakeJobContext ctx;
    ctx.config = Config({"/bin/true"}, {{"cwd", dir.File("no-such-dir")}});
    Timed t = RunHandler(ctx);
    EXPECT_EQ(t.result.kind, Kind::kPermanent);
    EXPECT_THAT(t.result.error, HasSubstr("no-such-dir"));
  }
}

TEST(CommandHandlerTest, CwdIsHonoured) {
  TempDir dir;
  FakeJobContext ctx;
  ctx.config = Config({"/bin/pwd"}, {{"cwd", dir.path().string()}});
  Timed t = RunHandler(ctx);
  ASSERT_EQ(t.result.kind, Kind::kSuccess) << t.result.error;
  EXPECT_EQ(ctx.LogsAt(LogLevel::kInfo),
            std::vector<std::string>{std::filesystem::canonical(dir.path()).string()});
}

TEST(CommandHandlerTest, InvalidConfigIsPermanent) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "not valid JSON"},
      {"[]", "must be a JSON object"},
      {"{}", "needs \"argv\""},
      {R"({"argv": []})", "non-empty array"},
      {R"({"argv": "/bin/true"})", "non-empty array"},
      {R"({"argv": ["/bin/echo", 3]})", "non-empty array"},
      {R"({"argv": ["true"]})", "must be a path"},
      {R"({"argv": ["/bin/true"], "cwd": 5})", "\"cwd\""},
      {R"({"argv": ["/bin/true"], "env": ["A"]})", "\"env\""},
      {R"({"argv": ["/bin/true"], "env": {"A": 1}})", "value of A"},
      {R"({"argv": ["/bin/true"], "env": {"A=B": "x"}})", "invalid variable name"},
      {R"({"argv": ["/bin/true"], "env": {"TASKENGINE_JOB": "x"}})", "reserved"},
      {R"({"argv": ["/bin/true"], "timeout_ms": -5})", "positive integer"},
      {R"({"argv": ["/bin/true"], "timeout_ms": "10"})", "positive integer"},
      {R"({"argv": ["/bin/true"], "timeout": 10})", "unknown key \"timeout\""},
      {R"({"argv": ["/bin/ec\u0000ho"]})", "NUL"},
  };
  for (const auto& [config, message] : cases) {
    FakeJobContext ctx;
    ctx.config = config;
    Timed t = RunHandler(ctx);
    EXPECT_EQ(t.result.kind, Kind::kPermanent) << config;
    EXPECT_THAT(t.result.error, HasSubstr(message)) << config;
  }
}

TEST(CommandHandlerTest, ShellMetacharactersInPayloadAndArgsAreNeverInterpreted) {
  TempDir dir;
  auto m = [&](int i) { return dir.File("pwned" + std::to_string(i)); };
  {
    FakeJobContext ctx;
    Json payload = {{"cmd", "$(touch " + m(1) + "); `touch " + m(2) + "`; touch " + m(3) +
                                " | touch " + m(4) + " && touch " + m(5) + " > " + m(6)}};
    ctx.payload = payload.dump();
    ctx.config = Config({"/bin/cat"});
    Timed t = RunHandler(ctx);
    ASSERT_EQ(t.result.kind, Kind::kSuccess) << t.result.error;
    // The payload came back verbatim as text (it has no protocol key).
    EXPECT_EQ(ctx.LogsAt(LogLevel::kInfo), std::vector<std::string>{ctx.payload});
  }
  {
    FakeJobContext ctx;
    ctx.config = Config({"/bin/echo", "$(touch " + m(7) + ")", ";", "touch", m(8)});
    Timed t = RunHandler(ctx);
    ASSERT_EQ(t.result.kind, Kind::kSuccess) << t.result.error;
    EXPECT_EQ(ctx.LogsAt(LogLevel::kInfo),
              std::vector<std::string>{"$(touch " + m(7) + ") ; touch " + m(8)});
  }
  for (int i = 1; i <= 8; ++i) EXPECT_FALSE(std::filesystem::exists(m(i))) << m(i);
}

TEST(CommandHandlerTest, ChildSeesOnlyStdioFileDescriptors) {
  // A descriptor this process opened without O_CLOEXEC must not reach the child.
  const int leaky = open("/dev/null", O_RDONLY);
  ASSERT_GE(leaky, 0);
  FakeJobContext ctx;
  ctx.config = Config({"/bin/ls", "/proc/self/fd"});
  Timed t = RunHandler(ctx);
  close(leaky);
  ASSERT_EQ(t.result.kind, Kind::kSuccess) << t.result.error;
  // 0, 1, 2 and the directory ls itself opened to list /proc/self/fd.
  const std::vector<std::string> fds = ctx.LogsAt(LogLevel::kInfo);
  EXPECT_EQ(fds, (std::vector<std::string>{"0", "1", "2", "3"}));
}

TEST(CommandHandlerTest, LeftoverBackgroundProcessIsKilledWhenTheCommandExits) {
  TempDir dir;
  FakeJobContext ctx;
  const std::string pidfile = dir.File("bg.pid");
  // The background sleep keeps stdout open after the leader exits.
  ctx.config = ShConfig(dir, "sleep 1000 &\necho $! > '" + pidfile + "'\necho '{\"result\": 1}'\n");
  Timed t = RunHandler(ctx);
  ASSERT_EQ(t.result.kind, Kind::kSuccess) << t.result.error;
  EXPECT_EQ(t.result.result_json, "1");
  EXPECT_LT(t.elapsed, milliseconds(1500));
  const pid_t bg = ReadPid(pidfile);
  ASSERT_GT(bg, 0);
  EXPECT_TRUE(WaitDead(bg, milliseconds(1000)));
  if (!ProcessDead(bg)) kill(bg, SIGKILL);
  ExpectNoChildren();
}

TEST(CommandHandlerTest, ConcurrentExecutionsAreIndependent) {
  TempDir dir;
  const std::string script = WriteScript(dir, "echo.sh",
                                         "payload=$(cat)\n"
                                         "echo \"{\\\"progress\\\": $TASKENGINE_ATTEMPT}\"\n"
                                         "printf '{\"result\": %s}\\n' \"$payload\"\n");
  Handler handler = MakeCommandHandler(FastOptions());
  constexpr int kThreads = 8;
  std::vector<FakeJobContext> contexts(kThreads);
  std::vector<HandlerResult> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    contexts[i].attempt_value = i + 1;
    contexts[i].payload = "{\"n\":" + std::to_string(i) + "}";
    contexts[i].config = Config({"/bin/sh", script});
    threads.emplace_back([&, i] { results[i] = handler(contexts[i]); });
  }
  for (std::thread& th : threads) th.join();
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_EQ(results[i].kind, Kind::kSuccess) << results[i].error;
    EXPECT_EQ(results[i].result_json, contexts[i].payload);
    EXPECT_EQ(contexts[i].progress(), std::vector<int>{i + 1});
  }
  ExpectNoChildren();
}

}  // namespace
}  // namespace taskengine
