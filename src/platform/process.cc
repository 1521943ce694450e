// Process: fork/exec, signals, waits. See process.h for the contract.
//
// Two ways to start a child, one contract. posix_spawn (glibc: a vfork-style
// clone, no page tables copied) whenever it can do what is asked, which is
// the `command` handler's case in a server with a large heap; fork + execve
// when a parent-death signal or kept descriptors are asked for (posix_spawn
// cannot set the one, and its closefrom cannot spare the other). In the fork
// path everything the child needs (argv and envp arrays, the descriptors it
// gets, the ranges of descriptors to close) is prepared before fork, and the
// child makes system calls only, so a fork from a multi-threaded process is
// safe; a close-on-exec pipe carries the errno of a failed step back to the
// parent: end-of-file on it means execve succeeded.
#include "platform/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace taskengine {
namespace {

using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string ErrnoText(int err) {
  char buf[256];
  // GNU strerror_r: returns a pointer to the message (maybe not `buf`).
  return std::string(strerror_r(err, buf, sizeof(buf)));
}

// Whether a failure to start the program with this errno will happen again.
bool IsPermanentSpawnError(int err) {
  switch (err) {
    case ENOENT:
    case EACCES:
    case EPERM:
    case ENOEXEC:
    case ENOTDIR:
    case EISDIR:
    case ELOOP:
    case ENAMETOOLONG:
    case E2BIG:
    case EINVAL:
      return true;
    default:
      return false;
  }
}

// A copy of `fd` numbered >= 3 and close-on-exec, so that the child's dup2
// onto 0/1/2 never clobbers another of its sources.
Result<UniqueFd> DupAboveStdio(int fd) {
  const int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (copy < 0) return Unavailable("fcntl(F_DUPFD_CLOEXEC): " + ErrnoText(errno));
  return UniqueFd(copy);
}

// Moves `fd` above stdio (see DupAboveStdio) when it is 0, 1 or 2.
Status EnsureAboveStdio(UniqueFd& fd) {
  if (fd.get() > 2) return Status::Ok();
  TE_ASSIGN_OR_RETURN(fd, DupAboveStdio(fd.get()));
  return Status::Ok();
}

struct PipePair {
  UniqueFd read;
  UniqueFd write;
};

Result<PipePair> MakePipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Unavailable("pipe2: " + ErrnoText(errno));
  PipePair p{UniqueFd(fds[0]), UniqueFd(fds[1])};
  TE_RETURN_IF_ERROR(EnsureAboveStdio(p.read));
  TE_RETURN_IF_ERROR(EnsureAboveStdio(p.write));
  return p;
}

Status SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return Unavailable("fcntl(O_NONBLOCK): " + ErrnoText(errno));
  }
  return Status::Ok();
}

// One standard stream: the descriptor the child dup2s onto 0/1/2 (invalid =
// inherit) and, for a pipe, the parent's end.
struct StdioPlan {
  UniqueFd child_end;
  UniqueFd parent_end;
};

// `to_child`: the data flows from the parent to the child (stdin).
Result<StdioPlan> PlanStdio(const StdioSpec& spec, bool to_child) {
  StdioPlan plan;
  switch (spec.kind) {
    case StdioSpec::Kind::kInherit:
      break;
    case StdioSpec::Kind::kNull: {
      UniqueFd null(open("/dev/null", (to_child ? O_RDONLY : O_WRONLY) | O_CLOEXEC));
      if (!null.valid()) return Unavailable("open /dev/null: " + ErrnoText(errno));
      TE_RETURN_IF_ERROR(EnsureAboveStdio(null));
      plan.child_end = std::move(null);
      break;
    }
    case StdioSpec::Kind::kPipe: {
      TE_ASSIGN_OR_RETURN(PipePair p, MakePipe());
      plan.child_end = std::move(to_child ? p.read : p.write);
      plan.parent_end = std::move(to_child ? p.write : p.read);
      break;
    }
    case StdioSpec::Kind::kFd: {
      if (spec.fd < 0 || fcntl(spec.fd, F_GETFD) < 0) {
        return InvalidArgument("descriptor " + std::to_string(spec.fd) +
                               " for a standard stream is not open");
      }
      TE_ASSIGN_OR_RETURN(plan.child_end, DupAboveStdio(spec.fd));
      break;
    }
  }
  return plan;
}

