#include "storage/sql_session.h"

namespace taskengine::storage_internal {

SqlArgs& SqlArgs::Add(std::int64_t v) {
  values_.push_back(SqlValue{SqlValue::Kind::kInt, v, {}});
  return *this;
}

SqlArgs& SqlArgs::Add(std::string_view v) {
  values_.push_back(SqlValue{SqlValue::Kind::kText, 0, std::string(v)});
  return *this;
}

SqlArgs& SqlArgs::AddNull() {
  values_.push_back(SqlValue{});
  return *this;
}

SqlArgs& SqlArgs::AddOrNull(std::string_view v) { return v.empty() ? AddNull() : Add(v); }

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

TranslatedSql TranslatePlaceholders(std::string_view sql, PlaceholderStyle style) {
  TranslatedSql out;
  out.text.reserve(sql.size());
  char quote = 0;  // the quote character of the string or identifier we are in
  for (std::size_t i = 0; i < sql.size(); ++i) {
    const char c = sql[i];
    if (quote != 0) {
      out.text += c;
      if (c == quote) quote = 0;  // a doubled quote closes and reopens: same result
      continue;
    }
    if (c == '\'' || c == '"' || c == '`') {
      quote = c;
      out.text += c;
      continue;
    }
    if (c != '?' || i + 1 >= sql.size() || !IsDigit(sql[i + 1])) {
      out.text += c;
      continue;
    }
    std::size_t end = i + 1;
    int n = 0;
    while (end < sql.size() && IsDigit(sql[end])) n = n * 10 + (sql[end++] - '0');
    switch (style) {
      case PlaceholderStyle::kNumbered:
        out.text.append(sql.substr(i, end - i));
        break;
      case PlaceholderStyle::kDollar:
        out.text += '$';
        out.text.append(sql.substr(i + 1, end - i - 1));
        break;
      case PlaceholderStyle::kPositional:
        out.text += '?';
        out.order.push_back(n - 1);
        break;
    }
    i = end - 1;
  }
  return out;
}

}  // namespace taskengine::storage_internal
