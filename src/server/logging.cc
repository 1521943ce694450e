#include "server/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>

#include "server/time_format.h"

namespace taskengine {
namespace {

// One JSON object per record; the message is escaped properly (invalid UTF-8
// is replaced, never emitted raw).
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(msg.time.time_since_epoch()).count();
    const auto level = spdlog::level::to_string_view(msg.level);
    nlohmann::json j = {
        {"time", FormatIso8601(ms)},
        {"level", std::string(level.data(), level.size())},
        {"msg", std::string(msg.payload.data(), msg.payload.size())},
    };
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

}  // namespace

void ConfigureLogging(LogFormat format, bool verbose) {
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

}  // namespace taskengine
