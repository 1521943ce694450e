// The `command` handler: config parsing, the line protocol, checkpoints and
// the timeout policy. See command_handler.h for the contract. Starting,
// signalling and reaping the process is platform/process.h's.
//
// One call runs one command on the calling thread with a single poll() loop
// that feeds stdin, drains stdout and stderr, watches the leader's exit (its
// pidfd when the kernel has them, else a kExitPollTick tick) and enforces the
// timeout and the checkpoint interval. Nothing is shared between calls.

#include "handlers/command_handler.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <utility>

#include "core/utf8.h"
#include "platform/process.h"
#include "platform/sigpipe.h"
#include "taskengine/status.h"

namespace taskengine {
namespace {

using SteadyClock = std::chrono::steady_clock;
using TimePoint = SteadyClock::time_point;
using std::chrono::milliseconds;

using Json = nlohmann::json;

constexpr int kExitTempFail = 75;  // sysexits.h EX_TEMPFAIL
constexpr int kExitDataErr = 65;   // sysexits.h EX_DATAERR
constexpr std::size_t kReadChunk = 64 * 1024;
// Bytes read from one stream before going back to poll(), so a chatty command
// cannot starve the timeout and checkpoint checks.
constexpr std::size_t kMaxReadPerWake = 1 << 20;
// After SIGKILL of a group whose leader has exited, how long to wait for the
// pipes to close (they stay open only if a process escaped the group).
constexpr milliseconds kPostKillDrain{500};
// Longest timeout honoured; larger values are clamped (avoids overflow).
constexpr Millis kMaxCommandTimeoutMs = 365LL * 24 * 3600 * 1000;
constexpr std::size_t kMaxErrorLineBytes = 512;
// Protocol lines nested deeper than this are treated as text (bounds the
// recursion of JSON serialization).
constexpr int kMaxProtocolDepth = 64;
constexpr std::string_view kTruncatedMark = " [truncated]";
constexpr std::string_view kReservedEnvPrefix = "TASKENGINE_";

// What the job definition's config asks to run.
struct CommandSpec {
  std::vector<std::string> argv;
  std::string cwd;  // empty: the server's working directory
  std::vector<std::pair<std::string, std::string>> env;
  std::optional<Millis> timeout_ms;
};

bool IsValidEnvName(std::string_view name) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0)) return false;
  }
  return true;
}

bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

// Parses and validates the handler config. kInvalidArgument says what is wrong.
Result<CommandSpec> ParseConfig(const std::string& config_json) {
  const Json config = Json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return InvalidArgument("command config is not valid JSON");
  if (!config.is_object()) return InvalidArgument("command config must be a JSON object");
  for (const auto& [key, value] : config.items()) {
    if (key != "argv" && key != "cwd" && key != "env" && key != "timeout_ms") {
      return InvalidArgument("command config has unknown key \"" + key +
                             "\" (known: argv, cwd, env, timeout_ms)");
    }
  }

  CommandSpec spec;
  const auto argv = config.find("argv");
  if (argv == config.end()) return InvalidArgument("command config needs \"argv\"");
  if (!argv->is_array() || argv->empty()) {
    return InvalidArgument("command config \"argv\" must be a non-empty array of strings");
  }
  for (const Json& arg : *argv) {
    if (!arg.is_string()) {
      return InvalidArgument("command config \"argv\" must be a non-empty array of strings");
    }
    const auto& s = arg.get_ref<const std::string&>();
    if (HasNul(s)) return InvalidArgument("command config \"argv\" contains a NUL byte");
    spec.argv.push_back(s);
  }
  if (spec.argv[0].find('/') == std::string::npos) {
    return InvalidArgument("command config argv[0] \"" + spec.argv[0] +
                           "\" must be a path (contain '/'); there is no PATH search, "
                           "use e.g. [\"/usr/bin/env\", \"" +
                           spec.argv[0] + "\", ...]");
  }

  if (const auto cwd = config.find("cwd"); cwd != config.end()) {
    if (!cwd->is_string() || cwd->get_ref<const std::string&>().empty() ||
        HasNul(cwd->get_ref<const std::string&>())) {
      return InvalidArgument("command config \"cwd\" must be a non-empty string");
    }
    spec.cwd = cwd->get<std::string>();
  }

  if (const auto env = config.find("env"); env != config.end()) {
    if (!env->is_object()) {
      return InvalidArgument("command config \"env\" must be an object of strings");
    }
    for (const auto& [name, value] : env->items()) {
      if (!IsValidEnvName(name)) {
        return InvalidArgument("command config \"env\" has an invalid variable name \"" + name +
                               "\"");
      }
      if (name.starts_with(kReservedEnvPrefix)) {
        return InvalidArgument("command config \"env\" may not set " + name +
                               " (TASKENGINE_* is reserved)");
      }
      if (!value.is_string() || HasNul(value.get_ref<const std::string&>())) {
        return InvalidArgument("command config \"env\" value of " + name + " must be a string");
      }
      spec.env.emplace_back(name, value.get<std::string>());
    }
  }

  if (const auto timeout = config.find("timeout_ms"); timeout != config.end()) {
    if (!timeout->is_number_integer() || timeout->get<std::int64_t>() <= 0) {
      return InvalidArgument("command config \"timeout_ms\" must be a positive integer");
    }
    spec.timeout_ms = timeout->get<std::int64_t>();
  }
  return spec;
}

