#include "api/json_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "api/router.h"
#include "core/canonical_json.h"

namespace taskengine::api {
namespace {

std::string TypeName(const nlohmann::json& v) {
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  return v.type_name();
}

std::string Quote(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 100)) out += (static_cast<unsigned char>(c) < 0x20 ? '?' : c);
  if (s.size() > 100) out += "...";
  return out + "'";
}

}  // namespace

Status CheckJsonDepth(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return InvalidArgument("JSON nested deeper than " + std::to_string(max_depth) +
                               " levels (at byte " + std::to_string(i) + ")");
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return Status::Ok();
}

Result<nlohmann::json> ParseJsonBody(const HttpRequest& request, bool allow_empty) {
  if (const std::string* type = request.Header("content-type")) {
    std::string_view t(*type);
    std::string_view media = t.substr(0, t.find(';'));
    while (!media.empty() && media.back() == ' ') media.remove_suffix(1);
    constexpr std::string_view kJson = "application/json";
    const bool json = media.size() == kJson.size() &&
                      std::equal(media.begin(), media.end(), kJson.begin(), [](char a, char b) {
                        return (a >= 'A' && a <= 'Z' ? static_cast<char>(a - 'A' + 'a') : a) == b;
                      });
    if (!json) {
      return InvalidArgument("Content-Type must be application/json, not " + Quote(*type));
    }
  }
  std::string_view body(request.body);
  bool blank = body.find_first_not_of(" \t\r\n") == std::string_view::npos;
  if (blank) {
    if (allow_empty) return nlohmann::json::object();
    return InvalidArgument("a JSON request body is required");
  }
  TE_RETURN_IF_ERROR(CheckJsonDepth(body));
  try {
    nlohmann::json parsed = nlohmann::json::parse(body);
    // What nlohmann::json lets through but would change the meaning: a
    // duplicate key (the last one wins there), an integer beyond 64 bits or a
    // nonzero number that underflows (rounded there). The canonical parser
    // refuses them, so a payload, a result or a config keeps every value the
    // client sent, digit for digit (issue 13, finding 8).
    Result<std::string> exact = CanonicalizeJson(
        body, CanonicalJsonOptions{.max_depth = kMaxJsonDepth, .require_object = false});
    if (!exact.ok()) return InvalidArgument("invalid JSON body: " + exact.status().message());
    return parsed;
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at ..." -> "parse error at ..."
    std::size_t close = what.find("] ");
    if (what.rfind("[json.exception.", 0) == 0 && close != std::string::npos) {
      what = what.substr(close + 2);
    }
    return InvalidArgument("malformed JSON body: " + what);
  }
}

StrictObject::StrictObject(const nlohmann::json& value, std::string context)
    : value_(value), context_(std::move(context)) {
  read_.reserve(8);
  if (!value_.is_object()) {
    error_ = InvalidArgument(context_ + " must be a JSON object, not " + TypeName(value_));
  }
}

const nlohmann::json* StrictObject::Lookup(std::string_view field) {
  if (std::find(read_.begin(), read_.end(), field) == read_.end()) read_.emplace_back(field);
  if (!error_.ok()) return nullptr;
  auto it = value_.find(field);
  if (it == value_.end()) return nullptr;
  return &*it;
}

void StrictObject::Fail(std::string_view field, std::string_view problem) {
  if (!error_.ok()) return;
  error_ =
      InvalidArgument(context_ + ": field '" + std::string(field) + "' " + std::string(problem));
}

void StrictObject::Require(std::string_view field) {
  const nlohmann::json* v = Lookup(field);
  if (error_.ok() && (v == nullptr || v->is_null())) Fail(field, "is required");
}

const nlohmann::json* StrictObject::Value(std::string_view field) { return Lookup(field); }

std::optional<std::string> StrictObject::String(std::string_view field, std::size_t max_bytes) {
  const nlohmann::json* v = Lookup(field);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_string()) {
    Fail(field, "must be a string, not " + TypeName(*v));
    return std::nullopt;
  }
  const std::string& s = v->get_ref<const std::string&>();
  if (s.size() > max_bytes) {
    Fail(field, "is longer than " + std::to_string(max_bytes) + " bytes");
    return std::nullopt;
  }
  return s;
}

