// The Beast side of HttpServer. Each connection is a Session whose every step
// runs on its own strand:
//
//   WaitForRequest (idle timeout; the header timeout before the first request)
//   -> ReadHeader (header timeout, header limit) -> CheckRequestHead ->
//   [100 Continue] -> ReadBody (read timeout, body limit) -> Handle (the
//   InlineHandler, or a post to the handler pool; no timer while the handler
//   runs) -> OnResponse (from any thread via the Responder, posted back to
//   the strand) -> Write -> WaitForRequest | Close
//
// Connection limits: OnAccept counts connections per client address and in
// all (under mu_). Each Session publishes, in an atomic, since when it has
// been waiting for its client (kBusy while its request is handled or
// answered); to make room the acceptor closes the one waiting longest. When
// accept() fails for want of descriptors, the reserve descriptor is released
// so that one pending connection can be accepted and closed, then reopened.
//
// Ownership: the server's registry owns every open Session; asynchronous
// operations hold it too while pending. A Responder holds only a weak
// reference and a shared Gate, so a response that arrives after the server
// stopped (or after its connection closed) is dropped without touching freed
// memory.
#include "api/http_server.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <ctime>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "api/errors.h"
#include "api/handler_pool.h"
#include "api/http_wire.h"
#include "api/request_checks.h"
#include "core/mutex.h"
#include "platform/thread_name.h"

namespace taskengine::api {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = boost::asio::ip::tcp;

// A connection's executor is its strand, by its concrete type: Beast's
// default tcp_stream holds a type-erased executor that allocates on the heap
// each time an operation copies or adapts it (about 27 times per request).
using Strand = net::strand<net::io_context::executor_type>;
using Socket = net::basic_stream_socket<tcp, Strand>;
using Stream = beast::basic_stream<tcp, Strand>;

// Guards delivery of late responses: open while the I/O context may be used.
struct Gate {
  Mutex mu;
  bool open GUARDED_BY(mu) = true;
};

// The Date header's value now, formatted once per second per thread.
const std::string& HttpDate() {
  thread_local std::time_t formatted_at = -1;
  thread_local std::string value;
  const std::time_t now = std::time(nullptr);
  if (now != formatted_at) {
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[64];
    const std::size_t n = std::strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    value.assign(buf, n);
    formatted_at = now;
  }
  return value;
}

// ASCII only: header names are tokens (the parser refuses other bytes).
std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Milliseconds on the steady clock (connection ages only).
Millis SteadyMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Session::waiting_since_ while the session may not be closed to make room.
constexpr Millis kBusy = -1;
// ... and once it was chosen to be closed.
constexpr Millis kEvicting = -2;

// The cap on connections the descriptor limit allows: an eighth of it (at
// least 64) stays for the store, handler pipes, logs and the reserve.
int ConnectionCapFromRlimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1 << 20;
  const auto soft = static_cast<std::int64_t>(std::min<rlim_t>(limit.rlim_cur, 1 << 24));
  const std::int64_t kept = std::max<std::int64_t>(64, soft / 8);
  return static_cast<int>(std::max<std::int64_t>(8, soft - kept));
}

