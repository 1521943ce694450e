#include "views/execution_search.h"

#include <charconv>
#include <limits>
#include <vector>

#include "core/time_text.h"

namespace taskengine {
namespace {

// Parses one search; errors name parameters as the caller spells them.
class SearchParser {
 public:
  SearchParser(const SearchParams& params, std::string_view prefix)
      : params_(params), prefix_(prefix) {}

  const std::string* Get(std::string_view name) const {
    auto it = params_.find(name);
    return it == params_.end() ? nullptr : &it->second;
  }

  std::string Label(std::string_view name) const {
    std::string out(prefix_);
    for (char c : name) out += (!prefix_.empty() && c == '_') ? '-' : c;
    return out;
  }

  Status Invalid(std::string_view name, std::string_view what) const {
    return InvalidArgument(Label(name) + ": " + std::string(what));
  }

  Result<std::int64_t> Integer(std::string_view name, std::int64_t min, std::int64_t max) const {
    const std::string& text = *Get(name);
    std::int64_t n = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size() || n < min || n > max) {
      return Invalid(name,
                     "must be an integer in " + std::to_string(min) + ".." + std::to_string(max));
    }
    return n;
  }

  // 0 when absent.
  Result<Millis> Time(std::string_view name) const {
    const std::string* text = Get(name);
    if (text == nullptr) return Millis{0};
    return ParseTime(*text, Label(name));
  }

 private:
  const SearchParams& params_;
  std::string_view prefix_;
};

// "a,b" -> {"a", "b"}; empty items are kept (and refused by the caller).
std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::string StatusNames() {
  std::string names;
  for (int i = 0; i < kExecutionStatusCount; ++i) {
    names += (i ? ", " : "") + std::string(ToString(static_cast<ExecutionStatus>(i)));
  }
  return names;
}

// A time range [from, to): refused when to is not after from.
Status CheckRange(const SearchParser& p, std::string_view to_name, Millis from, Millis to) {
  if (from != 0 && to != 0 && to <= from) return p.Invalid(to_name, "must be after the start");
  return Status::Ok();
}

}  // namespace

Result<ExecutionFilter> ParseExecutionSearch(const SearchParams& params,
                                             std::string_view label_prefix) {
  const SearchParser p(params, label_prefix);
  ExecutionFilter f;
  f.limit = kDefaultSearchLimit;
  if (const std::string* job = p.Get("job")) {
    if (!IsValidJobName(*job)) return p.Invalid("job", "invalid job name");
    f.job = JobName(*job);
  }
  if (const std::string* t = p.Get("tenant")) {
    if (!IsValidTenantId(*t)) return p.Invalid("tenant", "must match [a-z0-9][a-z0-9_-]{0,49}");
    f.tenant = TenantId(*t);
  }
  if (const std::string* status = p.Get("status")) {
    for (const std::string& name : SplitCommas(*status)) {
      auto parsed = ParseExecutionStatus(name);
      if (!parsed) {
        return p.Invalid("status", "unknown status '" + name + "' (one of " + StatusNames() +
                                       "; several: comma-separated)");
      }
      f.statuses.push_back(*parsed);
    }
  }
  if (const std::string* trigger = p.Get("trigger")) {
    for (const std::string& name : SplitCommas(*trigger)) {
      auto parsed = ParseTrigger(name);
      if (!parsed) {
        return p.Invalid("trigger", "unknown trigger '" + name +
                                        "' (one of scheduled, manual, api, retry, replay; "
                                        "several: comma-separated)");
      }
      f.triggers.push_back(*parsed);
    }
  }
  TE_ASSIGN_OR_RETURN(f.queued_from, p.Time("queued_from"));
  TE_ASSIGN_OR_RETURN(f.queued_to, p.Time("queued_to"));
  TE_RETURN_IF_ERROR(CheckRange(p, "queued_to", f.queued_from, f.queued_to));
  TE_ASSIGN_OR_RETURN(f.ended_from, p.Time("ended_from"));
  TE_ASSIGN_OR_RETURN(f.ended_to, p.Time("ended_to"));
  TE_RETURN_IF_ERROR(CheckRange(p, "ended_to", f.ended_from, f.ended_to));
  if (p.Get("limit") != nullptr) {
    TE_ASSIGN_OR_RETURN(std::int64_t n, p.Integer("limit", 1, 1000));
    f.limit = static_cast<int>(n);
  }
  if (p.Get("cursor") != nullptr) {
    auto n = p.Integer("cursor", 1, std::numeric_limits<std::int64_t>::max());
    if (!n.ok()) return p.Invalid("cursor", "not a cursor of this API");
    f.before = ExecutionId(*n);
  }
  if (p.Get("offset") != nullptr) {
    if (p.Get("cursor") != nullptr) {
      return p.Invalid("offset", "give either " + p.Label("cursor") + " or " + p.Label("offset"));
    }
    TE_ASSIGN_OR_RETURN(std::int64_t n, p.Integer("offset", 0, kMaxListOffset));
    f.offset = static_cast<int>(n);
    f.with_total = true;
  }
  return f;
}

Json SearchPageToJson(const ExecutionPage& page, const ExecutionFilter& filter) {
  Json items = Json::array();
  for (const Execution& e : page.items) items.push_back(ExecutionToJson(e, /*with_payload=*/false));
  Json out = PageToJson(std::move(items), page.next_before.value);
  if (filter.with_total) {
    out["total"] = page.total;
    out["total_is_lower_bound"] = page.total_is_lower_bound;
    out["offset"] = filter.offset;
    out["limit"] = filter.limit;
  }
  return out;
}

}  // namespace taskengine
