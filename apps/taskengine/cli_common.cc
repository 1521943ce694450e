#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli.h"
#include "core/time_text.h"
#include "server/logging.h"
#include "server/server.h"
#include "server/time_format.h"
#include "terminal_output.h"

namespace taskengine::cli {

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case ErrorCode::kOk:
      return kExitOk;
    case ErrorCode::kInvalidArgument:
      return kExitUsage;
    case ErrorCode::kNotFound:
      return kExitNotFound;
    case ErrorCode::kUnavailable:
      return kExitUnavailable;
    case ErrorCode::kConflict:
      return kExitConflict;
    case ErrorCode::kStale:
    case ErrorCode::kInternal:
    case ErrorCode::kUnauthenticated:
      return kExitOther;
  }
  return kExitOther;
}

int Fail(const Status& status) {
  std::cerr << "taskengine: " << status.message() << std::endl;
  return ExitCodeFor(status);
}

Result<ServerConfig> ResolveConfig(const GlobalFlags& flags) {
  std::string path = flags.config_path;
  if (path.empty()) {
    std::error_code ec;
    if (std::filesystem::is_regular_file("taskengine.toml", ec)) path = "./taskengine.toml";
  }
  TE_ASSIGN_OR_RETURN(ServerConfig config, LoadConfig(path));
  if (!flags.db.empty()) config.database_path = flags.db;
  return config;
}

Result<std::unique_ptr<Engine>> OpenClient(const GlobalFlags& flags, ServerConfig* config_out) {
  TE_ASSIGN_OR_RETURN(ServerConfig config, ResolveConfig(flags));
  ConfigureLogging(config.log_format, /*verbose=*/false);
  TE_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, OpenEngine(config, EngineMode::kClient));
  if (config_out != nullptr) *config_out = std::move(config);
  return engine;
}

void PrintJson(const nlohmann::ordered_json& doc) {
  std::cout << EscapeJsonForTerminal(
                   doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace))
            << std::endl;
}

void Printf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  std::string text(n > 0 ? static_cast<std::size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(text.data(), text.size() + 1, format, again);
  va_end(again);
  std::cout << text;
}

std::string ShortTime(Millis ms) {
  if (ms == 0) return "-";
  std::string t = FormatTime(ms);  // 2026-01-01T00:00:00.000Z
  return t.substr(0, 19) + "Z";
}

CLI::App* AddVerb(CLI::App& app, const std::string& name, const std::string& description) {
  std::string placeholder = name;
  for (char& ch : placeholder) {
    if (ch == ':') ch = '-';
  }
  return app.add_subcommand(placeholder, description)->name(name);
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

void Table::Print(std::ostream& out) const {
  // Escaped before the widths are measured, so escapes keep the columns aligned.
  std::vector<std::vector<std::string>> rows;
  for (const auto& row : rows_) {
    rows.emplace_back();
    for (const std::string& cell : row) rows.back().push_back(EscapeForTerminal(cell));
  }
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(width[i] - row[i].size() + 2, ' ');
    }
    out << line << '\n';
  }
  out.flush();
}

std::string Cut(const std::string& s, std::size_t max) {
  std::string line = s.substr(0, s.find('\n'));
  if (line.size() <= max) return line;
  return line.substr(0, max - 3) + "...";
}

}  // namespace taskengine::cli
