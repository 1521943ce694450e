#include "process_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

extern char** environ;

namespace taskengine::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string TempPath(const char* what) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                     "/taskengine-cli-" + what + "-XXXXXX";
  int fd = mkstemp(path.data());
  if (fd >= 0) close(fd);
  return path;
}

void FillResult(int wait_status, ProcessResult* r) {
  const ExitStatus status = ExitStatus::FromWaitStatus(wait_status);
  if (status.exited()) r->exit_code = status.code;
  if (status.signaled()) r->term_signal = status.signal;
}

}  // namespace

std::string ProcessResult::Describe() const {
  std::string s = timed_out          ? "timed out"
                  : term_signal != 0 ? "signal " + std::to_string(term_signal)
                                     : "exit " + std::to_string(exit_code);
  return s + "; stderr: " + err + "; stdout: " + out.substr(0, 2000);
}

std::vector<std::string> ChildEnvironment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (std::strncmp(*e, "TASKENGINE_", 11) == 0) continue;
    env.emplace_back(*e);
  }
  // Tests run in parallel: a served API listens on an ephemeral port unless
  // the test names one.
  bool port_given = false;
  for (const std::string& e : extra)
    port_given = port_given || e.rfind("TASKENGINE_HTTP_PORT=", 0) == 0;
  if (!port_given) env.emplace_back("TASKENGINE_HTTP_PORT=0");
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

bool ChildProcess::Start(const std::vector<std::string>& argv, const SpawnOptions& options,
                         std::string* error) {
  Kill();
  const UniqueFd in(open(options.stdin_path.c_str(), O_RDONLY | O_CLOEXEC));
  const UniqueFd out(
      open(options.stdout_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  const UniqueFd err(
      open(options.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!in.valid() || !out.valid() || !err.valid()) {
    *error = std::string("open: ") + std::strerror(errno);
    return false;
  }
  taskengine::SpawnOptions spawn;
  spawn.argv = argv;
  spawn.env = options.env;
  spawn.cwd = options.cwd;
  spawn.stdin_spec = StdioSpec::Fd(in.get());
  spawn.stdout_spec = StdioSpec::Fd(out.get());
  spawn.stderr_spec = StdioSpec::Fd(err.get());
  spawn.new_process_group = false;
  spawn.parent_death_signal = SIGKILL;
  Result<Process> process = Process::Spawn(spawn);
  if (!process.ok()) {
    *error = process.status().message();
    return false;
  }
  process_ = std::move(process).value();
  return true;
}

void ChildProcess::Signal(int sig) { process_.Signal(sig); }

std::optional<int> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  if (!process_.running()) return std::nullopt;
  std::optional<ExitStatus> status = process_.Wait(timeout);
  if (!status.has_value() || status->kind == ExitStatus::Kind::kLost) return std::nullopt;
  return status->wait_status;
}

void ChildProcess::Kill() { process_.Kill(); }

ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& input,
                         std::chrono::milliseconds timeout, const std::vector<std::string>& env,
                         const std::string& cwd) {
  ProcessResult result;
  SpawnOptions o;
  o.env = env;
  o.cwd = cwd;
  o.stdin_path = TempPath("in");
  o.stdout_path = TempPath("out");
  o.stderr_path = TempPath("err");
  {
    std::ofstream f(o.stdin_path, std::ios::binary | std::ios::trunc);
    f << input;
  }
  ChildProcess child;
  std::string error;
  if (!child.Start(argv, o, &error)) {
    result.err = "could not start " + argv[0] + ": " + error;
  } else {
    std::optional<int> status = child.Wait(timeout);
    if (status) {
      FillResult(*status, &result);
    } else {
      child.Kill();
      result.timed_out = true;
    }
  }
  result.out = ReadFile(o.stdout_path);
  result.err += ReadFile(o.stderr_path);
  for (const std::string& p : {o.stdin_path, o.stdout_path, o.stderr_path}) unlink(p.c_str());
  return result;
}

bool WaitUntil(std::chrono::milliseconds timeout, const std::function<bool()>& done,
               std::chrono::milliseconds every) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    if (done()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(every);
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> out;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return out;
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat("/proc/" + name + "/stat");
    std::string line;
    std::getline(stat, line);
    const std::size_t paren = line.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(line.substr(paren + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent && state != 'Z') out.push_back(static_cast<pid_t>(std::stoi(name)));
  }
  closedir(dir);
  return out;
}

int PickStablePort() {
  int ephemeral_low = 32768;
  std::istringstream(ReadFile("/proc/sys/net/ipv4/ip_local_port_range")) >> ephemeral_low;
  const int high = std::max(ephemeral_low - 1, 2000);
  const int low = std::max(1024, high - 10'000);
  std::mt19937 random(std::random_device{}());
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int candidate = std::uniform_int_distribution<int>(low, high)(random);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(candidate));
    const bool free = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (free) return candidate;
  }
  return 0;
}

}  // namespace taskengine::testing
