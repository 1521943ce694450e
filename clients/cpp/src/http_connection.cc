#include "http_connection.h"

#include <curl/curl.h>

#include <cctype>
#include <mutex>

namespace taskengine_client::internal {
namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t WriteBody(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

size_t ReadHeader(char* data, size_t size, size_t count, void* user) {
  std::string line(data, size * count);
  constexpr char kName[] = "location:";
  if (line.size() > sizeof(kName) - 1) {
    bool match = true;
    for (size_t i = 0; i + 1 < sizeof(kName); ++i) {
      if (std::tolower(static_cast<unsigned char>(line[i])) != kName[i]) {
        match = false;
        break;
      }
    }
    if (match) {
      std::string value = line.substr(sizeof(kName) - 1);
      while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front()))) {
        value.erase(value.begin());
      }
      while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) {
        value.pop_back();
      }
      static_cast<HttpReply*>(user)->location = value;
    }
  }
  return size * count;
}

int Progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  const auto* abort = static_cast<const std::atomic<bool>*>(user);
  return (abort != nullptr && abort->load()) ? 1 : 0;
}

}  // namespace

HttpConnection::HttpConnection() {
  GlobalInit();
  curl_ = curl_easy_init();
}

HttpConnection::~HttpConnection() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Result<HttpReply> HttpConnection::Perform(const HttpCall& call) {
  CURL* curl = static_cast<CURL*>(curl_);
  if (curl == nullptr) return Status::Transport("libcurl could not create a handle");
  if (call.abort != nullptr && call.abort->load()) return Status::Transport("aborted");
  // Options are reset per call; the connection cache of the handle survives.
  curl_easy_reset(curl);
  HttpReply reply;
  curl_easy_setopt(curl, CURLOPT_URL, call.url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 5'000L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(call.timeout.count()));
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &WriteBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &reply.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &ReadHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &reply);
  if (call.abort != nullptr) {
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, &Progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, call.abort);
  }
  struct curl_slist* headers = nullptr;
  for (const auto& [name, value] : call.headers) {
    headers = curl_slist_append(headers, (name + ": " + value).c_str());
  }
  headers = curl_slist_append(headers, "Accept: application/json");
  if (call.method != "GET") {
    headers = curl_slist_append(headers, "Content-Type: application/json");
    // No "Expect: 100-continue" round trip for larger bodies.
    headers = curl_slist_append(headers, "Expect:");
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, call.method.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, call.body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(call.body.size()));
  } else {
    curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  CURLcode code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  if (code != CURLE_OK) {
    if (code == CURLE_ABORTED_BY_CALLBACK) return Status::Transport("aborted");
    return Status::Transport(std::string(curl_easy_strerror(code)) + " (" + call.method + " " +
                             call.url + ")");
  }
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  reply.status = static_cast<int>(status);
  return reply;
}

std::unique_ptr<HttpConnection> ConnectionPool::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      auto connection = std::move(idle_.back());
      idle_.pop_back();
      return connection;
    }
  }
  return std::make_unique<HttpConnection>();
}

void ConnectionPool::Return(std::unique_ptr<HttpConnection> connection) {
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_.size() < max_idle_) idle_.push_back(std::move(connection));
}

}  // namespace taskengine_client::internal