bool IsHttpParseError(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

class Session;

class ServerCore {
 public:
  ServerCore(HttpServerOptions options, RequestHandler handler, InlineHandler try_inline)
      : options_(std::move(options)),
        handler_(std::move(handler)),
        try_inline_(std::move(try_inline)),
        gate_(std::make_shared<Gate>()),
        hosts_(options_.host, options_.public_hosts) {}

  ~ServerCore() {
    Stop(0);
    if (reserve_fd_ >= 0) ::close(reserve_fd_);
  }

  Status Start();
  void Stop(Millis grace_ms) EXCLUDES(mu_);
  int port() const { return port_.load(); }
  int in_flight() const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return in_flight_;
  }

  // --- used by sessions (any thread) ---
  const HttpServerOptions& options() const { return options_; }
  const RequestHandler& handler() const { return handler_; }
  const InlineHandler& try_inline() const { return try_inline_; }
  const std::shared_ptr<Gate>& gate() const { return gate_; }
  const HostAllowlist& hosts() const { return hosts_; }
  int connections() const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return static_cast<int>(sessions_.size());
  }
  int max_connections() const { return max_connections_.load(); }
  HandlerPool& pool() { return *pool_; }
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }
  void BeginRequest() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    ++in_flight_;
  }
  void EndRequest() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    --in_flight_;
    if (in_flight_ == 0) idle_cv_.NotifyAll();
  }
  void Unregister(std::uint64_t id) EXCLUDES(mu_);

 private:
  void Accept();
  void OnAccept(beast::error_code ec, Socket socket);
  // Out of descriptors: accepts one pending connection with the reserve
  // descriptor and closes it, then makes room. On acceptor_strand_.
  void ShedAtDescriptorLimit();
  // Closes the session that has waited longest for its client; false when
  // every session is busy.
  bool EvictOldestLocked() REQUIRES(mu_);
  std::vector<std::shared_ptr<Session>> SnapshotSessions() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    std::vector<std::shared_ptr<Session>> out;
    out.reserve(sessions_.size());
    for (auto& [id, s] : sessions_) out.push_back(s);
    return out;
  }

  // Constant after construction.
  const HttpServerOptions options_;
  const RequestHandler handler_;
  const InlineHandler try_inline_;
  const std::shared_ptr<Gate> gate_;
  const HostAllowlist hosts_;
  std::atomic<int> max_connections_{0};  // set by Start

  // The I/O context outlives everything below that refers to it.
  net::io_context ioc_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
  std::optional<tcp::acceptor> acceptor_;  // used on acceptor_strand_ only
  std::optional<net::strand<net::io_context::executor_type>> acceptor_strand_;
  std::optional<net::steady_timer> accept_retry_;
  std::optional<HandlerPool> pool_;
  std::vector<std::thread> io_threads_;
  std::atomic<int> port_{0};
  int reserve_fd_ = -1;  // on acceptor_strand_ after Start
  std::atomic<bool> stopping_{false};
  // Start/Stop are called by the owner, not concurrently.
  bool started_ = false;  // Start was called
  bool running_ = false;  // Start succeeded
  bool stopped_ = false;

  mutable Mutex mu_;
  CondVar idle_cv_;
  int in_flight_ GUARDED_BY(mu_) = 0;
  std::uint64_t next_session_id_ GUARDED_BY(mu_) = 1;
  std::unordered_map<std::uint64_t, std::shared_ptr<Session>> sessions_ GUARDED_BY(mu_);
  // Open connections by address.
  std::unordered_map<std::string, int> per_client_ GUARDED_BY(mu_);

  friend class Session;
};

