// Text encodings of list columns and principal validation shared by the
// storage backends, so both store and check them the same way.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "taskengine/status.h"

namespace taskengine::storage_internal {

// "3,1,2" <-> {3, 1, 2}; non-digits other than commas are ignored.
std::vector<int> ParseIntList(std::string_view text);
std::string FormatIntList(const std::vector<int>& values);
// "a,b" <-> {"a", "b"}; empty items are dropped.
std::vector<std::string> SplitList(std::string_view text);
std::string JoinList(const std::vector<std::string>& items);
// kInvalidArgument for an unknown scope or a malformed tenant ("*" = all).
Status ValidatePrincipalLists(const std::vector<std::string>& scopes,
                              const std::vector<std::string>& tenants);

}  // namespace taskengine::storage_internal
