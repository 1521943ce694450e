#include "storage/list_codec.h"

#include <algorithm>
#include <iterator>
#include <optional>

#include "taskengine/types.h"

namespace taskengine::storage_internal {

Result<std::string> HandlerFilter(const std::vector<std::string>& handlers) {
  std::string out(1, '\x1f');
  for (const std::string& h : handlers) {
    const bool control = std::any_of(h.begin(), h.end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
    });
    if (h.empty() || control) {
      return InvalidArgument("handler names are non-empty, without control characters");
    }
    out += h;
    out += '\x1f';
  }
  return out;
}

std::string FormatIdList(const std::vector<ExecutionId>& ids, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < ids.size() && i < max; ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ids[i].value);
  }
  return out;
}

namespace {

// A non-negative decimal of at most 18 digits, or nullopt.
std::optional<std::int64_t> ParseNonNegative(std::string_view item) {
  if (item.empty() || item.size() > 18) return std::nullopt;
  std::int64_t value = 0;
  for (char c : item) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

}  // namespace

std::vector<ExecutionId> ParseIdList(std::string_view text) {
  std::vector<ExecutionId> out;
  for (const std::string& item : SplitList(text)) {
    if (auto value = ParseNonNegative(item); value && *value > 0)
      out.push_back(ExecutionId(*value));
  }
  return out;
}

std::vector<Millis> ParseMillisList(std::string_view text) {
  std::vector<Millis> out;
  for (const std::string& item : SplitList(text)) {
    if (auto value = ParseNonNegative(item)) out.push_back(*value);
  }
  return out;
}

std::vector<int> ParseIntList(std::string_view text) {
  std::vector<int> out;
  int value = 0;
  bool digits = false;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      value = value * 10 + (c - '0');
      digits = true;
    } else if (c == ',' && digits) {
      out.push_back(value);
      value = 0;
      digits = false;
    }
  }
  if (digits) out.push_back(value);
  return out;
}

std::vector<std::string> SplitList(std::string_view text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    if (comma > start) out.emplace_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::string JoinList(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += ',';
    out += item;
  }
  return out;
}

Status ValidatePrincipalLists(const std::vector<std::string>& scopes,
                              const std::vector<std::string>& tenants) {
  static constexpr std::string_view kScopes[] = {"read", "dispatch", "operate", "admin", "worker"};
  for (const std::string& scope : scopes) {
    if (std::find(std::begin(kScopes), std::end(kScopes), scope) == std::end(kScopes)) {
      return InvalidArgument("unknown scope '" + scope +
                             "' (read, dispatch, operate, admin, worker)");
    }
  }
  for (const std::string& tenant : tenants) {
    if (tenant != "*" && !IsValidTenantId(tenant)) {
      return InvalidArgument("invalid tenant '" + tenant + "'");
    }
  }
  return Status::Ok();
}

}  // namespace taskengine::storage_internal
