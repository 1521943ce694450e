// A small blocking HTTP/1.1 client for the API tests: one keep-alive
// connection per client (reopened when the server closes it), plus a raw
// socket exchange for malformed requests. Beast stays in test_client.cc.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace taskengine::api::testing {

struct ClientResponse {
  int status = 0;                              // 0 when the exchange failed (connection error)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string error;  // what failed when status == 0

  // The body as JSON (a discarded value when it is not JSON).
  nlohmann::json json() const;
  // json()["error"]["code"], or "" when absent.
  std::string error_code() const;
  std::string header(const std::string& lower_name) const;
};

// Not thread-safe: one client per thread.
class TestClient {
 public:
  explicit TestClient(int port);
  ~TestClient();
  TestClient(const TestClient&) = delete;
  TestClient& operator=(const TestClient&) = delete;

  ClientResponse Request(const std::string& method, const std::string& target,
                         const std::string& token = "", const std::string& body = "",
                         const std::vector<std::pair<std::string, std::string>>& headers = {});
  ClientResponse Get(const std::string& target, const std::string& token = "") {
    return Request("GET", target, token);
  }
  ClientResponse Post(const std::string& target, const std::string& token,
                      const nlohmann::json& body,
                      const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    return Request("POST", target, token, body.dump(), headers);
  }
  ClientResponse Patch(const std::string& target, const std::string& token,
                       const nlohmann::json& body) {
    return Request("PATCH", target, token, body.dump());
  }

  // TCP connections opened so far (1 after the first request when keep-alive works).
  int connections_opened() const { return connections_opened_; }

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
  int connections_opened_ = 0;
};

// A raw TCP connection to 127.0.0.1:`port` for byte-level checks. Not
// thread-safe; owns its descriptor.
class RawConnection {
 public:
  // `source`: the local IPv4 address to connect from (any of 127.0.0.0/8 on
  // loopback), e.g. to act as several clients; empty = chosen by the kernel.
  explicit RawConnection(int port, const std::string& source = "");
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  // False when not everything could be sent (e.g. the peer closed).
  bool Send(const std::string& bytes);
  // Reads what arrives within `timeout_ms`, until `until` appears or EOF.
  // *closed tells whether the peer closed.
  std::string Read(int timeout_ms, const std::string& until = "", bool* closed = nullptr);

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// Connects, sends `bytes`, and returns everything the server sent until it
// closed the connection or `timeout_ms` passed.
std::string RawExchange(int port, const std::string& bytes, int timeout_ms = 5000);

// The status code of the first response line of a raw exchange; 0 when none.
int RawStatus(const std::string& raw_response);

}  // namespace taskengine::api::testing
