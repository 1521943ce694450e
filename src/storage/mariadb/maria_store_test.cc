// The MariaDB store's own behaviour beyond the conformance suite: the
// database clock, opening a store with bad options, migrating twice, and
// surviving a server restart. Starts its own throwaway server
// (scripts/mariadb_cluster.sh).
#include "storage/mariadb/maria_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "storage/mariadb/maria_conn.h"
#include "storage/mariadb/testing/test_server.h"
#include "testing_support/test_util.h"

namespace taskengine::maria {
namespace {

using testing::FreshDatabase;
using testing::SharedServer;
using testing::TestDatabaseName;
using testing::TestServer;

// The clock follows the server's clock: within a second of SYSDATE() read
// over another connection, and monotonic between samples.
TEST(MariaStoreTest, DatabaseClockFollowsTheServer) {
  TestServer& server = SharedServer();
  ASSERT_TRUE(server.started()) << server.url();
  ASSERT_OK_AND_ASSIGN(auto clock, OpenMariaClock(server.url(), std::chrono::milliseconds(50)));
  MariaConn conn;
  ASSERT_OK(conn.Connect(server.url()));
  Millis db = 0;
  ASSERT_OK(conn.Run("SELECT CAST(FLOOR(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)",
                     storage_internal::SqlArgs(),
                     [&](const storage_internal::Row& r) { db = r.Int(0); })
                .status());
  EXPECT_LT(std::llabs(clock->NowMillis() - db), 1000);
  ASSERT_OK(clock->Resample());
  std::this_thread::sleep_for(std::chrono::milliseconds(120));  // the sampler runs meanwhile
  const Millis a = clock->NowMillis();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GE(clock->NowMillis(), a);
  EXPECT_FALSE(OpenMariaClock("mysql://u@127.0.0.1:1/none").ok());
}

TEST(MariaStoreTest, RefusesBadOptions) {
  MariaStoreOptions o;
  EXPECT_EQ(OpenMariaStore(o).status().code(), ErrorCode::kInvalidArgument);
  o.url = "mysql://u@h:70000/db";
  EXPECT_EQ(OpenMariaStore(o).status().code(), ErrorCode::kInvalidArgument);
  o.url = SharedServer().url();
  o.pool_size = 0;
  EXPECT_EQ(OpenMariaStore(o).status().code(), ErrorCode::kInvalidArgument);
}

// Migrate is idempotent, and a second node migrating the same database finds
// it current.
TEST(MariaStoreTest, MigrateTwiceFromTwoStores) {
  ASSERT_OK_AND_ASSIGN(std::string url, FreshDatabase(TestDatabaseName()));
  MariaStoreOptions o;
  o.url = url;
  ASSERT_OK_AND_ASSIGN(auto a, OpenMariaStore(o));
  ASSERT_OK_AND_ASSIGN(auto b, OpenMariaStore(o));
  ASSERT_OK(a->Migrate());
  ASSERT_OK(b->Migrate());
  ASSERT_OK(a->Migrate());
  ASSERT_OK_AND_ASSIGN(int va, a->SchemaVersion());
  ASSERT_OK_AND_ASSIGN(int vb, b->SchemaVersion());
  EXPECT_GT(va, 0);
  EXPECT_EQ(va, vb);
}

// A server restart: calls answer unavailable while it is down and work again
// once it is back, through the same store object.
TEST(MariaStoreTest, SurvivesAServerRestart) {
  TestServer& server = SharedServer();
  ASSERT_OK_AND_ASSIGN(std::string url, FreshDatabase(TestDatabaseName()));
  MariaStoreOptions o;
  o.url = url;
  o.reconnect_backoff_min = std::chrono::milliseconds(10);
  o.reconnect_backoff_max = std::chrono::milliseconds(50);
  ASSERT_OK_AND_ASSIGN(auto store, OpenMariaStore(o));
  ASSERT_OK(store->Migrate());
  ASSERT_OK(store->AppendAudit(AuditRecord{0, 1, "a", "", "x", "t", "", "", "r"}));
  ASSERT_TRUE(server.Stop());
  auto down = store->ListAudit(AuditFilter{});
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), ErrorCode::kUnavailable) << down.status().message();
  ASSERT_TRUE(server.Start());
  Result<std::vector<AuditRecord>> back = Unavailable("not tried");
  for (int i = 0; i < 100 && !back.ok(); ++i) {
    back = store->ListAudit(AuditFilter{});
    if (!back.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_OK(back.status());
  EXPECT_EQ(back->size(), 1u);
}

}  // namespace
}  // namespace taskengine::maria