// One connection. Every member function runs on the session's strand.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(ServerCore* server, Socket socket, std::uint64_t id, std::string client, std::string peer)
      : server_(server),
        stream_(std::move(socket)),
        id_(id),
        client_(std::move(client)),
        peer_(std::move(peer)) {}

  const std::string& client() const { return client_; }
  // Since when (SteadyMillis) the session has waited for its client; kBusy
  // while its request is handled or answered, kEvicting once chosen to close.
  Millis waiting_since() const { return waiting_since_.load(std::memory_order_relaxed); }
  // Claims the session for eviction; false when it became busy or was claimed.
  bool ClaimForEviction(Millis seen) {
    return waiting_since_.compare_exchange_strong(seen, kEvicting, std::memory_order_relaxed);
  }

  void Begin() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      // Non-blocking, so that a request already received is read, and an
      // answer written, at once on this thread (ReadHeader, ReadBody,
      // Write): a call that would wait returns would_block instead, and the
      // asynchronous operation takes over from there.
      beast::error_code ec;
      self->stream_.socket().non_blocking(true, ec);
      if (ec) return self->Close();
      self->WaitForRequest();
    });
  }

  // Posted by Stop(): close unless a request is being handled or answered.
  void OnServerStopping() {
    if (state_ == State::kHandling || state_ == State::kWriting) {
      close_after_response_ = true;
    } else {
      Close();
    }
  }

  void ForceClose() { Close(); }

  // Posted by the acceptor to make room: closes unless a request is being
  // handled or answered by now.
  void Evict() {
    if (state_ == State::kHandling || state_ == State::kWriting) {
      waiting_since_.store(kBusy, std::memory_order_relaxed);
      return;
    }
    Close();
  }

  Strand executor() { return stream_.get_executor(); }

 private:
  enum class State { kIdle, kReading, kHandling, kWriting, kClosed };

  void WaitForRequest() {
    if (state_ == State::kClosed) return;
    state_ = State::kIdle;
    SetWaiting(SteadyMillis());
    if (server_->stopping()) return Close();
    if (buffer_.size() > 0) return ReadHeader();  // a pipelined request is already here
    // A new connection gets the header timeout for its first byte: one that
    // was opened only to be held costs the server little time.
    const Millis wait =
        served_any_ ? server_->options().idle_timeout_ms : server_->options().header_timeout_ms;
    stream_.expires_after(std::chrono::milliseconds(wait));
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->buffer_.commit(n);
                              if (ec || self->state_ == State::kClosed) return self->Close();
                              self->ReadHeader();
                            });
  }

  void ReadHeader() {
    state_ = State::kReading;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_->options().max_header_bytes));
    parser_->body_limit(server_->options().max_body_bytes);
    read_started_ = std::chrono::steady_clock::now();
    stream_.expires_after(std::chrono::milliseconds(
        std::min(server_->options().header_timeout_ms, server_->options().read_timeout_ms)));
    // Usually the whole header is in the buffer already: parsed here, it
    // costs no trip through the I/O context's queue.
    beast::error_code ec;
    http::read_header(stream_.socket(), buffer_, *parser_, ec);
    if (!WouldBlock(ec)) return OnHeader(ec);
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnHeader(ec); });
  }

  static bool WouldBlock(const beast::error_code& ec) {
    return ec == net::error::would_block || ec == net::error::try_again;
  }

  // Answers a protocol error (the request never reached a handler) and closes.
  bool HandleReadError(const beast::error_code& ec) {
    if (!ec) return false;
    if (state_ == State::kClosed) return true;
    if (ec == http::error::body_limit) {
      SendProtocolError(ErrorResponse(413, "payload_too_large",
                                      "request body exceeds the limit of " +
                                          std::to_string(server_->options().max_body_bytes) +
                                          " bytes"));
    } else if (ec == http::error::header_limit) {
      SendProtocolError(ErrorResponse(431, "header_too_large",
                                      "request header exceeds the limit of " +
                                          std::to_string(server_->options().max_header_bytes) +
                                          " bytes"));
    } else if (IsHttpParseError(ec)) {
      SendProtocolError(
          ErrorResponse(400, "bad_request", "malformed HTTP request: " + ec.message()));
    } else {
      Close();  // end of stream, timeout, reset, or the server is stopping
    }
    return true;
  }

  void OnHeader(const beast::error_code& ec) {
    if (HandleReadError(ec)) return;
    const auto& msg = parser_->get();
    RequestHead head;
    head.version = msg.version();
    head.method = std::string_view(msg.method_string().data(), msg.method_string().size());
    head.target = std::string_view(msg.target().data(), msg.target().size());
    head.fields.reserve(16);
    for (const auto& field : msg) {
      head.fields.emplace_back(
          std::string_view(field.name_string().data(), field.name_string().size()),
          std::string_view(field.value().data(), field.value().size()));
    }
    head.allowed_host = allowed_host_;
    if (std::optional<HeadProblem> problem = CheckRequestHead(head, server_->hosts())) {
      return SendProtocolError(ErrorResponse(problem->status, problem->code, problem->message));
    }
    if (auto host = msg.find(http::field::host); host != msg.end()) {
      const std::string_view value(host->value().data(), host->value().size());
      if (value != allowed_host_) allowed_host_ = value;
    }
    auto expect = msg.find(http::field::expect);
    if (expect != msg.end()) {
      if (!beast::iequals(expect->value(), "100-continue")) {
        return SendProtocolError(
            ErrorResponse(417, "expectation_failed", "only 'Expect: 100-continue' is supported"));
      }
      if (!parser_->is_done()) {
        static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                         [self = shared_from_this()](beast::error_code wec, std::size_t) {
                           if (wec) return self->Close();
                           self->ReadBody();
                         });
        return;
      }
    }
    ReadBody();
  }

  void ReadBody() {
    if (state_ == State::kClosed) return;
    if (parser_->is_done()) return Handle();
    beast::error_code ec;
    http::read(stream_.socket(), buffer_, *parser_, ec);  // what has arrived
    if (!WouldBlock(ec)) {
      if (HandleReadError(ec)) return;
      return Handle();
    }
    // The body shares the read timeout with the header (slow bodies too).
    stream_.expires_at(read_started_ +
                       std::chrono::milliseconds(server_->options().read_timeout_ms));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) {
                       if (self->HandleReadError(ec)) return;
                       self->Handle();
                     });
  }

  HttpRequest BuildRequest() {
    auto& msg = parser_->get();
    HttpRequest req;
    req.method_name = std::string(msg.method_string());
    req.method = ParseHttpMethod(req.method_name);
    req.SetTarget(std::string(msg.target()));
    req.headers.reserve(8);
    for (const auto& field : msg) {
      req.headers.emplace_back(
          Lower(std::string_view(field.name_string().data(), field.name_string().size())),
          std::string(field.value()));
    }
    req.body = std::move(msg.body());
    req.remote_address = peer_;
    return req;
  }

  // Runs `f` on the session's strand, unless the server stopped (the gate
  // closed) or the session is gone (then false): how a response reaches its
  // session from any thread.
  template <typename F>
  static bool PostToSession(const std::weak_ptr<Session>& weak, Gate& gate, F f) {
    MutexLock lock(gate.mu);
    if (!gate.open) return false;
    std::shared_ptr<Session> self = weak.lock();
    if (!self) return false;
    Session& session = *self;
    net::post(session.stream_.get_executor(),
              [self = std::move(self), f = std::move(f)]() mutable { f(*self); });
    return true;
  }

  void Handle() {
    state_ = State::kHandling;
    served_any_ = true;
    SetBusy();
    keep_alive_ = parser_->get().keep_alive();
    version_ = parser_->get().version();
    HttpRequest request = BuildRequest();
    parser_.reset();
    stream_.expires_never();  // the handler may take its time (long-poll)
    request_outstanding_ = true;
    server_->BeginRequest();

    std::weak_ptr<Session> weak = weak_from_this();
    std::shared_ptr<Gate> gate = server_->gate();
    Responder responder(
        [weak, gate](HttpResponse response) {
          PostToSession(weak, *gate, [r = std::move(response)](Session& self) mutable {
            self.OnResponse(std::move(r));
          });
        },
        [weak, gate](ResponseBuilder build) {
          auto posted = std::make_shared<ResponseBuilder>(std::move(build));
          const bool delivered = PostToSession(weak, *gate, [posted](Session& self) {
            HttpResponse response;
            try {
              response = (*posted)();
            } catch (...) {
              response = ErrorResponse(500, "internal", "the response could not be built");
            }
            self.OnResponse(std::move(response));
          });
          if (delivered) return;
          // Nobody to answer: built all the same, here, for what its layers
          // record (the access log).
          try {
            (void)(*posted)();
          } catch (...) {
            // An answer nobody reads.
          }
        });
    if (const InlineHandler& try_inline = server_->try_inline(); try_inline) {
      bool taken = false;
      try {
        taken = try_inline(request, responder);
      } catch (...) {  // it must not throw; if it did, it took the request
        taken = true;
        responder.Send(
            ErrorResponse(500, "internal", "unexpected error while handling the request"));
      }
      if (taken) return;
    }
    const RequestHandler* handler = &server_->handler();
    server_->pool().Post([handler, request = std::move(request), responder]() mutable {
      try {
        (*handler)(std::move(request), responder);
      } catch (...) {
        responder.Send(
            ErrorResponse(500, "internal", "unexpected error while handling the request"));
      }
    });
  }

  void OnResponse(HttpResponse response) {
    if (state_ != State::kHandling) return;  // closed meanwhile
    state_ = State::kWriting;
    const bool keep = keep_alive_ && !close_after_response_ && !server_->stopping();
    Write(std::move(response), keep, /*counted=*/true);
  }

  void SendProtocolError(HttpResponse response) {
    state_ = State::kWriting;
    SetBusy();
    version_ = 11;
    linger_after_write_ = true;
    Write(std::move(response), /*keep=*/false, /*counted=*/false);
  }

  // After answering a request we did not read completely (413, 431, 400):
  // stop sending, then read and discard what the client still sends for a
  // short while, so that closing does not reset the connection before the
  // client has read our answer.
  void DrainAndClose() {
    state_ = State::kReading;  // a server stop may close it at once
    SetWaiting(0);             // the first to go when room is needed
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(std::chrono::milliseconds(kDrainTimeoutMs));
    DrainSome();
  }

  void DrainSome() {
    buffer_.consume(buffer_.size());
    stream_.async_read_some(buffer_.prepare(64 * 1024), [self = shared_from_this()](
                                                            beast::error_code ec, std::size_t n) {
      self->drained_ += n;
      if (ec || self->state_ == State::kClosed || self->drained_ > kMaxDrainBytes) {
        return self->Close();
      }
      self->DrainSome();
    });
  }

  void Write(HttpResponse response, bool keep, bool counted) {
    out_.clear();
    AppendResponseBytes(out_, response, version_, keep, server_->options().server_name, HttpDate());
    // Written at once while the socket takes it (an answer of a few
    // kilobytes, nearly always): the session reads the next request without
    // waiting for a completion to come through the I/O context's queue. What
    // the socket does not take now is written asynchronously, under the write
    // timeout.
    beast::error_code ec;
    std::size_t sent = 0;
    while (sent < out_.size() && !ec) {
      sent += stream_.socket().write_some(net::buffer(out_.data() + sent, out_.size() - sent), ec);
    }
    if (!WouldBlock(ec)) return Written(ec, keep, counted);
    stream_.expires_after(std::chrono::milliseconds(server_->options().write_timeout_ms));
    net::async_write(
        stream_, net::buffer(out_.data() + sent, out_.size() - sent),
        [self = shared_from_this(), keep, counted](beast::error_code wec, std::size_t) {
          self->Written(wec, keep, counted);
        });
  }

  void Written(const beast::error_code& ec, bool keep, bool counted) {
    // The buffer is kept for the connection's next answer (Write clears
    // it), unless large.
    if (out_.capacity() > kKeptWriteBuffer) std::string().swap(out_);
    if (counted) FinishRequest();
    if (!ec && linger_after_write_) return DrainAndClose();
    if (ec || !keep) return Close();
    WaitForRequest();
  }

  void FinishRequest() {
    if (!request_outstanding_) return;
    request_outstanding_ = false;
    server_->EndRequest();
  }

  void Close() {
    if (state_ == State::kClosed) return;
    state_ = State::kClosed;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
    FinishRequest();
    server_->Unregister(id_);
  }

  // Publishes the state for the acceptor, unless already chosen for eviction.
  void SetWaiting(Millis since) {
    Millis current = waiting_since_.load(std::memory_order_relaxed);
    while (current != kEvicting &&
           !waiting_since_.compare_exchange_weak(current, since, std::memory_order_relaxed)) {
    }
  }
  void SetBusy() { SetWaiting(kBusy); }

  ServerCore* const server_;
  Stream stream_;
  const std::uint64_t id_;
  const std::string client_;  // the peer's address, the key of the per-client cap
  const std::string peer_;    // "address:port" of the peer, read once when accepted
  std::atomic<Millis> waiting_since_{SteadyMillis()};
  std::chrono::steady_clock::time_point read_started_;
  bool served_any_ = false;
  std::string allowed_host_;  // RequestHead::allowed_host
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string out_;  // the response being written (AppendResponseBytes)
  State state_ = State::kIdle;
  bool keep_alive_ = true;
  bool close_after_response_ = false;
  bool request_outstanding_ = false;
  bool linger_after_write_ = false;
  std::size_t drained_ = 0;
  unsigned version_ = 11;

  static constexpr Millis kDrainTimeoutMs = 2000;
  static constexpr std::size_t kMaxDrainBytes = 8 * 1024 * 1024;
  // Larger write buffers are freed once written (a dashboard asset).
  static constexpr std::size_t kKeptWriteBuffer = 16 * 1024;
};

}  // namespace

