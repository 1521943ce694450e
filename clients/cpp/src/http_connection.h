// One keep-alive HTTP connection (a libcurl easy handle) and a pool of them.
// Internal to taskengine_client.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "taskengine_client/status.h"

namespace taskengine_client::internal {

struct HttpCall {
  std::string method = "GET";  // GET, POST, PATCH
  std::string url;             // absolute
  std::string body;            // sent as application/json when non-empty (or method != GET)
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::milliseconds timeout{30'000};
  // When set and it becomes true, the transfer is aborted (transport error "aborted").
  const std::atomic<bool>* abort = nullptr;
};

struct HttpReply {
  int status = 0;
  std::string body;
  std::string location;  // the Location header, if any
};

// A libcurl easy handle: one persistent connection to the server, reused
// between calls (HTTP keep-alive). Not thread-safe: one thread at a time.
class HttpConnection {
 public:
  HttpConnection();
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Performs `call`. A transport failure (no HTTP answer) is a Status with
  // http_status 0; any HTTP answer, 2xx or not, is a reply.
  Result<HttpReply> Perform(const HttpCall& call);

 private:
  void* curl_;  // CURL*
};

// Connections handed out one per concurrent call and returned after it, so a
// thread that calls again gets a warm connection. Thread-safe.
class ConnectionPool {
 public:
  // At most `max_idle` idle connections are kept.
  explicit ConnectionPool(std::size_t max_idle = 16) : max_idle_(max_idle) {}

  std::unique_ptr<HttpConnection> Acquire();
  void Return(std::unique_ptr<HttpConnection> connection);

 private:
  const std::size_t max_idle_;
  std::mutex mu_;
  std::vector<std::unique_ptr<HttpConnection>> idle_;  // guarded by mu_
};

}  // namespace taskengine_client::internal
