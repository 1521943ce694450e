// Errors of the taskengine C++ client: the API's error code and message (from
// its `{"error": {"code", "message", "details"}}` body) plus the HTTP status,
// or a transport failure (http_status 0, code "unavailable"). This header
// depends on nothing of the engine: the client speaks only the public HTTP API.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace taskengine_client {

// The outcome of one call. ok() when the server answered 2xx. Immutable.
class Status {
 public:
  // OK.
  Status() = default;
  // An error: `code` is the API's stable code ("stale", "not_found",
  // "conflict", "unavailable", ...). `http_status` is 0 when no HTTP answer
  // came (connection refused, reset, timeout).
  Status(int http_status, std::string code, std::string message,
         nlohmann::json details = nlohmann::json::object())
      : ok_(false),
        http_status_(http_status),
        code_(std::move(code)),
        message_(std::move(message)),
        details_(std::move(details)) {}

  static Status Ok() { return Status(); }
  // A failure of the transport (no HTTP answer).
  static Status Transport(std::string message) {
    return Status(0, "unavailable", std::move(message));
  }

  bool ok() const { return ok_; }
  int http_status() const { return http_status_; }
  const std::string& code() const { return code_; }
  const std::string& message() const { return message_; }
  const nlohmann::json& details() const { return details_; }

  // No HTTP answer came: worth retrying later (server down or restarting).
  bool transport_error() const { return !ok_ && http_status_ == 0; }
  // Worth retrying later: transport errors, 429 and 502/503/504.
  bool retryable() const {
    return transport_error() || http_status_ == 429 || http_status_ == 502 || http_status_ == 503 ||
           http_status_ == 504;
  }
  // The claim this call was about is no longer current (409 stale).
  bool stale() const { return !ok_ && code_ == "stale"; }
  bool not_found() const { return !ok_ && code_ == "not_found"; }

  // "ok", or "<code> (HTTP n): <message>".
  std::string ToString() const {
    if (ok_) return "ok";
    return code_ + " (HTTP " + std::to_string(http_status_) + "): " + message_;
  }

 private:
  bool ok_ = true;
  int http_status_ = 200;
  std::string code_;
  std::string message_;
  nlohmann::json details_ = nlohmann::json::object();
};

// A value or the Status of why there is none, shaped like std::expected.
// REQUIRES for value access: ok().
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace taskengine_client
