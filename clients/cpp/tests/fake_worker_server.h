// A small in-memory stand-in for the server side of the worker protocol
// (/api/v1/worker/...), on the real HTTP server (src/api) on an ephemeral
// port. It follows the agreed wire format closely enough to test the SDK's
// worker loop in isolation: leases with claim versions, long-poll, batch
// heartbeats with cancel_requested, stale answers (409) for old claims, and
// finishes. Test-only; thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/http_server.h"

namespace taskengine_client::testing {

class FakeWorkerServer {
 public:
  using Json = nlohmann::json;

  struct Execution {
    std::string id;
    std::int64_t claim_version = 0;
    std::string state = "queued";  // queued | running | succeeded | failed | released
    bool cancel_requested = false;
    int attempt = 0;
    Json payload = Json::object();
    Json result;
    std::string failure_class, error;
    int heartbeats = 0;
    int progress = -1;
  };

  explicit FakeWorkerServer(int port = 0, std::int64_t lease_ms = 3000) : lease_ms_(lease_ms) {
    taskengine::api::HttpServerOptions options;
    options.port = port;
    options.handler_threads = 16;
    server_ = std::make_unique<taskengine::api::HttpServer>(
        options, [this](taskengine::api::HttpRequest request, taskengine::api::Responder respond) {
          respond.Send(Handle(request));
        });
  }
  ~FakeWorkerServer() { Stop(); }

