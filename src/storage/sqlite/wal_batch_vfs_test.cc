// The WAL batching VFS (wal_batch_vfs.h) on real files: fewer writes, and
// everything SQLite promises without it still holds, with commits that sync
// and commits that do not (other connections see each commit at once, a
// transaction reads back what it spilled, a rollback leaves nothing, a
// killed writer loses only what it had not committed).
#include "storage/sqlite/wal_batch_vfs.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "storage/sqlite/sqlite_db.h"
#include "testing_support/test_util.h"

namespace taskengine::sqlite {
namespace {

// A raw connection (closed at the end of scope); through the batching VFS
// when `vfs` is set.
class Db {
 public:
  Db(const std::string& path, bool vfs) {
    // Connection::Open registers the VFS after configuring SQLite, as the store does.
    if (vfs) {
      Connection c;
      EXPECT_OK(c.Open(path, /*create=*/true, 1000, kWalBatchVfs));
    }
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                              vfs ? kWalBatchVfs : nullptr),
              SQLITE_OK);
    sqlite3_busy_timeout(db_, 5000);
  }
  ~Db() { sqlite3_close_v2(db_); }
  sqlite3* raw() const { return db_; }

  void Exec(const std::string& sql) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    EXPECT_EQ(rc, SQLITE_OK) << sql << ": " << (err ? err : "");
    sqlite3_free(err);
  }
  // The first column of the first row of `sql`; -1 on an error.
  std::int64_t Int(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) return -1;
    std::int64_t v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_finalize(s);
    return v;
  }
  std::string Text(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) return "";
    std::string v;
    if (sqlite3_step(s) == SQLITE_ROW) v = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return v;
  }

 private:
  sqlite3* db_ = nullptr;
};

// A writer as the store's: WAL, batching on; its commits sync (FULL) or
// not (NORMAL: the store's claims and heartbeats).
void MakeBatchingWriter(Db& w, const std::string& sync = "NORMAL") {
  w.Exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = " + sync);
  ASSERT_EQ(SetWalBatching(w.raw(), true), SQLITE_OK);
  w.Exec("CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v INTEGER NOT NULL, pad TEXT)");
}

TEST(WalBatchVfsTest, ACommitsFramesGoOutInOneWrite) {
  for (const char* sync : {"NORMAL", "FULL"}) {
    SCOPED_TRACE(sync);
    TempDir dir;
    Db w(dir.File("a.db"), /*vfs=*/true);
    ASSERT_NO_FATAL_FAILURE(MakeBatchingWriter(w, sync));
    const WalBatchCounts before = WalBatchCountsNow();
    w.Exec("BEGIN");
    for (int i = 0; i < 20; ++i) {
      w.Exec("INSERT INTO t(v, pad) VALUES (" + std::to_string(i) + ", zeroblob(1500))");
    }
    w.Exec("COMMIT");
    const WalBatchCounts after = WalBatchCountsNow();
    // About 8 pages of rows, each frame a header and a page: 16 writes asked.
    EXPECT_GE(after.asked - before.asked, 16u);
    EXPECT_EQ(after.made - before.made, 1u) << "one write for the commit's frames";
    EXPECT_EQ(w.Int("SELECT count(*) FROM t"), 20);
    EXPECT_EQ(w.Text("PRAGMA integrity_check"), "ok");
  }
}

TEST(WalBatchVfsTest, OffItWritesEachFrameAsSQLiteAsks) {
  TempDir dir;
  Db w(dir.File("a.db"), /*vfs=*/true);
  ASSERT_NO_FATAL_FAILURE(MakeBatchingWriter(w));
  ASSERT_EQ(SetWalBatching(w.raw(), false), SQLITE_OK);
  const WalBatchCounts before = WalBatchCountsNow();
  w.Exec("INSERT INTO t(v) VALUES (1)");
  const WalBatchCounts after = WalBatchCountsNow();
  EXPECT_GE(after.asked - before.asked, 2u);
  EXPECT_EQ(after.made - before.made, after.asked - before.asked);
}

TEST(WalBatchVfsTest, AConnectionOfAnotherVfsIsRefused) {
  TempDir dir;
  Db plain(dir.File("a.db"), /*vfs=*/false);
  EXPECT_EQ(SetWalBatching(plain.raw(), true), SQLITE_MISUSE);
}

// A transaction larger than the writer's page cache spills frames to the
// WAL before its commit and reads them back; the VFS writes them before the
// read. Its rollback leaves nothing; the next commit and a reopen are sound.
TEST(WalBatchVfsTest, SpilledFramesAreReadBackAndARollbackLeavesNothing) {
  TempDir dir;
  const std::string path = dir.File("a.db");
  {
    Db w(path, /*vfs=*/true);
    ASSERT_NO_FATAL_FAILURE(MakeBatchingWriter(w));
    w.Exec("PRAGMA cache_size = 10");
    w.Exec("BEGIN");
    for (int i = 0; i < 2000; ++i) {
      w.Exec("INSERT INTO t(v, pad) VALUES (" + std::to_string(i) + ", zeroblob(900))");
    }
    EXPECT_EQ(w.Int("SELECT sum(v) FROM t"), 1999 * 2000 / 2);
    EXPECT_EQ(w.Int("SELECT count(*) FROM t WHERE length(pad) = 900"), 2000);
    w.Exec("ROLLBACK");
    EXPECT_EQ(w.Int("SELECT count(*) FROM t"), 0);
    w.Exec("BEGIN");
    for (int i = 0; i < 300; ++i) {
      w.Exec("INSERT INTO t(v, pad) VALUES (1, zeroblob(900))");
    }
    w.Exec("COMMIT");
    EXPECT_EQ(w.Text("PRAGMA integrity_check"), "ok");
  }
  Db r(path, /*vfs=*/false);
  EXPECT_EQ(r.Int("SELECT count(*) FROM t"), 300);
  EXPECT_EQ(r.Text("PRAGMA integrity_check"), "ok");
}