// NAME=value entries in the order set; a later Set of the same name replaces.
class EnvBuilder {
 public:
  void Set(std::string_view name, std::string_view value) {
    std::string entry = std::string(name) + "=" + std::string(value);
    for (std::string& e : entries_) {
      if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=') {
        e = std::move(entry);
        return;
      }
    }
    entries_.push_back(std::move(entry));
  }
  const std::vector<std::string>& entries() const { return entries_; }

 private:
  std::vector<std::string> entries_;
};

// Starts the command in its own process group, with pipes for stdin, stdout
// and stderr and nothing else inherited (platform/process.h).
// kInvalidArgument: it cannot start (bad path, not executable, bad cwd), a
// permanent failure; kUnavailable: resources, retry.
Result<Process> Spawn(const CommandSpec& spec, std::vector<std::string> env) {
  SpawnOptions options;
  options.argv = spec.argv;
  options.env = std::move(env);
  options.cwd = spec.cwd;
  options.stdin_spec = StdioSpec::Pipe();
  options.stdout_spec = StdioSpec::Pipe();
  options.stderr_spec = StdioSpec::Pipe();
  return Process::Spawn(options);
}

// Splits a byte stream into lines, bounding memory: a line longer than
// `max_line_bytes` is cut there and the rest up to the newline discarded. A
// trailing '\r' is dropped. Not thread-safe.
class LineSplitter {
 public:
  explicit LineSplitter(std::size_t max_line_bytes)
      : max_(std::max<std::size_t>(max_line_bytes, 1)) {}

  // Calls on_line(std::string_view line, bool truncated) for each complete line.
  template <typename F>
  void Feed(std::string_view data, F&& on_line) {
    while (!data.empty()) {
      const std::size_t nl = data.find('\n');
      const std::string_view piece = data.substr(0, nl);
      Append(piece);
      if (nl == std::string_view::npos) return;
      Emit(on_line);
      data.remove_prefix(nl + 1);
    }
  }
  // At end of stream: emits an unterminated last line, if any.
  template <typename F>
  void Finish(F&& on_line) {
    if (!line_.empty() || truncated_) Emit(on_line);
  }

 private:
  void Append(std::string_view piece) {
    if (truncated_) return;
    const std::size_t room = max_ - line_.size();
    if (piece.size() > room) {
      line_.append(piece.substr(0, room));
      truncated_ = true;
    } else {
      line_.append(piece);
    }
  }
  template <typename F>
  void Emit(F& on_line) {
    std::string_view line = line_;
    if (!line.empty() && line.back() == '\r' && !truncated_) line.remove_suffix(1);
    on_line(line, truncated_);
    line_.clear();
    truncated_ = false;
  }

  const std::size_t max_;
  std::string line_;
  bool truncated_ = false;
};

// Whether the brackets of `json` nest at most `max_depth` deep (strings are
// skipped). A cheap guard before parsing untrusted output.
bool NestingAtMost(std::string_view json, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : json) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) return false;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return true;
}

// Turns the command's output lines into progress, logs and a result, within
// the log budget of the options. Not thread-safe.
class OutputSink {
 public:
  OutputSink(JobContext& ctx, const CommandHandlerOptions& options)
      : ctx_(ctx), options_(options) {}

  void OnStdoutLine(std::string_view line, bool truncated) {
    if (!truncated && HandleProtocol(line)) return;
    Log(LogLevel::kInfo, line, truncated);
  }

