#include "storage/sqlite/sqlite_alloc.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "storage/sqlite/sqlite_db.h"
#include "testing_support/test_util.h"

namespace taskengine::sqlite::alloc_internal {
namespace {

TEST(SqliteAllocTest, BlocksHoldWhatWasAskedAndSayTheirSize) {
  for (int bytes : {1, 8, 31, 32, 33, 100, 511, 1024, 2047, 2048, 2049, 10000}) {
    void* p = Malloc(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 16, 0u) << bytes;
    EXPECT_GE(Size(p), bytes);
    EXPECT_EQ(Size(p), Roundup(bytes) > 2048 ? bytes : Roundup(bytes)) << bytes;
    std::memset(p, 0xab, static_cast<std::size_t>(Size(p)));  // all of it is usable
    Free(p);
  }
  EXPECT_EQ(Roundup(2049), 2056);  // past the classes: a multiple of 8
  EXPECT_EQ(Size(nullptr), 0);
  Free(nullptr);
}

TEST(SqliteAllocTest, ReallocKeepsTheContent) {
  char* p = static_cast<char*>(Malloc(20));
  std::memcpy(p, "0123456789abcdefghi", 20);
  // Within its class: the same block.
  EXPECT_EQ(Realloc(p, 30), p);
  // To a larger class, then past the classes, then back to a small one.
  for (int bytes : {300, 5000, 9000, 40}) {
    p = static_cast<char*>(Realloc(p, bytes));
    ASSERT_NE(p, nullptr);
    EXPECT_GE(Size(p), bytes);
    EXPECT_EQ(std::memcmp(p, "0123456789abcdefghi", 20), 0) << bytes;
  }
  Free(p);
  void* fresh = Realloc(nullptr, 64);
  EXPECT_GE(Size(fresh), 64);
  Free(fresh);
}

TEST(SqliteAllocTest, AThreadKeepsABoundedNumberOfFreeBlocks) {
  const std::size_t before = CachedBlocks();
  std::vector<void*> blocks;
  for (int i = 0; i < 3 * kMaxCachedPerClass; ++i) blocks.push_back(Malloc(100));
  for (void* p : blocks) Free(p);
  EXPECT_LE(CachedBlocks(), before + kMaxCachedPerClass);
  EXPECT_GE(CachedBlocks(), static_cast<std::size_t>(kMaxCachedPerClass));
  // The last block freed is the next one handed out.
  void* last = Malloc(200);
  Free(last);
  void* again = Malloc(200);
  EXPECT_EQ(again, last);
  Free(again);
}

TEST(SqliteAllocTest, AnotherThreadFreesAndGivesItsBlocksBackWhenItExits) {
  std::vector<void*> blocks;
  for (int i = 0; i < 50; ++i) blocks.push_back(Malloc(64 + i * 40));
  const std::size_t mine = CachedBlocks();
  std::size_t kept_by_other = 0;
  std::thread other([&] {
    for (void* p : blocks) Free(p);
    kept_by_other = CachedBlocks();
    // Blocks freed here are handed out here.
    void* p = Malloc(64);
    EXPECT_GE(Size(p), 64);
    Free(p);
  });
  other.join();
  EXPECT_EQ(kept_by_other, 50u);
  // This thread's free blocks are untouched. The other thread's went back to
  // malloc at its exit (a leak checker would say otherwise).
  EXPECT_EQ(CachedBlocks(), mine);
}

TEST(SqliteAllocTest, InstalledUnlessASanitizerWatchesMalloc) {
  // This test binary opens no connection first: SQLite is not initialized,
  // so the allocator goes in unless the library was built with a sanitizer.
  EXPECT_EQ(InstallAllocator(), !SanitizerKeepsMalloc());
  EXPECT_EQ(InstallAllocator(), !SanitizerKeepsMalloc());  // a second call changes nothing
}

TEST(SqliteAllocTest, AConnectionsMemoryComesFromTheAllocator) {
  // In a thread of its own, whose free lists start empty: what SQLite frees
  // there lands in them when the first Connection::Open installed the
  // allocator.
  std::size_t cached = 0;
  std::thread t([&] {
    Connection c;
    ASSERT_OK(c.Open(":memory:", /*create=*/true, /*busy_timeout_ms=*/1000));
    ASSERT_OK(c.Exec("CREATE TABLE t (a INTEGER, b TEXT); INSERT INTO t VALUES (1, 'x');"));
    ASSERT_OK_AND_ASSIGN(Stmt s, c.Prepare("SELECT a, b FROM t"));
    ASSERT_OK_AND_ASSIGN(bool row, s.Step());
    EXPECT_TRUE(row);
    cached = CachedBlocks();
  });
  t.join();
  if (SanitizerKeepsMalloc()) {
    EXPECT_EQ(cached, 0u);
  } else {
    EXPECT_GT(cached, 0u);
  }
}

}  // namespace
}  // namespace taskengine::sqlite::alloc_internal
