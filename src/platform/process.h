// Child processes: start one, signal it or its process group, wait for it
// with a deadline, reap it, and say how it ended.
//
// The one place in the tree that forks: the `command` handler
// (src/handlers), `worker:manager` (apps/taskengine) and the test helpers
// that run the real binary (tests/cli/process_util.h) all start and
// supervise their children through Process.
//
// How a child starts (Process::Spawn): optionally in a new process group
// (the child leads it) and with a parent-death signal, every signal
// disposition reset to its default and the signal mask emptied,
// stdin/stdout/stderr connected as asked, every other descriptor closed
// except the ones listed to keep, chdir to the working directory, then
// execve of argv[0] (a path: no shell, no PATH search) with exactly the
// environment given. A failure of any step comes back to Spawn as an error
// (the child is reaped), so a Process that exists ran its program. It is
// posix_spawn (no page tables copied: cheap in a large server) unless a
// parent-death signal or kept descriptors are asked for, which posix_spawn
// cannot do: then fork + execve.
//
// Exits are watched through a pidfd when the kernel has pidfd_open (5.3+);
// without one, Wait looks every kExitPollTick. A Process owns its child until
// it is reaped: the destructor SIGKILLs (the group, when the child leads
// one) and reaps it, so no child of ours outlives its owner by accident.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "taskengine/status.h"

namespace taskengine {

// An owned file descriptor, closed on destruction. Not thread-safe.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Closes the descriptor, if any.
  void Reset();

 private:
  int fd_ = -1;
};

// Without a pidfd, how often Wait looks for the child's exit.
inline constexpr std::chrono::milliseconds kExitPollTick{50};

// What one of the child's standard streams is connected to.
struct StdioSpec {
  enum class Kind {
    kInherit,  // this process's own stream
    kNull,     // /dev/null
    kPipe,     // a pipe; the parent's end is in Process (non-blocking, close-on-exec)
    kFd,       // the descriptor `fd` (not owned; Spawn does not close it)
  };
  Kind kind = Kind::kNull;
  int fd = -1;  // kFd only

  static StdioSpec Inherit() { return {Kind::kInherit, -1}; }
  static StdioSpec Null() { return {Kind::kNull, -1}; }
  static StdioSpec Pipe() { return {Kind::kPipe, -1}; }
  static StdioSpec Fd(int fd) { return {Kind::kFd, fd}; }
};

struct SpawnOptions {
  // The program and its arguments. argv[0] is the path that is executed and
  // must contain a '/' (there is no PATH search). REQUIRES: not empty.
  std::vector<std::string> argv;
  // The whole environment of the child, "NAME=value" each. Default: empty.
  std::vector<std::string> env;
  // The child's working directory; empty = this process's. Default: empty.
  std::string cwd;
  // Default: all three /dev/null.
  StdioSpec stdin_spec;
  StdioSpec stdout_spec;
  StdioSpec stderr_spec;
  // Descriptors (each >= 3, open) the child keeps, under the same numbers;
  // every other descriptor >= 3 is closed in the child, whether or not it
  // was close-on-exec. Default: none.
  std::vector<int> keep_fds;
  // The child leads a new process group (its pgid = its pid), so that
  // SignalGroup reaches everything it starts. Default: true.
  bool new_process_group = true;
  // A signal the child gets when the thread that spawned it ends (Linux
  // PR_SET_PDEATHSIG; a child whose parent is already gone by then exits at
  // once with 126). 0 = none. Default: 0.
  int parent_death_signal = 0;
};

// How a reaped child ended.
struct ExitStatus {
  enum class Kind {
    kExited,    // it called exit(code)
    kSignaled,  // a signal killed it
    kLost,      // it was not ours to wait for (reaped elsewhere); nothing is known
  };
  Kind kind = Kind::kLost;
  int code = -1;        // kExited: the exit code; else -1
  int signal = 0;       // kSignaled: the signal number; else 0
  int wait_status = 0;  // the raw status of waitpid (kExited, kSignaled)

