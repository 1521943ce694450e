// One SQL statement at a time, the same way on every SQL backend.
//
// The statements the backends share (sql_statements.h) are written once with
// numbered placeholders ?1, ?2...; a backend whose driver wants another form
// rewrites each text once, when it first prepares it (TranslatePlaceholders).
// Arguments are typed (SqlArgs), so no backend needs casts in the SQL to tell
// an integer from a text. The store logic that is the same for every backend
// (SqlStore, sql_store.h) speaks only to SqlSession; each backend adapts its
// own connection to it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "storage/store_rows.h"
#include "taskengine/status.h"

namespace taskengine::storage_internal {

// A non-owning reference to a callable, for callbacks that do not outlive the
// call they are passed to (no allocation, unlike std::function).
template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
           std::is_invocable_r_v<R, F&, Args...>)
      FunctionRef(F&& f)  // NOLINT(google-explicit-constructor): passed like a lambda
      : object_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

// One statement argument: NULL, a 64-bit integer, or a text.
struct SqlValue {
  enum class Kind : std::uint8_t { kNull, kInt, kText };
  Kind kind = Kind::kNull;
  std::int64_t number = 0;
  std::string text;
};

// The arguments of one statement: the first is ?1.
class SqlArgs {
 public:
  SqlArgs& Add(std::int64_t v);
  SqlArgs& Add(int v) { return Add(static_cast<std::int64_t>(v)); }
  // Booleans are stored as 0 and 1: say so at the call (`b ? 1 : 0`).
  SqlArgs& Add(bool) = delete;
  SqlArgs& Add(std::string_view v);
  SqlArgs& Add(const std::string& v) { return Add(std::string_view(v)); }
  SqlArgs& Add(const char* v) { return Add(std::string_view(v)); }
  SqlArgs& AddNull();
  // NULL for an empty text.
  SqlArgs& AddOrNull(std::string_view v);

  const std::vector<SqlValue>& values() const { return values_; }
  int size() const { return static_cast<int>(values_.size()); }

 private:
  std::vector<SqlValue> values_;
};

// A statement text in a driver's placeholder form.
struct TranslatedSql {
  std::string text;
  // For positional '?' placeholders: the argument (0-based) each one takes,
  // in the order they appear ("?2 ... ?1 ... ?2" takes 1, 0, 1).
  std::vector<int> order;
};

enum class PlaceholderStyle {
  kNumbered,    // ?N, as written (SQLite)
  kDollar,      // $N (PostgreSQL)
  kPositional,  // ?, bound in order of appearance (MariaDB/MySQL)
};

// Rewrites the ?N placeholders of `sql` (outside quoted strings and
// identifiers) into `style`. A '?' not followed by a digit is left alone.
TranslatedSql TranslatePlaceholders(std::string_view sql, PlaceholderStyle style);

// One connection inside one transaction, as the shared store logic sees it.
// Not thread-safe; lives no longer than the transaction it was handed for.
class SqlSession {
 public:
  using RowSink = FunctionRef<void(const Row&)>;

  // Runs the statement `sql`, written with ?N placeholders. `sql` must be a
  // constant (a string literal or a constexpr array): backends prepare it
  // once per connection and key their cache by its address. `each` sees every
  // result row, in order. Returns how many rows an INSERT, UPDATE or DELETE
  // changed (for a SELECT, whatever the driver says: do not rely on it).
  virtual Result<std::int64_t> Run(const char* sql, const SqlArgs& args, RowSink each) = 0;
  // The same for a statement built at run time (a search), cached by text:
  // callers build few distinct texts.
  virtual Result<std::int64_t> RunText(const std::string& sql, const SqlArgs& args,
                                       RowSink each) = 0;

  // A statement whose rows (if any) are not read.
  Result<std::int64_t> Exec(const char* sql, const SqlArgs& args = SqlArgs()) {
    return Run(sql, args, [](const Row&) {});
  }

  // The first row read by `read` (a function of const Row&), or nullopt.
  template <typename Read>
  auto One(const char* sql, const SqlArgs& args, Read&& read)
      -> Result<std::optional<std::invoke_result_t<Read&, const Row&>>> {
    std::optional<std::invoke_result_t<Read&, const Row&>> out;
    TE_RETURN_IF_ERROR(Run(sql, args, [&](const Row& r) {
                         if (!out) out.emplace(read(r));
                       }).status());
    return out;
  }

  // Every row, read by `read`.
  template <typename Read>
  auto All(const char* sql, const SqlArgs& args, Read&& read)
      -> Result<std::vector<std::invoke_result_t<Read&, const Row&>>> {
    std::vector<std::invoke_result_t<Read&, const Row&>> out;
    TE_RETURN_IF_ERROR(Run(sql, args, [&](const Row& r) { out.push_back(read(r)); }).status());
    return out;
  }

 protected:
  ~SqlSession() = default;
};

}  // namespace taskengine::storage_internal
