// The MariaDB connection layer against a real server: URLs, the session's
// settings, typed and reordered placeholders, NULL, large texts, BIGINT
// extremes, affected rows, RETURNING, and the error mapping (bad data, a
// duplicate key, a deadlock, a lock wait timeout, a killed connection, a
// stopped server).
//
// The binary starts a throwaway server with scripts/mariadb_cluster.sh
// (mariadb-server must be installed; TASKENGINE_SOURCE_DIR locates the
// script); each test works in a database of its own. The stop test starts a
// server of its own.
#include "storage/mariadb/maria_conn.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "storage/mariadb/testing/test_server.h"
#include "testing_support/test_util.h"

namespace taskengine::maria {
namespace {

using storage_internal::Row;
using storage_internal::SqlArgs;

using testing::SharedServer;
using testing::TestServer;
using testing::WithDatabase;

// Every row of `sql` as `columns` texts each ("NULL" for a NULL).
using Table = std::vector<std::vector<std::string>>;
Result<Table> Select(MariaConn& conn, const char* sql, const SqlArgs& args, int columns) {
  Table out;
  auto r = conn.Run(sql, args, [&](const Row& row) {
    std::vector<std::string> values;
    for (int i = 0; i < columns; ++i) values.push_back(row.IsNull(i) ? "NULL" : row.Text(i));
    out.push_back(std::move(values));
  });
  if (!r.ok()) return r.status();
  return out;
}

// A connection to a fresh database named after the test.
class MariaConnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TestServer& server = SharedServer();
    ASSERT_TRUE(server.started()) << server.url();
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    database_ = "t_" + name;
    MariaConn admin;
    ASSERT_OK(admin.Connect(server.url()));
    ASSERT_OK(
        admin.Exec("DROP DATABASE IF EXISTS " + database_ + "; CREATE DATABASE " + database_));
    url_ = WithDatabase(server.url(), database_);
    ASSERT_OK(conn_.Connect(url_));
  }

  std::int64_t Count(const char* sql) {
    std::int64_t n = -1;
    EXPECT_OK(conn_.Run(sql, SqlArgs(), [&](const Row& r) { n = r.Int(0); }));
    return n;
  }

  std::string database_;
  std::string url_;
  MariaConn conn_;
};

// --- URLs and the error mapping (no server) ------------------------------------

TEST(MariaUrlTest, ParsesGoodUrls) {
  ASSERT_OK_AND_ASSIGN(MariaUrl a, ParseMariaUrl("mysql://te:pw@db.example:3307/jobs"));
  EXPECT_EQ(a.user, "te");
  EXPECT_EQ(a.password, "pw");
  EXPECT_EQ(a.host, "db.example");
  EXPECT_EQ(a.port, 3307u);
  EXPECT_EQ(a.database, "jobs");

  // Percent-decoded user and password, the default port, ignored parameters.
  ASSERT_OK_AND_ASSIGN(MariaUrl b,
                       ParseMariaUrl("MariaDB://us%40er:p%3Aa%2Fs%40s%3F@10.0.0.1/db?tls=1&x=%zz"));
  EXPECT_EQ(b.user, "us@er");
  EXPECT_EQ(b.password, "p:a/s@s?");
  EXPECT_EQ(b.host, "10.0.0.1");
  EXPECT_EQ(b.port, 3306u);
  EXPECT_EQ(b.database, "db");

  // No password, no database; an IPv6 host.
  ASSERT_OK_AND_ASSIGN(MariaUrl c, ParseMariaUrl("mysql://root@[::1]:3308"));
  EXPECT_EQ(c.user, "root");
  EXPECT_EQ(c.password, "");
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(c.port, 3308u);
  EXPECT_EQ(c.database, "");

  ASSERT_OK_AND_ASSIGN(MariaUrl d, ParseMariaUrl("mariadb://localhost/"));
  EXPECT_EQ(d.user, "");
  EXPECT_EQ(d.host, "localhost");
  EXPECT_EQ(d.database, "");
}

