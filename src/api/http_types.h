// Plain HTTP request/response values shared by the server, the router and the
// routes. No Boost here: Beast stays inside http_server.cc so that code which
// includes these headers compiles fast.
//
// The asynchronous contract: a request handler receives the request and a
// Responder, and must call Responder::Send exactly once — on any thread, at
// any time (a long-poll route keeps the Responder and answers later). When
// every copy of a Responder is destroyed without a Send, the client gets a 500
// instead of hanging.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace taskengine::api {

enum class HttpMethod { kGet, kHead, kPost, kPut, kPatch, kDelete, kOptions, kOther };

// "GET", "POST", ...; "OTHER" for kOther.
std::string_view ToString(HttpMethod method);
// Exact (case-sensitive, as RFC 9110 says) method name -> kOther when unknown.
HttpMethod ParseHttpMethod(std::string_view name);

// One parsed request. Immutable once built; cheap to move.
struct HttpRequest {
  HttpMethod method = HttpMethod::kGet;
  std::string method_name;  // as received, e.g. "PROPFIND" for kOther
  std::string target;       // as received: path and query, still percent-encoded
  std::string path;         // target up to '?', still percent-encoded
  std::string query;        // after '?', still percent-encoded; empty when none
  // Header fields in order; names lower-cased, values as received (trimmed).
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string remote_address;  // "ip:port" of the peer

  // The first header named `lower_case_name`, or nullptr.
  const std::string* Header(std::string_view lower_case_name) const;
  // Sets target, and path and query from it.
  void SetTarget(std::string request_target);
};

// One response. Content-Length, Date, Server and Connection are set by the server.
struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // extra fields
  std::string body;
  // Not sent: the authenticated principal's name, set by the router for the
  // access log. Empty for public routes and refused credentials.
  std::string principal;
};

// A response still to be built (Responder::SendBuilt).
using ResponseBuilder = std::function<HttpResponse()>;

namespace internal {
// Shared by the copies of one Responder: delivers the first response only.
class ResponderState {
 public:
  ResponderState(std::function<void(HttpResponse)> deliver,
                 std::function<void(ResponseBuilder)> deliver_built)
      : deliver_(std::move(deliver)), deliver_built_(std::move(deliver_built)) {}
  ~ResponderState();
  ResponderState(const ResponderState&) = delete;
  ResponderState& operator=(const ResponderState&) = delete;
  // True for the first call (of either) only.
  bool Send(HttpResponse response);
  bool SendBuilt(ResponseBuilder build);
  void Abandon() { sent_.store(true); }

 private:
  std::function<void(HttpResponse)> deliver_;
  std::function<void(ResponseBuilder)> deliver_built_;  // may be empty
  std::atomic<bool> sent_{false};
};
}  // namespace internal

// Completes one request. Copyable; copies share state and only the first Send
// of any copy counts (later ones are ignored and return false). Thread-safe.
// Send never blocks on the network: the write happens on the server's I/O
// threads. Sending after the server stopped (or the client went away) is a
// harmless no-op.
class Responder {
 public:
  Responder() = default;
  explicit Responder(std::function<void(HttpResponse)> deliver)
      : state_(std::make_shared<internal::ResponderState>(std::move(deliver), nullptr)) {}
  // With `deliver_built`, which takes a response still to be built and
  // builds it on the thread that writes it (the server's own responders).
  Responder(std::function<void(HttpResponse)> deliver,
            std::function<void(ResponseBuilder)> deliver_built)
      : state_(std::make_shared<internal::ResponderState>(std::move(deliver),
                                                          std::move(deliver_built))) {}

  // Returns true when this call delivered the response.
  bool Send(HttpResponse response) const {
    return state_ != nullptr && state_->Send(std::move(response));
  }
  // Sends the response `build` returns, built on the thread that writes it
  // (one of the server's I/O threads) when the responder comes from the
  // server, through Wrap's layers; otherwise built here and now. For callers
  // on a thread whose time is dear: a store answers asynchronous calls
  // (Store::AdmitBatchAsync) one after another on a thread of its own, which
  // then only passes the answer on. `build` must be quick and must not
  // block. It runs once even when nobody is left to answer (then here), so
  // that Wrap's layers (the access log) see every answer.
  bool SendBuilt(ResponseBuilder build) const {
    return state_ != nullptr && state_->SendBuilt(std::move(build));
  }
  // A responder that hands what it is sent to this one after `adjust`
  // changed it: built responses pass through, `adjust` running where they
  // are built. Dropped without an answer, it sends the 500 through `adjust`.
  Responder Wrap(std::function<void(HttpResponse&)> adjust) const;
  // Gives up this responder without answering, for one that wraps another
  // whose request went elsewhere (an InlineHandler that left it): later
  // Sends of any copy are ignored, and dropping it answers nothing.
  void Abandon() const {
    if (state_ != nullptr) state_->Abandon();
  }

 private:
  std::shared_ptr<internal::ResponderState> state_;
};

// Handles one request; see the asynchronous contract at the top of this file.
// Called on one of the server's handler threads, never on an I/O thread, so it
// may block briefly (e.g. on a durable commit). It must not throw (the router
// catches everything at the route boundary; the server catches again).
using RequestHandler = std::function<void(HttpRequest request, Responder respond)>;

// The part of the handling that may run on the I/O thread that read the
// request, before it goes to a handler thread (HttpServer's third argument):
// returns true when it took the request and will answer it through
// `respond`, false to leave it, unchanged, to the RequestHandler. It takes a
// request only when it can handle it without blocking: no read or write of
// the store that waits, no long computation (the I/O thread serves other
// connections meanwhile). It must not throw.
using InlineHandler = std::function<bool(HttpRequest& request, const Responder& respond)>;

}  // namespace taskengine::api