std::vector<char*> CStringArray(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// The highest descriptor number the child may hold.
int MaxFd() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    return static_cast<int>(std::min<rlim_t>(lim.rlim_cur, 1 << 20)) - 1;
  }
  return (1 << 20) - 1;
}

// Closes [first, last] in the child: close_range (Linux 5.9+), else one by one.
void CloseRange(int first, int last) {
  if (first > last) return;
  if (syscall(SYS_close_range, static_cast<unsigned>(first), static_cast<unsigned>(last), 0) == 0) {
    return;
  }
  for (int fd = first; fd <= last; ++fd) close(fd);
}

// In the child, after fork: reports `err` to the parent and exits.
[[noreturn]] void ChildFail(int report_fd, int err) {
  ssize_t unused = write(report_fd, &err, sizeof(err));
  (void)unused;
  _exit(127);
}

// Blocks every signal in the calling thread for its lifetime, so that no
// handler of ours runs in the child before it resets the dispositions.
class ScopedBlockAllSignals {
 public:
  ScopedBlockAllSignals() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old_);
  }
  ~ScopedBlockAllSignals() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  ScopedBlockAllSignals(const ScopedBlockAllSignals&) = delete;
  ScopedBlockAllSignals& operator=(const ScopedBlockAllSignals&) = delete;

 private:
  sigset_t old_;
};