  taskengine::Status Start() { return server_->Start(); }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopped_ = true;
    }
    cv_.notify_all();
    if (server_) server_->Stop(1000);
  }
  int port() const { return server_->port(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port()); }

  // Adds a queued execution; returns its id.
  std::string Enqueue(Json payload = Json::object()) {
    std::lock_guard<std::mutex> lock(mu_);
    Execution e;
    e.id = std::to_string(++next_id_);
    e.payload = std::move(payload);
    executions_[e.id] = e;
    queue_.push_back(e.id);
    cv_.notify_all();
    return e.id;
  }
  void RequestCancel(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    executions_[id].cancel_requested = true;
  }
  // Takes the claim away (as the sweeper would after expiry): the next call
  // with the old claim version is stale.
  void Expire(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    executions_[id].claim_version += 1000;
  }
  // Recovers the execution as a sweeper would after its lease expired, and
  // queues it again: the old claim is stale, the next lease is a new claim.
  void Requeue(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    executions_[id].claim_version += 1000;
    executions_[id].state = "queued";
    queue_.push_back(id);
    cv_.notify_all();
  }
  Execution Get(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    return executions_[id];
  }
  int Count(const std::string& state) {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& [id, e] : executions_) n += e.state == state ? 1 : 0;
    return n;
  }
  int lease_calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return lease_calls_;
  }
  int batch_heartbeats() {
    std::lock_guard<std::mutex> lock(mu_);
    return batch_heartbeats_;
  }
  int max_lease_request() {
    std::lock_guard<std::mutex> lock(mu_);
    return max_lease_request_;
  }
  std::string last_worker_id() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_worker_id_;
  }
  // Every request must carry this bearer token (empty: none required).
  void RequireToken(std::string token) {
    std::lock_guard<std::mutex> lock(mu_);
    token_ = std::move(token);
  }

 private:
  static taskengine::api::HttpResponse Answer(int status, const Json& body) {
    taskengine::api::HttpResponse r;
    r.status = status;
    if (!body.is_null()) r.body = body.dump();
    return r;
  }
  static Json Error(const std::string& code, const std::string& message) {
    return {{"error", {{"code", code}, {"message", message}, {"details", Json::object()}}}};
  }
  static std::vector<std::string> Split(const std::string& path) {
    std::vector<std::string> out;
    std::size_t i = 1;
    while (i <= path.size()) {
      std::size_t j = path.find('/', i);
      if (j == std::string::npos) j = path.size();
      out.push_back(path.substr(i, j - i));
      i = j + 1;
    }
    return out;
  }

  // REQUIRES: mu_ held. nullptr + *status set when the claim is not current.
  Execution* Claimed(const std::string& id, const Json& body, int* status, Json* error) {
    auto it = executions_.find(id);
    if (it == executions_.end()) {
      *status = 404;
      *error = Error("not_found", "no execution " + id);
      return nullptr;
    }
    if (it->second.state != "running" ||
        body.value("claim_version", std::int64_t{-1}) != it->second.claim_version) {
      *status = 409;
      *error = Error("stale", "claim version is not current");
      return nullptr;
    }
    return &it->second;
  }

  taskengine::api::HttpResponse Handle(const taskengine::api::HttpRequest& request) {
    Json body = request.body.empty() ? Json::object() : Json::parse(request.body, nullptr, false);
    if (body.is_discarded()) return Answer(400, Error("bad_request", "not JSON"));
    std::unique_lock<std::mutex> lock(mu_);
    if (!token_.empty()) {
      const std::string* auth = request.Header("authorization");
      if (auth == nullptr || *auth != "Bearer " + token_) {
        return Answer(401, Error("unauthenticated", "bad token"));
      }
    }
    const std::vector<std::string> seg = Split(request.path);
    if (request.path == "/api/v1/worker/lease") {
      ++lease_calls_;
      last_worker_id_ = body.value("worker_id", "");
      const int max = body.value("max", 1);
      max_lease_request_ = std::max(max_lease_request_, max);
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(body.value("wait_ms", 0));
      cv_.wait_until(lock, deadline, [&] { return stopped_ || !queue_.empty(); });
      Json leases = Json::array();
      while (!queue_.empty() && static_cast<int>(leases.size()) < max) {
        Execution& e = executions_[queue_.front()];
        queue_.pop_front();
        e.state = "running";
        e.claim_version += 1;
        e.attempt += 1;
        leases.push_back({{"id", e.id},
                          {"claim_version", e.claim_version},
                          {"job", "fake"},
                          {"tenant", ""},
                          {"queue", "default"},
                          {"attempt", e.attempt},
                          {"payload", e.payload},
                          {"idempotency_key", nullptr},
                          {"effect_key_prefix", e.id + ":"},
                          {"lease_ms", lease_ms_},
                          {"lease_expires_at", "2026-01-01T00:00:00.000Z"},
                          {"handler", "command"},
                          {"handler_config", Json::object()}});
      }
      return Answer(200, {{"leases", leases}});
    }
    if (request.path == "/api/v1/worker/heartbeats") {
      ++batch_heartbeats_;
      Json items = Json::array();
      for (const Json& item : body.value("items", Json::array())) {
        const std::string id = item.value("id", "");
        int status = 0;
        Json error;
        Execution* e = Claimed(id, item, &status, &error);
        if (e == nullptr) {
          items.push_back({{"id", id}, {"ok", false}, {"error", error["error"]}});
          continue;
        }
        ++e->heartbeats;
        if (item.contains("progress")) e->progress = item["progress"];
        items.push_back({{"id", id},
                         {"ok", true},
                         {"cancel_requested", e->cancel_requested},
                         {"lease_expires_at_ms", 0}});
      }
      return Answer(200, {{"items", items}});
    }
    // /api/v1/worker/executions/{id}/{verb}[/...]
    if (seg.size() >= 6 && seg[0] == "api" && seg[2] == "worker" && seg[3] == "executions") {
      const std::string& id = seg[4];
      int status = 0;
      Json error;
      Execution* e = Claimed(id, body, &status, &error);
      if (e == nullptr) return Answer(status, error);
      const std::string& verb = seg[5];
      if (verb == "heartbeat") {
        ++e->heartbeats;
        return Answer(200, {{"cancel_requested", e->cancel_requested}, {"lease_expires_at_ms", 0}});
      }
      if (verb == "log") return Answer(204, nullptr);
      if (verb == "complete") {
        e->state = "succeeded";
        e->result = body.value("result", Json());
        return Answer(200, {{"status", "succeeded"}});
      }
      if (verb == "fail") {
        e->state = "failed";
        e->failure_class = body.value("class", "");
        e->error = body.value("error", "");
        return Answer(200, {{"status", "failed"}});
      }
      if (verb == "release") {
        e->state = e->cancel_requested ? "canceled" : "queued";
        if (!e->cancel_requested) queue_.push_back(id);
        return Answer(200, {{"status", e->state}});
      }
      if (verb == "effects" && seg.size() == 8) {
        if (seg[7] == "reserve") {
          return Answer(200, {{"answer", "proceed"}, {"key", id + ":" + seg[6]}});
        }
        if (seg[7] == "commit") return Answer(200, {{"key", id + ":" + seg[6]}});
        if (seg[7] == "release") return Answer(204, nullptr);
      }
    }
    return Answer(404, Error("not_found", "no route " + request.path));
  }

  const std::int64_t lease_ms_;
  std::unique_ptr<taskengine::api::HttpServer> server_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Execution> executions_;
  std::deque<std::string> queue_;
  std::int64_t next_id_ = 0;
  bool stopped_ = false;
  int lease_calls_ = 0;
  int batch_heartbeats_ = 0;
  int max_lease_request_ = 0;
  std::string last_worker_id_;
  std::string token_;
};

}  // namespace taskengine_client::testing