TEST(MariaUrlTest, RefusesBadUrls) {
  for (const char* url : {
           "",
           "localhost:3306/db",
           "postgres://u:secret@h/db",
           "mysql://",
           "mysql://u:secret@/db",
           "mysql://u:secret@:3306/db",
           "mysql://u:secret@h:/db",
           "mysql://u:secret@h:0/db",
           "mysql://u:secret@h:65536/db",
           "mysql://u:secret@h:33x/db",
           "mysql://u:secret@h:-1/db",
           "mysql://u:secret@[::1/db",
           "mysql://u:secret@[::1]x/db",
           "mysql://u%zz:secret@h/db",
           "mysql://u:secret%4@h/db",
           "mysql://u:secret@h/d%2",
           "mysql://u:secret@h/a/b",
       }) {
    SCOPED_TRACE(url);
    auto r = ParseMariaUrl(url);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("bad MariaDB URL"), std::string::npos)
        << r.status().message();
    EXPECT_EQ(r.status().message().find("secret"), std::string::npos) << r.status().message();

    MariaConn conn;
    const Status s = conn.Connect(url);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.ToString();
    EXPECT_FALSE(conn.healthy());
  }
}

TEST(MariaStatusTest, MapsErrorNumbers) {
  for (unsigned int err : {2002u, 2003u, 2006u, 2013u, 2055u, 2014u, 1927u, 1053u}) {
    SCOPED_TRACE(err);
    EXPECT_TRUE(IsConnectionLoss(err));
    EXPECT_FALSE(IsRetryable(err));
    EXPECT_EQ(StatusForError(err, "x").code(), ErrorCode::kUnavailable);
  }
  for (unsigned int err : {1213u, 1205u}) {
    SCOPED_TRACE(err);
    EXPECT_TRUE(IsRetryable(err));
    EXPECT_FALSE(IsConnectionLoss(err));
    EXPECT_EQ(StatusForError(err, "x").code(), ErrorCode::kUnavailable);
  }
  for (unsigned int err : {1040u, 1041u, 1114u, 1021u, 1317u, 1969u}) {
    SCOPED_TRACE(err);
    EXPECT_FALSE(IsConnectionLoss(err));
    EXPECT_FALSE(IsRetryable(err));
    EXPECT_EQ(StatusForError(err, "x").code(), ErrorCode::kUnavailable);
  }
  for (unsigned int err : {1062u, 1586u}) {
    EXPECT_EQ(StatusForError(err, "x").code(), ErrorCode::kConflict) << err;
  }
  for (unsigned int err : {1264u, 1366u, 1406u, 1292u, 1690u, 3140u, 4025u}) {
    EXPECT_EQ(StatusForError(err, "x").code(), ErrorCode::kInvalidArgument) << err;
  }
  for (unsigned int err : {1064u, 1146u, 1048u, 0u}) {
    EXPECT_EQ(StatusForError(err, "x").code(), ErrorCode::kInternal) << err;
  }
  EXPECT_NE(StatusForError(1062, "dup 'k'").message().find("dup 'k'"), std::string::npos);
}

// --- Statements ----------------------------------------------------------------

TEST_F(MariaConnTest, SessionIsSetUpForTheSharedSql) {
  ASSERT_OK_AND_ASSIGN(
      Table t, Select(conn_,
                      "SELECT @@SESSION.sql_mode, @@SESSION.time_zone, @@SESSION.tx_isolation,"
                      " @@SESSION.autocommit, @@character_set_client, @@character_set_results,"
                      " @@SESSION.innodb_lock_wait_timeout",
                      SqlArgs(), 7));
  ASSERT_EQ(t.size(), 1u);
  for (const char* mode : {"STRICT_ALL_TABLES", "ANSI_QUOTES", "PIPES_AS_CONCAT",
                           "NO_BACKSLASH_ESCAPES", "NO_ENGINE_SUBSTITUTION", "NO_ZERO_DATE"}) {
    EXPECT_NE(t[0][0].find(mode), std::string::npos) << t[0][0];
  }
  EXPECT_EQ(t[0][1], "+00:00");
  EXPECT_EQ(t[0][2], "READ-COMMITTED");
  EXPECT_EQ(t[0][3], "1");
  EXPECT_EQ(t[0][4], "utf8mb4");
  EXPECT_EQ(t[0][5], "utf8mb4");
  EXPECT_EQ(t[0][6], "20");

  // "x" is an identifier, || concatenates, a backslash is itself.
  ASSERT_OK(conn_.Exec("CREATE TABLE \"quoted table\" (\"select\" BIGINT)"));
  ASSERT_OK(conn_.Run("INSERT INTO \"quoted table\" (\"select\") VALUES (?1)", SqlArgs().Add(5),
                      [](const Row&) {}));
  ASSERT_OK_AND_ASSIGN(Table u, Select(conn_,
                                       "SELECT \"select\", 'a' || ?1 || 'c', '\\', 'é',"
                                       " CAST('2024-01-02 03:04:05' AS DATETIME)"
                                       " FROM \"quoted table\"",
                                       SqlArgs().Add("b"), 5));
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0], (std::vector<std::string>{"5", "abc", "\\", "é", "2024-01-02 03:04:05"}));
}

