#include "storage/mariadb/maria_conn.h"

#include <errmsg.h>
#include <mysql.h>
#include <mysqld_error.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string_view>
#include <vector>

#include "core/percent.h"

namespace taskengine::maria {

namespace {

// MySQL's ER_INVALID_JSON_TEXT (MariaDB checks JSON with a CHECK constraint:
// ER_CONSTRAINT_FAILED).
constexpr unsigned int kInvalidJsonText = 3140;

// A column's first buffer holds at least any integer or date as text; one
// grown past kKeepBuffer for a large value is freed after the statement.
constexpr std::size_t kMinBuffer = 64;
constexpr std::size_t kKeepBuffer = 64 * 1024;

}  // namespace

bool IsConnectionLoss(unsigned int err) {
  return (err >= CR_MIN_ERROR && err <= CR_MAX_ERROR) || err == ER_CONNECTION_KILLED ||
         err == ER_SERVER_SHUTDOWN;
}

bool IsRetryable(unsigned int err) {
  return err == ER_LOCK_DEADLOCK || err == ER_LOCK_WAIT_TIMEOUT;
}

Status StatusForError(unsigned int err, std::string message) {
  if (IsConnectionLoss(err)) return Unavailable("MariaDB connection lost: " + message);
  switch (err) {
    case ER_LOCK_DEADLOCK:
    case ER_LOCK_WAIT_TIMEOUT:
    case ER_QUERY_INTERRUPTED:
    case ER_STATEMENT_TIMEOUT:
    case ER_CON_COUNT_ERROR:
    case ER_TOO_MANY_USER_CONNECTIONS:
    case ER_USER_LIMIT_REACHED:
    case ER_OUT_OF_RESOURCES:
    case ER_OUTOFMEMORY:
    case ER_OUT_OF_SORTMEMORY:
    case ER_CANT_CREATE_THREAD:
    case ER_RECORD_FILE_FULL:
    case ER_DISK_FULL:
    case ER_LOCK_TABLE_FULL:
    case ER_TOO_MANY_CONCURRENT_TRXS:
      return Unavailable("MariaDB: " + message);
    case ER_DUP_ENTRY:
    case ER_DUP_ENTRY_WITH_KEY_NAME:
    case ER_DUP_KEY:
      return Conflict("MariaDB: " + message);
    case ER_WARN_DATA_OUT_OF_RANGE:
    case ER_DATA_OUT_OF_RANGE:
    case WARN_DATA_TRUNCATED:
    case ER_TRUNCATED_WRONG_VALUE:
    case ER_TRUNCATED_WRONG_VALUE_FOR_FIELD:
    case ER_ILLEGAL_VALUE_FOR_TYPE:
    case ER_WRONG_VALUE_FOR_TYPE:
    case ER_INVALID_CHARACTER_STRING:
    case ER_DIVISION_BY_ZERO:
    case ER_DATA_TOO_LONG:
    case ER_CONSTRAINT_FAILED:
    case kInvalidJsonText:
      return InvalidArgument("MariaDB: " + message);
    default:
      return Internal("MariaDB: " + message);
  }
}

// --- URLs ----------------------------------------------------------------------

namespace {

// False for a '%' not followed by two hex digits.
bool DecodeInto(std::string_view in, std::string& out) {
  std::optional<std::string> decoded = PercentDecode(in);
  if (!decoded) return false;
  out = std::move(*decoded);
  return true;
}

Status BadUrl(std::string_view why) {
  return InvalidArgument("bad MariaDB URL (want mysql://user:password@host:port/database): " +
                         std::string(why));
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

Result<MariaUrl> ParseMariaUrl(std::string_view url) {
  const std::size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return BadUrl("no scheme");
  const std::string scheme = Lower(url.substr(0, scheme_end));
  if (scheme != "mysql" && scheme != "mariadb") {
    return BadUrl("scheme '" + scheme + "' is neither mysql nor mariadb");
  }
  std::string_view rest = url.substr(scheme_end + 3);
  rest = rest.substr(0, rest.find_first_of("?#"));  // parameters: ignored
  const std::size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  const std::string_view path =
      slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);

  MariaUrl out;
  std::string_view host_port = authority;
  if (const std::size_t at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    host_port = authority.substr(at + 1);
    const std::size_t colon = userinfo.find(':');
    if (!DecodeInto(userinfo.substr(0, colon), out.user)) {
      return BadUrl("bad percent escape in the user");
    }
    if (colon != std::string_view::npos && !DecodeInto(userinfo.substr(colon + 1), out.password)) {
      return BadUrl("bad percent escape in the password");
    }
  }

  std::string_view port_text;
  bool has_port = false;
  if (!host_port.empty() && host_port.front() == '[') {
    const std::size_t close = host_port.find(']');
    if (close == std::string_view::npos) return BadUrl("unclosed '[' in the host");
    out.host = std::string(host_port.substr(1, close - 1));
    const std::string_view after = host_port.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return BadUrl("junk after the IPv6 host");
      port_text = after.substr(1);
      has_port = true;
    }
  } else {
    const std::size_t colon = host_port.find(':');
    out.host = std::string(host_port.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = host_port.substr(colon + 1);
      has_port = true;
    }
  }
  if (out.host.empty()) return BadUrl("no host");
  if (has_port) {
    unsigned int port = 0;
    const auto [end, ec] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
        port == 0 || port > 65535) {
      return BadUrl("port '" + std::string(port_text) + "' is not a number in 1..65535");
    }
    out.port = port;
  }
  if (!DecodeInto(path, out.database)) return BadUrl("bad percent escape in the database");
  if (out.database.find('/') != std::string::npos) return BadUrl("the database name has a '/'");
  return out;
}

