// Scripted local servers for handler and notification tests: an HTTP/1.1
// server and an SMTP server on 127.0.0.1 (plain sockets, one connection at a
// time). Nothing here contacts an outside host.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <string>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "taskengine/status.h"

namespace taskengine {

// A listening socket on 127.0.0.1 with an ephemeral port, and the thread
// that accepts one connection at a time and hands it to Serve(); the base of
// the servers below. A derived server calls StartServing() last in its
// constructor and StopServing() first in its destructor.
class LoopbackListener {
 public:
  LoopbackListener() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    TE_CHECK(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    TE_CHECK(listen(listen_fd_, 16) == 0);
    socklen_t len = sizeof(addr);
    TE_CHECK(getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
    TE_CHECK(pipe2(stop_pipe_, O_CLOEXEC) == 0);
  }
  virtual ~LoopbackListener() {
    close(listen_fd_);
    close(stop_pipe_[0]);
    close(stop_pipe_[1]);
  }
  LoopbackListener(const LoopbackListener&) = delete;
  LoopbackListener& operator=(const LoopbackListener&) = delete;

  int port() const { return port_; }
  int connections() const { return connections_.load(); }

 protected:
  // Handles one accepted connection (closed after it returns).
  virtual void Serve(int fd) = 0;

  void StartServing() {
    thread_ = std::thread([this] {
      for (int fd; (fd = Accept()) >= 0; close(fd)) {
        connections_.fetch_add(1);
        Serve(fd);
      }
    });
  }
  void StopServing() {
    (void)!write(stop_pipe_[1], "x", 1);
    thread_.join();
  }
  // Waits for `fd` to be readable; false when stopping.
  bool WaitReadable(int fd) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    while (poll(fds, 2, -1) < 0) {
    }
    return (fds[1].revents & POLLIN) == 0;
  }
  // The next connection, or -1 when stopping.
  int Accept() {
    for (;;) {
      if (!WaitReadable(listen_fd_)) return -1;
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) return fd;
    }
  }
  static void SendAll(int fd, const std::string& data) {
    std::size_t off = 0;
    while (off < data.size()) {
      ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<std::size_t>(n);
    }
  }

 private:
  int listen_fd_ = -1;
  int port_ = 0;
  int stop_pipe_[2] = {-1, -1};
  std::thread thread_;
  std::atomic<int> connections_{0};
};

// A scripted HTTP/1.1 server. Thread-safe accessors; the server thread
// handles one connection at a time.
class TestServer : public LoopbackListener {
 public:
  enum class Mode {
    kRespond,  // read the request, send `response`, close
    kHang,     // read the request, never answer (until the client leaves or Stop)
    kSilent,   // accept, never read or answer
    kReset,    // read the request, then close with a TCP reset
  };

  explicit TestServer(std::string response, Mode mode = Mode::kRespond)
      : response_(std::move(response)), mode_(mode) {
    StartServing();
  }

  ~TestServer() override { StopServing(); }

  std::vector<std::string> requests() const {
    MutexLock lock(mu_);
    return requests_;
  }
  // Bytes received on connections, whether or not they formed a request.
  std::size_t bytes_received() const { return bytes_received_.load(); }

 private:
  // Reads one request (headers and a Content-Length body); false when the
  // client left or the server stops first.
  bool ReadRequest(int fd, std::string& request) {
    for (;;) {
      std::size_t end = request.find("\r\n\r\n");
      if (end != std::string::npos) {
        std::size_t length = 0;
        std::size_t cl = request.find("Content-Length: ");
        if (cl != std::string::npos && cl < end) length = std::stoul(request.substr(cl + 16));
        if (request.size() >= end + 4 + length) return true;
      }
      if (!WaitReadable(fd)) return false;
      char buf[4096];
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) return false;
      bytes_received_.fetch_add(static_cast<std::size_t>(n));
      request.append(buf, static_cast<std::size_t>(n));
    }
  }

  // Blocks until the client closes or the server stops.
  void WaitForClientToLeave(int fd) {
    for (;;) {
      if (!WaitReadable(fd)) return;
      char buf[4096];
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) return;
      bytes_received_.fetch_add(static_cast<std::size_t>(n));
    }
  }

  void Serve(int fd) override {
    if (mode_ == Mode::kSilent) return WaitForClientToLeave(fd);
    std::string request;
    if (!ReadRequest(fd, request)) return;
    {
      MutexLock lock(mu_);
      requests_.push_back(request);
    }
    switch (mode_) {
      case Mode::kRespond: {
        std::size_t off = 0;
        while (off < response_.size()) {
          ssize_t n = send(fd, response_.data() + off, response_.size() - off, MSG_NOSIGNAL);
          if (n <= 0) break;
          off += static_cast<std::size_t>(n);
        }
        shutdown(fd, SHUT_WR);
        WaitForClientToLeave(fd);
        return;
      }
      case Mode::kHang:
        return WaitForClientToLeave(fd);
      case Mode::kReset: {
        linger l{1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
        return;
      }
      case Mode::kSilent:
        return;
    }
  }

  const std::string response_;
  const Mode mode_;
  std::atomic<std::size_t> bytes_received_{0};
  mutable Mutex mu_;
  std::vector<std::string> requests_ GUARDED_BY(mu_);
};

