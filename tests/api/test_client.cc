#include "test_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
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
    socket_->connect(
        tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)), ec);
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

ClientResponse TestClient::Request(
    const std::string& method, const std::string& target, const std::string& token,
    const std::string& body, const std::vector<std::pair<std::string, std::string>>& headers) {
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

RawConnection::RawConnection(int port, const std::string& source) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return;
  if (!source.empty()) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    ::inet_pton(AF_INET, source.c_str(), &local.sin_addr);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0) return;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
}

RawConnection::~RawConnection() {
  if (fd_ >= 0) ::close(fd_);
}

bool RawConnection::Send(const std::string& bytes) {
  std::size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<std::size_t>(n);
  }
  return true;
}

std::string RawConnection::Read(int timeout_ms, const std::string& until, bool* closed) {
  using Clock = std::chrono::steady_clock;
  std::string out;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  if (closed) *closed = false;
  while (Clock::now() < deadline) {
    pollfd pfd{fd_, POLLIN, 0};
    const int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (::poll(&pfd, 1, std::max(1, left)) <= 0) break;
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) {
      if (closed) *closed = true;
      break;
    }
    out.append(buf, static_cast<std::size_t>(n));
    if (!until.empty() && out.find(until) != std::string::npos) break;
  }
  return out;
}

std::string RawExchange(int port, const std::string& bytes, int timeout_ms) {
  net::io_context ioc;
  tcp::socket socket(ioc);
  beast::error_code ec;
  socket.connect(
      tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)), ec);
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
