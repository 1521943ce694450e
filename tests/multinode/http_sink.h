// A counting HTTP sink for the multi-node drills (issue #6, D): a tiny
// HTTP/1.1 server on 127.0.0.1 (ephemeral port) in a thread of the test
// process, for jobs run by the built-in `http` handler.
//
// It records every request AS IT ARRIVES — as soon as its header block is
// complete, before the body is read and before anything is answered — by its
// Idempotency-Key (the handler sends the effect key "<execution id>:http").
// It never deduplicates: a key that arrives twice is counted twice, so an
// effect performed twice is visible to the test. Every complete request is
// answered `200 OK` with a small JSON body. By default the sink then closes
// the connection (`Connection: close`): the http handler uses a fresh libcurl
// handle per call, so keep-alive would buy nothing, and closing first leaves
// the TIME_WAIT state on the sink's side instead of using up the nodes'
// ephemeral ports at hundreds of connections per second. With
// keep_alive = true, HTTP/1.1 keep-alive is honoured.
//
// One thread, poll(2), non-blocking sockets: a killed node's half-sent
// request (EOF mid-request) is counted if its header block had arrived, and
// is otherwise dropped without harm.
#pragma once

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace taskengine::testing {

class CountingHttpSink {
 public:
  // One recorded arrival.
  struct Arrival {
    int count = 0;             // how many requests carried this key
    std::string body;          // the body of the first complete one ("" if none completed)
    std::string request_line;  // e.g. "POST /effect HTTP/1.1"
  };

  explicit CountingHttpSink(bool keep_alive = false) : keep_alive_(keep_alive) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) return;
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listen_fd_, 512) != 0) {
      ::close(listen_fd_);
      listen_fd_ = -1;
      return;
    }
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    if (::pipe2(wake_, O_NONBLOCK | O_CLOEXEC) != 0) {
      ::close(listen_fd_);
      listen_fd_ = -1;
      return;
    }
    thread_ = std::thread([this] { Loop(); });
  }

  ~CountingHttpSink() {
    if (thread_.joinable()) {
      stop_ = true;
      char c = 'x';
      (void)!::write(wake_[1], &c, 1);
      thread_.join();
    }
    for (auto& c : conns_) ::close(c.fd);
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (wake_[0] >= 0) ::close(wake_[0]);
    if (wake_[1] >= 0) ::close(wake_[1]);
  }
  CountingHttpSink(const CountingHttpSink&) = delete;
  CountingHttpSink& operator=(const CountingHttpSink&) = delete;

  bool ok() const { return listen_fd_ >= 0 && port_ > 0; }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/effect"; }

  // Arrivals by Idempotency-Key (a copy).
  std::map<std::string, Arrival> Arrivals() const {
    std::lock_guard<std::mutex> lock(mu_);
    return arrivals_;
  }
  // Requests whose header block arrived (each counted once, keyed or not).
  long long requests() const { return requests_.load(); }
  // Requests that carried no Idempotency-Key.
  long long without_key() const { return without_key_.load(); }
  // Requests answered 200.
  long long answered() const { return answered_.load(); }
  // Connections closed with a request still incomplete (header or body).
  long long cut_off() const { return cut_off_.load(); }
  long long connections() const { return connections_.load(); }

 private:
  struct Conn {
    int fd = -1;
    std::string in;
    std::string out;
    // The request being read: its header block has been counted.
    bool in_body = false;
    std::size_t body_len = 0;
    std::string key;
    bool has_key = false;
    bool close_after = false;
    bool closing = false;  // close once `out` is flushed
  };

  static std::string Lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }
  static std::string Trim(const std::string& s) {
    std::size_t b = s.find_first_not_of(" \t");
    std::size_t e = s.find_last_not_of(" \t\r");
    return b == std::string::npos ? "" : s.substr(b, e - b + 1);
  }

  // Parses as many complete requests from c.in as possible. False: close now.
  bool Consume(Conn& c) {
    for (;;) {
      if (!c.in_body) {
        const std::size_t end = c.in.find("\r\n\r\n");
        if (end == std::string::npos) return c.in.size() <= 64 * 1024;  // header too large: drop
        const std::string head = c.in.substr(0, end);
        c.in.erase(0, end + 4);
        const std::size_t first_eol = head.find("\r\n");
        const std::string request_line = head.substr(0, first_eol);
        c.body_len = 0;
        c.has_key = false;
        c.key.clear();
        c.close_after = !keep_alive_ || request_line.find("HTTP/1.0") != std::string::npos;
        std::size_t pos = first_eol == std::string::npos ? head.size() : first_eol + 2;
        while (pos < head.size()) {
          std::size_t eol = head.find("\r\n", pos);
          if (eol == std::string::npos) eol = head.size();
          const std::string line = head.substr(pos, eol - pos);
          pos = eol + 2;
          const std::size_t colon = line.find(':');
          if (colon == std::string::npos) continue;
          const std::string name = Lower(Trim(line.substr(0, colon)));
          const std::string value = Trim(line.substr(colon + 1));
          if (name == "content-length") {
            c.body_len = static_cast<std::size_t>(std::strtoull(value.c_str(), nullptr, 10));
          } else if (name == "idempotency-key") {
            c.key = value;
            c.has_key = true;
          } else if (name == "connection" && Lower(value) == "close") {
            c.close_after = true;
          }
        }
        // Count the arrival now, before the body and before any answer.
        ++requests_;
        if (c.has_key) {
          std::lock_guard<std::mutex> lock(mu_);
          Arrival& a = arrivals_[c.key];
          ++a.count;
          if (a.request_line.empty()) a.request_line = request_line;
        } else {
          ++without_key_;
        }
        c.in_body = true;
      }
      if (c.in.size() < c.body_len) return true;  // wait for the rest of the body
      const std::string body = c.in.substr(0, c.body_len);
      c.in.erase(0, c.body_len);
      c.in_body = false;
      if (c.has_key) {
        std::lock_guard<std::mutex> lock(mu_);
        Arrival& a = arrivals_[c.key];
        if (a.body.empty()) a.body = body;
      }
      static const std::string kBody = "{\"ok\":true}";
      c.out += "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
               std::to_string(kBody.size()) + "\r\n" +
               (c.close_after ? "Connection: close\r\n" : "") + "\r\n" + kBody;
      ++answered_;
      if (c.close_after) {
        c.closing = true;
        return true;
      }
    }
  }

  // Writes what it can of c.out. False: close now.
  static bool Flush(Conn& c) {
    while (!c.out.empty()) {
      ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (n > 0) {
        c.out.erase(0, static_cast<std::size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return true;
      } else {
        return false;
      }
    }
    return !c.closing;
  }

  void Loop() {
    std::vector<pollfd> fds;
    char buf[16 * 1024];
    while (!stop_) {
      fds.clear();
      fds.push_back({wake_[0], POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      for (const Conn& c : conns_) {
        fds.push_back({c.fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
      }
      int rc = ::poll(fds.data(), fds.size(), 1000);
      if (rc < 0 && errno != EINTR) break;
      if (rc <= 0) continue;
      if (fds[1].revents & POLLIN) {
        for (;;) {
          int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (fd < 0) break;
          int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          ++connections_;
          Conn c;
          c.fd = fd;
          conns_.push_back(std::move(c));
        }
      }
      // fds[2 + i] belongs to conns_[i] for the connections polled this round
      // (accepted ones were appended after them).
      const std::size_t polled = fds.size() - 2;
      std::vector<bool> drop(conns_.size(), false);
      for (std::size_t i = 0; i < polled; ++i) {
        Conn& c = conns_[i];
        const short ev = fds[2 + i].revents;
        if (ev == 0) continue;
        bool keep = true;
        if (ev & (POLLIN | POLLHUP | POLLERR)) {
          for (;;) {
            ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
            if (n > 0) {
              c.in.append(buf, static_cast<std::size_t>(n));
              continue;
            }
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
            keep = false;  // EOF or error
            break;
          }
          if (!Consume(c)) keep = false;
          if (!keep && (c.in_body || !c.in.empty())) ++cut_off_;
        }
        if (keep && (!c.out.empty() || c.closing)) keep = Flush(c);
        if (!keep) drop[i] = true;
      }
      std::vector<Conn> rest;
      rest.reserve(conns_.size());
      for (std::size_t i = 0; i < conns_.size(); ++i) {
        if (i < drop.size() && drop[i]) {
          ::close(conns_[i].fd);
        } else {
          rest.push_back(std::move(conns_[i]));
        }
      }
      conns_.swap(rest);
    }
  }

  const bool keep_alive_;
  int listen_fd_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<Conn> conns_;  // the sink thread's only
  mutable std::mutex mu_;
  std::map<std::string, Arrival> arrivals_;
  std::atomic<long long> requests_{0};
  std::atomic<long long> without_key_{0};
  std::atomic<long long> answered_{0};
  std::atomic<long long> cut_off_{0};
  std::atomic<long long> connections_{0};
};

}  // namespace taskengine::testing
