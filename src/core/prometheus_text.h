// Prometheus text exposition (format 0.0.4): the one writer of /metrics
// families, for every layer that contributes some (the API, the scheduler,
// retention). Header-only and dependency-free.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace taskengine {

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

}  // namespace taskengine