  void OnStderrLine(std::string_view line, bool truncated) {
    if (!line.empty()) {
      last_stderr_line_ = std::string(CutUtf8(line, kMaxErrorLineBytes));
    }
    Log(LogLevel::kWarn, line, truncated);
  }

  // Reports dropped lines, if any. Call once at the end.
  void Finish() {
    if (dropped_lines_ == 0) return;
    ctx_.Log(LogLevel::kWarn, std::to_string(dropped_lines_) + " output lines (" +
                                  std::to_string(dropped_bytes_) +
                                  " bytes) not logged: log limit of " +
                                  std::to_string(options_.max_log_bytes) + " bytes reached");
  }

  const std::optional<std::string>& result_json() const { return result_json_; }
  const std::string& last_stderr_line() const { return last_stderr_line_; }

 private:
  // Applies a protocol line. Returns false if `line` is not one (then it is
  // logged as text by the caller).
  bool HandleProtocol(std::string_view line) {
    const std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string_view::npos || line[start] != '{') return false;
    if (!NestingAtMost(line, kMaxProtocolDepth)) return false;
    const Json msg = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (msg.is_discarded() || !msg.is_object()) return false;

    bool handled = false;
    if (const auto progress = msg.find("progress");
        progress != msg.end() && progress->is_number()) {
      const double p = std::clamp(progress->get<double>(), 0.0, 100.0);
      ctx_.SetProgress(static_cast<int>(p));
      handled = true;
    }
    if (const auto log = msg.find("log"); log != msg.end() && log->is_string()) {
      LogLevel level = LogLevel::kInfo;
      if (const auto lv = msg.find("level"); lv != msg.end() && lv->is_string()) {
        level = ParseLogLevel(lv->get_ref<const std::string&>()).value_or(LogLevel::kInfo);
      }
      Log(level, log->get_ref<const std::string&>(), false);
      handled = true;
    }
    if (const auto result = msg.find("result"); result != msg.end()) {
      result_json_ = result->dump(-1, ' ', false, Json::error_handler_t::replace);
      handled = true;
    }
    return handled;
  }

  void Log(LogLevel level, std::string_view text, bool truncated) {
    std::string message;
    if (text.size() > options_.max_log_message_bytes) {
      text = CutUtf8(text, options_.max_log_message_bytes);
      truncated = true;
    }
    message.reserve(text.size() + kTruncatedMark.size());
    message.append(text);
    if (truncated) message.append(kTruncatedMark);
    if (log_bytes_ + message.size() > options_.max_log_bytes) {
      ++dropped_lines_;
      dropped_bytes_ += message.size();
      return;
    }
    log_bytes_ += message.size();
    ctx_.Log(level, message);
  }

  JobContext& ctx_;
  const CommandHandlerOptions& options_;
  std::optional<std::string> result_json_;
  std::string last_stderr_line_;
  std::size_t log_bytes_ = 0;
  std::size_t dropped_lines_ = 0;
  std::size_t dropped_bytes_ = 0;
};

enum class StopReason { kNone, kTimeout, kCanceled, kLost };

// Everything one call needs; lives on the calling thread's stack.
class CommandRun {
 public:
  CommandRun(JobContext& ctx, const CommandHandlerOptions& options, Process child,
             milliseconds timeout)
      : ctx_(ctx),
        options_(options),
        child_(std::move(child)),
        timeout_(timeout),
        sink_(ctx, options),
        stdout_lines_(options.max_line_bytes),
        stderr_lines_(options.max_line_bytes) {}

  // If Run() did not finish (an exception escaped), the command must not
  // outlive the call: destroying child_ kills its group and reaps it.
  ~CommandRun() = default;
  CommandRun(const CommandRun&) = delete;
  CommandRun& operator=(const CommandRun&) = delete;

