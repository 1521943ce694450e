// The Redis transport against a throwaway redis-server (scripts/redis_server.sh):
// wakeups between nodes, stale and garbage entries, Redis stopped, flushed and
// back, reserved entries of a lost connection, dead nodes.
#include "transport/redis_transport.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "testing_support/script_server.h"
#include "testing_support/test_util.h"

namespace taskengine {
namespace {

using taskengine::testing::ScriptServer;
using taskengine::testing::Shell;

TEST(RedisTransportOpenTest, RefusesBadPrefixNodeIdAndSettings) {
  RedisTransportOptions o;
  o.url = "redis://127.0.0.1:1";
  o.prefix = "";
  EXPECT_FALSE(OpenRedisTransport(o).ok());
  o.prefix = "has space";
  EXPECT_FALSE(OpenRedisTransport(o).ok());
  o.prefix = std::string(65, 'p');
  EXPECT_FALSE(OpenRedisTransport(o).ok());
  o.prefix = "ok";
  o.node_id = "a*b";
  EXPECT_FALSE(OpenRedisTransport(o).ok());
  o.node_id = "";
  o.block_ms = 0;
  EXPECT_FALSE(OpenRedisTransport(o).ok());
  o.block_ms = 1000;
  // Nothing listens on port 1: opening does not connect.
  EXPECT_OK(OpenRedisTransport(o));
}

// One node: a transport and how often it woke its engine.
struct Node {
  std::unique_ptr<WorkTransport> transport;
  std::shared_ptr<std::atomic<int>> wakeups = std::make_shared<std::atomic<int>>(0);

  int woken() const { return wakeups->load(); }
};

class RedisTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.started()) << server_.url();
    prefix_ = std::string("t") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  RedisTransportOptions Options(const std::string& node) const {
    RedisTransportOptions o;
    o.url = server_.url();
    o.prefix = prefix_;
    o.node_id = node;
    o.block_ms = 200;
    o.node_ttl_ms = 2'000;
    o.reconnect_min_ms = 20;
    o.reconnect_max_ms = 200;
    return o;
  }

  Node Open(const std::string& node) { return Open(Options(node)); }
  Node Open(const RedisTransportOptions& o) {
    Node n;
    auto t = OpenRedisTransport(o);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    if (!t.ok()) return n;
    n.transport = std::move(*t);
    n.transport->Start([w = n.wakeups] { ++*w; });
    return n;
  }

  // redis-cli against the test server; its output.
  std::string Cli(const std::string& args) const {
    std::string out;
    Shell("redis-cli -u " + server_.url() + " " + args + " 2>&1", &out);
    return out;
  }

  // Publishes from `from` until `to` was woken more than `before` times.
  static bool Delivered(Node& from, const Node& to, int before) {
    return WaitFor([&] {
      from.transport->Publish("default");
      return to.woken() > before;
    });
  }

  ScriptServer server_{"scripts/redis_server.sh"};
  std::string prefix_;
};

TEST_F(RedisTransportTest, ACommitOnOneNodeWakesEveryNode) {
  Node a = Open("a");
  Node b = Open("b");
  Node c = Open("c");
  ASSERT_TRUE(WaitFor([&] {
    return a.transport->stats().connected && b.transport->stats().connected &&
           c.transport->stats().connected;
  }));
  ASSERT_TRUE(WaitFor([&] { return Cli("SCARD " + prefix_ + ":nodes") == "3"; }));
  const int b0 = b.woken();
  const int c0 = c.woken();
  ASSERT_TRUE(Delivered(a, b, b0));
  ASSERT_TRUE(WaitFor([&] { return c.woken() > c0; }));
  // Counted once the flush is read back (after the other nodes may have woken).
  ASSERT_TRUE(WaitFor([&] { return a.transport->stats().published >= 1; }));
  TransportStats s = a.transport->stats();
  EXPECT_TRUE(s.enabled);
  EXPECT_EQ(s.nodes, 3);
  // Counted once acked (after the wakeup).
  EXPECT_TRUE(WaitFor([&] { return b.transport->stats().received >= 1; }));
  // Acked: nothing stays reserved.
  ASSERT_TRUE(WaitFor([&] { return Cli("LLEN " + prefix_ + ":processing:b") == "0"; }));
}

TEST_F(RedisTransportTest, GarbageAndStaleEntriesOnlyWakeTheEngine) {
  Node b = Open("b");
  ASSERT_TRUE(WaitFor([&] { return b.transport->stats().connected; }));
  const int before = b.woken();
  EXPECT_EQ(Cli("RPUSH " + prefix_ + ":pending:b garbage 'x\ty\tz' 'a\t1\told'"), "3");
  ASSERT_TRUE(WaitFor([&] { return b.woken() > before; }));
  ASSERT_TRUE(WaitFor([&] { return b.transport->stats().received >= 3; }));
  EXPECT_EQ(Cli("LLEN " + prefix_ + ":pending:b"), "0");
  ASSERT_TRUE(WaitFor([&] { return Cli("LLEN " + prefix_ + ":processing:b") == "0"; }));
  EXPECT_TRUE(b.transport->stats().connected);
}

TEST_F(RedisTransportTest, WhatALostConnectionHadReservedIsTakenAgain) {
  // Entries reserved by an earlier connection of node b and never acked.
  EXPECT_EQ(Cli("RPUSH " + prefix_ + ":processing:b one two"), "2");
  Node b = Open("b");
  ASSERT_TRUE(WaitFor([&] { return b.woken() > 0; }));
  ASSERT_TRUE(WaitFor([&] { return b.transport->stats().received >= 2; }));
  ASSERT_TRUE(WaitFor([&] { return Cli("LLEN " + prefix_ + ":processing:b") == "0"; }));
}

