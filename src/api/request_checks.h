// The checks HttpServer makes on every request head, after the header is read
// and before the body is (issue 13, findings 1 and 7). Pure functions over
// strings, with no Beast, so they are unit-tested and fuzzed directly.
//
// Framing (RFC 9112 §6, against request smuggling): a Transfer-Encoding other
// than exactly `chunked` is refused (400 when `chunked` is not the single
// final coding, 501 for a coding we do not implement in front of it), as is
// Transfer-Encoding together with Content-Length, Transfer-Encoding in an
// HTTP/1.0 request, and more than one Content-Length (even equal ones). A
// request needs exactly one Host (400 otherwise), a target in origin form
// ("/path?query"; 400 otherwise), no CR, LF or NUL in any field value, and
// at most one of each field the API reads once (Authorization, Content-Type,
// Origin, X-CSRF-Token, Idempotency-Key, Expect), so that no two parties can
// act on different copies. Beast replaces obs-fold with spaces before these
// checks (RFC 9112 §5.2).
//
// Host allowlist (against DNS rebinding): a browser that visits a page whose
// name was rebound to 127.0.0.1 sends that page's name as Host. So whatever
// the auth mode, Host must name a loopback address, `localhost`, the literal
// address the server listens on, or one of the configured public names;
// otherwise 421 Misdirected Request. Names compare case-insensitively and
// without one trailing dot; the port is not compared (a rebinding page uses
// the server's own port). A mutation (any method but GET, HEAD, OPTIONS) that
// carries an Origin must come from an allowed host too (403 otherwise).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace taskengine::api {

// "host[:port]" split and normalized: lower case, brackets removed from an
// IPv6 literal, one trailing dot dropped. nullopt when malformed: empty, bad
// characters, a bad port, an unclosed bracket or a bare IPv6 literal.
struct HostAndPort {
  std::string host;
  int port = -1;  // -1 when absent
};
std::optional<HostAndPort> ParseHostAndPort(std::string_view value);

// Immutable after construction; thread-safe.
class HostAllowlist {
 public:
  // `listen_host` is the address the server binds ("0.0.0.0" and "::" add
  // nothing); `public_hosts` are the names (or literal addresses) under which
  // clients reach the server, e.g. {"taskengine.example.com", "10.0.0.5"}.
  HostAllowlist(std::string_view listen_host, const std::vector<std::string>& public_hosts);

  // True for a Host header value naming an allowed host.
  bool AllowsHostHeader(std::string_view value) const;
  // True for an Origin header value ("scheme://host[:port]") naming an
  // allowed host; false for "null" and anything malformed.
  bool AllowsOrigin(std::string_view value) const;

 private:
  bool Allows(const std::string& normalized_host) const;

  std::vector<std::string> names_;  // normalized
};

// One request head as the server parsed it. Views into the parser's storage.
struct RequestHead {
  unsigned version = 11;  // 10 or 11
  std::string_view method;
  std::string_view target;
  // Every field in order; names as received (compared case-insensitively).
  std::vector<std::pair<std::string_view, std::string_view>> fields;
  // The Host value an earlier request of the same connection was served
  // with (empty: none): the same bytes need not be parsed and looked up in
  // the allowlist again. Any other value is checked in full.
  std::string_view allowed_host;
};

// Why a head is refused: the status (400, 403, 421 or 501), the error code and
// a message for the JSON error body. The connection is closed after it.
struct HeadProblem {
  int status = 400;
  std::string code;
  std::string message;
};

// The first problem of `head`, or nullopt when it may be served.
std::optional<HeadProblem> CheckRequestHead(const RequestHead& head, const HostAllowlist& hosts);

}  // namespace taskengine::api
