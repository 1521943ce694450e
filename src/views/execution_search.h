// The execution search (I1, seed 001's "execution history searchable by job,
// store, status"): its parameters as GET /api/v1/executions and
// `taskengine execution:list` take them, parsed once into an ExecutionFilter,
// and the page they answer with.
//
// Parameters (API query names; the CLI's flags are the same with "--" and
// "-" for "_"):
//   job          a job name
//   tenant       a tenant id
//   status       statuses, comma-separated (any of them)
//   trigger      triggers, comma-separated: scheduled, manual, api, retry, replay
//   queued_from, queued_to   RFC 3339 times: queued at or after / before
//   ended_from, ended_to     RFC 3339 times: ended (finished) at or after / before
//   limit        1..1000 (default 50)
//   cursor       the next_cursor of a previous page
//   offset       0..10000: page-number pagination; the answer carries "total"
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "storage/store.h"
#include "taskengine/status.h"
#include "views/views.h"

namespace taskengine {

// Default page size of a search.
inline constexpr int kDefaultSearchLimit = 50;

// The parameters of a search by name (unknown names are the caller's check).
using SearchParams = std::map<std::string, std::string, std::less<>>;

// The filter the parameters ask for, with_total when `offset` is given.
// kInvalidArgument naming the parameter (as `label_prefix` + name, e.g. "--"
// for the CLI, which also spells "_" as "-") for a malformed value, a range
// whose end is not after its start, or cursor and offset together.
Result<ExecutionFilter> ParseExecutionSearch(const SearchParams& params,
                                             std::string_view label_prefix = "");

// {"items": [Execution without payload...], "next_cursor": "..." | null} and,
// when the filter asked for it, "total", "total_is_lower_bound", "offset" and
// "limit".
Json SearchPageToJson(const ExecutionPage& page, const ExecutionFilter& filter);

}  // namespace taskengine