// --- Statements and rows -------------------------------------------------------

// One prepared statement and the buffers its arguments and result rows are
// bound to (reused by every execution).
struct MariaConn::Statement {
  Statement() = default;
  ~Statement() {
    if (stmt != nullptr) mysql_stmt_close(stmt);
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  MYSQL_STMT* stmt = nullptr;
  std::vector<int> order;             // argument of each '?'
  bool counts_returned_rows = false;  // INSERT/REPLACE/DELETE: RETURNING rows were changed

  std::vector<MYSQL_BIND> params;
  std::vector<long long> ints;
  std::vector<MYSQL_BIND> columns;
  std::vector<std::vector<char>> buffers;
  std::vector<unsigned long> lengths;
  std::vector<my_bool> nulls;
  std::vector<my_bool> errors;
};

namespace {

// The current row of a statement, columns read as text.
class MariaRow final : public storage_internal::Row {
 public:
  MariaRow(const std::vector<std::vector<char>>& buffers, const std::vector<unsigned long>& lengths,
           const std::vector<my_bool>& nulls)
      : buffers_(buffers), lengths_(lengths), nulls_(nulls) {}

  std::int64_t Int(int col) const override {
    const std::string_view v = TextView(col);
    std::int64_t out = 0;
    std::from_chars(v.data(), v.data() + v.size(), out);
    return out;
  }
  std::string Text(int col) const override { return std::string(TextView(col)); }
  std::string_view TextView(int col) const override {
    if (col < 0 || static_cast<std::size_t>(col) >= buffers_.size() || nulls_[col]) return {};
    return std::string_view(buffers_[col].data(), lengths_[col]);
  }
  bool IsNull(int col) const override {
    return col < 0 || static_cast<std::size_t>(col) >= nulls_.size() || nulls_[col] != 0;
  }

