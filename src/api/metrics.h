// Prometheus text exposition (format 0.0.4) for /metrics (product.md I5), and
// the counters the API's worker-protocol routes keep.
//
// Header-only so that code outside te_api (the composition root adding the
// scheduler's families) can write families the same way without a link
// dependency. Every metric this process exposes is listed in
// docs/operations.md, "Metrics and logs".
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace taskengine::api {

// Appends families and samples to a string. Each family must be announced
// once (Family) and its samples must follow it before the next family.
// Not thread-safe; the string is not owned.
class MetricsWriter {
 public:
  explicit MetricsWriter(std::string* out) : out_(out) {}

  // "# HELP <name> <help>\n# TYPE <name> <type>\n". `type` is "counter",
  // "gauge" or "histogram". `help` must not contain a newline.
  void Family(std::string_view name, std::string_view type, std::string_view help) {
    *out_ += "# HELP ";
    *out_ += name;
    *out_ += ' ';
    for (char c : help) {
      if (c == '\\') {
        *out_ += "\\\\";
      } else if (c == '\n') {
        *out_ += "\\n";
      } else {
        *out_ += c;
      }
    }
    *out_ += "\n# TYPE ";
    *out_ += name;
    *out_ += ' ';
    *out_ += type;
    *out_ += '\n';
  }

  // "<name><labels> <value>\n". `labels` is "" or "{k=\"v\",...}" with values
  // escaped by LabelValue().
  void Sample(std::string_view name, std::string_view labels, double value) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.15g", value);
    *out_ += name;
    *out_ += labels;
    *out_ += ' ';
    *out_ += buf;
    *out_ += '\n';
  }

  // A one-sample family.
  void Single(std::string_view name, std::string_view type, std::string_view help, double value) {
    Family(name, type, help);
    Sample(name, "", value);
  }

 private:
  std::string* const out_;
};

// A Prometheus label value: backslash, double quote and newline escaped.
inline std::string LabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// {name="value"} with the value escaped.
inline std::string Label(std::string_view name, std::string_view value) {
  std::string out = "{";
  out += name;
  out += "=\"";
  out += LabelValue(value);
  out += "\"}";
  return out;
}

// What the worker-protocol routes of one Api (remote workers, W4) did since
// it was constructed. Monotonic counters. Thread-safe.
struct ApiMetrics {
  std::atomic<std::int64_t> claims{0};            // leases handed to remote workers
  std::atomic<std::int64_t> completions{0};       // complete outcomes recorded
  std::atomic<std::int64_t> failed_retryable{0};  // fail outcomes recorded, by class
  std::atomic<std::int64_t> failed_permanent{0};
  std::atomic<std::int64_t> failed_ambiguous{0};
  std::atomic<std::int64_t> failed_unsupported_schema{0};  // fail with unsupported_schema
  // Calls or batch items answered `stale` (409 for a single call): the claim
  // version the worker sent is not current.
  std::atomic<std::int64_t> stale_rejections{0};
  // Effect reservations answered already_done (E1).
  std::atomic<std::int64_t> effect_duplicates{0};
};

}  // namespace taskengine::api