// A scripted SMTP server: greets, accepts EHLO/HELO, MAIL, RCPT, DATA, RSET,
// NOOP and QUIT, and records each message it accepted (the DATA up to the
// final dot, dot-unstuffed). Optionally refuses recipients or the message,
// or never answers the end of the data (an outcome the client cannot know).
class TestSmtpServer : public LoopbackListener {
 public:
  enum class Mode {
    kAccept,           // 250 to everything
    kRefuseRecipient,  // 550 to RCPT
    kRefuseMessage,    // 554 after the data
    kHangAfterData,    // never answers after the data
  };

  explicit TestSmtpServer(Mode mode = Mode::kAccept) : mode_(mode) { StartServing(); }
  ~TestSmtpServer() override { StopServing(); }

  struct Message {
    std::string from;
    std::vector<std::string> to;
    std::string data;
  };
  std::vector<Message> messages() const {
    MutexLock lock(mu_);
    return messages_;
  }

 private:
  // One line (without CRLF) into *line; false when the client left or stopping.
  bool ReadLine(int fd, std::string* buffer, std::string* line) {
    for (;;) {
      const std::size_t end = buffer->find("\r\n");
      if (end != std::string::npos) {
        *line = buffer->substr(0, end);
        buffer->erase(0, end + 2);
        return true;
      }
      if (!WaitReadable(fd)) return false;
      char buf[4096];
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n <= 0) return false;
      buffer->append(buf, static_cast<std::size_t>(n));
    }
  }

  void Serve(int fd) override {
    SendAll(fd, "220 test-smtp ready\r\n");
    std::string buffer, line;
    Message current;
    while (ReadLine(fd, &buffer, &line)) {
      std::string verb = line.substr(0, 4);
      for (char& c : verb) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
      if (verb == "EHLO" || verb == "HELO") {
        SendAll(fd, "250 test-smtp\r\n");
      } else if (verb == "MAIL") {
        current = Message{};
        current.from = line.substr(line.find(':') + 1);
        SendAll(fd, "250 ok\r\n");
      } else if (verb == "RCPT") {
        if (mode_ == Mode::kRefuseRecipient) {
          SendAll(fd, "550 no such user\r\n");
          continue;
        }
        current.to.push_back(line.substr(line.find(':') + 1));
        SendAll(fd, "250 ok\r\n");
      } else if (verb == "DATA") {
        SendAll(fd, "354 go ahead\r\n");
        std::string data;
        bool complete = false;
        while (ReadLine(fd, &buffer, &line)) {
          if (line == ".") {
            complete = true;
            break;
          }
          data += (line.starts_with("..") ? line.substr(1) : line) + "\r\n";
        }
        if (!complete) return;
        current.data = data;
        if (mode_ == Mode::kHangAfterData) {
          // Keeps the message unanswered until the client leaves.
          char buf[256];
          while (WaitReadable(fd) && read(fd, buf, sizeof(buf)) > 0) {
          }
          return;
        }
        if (mode_ == Mode::kRefuseMessage) {
          SendAll(fd, "554 rejected as spam\r\n");
          continue;
        }
        {
          MutexLock lock(mu_);
          messages_.push_back(current);
        }
        SendAll(fd, "250 queued as " + std::to_string(messages().size()) + "\r\n");
      } else if (verb == "QUIT") {
        SendAll(fd, "221 bye\r\n");
        return;
      } else if (verb == "RSET" || verb == "NOOP") {
        SendAll(fd, "250 ok\r\n");
      } else {
        SendAll(fd, "502 not implemented\r\n");
      }
    }
  }

  const Mode mode_;
  mutable Mutex mu_;
  std::vector<Message> messages_ GUARDED_BY(mu_);
};

}  // namespace taskengine
