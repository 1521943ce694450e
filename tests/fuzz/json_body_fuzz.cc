// libFuzzer target for the strict input parsing of src/api/json_util (RD17):
// request bodies (ParseJsonBody with its depth limit), the field-by-field
// StrictObject reader, query strings, integers and RFC 3339 times.
//
// The first input byte selects options (Content-Type header present or not,
// empty body allowed or not); the rest is the body, also used as a query
// string and as integer/time text. Properties checked (a violation aborts,
// which libFuzzer reports as a crash):
//   - every failure is kInvalidArgument with a non-empty message;
//   - an accepted body nests no deeper than kMaxJsonDepth (CheckJsonDepth agrees);
//   - an accepted body serializes and parses back to an equal value;
//   - StrictObject.Finish() on an object reports an error exactly when a read
//     failed or a field was left unread;
//   - an accepted time formats back to a time that parses to the same instant;
//   - nothing crashes, hangs or trips ASan/UBSan.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "api/http_types.h"
#include "api/json_util.h"
#include "core/time_text.h"
#include "taskengine/status.h"

namespace {

using taskengine::ErrorCode;
using taskengine::Status;
namespace api = taskengine::api;

// 9999-12-31T23:59:59.999Z.
constexpr std::int64_t kLastMillisOf9999 = 253'402'300'799'999;

void CheckError(const Status& s) {
  TE_CHECK(s.code() == ErrorCode::kInvalidArgument);
  TE_CHECK(!s.message().empty());
}

// Reads an object the way the dispatch route does, then checks Finish().
void ReadLikeARoute(const nlohmann::json& body) {
  api::StrictObject in(body, "request body");
  (void)in.String("tenant", 50);
  (void)in.Value("payload");
  (void)in.String("run_at", 40);
  (void)in.Int("delay_ms", 0, 365LL * 24 * 3600 * 1000);
  (void)in.Bool("wait");
  (void)in.Int("parent", 1, std::numeric_limits<std::int64_t>::max());
  in.Require("idempotency_key");
  (void)in.String("idempotency_key", 200);
  const Status finished = in.Finish();
  if (!finished.ok()) CheckError(finished);
  if (!in.ok()) TE_CHECK(!finished.ok());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t flags = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  api::HttpRequest request;
  request.method = api::HttpMethod::kPost;
  request.body = std::string(text);
  switch (flags & 3) {
    case 0:
      break;  // no Content-Type: accepted
    case 1:
      request.headers.emplace_back("content-type", "application/json");
      break;
    case 2:
      request.headers.emplace_back("content-type", "application/json; charset=utf-8");
      break;
    default:
      request.headers.emplace_back("content-type", "text/plain");
      break;
  }
  const bool allow_empty = (flags & 4) != 0;

  auto body = api::ParseJsonBody(request, allow_empty);
  if (!body.ok()) {
    CheckError(body.status());
  } else {
    TE_CHECK((flags & 3) != 3);  // text/plain is always refused
    TE_CHECK(api::CheckJsonDepth(text).ok());
    const std::string dumped = body->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    const auto again = nlohmann::json::parse(dumped, nullptr, /*allow_exceptions=*/false);
    TE_CHECK(!again.is_discarded());
    // NaN cannot appear (JSON has none), so values compare equal after a round
    // trip unless a string held invalid UTF-8 that dump() replaced.
    if (dumped == body->dump(-1, ' ', false, nlohmann::json::error_handler_t::ignore)) {
      TE_CHECK(again == *body);
    }
    if (body->is_object()) ReadLikeARoute(*body);
  }

  const Status depth = api::CheckJsonDepth(text, 8);
  if (!depth.ok()) CheckError(depth);

  auto query = api::QueryParams::Parse(text);
  if (!query.ok()) {
    CheckError(query.status());
  } else {
    const Status unknown = query->RejectUnknown({"job", "tenant", "status", "limit", "cursor"});
    if (!unknown.ok()) CheckError(unknown);
    if (const std::string* limit = query->Get("limit")) {
      auto n = api::ParseInteger(*limit, 1, 1000, "limit");
      if (!n.ok()) CheckError(n.status());
      if (n.ok()) TE_CHECK(*n >= 1 && *n <= 1000);
    }
  }

  auto n = api::ParseInteger(text, -1000, std::numeric_limits<std::int64_t>::max(), "n");
  if (!n.ok()) {
    CheckError(n.status());
  } else {
    TE_CHECK(*n >= -1000);
  }

  auto when = taskengine::ParseTime(text, "run_at");
  if (!when.ok()) {
    CheckError(when.status());
  } else if (*when >= 0 && *when <= kLastMillisOf9999) {
    // An offset may carry an accepted local time out of the formattable range.
    auto back = taskengine::ParseTime(taskengine::FormatTime(*when), "run_at");
    TE_CHECK(back.ok() && *back == *when);
  }
  return 0;
}
