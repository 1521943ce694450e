// HttpServer: an asynchronous HTTP/1.1 server (Boost.Beast on Asio) that hands
// each request to a RequestHandler (normally the Router).
//
// Threads: `io_threads` run the network (accept, read, write), and the
// InlineHandler when there is one (code that never blocks);
// `handler_threads` run the RequestHandler, so handlers may block briefly on a
// durable commit while many requests overlap (and the store group-commits
// them). A handler answers through its Responder, possibly later and from any
// thread (long-poll); see http_types.h.
//
// Limits (each answered with a JSON error, then the connection is closed):
// body larger than max_body_bytes -> 413; header larger than max_header_bytes
// -> 431; a malformed request -> 400; a request head refused by
// CheckRequestHead (request_checks.h: framing that could smuggle a request,
// no Host or two, a Host that is not loopback, the listen address or one of
// public_hosts -> 421) -> its status. A request whose header is not complete
// within header_timeout_ms, or whose body is not complete within
// read_timeout_ms of its first byte, a new connection that sends nothing for
// header_timeout_ms, or a keep-alive connection idle for idle_timeout_ms, is
// closed without an answer.
//
// Connections (issue 13, finding 6): at most max_connections_per_client from
// one client address (more are accepted and closed at once), and at most
// max_connections in all. At that cap, or when accept() runs out of file
// descriptors, the connection that has waited longest for its client (idle
// keep-alive, or a request still being received) is closed to make room;
// connections whose request is being handled are never closed for this. A
// reserve descriptor lets the server accept-and-close even at the process
// limit, so the listen queue never stalls.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "api/http_types.h"
#include "taskengine/clock.h"
#include "taskengine/status.h"

namespace taskengine::api {

struct HttpServerOptions {
  // Address to listen on. Default: loopback.
  std::string host = "127.0.0.1";
  // 0 = an ephemeral port (read it with HttpServer::port()). Default: 0.
  int port = 0;
  // Threads running the network. Default: 2.
  int io_threads = 2;
  // Threads running request handlers; they may block on commits, so more of
  // them means more requests per group commit. Default: 32.
  int handler_threads = 32;
  // Default: 1 MiB.
  std::size_t max_body_bytes = 1024 * 1024;
  // Request line plus header fields. Default: 16 KiB.
  std::size_t max_header_bytes = 16 * 1024;
  // From the first byte of a request to the end of its header, and from
  // accepting a connection to its first byte. Default: 10 s.
  Millis header_timeout_ms = 10'000;
  // From the first byte of a request to its last. Default: 30 s.
  Millis read_timeout_ms = 30'000;
  // A keep-alive connection waiting for its next request. Default: 60 s.
  Millis idle_timeout_ms = 60'000;
  // Writing one response. Default: 30 s.
  Millis write_timeout_ms = 30'000;
  // Value of the Server header. Default: "taskengine".
  std::string server_name = "taskengine";
  // Names (or literal addresses) besides loopback, localhost and the listen
  // address under which clients reach the server; any other Host -> 421.
  // Default: none.
  std::vector<std::string> public_hosts;
  // Open connections in all; 0 = derived from the descriptor limit at Start
  // (RLIMIT_NOFILE less an eighth, at least 64, kept for the store, handlers
  // and logs). A larger value is lowered to that too. Default: 0.
  int max_connections = 0;
  // Open connections from one client address. Default: 128.
  int max_connections_per_client = 128;
};

// Thread-safe. Start once, Stop once (Stop is idempotent; the destructor stops).
class HttpServer {
 public:
  // `try_inline` (may be empty) sees each request first, on the I/O thread
  // that read it (see InlineHandler); what it leaves goes to `handler`.
  HttpServer(HttpServerOptions options, RequestHandler handler, InlineHandler try_inline = nullptr);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the threads. kUnavailable when the address
  // cannot be bound (in use, permission), kInvalidArgument for a bad host.
  Status Start();
  // The bound port (after Start), e.g. the ephemeral one chosen for port 0.
  int port() const;

  // Graceful stop: stops accepting, closes idle connections, lets requests
  // whose handler already runs finish (their responses are written, with
  // `Connection: close`) for up to `grace_ms`, then closes every connection
  // and joins the threads. Responders answered later are dropped. Owners of
  // long-poll requests should answer them before calling Stop.
  void Stop(Millis grace_ms = 5'000);

  // Requests handed to the handler whose response is not written yet.
  int in_flight() const;
  // Open connections, and the cap in force (after Start).
  int connections() const;
  int max_connections() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace taskengine::api
