#include "api/errors.h"

namespace taskengine::api {

HttpError HttpErrorFor(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return {400, "invalid_argument"};
    case ErrorCode::kNotFound:
      return {404, "not_found"};
    case ErrorCode::kConflict:
      return {409, "conflict"};
    case ErrorCode::kStale:
      return {409, "stale"};
    case ErrorCode::kUnavailable:
      return {503, "unavailable"};
    case ErrorCode::kUnauthenticated:
      return {401, "unauthenticated"};
    case ErrorCode::kInternal:
    case ErrorCode::kOk:
      break;
  }
  return {500, "internal"};
}

std::string DumpJson(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string DumpJson(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

HttpResponse ErrorResponse(int http_status, std::string_view code, std::string_view message,
                           const nlohmann::json& details) {
  nlohmann::ordered_json error;
  error["code"] = std::string(code);
  error["message"] = std::string(message);
  error["details"] = details.is_object() ? details : nlohmann::json::object();
  nlohmann::ordered_json body;
  body["error"] = std::move(error);
  HttpResponse response;
  response.status = http_status;
  response.body = DumpJson(body);
  return response;
}

HttpResponse StatusResponse(const Status& status, const nlohmann::json& details) {
  const HttpError mapped = HttpErrorFor(status.code());
  HttpResponse response = ErrorResponse(mapped.status, mapped.code, status.message(), details);
  if (mapped.status == 503) response.headers.emplace_back("Retry-After", "1");
  if (mapped.status == 401) {
    response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"taskengine\"");
  }
  return response;
}

HttpResponse JsonResponse(int http_status, const nlohmann::json& body) {
  HttpResponse response;
  response.status = http_status;
  response.body = DumpJson(body);
  return response;
}

HttpResponse JsonResponse(int http_status, const nlohmann::ordered_json& body) {
  HttpResponse response;
  response.status = http_status;
  response.body = DumpJson(body);
  return response;
}

}  // namespace taskengine::api