// Waits up to `timeout` for `pidfd` to become readable (or, without one, for
// kExitPollTick at most); returns early on EINTR.
void AwaitExit(int pidfd, milliseconds timeout) {
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    const int ms = timeout == milliseconds::max()
                       ? -1
                       : static_cast<int>(std::min<milliseconds::rep>(timeout.count(), 60'000));
    (void)poll(&p, 1, ms);
    return;
  }
  const milliseconds nap = std::min(timeout, kExitPollTick);
  const timespec ts{static_cast<time_t>(nap.count() / 1000),
                    static_cast<long>((nap.count() % 1000) * 1'000'000)};
  nanosleep(&ts, nullptr);
}

// Starts the child with posix_spawn (vfork speed: no page tables are copied,
// which matters in a server with a large heap). The errno of a failed step
// (chdir, execve), or 0 with *pid set.
int PosixSpawn(const SpawnOptions& options, const int stdio_src[3], const std::vector<char*>& argv,
               const std::vector<char*>& envp, pid_t* pid) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  if (posix_spawn_file_actions_init(&actions) != 0) return ENOMEM;
  if (posix_spawnattr_init(&attr) != 0) {
    posix_spawn_file_actions_destroy(&actions);
    return ENOMEM;
  }
  int rc = 0;
  for (int target = 0; target < 3; ++target) {
    // dup2 clears close-on-exec on the target.
    if (stdio_src[target] >= 0) {
      rc |= posix_spawn_file_actions_adddup2(&actions, stdio_src[target], target);
    }
  }
  rc |= posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  if (!options.cwd.empty()) {
    rc |= posix_spawn_file_actions_addchdir_np(&actions, options.cwd.c_str());
  }
  sigset_t all;
  sigset_t none;
  sigfillset(&all);
  sigemptyset(&none);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (options.new_process_group) flags |= POSIX_SPAWN_SETPGROUP;
  rc |= posix_spawnattr_setflags(&attr, flags);
  rc |= posix_spawnattr_setpgroup(&attr, 0);
  rc |= posix_spawnattr_setsigmask(&attr, &none);
  rc |= posix_spawnattr_setsigdefault(&attr, &all);
  // glibc reports failures of the file actions and of execve as the result
  // (and reaps the child that failed).
  const int err =
      rc != 0 ? EINVAL : posix_spawn(pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return err;
}

// Starts the child with fork + execve, for what posix_spawn cannot do (a
// parent-death signal, descriptors kept under their numbers). The errno of a
// failed step in the child (which is then reaped), or 0 with *pid set; an
// error Status when fork or the report pipe fail.
Result<int> ForkExec(const SpawnOptions& options, const int stdio_src[3],
                     const std::vector<char*>& argv, const std::vector<char*>& envp, pid_t* pid) {
  TE_ASSIGN_OR_RETURN(PipePair report, MakePipe());
  // The ranges of descriptors the child closes: [3, max] minus the kept ones
  // and the report pipe (close-on-exec: execve closes it).
  std::vector<int> keep = options.keep_fds;
  keep.push_back(report.write.get());
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  std::vector<std::pair<int, int>> close_ranges;
  int next = 3;
  for (int fd : keep) {
    if (fd > next) close_ranges.emplace_back(next, fd - 1);
    next = fd + 1;
  }
  close_ranges.emplace_back(next, std::max(MaxFd(), next));
  const char* const cwd = options.cwd.empty() ? nullptr : options.cwd.c_str();
  const int report_fd = report.write.get();
  const pid_t parent = getpid();

  {
    ScopedBlockAllSignals block;
    *pid = fork();
    if (*pid == 0) {
      // The child: system calls only, from here to execve.
      if (options.new_process_group && setpgid(0, 0) != 0) ChildFail(report_fd, errno);
      if (options.parent_death_signal != 0) {
        if (prctl(PR_SET_PDEATHSIG, options.parent_death_signal) != 0) ChildFail(report_fd, errno);
        if (getppid() != parent) _exit(126);  // the parent went before prctl took effect
      }
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      for (int sig = 1; sig < NSIG; ++sig) {
        if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
      }
      for (int target = 0; target < 3; ++target) {
        // dup2 clears close-on-exec on the target.
        if (stdio_src[target] >= 0 && dup2(stdio_src[target], target) < 0) {
          ChildFail(report_fd, errno);
        }
      }
      for (const auto& [first, last] : close_ranges) CloseRange(first, last);
      for (int fd : options.keep_fds) {
        if (fcntl(fd, F_SETFD, 0) != 0) ChildFail(report_fd, errno);
      }
      if (cwd != nullptr && chdir(cwd) != 0) ChildFail(report_fd, errno);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      execve(argv[0], argv.data(), envp.data());
      ChildFail(report_fd, errno);
    }
  }
  if (*pid < 0) return Unavailable("fork: " + ErrnoText(errno));
  // In the parent, as in the child, so that whichever runs first, signals
  // reach the group.
  if (options.new_process_group) (void)setpgid(*pid, *pid);
  report.write.Reset();
  int child_errno = 0;
  ssize_t got = 0;
  do {
    got = read(report.read.get(), &child_errno, sizeof(child_errno));
  } while (got < 0 && errno == EINTR);
  if (got != sizeof(child_errno)) return 0;  // end-of-file: execve succeeded
  int status = 0;
  while (waitpid(*pid, &status, 0) < 0 && errno == EINTR) {
  }
  *pid = -1;
  return child_errno;
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    Reset();
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

void UniqueFd::Reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

ExitStatus ExitStatus::FromWaitStatus(int wait_status) {
  ExitStatus s;
  s.wait_status = wait_status;
  if (WIFEXITED(wait_status)) {
    s.kind = Kind::kExited;
    s.code = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    s.kind = Kind::kSignaled;
    s.signal = WTERMSIG(wait_status);
  }
  return s;
}

std::string ExitStatus::ToString() const {
  switch (kind) {
    case Kind::kExited:
      return "exited " + std::to_string(code);
    case Kind::kSignaled:
      return "killed by signal " + SignalName(signal);
    case Kind::kLost:
      break;
  }
  return "lost";
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  if (abbrev == nullptr) return "signal " + std::to_string(sig);
  return "SIG" + std::string(abbrev);
}

Result<Process> Process::Spawn(const SpawnOptions& options) {
  if (options.argv.empty() || options.argv[0].find('/') == std::string::npos) {
    return InvalidArgument(
        "cannot run " +
        (options.argv.empty() ? std::string("an empty argv") : "\"" + options.argv[0] + "\"") +
        ": the program must be a path (contain '/')");
  }
  for (int fd : options.keep_fds) {
    if (fd < 3 || fcntl(fd, F_GETFD) < 0) {
      return InvalidArgument("descriptor " + std::to_string(fd) +
                             " to keep is not open or is a standard stream");
    }
  }

  TE_ASSIGN_OR_RETURN(StdioPlan in, PlanStdio(options.stdin_spec, /*to_child=*/true));
  TE_ASSIGN_OR_RETURN(StdioPlan out, PlanStdio(options.stdout_spec, /*to_child=*/false));
  TE_ASSIGN_OR_RETURN(StdioPlan err, PlanStdio(options.stderr_spec, /*to_child=*/false));
  const std::vector<char*> argv = CStringArray(options.argv);
  const std::vector<char*> envp = CStringArray(options.env);
  const int stdio_src[3] = {in.child_end.get(), out.child_end.get(), err.child_end.get()};
  pid_t pid = -1;
  int child_errno = 0;
  if (options.parent_death_signal == 0 && options.keep_fds.empty()) {
    child_errno = PosixSpawn(options, stdio_src, argv, envp, &pid);
  } else {
    TE_ASSIGN_OR_RETURN(child_errno, ForkExec(options, stdio_src, argv, envp, &pid));
  }
  in.child_end.Reset();
  out.child_end.Reset();
  err.child_end.Reset();
  if (child_errno != 0) {
    std::string msg = "cannot run " + options.argv[0];
    if (!options.cwd.empty()) msg += " in " + options.cwd;
    msg += ": " + ErrnoText(child_errno);
    if (IsPermanentSpawnError(child_errno)) return InvalidArgument(std::move(msg));
    return Unavailable(std::move(msg));
  }

  Process process;
  process.pid_ = pid;
  process.own_group_ = options.new_process_group;
  const long pidfd = syscall(SYS_pidfd_open, pid, 0);  // close-on-exec by default
  if (pidfd >= 0) process.pidfd_ = UniqueFd(static_cast<int>(pidfd));
  process.stdin_ = std::move(in.parent_end);
  process.stdout_ = std::move(out.parent_end);
  process.stderr_ = std::move(err.parent_end);
  for (const UniqueFd* fd : {&process.stdin_, &process.stdout_, &process.stderr_}) {
    if (fd->valid()) {
      // On error the destructor of `process` kills and reaps the child.
      TE_RETURN_IF_ERROR(SetNonBlocking(fd->get()));
    }
  }
  return process;
}

Process::Process(Process&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)),
      own_group_(o.own_group_),
      pidfd_(std::move(o.pidfd_)),
      stdin_(std::move(o.stdin_)),
      stdout_(std::move(o.stdout_)),
      stderr_(std::move(o.stderr_)) {}

Process& Process::operator=(Process&& o) noexcept {
  if (this != &o) {
    Kill();
    pid_ = std::exchange(o.pid_, -1);
    own_group_ = o.own_group_;
    pidfd_ = std::move(o.pidfd_);
    stdin_ = std::move(o.stdin_);
    stdout_ = std::move(o.stdout_);
    stderr_ = std::move(o.stderr_);
  }
  return *this;
}

Process::~Process() { Kill(); }

void Process::Signal(int sig) const {
  if (pid_ > 0) kill(pid_, sig);
}

void Process::SignalGroup(int sig) const {
  if (pid_ <= 0) return;
  if (!own_group_) {
    kill(pid_, sig);
    return;
  }
  kill(-pid_, sig);
  if (getpgid(pid_) != pid_) kill(pid_, sig);
}

std::optional<bool> Process::Exited() const {
  if (pid_ <= 0) return std::nullopt;
  siginfo_t info;
  std::memset(&info, 0, sizeof(info));
  while (true) {
    if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0) {
      return info.si_pid != 0;
    }
    if (errno != EINTR) return std::nullopt;
  }
}

