#include "test_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <optional>

namespace taskengine::api::testing {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = boost::asio::ip::tcp;

nlohmann::json ClientResponse::json() const {
  return nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
}

std::string ClientResponse::error_code() const {
  nlohmann::json j = json();
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return "";
  const auto& code = j["error"]["code"];
  return code.is_string() ? code.get<std::string>() : "";
}

std::string ClientResponse::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

class TestClient::Impl {
 public:
  explicit Impl(int port) : port_(port) {}

  bool EnsureConnected(int* opened, std::string* error) {
    if (socket_ && socket_->is_open()) return true;
    socket_.emplace(ioc_);
    beast::error_code ec;
    socket_->connect(tcp::endpoint(net::ip::make_address("127.0.0.1"),
                                   static_cast<unsigned short>(port_)),
                     ec);
    if (ec) {
      *error = "connect: " + ec.message();
      socket_.reset();
      return false;
    }
    buffer_.clear();
    ++*opened;
    return true;
  }

  ClientResponse Exchange(http::request<http::string_body>& req, int* opened) {
    ClientResponse out;
    // One retry: a keep-alive connection the server closed since the last request.
    for (int attempt = 0; attempt < 2; ++attempt) {
      const bool fresh = !(socket_ && socket_->is_open());
      if (!EnsureConnected(opened, &out.error)) return out;
      beast::error_code ec;
      http::write(*socket_, req, ec);
      http::response_parser<http::string_body> parser;
      parser.body_limit(64 * 1024 * 1024);
      if (!ec) http::read(*socket_, buffer_, parser, ec);
      if (ec) {
        out.error = ec.message();
        Close();
        if (fresh) return out;
        continue;
      }
      auto res = parser.release();
      out.status = static_cast<int>(res.result_int());
      for (const auto& f : res) {
        std::string name(f.name_string());
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        out.headers[name] = std::string(f.value());
      }
      out.body = std::move(res.body());
      if (!res.keep_alive()) Close();
      return out;
    }
    return out;
  }

  void Close() {
    if (socket_) {
      beast::error_code ec;
      socket_->shutdown(tcp::socket::shutdown_both, ec);
      socket_->close(ec);
      socket_.reset();
    }
  }

 private:
  const int port_;
  net::io_context ioc_;
  std::optional<tcp::socket> socket_;
  beast::flat_buffer buffer_;
};

TestClient::TestClient(int port) : impl_(std::make_unique<Impl>(port)) {}
TestClient::~TestClient() = default;

ClientResponse TestClient::Request(const std::string& method, const std::string& target,
                                   const std::string& token, const std::string& body,
                                   const std::vector<std::pair<std::string, std::string>>& headers) {
  http::request<http::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(http::field::host, "127.0.0.1");
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  for (const auto& [name, value] : headers) req.set(name, value);
  req.body() = body;
  req.keep_alive(true);
  req.prepare_payload();
  return impl_->Exchange(req, &connections_opened_);
}

std::string RawExchange(int port, const std::string& bytes, int timeout_ms) {
  net::io_context ioc;
  tcp::socket socket(ioc);
  beast::error_code ec;
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)),
                 ec);
  if (ec) return "";
  net::write(socket, net::buffer(bytes), ec);
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[8192];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd pfd{socket.native_handle(), POLLIN, 0};
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now())
                                    .count());
    if (::poll(&pfd, 1, std::max(1, left)) <= 0) break;
    std::size_t n = socket.read_some(net::buffer(buf), ec);
    if (ec) break;
    out.append(buf, n);
  }
  return out;
}

int RawStatus(const std::string& raw) {
  // "HTTP/1.1 413 Payload Too Large"
  if (raw.size() < 12 || raw.rfind("HTTP/1.", 0) != 0) return 0;
  return std::atoi(raw.substr(9, 3).c_str());
}

}  // namespace taskengine::api::testing
