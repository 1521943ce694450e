#include "http_load.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace taskengine::bench {
namespace {

int OpenSocket(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

// Parses one complete response at the start of `buf`. Returns the bytes it
// took (0 when incomplete) and fills status and body.
std::size_t ParseResponse(const std::string& buf, int* status, std::string* body) {
  std::size_t head_end = buf.find("\r\n\r\n");
  if (head_end == std::string::npos) return 0;
  if (buf.size() < 12) return 0;
  *status = std::atoi(buf.c_str() + 9);
  std::size_t length = 0;
  std::size_t pos = buf.find("\r\n") + 2;
  while (pos < head_end) {
    std::size_t eol = buf.find("\r\n", pos);
    if (eol - pos > 15 && strncasecmp(buf.c_str() + pos, "content-length:", 15) == 0) {
      length = static_cast<std::size_t>(std::strtoull(buf.c_str() + pos + 15, nullptr, 10));
    }
    pos = eol + 2;
  }
  std::size_t total = head_end + 4 + length;
  if (buf.size() < total) return 0;
  body->assign(buf, head_end + 4, length);
  return total;
}

}  // namespace

std::string RawRequest(const std::string& method, const std::string& target,
                       const std::string& token, const std::string& body) {
  std::string r = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  if (!token.empty()) r += "Authorization: Bearer " + token + "\r\n";
  if (!body.empty() || method == "POST") {
    r +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  r += "\r\n";
  r += body;
  return r;
}

BlockingConnection::BlockingConnection(int port) : port_(port) {}

BlockingConnection::~BlockingConnection() {
  if (fd_ >= 0) ::close(fd_);
}

bool BlockingConnection::Connect() {
  if (fd_ >= 0) return true;
  fd_ = OpenSocket(port_);
  buffer_.clear();
  return fd_ >= 0;
}

HttpReply BlockingConnection::Request(const std::string& method, const std::string& target,
                                      const std::string& token, const std::string& body) {
  HttpReply reply;
  if (!Connect()) return reply;
  std::string raw = RawRequest(method, target, token, body);
  std::size_t sent = 0;
  while (sent < raw.size()) {
    ssize_t n = ::send(fd_, raw.data() + sent, raw.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      ::close(fd_);
      fd_ = -1;
      return reply;
    }
    sent += static_cast<std::size_t>(n);
  }
  char chunk[65536];
  for (;;) {
    int status = 0;
    std::string parsed_body;
    std::size_t used = ParseResponse(buffer_, &status, &parsed_body);
    if (used > 0) {
      buffer_.erase(0, used);
      reply.status = status;
      reply.body = std::move(parsed_body);
      return reply;
    }
    ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) {
      ::close(fd_);
      fd_ = -1;
      return reply;
    }
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

double RunConnections(int port, int connections,
                      const std::function<std::optional<std::string>(int)>& next,
                      const std::function<bool(int, int, const std::string&)>& on_reply,
                      const std::function<bool()>& finished) {
  struct Conn {
    int fd = -1;
    std::string in;
    bool busy = false;  // a request in flight
  };
  std::vector<Conn> conns(static_cast<std::size_t>(connections));
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  auto close_all = [&] {
    for (Conn& conn : conns) {
      if (conn.fd >= 0) ::close(conn.fd);
    }
    ::close(ep);
  };
  for (int c = 0; c < connections; ++c) {
    conns[c].fd = OpenSocket(port);
    if (conns[c].fd < 0) {
      close_all();
      return -1;
    }
    ::fcntl(conns[c].fd, F_SETFL, O_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<std::uint32_t>(c);
    ::epoll_ctl(ep, EPOLL_CTL_ADD, conns[c].fd, &ev);
  }
  // Connections without a request in flight, asked again after every
  // response (a response may give them something to send).
  std::vector<int> idle;
  // Requests are small: send them whole (waiting briefly when the socket
  // buffer is full), then wait for the response with epoll.
  auto start_next = [&](int c) {
    Conn& conn = conns[c];
    std::optional<std::string> out = next(c);
    if (!out) {
      conn.busy = false;
      idle.push_back(c);
      return true;
    }
    conn.busy = true;
    std::size_t sent = 0;
    while (sent < out->size()) {
      ssize_t w = ::send(conn.fd, out->data() + sent, out->size() - sent, MSG_NOSIGNAL);
      if (w > 0) {
        sent += static_cast<std::size_t>(w);
      } else if (w < 0 && errno == EAGAIN) {
        ::usleep(50);
      } else {
        return false;
      }
    }
    return true;
  };
  auto retry_idle = [&] {
    std::vector<int> waiting;
    waiting.swap(idle);
    for (int c : waiting) {
      if (!start_next(c)) return false;
    }
    return true;
  };
  auto t0 = std::chrono::steady_clock::now();
  bool failed = false;
  for (int c = 0; c < connections && !failed; ++c) failed = !start_next(c);
  std::vector<epoll_event> events(static_cast<std::size_t>(connections));
  char chunk[65536];
  while (!failed && !finished()) {
    int n = ::epoll_wait(ep, events.data(), connections, 10'000);
    if (n <= 0) {  // nothing in flight, or nothing answered for 10 s
      failed = true;
      break;
    }
    for (int e = 0; e < n && !failed; ++e) {
      const int c = static_cast<int>(events[e].data.u32);
      Conn& conn = conns[c];
      // Read what is there: epoll is level-triggered, so a short read ends it
      // (no second call just to be told EAGAIN); what is left is reported again.
      for (;;) {
        ssize_t r = ::recv(conn.fd, chunk, sizeof(chunk), 0);
        if (r == 0) failed = true;
        if (r <= 0) break;
        conn.in.append(chunk, static_cast<std::size_t>(r));
        if (static_cast<std::size_t>(r) < sizeof(chunk)) break;
      }
      if (!conn.busy) continue;
      int status = 0;
      std::string body;
      std::size_t used = ParseResponse(conn.in, &status, &body);
      if (used == 0) continue;
      conn.in.erase(0, used);
      conn.busy = false;
      if (!on_reply(c, status, body) || !start_next(c) || (!idle.empty() && !retry_idle())) {
        failed = true;
      }
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  close_all();
  return failed ? -1 : seconds;
}

double RunClosedLoop(int port, int connections, std::int64_t total,
                     const std::function<std::string(std::int64_t)>& make_request,
                     const std::function<void(std::int64_t, int, const std::string&)>& on_reply) {
  std::vector<std::int64_t> request(static_cast<std::size_t>(connections), -1);
  std::int64_t started = 0;
  std::int64_t done = 0;
  return RunConnections(
      port, connections,
      [&](int c) -> std::optional<std::string> {
        if (started >= total) return std::nullopt;
        request[c] = started++;
        return make_request(request[c]);
      },
      [&](int c, int status, const std::string& body) {
        on_reply(request[c], status, body);
        ++done;
        return true;
      },
      [&] { return done >= total; });
}

}  // namespace taskengine::bench