Status ServerCore::Start() {
  if (started_) return Internal("HttpServer::Start called twice");
  started_ = true;
  try {
    beast::error_code ec;
    std::string host = options_.host == "localhost" ? "127.0.0.1" : options_.host;
    net::ip::address address = net::ip::make_address(host, ec);
    if (ec) return InvalidArgument("invalid listen address '" + options_.host + "'");
    if (options_.port < 0 || options_.port > 65535) {
      return InvalidArgument("invalid port " + std::to_string(options_.port));
    }
    acceptor_strand_.emplace(net::make_strand(ioc_));
    acceptor_.emplace(*acceptor_strand_);
    accept_retry_.emplace(*acceptor_strand_);
    tcp::endpoint endpoint(address, static_cast<unsigned short>(options_.port));
    acceptor_->open(endpoint.protocol(), ec);
    if (!ec) acceptor_->set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_->bind(endpoint, ec);
    if (!ec) acceptor_->listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return Unavailable("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                         ": " + ec.message());
    }
    port_.store(acceptor_->local_endpoint().port());
    // Synchronous accepts (ShedAtDescriptorLimit) must never block.
    acceptor_->non_blocking(true, ec);
    if (ec) return Internal("cannot make the listening socket non-blocking: " + ec.message());
    const int fd_cap = ConnectionCapFromRlimit();
    max_connections_.store(options_.max_connections > 0 ? std::min(options_.max_connections, fd_cap)
                                                        : fd_cap);
    reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    pool_.emplace(options_.handler_threads);
    work_.emplace(net::make_work_guard(ioc_));
    running_ = true;  // from here on, Stop() has everything to undo
    net::dispatch(*acceptor_strand_, [this] { Accept(); });
    for (int i = 0; i < std::max(1, options_.io_threads); ++i) {
      io_threads_.push_back(NamedThread("te-http-io", [this] {
        for (;;) {
          try {
            ioc_.run();
            return;
          } catch (...) {
            // A completion handler threw (out of memory): keep serving.
          }
        }
      }));
    }
  } catch (const std::exception& e) {
    return Internal(std::string("cannot start the HTTP server: ") + e.what());
  }
  return Status::Ok();
}

