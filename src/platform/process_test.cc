// Process (process.h) with real /bin/sh children.
#include "platform/process.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "testing_support/test_util.h"

namespace taskengine {
namespace {

using std::chrono::milliseconds;
using testing::HasSubstr;
using SteadyClock = std::chrono::steady_clock;

SpawnOptions Shell(const std::string& script) {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", script};
  return o;
}

// Everything the child writes to `fd` until end-of-file (10 s at most).
std::string ReadAll(UniqueFd& fd) {
  std::string out;
  const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
  while (SteadyClock::now() < deadline) {
    pollfd p{fd.get(), POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EAGAIN) {
      break;
    }
  }
  return out;
}

// Whether `pid` is gone or a zombie (dead, not reaped by its new parent yet).
bool Dead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const std::size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

bool EventuallyDead(pid_t pid) {
  const auto deadline = SteadyClock::now() + std::chrono::seconds(5);
  while (SteadyClock::now() < deadline) {
    if (Dead(pid)) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return false;
}

// Each case runs through both ways Spawn starts a child: posix_spawn, and
// fork + execve (taken when a parent-death signal is asked for).
class ProcessTest : public ::testing::TestWithParam<bool> {
 protected:
  static Result<Process> Spawn(SpawnOptions o) {
    if (GetParam()) o.parent_death_signal = SIGKILL;
    return Process::Spawn(o);
  }
};

INSTANTIATE_TEST_SUITE_P(StartPaths, ProcessTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "ForkExec" : "PosixSpawn";
                         });

TEST_P(ProcessTest, ExitCodeIsReported) {
  ASSERT_OK_AND_ASSIGN(Process p, Spawn(Shell("exit 3")));
  EXPECT_TRUE(p.running());
  std::optional<ExitStatus> s = p.Wait(milliseconds(10'000));
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->exited());
  EXPECT_EQ(s->code, 3);
  EXPECT_EQ(s->ToString(), "exited 3");
  EXPECT_FALSE(p.running());
  EXPECT_EQ(p.pid(), -1);
}

TEST_P(ProcessTest, SignalDeathIsReported) {
  ASSERT_OK_AND_ASSIGN(Process p, Spawn(Shell("kill -TERM $$; sleep 10")));
  std::optional<ExitStatus> s = p.Wait(milliseconds(10'000));
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(s->signaled());
  EXPECT_EQ(s->signal, SIGTERM);
  EXPECT_EQ(s->ToString(), "killed by signal SIGTERM");
}

TEST(Process, DecodesWaitStatuses) {
  EXPECT_EQ(ExitStatus::FromWaitStatus(0).ToString(), "exited 0");
  EXPECT_EQ(ExitStatus::FromWaitStatus(SIGKILL).ToString(), "killed by signal SIGKILL");
  EXPECT_EQ(ExitStatus{}.ToString(), "lost");
  EXPECT_EQ(SignalName(SIGINT), "SIGINT");
}

TEST_P(ProcessTest, GroupKillReachesAGrandchild) {
  SpawnOptions o = Shell("sleep 100 & echo $!; wait");
  o.stdout_spec = StdioSpec::Pipe();
  ASSERT_OK_AND_ASSIGN(Process p, Spawn(o));
  // The first line is the grandchild's pid; the shell keeps stdout open.
  std::string line;
  const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
  while (line.find('\n') == std::string::npos && SteadyClock::now() < deadline) {
    char c = 0;
    const ssize_t n = read(p.stdout_pipe().get(), &c, 1);
    if (n == 1) line.push_back(c);
    if (n <= 0) std::this_thread::sleep_for(milliseconds(5));
  }
  const pid_t grandchild = static_cast<pid_t>(std::stol(line));
  ASSERT_GT(grandchild, 0);
  EXPECT_EQ(getpgid(grandchild), p.pid()) << "the grandchild is in the child's group";
  EXPECT_FALSE(Dead(grandchild));

  p.SignalGroup(SIGKILL);
  std::optional<ExitStatus> s = p.Wait(milliseconds(10'000));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->signal, SIGKILL);
  EXPECT_TRUE(EventuallyDead(grandchild));
}

TEST_P(ProcessTest, SignalReachesTheChildOnly) {
  SpawnOptions o = Shell("trap 'exit 7' TERM; sleep 100 & wait");
  ASSERT_OK_AND_ASSIGN(Process p, Spawn(o));
  std::this_thread::sleep_for(milliseconds(100));  // let the shell set its trap
  p.Signal(SIGTERM);
  std::optional<ExitStatus> s = p.Wait(milliseconds(10'000));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->ToString(), "exited 7");
}

TEST_P(ProcessTest, WaitReturnsAtItsDeadline) {
  ASSERT_OK_AND_ASSIGN(Process p, Spawn(Shell("sleep 100")));
  const auto start = SteadyClock::now();
  EXPECT_FALSE(p.Wait(milliseconds(200)).has_value());
  const auto waited = SteadyClock::now() - start;
  EXPECT_GE(waited, milliseconds(200));
  EXPECT_LT(waited, milliseconds(2'000));
  EXPECT_FALSE(p.Wait(milliseconds(0)).has_value()) << "zero only looks";
  EXPECT_TRUE(p.running());
  p.Kill();
  EXPECT_FALSE(p.running());
}

TEST_P(ProcessTest, WaitReturnsWhenTheChildExits) {
  ASSERT_OK_AND_ASSIGN(Process p, Spawn(Shell("sleep 0.1")));
  const auto start = SteadyClock::now();
  std::optional<ExitStatus> s = p.Wait(milliseconds(30'000));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->code, 0);
  EXPECT_LT(SteadyClock::now() - start, milliseconds(5'000));
}

TEST_P(ProcessTest, ExitedLooksWithoutReaping) {
  ASSERT_OK_AND_ASSIGN(Process p, Spawn(Shell("exit 4")));
  const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
  while (p.Exited() != std::optional<bool>(true) && SteadyClock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  ASSERT_EQ(p.Exited(), std::optional<bool>(true));
  EXPECT_TRUE(p.running()) << "not reaped yet";
  EXPECT_EQ(FindExitedChild(), std::optional<pid_t>(p.pid())) << "and not reaped by the look";
  std::optional<ExitStatus> s = p.Wait(milliseconds(0));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->code, 4);
  EXPECT_EQ(FindExitedChild(), std::nullopt);
}

TEST(Process, ReapChildOfAStrangerIsLost) { EXPECT_EQ(ReapChild(1).kind, ExitStatus::Kind::kLost); }

TEST_P(ProcessTest, DescriptorsAreNotInherited) {
  const int leaked = open("/dev/null", O_RDONLY);  // not close-on-exec
  ASSERT_GE(leaked, 3);
  SpawnOptions o = Shell("if [ -e /proc/self/fd/" + std::to_string(leaked) +
                         " ]; then echo open; else echo closed; fi");
  o.stdout_spec = StdioSpec::Pipe();
  ASSERT_OK_AND_ASSIGN(Process p, Spawn(o));
  EXPECT_EQ(ReadAll(p.stdout_pipe()), "closed\n");
  ASSERT_TRUE(p.Wait(milliseconds(10'000)).has_value());
  close(leaked);
}

TEST(Process, OnlyListedDescriptorsAreInherited) {
  // Neither is close-on-exec: only the listed one may reach the child.
  const int leaked = open("/dev/null", O_RDONLY);
  const int kept = open("/dev/null", O_RDONLY);
  ASSERT_GE(leaked, 3);
  ASSERT_GE(kept, 3);
  const std::string check = "for fd in " + std::to_string(leaked) + " " + std::to_string(kept) +
                            "; do if [ -e /proc/self/fd/$fd ]; then echo open $fd; else echo "
                            "closed $fd; fi; done";
  SpawnOptions o = Shell(check);
  o.stdout_spec = StdioSpec::Pipe();
  o.keep_fds = {kept};
  ASSERT_OK_AND_ASSIGN(Process p, Process::Spawn(o));
  const std::string out = ReadAll(p.stdout_pipe());
  EXPECT_EQ(out, "closed " + std::to_string(leaked) + "\nopen " + std::to_string(kept) + "\n");
  ASSERT_TRUE(p.Wait(milliseconds(10'000)).has_value());
  close(leaked);
  close(kept);
}

TEST_P(ProcessTest, EnvironmentAndDirectoryAreTheOnesGiven) {
  TempDir dir;
  SpawnOptions o = Shell("echo \"A=$A HOME=$HOME\"; pwd");
  o.env = {"A=b c"};
  o.cwd = dir.path();
  o.stdout_spec = StdioSpec::Pipe();
  ASSERT_OK_AND_ASSIGN(Process p, Spawn(o));
  const std::string out = ReadAll(p.stdout_pipe());
  EXPECT_EQ(out, "A=b c HOME=\n" + std::filesystem::canonical(dir.path()).string() + "\n");
  ASSERT_TRUE(p.Wait(milliseconds(10'000)).has_value());
}

TEST_P(ProcessTest, PipesCarryStdinAndStderr) {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "cat; echo oops >&2"};
  o.stdin_spec = StdioSpec::Pipe();
  o.stdout_spec = StdioSpec::Pipe();
  o.stderr_spec = StdioSpec::Pipe();
  ASSERT_OK_AND_ASSIGN(Process p, Spawn(o));
  ASSERT_EQ(write(p.stdin_pipe().get(), "hello\n", 6), 6);
  p.stdin_pipe().Reset();
  EXPECT_EQ(ReadAll(p.stdout_pipe()), "hello\n");
  EXPECT_EQ(ReadAll(p.stderr_pipe()), "oops\n");
  ASSERT_TRUE(p.Wait(milliseconds(10'000)).has_value());
}

TEST_P(ProcessTest, MissingProgramIsAnError) {
  SpawnOptions o;
  o.argv = {"/nonexistent/program", "x"};
  Result<Process> p = Spawn(o);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("cannot run /nonexistent/program"));
  EXPECT_THAT(p.status().message(), HasSubstr("No such file or directory"));
  EXPECT_EQ(FindExitedChild(), std::nullopt) << "the failed child was reaped";
}

TEST_P(ProcessTest, BadDirectoryOrRelativeProgramIsAnError) {
  SpawnOptions o = Shell("exit 0");
  o.cwd = "/nonexistent/dir";
  Result<Process> p = Spawn(o);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("in /nonexistent/dir"));

  SpawnOptions relative;
  relative.argv = {"sh", "-c", "exit 0"};
  EXPECT_EQ(Spawn(relative).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(Spawn(SpawnOptions{}).status().code(), ErrorCode::kInvalidArgument);

  SpawnOptions bad_keep = Shell("exit 0");
  bad_keep.keep_fds = {1};
  EXPECT_EQ(Spawn(bad_keep).status().code(), ErrorCode::kInvalidArgument);
}

TEST_P(ProcessTest, DestructionKillsAndReapsTheGroup) {
  pid_t pid = -1;
  {
    ASSERT_OK_AND_ASSIGN(Process p, Spawn(Shell("sleep 100")));
    pid = p.pid();
  }
  EXPECT_NE(kill(pid, 0), 0) << "killed and reaped: the pid is no longer ours";
}

TEST(Process, ParentDeathSignalFiresWhenTheSpawningThreadEnds) {
  Process p;
  std::thread spawner([&p] {
    SpawnOptions o = Shell("sleep 100");
    o.parent_death_signal = SIGKILL;
    Result<Process> r = Process::Spawn(o);
    if (r.ok()) p = std::move(r).value();
  });
  spawner.join();
  ASSERT_TRUE(p.running());
  std::optional<ExitStatus> s = p.Wait(milliseconds(10'000));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->ToString(), "killed by signal SIGKILL");
}

TEST_P(ProcessTest, WithoutANewGroupTheChildSharesOurs) {
  SpawnOptions o = Shell("sleep 100");
  o.new_process_group = false;
  ASSERT_OK_AND_ASSIGN(Process p, Spawn(o));
  EXPECT_EQ(getpgid(p.pid()), getpgrp());
  p.SignalGroup(SIGKILL);  // the child only: this test process survives
  std::optional<ExitStatus> s = p.Wait(milliseconds(10'000));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->signal, SIGKILL);
}

}  // namespace
}  // namespace taskengine