TEST_F(MariaConnTest, BindsTypedReorderedAndRepeatedPlaceholders) {
  ASSERT_OK_AND_ASSIGN(Table t, Select(conn_, "SELECT ?2, ?1, ?2, ?1 + 1, ?3, ?2 = '007'",
                                       SqlArgs().Add(41).Add("007").Add(""), 6));
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0], (std::vector<std::string>{"007", "41", "007", "42", "", "1"}));

  ASSERT_OK(conn_.Exec("CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR(20), n BIGINT)"));
  ASSERT_OK(conn_.Run("INSERT INTO t (n, name, id) VALUES (?3, ?2, ?1)",
                      SqlArgs().Add(1).Add("one").Add(-7), [](const Row&) {}));
  ASSERT_OK_AND_ASSIGN(Table rows,
                       Select(conn_, "SELECT id, name, n FROM t WHERE name = ?2 AND id = ?1",
                              SqlArgs().Add(1).Add("one"), 3));
  EXPECT_EQ(rows, (Table{{"1", "one", "-7"}}));

  // An argument a placeholder names is missing: a bug, said so.
  auto r = conn_.Run("SELECT ?1, ?3", SqlArgs().Add(1).Add(2), [](const Row&) {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInternal) << r.status().ToString();
  EXPECT_TRUE(conn_.healthy());
}

TEST_F(MariaConnTest, QuestionMarkInsideQuotesIsNotAPlaceholder) {
  ASSERT_OK_AND_ASSIGN(Table t, Select(conn_, "SELECT '? ?1 ''?2''', ?1, CONCAT('?', ?2)",
                                       SqlArgs().Add(7).Add("x"), 3));
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0], (std::vector<std::string>{"? ?1 '?2'", "7", "?x"}));
}

TEST_F(MariaConnTest, NullReadsAsZeroAndEmpty) {
  ASSERT_OK(conn_.Exec("CREATE TABLE t (id BIGINT PRIMARY KEY, name TEXT, n BIGINT)"));
  ASSERT_OK(conn_.Run("INSERT INTO t VALUES (?1, ?2, ?3)", SqlArgs().Add(1).AddNull().AddNull(),
                      [](const Row&) {}));
  ASSERT_OK(conn_.Run("INSERT INTO t VALUES (?1, ?2, ?3)", SqlArgs().Add(2).AddOrNull("").Add(0),
                      [](const Row&) {}));
  int rows = 0;
  ASSERT_OK(
      conn_.Run("SELECT name, n, name IS NULL FROM t ORDER BY id", SqlArgs(), [&](const Row& r) {
        ++rows;
        EXPECT_TRUE(r.IsNull(0));
        EXPECT_EQ(r.Text(0), "");
        EXPECT_EQ(r.TextView(0), "");
        EXPECT_EQ(r.Int(0), 0);
        EXPECT_EQ(r.Int(1), 0);
        EXPECT_EQ(r.Int(2), 1);
        EXPECT_EQ(r.IsNull(1), rows == 1);
      }));
  EXPECT_EQ(rows, 2);
  ASSERT_OK_AND_ASSIGN(Table t, Select(conn_, "SELECT ?1 IS NULL, ?1", SqlArgs().AddNull(), 2));
  EXPECT_EQ(t, (Table{{"1", "NULL"}}));
}

