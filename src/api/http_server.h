// HttpServer: an asynchronous HTTP/1.1 server (Boost.Beast on Asio) that hands
// each request to a RequestHandler (normally the Router).
//
// Threads: `io_threads` run the network (accept, read, write; never user code);
// `handler_threads` run the RequestHandler, so handlers may block briefly on a
// durable commit while many requests overlap (and the store group-commits
// them). A handler answers through its Responder, possibly later and from any
// thread (long-poll); see http_types.h.
//
// Limits (each answered with a JSON error, then the connection is closed):
// body larger than max_body_bytes -> 413; header larger than max_header_bytes
// -> 431; a malformed request -> 400. A request that is not complete within
// read_timeout_ms, or a keep-alive connection idle for idle_timeout_ms, is
// closed without an answer.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

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
  // From the first byte of a request to its last. Default: 30 s.
  Millis read_timeout_ms = 30'000;
  // A keep-alive connection waiting for its next request. Default: 60 s.
  Millis idle_timeout_ms = 60'000;
  // Writing one response. Default: 30 s.
  Millis write_timeout_ms = 30'000;
  // Value of the Server header. Default: "taskengine".
  std::string server_name = "taskengine";
};

// Thread-safe. Start once, Stop once (Stop is idempotent; the destructor stops).
class HttpServer {
 public:
  HttpServer(HttpServerOptions options, RequestHandler handler);
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

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace taskengine::api