// Readers on their own connections (and file handles) see every commit
// whole, at once: a commit is published only after its frames are written,
// also when the commit does not sync (then only its commit frame tells the
// VFS that the commit is complete).
class WalBatchVfsModeTest : public ::testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(Sync, WalBatchVfsModeTest, ::testing::Values("NORMAL", "FULL"));

TEST_P(WalBatchVfsModeTest, ReadersSeeEachCommitWholeAtOnce) {
  TempDir dir;
  const std::string path = dir.File("a.db");
  Db w(path, /*vfs=*/true);
  ASSERT_NO_FATAL_FAILURE(MakeBatchingWriter(w, GetParam()));
  w.Exec("INSERT INTO t(id, v) VALUES (1, 0), (2, 0)");
  std::atomic<int> committed{0};
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::atomic<long> reads{0};
  auto reader = [&] {
    Db r(path, /*vfs=*/false);
    while (!done.load()) {
      const int floor = committed.load();
      r.Exec("BEGIN");
      const std::int64_t a = r.Int("SELECT v FROM t WHERE id = 1");
      const std::int64_t b = r.Int("SELECT v FROM t WHERE id = 2");
      const std::int64_t n = r.Int("SELECT count(*) FROM t WHERE id > 2");
      r.Exec("COMMIT");
      // Each commit sets both counters and adds one padded row.
      if (a != b || a < floor || n != a) ++bad;
      ++reads;
    }
  };
  std::thread r1(reader), r2(reader);
  for (int i = 1; i <= 1500; ++i) {
    w.Exec("BEGIN");
    w.Exec("UPDATE t SET v = " + std::to_string(i) + " WHERE id IN (1, 2)");
    w.Exec("INSERT INTO t(v, pad) VALUES (" + std::to_string(i) + ", zeroblob(3000))");
    w.Exec("COMMIT");
    committed = i;
  }
  done = true;
  r1.join();
  r2.join();
  EXPECT_EQ(bad.load(), 0) << "of " << reads.load() << " reads";
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(w.Text("PRAGMA integrity_check"), "ok");
}

// A writer killed at any point loses no commit it finished and leaves a
// sound database.
TEST_P(WalBatchVfsModeTest, AKilledWriterLosesOnlyWhatItHadNotCommitted) {
  for (int round = 0; round < 5; ++round) {
    TempDir dir;
    const std::string path = dir.File("a.db");
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(pipe_fds[0]);
      Db w(path, /*vfs=*/true);
      MakeBatchingWriter(w, GetParam());
      for (std::int64_t i = 1;; ++i) {
        w.Exec("BEGIN");
        for (int k = 0; k < 1 + static_cast<int>(i % 40); ++k) {
          w.Exec("INSERT INTO t(v, pad) VALUES (" + std::to_string(i) + ", zeroblob(700))");
        }
        w.Exec("COMMIT");
        // Told after its COMMIT returned: the parent knows it is in the
        // file (a kill loses nothing the kernel was given).
        if (write(pipe_fds[1], &i, sizeof i) != sizeof i) _exit(1);
      }
    }
    close(pipe_fds[1]);
    // The kill comes some time after the first commit (however slow the
    // machine is to start the child), in the middle of later ones.
    std::int64_t last = 0, got = 0;
    const bool started = read(pipe_fds[0], &last, sizeof last) == sizeof last;
    std::this_thread::sleep_for(std::chrono::milliseconds(50 + 70 * round));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    while (read(pipe_fds[0], &got, sizeof got) == sizeof got) last = got;
    close(pipe_fds[0]);
    ASSERT_TRUE(started) << "the writer ended before its first commit";
    ASSERT_GT(last, 0) << "the writer committed nothing before it was killed";
    Db r(path, /*vfs=*/false);
    EXPECT_EQ(r.Text("PRAGMA integrity_check"), "ok");
    const std::int64_t max = r.Int("SELECT max(v) FROM t");
    EXPECT_GE(max, last) << "a commit it reported is lost";
    EXPECT_LE(max, last + 1);
    // Whole transactions only: transaction v inserted 1 + v % 40 rows.
    EXPECT_EQ(r.Int("SELECT count(*) FROM (SELECT v, count(*) AS n FROM t GROUP BY v "
                    "HAVING n <> 1 + v % 40)"),
              0);
  }
}

}  // namespace
}  // namespace taskengine::sqlite
