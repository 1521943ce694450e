// Minimal HTTP/1.1 load clients for the benchmarks: raw sockets and just
// enough parsing (status line, Content-Length) to keep keep-alive
// connections busy without spending the cores the server needs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace taskengine::bench {

struct HttpReply {
  int status = 0;  // 0: the connection failed
  std::string body;
};

// One blocking keep-alive connection to 127.0.0.1:port. Not thread-safe.
class BlockingConnection {
 public:
  explicit BlockingConnection(int port);
  ~BlockingConnection();
  BlockingConnection(const BlockingConnection&) = delete;
  BlockingConnection& operator=(const BlockingConnection&) = delete;

  HttpReply Request(const std::string& method, const std::string& target, const std::string& token,
                    const std::string& body = "");

 private:
  bool Connect();
  int port_;
  int fd_ = -1;
  std::string buffer_;
};

// Drives `connections` keep-alive connections from ONE thread with epoll,
// each with at most one request in flight. `next(c)` gives connection c's
// next request (the full raw bytes), or nothing while it has none: it is
// asked after each of c's responses, and each connection without a request
// in flight is asked again after any response. `on_reply(c, status, body)`
// sees every response (false: stop, failed). Runs until `finished()`;
// returns seconds elapsed, or a negative number when a connection failed, a
// reply was refused, or nothing was answered for 10 s.
double RunConnections(int port, int connections,
                      const std::function<std::optional<std::string>(int)>& next,
                      const std::function<bool(int, int, const std::string&)>& on_reply,
                      const std::function<bool()>& finished);

// Drives `connections` keep-alive connections from ONE thread with epoll,
// each with one request outstanding, until `total` responses arrived.
// `make_request(i)` returns the full raw request bytes for request i.
// `on_reply(i, status, body)` sees every response. Returns seconds elapsed, or
// a negative number when a connection failed.
double RunClosedLoop(int port, int connections, std::int64_t total,
                     const std::function<std::string(std::int64_t)>& make_request,
                     const std::function<void(std::int64_t, int, const std::string&)>& on_reply);

// The raw bytes of a request with a JSON body and a bearer token.
std::string RawRequest(const std::string& method, const std::string& target,
                       const std::string& token, const std::string& body);

}  // namespace taskengine::bench
