#include "api/http_wire.h"

#include <boost/beast/http/status.hpp>
#include <utility>
#include <vector>

namespace taskengine::api {
namespace {

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// The fields in the order they are written; setting one replaces every
// earlier field of its name and moves it to the end.
class Fields {
 public:
  explicit Fields(std::size_t expected) { fields_.reserve(expected); }
  void Set(std::string_view name, std::string_view value) {
    std::erase_if(fields_, [&](const auto& f) { return EqualsNoCase(f.first, name); });
    fields_.emplace_back(name, value);
  }
  const std::vector<std::pair<std::string_view, std::string_view>>& list() const { return fields_; }

 private:
  std::vector<std::pair<std::string_view, std::string_view>> fields_;
};

bool IsFramingField(std::string_view name) {
  return EqualsNoCase(name, "connection") || EqualsNoCase(name, "content-length") ||
         EqualsNoCase(name, "transfer-encoding");
}

// A 1xx, 204 or 304 response has no body (RFC 9110 §6.4.1).
bool HasNoBody(int status) {
  return (status >= 100 && status < 200) || status == 204 || status == 304;
}

void AppendValue(std::string& out, std::string_view value) {
  const std::size_t at = out.size();
  out.append(value);
  for (std::size_t i = at; i < out.size(); ++i) {
    if (out[i] == '\r' || out[i] == '\n' || out[i] == '\0') out[i] = ' ';
  }
}

}  // namespace

void AppendResponseBytes(std::string& out, const HttpResponse& response, unsigned version,
                         bool keep, std::string_view server_name, std::string_view date) {
  const int status = response.status;
  const std::string_view body = HasNoBody(status) ? std::string_view() : response.body;
  Fields fields(response.headers.size() + 6);
  fields.Set("Server", server_name);
  fields.Set("Date", date);
  if (!response.content_type.empty() && (!response.body.empty() || status != 204)) {
    fields.Set("Content-Type", response.content_type);
  }
  for (const auto& [name, value] : response.headers) {
    if (!IsFramingField(name)) fields.Set(name, value);
  }
  if (version >= 11 && !keep) fields.Set("Connection", "close");
  if (version < 11 && keep) fields.Set("Connection", "keep-alive");
  const std::string length = std::to_string(body.size());
  fields.Set("Content-Length", length);

  const auto code = static_cast<unsigned>(status);
  const boost::beast::string_view reason =
      boost::beast::http::obsolete_reason(static_cast<boost::beast::http::status>(code));
  std::size_t size = 13 + reason.size() + 2 + 2 + body.size();
  for (const auto& [name, value] : fields.list()) size += name.size() + value.size() + 4;
  out.reserve(out.size() + size);
  out += "HTTP/";
  out += static_cast<char>('0' + version / 10);
  out += '.';
  out += static_cast<char>('0' + version % 10);
  out += ' ';
  out += static_cast<char>('0' + code / 100 % 10);
  out += static_cast<char>('0' + code / 10 % 10);
  out += static_cast<char>('0' + code % 10);
  out += ' ';
  out.append(reason.data(), reason.size());
  out += "\r\n";
  for (const auto& [name, value] : fields.list()) {
    out += name;
    out += ": ";
    AppendValue(out, value);
    out += "\r\n";
  }
  out += "\r\n";
  out += body;
}

}  // namespace taskengine::api