  // Runs the command to its end. Call once.
  HandlerResult Run() {
    const TimePoint start = SteadyClock::now();
    const TimePoint deadline = start + timeout_;
    next_checkpoint_ = start + options_.checkpoint_interval;
    if (ctx_.payload_json().empty()) child_.stdin_pipe().Reset();

    while (true) {
      const TimePoint now = SteadyClock::now();
      if (!exited_) {
        // Not reaped yet: while the leader is a zombie its pid (= the group
        // id) cannot be reused, so signalling the group stays safe.
        const std::optional<bool> exited = child_.Exited();
        if (!exited.has_value()) {
          lost_child_ = true;
          exited_ = true;
        } else if (*exited) {
          exited_ = true;
        }
        if (exited_) exit_at_ = now;
      }
      if (!exited_ && stop_ == StopReason::kNone) {
        if (now >= deadline) {
          stop_ = StopReason::kTimeout;
        } else if (now >= next_checkpoint_) {
          next_checkpoint_ = now + options_.checkpoint_interval;
          const LeaseState state = ctx_.Checkpoint();
          if (state == LeaseState::kCancelRequested) stop_ = StopReason::kCanceled;
          if (state == LeaseState::kLost) stop_ = StopReason::kLost;
        }
        if (stop_ != StopReason::kNone) {
          child_.SignalGroup(SIGTERM);
          term_at_ = now;
          child_.stdin_pipe().Reset();
        }
      }
      if (!exited_ && stop_ != StopReason::kNone && !killed_ &&
          now >= term_at_ + options_.kill_grace) {
        KillGroup(now);
      }
      if (exited_) {
        if (!child_.stdout_pipe().valid() && !child_.stderr_pipe().valid()) break;
        if (!killed_ && now >= exit_at_ + options_.exit_drain) KillGroup(now);
        if (killed_ && now >= std::max(killed_at_, exit_at_) + kPostKillDrain) break;
      }
      PollOnce(WakeTime(deadline), now);
    }

    FinishStreams();
    // Whatever is left of the group goes before the leader is reaped. A
    // leader that is not ours (reaped elsewhere) is only forgotten.
    if (!lost_child_) child_.SignalGroup(SIGKILL);
    const ExitStatus status =
        child_.Wait(lost_child_ ? milliseconds(0) : milliseconds::max()).value_or(ExitStatus{});
    sink_.Finish();
    return Outcome(status);
  }

 private:
  void KillGroup(TimePoint now) {
    child_.SignalGroup(SIGKILL);
    killed_ = true;
    killed_at_ = now;
  }

  TimePoint WakeTime(TimePoint deadline) const {
    if (!exited_) {
      if (stop_ == StopReason::kNone) return std::min(deadline, next_checkpoint_);
      if (!killed_) return term_at_ + options_.kill_grace;
      return TimePoint::max();  // killed: wait for the exit
    }
    if (killed_) return std::max(killed_at_, exit_at_) + kPostKillDrain;
    return exit_at_ + options_.exit_drain;
  }

