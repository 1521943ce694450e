// Strict input handling for the API (X3): JSON bodies with a depth limit,
// objects that refuse unknown fields and wrong types, query strings, times.
// Every failure is kInvalidArgument with a message that names the field, so a
// client hears exactly what to fix; nothing here throws.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/http_types.h"
#include "taskengine/clock.h"
#include "taskengine/status.h"

namespace taskengine::api {

// Nesting limit of request bodies; the top-level value is depth 1.
inline constexpr int kMaxJsonDepth = 64;

// kInvalidArgument when `text` nests arrays/objects deeper than `max_depth`.
// Does not validate the rest of the syntax. Linear, no recursion.
Status CheckJsonDepth(std::string_view text, int max_depth = kMaxJsonDepth);

// The body as JSON. Refuses a Content-Type other than application/json
// (absent is accepted), nesting deeper than kMaxJsonDepth, syntax errors (with
// the position), duplicate keys, and numbers that would not keep their value:
// integers outside [-2^63, 2^64-1] and nonzero numbers that overflow or
// underflow a double (see core/canonical_json.h). An empty body is `{}` when
// allow_empty, else an error.
Result<nlohmann::json> ParseJsonBody(const HttpRequest& request, bool allow_empty);

// Reads one JSON object field by field and refuses what it did not read.
// Not thread-safe. Typical use:
//
//   StrictObject in(body, "request body");
//   auto reason = in.String("reason", 1000);
//   TE_RETURN_IF_ERROR(in.Finish());
//
// A field that is absent or null reads as nullopt (use Value() to tell null
// apart). The first error wins; later reads return nullopt.
class StrictObject {
 public:
  // `context` names the object in messages ("request body", "items[3]").
  // `value` is not copied: it must outlive the StrictObject.
  StrictObject(const nlohmann::json& value, std::string context);
  StrictObject(nlohmann::json&& value, std::string context) = delete;

  // A string of at most `max_bytes` bytes.
  std::optional<std::string> String(std::string_view field, std::size_t max_bytes);
  std::optional<bool> Bool(std::string_view field);
  // An array of at most `max_items` strings of at most `max_bytes` bytes each.
  std::optional<std::vector<std::string>> Strings(std::string_view field, std::size_t max_items,
                                                  std::size_t max_bytes);
  // An integer in [min, max] (a JSON number with a fraction or an exponent
  // that is not integral is refused).
  std::optional<std::int64_t> Int(std::string_view field, std::int64_t min, std::int64_t max);
  // Any JSON value, null included; nullptr when absent.
  const nlohmann::json* Value(std::string_view field);
  // A required field: records "missing field" when absent or null.
  void Require(std::string_view field);

  // Records an error about `field` (e.g. from a check done by the caller).
  void Fail(std::string_view field, std::string_view problem);
  // The first error, else kInvalidArgument naming unknown fields (and the
  // known ones), else ok.
  Status Finish() const;
  bool ok() const { return error_.ok(); }

 private:
  const nlohmann::json* Lookup(std::string_view field);

  const nlohmann::json& value_;
  const std::string context_;
  // The fields read, in the order first read (a few: a vector of strings
  // short enough to need no allocation of their own).
  std::vector<std::string> read_;
  Status error_;
};

// A decoded query string. Repeated parameters are refused.
class QueryParams {
 public:
  static Result<QueryParams> Parse(std::string_view query);

  // kInvalidArgument naming the first parameter not in `known`.
  Status RejectUnknown(std::initializer_list<std::string_view> known) const;
  // nullptr when absent.
  const std::string* Get(std::string_view name) const;

 private:
  std::vector<std::pair<std::string, std::string>> params_;
};

// A decimal integer in [min, max] named `what` in the error; no sign '+',
// no spaces, no leading zeros beyond "0".
Result<std::int64_t> ParseInteger(std::string_view text, std::int64_t min, std::int64_t max,
                                  std::string_view what);

}  // namespace taskengine::api
