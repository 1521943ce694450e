// Status and Result<T>: expected failures as values.
//
// Every boundary of taskengine (store, engine, CLI, API) reports expected
// failures with a small set of domain-named codes. Exceptions from libraries
// are caught in the adapter that calls them and converted to a Status; none
// cross a module boundary. Programmer errors use TE_CHECK instead.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace taskengine {

enum class ErrorCode {
  kOk = 0,
  kNotFound,         // the named thing does not exist (or is not visible to the caller)
  kConflict,         // idempotency conflict, illegal transition, duplicate name
  kStale,            // the claim version is not the current one; nothing changed
  kInvalidArgument,  // bad input; nothing changed
  kUnavailable,      // storage or a dependency cannot serve now (disk full, I/O error, busy)
  kInternal,         // a bug or an unexpected state; nothing is guessed
  // The credentials the request was accepted with no longer hold (an API
  // token revoked or expired before the commit); nothing changed.
  kUnauthenticated,
};

std::string_view ErrorCodeName(ErrorCode code);

// Immutable value. Cheap to copy when ok.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // Itself, so that code (and test macros) can treat Status and Result alike.
  const Status& status() const { return *this; }
  // "<code>: <message>", for logs and CLI output.
  std::string ToString() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status NotFound(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
inline Status Conflict(std::string m) { return {ErrorCode::kConflict, std::move(m)}; }
inline Status Stale(std::string m) { return {ErrorCode::kStale, std::move(m)}; }
inline Status InvalidArgument(std::string m) { return {ErrorCode::kInvalidArgument, std::move(m)}; }
inline Status Unavailable(std::string m) { return {ErrorCode::kUnavailable, std::move(m)}; }
inline Status Internal(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }
inline Status Unauthenticated(std::string m) { return {ErrorCode::kUnauthenticated, std::move(m)}; }

// Holds either a T or a non-ok Status, shaped like std::expected.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).ok()) v_ = Status(ErrorCode::kInternal, "ok status without value");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  // REQUIRES: ok().
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  // The error; an ok Status when ok().
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace taskengine

// Programmer-error checks. TE_CHECK is always on; TE_DCHECK only in debug builds.
#define TE_CHECK(cond)                                                                 \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "%s:%d: TE_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)
#ifdef NDEBUG
#define TE_DCHECK(cond) \
  do {                  \
  } while (0)
#else
#define TE_DCHECK(cond) TE_CHECK(cond)
#endif

#define TE_CONCAT_INNER(a, b) a##b
#define TE_CONCAT(a, b) TE_CONCAT_INNER(a, b)
// Returns the Status from the enclosing function when `expr` is not ok.
#define TE_RETURN_IF_ERROR(expr)         \
  do {                                   \
    ::taskengine::Status te_s_ = (expr); \
    if (!te_s_.ok()) return te_s_;       \
  } while (0)
#define TE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
// `lhs = value of expr`, or return its Status from the enclosing function.
#define TE_ASSIGN_OR_RETURN(lhs, expr) \
  TE_ASSIGN_OR_RETURN_IMPL(TE_CONCAT(te_r_, __LINE__), lhs, expr)
