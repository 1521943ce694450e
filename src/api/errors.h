// The HTTP face of errors. Every error response of the API has the shape
//
//   {"error": {"code": "not_found", "message": "execution 42 not found", "details": {}}}
//
// `code` is stable (clients switch on it); `message` is for people. The one
// mapping from a domain Status to an HTTP status lives in HttpErrorFor().
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "api/http_types.h"
#include "taskengine/status.h"

namespace taskengine::api {

// The HTTP status and the stable error code of a domain error.
struct HttpError {
  int status = 500;
  std::string_view code;
};

// THE mapping of Status codes to HTTP (style.md: one function):
//   kInvalidArgument -> 400 "invalid_argument"
//   kNotFound        -> 404 "not_found"
//   kConflict        -> 409 "conflict"
//   kStale           -> 409 "stale"
//   kUnavailable     -> 503 "unavailable"
//   kInternal        -> 500 "internal"
//   kOk (a bug)      -> 500 "internal"
HttpError HttpErrorFor(ErrorCode code);

// A JSON error response. `details` must be an object (null = {}).
HttpResponse ErrorResponse(int http_status, std::string_view code, std::string_view message,
                           const nlohmann::json& details = nullptr);

// The response for a non-ok `status` via HttpErrorFor. 503 answers carry
// Retry-After: 1.
HttpResponse StatusResponse(const Status& status, const nlohmann::json& details = nullptr);

// A JSON success response. Strings that are not valid UTF-8 are replaced with
// U+FFFD instead of throwing.
HttpResponse JsonResponse(int http_status, const nlohmann::json& body);
HttpResponse JsonResponse(int http_status, const nlohmann::ordered_json& body);

// Serializes without ever throwing on invalid UTF-8 (replaced with U+FFFD).
std::string DumpJson(const nlohmann::json& j);
std::string DumpJson(const nlohmann::ordered_json& j);

}  // namespace taskengine::api