void ServerCore::Accept() {
  if (stopping() || !acceptor_->is_open()) return;
  acceptor_->async_accept(net::make_strand(ioc_), [this](beast::error_code ec, Socket socket) {
    OnAccept(ec, std::move(socket));
  });
}

void ServerCore::OnAccept(beast::error_code ec, Socket socket) {
  if (ec == net::error::operation_aborted || stopping()) return;
  if (ec) {
    Millis retry_ms = 50;
    if (ec == net::error::no_descriptors ||
        ec == boost::system::errc::too_many_files_open_in_system) {
      ShedAtDescriptorLimit();
      retry_ms = 5;
    }
    // Try again shortly instead of spinning.
    accept_retry_->expires_after(std::chrono::milliseconds(retry_ms));
    accept_retry_->async_wait([this](beast::error_code wec) {
      if (!wec) Accept();
    });
    return;
  }
  beast::error_code endpoint_ec;
  const tcp::endpoint peer = socket.remote_endpoint(endpoint_ec);
  if (endpoint_ec) {  // reset before we got here
    socket.close(endpoint_ec);
    return Accept();
  }
  std::string client = peer.address().to_string();
  beast::error_code nodelay_ec;
  socket.set_option(tcp::no_delay(true), nodelay_ec);
  std::shared_ptr<Session> session;
  {
    MutexLock lock(mu_);
    int& from_client = per_client_[client];
    const bool client_full = from_client >= std::max(1, options_.max_connections_per_client);
    const bool server_full = !client_full &&
                             static_cast<int>(sessions_.size()) >= max_connections_.load() &&
                             !EvictOldestLocked();
    if (client_full || server_full) {
      if (from_client == 0) per_client_.erase(client);
      beast::error_code close_ec;
      socket.close(close_ec);
    } else {
      ++from_client;
      std::uint64_t id = next_session_id_++;
      session = std::make_shared<Session>(this, std::move(socket), id, client,
                                          client + ":" + std::to_string(peer.port()));
      sessions_.emplace(id, session);
    }
  }
  if (session) session->Begin();
  Accept();
}