TEST_F(RedisTransportTest, RedisDownDropsWakeupsWithoutBlockingAndComesBack) {
  Node a = Open("a");
  Node b = Open("b");
  ASSERT_TRUE(WaitFor([&] { return Cli("SCARD " + prefix_ + ":nodes") == "2"; }));
  ASSERT_TRUE(Delivered(a, b, b.woken()));

  ASSERT_TRUE(server_.Stop());
  // Publish only hands the queue over: thousands of calls while Redis is down
  // return (a blocked call would hang this test), and are dropped or coalesced.
  for (int i = 0; i < 5'000; ++i) a.transport->Publish("default");
  ASSERT_TRUE(WaitFor([&] { return a.transport->stats().dropped >= 1; }));
  ASSERT_TRUE(WaitFor([&] { return !b.transport->stats().connected; }));

  ASSERT_TRUE(server_.Start());
  // Redis comes back empty (no persistence): the nodes register again and
  // wakeups flow again.
  ASSERT_TRUE(WaitFor([&] { return b.transport->stats().connected; }));
  ASSERT_TRUE(Delivered(a, b, b.woken()));
  EXPECT_GE(b.transport->stats().reconnects, 1);
  EXPECT_GE(a.transport->stats().reconnects, 1);
}

TEST_F(RedisTransportTest, AFlushedRedisOnlyDelaysWakeupsUntilTheNextHeartbeat) {
  Node a = Open("a");
  Node b = Open("b");
  ASSERT_TRUE(WaitFor([&] { return Cli("SCARD " + prefix_ + ":nodes") == "2"; }));
  EXPECT_EQ(Cli("FLUSHALL"), "OK");
  ASSERT_TRUE(Delivered(a, b, b.woken()));
}

TEST_F(RedisTransportTest, ANodeThatStoppedHeartbeatingIsDroppedWithItsLists) {
  EXPECT_EQ(Cli("SADD " + prefix_ + ":nodes ghost"), "1");
  EXPECT_EQ(Cli("RPUSH " + prefix_ + ":pending:ghost w"), "1");
  EXPECT_EQ(Cli("RPUSH " + prefix_ + ":processing:ghost w"), "1");
  Node a = Open("a");
  ASSERT_TRUE(WaitFor([&] { return Cli("SISMEMBER " + prefix_ + ":nodes ghost") == "0"; }));
  EXPECT_EQ(Cli("EXISTS " + prefix_ + ":pending:ghost " + prefix_ + ":processing:ghost"), "0");
  EXPECT_EQ(Cli("SISMEMBER " + prefix_ + ":nodes a"), "1");
}

TEST_F(RedisTransportTest, ReadyListsAreTrimmed) {
  RedisTransportOptions o = Options("a");
  o.max_list = 4;
  Node a = Open(o);
  ASSERT_TRUE(WaitFor([&] { return a.transport->stats().connected; }));
  // A node that registered but takes nothing (it is stuck): its list stays bounded.
  EXPECT_EQ(Cli("SADD " + prefix_ + ":nodes stuck"), "1");
  EXPECT_EQ(Cli("SET " + prefix_ + ":node:stuck 1 PX 60000"), "OK");
  ASSERT_TRUE(WaitFor([&] {
    a.transport->Publish("default");
    return Cli("LLEN " + prefix_ + ":pending:stuck") == "4";
  }));
  ASSERT_TRUE(WaitFor([&] {
    a.transport->Publish("default");
    return a.transport->stats().published >= 10;
  }));
  EXPECT_EQ(Cli("LLEN " + prefix_ + ":pending:stuck"), "4");
  const std::string ttl = Cli("PTTL " + prefix_ + ":pending:stuck");
  EXPECT_GT(std::stoll(ttl), 0) << ttl;
}

TEST_F(RedisTransportTest, StopReturnsWhileBlockedAndNoWakeupFollows) {
  RedisTransportOptions o = Options("a");
  o.block_ms = 60'000;
  Node a = Open(o);
  ASSERT_TRUE(WaitFor([&] { return a.transport->stats().connected; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // into its BLMOVE
  // Stop interrupts the blocked BLMOVE: it does not wait out the minute (a
  // hang here fails the test by its timeout).
  a.transport->Stop();
  const int after = a.woken();
  EXPECT_EQ(Cli("RPUSH " + prefix_ + ":pending:a late"), "1");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(a.woken(), after);
}

// Stop interrupts the consumer's connection from another thread
// (shutdown(2)); a write of the consumer caught after that fails with EPIPE,
// which must not raise SIGPIPE: its default action (still in force in this
// test binary, as in an application that embeds the engine) ends the
// process. Stops land at random points of the consumer's BLMOVE, EVAL and
// DEL while another node keeps publishing.
TEST_F(RedisTransportTest, StoppingWhileTheConsumerWritesNeverRaisesSigpipe) {
  ASSERT_EQ(signal(SIGPIPE, SIG_DFL), SIG_DFL);
  RedisTransportOptions o = Options("a");
  o.block_ms = 1;
  Node a = Open(o);
  Node b = Open("b");
  ASSERT_TRUE(WaitFor([&] { return Cli("SCARD " + prefix_ + ":nodes") == "2"; }));
  std::atomic<bool> done{false};
  std::thread publisher([&] {
    while (!done) b.transport->Publish("default");
  });
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    a.transport->Start([w = a.wakeups] { ++*w; });
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3'000));
    a.transport->Stop();
  }
  done = true;
  publisher.join();
  EXPECT_GT(a.woken(), 0);
}

}  // namespace
}  // namespace taskengine