TEST_F(MariaConnTest, LargeTextsRoundTrip) {
  std::string big;
  big.reserve(2 * 1024 * 1024 + 16);
  for (std::size_t i = 0; big.size() < 2 * 1024 * 1024; ++i) {
    big += static_cast<char>('a' + i % 26);
    if (i % 1000 == 0) big += "é€\n'\"\\?1";
  }
  ASSERT_OK(conn_.Exec("CREATE TABLE t (id BIGINT PRIMARY KEY, body LONGTEXT)"));
  const char* insert = "INSERT INTO t (id, body) VALUES (?1, ?2)";
  ASSERT_OK(conn_.Run(insert, SqlArgs().Add(1).Add("small"), [](const Row&) {}));
  ASSERT_OK(conn_.Run(insert, SqlArgs().Add(2).Add(big), [](const Row&) {}));
  ASSERT_OK(conn_.Run(insert, SqlArgs().Add(3).Add("small again"), [](const Row&) {}));

  for (int round = 0; round < 2; ++round) {  // the second on the cached statement
    std::vector<std::string> bodies;
    ASSERT_OK(
        conn_.Run("SELECT body, LENGTH(body) FROM t ORDER BY id", SqlArgs(), [&](const Row& r) {
          bodies.push_back(r.Text(0));
          EXPECT_EQ(r.Int(1), static_cast<std::int64_t>(r.TextView(0).size()));
        }));
    ASSERT_EQ(bodies.size(), 3u);
    EXPECT_EQ(bodies[0], "small");
    EXPECT_TRUE(bodies[1] == big) << "2 MB text differs; size " << bodies[1].size();
    EXPECT_EQ(bodies[2], "small again");
  }
  // A large argument echoed back, and a large computed value.
  ASSERT_OK_AND_ASSIGN(Table t, Select(conn_, "SELECT ?1, CONCAT(body, ?2) FROM t WHERE id = 2",
                                       SqlArgs().Add(big).Add("!"), 2));
  ASSERT_EQ(t.size(), 1u);
  EXPECT_TRUE(t[0][0] == big);
  EXPECT_TRUE(t[0][1] == big + "!");
  // Then small values again through the same statement.
  ASSERT_OK_AND_ASSIGN(Table s, Select(conn_, "SELECT ?1, CONCAT(body, ?2) FROM t WHERE id = 2",
                                       SqlArgs().Add("x").Add("!"), 2));
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0][0], "x");
}

