// libFuzzer target for the HTTP front door (RD17, X3: "nothing a client sends
// can crash the server").
//
// Each input is the raw bytes of one HTTP/1.1 request. They go through Beast's
// request parser with the limits HttpServer uses by default (header 16 KiB,
// body 1 MiB; HttpServerOptions), exactly as http_server.cc configures it; a
// request that parses is turned into an api::HttpRequest the way the server
// builds one, checked by CheckRequestHead as the server checks every head
// (a refused head stops there), and handed to the real Router of an Api over an engine on a
// temporary SQLite database. The StaticTokenAuthenticator knows one token,
// "fuzz-token" (in the dictionary and the seeds), held by a global principal
// with every scope, so bodies get past authentication and into the JSON
// parsing and validation of every route.
//
// Checked on every input: no crash, no sanitizer report, no hang; every
// response that arrives synchronously has a status in 100..599 and a JSON
// error body for 4xx/5xx. (Long-poll routes may answer later, on another
// thread; their responses are checked the same way when they come.)
#include <algorithm>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "api/api.h"
#include "api/auth.h"
#include "api/http_server.h"
#include "api/http_types.h"
#include "api/request_checks.h"
#include "taskengine/engine.h"
#include "taskengine/status.h"

namespace {

namespace http = boost::beast::http;
using taskengine::api::HttpRequest;
using taskengine::api::HttpResponse;

constexpr std::string_view kToken = "fuzz-token";

void CheckResponse(const HttpResponse& response) {
  TE_CHECK(response.status >= 100 && response.status <= 599);
  if (response.status >= 400 && response.content_type == "application/json") {
    const auto body = nlohmann::json::parse(response.body, nullptr, /*allow_exceptions=*/false);
    TE_CHECK(body.is_object() && body.contains("error"));
  }
}

// The fixture's scratch directory, removed when the process exits.
std::filesystem::path* scratch_dir = nullptr;

void RemoveScratchDir() {
  std::error_code ec;
  if (scratch_dir != nullptr) std::filesystem::remove_all(*scratch_dir, ec);
}

// One engine, authenticator and Api for the whole run (opening SQLite per input
// would be far too slow). Never destroyed: the process exits at the end.
struct Fixture {
  std::filesystem::path dir;
  std::unique_ptr<taskengine::Engine> engine;
  taskengine::api::StaticTokenAuthenticator auth;
  std::unique_ptr<taskengine::api::Api> api;
  taskengine::api::HttpServerOptions limits;  // the server's defaults

  Fixture() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "te-http-fuzz-XXXXXX").string();
    TE_CHECK(mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
    scratch_dir = &dir;
    std::atexit(RemoveScratchDir);
    taskengine::EngineOptions options;
    options.database_path = (dir / "fuzz.db").string();
    options.sync = taskengine::SyncMode::kNormal;
    options.worker_threads = 0;
    options.run_sweeper = false;
    auto opened = taskengine::Engine::Open(options);
    TE_CHECK(opened.ok());
    engine = std::move(opened).value();
    for (const char* name : {"demo", "report.daily"}) {
      taskengine::JobDefinition job;
      job.name = taskengine::JobName(name);
      job.handler = "noop";
      job.lane_template = std::string(name) == "demo" ? "" : "lane:{id}";
      TE_CHECK(engine->DefineJob(job).ok());
    }
    using taskengine::api::Scope;
    auth.Add(kToken,
             taskengine::api::Principal::Make(
                 "fuzzer",
                 {Scope::kAdmin, Scope::kOperate, Scope::kDispatch, Scope::kRead, Scope::kWorker},
                 /*all_tenants=*/true));
    api =
        std::make_unique<taskengine::api::Api>(engine.get(), &auth, taskengine::api::ApiOptions{});
  }
};

Fixture& GetFixture() {
  static Fixture* fixture = new Fixture();
  return *fixture;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The HttpRequest the server would build from a parsed message (see
// Session::BuildRequest in src/api/http_server.cc).
HttpRequest ToRequest(http::request<http::string_body>& msg) {
  HttpRequest req;
  req.method_name = std::string(msg.method_string());
  req.method = taskengine::api::ParseHttpMethod(req.method_name);
  req.SetTarget(std::string(msg.target()));
  for (const auto& field : msg) {
    const auto name = field.name_string();
    req.headers.emplace_back(Lower(std::string_view(name.data(), name.size())),
                             std::string(field.value()));
  }
  req.body = std::move(msg.body());
  req.remote_address = "127.0.0.1:40000";
  return req;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Fixture& f = GetFixture();
  http::request_parser<http::string_body> parser;
  parser.header_limit(static_cast<std::uint32_t>(f.limits.max_header_bytes));
  parser.body_limit(f.limits.max_body_bytes);
  parser.eager(true);

  boost::beast::error_code ec;
  std::size_t offset = 0;
  while (offset < size && !parser.is_done()) {
    const std::size_t used = parser.put(boost::asio::buffer(data + offset, size - offset), ec);
    if (ec == http::error::need_more) {
      ec = {};
      if (used == 0) break;
    }
    if (ec) return 0;  // the server answers 400/413/431 and closes
    offset += used;
    if (used == 0) break;
  }
  if (!parser.is_done()) {
    // The client closed. As in Beast's read: end_of_stream when nothing
    // arrived, else put_eof completes the message only if its framing allows.
    if (!parser.got_some()) return 0;
    parser.put_eof(ec);
    if (ec || !parser.is_done()) return 0;
  }

  // The checks the server makes on the head before it reads the body
  // (request_checks.h); a refused head never reaches the router.
  {
    const auto& msg = parser.get();
    taskengine::api::RequestHead head;
    head.version = msg.version();
    head.method = std::string_view(msg.method_string().data(), msg.method_string().size());
    head.target = std::string_view(msg.target().data(), msg.target().size());
    for (const auto& field : msg) {
      head.fields.emplace_back(
          std::string_view(field.name_string().data(), field.name_string().size()),
          std::string_view(field.value().data(), field.value().size()));
    }
    static const taskengine::api::HostAllowlist hosts("127.0.0.1", {"fuzz.example"});
    if (std::optional<taskengine::api::HeadProblem> problem =
            taskengine::api::CheckRequestHead(head, hosts)) {
      TE_CHECK(problem->status == 400 || problem->status == 403 || problem->status == 421 ||
               problem->status == 501);
      TE_CHECK(!problem->code.empty() && !problem->message.empty());
      return 0;
    }
  }
  HttpRequest request = ToRequest(parser.get());
  // Captures nothing: a long-poll route may answer after this call returned.
  taskengine::api::Responder responder([](HttpResponse response) {
    CheckResponse(response);
    // TE_FUZZ_VERBOSE=1 shows what each input came to (for curating seeds).
    static const bool verbose = std::getenv("TE_FUZZ_VERBOSE") != nullptr;
    if (verbose) std::fprintf(stderr, "-> %d %.200s\n", response.status, response.body.c_str());
  });
  f.api->handler()(std::move(request), responder);
  return 0;
}