void ServerCore::Unregister(std::uint64_t id) {
  std::shared_ptr<Session> doomed;  // destroyed outside the lock
  MutexLock lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  doomed = std::move(it->second);
  sessions_.erase(it);
  auto count = per_client_.find(doomed->client());
  if (count != per_client_.end() && --count->second <= 0) per_client_.erase(count);
}

bool ServerCore::EvictOldestLocked() {
  for (;;) {
    Session* oldest = nullptr;
    Millis oldest_since = 0;
    for (auto& [id, s] : sessions_) {
      const Millis since = s->waiting_since();
      if (since < 0) continue;  // busy, or already being closed
      if (oldest == nullptr || since < oldest_since) {
        oldest = s.get();
        oldest_since = since;
      }
    }
    if (oldest == nullptr) return false;
    // It may have become busy meanwhile: then look again.
    if (!oldest->ClaimForEviction(oldest_since)) continue;
    std::shared_ptr<Session> victim = oldest->shared_from_this();
    net::post(victim->executor(), [victim] { victim->Evict(); });
    return true;
  }
}

void ServerCore::ShedAtDescriptorLimit() {
  if (reserve_fd_ >= 0) {
    ::close(reserve_fd_);
    reserve_fd_ = -1;
  }
  beast::error_code ec;
  tcp::socket doomed(ioc_);
  acceptor_->accept(doomed, ec);  // non-blocking: would_block when none waits
  if (!ec) doomed.close(ec);
  {
    MutexLock lock(mu_);
    EvictOldestLocked();
  }
  reserve_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
}