  // Decodes a waitpid status.
  static ExitStatus FromWaitStatus(int wait_status);
  bool exited() const { return kind == Kind::kExited; }
  bool signaled() const { return kind == Kind::kSignaled; }
  // "exited 3", "killed by signal SIGKILL", or "lost".
  std::string ToString() const;
};

// "SIGTERM" for SIGTERM; "signal N" for a number without a name.
std::string SignalName(int sig);

// A child process of this one. Move-only; not thread-safe (one owner at a
// time). Destruction of a Process whose child was not reaped SIGKILLs it
// (its group, when it leads one) and reaps it, blocking until it is gone.
class Process {
 public:
  // Starts a child as described at the top of this file. Errors:
  // kInvalidArgument when the program will not start on a retry either
  // (missing or not executable, a bad working directory, empty argv, a
  // descriptor to keep that is not open or < 3), naming the program, the
  // directory and the errno text; kUnavailable when resources failed (fork,
  // pipes, descriptors). Nothing is left running after an error.
  static Result<Process> Spawn(const SpawnOptions& options);

  Process() = default;  // no child
  Process(Process&& o) noexcept;
  Process& operator=(Process&& o) noexcept;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();

  // The child's pid (also its process group id when it leads one); -1 when
  // there is no child or it was reaped.
  pid_t pid() const { return pid_; }
  // Whether there is a child not reaped yet (it may have exited).
  bool running() const { return pid_ > 0; }

  // The parent's ends of the pipes asked for with StdioSpec::Pipe()
  // (non-blocking, close-on-exec); invalid otherwise. The caller may Reset()
  // them (e.g. stdin, to send end-of-file).
  UniqueFd& stdin_pipe() { return stdin_; }
  UniqueFd& stdout_pipe() { return stdout_; }
  UniqueFd& stderr_pipe() { return stderr_; }
  // Readable (POLLIN) once the child has exited; -1 when the kernel has no
  // pidfds (poll at kExitPollTick then) or after the child was reaped.
  int pidfd() const { return pidfd_.get(); }

  // Sends `sig` to the child. No-op once it was reaped.
  void Signal(int sig) const;
  // Sends `sig` to the child's process group, and to the child itself when
  // it has left that group (its pid stays ours until it is reaped, so this
  // never reaches a stranger). Without a group of its own: the child only.
  // No-op once it was reaped.
  void SignalGroup(int sig) const;

  // Whether the child has exited, without reaping it: while it is an
  // unreaped zombie its pid (= its group id) cannot be reused, so
  // SignalGroup stays safe. nullopt when it is not ours to wait for (reaped
  // elsewhere) or there is no child.
  std::optional<bool> Exited() const;

  // Waits up to `timeout` for the child to exit and reaps it. nullopt when it
  // still runs at the deadline (it stays owned); kLost when it was not ours
  // to wait for. milliseconds::max() waits as long as it takes; zero only
  // looks. REQUIRES: running().
  std::optional<ExitStatus> Wait(std::chrono::milliseconds timeout);

  // SIGKILLs the child (its group, when it leads one) and reaps it. No-op
  // when there is no child.
  void Kill();

 private:
  void Forget();  // the child was reaped: drop pid and pidfd

  pid_t pid_ = -1;
  bool own_group_ = false;
  UniqueFd pidfd_;
  UniqueFd stdin_;
  UniqueFd stdout_;
  UniqueFd stderr_;
};

// For a subreaper that also adopts orphans (worker:manager): a child of this
// process that has exited and is not reaped yet, left unreaped (its owner
// reaps it: Process::Wait, or ReapChild for an orphan); nullopt when none.
std::optional<pid_t> FindExitedChild();
// Reaps the exited child `pid` (one FindExitedChild named that no Process
// owns). Its status, or kLost when it is not an exited child of ours.
ExitStatus ReapChild(pid_t pid);

}  // namespace taskengine