TEST_F(MariaConnTest, BigintExtremesAndOtherNumbers) {
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  ASSERT_OK(
      conn_.Exec("CREATE TABLE t (id BIGINT PRIMARY KEY, n BIGINT, small TINYINT,"
                 " short VARCHAR(3))"));
  ASSERT_OK(conn_.Run("INSERT INTO t (id, n) VALUES (?1, ?2), (?3, ?4), (?5, ?6)",
                      SqlArgs().Add(1).Add(kMin).Add(2).Add(kMax).Add(3).Add(0),
                      [](const Row&) {}));
  std::vector<std::int64_t> values;
  ASSERT_OK(conn_.Run("SELECT n FROM t ORDER BY id", SqlArgs(),
                      [&](const Row& r) { values.push_back(r.Int(0)); }));
  EXPECT_EQ(values, (std::vector<std::int64_t>{kMin, kMax, 0}));
  ASSERT_OK_AND_ASSIGN(Table t, Select(conn_, "SELECT ?1, ?2, n FROM t WHERE n = ?2",
                                       SqlArgs().Add(kMin).Add(kMax), 3));
  EXPECT_EQ(t, (Table{{"-9223372036854775808", "9223372036854775807", "9223372036854775807"}}));

  // Other types read as text: DECIMAL, DOUBLE, a long DECIMAL, a SUM.
  ASSERT_OK_AND_ASSIGN(
      Table u,
      Select(conn_, "SELECT CAST(?1 AS DECIMAL(65,30)), 1.5e300, SUM(id), COUNT(*) FROM t",
             SqlArgs().Add("12345678901234567890123456789012345.123456789012345678901234567891"),
             4));
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0][0], "12345678901234567890123456789012345.123456789012345678901234567891");
  EXPECT_EQ(u[0][1], "1.5e300");
  EXPECT_EQ(u[0][2], "6");
  EXPECT_EQ(u[0][3], "3");

  // Bad data: kInvalidArgument, the connection lives on.
  for (const char* bad : {"UPDATE t SET n = n + 1 WHERE id = 2",       // 1690 out of range
                          "UPDATE t SET small = 300 WHERE id = 1",     // 1264 out of range
                          "UPDATE t SET short = 'abcd' WHERE id = 1",  // 1406 too long
                          "UPDATE t SET small = 'x' WHERE id = 1"}) {  // 1366 incorrect value
    SCOPED_TRACE(bad);
    auto r = conn_.RunText(bad, SqlArgs(), [](const Row&) {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << r.status().ToString();
    EXPECT_TRUE(conn_.healthy());
  }
}

TEST_F(MariaConnTest, ReturnsAffectedRows) {
  ASSERT_OK(conn_.Exec("CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)"));
  auto run = [&](const char* sql) { return conn_.Run(sql, SqlArgs(), [](const Row&) {}); };
  ASSERT_OK_AND_ASSIGN(std::int64_t inserted, run("INSERT INTO t VALUES (1, 0), (2, 0), (3, 0)"));
  EXPECT_EQ(inserted, 3);
  // Matched rows count, changed or not (as on PostgreSQL and SQLite).
  ASSERT_OK_AND_ASSIGN(std::int64_t unchanged, run("UPDATE t SET v = 0 WHERE id <= 2"));
  EXPECT_EQ(unchanged, 2);
  ASSERT_OK_AND_ASSIGN(std::int64_t updated, run("UPDATE t SET v = 1 WHERE id = 1"));
  EXPECT_EQ(updated, 1);
  ASSERT_OK_AND_ASSIGN(std::int64_t none, run("UPDATE t SET v = 1 WHERE id = 99"));
  EXPECT_EQ(none, 0);
  ASSERT_OK_AND_ASSIGN(std::int64_t selected, run("SELECT * FROM t"));
  EXPECT_EQ(selected, 0);
  ASSERT_OK_AND_ASSIGN(std::int64_t deleted, run("DELETE FROM t WHERE id >= 2"));
  EXPECT_EQ(deleted, 2);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM t"), 1);

  ASSERT_OK(conn_.Exec("CREATE TABLE a (id BIGINT AUTO_INCREMENT PRIMARY KEY, name TEXT)"));
  ASSERT_OK(conn_.Run("INSERT INTO a (name) VALUES (?1)", SqlArgs().Add("x"), [](const Row&) {}));
  EXPECT_EQ(conn_.last_insert_id(), 1);
  ASSERT_OK(conn_.Run("INSERT INTO a (name) VALUES (?1)", SqlArgs().Add("y"), [](const Row&) {}));
  EXPECT_EQ(conn_.last_insert_id(), 2);
}

TEST_F(MariaConnTest, ReturningYieldsRows) {
  ASSERT_OK(conn_.Exec("CREATE TABLE t (id BIGINT AUTO_INCREMENT PRIMARY KEY, name TEXT)"));
  Table rows;
  ASSERT_OK_AND_ASSIGN(std::int64_t inserted,
                       conn_.Run("INSERT INTO t (name) VALUES (?1), (?2) RETURNING id, name",
                                 SqlArgs().Add("a").Add("b"), [&](const Row& r) {
                                   rows.push_back({r.Text(0), r.Text(1)});
                                 }));
  EXPECT_EQ(inserted, 2);
  EXPECT_EQ(rows, (Table{{"1", "a"}, {"2", "b"}}));

  ASSERT_OK_AND_ASSIGN(Table deleted, Select(conn_, "DELETE FROM t WHERE id = ?1 RETURNING name",
                                             SqlArgs().Add(1), 1));
  EXPECT_EQ(deleted, (Table{{"a"}}));
  ASSERT_OK_AND_ASSIGN(
      std::int64_t deleted_count,
      conn_.Run("DELETE FROM t WHERE id = ?1 RETURNING name", SqlArgs().Add(2), [](const Row&) {}));
  EXPECT_EQ(deleted_count, 1);
  ASSERT_OK_AND_ASSIGN(std::int64_t none, conn_.Run("DELETE FROM t WHERE id = ?1 RETURNING name",
                                                    SqlArgs().Add(2), [](const Row&) {}));
  EXPECT_EQ(none, 0);
}

TEST_F(MariaConnTest, RunBulkRunsEveryElementInOrderAndSumsAffectedRows) {
  ASSERT_OK(conn_.Exec("CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT, s LONGTEXT)"));
  static constexpr char kInsert[] = "INSERT INTO t (s, id, v) VALUES (?3, ?1, ?2)";
  std::vector<SqlArgs> rows;
  rows.push_back(SqlArgs().Add(1).Add(10).Add("a'b"));
  rows.push_back(SqlArgs().Add(2).AddNull().Add(std::string(100000, 'x')));
  rows.push_back(SqlArgs().Add(3).Add(-5).AddNull());
  ASSERT_OK_AND_ASSIGN(std::int64_t inserted, conn_.RunBulk(kInsert, rows));
  EXPECT_EQ(inserted, 3);
  ASSERT_OK_AND_ASSIGN(
      Table got, Select(conn_, "SELECT id, v, LENGTH(s), LEFT(s, 3) FROM t ORDER BY id", {}, 4));
  EXPECT_EQ(got, (Table{{"1", "10", "3", "a'b"},
                        {"2", "NULL", "100000", "xxx"},
                        {"3", "-5", "NULL", "NULL"}}));

  // Each element runs in order, seeing the ones before it; matched rows count.
  static constexpr char kUpdate[] = "UPDATE t SET v = COALESCE(v, 0) + ?2 WHERE id = ?1";
  ASSERT_OK_AND_ASSIGN(std::int64_t updated,
                       conn_.RunBulk(kUpdate, {SqlArgs().Add(1).Add(1), SqlArgs().Add(99).Add(1),
                                               SqlArgs().Add(1).Add(1), SqlArgs().Add(2).Add(0)}));
  EXPECT_EQ(updated, 3);
  EXPECT_EQ(Count("SELECT v FROM t WHERE id = 1"), 12);
  EXPECT_EQ(Count("SELECT v FROM t WHERE id = 2"), 0);
  // One element and none.
  ASSERT_OK_AND_ASSIGN(std::int64_t one, conn_.RunBulk(kUpdate, {SqlArgs().Add(3).Add(5)}));
  EXPECT_EQ(one, 1);
  ASSERT_OK_AND_ASSIGN(std::int64_t none, conn_.RunBulk(kUpdate, {}));
  EXPECT_EQ(none, 0);
  // The statement is still a plain one afterwards.
  ASSERT_OK_AND_ASSIGN(std::int64_t plain,
                       conn_.Run(kUpdate, SqlArgs().Add(3).Add(1), [](const Row&) {}));
  EXPECT_EQ(plain, 1);
  EXPECT_EQ(Count("SELECT v FROM t WHERE id = 3"), 1);

  // A duplicate key fails the call as a single statement would.
  auto dup =
      conn_.RunBulk(kInsert, {SqlArgs().Add(7).Add(0).Add("n"), SqlArgs().Add(1).Add(0).Add("n")});
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().code(), ErrorCode::kConflict) << dup.status().ToString();
  EXPECT_TRUE(conn_.healthy());

  // An argument that is an integer in one element and a text in another is
  // a caller's bug.
  auto mixed = conn_.RunBulk(kUpdate, {SqlArgs().Add(1).Add(1), SqlArgs().Add("1").Add(1)});
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.status().code(), ErrorCode::kInternal) << mixed.status().ToString();
  auto short_row = conn_.RunBulk(kUpdate, {SqlArgs().Add(1).Add(1), SqlArgs().Add(1)});
  ASSERT_FALSE(short_row.ok());
  EXPECT_EQ(short_row.status().code(), ErrorCode::kInternal);
}