void ServerCore::Stop(Millis grace_ms) {
  if (!running_ || stopped_) return;
  stopped_ = true;
  stopping_.store(true, std::memory_order_release);
  // 1. Stop accepting.
  net::dispatch(*acceptor_strand_, [this] {
    beast::error_code ec;
    acceptor_->close(ec);
    accept_retry_->cancel();
  });
  // 2. Close idle connections; busy ones close after their response.
  for (auto& s : SnapshotSessions()) {
    net::post(s->executor(), [s] { s->OnServerStopping(); });
  }
  // 3. Let handled requests finish, up to the grace period.
  {
    MutexLock lock(mu_);
    const auto grace_end =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<Millis>(0, grace_ms));
    while (in_flight_ != 0 && idle_cv_.WaitUntil(mu_, grace_end)) {
    }
  }
  // 4. Drop late responses, close everything, join.
  {
    MutexLock lock(gate_->mu);
    gate_->open = false;
  }
  for (auto& s : SnapshotSessions()) {
    net::post(s->executor(), [s] { s->ForceClose(); });
  }
  work_.reset();
  // Give the closes a moment to run, then stop whatever is still pending.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      MutexLock lock(mu_);
      if (sessions_.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ioc_.stop();
  for (auto& t : io_threads_) t.join();
  io_threads_.clear();
  pool_->Stop();
  pool_->Join();
  std::unordered_map<std::uint64_t, std::shared_ptr<Session>> remaining;
  {
    MutexLock lock(mu_);
    remaining.swap(sessions_);
  }
  remaining.clear();
}

class HttpServer::Impl final : public ServerCore {
 public:
  using ServerCore::ServerCore;
};

HttpServer::HttpServer(HttpServerOptions options, RequestHandler handler, InlineHandler try_inline)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler), std::move(try_inline))) {
}

HttpServer::~HttpServer() = default;

Status HttpServer::Start() { return impl_->Start(); }
int HttpServer::port() const { return impl_->port(); }
void HttpServer::Stop(Millis grace_ms) { impl_->Stop(grace_ms); }
int HttpServer::in_flight() const { return impl_->in_flight(); }
int HttpServer::connections() const { return impl_->connections(); }
int HttpServer::max_connections() const { return impl_->max_connections(); }

}  // namespace taskengine::api
