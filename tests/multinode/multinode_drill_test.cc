// Multi-node operation on PostgreSQL (D2; issue #6) and on MariaDB (D3; issue
// #17): three `taskengine serve`
// processes share one database and run TASKENGINE_MULTINODE_JOBS `work`
// executions (default 20,000, the size issue #6 asks for) while one node is
// killed with SIGKILL and restarted; see three_node_drill.h for the drill and
// its checks L, D, S and C.
//
// The work job uses the built-in `http` handler (not idempotent): each
// execution POSTs its payload once to a CountingHttpSink in this process,
// with the effect key "<execution id>:http" as Idempotency-Key. The sink
// counts raw arrivals (no deduplication), so D is: no key arrived twice,
// every committed ledger entry and every succeeded execution has exactly one
// arrival, and an arrival without a ledger commit only belongs to an
// execution quarantined as ambiguous. No process per job: the full 20,000
// take about two minutes on a 2-core machine (`./test.sh --full`); CI's
// Release suite runs 6,000 (test.sh sets TASKENGINE_MULTINODE_JOBS).
//
// multinode_command_drill_test runs the same drill with the `command`
// handler's effect verbs in real processes (800 jobs). CountingHttpSinkTest
// checks that the sink counts raw arrivals (a repeated key twice).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "three_node_drill.h"

namespace taskengine::testing {
namespace {

// Sends `request` on a new connection to the sink; what came back before it
// closed (or `max_wait` passed). `half`: close right after sending.
std::string Exchange(int port, const std::string& request, bool half = false) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size()) &&
      !half) {
    char buf[4096];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) reply.append(buf, n);
  }
  ::close(fd);
  return reply;
}

std::string Post(const std::string& key, const std::string& body) {
  return "POST /effect HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
         "Idempotency-Key: " +
         key + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// The sink must count raw arrivals: a repeated key is counted twice (it never
// deduplicates), a request cut off after its header block still counts, and
// a request without a key is counted apart.
TEST(CountingHttpSinkTest, CountsRawArrivalsWithoutDeduplicating) {
  CountingHttpSink sink;
  ASSERT_TRUE(sink.ok());
  EXPECT_THAT(Exchange(sink.port(), Post("7:http", "{\"n\":0}")),
              ::testing::StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(Exchange(sink.port(), Post("7:http", "{\"n\":0}")),
              ::testing::StartsWith("HTTP/1.1 200 OK\r\n"));
  // Header block complete, body cut off by the client going away.
  std::string cut = Post("8:http", "{\"n\":1}");
  Exchange(sink.port(), cut.substr(0, cut.size() - 3), /*half=*/true);
  // Header block incomplete: not an arrival.
  Exchange(sink.port(), "POST /effect HTTP/1.1\r\nIdempotency-Key: 9:http\r\n", /*half=*/true);
  Exchange(sink.port(), "POST /effect HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  ASSERT_TRUE(WaitUntil(std::chrono::seconds(5), [&] { return sink.requests() == 4; }))
      << sink.requests();
  const auto arrivals = sink.Arrivals();
  ASSERT_EQ(arrivals.count("7:http"), 1u);
  EXPECT_EQ(arrivals.at("7:http").count, 2);
  EXPECT_EQ(arrivals.at("7:http").body, "{\"n\":0}");
  EXPECT_EQ(arrivals.at("7:http").request_line, "POST /effect HTTP/1.1");
  ASSERT_EQ(arrivals.count("8:http"), 1u);
  EXPECT_EQ(arrivals.at("8:http").count, 1);
  EXPECT_EQ(arrivals.at("8:http").body, "");
  EXPECT_EQ(arrivals.count("9:http"), 0u);
  EXPECT_EQ(sink.without_key(), 1);
  EXPECT_EQ(sink.answered(), 3);
  EXPECT_TRUE(WaitUntil(std::chrono::seconds(5), [&] { return sink.cut_off() == 2; }))
      << sink.cut_off();
}

TEST(MultinodeDrillTest, ThreeNodesOneKilledKeepLDSC) {
  RunThreeNodeDrill(WorkEffect::kHttp, JobCountFromEnv("TASKENGINE_MULTINODE_JOBS", 20'000));
}

// The same drill on MariaDB (issue #17): three nodes on one MariaDB database,
// one killed and restarted; L, D, S and C.
TEST(MultinodeDrillTest, MariaDbThreeNodesOneKilledKeepLDSC) {
  RunThreeNodeDrill(WorkEffect::kHttp, JobCountFromEnv("TASKENGINE_MULTINODE_JOBS", 20'000),
                    DbKind::kMariaDb);
}

}  // namespace
}  // namespace taskengine::testing
