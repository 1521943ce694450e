#include "api/request_checks.h"

#include <gtest/gtest.h>

namespace taskengine::api {
namespace {

TEST(ParseHostAndPort, SplitsAndNormalizes) {
  struct Case {
    const char* in;
    const char* host;
    int port;
  };
  for (const Case& c :
       {Case{"Example.COM", "example.com", -1}, Case{"example.com.:80", "example.com", 80},
        Case{"127.0.0.1:8080", "127.0.0.1", 8080}, Case{"[::1]", "::1", -1},
        Case{"[::FFFF:127.0.0.1]:1", "::ffff:127.0.0.1", 1}, Case{"localhost:0", "localhost", 0},
        Case{"a_b-c.d:65535", "a_b-c.d", 65535}}) {
    std::optional<HostAndPort> got = ParseHostAndPort(c.in);
    ASSERT_TRUE(got.has_value()) << c.in;
    EXPECT_EQ(got->host, c.host) << c.in;
    EXPECT_EQ(got->port, c.port) << c.in;
  }
  for (const char* bad :
       {"", ":80", ".", "a..", "a:", "a:65536", "a:1:2", "::1", "[::1", "[]", "[::1]x", "[::g]",
        "[fe80::1%eth0]", "a b", "a/b", "a@b", "a:+1", "a:1234567"}) {
    EXPECT_FALSE(ParseHostAndPort(bad).has_value()) << bad;
  }
}

TEST(HostAllowlist, LoopbackLocalhostListenAddressAndPublicNames) {
  HostAllowlist wildcard("0.0.0.0", {"te.example.com", "10.0.0.5", "2001:db8::1", "[2001:db8::2]"});
  for (const char* ok : {"127.0.0.1", "127.255.0.9:1", "localhost", "LOCALHOST.:8080", "[::1]:80",
                         "[0::1]", "[::ffff:127.1.2.3]", "te.example.com", "TE.example.com.:443",
                         "10.0.0.5:8080", "[2001:DB8:0::1]", "[2001:db8::2]:1"}) {
    EXPECT_TRUE(wildcard.AllowsHostHeader(ok)) << ok;
  }
  for (const char* no :
       {"0.0.0.0", "[::]", "10.0.0.6", "example.com", "te.example.com.evil", "localhost.evil",
        "sub.localhost", "[::2]", "[::ffff:10.0.0.5]", "127.1", "2130706433"}) {
    EXPECT_FALSE(wildcard.AllowsHostHeader(no)) << no;
  }
  HostAllowlist specific("192.0.2.10", {});
  EXPECT_TRUE(specific.AllowsHostHeader("192.0.2.10:8080"));
  EXPECT_FALSE(specific.AllowsHostHeader("192.0.2.11"));
  HostAllowlist v6("[2001:db8::9]", {});
  EXPECT_TRUE(v6.AllowsHostHeader("[2001:db8:0:0::9]:8080"));
}

TEST(HostAllowlist, Origins) {
  HostAllowlist hosts("127.0.0.1", {"te.example.com"});
  for (const char* ok :
       {"http://127.0.0.1:8080", "https://te.example.com", "HTTP://localhost", "http://[::1]:1"}) {
    EXPECT_TRUE(hosts.AllowsOrigin(ok)) << ok;
  }
  for (const char* no :
       {"null", "", "http://", "ftp://localhost", "http://evil.example", "http://localhost/path",
        "http://user@localhost", "localhost", "http://te.example.com.evil"}) {
    EXPECT_FALSE(hosts.AllowsOrigin(no)) << no;
  }
}

RequestHead Head(std::vector<std::pair<std::string_view, std::string_view>> fields,
                 std::string_view method = "POST", unsigned version = 11) {
  RequestHead h;
  h.version = version;
  h.method = method;
  h.target = "/x";
  h.fields = std::move(fields);
  return h;
}

int StatusOf(const RequestHead& head) {
  static const HostAllowlist hosts("127.0.0.1", {});
  std::optional<HeadProblem> p = CheckRequestHead(head, hosts);
  return p ? p->status : 0;
}

TEST(CheckRequestHead, Framing) {
  EXPECT_EQ(StatusOf(Head({{"Host", "localhost"}})), 0);
  EXPECT_EQ(StatusOf(Head({{"Host", "localhost"}, {"Transfer-Encoding", "chunked"}})), 0);
  EXPECT_EQ(StatusOf(Head({{"Host", "localhost"}, {"transfer-encoding", " CHUNKED "}})), 0);
  EXPECT_EQ(StatusOf(Head({{"Host", "localhost"}, {"Content-Length", "3"}})), 0);
  for (std::string_view te :
       {"identity", "chunked, identity", "xchunked", "chunked,chunked", "", " , ", "chunked;a=b"}) {
    EXPECT_EQ(StatusOf(Head({{"Host", "localhost"}, {"Transfer-Encoding", te}})), 400) << te;
  }
  EXPECT_EQ(StatusOf(Head({{"Host", "localhost"}, {"Transfer-Encoding", "gzip, chunked"}})), 501);
  EXPECT_EQ(StatusOf(Head({{"Host", "localhost"},
                           {"Transfer-Encoding", "gzip"},
                           {"Transfer-Encoding", "chunked"}})),
            501);
  EXPECT_EQ(
      StatusOf(
          Head({{"Host", "localhost"}, {"Transfer-Encoding", "chunked"}, {"Content-Length", "0"}})),
      400);
  EXPECT_EQ(StatusOf(Head({{"Host", "localhost"}, {"Transfer-Encoding", "chunked"}}, "POST", 10)),
            400);
  EXPECT_EQ(
      StatusOf(Head({{"Host", "localhost"}, {"Content-Length", "1"}, {"Content-Length", "1"}})),
      400);
  EXPECT_EQ(StatusOf(Head({{"Host", "localhost"}, {"Content-Length", "1,1"}})), 400);
  EXPECT_EQ(StatusOf(Head({{"Host", "localhost"}, {"X", std::string_view("a\0b", 3)}})), 400);
  EXPECT_EQ(StatusOf(Head({{"Host", "localhost"}, {"X", "a\r\n b"}})), 400);
}

TEST(CheckRequestHead, FieldsReadOnceMayAppearOnce) {
  for (std::string_view field :
       {"Authorization", "content-type", "Origin", "X-CSRF-Token", "Idempotency-Key", "Expect"}) {
    EXPECT_EQ(StatusOf(Head({{"Host", "localhost"}, {field, "a"}, {field, "a"}}, "GET")), 400)
        << field;
  }
  EXPECT_EQ(StatusOf(Head({{"Host", "localhost"}, {"Cookie", "a=1"}, {"Cookie", "b=2"}}, "GET")),
            0);
}

TEST(CheckRequestHead, HostTargetAndOrigin) {
  EXPECT_EQ(StatusOf(Head({})), 400);
  EXPECT_EQ(StatusOf(Head({{"Host", "localhost"}, {"host", "localhost"}})), 400);
  EXPECT_EQ(StatusOf(Head({{"Host", "bad host"}})), 400);
  EXPECT_EQ(StatusOf(Head({{"Host", "evil.example"}})), 421);
  EXPECT_EQ(StatusOf(Head({{"Host", "localhost"}, {"Origin", "http://evil.example"}})), 403);
  EXPECT_EQ(StatusOf(Head({{"Host", "localhost"}, {"Origin", "http://evil.example"}}, "GET")), 0);
  EXPECT_EQ(StatusOf(Head({{"Host", "localhost"}, {"Origin", "http://localhost:1"}})), 0);
  RequestHead absolute = Head({{"Host", "localhost"}}, "GET");
  absolute.target = "http://localhost/x";
  EXPECT_EQ(StatusOf(absolute), 400);
}

// A connection's earlier Host value spares the lookup of the same bytes only:
// another Host is checked in full, and the head's other checks still apply.
TEST(CheckRequestHead, AHostAllowedBeforeIsTheOnlyOneNotLookedUpAgain) {
  const auto status = [](std::vector<std::pair<std::string_view, std::string_view>> fields,
                         std::string_view allowed_host) {
    RequestHead head = Head(std::move(fields));
    head.allowed_host = allowed_host;
    return StatusOf(head);
  };
  EXPECT_EQ(status({{"Host", "localhost:8080"}}, "localhost:8080"), 0);
  EXPECT_EQ(status({{"Host", "evil.example"}}, "localhost:8080"), 421);
  EXPECT_EQ(status({{"Host", "bad host"}}, "localhost"), 400);
  EXPECT_EQ(status({{"Host", "localhost.evil.example"}}, "localhost"), 421);
  EXPECT_EQ(status({{"Host", "localhost"}, {"Host", "localhost"}}, "localhost"), 400);
  EXPECT_EQ(status({{"Host", "localhost"}, {"Origin", "http://evil.example"}}, "localhost"), 403);
}

}  // namespace
}  // namespace taskengine::api
