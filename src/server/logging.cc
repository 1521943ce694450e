#include "server/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "core/time_text.h"
#include "server/time_format.h"

namespace taskengine {
namespace {

// Marks a payload made by LogEvent in JSON format: the marker, then one JSON
// object holding "msg" and the fields. The record separator cannot start an
// ordinary message worth logging.
constexpr char kFieldsMarker = '\x1e';

// Set once by ConfigureLogging (before threads log); read by LogEvent.
std::atomic<LogFormat> g_format{LogFormat::kText};

// One JSON object per record; the message is escaped properly (invalid UTF-8
// is replaced, never emitted raw).
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count();
    const auto level = spdlog::level::to_string_view(msg.level);
    const std::string ts = FormatTime(ms);
    std::string_view payload(msg.payload.data(), msg.payload.size());
    if (payload.size() > 2 && payload[0] == kFieldsMarker && payload[1] == '{' &&
        msg.logger_name.size() == 0) {
      // LogEvent's record: an object of "msg" and fields that never repeat
      // ts, time or level. The head is prepended instead of parsing it again.
      std::string head = "{\"ts\":\"" + ts + "\",\"time\":\"" + ts + "\",\"level\":\"";
      head.append(level.data(), level.size());
      head += "\",";
      dest.append(head.data(), head.data() + head.size());
      dest.append(payload.data() + 2, payload.data() + payload.size());
      dest.push_back('\n');
      return;
    }
    // Ordered: ts, time, level, msg first, then the fields as given.
    nlohmann::ordered_json j;
    j["ts"] = ts;
    j["time"] = ts;
    j["level"] = std::string(level.data(), level.size());
    j["msg"] = nullptr;
    nlohmann::ordered_json fields;
    if (!payload.empty() && payload.front() == kFieldsMarker) {
      fields = nlohmann::ordered_json::parse(payload.substr(1), nullptr,
                                             /*allow_exceptions=*/false);
    }
    if (fields.is_object()) {
      j["msg"] = fields.contains("msg") && fields["msg"].is_string() ? fields["msg"]
                                                                     : nlohmann::ordered_json("");
      for (auto& [key, value] : fields.items()) {
        if (!j.contains(key)) j[key] = value;
      }
    } else {
      j["msg"] = std::string(payload);
    }
    if (msg.logger_name.size() > 0) {
      j["logger"] = std::string(msg.logger_name.data(), msg.logger_name.size());
    }
    std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    line += '\n';
    dest.append(line.data(), line.data() + line.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>();
  }
};

// A text `value` of key=value: bare when it is a plain token, else JSON.
std::string TextValue(const nlohmann::ordered_json& value) {
  if (!value.is_string())
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const std::string& s = value.get_ref<const std::string&>();
  bool plain = !s.empty();
  for (unsigned char c : s) {
    if (c <= ' ' || c == '"' || c == '\\' || c == '=' || c >= 0x7f) plain = false;
  }
  return plain ? s : value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

void ConfigureLogging(LogFormat format, bool verbose) {
  g_format.store(format);
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  if (format == LogFormat::kJson) {
    sink->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    sink->set_formatter(std::make_unique<spdlog::pattern_formatter>(
        "%Y-%m-%dT%H:%M:%S.%eZ %l %v", spdlog::pattern_time_type::utc));
  }
  auto logger = std::make_shared<spdlog::logger>("", std::move(sink));
  logger->set_level(verbose ? spdlog::level::info : spdlog::level::warn);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(std::move(logger));
}

LogFormat CurrentLogFormat() { return g_format.load(); }

void LogEvent(spdlog::level::level_enum level, std::string_view msg,
              const nlohmann::ordered_json& fields) {
  if (!spdlog::should_log(level)) return;
  if (g_format.load() == LogFormat::kJson) {
    nlohmann::ordered_json record;
    record["msg"] = std::string(msg);
    if (fields.is_object()) {
      for (const auto& [key, value] : fields.items()) {
        if (key != "msg" && key != "ts" && key != "time" && key != "level") record[key] = value;
      }
    }
    std::string payload(1, kFieldsMarker);
    payload += record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    spdlog::log(level, "{}", payload);
    return;
  }
  std::string line(msg);
  if (fields.is_object()) {
    for (const auto& [key, value] : fields.items()) {
      line += ' ';
      line += key;
      line += '=';
      line += TextValue(value);
    }
  }
  spdlog::log(level, "{}", line);
}

void LogLifecycle(const LifecycleEvent& e) {
  if (!spdlog::should_log(spdlog::level::info)) return;
  using J = nlohmann::ordered_json;
  const std::string_view name = LifecycleEventName(e.kind);
  J f;
  f["event"] = std::string(name);
  if (e.kind == LifecycleKind::kWorkerStarted || e.kind == LifecycleKind::kWorkerStopped) {
    f["worker"] = e.worker;
    f["threads"] = e.threads;
    LogEvent(spdlog::level::info, name, f);
    return;
  }
  f["execution_id"] = std::to_string(e.id.value);
  f["job"] = e.job.value;
  f["tenant"] = e.tenant.value.empty() ? J(nullptr) : J(e.tenant.value);
  f["queue"] = e.queue;
  f["status"] = std::string(ToString(e.status));
  f["attempt"] = e.attempt;
  f["duration_ms"] = e.started_at > 0 ? J(std::max<Millis>(0, e.at - e.started_at)) : J(nullptr);
  f["failure_class"] = e.failure_class == FailureClass::kNone
                           ? J(nullptr)
                           : J(std::string(ToString(e.failure_class)));
  f["worker"] = e.worker.empty() ? J(nullptr) : J(e.worker);
  if (e.kind == LifecycleKind::kDispatched) f["trigger"] = std::string(ToString(e.trigger));
  if (e.status == ExecutionStatus::kQueued) f["run_at"] = FormatTime(e.run_at);
  LogEvent(spdlog::level::info, name, f);
}

}  // namespace taskengine