TEST_F(MariaConnTest, DuplicateKeyIsConflict) {
  ASSERT_OK(conn_.Exec("CREATE TABLE t (id BIGINT PRIMARY KEY, k VARCHAR(20) UNIQUE)"));
  const char* insert = "INSERT INTO t (id, k) VALUES (?1, ?2)";
  ASSERT_OK(conn_.Run(insert, SqlArgs().Add(1).Add("key"), [](const Row&) {}));
  auto r = conn_.Run(insert, SqlArgs().Add(2).Add("key"), [](const Row&) {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kConflict) << r.status().ToString();
  EXPECT_EQ(conn_.last_error(), 1062u);
  EXPECT_TRUE(conn_.healthy());
  ASSERT_OK(conn_.Run(insert, SqlArgs().Add(2).Add("other"), [](const Row&) {}));
  EXPECT_EQ(conn_.last_error(), 0u);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM t"), 2);
}

TEST_F(MariaConnTest, ExecRunsEveryStatementAndStopsAtTheFirstError) {
  ASSERT_OK(
      conn_.Exec("CREATE TABLE t (id BIGINT PRIMARY KEY); INSERT INTO t VALUES (1);"
                 " SELECT * FROM t; INSERT INTO t VALUES (2)"));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM t"), 2);
  const Status s =
      conn_.Exec("INSERT INTO t VALUES (3); INSERT INTO t VALUES (1); INSERT INTO t VALUES (4)");
  EXPECT_EQ(s.code(), ErrorCode::kConflict) << s.ToString();
  EXPECT_TRUE(conn_.healthy());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM t"), 3);  // 3 in, 4 never ran

  // Transactions through Exec.
  ASSERT_OK(conn_.Exec("BEGIN"));
  ASSERT_OK(conn_.Run("INSERT INTO t VALUES (?1)", SqlArgs().Add(10), [](const Row&) {}));
  ASSERT_OK(conn_.Exec("ROLLBACK"));
  EXPECT_EQ(Count("SELECT COUNT(*) FROM t"), 3);

  const Status syntax = conn_.Exec("SELEC 1");
  EXPECT_EQ(syntax.code(), ErrorCode::kInternal) << syntax.ToString();
  EXPECT_TRUE(conn_.healthy());
}

TEST_F(MariaConnTest, SessionRunsStatementsAndRowsMayRunMore) {
  ASSERT_OK(conn_.Exec("CREATE TABLE t (id BIGINT PRIMARY KEY, name TEXT)"));
  MariaSession session(conn_);
  storage_internal::SqlSession& s = session;
  ASSERT_OK(
      s.Exec("INSERT INTO t VALUES (?1, ?2), (?3, ?4)", SqlArgs().Add(1).Add("a").Add(2).Add("b")));
  ASSERT_OK_AND_ASSIGN(auto names, s.All("SELECT name FROM t ORDER BY id", SqlArgs(),
                                         [](const Row& r) { return r.Text(0); }));
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b"}));
  ASSERT_OK_AND_ASSIGN(auto one, s.One("SELECT id FROM t WHERE name = ?1", SqlArgs().Add("b"),
                                       [](const Row& r) { return r.Int(0); }));
  EXPECT_EQ(one, 2);

  // Built texts, cached by text.
  for (int i = 0; i < 3; ++i) {
    const std::string sql =
        "SELECT COUNT(*) FROM t WHERE id " + std::string(i % 2 ? ">" : "<") + " ?1";
    std::int64_t n = -1;
    ASSERT_OK(s.RunText(sql, SqlArgs().Add(1), [&](const Row& r) { n = r.Int(0); }));
    EXPECT_EQ(n, i % 2 ? 1 : 0);
  }

  // The result is read whole first: a row may run another statement.
  std::vector<std::string> seen;
  ASSERT_OK(s.Run("SELECT id FROM t ORDER BY id", SqlArgs(), [&](const Row& r) {
    auto name = s.One("SELECT name FROM t WHERE id = ?1", SqlArgs().Add(r.Int(0)),
                      [](const Row& n) { return n.Text(0); });
    ASSERT_TRUE(name.ok()) << name.status().ToString();
    seen.push_back(name->value_or("?"));
  }));
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b"}));
}

// --- Failures ------------------------------------------------------------------

// Two transactions that each wait for the other's row: InnoDB rolls one back
// with ER_LOCK_DEADLOCK, which is kUnavailable and retryable.
TEST_F(MariaConnTest, DeadlockIsRetryable) {
  ASSERT_OK(
      conn_.Exec("CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT);"
                 " INSERT INTO t VALUES (1, 0), (2, 0)"));
  MariaConn a;
  MariaConn b;
  MariaConn watcher;
  ASSERT_OK(a.Connect(url_));
  ASSERT_OK(b.Connect(url_));
  ASSERT_OK(watcher.Connect(url_));
  const char* update = "UPDATE t SET v = v + 1 WHERE id = ?1";
  ASSERT_OK(a.Exec("BEGIN"));
  ASSERT_OK(a.Run(update, SqlArgs().Add(1), [](const Row&) {}));
  ASSERT_OK(b.Exec("BEGIN"));
  ASSERT_OK(b.Run(update, SqlArgs().Add(2), [](const Row&) {}));

  std::int64_t a_id = 0;
  ASSERT_OK(a.Run("SELECT CONNECTION_ID()", SqlArgs(), [&](const Row& r) { a_id = r.Int(0); }));
  Status a_second;
  std::thread waiter(
      [&] { a_second = a.Run(update, SqlArgs().Add(2), [](const Row&) {}).status(); });
  // a's UPDATE is running (waiting for b's row): the deadlock follows in
  // either order. (Not INNODB_TRX: polled this often, it serves a snapshot.)
  const bool waiting = WaitFor([&] {
    std::int64_t n = 0;
    EXPECT_OK(watcher.Run(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?1 AND INFO LIKE 'UPDATE%'",
        SqlArgs().Add(a_id), [&](const Row& r) { n = r.Int(0); }));
    return n > 0;
  });
  const Status b_second = b.Run(update, SqlArgs().Add(1), [](const Row&) {}).status();
  waiter.join();
  ASSERT_TRUE(waiting);

  ASSERT_NE(a_second.ok(), b_second.ok()) << a_second.ToString() << " / " << b_second.ToString();
  const Status& lost = a_second.ok() ? b_second : a_second;
  MariaConn& victim = a_second.ok() ? b : a;
  EXPECT_EQ(lost.code(), ErrorCode::kUnavailable) << lost.ToString();
  EXPECT_EQ(victim.last_error(), 1213u);
  EXPECT_TRUE(IsRetryable(victim.last_error()));
  EXPECT_TRUE(victim.healthy());
  ASSERT_OK(a.Exec("ROLLBACK"));
  ASSERT_OK(b.Exec("ROLLBACK"));
  EXPECT_EQ(Count("SELECT SUM(v) FROM t"), 0);
}

TEST_F(MariaConnTest, LockWaitTimeoutIsRetryable) {
  ASSERT_OK(
      conn_.Exec("CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT); INSERT INTO t VALUES (1, 0)"));
  MariaConnOptions options;
  options.lock_wait_timeout = std::chrono::seconds(1);
  MariaConn waiter(options);
  ASSERT_OK(waiter.Connect(url_));
  ASSERT_OK(conn_.Exec("BEGIN; UPDATE t SET v = 1 WHERE id = 1"));
  auto r = waiter.Run("UPDATE t SET v = 2 WHERE id = ?1", SqlArgs().Add(1), [](const Row&) {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable) << r.status().ToString();
  EXPECT_EQ(waiter.last_error(), 1205u);
  EXPECT_TRUE(IsRetryable(waiter.last_error()));
  EXPECT_TRUE(waiter.healthy());
  ASSERT_OK(conn_.Exec("ROLLBACK"));
}

TEST_F(MariaConnTest, KilledConnectionIsUnavailableAndStaysBroken) {
  std::int64_t id = 0;
  ASSERT_OK(conn_.Run("SELECT CONNECTION_ID()", SqlArgs(), [&](const Row& r) { id = r.Int(0); }));
  MariaConn killer;
  ASSERT_OK(killer.Connect(url_));
  ASSERT_OK(killer.Exec("KILL CONNECTION " + std::to_string(id)));
  auto r = conn_.Run("SELECT ?1", SqlArgs().Add(1), [](const Row&) {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable) << r.status().ToString();
  EXPECT_TRUE(IsConnectionLoss(conn_.last_error())) << conn_.last_error();
  EXPECT_FALSE(conn_.healthy());
  // No silent reconnect: it stays broken until Connect.
  EXPECT_EQ(conn_.Exec("SELECT 1").code(), ErrorCode::kUnavailable);
  EXPECT_FALSE(conn_.healthy());
  ASSERT_OK(conn_.Connect(url_));
  ASSERT_OK(conn_.Run("SELECT ?1", SqlArgs().Add(1), [](const Row&) {}));
}

// A server that stops under an open connection: kUnavailable, healthy() false;
// a new Connect after the restart works, and the cached statements are
// prepared again.
TEST(MariaServerStopTest, StopIsUnavailableAndReconnectWorks) {
  TestServer server;
  ASSERT_TRUE(server.started()) << server.url();
  MariaConn conn;
  ASSERT_OK(conn.Connect(server.url()));
  const char* select = "SELECT ?1 + 1";
  std::int64_t n = 0;
  ASSERT_OK(conn.Run(select, SqlArgs().Add(1), [&](const Row& r) { n = r.Int(0); }));
  EXPECT_EQ(n, 2);

  ASSERT_TRUE(server.Stop());
  auto r = conn.Run(select, SqlArgs().Add(1), [](const Row&) {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnavailable) << r.status().ToString();
  EXPECT_TRUE(IsConnectionLoss(conn.last_error())) << conn.last_error();
  std::printf("error on a stopped server: %u: %s\n", conn.last_error(),
              r.status().message().c_str());
  EXPECT_FALSE(conn.healthy());
  const Status down = conn.Connect(server.url());
  EXPECT_EQ(down.code(), ErrorCode::kUnavailable) << down.ToString();
  EXPECT_FALSE(conn.healthy());

  ASSERT_TRUE(server.Start());
  ASSERT_OK(conn.Connect(server.url()));
  EXPECT_TRUE(conn.healthy());
  ASSERT_OK(conn.Run(select, SqlArgs().Add(41), [&](const Row& r) { n = r.Int(0); }));
  EXPECT_EQ(n, 42);
}

}  // namespace
}  // namespace taskengine::maria