 private:
  const std::vector<std::vector<char>>& buffers_;
  const std::vector<unsigned long>& lengths_;
  const std::vector<my_bool>& nulls_;
};

// The first keyword of `sql`, upper-cased (comments and '(' skipped).
std::string FirstKeyword(std::string_view sql) {
  std::size_t i = 0;
  while (i < sql.size()) {
    const char c = sql[i];
    if (std::isspace(static_cast<unsigned char>(c)) || c == '(') {
      ++i;
    } else if (sql.substr(i, 2) == "--" || c == '#') {
      i = sql.find('\n', i);
      if (i == std::string_view::npos) return {};
    } else if (sql.substr(i, 2) == "/*") {
      i = sql.find("*/", i + 2);
      if (i == std::string_view::npos) return {};
      i += 2;
    } else {
      break;
    }
  }
  std::string word;
  while (i < sql.size() && std::isalpha(static_cast<unsigned char>(sql[i]))) {
    word += static_cast<char>(std::toupper(static_cast<unsigned char>(sql[i++])));
  }
  return word;
}

void InitLibrary() {
  // mysql_init initializes the library implicitly, but not thread-safely.
  static const bool initialized = mysql_library_init(0, nullptr, nullptr) == 0;
  (void)initialized;
}

}  // namespace

// --- MariaConn -----------------------------------------------------------------

MariaConn::MariaConn(MariaConnOptions options) : options_(options) {}

MariaConn::~MariaConn() { Close(); }

void MariaConn::Close() {
  // Closing the connection first detaches its statements: closing them then
  // frees memory without a round trip to a server that may be gone.
  if (conn_ != nullptr) mysql_close(conn_);
  conn_ = nullptr;
  DropStatements();
  broken_ = false;
}

void MariaConn::DropStatements() {
  prepared_.clear();
  prepared_text_.clear();
}

bool MariaConn::healthy() const { return conn_ != nullptr && !broken_; }

Status MariaConn::Connect(const std::string& url) {
  Close();
  TE_ASSIGN_OR_RETURN(MariaUrl u, ParseMariaUrl(url));
  InitLibrary();
  conn_ = mysql_init(nullptr);
  if (conn_ == nullptr) return Unavailable("MariaDB: out of memory while connecting");
  const auto seconds = [](std::chrono::seconds s) {
    return static_cast<unsigned int>(std::max<std::chrono::seconds::rep>(1, s.count()));
  };
  const unsigned int connect_timeout = seconds(options_.connect_timeout);
  const unsigned int read_timeout = seconds(options_.read_timeout);
  const unsigned int write_timeout = seconds(options_.write_timeout);
  const my_bool no = 0;
  const unsigned int tcp = MYSQL_PROTOCOL_TCP;  // "localhost" too: the URL names a port
  const unsigned int no_local_infile = 0;
  // A payload may be as large as the engine's maximum payload limit (16 MiB).
  const unsigned long max_packet = 64UL << 20;  // NOLINT(google-runtime-int): the C API's type
  mysql_options(conn_, MYSQL_OPT_CONNECT_TIMEOUT, &connect_timeout);
  mysql_options(conn_, MYSQL_OPT_READ_TIMEOUT, &read_timeout);
  mysql_options(conn_, MYSQL_OPT_WRITE_TIMEOUT, &write_timeout);
  mysql_options(conn_, MYSQL_OPT_RECONNECT, &no);
  mysql_options(conn_, MYSQL_OPT_PROTOCOL, &tcp);
  mysql_options(conn_, MYSQL_OPT_LOCAL_INFILE, &no_local_infile);
  mysql_options(conn_, MYSQL_SET_CHARSET_NAME, "utf8mb4");
  mysql_options(conn_, MYSQL_OPT_MAX_ALLOWED_PACKET, &max_packet);
  if (mysql_real_connect(conn_, u.host.c_str(), u.user.c_str(), u.password.c_str(),
                         u.database.empty() ? nullptr : u.database.c_str(), u.port, nullptr,
                         CLIENT_MULTI_STATEMENTS | CLIENT_FOUND_ROWS) == nullptr) {
    last_error_ = mysql_errno(conn_);
    std::string msg = "cannot connect to MariaDB at " + u.host + ":" + std::to_string(u.port) +
                      ": " + mysql_error(conn_) + " (error " + std::to_string(last_error_) + ")";
    Close();
    return Unavailable(std::move(msg));
  }
  const Status setup = Exec(
      "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_DATE,NO_ZERO_IN_DATE,"
      "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION,ANSI_QUOTES,PIPES_AS_CONCAT,"
      "NO_BACKSLASH_ESCAPES', time_zone = '+00:00', autocommit = 1, innodb_lock_wait_timeout = " +
      std::to_string(seconds(options_.lock_wait_timeout)) +
      "; SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED");
  if (!setup.ok()) {
    Close();
    return setup;
  }
  // Bulk execution (RunBulk): a MariaDB server that says it can.
  unsigned long capabilities = 0;           // NOLINT(google-runtime-int): the C API's type
  unsigned long extended_capabilities = 0;  // NOLINT(google-runtime-int): the C API's type
  mariadb_get_infov(conn_, MARIADB_CONNECTION_SERVER_CAPABILITIES, &capabilities);
  mariadb_get_infov(conn_, MARIADB_CONNECTION_EXTENDED_SERVER_CAPABILITIES, &extended_capabilities);
  bulk_ = (capabilities & CLIENT_MYSQL) == 0 &&
          (extended_capabilities & (MARIADB_CLIENT_STMT_BULK_OPERATIONS >> 32)) != 0;
  return Status::Ok();
}

Status MariaConn::Fail(MYSQL_STMT* stmt, std::string_view what) {
  unsigned int err = 0;
  std::string text;
  if (stmt != nullptr) {
    err = mysql_stmt_errno(stmt);
    text = mysql_stmt_error(stmt);
  }
  if (err == 0 && conn_ != nullptr) {
    err = mysql_errno(conn_);
    text = mysql_error(conn_);
  }
  last_error_ = err;
  std::string msg = std::string(what) + ": " + text + " (error " + std::to_string(err) + ")";
  // An interrupted statement: by KILL QUERY (the session lives on) or by the
  // end of the connection.
  if (IsConnectionLoss(err) || (err == ER_QUERY_INTERRUPTED && mysql_ping(conn_) != 0)) {
    broken_ = true;
    return Unavailable("MariaDB connection lost: " + msg);
  }
  if (err == 0) return Internal("MariaDB: " + msg);
  return StatusForError(err, std::move(msg));
}

Status MariaConn::Exec(std::string_view sql) {
  if (!healthy()) return Unavailable("MariaDB: not connected");
  ++requests_;
  if (mysql_real_query(conn_, sql.data(), sql.size()) != 0) return Fail(nullptr, "statement");
  for (;;) {
    MYSQL_RES* result = mysql_store_result(conn_);
    if (result != nullptr) {
      mysql_free_result(result);
    } else if (mysql_field_count(conn_) != 0) {
      return Fail(nullptr, "statement");
    }
    last_insert_id_ = static_cast<std::int64_t>(mysql_insert_id(conn_));
    const int next = mysql_next_result(conn_);
    if (next < 0) break;
    if (next > 0) return Fail(nullptr, "statement");
  }
  last_error_ = 0;
  return Status::Ok();
}

Result<std::unique_ptr<MariaConn::Statement>> MariaConn::Prepare(std::string_view sql) {
  const storage_internal::TranslatedSql translated =
      storage_internal::TranslatePlaceholders(sql, storage_internal::PlaceholderStyle::kPositional);
  auto s = std::make_unique<Statement>();
  s->stmt = mysql_stmt_init(conn_);
  if (s->stmt == nullptr) return Fail(nullptr, "prepare");
  const my_bool yes = 1;
  mysql_stmt_attr_set(s->stmt, STMT_ATTR_UPDATE_MAX_LENGTH, &yes);
  ++requests_;
  if (mysql_stmt_prepare(s->stmt, translated.text.data(), translated.text.size()) != 0) {
    return Fail(s->stmt, "prepare");
  }
  if (mysql_stmt_param_count(s->stmt) != translated.order.size()) {
    last_error_ = 0;
    return Internal("MariaDB: statement has " + std::to_string(mysql_stmt_param_count(s->stmt)) +
                    " parameters but " + std::to_string(translated.order.size()) +
                    " ?N placeholders: " + std::string(sql));
  }
  s->order = translated.order;
  const std::string keyword = FirstKeyword(sql);
  s->counts_returned_rows = keyword == "INSERT" || keyword == "REPLACE" || keyword == "DELETE";
  return s;
}

Result<MariaConn::Statement*> MariaConn::Prepared(const char* sql) {
  if (!healthy()) return Unavailable("MariaDB: not connected");
  auto it = prepared_.find(sql);
  if (it == prepared_.end()) {
    TE_ASSIGN_OR_RETURN(std::unique_ptr<Statement> s, Prepare(sql));
    it = prepared_.emplace(sql, std::move(s)).first;
  }
  return it->second.get();
}

Result<std::int64_t> MariaConn::Run(const char* sql, const storage_internal::SqlArgs& args,
                                    storage_internal::SqlSession::RowSink each) {
  TE_ASSIGN_OR_RETURN(Statement * s, Prepared(sql));
  return Execute(*s, args, each);
}

Result<std::int64_t> MariaConn::RunBulk(const char* sql,
                                        const std::vector<storage_internal::SqlArgs>& rows) {
  using storage_internal::SqlValue;
  if (rows.empty()) return std::int64_t{0};
  TE_ASSIGN_OR_RETURN(Statement * s, Prepared(sql));
  if (rows.size() == 1 || !bulk_) {
    std::int64_t changed = 0;
    for (const storage_internal::SqlArgs& args : rows) {
      TE_ASSIGN_OR_RETURN(std::int64_t n, Execute(*s, args, [](const storage_internal::Row&) {}));
      changed += n;
    }
    return changed;
  }
  const std::size_t n_rows = rows.size();
  const std::size_t n_params = s->order.size();
  // Column-wise arrays: for parameter i, element r is rows[r]'s argument.
  struct Column {
    std::vector<long long> ints;  // NOLINT(google-runtime-int): the C API's type
    std::vector<const char*> texts;
    std::vector<unsigned long> lengths;  // NOLINT(google-runtime-int): the C API's type
    std::vector<char> indicators;
  };
  std::vector<Column> columns(n_params);
  s->params.assign(n_params, MYSQL_BIND{});
  for (std::size_t i = 0; i < n_params; ++i) {
    const int arg = s->order[i];
    Column& col = columns[i];
    col.indicators.assign(n_rows, STMT_INDICATOR_NONE);
    SqlValue::Kind kind = SqlValue::Kind::kNull;
    for (std::size_t r = 0; r < n_rows; ++r) {
      if (arg < 0 || arg >= rows[r].size()) {
        last_error_ = 0;
        return Internal("MariaDB: placeholder ?" + std::to_string(arg + 1) + " but " +
                        std::to_string(rows[r].size()) + " arguments in element " +
                        std::to_string(r));
      }
      const SqlValue::Kind k = rows[r].values()[arg].kind;
      if (k == SqlValue::Kind::kNull) continue;
      if (kind != SqlValue::Kind::kNull && k != kind) {
        last_error_ = 0;
        return Internal("MariaDB: argument ?" + std::to_string(arg + 1) +
                        " is an integer in one element and a text in another");
      }
      kind = k;
    }
    MYSQL_BIND& b = s->params[i];
    if (kind == SqlValue::Kind::kText) {
      col.texts.assign(n_rows, "");
      col.lengths.assign(n_rows, 0);
      b.buffer_type = MYSQL_TYPE_STRING;
      b.buffer = col.texts.data();
      b.length = col.lengths.data();
    } else {
      col.ints.assign(n_rows, 0);
      b.buffer_type = MYSQL_TYPE_LONGLONG;
      b.buffer = col.ints.data();
    }
    for (std::size_t r = 0; r < n_rows; ++r) {
      const SqlValue& v = rows[r].values()[arg];
      if (v.kind == SqlValue::Kind::kNull) {
        col.indicators[r] = STMT_INDICATOR_NULL;
      } else if (kind == SqlValue::Kind::kText) {
        col.texts[r] = v.text.data();
        col.lengths[r] = v.text.size();
      } else {
        col.ints[r] = v.number;
      }
    }
    b.u.indicator = col.indicators.data();
  }
  unsigned int array_size = static_cast<unsigned int>(n_rows);
  struct Reset {
    MYSQL_STMT* stmt;
    ~Reset() {
      unsigned int none = 0;
      mysql_stmt_attr_set(stmt, STMT_ATTR_ARRAY_SIZE, &none);
    }
  } reset{s->stmt};
  if (mysql_stmt_attr_set(s->stmt, STMT_ATTR_ARRAY_SIZE, &array_size) != 0) {
    return Fail(s->stmt, "bulk size");
  }
  if (mysql_stmt_bind_param(s->stmt, s->params.data()) != 0) return Fail(s->stmt, "bind");
  ++requests_;
  if (mysql_stmt_execute(s->stmt) != 0) return Fail(s->stmt, "execute");
  last_insert_id_ = static_cast<std::int64_t>(mysql_stmt_insert_id(s->stmt));
  last_error_ = 0;
  const my_ulonglong affected = mysql_stmt_affected_rows(s->stmt);
  return affected == static_cast<my_ulonglong>(-1) ? 0 : static_cast<std::int64_t>(affected);
}

Result<std::int64_t> MariaConn::RunText(const std::string& sql,
                                        const storage_internal::SqlArgs& args,
                                        storage_internal::SqlSession::RowSink each) {
  if (!healthy()) return Unavailable("MariaDB: not connected");
  auto it = prepared_text_.find(sql);
  if (it == prepared_text_.end()) {
    TE_ASSIGN_OR_RETURN(std::unique_ptr<Statement> s, Prepare(sql));
    it = prepared_text_.emplace(sql, std::move(s)).first;
  }
  return Execute(*it->second, args, each);
}

Result<std::int64_t> MariaConn::Execute(Statement& s, const storage_internal::SqlArgs& args,
                                        storage_internal::SqlSession::RowSink each) {
  using storage_internal::SqlValue;
  const std::size_t n_params = s.order.size();
  s.params.assign(n_params, MYSQL_BIND{});
  s.ints.assign(n_params, 0);
  for (std::size_t i = 0; i < n_params; ++i) {
    const int arg = s.order[i];
    if (arg < 0 || arg >= args.size()) {
      last_error_ = 0;
      return Internal("MariaDB: placeholder ?" + std::to_string(arg + 1) + " but " +
                      std::to_string(args.size()) + " arguments");
    }
    const SqlValue& v = args.values()[arg];
    MYSQL_BIND& b = s.params[i];
    switch (v.kind) {
      case SqlValue::Kind::kInt:
        s.ints[i] = v.number;
        b.buffer_type = MYSQL_TYPE_LONGLONG;
        b.buffer = &s.ints[i];
        break;
      case SqlValue::Kind::kText:
        b.buffer_type = MYSQL_TYPE_STRING;
        b.buffer = const_cast<char*>(v.text.data());  // only read
        b.buffer_length = v.text.size();
        break;
      case SqlValue::Kind::kNull:
        b.buffer_type = MYSQL_TYPE_NULL;
        break;
    }
  }
  if (n_params > 0 && mysql_stmt_bind_param(s.stmt, s.params.data()) != 0) {
    return Fail(s.stmt, "bind");
  }
  ++requests_;
  if (mysql_stmt_execute(s.stmt) != 0) return Fail(s.stmt, "execute");
  last_insert_id_ = static_cast<std::int64_t>(mysql_stmt_insert_id(s.stmt));

  const unsigned int n_columns = mysql_stmt_field_count(s.stmt);
  if (n_columns == 0) {
    last_error_ = 0;
    const my_ulonglong affected = mysql_stmt_affected_rows(s.stmt);
    return affected == static_cast<my_ulonglong>(-1) ? 0 : static_cast<std::int64_t>(affected);
  }

  // The whole result first (the server is then free for other statements),
  // with each column's longest value measured (STMT_ATTR_UPDATE_MAX_LENGTH).
  struct Cleanup {
    Statement& s;
    MYSQL_RES* meta = nullptr;
    ~Cleanup() {
      if (meta != nullptr) mysql_free_result(meta);
      mysql_stmt_free_result(s.stmt);
      for (std::vector<char>& b : s.buffers) {
        if (b.size() > kKeepBuffer) std::vector<char>().swap(b);
      }
    }
  } cleanup{s};
  if (mysql_stmt_store_result(s.stmt) != 0) return Fail(s.stmt, "read result");
  cleanup.meta = mysql_stmt_result_metadata(s.stmt);
  if (cleanup.meta == nullptr) return Fail(s.stmt, "read result metadata");
  const MYSQL_FIELD* fields = mysql_fetch_fields(cleanup.meta);

  s.columns.assign(n_columns, MYSQL_BIND{});
  s.buffers.resize(n_columns);
  s.lengths.assign(n_columns, 0);
  s.nulls.assign(n_columns, 0);
  s.errors.assign(n_columns, 0);
  const auto bind_column = [&s](unsigned int i) {
    MYSQL_BIND& b = s.columns[i];
    b.buffer_type = MYSQL_TYPE_STRING;
    b.buffer = s.buffers[i].data();
    b.buffer_length = s.buffers[i].size();
    b.length = &s.lengths[i];
    b.is_null = &s.nulls[i];
    b.error = &s.errors[i];
  };
  for (unsigned int i = 0; i < n_columns; ++i) {
    const std::size_t want = std::max<std::size_t>(kMinBuffer, fields[i].max_length + 1);
    if (s.buffers[i].size() < want) s.buffers[i].resize(want);
    bind_column(i);
  }
  if (mysql_stmt_bind_result(s.stmt, s.columns.data()) != 0) return Fail(s.stmt, "bind result");

  const MariaRow row(s.buffers, s.lengths, s.nulls);
  std::int64_t rows = 0;
  for (;;) {
    const int rc = mysql_stmt_fetch(s.stmt);
    if (rc == MYSQL_NO_DATA) break;
    if (rc == 1) return Fail(s.stmt, "fetch");
    if (rc == MYSQL_DATA_TRUNCATED) {
      // A value longer than its buffer (max_length undercounts some types):
      // grow the buffer, read the value again, bind the bigger buffer.
      for (unsigned int i = 0; i < n_columns; ++i) {
        if (s.errors[i] == 0 || s.lengths[i] < s.buffers[i].size()) continue;
        s.buffers[i].resize(s.lengths[i] + 1);
        bind_column(i);
        if (mysql_stmt_fetch_column(s.stmt, &s.columns[i], i, 0) != 0) {
          return Fail(s.stmt, "fetch column");
        }
      }
      if (mysql_stmt_bind_result(s.stmt, s.columns.data()) != 0) return Fail(s.stmt, "bind result");
    }
    ++rows;
    each(row);
  }
  last_error_ = 0;
  return s.counts_returned_rows ? rows : 0;
}

}  // namespace taskengine::maria