std::optional<ExitStatus> Process::Wait(milliseconds timeout) {
  if (pid_ <= 0) return ExitStatus{};
  const bool forever = timeout == milliseconds::max();
  const auto deadline = forever ? SteadyClock::time_point::max() : SteadyClock::now() + timeout;
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      Forget();
      return ExitStatus::FromWaitStatus(status);
    }
    if (r < 0 && errno != EINTR) {
      Forget();
      return ExitStatus{};  // kLost
    }
    if (r < 0) continue;  // EINTR
    const auto now = SteadyClock::now();
    if (now >= deadline) return std::nullopt;
    AwaitExit(pidfd_.get(),
              forever ? milliseconds::max() : std::chrono::ceil<milliseconds>(deadline - now));
  }
}

void Process::Kill() {
  if (pid_ <= 0) return;
  SignalGroup(SIGKILL);
  (void)Wait(milliseconds::max());
}

void Process::Forget() {
  pid_ = -1;
  pidfd_.Reset();
}

std::optional<pid_t> FindExitedChild() {
  siginfo_t info;
  while (true) {
    std::memset(&info, 0, sizeof(info));
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0) {
      if (info.si_pid == 0) return std::nullopt;
      return info.si_pid;
    }
    if (errno != EINTR) return std::nullopt;
  }
}

ExitStatus ReapChild(pid_t pid) {
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return ExitStatus::FromWaitStatus(status);
    if (r < 0 && errno == EINTR) continue;
    return ExitStatus{};
  }
}

}  // namespace taskengine
