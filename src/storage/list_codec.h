// Text encodings of list columns and principal validation shared by the
// storage backends, so both store and check them the same way.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "taskengine/status.h"
#include "taskengine/types.h"

namespace taskengine::storage_internal {

// {3, 1, 2} -> "3,1,2" (ints, Millis, ...).
template <typename Int>
std::string FormatIntList(const std::vector<Int>& values) {
  std::string out;
  for (Int v : values) {
    if (!out.empty()) out += ',';
    out += std::to_string(v);
  }
  return out;
}
// "3,1,2" -> {3, 1, 2}; non-digits other than commas are ignored.
std::vector<int> ParseIntList(std::string_view text);
// "1700000000000,1700000001000" -> {1700000000000, 1700000001000}; items
// that are not non-negative integers are dropped.
std::vector<Millis> ParseMillisList(std::string_view text);
// "42,7" <-> {42, 7}, at most `max` ids written; items that are not
// positive integers are dropped.
std::string FormatIdList(const std::vector<ExecutionId>& ids, std::size_t max);
std::vector<ExecutionId> ParseIdList(std::string_view text);
// "a,b" <-> {"a", "b"}; empty items are dropped.
std::vector<std::string> SplitList(std::string_view text);
std::string JoinList(const std::vector<std::string>& items);
// A claim's handler filter (ClaimRequest::handlers) as one text parameter:
// each name between unit separators (0x1f), "\x1fcommand\x1fhttp\x1f", so that
// `instr(list, char(31) || handler || char(31)) > 0` (SQLite) and `strpos`
// (PostgreSQL) match a job's handler exactly. An empty list matches nothing.
// kInvalidArgument for an empty name or one with a control character.
Result<std::string> HandlerFilter(const std::vector<std::string>& handlers);
// kInvalidArgument for an unknown scope or a malformed tenant ("*" = all).
Status ValidatePrincipalLists(const std::vector<std::string>& scopes,
                              const std::vector<std::string>& tenants);

}  // namespace taskengine::storage_internal