  void PollOnce(TimePoint wake, TimePoint now) {
    pollfd fds[4];
    int n = 0;
    int in_idx = -1, out_idx = -1, err_idx = -1, pid_idx = -1;
    if (child_.stdin_pipe().valid()) {
      in_idx = n;
      fds[n++] = {child_.stdin_pipe().get(), POLLOUT, 0};
    }
    if (child_.stdout_pipe().valid()) {
      out_idx = n;
      fds[n++] = {child_.stdout_pipe().get(), POLLIN, 0};
    }
    if (child_.stderr_pipe().valid()) {
      err_idx = n;
      fds[n++] = {child_.stderr_pipe().get(), POLLIN, 0};
    }
    if (!exited_ && child_.pidfd() >= 0) {
      pid_idx = n;
      fds[n++] = {child_.pidfd(), POLLIN, 0};
    }
    milliseconds wait = milliseconds::max();
    if (wake != TimePoint::max()) {
      wait = std::chrono::ceil<milliseconds>(std::max(wake - now, SteadyClock::duration::zero()));
    }
    if (!exited_ && child_.pidfd() < 0) wait = std::min(wait, kExitPollTick);
    const int timeout_ms =
        wait == milliseconds::max()
            ? -1
            : static_cast<int>(std::min<milliseconds::rep>(wait.count(), 60'000));
    const int ready = poll(fds, static_cast<nfds_t>(n), timeout_ms);
    if (ready <= 0) return;  // timeout or EINTR: the loop re-checks the clock
    (void)pid_idx;           // a readable pidfd just wakes us; the loop checks
    if (in_idx >= 0 && fds[in_idx].revents != 0) WriteStdin();
    if (out_idx >= 0 && fds[out_idx].revents != 0) {
      ReadStream(child_.stdout_pipe(), stdout_lines_, /*is_stdout=*/true);
    }
    if (err_idx >= 0 && fds[err_idx].revents != 0) {
      ReadStream(child_.stderr_pipe(), stderr_lines_, /*is_stdout=*/false);
    }
  }

  void WriteStdin() {
    const std::string& payload = ctx_.payload_json();
    while (written_ < payload.size()) {
      const ssize_t w =
          ::write(child_.stdin_pipe().get(), payload.data() + written_, payload.size() - written_);
      if (w > 0) {
        written_ += static_cast<std::size_t>(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == EAGAIN) return;
      break;  // EPIPE (the command does not read) or another error: stop feeding
    }
    child_.stdin_pipe().Reset();
  }

  void ReadStream(UniqueFd& fd, LineSplitter& lines, bool is_stdout) {
    char buf[kReadChunk];
    std::size_t total = 0;
    while (total < kMaxReadPerWake) {
      const ssize_t r = ::read(fd.get(), buf, sizeof(buf));
      if (r > 0) {
        total += static_cast<std::size_t>(r);
        Dispatch(lines, std::string_view(buf, static_cast<std::size_t>(r)), is_stdout);
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && errno == EAGAIN) return;
      // EOF or error: the stream is over.
      FinishStream(fd, lines, is_stdout);
      return;
    }
  }

  void Dispatch(LineSplitter& lines, std::string_view data, bool is_stdout) {
    if (is_stdout) {
      lines.Feed(data, [this](std::string_view l, bool t) { sink_.OnStdoutLine(l, t); });
    } else {
      lines.Feed(data, [this](std::string_view l, bool t) { sink_.OnStderrLine(l, t); });
    }
  }

  void FinishStream(UniqueFd& fd, LineSplitter& lines, bool is_stdout) {
    if (is_stdout) {
      lines.Finish([this](std::string_view l, bool t) { sink_.OnStdoutLine(l, t); });
    } else {
      lines.Finish([this](std::string_view l, bool t) { sink_.OnStderrLine(l, t); });
    }
    fd.Reset();
  }

  // Flushes partial lines of streams still open (given up on).
  void FinishStreams() {
    if (child_.stdout_pipe().valid()) FinishStream(child_.stdout_pipe(), stdout_lines_, true);
    if (child_.stderr_pipe().valid()) FinishStream(child_.stderr_pipe(), stderr_lines_, false);
    child_.stdin_pipe().Reset();
  }

  std::string WithStderr(std::string msg) const {
    if (!sink_.last_stderr_line().empty()) msg += ": " + sink_.last_stderr_line();
    return msg;
  }

  HandlerResult Outcome(const ExitStatus& status) const {
    switch (stop_) {
      case StopReason::kTimeout:
        return HandlerResult::Retryable("timed out after " + std::to_string(timeout_.count()) +
                                        " ms");
      case StopReason::kCanceled:
        return HandlerResult::Canceled();
      case StopReason::kLost:
        return HandlerResult::Retryable("lease lost");
      case StopReason::kNone:
        break;
    }
    if (status.kind == ExitStatus::Kind::kLost) {
      return HandlerResult::Retryable(
          "lost track of the command's exit status (was the child reaped elsewhere?)");
    }
    if (status.signaled()) {
      return HandlerResult::Retryable(WithStderr("killed by " + SignalName(status.signal)));
    }
    const int code = status.code;
    if (code == 0) return HandlerResult::Success(sink_.result_json().value_or(""));
    if (code == kExitTempFail) {
      return HandlerResult::Retryable(WithStderr("exit code 75 (temporary failure)"));
    }
    if (code == kExitDataErr) {
      return HandlerResult::Permanent(WithStderr("exit code 65 (permanent failure)"));
    }
    if (code == kCommandExitAmbiguous) {
      return HandlerResult::Ambiguous(WithStderr("exit code 76 (effect outcome unknown)"));
    }
    return HandlerResult::Retryable(WithStderr("exit code " + std::to_string(code)));
  }

  // Constant after construction.
  JobContext& ctx_;
  const CommandHandlerOptions& options_;
  Process child_;
  const milliseconds timeout_;

  OutputSink sink_;
  LineSplitter stdout_lines_;
  LineSplitter stderr_lines_;
  std::size_t written_ = 0;
  bool exited_ = false;
  bool lost_child_ = false;
  TimePoint exit_at_;
  StopReason stop_ = StopReason::kNone;
  TimePoint term_at_;
  bool killed_ = false;
  TimePoint killed_at_;
  TimePoint next_checkpoint_;
};

milliseconds ChooseTimeout(const CommandSpec& spec, const JobContext& ctx,
                           const CommandHandlerOptions& options) {
  Millis ms = options.default_timeout.count();
  if (spec.timeout_ms.has_value()) {
    ms = *spec.timeout_ms;
  } else if (ctx.timeout_ms() > 0) {
    ms = ctx.timeout_ms();
  }
  return milliseconds(std::clamp<Millis>(ms, 1, kMaxCommandTimeoutMs));
}

std::vector<std::string> BuildEnv(
    const JobContext& ctx, const CommandSpec& spec, const CommandHandlerOptions& options,
    const std::vector<std::pair<std::string, std::string>>& inherited) {
  EnvBuilder env;
  // Server variables first, so that the per-execution ones below replace any
  // that collide (EnvBuilder keeps the first position, the last value).
  for (const auto& [name, value] : options.server_env) {
    if (IsValidEnvName(name) && !HasNul(value)) env.Set(name, value);
  }
  env.Set("TASKENGINE_EXECUTION_ID", std::to_string(ctx.execution_id().value));
  env.Set("TASKENGINE_JOB", ctx.job().value);
  env.Set("TASKENGINE_ATTEMPT", std::to_string(ctx.attempt()));
  env.Set("TASKENGINE_TENANT", ctx.tenant().value);
  env.Set("TASKENGINE_CLAIM_VERSION", std::to_string(ctx.claim_version().value));
  env.Set("TASKENGINE_EFFECT_KEY_PREFIX", ctx.effect_key_prefix());
  env.Set("PATH", options.path);
  for (const auto& [name, value] : inherited) env.Set(name, value);
  for (const auto& [name, value] : spec.env) env.Set(name, value);
  return env.entries();
}

HandlerResult RunCommandHandler(
    JobContext& ctx, const CommandHandlerOptions& options,
    const std::vector<std::pair<std::string, std::string>>& inherited_env) {
  Result<std::string> config =
      ExpandNamedConfig(ctx.config_json(), kCommandProfileKey, options.profiles,
                        kCommandServerOwnedKeys, "[[command_profile]]");
  if (!config.ok()) return HandlerResult::Permanent(config.status().message());
  Result<CommandSpec> spec = ParseConfig(*config);
  if (!spec.ok()) return HandlerResult::Permanent(spec.status().message());

  // Do not start a command for an execution that is already stopping.
  switch (ctx.Checkpoint()) {
    case LeaseState::kCancelRequested:
      return HandlerResult::Canceled();
    case LeaseState::kLost:
      return HandlerResult::Retryable("lease lost");
    case LeaseState::kActive:
      break;
  }

  const milliseconds timeout = ChooseTimeout(*spec, ctx, options);
  std::vector<std::string> env = BuildEnv(ctx, *spec, options, inherited_env);

  ScopedSigpipeBlock sigpipe_block;
  Result<Process> child = Spawn(*spec, std::move(env));
  if (!child.ok()) {
    if (child.status().code() == ErrorCode::kInvalidArgument) {
      return HandlerResult::Permanent(child.status().message());
    }
    return HandlerResult::Retryable(child.status().message());
  }
  CommandRun run(ctx, options, std::move(child).value(), timeout);
  HandlerResult result = run.Run();
  return result;
}

}  // namespace

Status CheckCommandHandlerConfig(const std::string& config_json, const NamedConfigs& profiles) {
  TE_ASSIGN_OR_RETURN(std::string config,
                      ExpandNamedConfig(config_json, kCommandProfileKey, profiles,
                                        kCommandServerOwnedKeys, "[[command_profile]]"));
  return ParseConfig(config).status();
}

Handler MakeCommandHandler(CommandHandlerOptions options) {
  // The allowlisted variables are read once, here, so that handler calls never
  // touch the process environment (getenv races with setenv).
  std::vector<std::pair<std::string, std::string>> inherited;
  for (const std::string& name : options.env_allowlist) {
    if (!IsValidEnvName(name) || name.starts_with(kReservedEnvPrefix)) continue;
    if (const char* value = std::getenv(name.c_str()); value != nullptr) {
      inherited.emplace_back(name, value);
    }
  }
  return [options = std::move(options), inherited = std::move(inherited)](JobContext& ctx) {
    try {
      return RunCommandHandler(ctx, options, inherited);
    } catch (const std::exception& e) {
      return HandlerResult::Retryable(std::string("command handler failed: ") + e.what());
    }
  };
}

}  // namespace taskengine