std::optional<bool> StrictObject::Bool(std::string_view field) {
  const nlohmann::json* v = Lookup(field);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_boolean()) {
    Fail(field, "must be a boolean, not " + TypeName(*v));
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<std::vector<std::string>> StrictObject::Strings(std::string_view field,
                                                              std::size_t max_items,
                                                              std::size_t max_bytes) {
  const nlohmann::json* v = Lookup(field);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_array() || v->size() > max_items) {
    Fail(field, "must be an array of at most " + std::to_string(max_items) + " strings");
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const nlohmann::json& item : *v) {
    if (!item.is_string()) {
      Fail(field, "must hold only strings, not " + TypeName(item));
      return std::nullopt;
    }
    if (item.get_ref<const std::string&>().size() > max_bytes) {
      Fail(field, "holds a string longer than " + std::to_string(max_bytes) + " bytes");
      return std::nullopt;
    }
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::optional<std::int64_t> StrictObject::Int(std::string_view field, std::int64_t min,
                                              std::int64_t max) {
  const nlohmann::json* v = Lookup(field);
  if (v == nullptr || v->is_null()) return std::nullopt;
  // Built only for an answer that needs it.
  const auto range = [&] { return "[" + std::to_string(min) + ", " + std::to_string(max) + "]"; };
  std::int64_t out = 0;
  if (v->is_number_unsigned()) {
    auto u = v->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      Fail(field, "must be an integer in " + range());
      return std::nullopt;
    }
    out = static_cast<std::int64_t>(u);
  } else if (v->is_number_integer()) {
    out = v->get<std::int64_t>();
  } else if (v->is_number_float()) {
    double d = v->get<double>();
    if (!std::isfinite(d) || std::trunc(d) != d || d < -9.2e18 || d > 9.2e18) {
      Fail(field, "must be an integer in " + range());
      return std::nullopt;
    }
    out = static_cast<std::int64_t>(d);
  } else {
    Fail(field, "must be an integer, not " + TypeName(*v));
    return std::nullopt;
  }
  if (out < min || out > max) {
    Fail(field, "must be an integer in " + range());
    return std::nullopt;
  }
  return out;
}

Status StrictObject::Finish() const {
  if (!error_.ok()) return error_;
  std::string unknown;
  for (auto it = value_.begin(); it != value_.end(); ++it) {
    if (std::find(read_.begin(), read_.end(), it.key()) == read_.end()) {
      unknown += (unknown.empty() ? "" : ", ") + Quote(it.key());
    }
  }
  if (unknown.empty()) return Status::Ok();
  std::vector<std::string> names = read_;
  std::sort(names.begin(), names.end());
  std::string known;
  for (const std::string& k : names) known += (known.empty() ? "" : ", ") + k;
  return InvalidArgument(context_ + ": unknown field(s) " + unknown + "; known fields: " + known);
}

Result<QueryParams> QueryParams::Parse(std::string_view query) {
  QueryParams out;
  std::size_t start = 0;
  while (start <= query.size()) {
    std::size_t amp = query.find('&', start);
    std::string_view pair = query.substr(start, amp == std::string_view::npos ? amp : amp - start);
    if (!pair.empty()) {
      std::size_t eq = pair.find('=');
      auto name = PercentDecode(pair.substr(0, eq), /*plus_is_space=*/true);
      auto value = eq == std::string_view::npos
                       ? std::optional<std::string>("")
                       : PercentDecode(pair.substr(eq + 1), /*plus_is_space=*/true);
      if (!name || !value) return InvalidArgument("malformed percent-encoding in the query string");
      for (const auto& [n, v] : out.params_) {
        if (n == *name) return InvalidArgument("query parameter " + Quote(*name) + " given twice");
      }
      out.params_.emplace_back(std::move(*name), std::move(*value));
    }
    if (amp == std::string_view::npos) break;
    start = amp + 1;
  }
  return out;
}

Status QueryParams::RejectUnknown(std::initializer_list<std::string_view> known) const {
  for (const auto& [name, value] : params_) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || k == name;
    if (!ok) {
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      return InvalidArgument("unknown query parameter " + Quote(name) +
                             (list.empty() ? "; this resource takes none" : "; known: " + list));
    }
  }
  return Status::Ok();
}

const std::string* QueryParams::Get(std::string_view name) const {
  for (const auto& [n, v] : params_) {
    if (n == name) return &v;
  }
  return nullptr;
}

Result<std::int64_t> ParseInteger(std::string_view text, std::int64_t min, std::int64_t max,
                                  std::string_view what) {
  // Built only for an answer that needs it.
  const auto err = [&] {
    return InvalidArgument(std::string(what) + " must be an integer in [" + std::to_string(min) +
                           ", " + std::to_string(max) + "], not " + Quote(text));
  };
  std::string_view digits = text;
  bool negative = false;
  if (!digits.empty() && digits.front() == '-') {
    negative = true;
    digits.remove_prefix(1);
  }
  if (digits.empty() || digits.size() > 19 || (digits.size() > 1 && digits.front() == '0')) {
    return err();
  }
  std::uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return err();
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return err();
  }
  std::int64_t out = negative ? -static_cast<std::int64_t>(v) : static_cast<std::int64_t>(v);
  if (out < min || out > max) return err();
  return out;
}

}  // namespace taskengine::api
