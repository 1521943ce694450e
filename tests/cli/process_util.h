// Running the real `taskengine` binary from tests: a clean environment,
// captured output, bounded waits, and children that never outlive a failing
// test. Starting, signalling and reaping are platform/process.h's.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "platform/process.h"

namespace taskengine::testing {

// How a finished (or abandoned) process ended.
struct ProcessResult {
  int exit_code = -1;      // the exit status when it exited; -1 otherwise
  int term_signal = 0;     // the signal that killed it; 0 when it exited
  bool timed_out = false;  // it was SIGKILLed by RunProcess at the deadline
  std::string out;         // stdout
  std::string err;         // stderr
  // "exit 3", "signal 9", "timed out", plus stderr: for assertion messages.
  std::string Describe() const;
};

// The environment of children: this process's environment without any
// TASKENGINE_* variable (so a developer's shell cannot change what a test
// sees), plus `extra` ("NAME=value").
std::vector<std::string> ChildEnvironment(const std::vector<std::string>& extra = {});

struct SpawnOptions {
  std::vector<std::string> env = ChildEnvironment();
  std::string cwd;  // empty = the test's working directory
  std::string stdin_path = "/dev/null";
  std::string stdout_path = "/dev/null";  // opened for append
  std::string stderr_path = "/dev/null";  // opened for append
};

// A child process (Process, in the test's process group). The child gets
// SIGKILL when the thread that started it ends (PR_SET_PDEATHSIG), and the
// destructor SIGKILLs and reaps it if it still runs, so no child outlives a
// failed assertion. Not thread-safe.
class ChildProcess {
 public:
  ChildProcess() = default;
  ~ChildProcess() { Kill(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Starts argv[0] (an absolute path; no PATH search). False (with the reason
  // in *error) when the files cannot be opened or the program cannot be
  // started (fork fails, missing program, bad cwd).
  bool Start(const std::vector<std::string>& argv, const SpawnOptions& options, std::string* error);

  pid_t pid() const { return process_.pid(); }
  bool running() const { return process_.running(); }

  // Sends `sig` if it still runs.
  void Signal(int sig);
  // Waits up to `timeout` for it to end. The wait status (see waitpid) when it
  // ended, nullopt when it still runs at the deadline.
  std::optional<int> Wait(std::chrono::milliseconds timeout);
  // SIGKILL and reap, if it still runs.
  void Kill();

 private:
  Process process_;
};

// Runs argv to completion with `input` on stdin; SIGKILLs it at `timeout`.
ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& input,
                         std::chrono::milliseconds timeout,
                         const std::vector<std::string>& env = ChildEnvironment(),
                         const std::string& cwd = "");

// Polls `done` every `every` until it returns true (true) or `timeout` passes
// (false). `done` is called at least once.
bool WaitUntil(std::chrono::milliseconds timeout, const std::function<bool()>& done,
               std::chrono::milliseconds every = std::chrono::milliseconds(50));

// The whole file, or "" when it cannot be read.
std::string ReadFile(const std::string& path);

// The live (not zombie) processes whose parent is `parent`, from /proc.
std::vector<pid_t> ChildrenOf(pid_t parent);

// A loopback TCP port that is free right now, chosen BELOW the kernel's
// ephemeral range (ip_local_port_range) so that no outgoing connection of
// another process can take it while a server restarted on it is down. 0 when
// none of the tries could be bound.
int PickStablePort();

}  // namespace taskengine::testing
