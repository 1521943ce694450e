// taskengine-http-bench: the HTTP benchmarks of quality.md §1.
//
//   taskengine-http-bench [p3|p4|p8|all] [--runs N] [--requests N] [--clients N]
//                         [--tokens static|store|both] [--jobs N] [--workers N]
//                         [--slots N] [--finishes batch|each|both] [--executions N]
//                         [--sync full|normal] [--dir PATH]
//
// P3  HTTP dispatch: keep-alive clients, single-job requests, each answered
//     only after its commit.
// P4  remote worker protocol: workers lease batches of up to 100 over HTTP
//     and complete every execution, with the batch finish route and with one
//     complete call per execution; in that mode each worker is an SDK worker
//     with --slots handler threads (8), each completing on its own keep-alive
//     connection, so concurrent completions can share the server's commits.
//     The complete-each workers' connections are driven from one client
//     thread (epoll), as P3's are; the batch finish workers are a thread each.
// P8  GET /api/v1/stats latency with many executions stored vs few: half
//     global, half spread over 100 tenants (the per-tenant breakdown), for a
//     global reader and for a reader bound to one tenant; and the execution
//     search's first page with its total (offset=0) by status.
//
//     P3, and P4 with one complete call per execution, are measured twice:
//     with a token kept in the store, as the server authenticates
//     (StoreAuthenticator: remembered for 10 s, confirmed in each admission's
//     and finish's commit), which is the figure of the target; and with
//     static tokens (held in memory, never confirmed), which only the
//     benchmark has; --tokens store|static runs one of them only. P4 with
//     one finish call per batch uses a token kept in the store.
//
//     --sync normal: a diagnostic, not a P figure. The server's commits are
//     not synced (SQLite synchronous=NORMAL: a power cut may lose what was
//     acknowledged), so the run shows how much of P3 and P4 the durable
//     commit's fdatasync takes; its figures are P3nosync and P4nosync, with no
//     target.
//
// Server and clients share the process and the machine's cores; each figure
// says how many threads each side used.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/accounts.h"
#include "api/api.h"
#include "api/auth.h"
#include "api/http_server.h"
#include "api/store_authenticator.h"
#include "bench_support.h"
#include "engine/engine_internal.h"
#include "http_load.h"
#include "storage/store.h"
#include "taskengine/engine.h"

namespace te = taskengine;
using json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

namespace {

using te::bench::Median;
using te::bench::Percentile;

constexpr const char* kDispatchToken = "bench-dispatch";
constexpr const char* kWorkerToken = "bench-worker";
constexpr const char* kReadToken = "bench-read";
constexpr const char* kTenantReadToken = "bench-tenant-read";
constexpr int kBenchTenants = 100;

struct Args {
  std::string which = "all";
  int runs = 3;
  long requests = 30'000;         // P3 requests per run
  int clients = 32;               // P3 connections
  std::string tokens = "both";    // P3, P4 complete-each authentication: static, store or both
  long jobs = 100'000;            // P4 executions per run
  int workers = 4;                // P4 remote workers
  int slots = 8;                  // P4 complete-each: handler threads per worker
  std::string finishes = "both";  // P4 modes: batch, each or both
  long executions = 5'000'000;    // P8 executions stored
  bool synced = true;             // --sync full (P figures) or normal (a diagnostic)
  std::string dir;
};

const char* SyncText(const Args& args) {
  return args.synced ? "synchronous=FULL" : "synchronous=NORMAL, not synced";
}

// What a summary line of `id` says of an unsynced run ("" for a P figure).
std::string Diagnostic(const Args& args, const char* id) {
  if (args.synced) return "";
  return std::string(" (DIAGNOSTIC: commits not synced, not a ") + id + " figure)";
}

// Figure `id` (its quality.md target when `target` is not 0); with --sync
// normal, the diagnostic figure `<id>nosync`, without a target.
void PrintRunFigure(const Args& args, const std::string& id, const std::string& what,
                    const std::vector<double>& runs, const std::string& unit, double target = 0) {
  if (args.synced) {
    te::bench::PrintFigure(id, what, runs, unit, target != 0 ? ">=" : "-", target);
  } else {
    te::bench::PrintFigure(
        id + "nosync", what + "; commits not synced (synchronous=NORMAL, not durable)", runs, unit);
  }
}

void Check(const te::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
    std::exit(1);
  }
}

// An engine, the API and the HTTP server on a fresh database. In-process
// workers serve only queue "default"; jobs "parked" and "remote" use queues
// no in-process worker takes.
class Server {
 public:
  // With `store_tokens`, requests are authenticated as the server does it:
  // against tokens kept in the store; dispatch_token() and worker_token()
  // are two of them.
  Server(const Args& args, const std::string& name, bool store_tokens = false) {
    std::filesystem::path dir = std::filesystem::path(args.dir) / name;
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    dir_ = dir.string();
    te::EngineOptions o;
    o.database_path = (dir / "bench.db").string();
    o.worker_threads = 1;
    o.sync = args.synced ? te::SyncMode::kFull : te::SyncMode::kNormal;
    o.queues = {{"default", 0, 0}};
    auto e = te::Engine::Open(o);
    if (!e.ok()) Check(e.status(), "open");
    engine_ = std::move(e).value();
    for (const char* job : {"parked", "remote", "parked-tenant"}) {
      te::JobDefinition j;
      j.name = te::JobName(job);
      j.handler = "noop";
      j.queue = std::string(job) == "parked-tenant" ? "parked" : job;
      j.scope =
          std::string(job) == "parked-tenant" ? te::JobScope::kPerTenant : te::JobScope::kGlobal;
      j.lease_ms = 60'000;
      Check(engine_->DefineJob(j), "define");
    }
    Check(engine_->RegisterHandler("noop",
                                   [](te::JobContext&) { return te::HandlerResult::Success(); }),
          "register");
    for (const char* principal : {"bench-dispatcher", "bench-worker", "bench-reader"}) {
      Check(StoreOf(*engine_).Grant(principal, "*"), "grant");
    }
    Check(engine_->Start(), "start");
    auth_.Add(kDispatchToken,
              te::api::Principal::Make("bench-dispatcher", {te::api::Scope::kDispatch}, true));
    auth_.Add(kWorkerToken,
              te::api::Principal::Make("bench-worker", {te::api::Scope::kWorker}, true));
    auth_.Add(kReadToken, te::api::Principal::Make("bench-reader", {te::api::Scope::kRead}, true));
    auth_.Add(kTenantReadToken, te::api::Principal::Make("bench-tenant-reader",
                                                         {te::api::Scope::kRead}, false, {"t000"}));
    te::api::Authenticator* authenticator = &auth_;
    if (store_tokens) {
      store_auth_ = std::make_unique<te::api::StoreAuthenticator>(
          &StoreOf(*engine_), te::api::StoreAuthenticatorOptions{});
      authenticator = store_auth_.get();
      const auto create = [&](const char* name, const char* scope) {
        te::api::NewToken token;
        token.name = name;
        token.scopes = {scope};
        auto created =
            te::api::CreateToken(StoreOf(*engine_), token, te::SystemClock::Get()->NowMillis(),
                                 te::api::AccountActor{"bench", ""});
        Check(created.status(), "token");
        return created->secret;
      };
      dispatch_token_ = create("bench-dispatch", "dispatch");
      worker_token_ = create("bench-worker", "worker");
    }
    api_ = std::make_unique<te::api::Api>(engine_.get(), authenticator, te::api::ApiOptions{});
    http_ = std::make_unique<te::api::HttpServer>(te::api::HttpServerOptions{}, api_->handler(),
                                                  api_->inline_handler());
    Check(http_->Start(), "http start");
  }
  ~Server() {
    http_->Stop(2000);
    engine_->Stop();
    api_.reset();
    engine_.reset();
    std::filesystem::remove_all(dir_);
  }

  int port() const { return http_->port(); }
  const std::string& dispatch_token() const { return dispatch_token_; }
  const std::string& worker_token() const { return worker_token_; }
  te::Engine& engine() { return *engine_; }

  // Admits `n` executions of `job` in batches of 1,000 (not timed); with
  // `tenants` > 0, of `job` for each of that many tenants (t000, t001, ...) in turn.
  void Fill(const std::string& job, long n, int tenants = 0) {
    std::vector<te::DispatchRequest> batch;
    for (long i = 0; i < n;) {
      batch.clear();
      for (int k = 0; k < 1000 && i < n; ++k, ++i) {
        te::DispatchRequest r;
        r.job = te::JobName(job);
        if (tenants > 0) {
          char id[8];
          std::snprintf(id, sizeof id, "t%03d", static_cast<int>(i % tenants));
          r.tenant = te::TenantId(id);
        }
        r.payload_json = "{\"i\":" + std::to_string(i) + "}";
        batch.push_back(std::move(r));
      }
      auto res = engine_->DispatchBatch(batch);
      if (!res.ok()) Check(res.status(), "fill");
    }
  }

 private:
  std::string dir_;
  std::unique_ptr<te::Engine> engine_;
  te::api::StaticTokenAuthenticator auth_;
  std::unique_ptr<te::api::StoreAuthenticator> store_auth_;
  std::string dispatch_token_ = kDispatchToken;
  std::string worker_token_ = kWorkerToken;
  std::unique_ptr<te::api::Api> api_;
  std::unique_ptr<te::api::HttpServer> http_;
};

// P3 runs of one authentication kind: req/s of each run; `cpu` (when set)
// gets what each run cost.
std::vector<double> P3Rates(const Args& args, bool store_tokens,
                            te::bench::CpuSeries* cpu = nullptr) {
  std::vector<double> rates;
  const char* kind = store_tokens ? "store tokens" : "static tokens";
  for (int run = 0; run < args.runs; ++run) {
    Server server(args, "p3", store_tokens);
    const std::string token = server.dispatch_token();
    std::atomic<long> accepted{0};
    const te::bench::CpuMeter meter;
    double seconds = te::bench::RunClosedLoop(
        server.port(), args.clients, args.requests,
        [&token](std::int64_t i) {
          return te::bench::RawRequest("POST", "/api/v1/jobs/parked/dispatch", token,
                                       "{\"payload\":{\"i\":" + std::to_string(i) + "}}");
        },
        [&](std::int64_t, int status, const std::string&) {
          if (status == 202) accepted.fetch_add(1, std::memory_order_relaxed);
        });
    if (seconds < 0 || accepted != args.requests) {
      std::fprintf(stderr, "P3 (%s): %ld of %ld dispatches accepted\n", kind, accepted.load(),
                   args.requests);
      std::exit(1);
    }
    const te::bench::CpuMeter::Cost cost = meter.Per(static_cast<double>(args.requests));
    if (cpu != nullptr) cpu->Add(cost);
    rates.push_back(static_cast<double>(args.requests) / seconds);
    std::printf("  P3 (%s) run %d: %ld dispatches in %.2f s = %.0f req/s; %s\n", kind, run + 1,
                args.requests, seconds, rates.back(),
                te::bench::CpuSeries::Line(cost, "dispatch").c_str());
  }
  return rates;
}

void RunP3(const Args& args) {
  const bool all = args.tokens == "both";
  te::bench::CpuSeries stored_cpu;
  const std::vector<double> stored = all || args.tokens == "store"
                                         ? P3Rates(args, /*store_tokens=*/true, &stored_cpu)
                                         : std::vector<double>{};
  const std::vector<double> fixed = all || args.tokens == "static"
                                        ? P3Rates(args, /*store_tokens=*/false)
                                        : std::vector<double>{};
  std::printf(
      "P3 HTTP dispatch%s: median %.0f req/s (target >= 30,000) with a token kept in the store "
      "(the server's authenticator); %.0f req/s with static tokens. %d keep-alive connections "
      "driven by 1 client thread (epoll), one request in flight each; server 2 I/O + 32 "
      "handler threads; every 202 after its commit (WAL, %s); 0 for a series not run "
      "(--tokens)\n",
      Diagnostic(args, "P3").c_str(), Median(stored), Median(fixed), args.clients, SyncText(args));
  PrintRunFigure(args, "P3",
                 "HTTP single dispatches, " + std::to_string(args.clients) +
                     " keep-alive clients, each 202 after its commit, with a token kept in the "
                     "store (the server's authenticator)",
                 stored, "req/s", 30'000);
  PrintRunFigure(args, "P3",
                 "the same with static tokens (held in memory; only the benchmark "
                 "authenticates so)",
                 fixed, "req/s");
  if (args.synced) {
    stored_cpu.Print("P3cpu", "P3 with a token kept in the store", "dispatch", "req/s");
  }
}

// The executions of a lease answer, as their complete calls need them: the
// answer is parsed whole (any JSON error fails it) without building a
// document; the id and claim_version of each lease are kept.
struct LeasedExecution {
  std::string id;
  std::uint64_t claim_version = 0;
};

class LeaseAnswerReader final : public json::json_sax_t {
 public:
  explicit LeaseAnswerReader(std::vector<LeasedExecution>& out) : out_(out) {}

  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t v) override {
    if (key_ == Key::kClaimVersion && v >= 0) {
      out_.back().claim_version = static_cast<std::uint64_t>(v);
      seen_version_ = true;
    }
    return Value();
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (key_ == Key::kClaimVersion) {
      out_.back().claim_version = v;
      seen_version_ = true;
    }
    return Value();
  }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t& v) override {
    if (key_ == Key::kId) {
      out_.back().id = std::move(v);
      seen_id_ = true;
    }
    return Value();
  }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override {
    ++depth_;
    if (depth_ == 3 && in_leases_) {
      out_.emplace_back();
      seen_id_ = seen_version_ = false;
    }
    key_ = Key::kOther;
    return true;
  }
  bool end_object() override {
    // A lease without an id or a claim version is an answer the worker cannot use.
    if (depth_ == 3 && in_leases_ && (!seen_id_ || !seen_version_)) return false;
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth_;
    if (depth_ == 2 && key_ == Key::kLeases) {
      in_leases_ = true;
      found_leases_ = true;
    }
    key_ = Key::kOther;
    return true;
  }
  bool end_array() override {
    if (depth_ == 2) in_leases_ = false;
    --depth_;
    return true;
  }
  bool key(string_t& k) override {
    key_ = Key::kOther;
    if (depth_ == 1 && k == "leases") key_ = Key::kLeases;
    if (depth_ == 3 && in_leases_ && k == "id") key_ = Key::kId;
    if (depth_ == 3 && in_leases_ && k == "claim_version") key_ = Key::kClaimVersion;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

  bool found_leases() const { return found_leases_; }

 private:
  enum class Key { kOther, kLeases, kId, kClaimVersion };
  bool Value() {
    key_ = Key::kOther;
    return true;
  }

  std::vector<LeasedExecution>& out_;
  int depth_ = 0;
  Key key_ = Key::kOther;
  bool in_leases_ = false;
  bool found_leases_ = false;
  bool seen_id_ = false;
  bool seen_version_ = false;
};

// Appends the leases of a lease answer to `out`; false when it is not one.
bool ReadLeaseAnswer(const std::string& body, std::vector<LeasedExecution>& out) {
  const std::size_t before = out.size();
  LeaseAnswerReader reader(out);
  if (!json::sax_parse(body, &reader) || !reader.found_leases()) {
    out.resize(before);
    return false;
  }
  return true;
}

// P4 with one complete call per execution: `workers` remote workers, each
// an SDK worker with `slots` handler threads: it leases up to 100 on its
// lease connection, and its handlers run (a no-op) and complete the
// executions of the batch, each on its own keep-alive connection, so up to
// `slots` complete calls of each worker are in flight at once; the next
// lease when the batch is done. All the connections are driven from one
// thread (epoll), as P3's clients are. Seconds taken, or negative (with a
// message) on an error.
double RunCompletingWorkers(int port, const std::string& token, int workers, int slots, long jobs) {
  struct Worker {
    std::string lease_request;
    std::vector<LeasedExecution> batch;
    std::size_t next = 0;  // the batch's next execution to complete
    long left = 0;         // executions of the batch not completed yet
    bool leasing = false;
  };
  std::vector<Worker> list(static_cast<std::size_t>(workers));
  for (int w = 0; w < workers; ++w) {
    list[w].lease_request =
        te::bench::RawRequest("POST", "/api/v1/worker/lease", token,
                              json{{"worker_id", "bench-worker-" + std::to_string(w)},
                                   {"queues", {"remote"}},
                                   {"max", 100},
                                   {"wait_ms", 200}}
                                  .dump());
  }
  const int per_worker = slots + 1;  // connection 0 of each worker leases
  long leased = 0;
  long completed = 0;
  return te::bench::RunConnections(
      port, workers * per_worker,
      [&](int c) -> std::optional<std::string> {
        Worker& w = list[c / per_worker];
        if (c % per_worker == 0) {
          if (w.leasing || w.left > 0 || leased >= jobs) return std::nullopt;
          w.leasing = true;
          return w.lease_request;
        }
        if (w.next >= w.batch.size()) return std::nullopt;
        const LeasedExecution& e = w.batch[w.next++];
        return te::bench::RawRequest("POST", "/api/v1/worker/executions/" + e.id + "/complete",
                                     token,
                                     "{\"claim_version\":" + std::to_string(e.claim_version) + "}");
      },
      [&](int c, int status, const std::string& body) {
        Worker& w = list[c / per_worker];
        const char* what = c % per_worker == 0 ? "lease" : "complete";
        if (status != 200) {
          std::fprintf(stderr, "%s: %d %s\n", what, status, body.c_str());
          return false;
        }
        if (c % per_worker != 0) {
          --w.left;
          ++completed;
          return true;
        }
        w.leasing = false;
        w.batch.clear();
        w.next = 0;
        if (!ReadLeaseAnswer(body, w.batch)) {
          std::fprintf(stderr, "lease: not a lease answer: %s\n", body.c_str());
          return false;
        }
        w.left = static_cast<long>(w.batch.size());
        leased += w.left;
        return true;
      },
      [&] { return completed >= jobs; });
}

// One remote worker of the batch finish mode: lease up to 100, finish them
// in one call, until `remaining` reaches zero.
void RemoteWorker(int port, const std::string& token, int index, std::atomic<long>& remaining,
                  std::atomic<long>& completed, std::atomic<bool>& failed) {
  te::bench::BlockingConnection conn(port);
  const std::string worker_id = "bench-worker-" + std::to_string(index);
  const std::string lease_body =
      json{{"worker_id", worker_id}, {"queues", {"remote"}}, {"max", 100}, {"wait_ms", 200}}.dump();
  while (remaining.load() > 0 && !failed) {
    te::bench::HttpReply lease = conn.Request("POST", "/api/v1/worker/lease", token, lease_body);
    if (lease.status != 200) {
      std::fprintf(stderr, "lease: %d %s\n", lease.status, lease.body.c_str());
      failed = true;
      return;
    }
    json leases = json::parse(lease.body)["leases"];
    if (leases.empty()) continue;
    json items = json::array();
    for (const json& l : leases) {
      items.push_back(
          {{"id", l["id"]}, {"claim_version", l["claim_version"]}, {"kind", "complete"}});
    }
    te::bench::HttpReply fin =
        conn.Request("POST", "/api/v1/worker/finish", token, json{{"items", items}}.dump());
    if (fin.status != 200) {
      std::fprintf(stderr, "finish: %d %s\n", fin.status, fin.body.c_str());
      failed = true;
      return;
    }
    completed += static_cast<long>(leases.size());
    remaining -= static_cast<long>(leases.size());
  }
}

// P4 runs of one mode and authentication kind: jobs/s of each run; `cpu`
// (when set) gets what each run cost.
std::vector<double> P4Rates(const Args& args, bool batch_finish, bool store_tokens,
                            te::bench::CpuSeries* cpu = nullptr) {
  std::vector<double> rates;
  const std::string kind = std::string(batch_finish ? "batch finish" : "complete each") + ", " +
                           (store_tokens ? "store tokens" : "static tokens");
  for (int run = 0; run < args.runs; ++run) {
    Server server(args, "p4", store_tokens);
    server.Fill("remote", args.jobs);
    double seconds = 0;
    const te::bench::CpuMeter meter;
    if (batch_finish) {
      std::atomic<long> remaining{args.jobs};
      std::atomic<long> completed{0};
      std::atomic<bool> failed{false};
      auto t0 = SteadyClock::now();
      std::vector<std::thread> workers;
      for (int w = 0; w < args.workers; ++w) {
        workers.emplace_back(RemoteWorker, server.port(), std::cref(server.worker_token()), w,
                             std::ref(remaining), std::ref(completed), std::ref(failed));
      }
      for (auto& t : workers) t.join();
      seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
      if (failed || completed != args.jobs) {
        std::fprintf(stderr, "P4 (%s): completed %ld of %ld\n", kind.c_str(), completed.load(),
                     args.jobs);
        std::exit(1);
      }
    } else {
      seconds = RunCompletingWorkers(server.port(), server.worker_token(), args.workers, args.slots,
                                     args.jobs);
      if (seconds < 0) {
        std::fprintf(stderr, "P4 (%s): failed\n", kind.c_str());
        std::exit(1);
      }
    }
    const te::bench::CpuMeter::Cost cost = meter.Per(static_cast<double>(args.jobs));
    if (cpu != nullptr) cpu->Add(cost);
    rates.push_back(static_cast<double>(args.jobs) / seconds);
    std::printf("  P4 (%s) run %d: %ld executions in %.2f s = %.0f jobs/s; %s\n", kind.c_str(),
                run + 1, args.jobs, seconds, rates.back(),
                te::bench::CpuSeries::Line(cost, "execution").c_str());
  }
  return rates;
}

// P4's targets are measured as the server authenticates (a worker token kept
// in the store); one complete call per execution is also measured with
// static tokens (--tokens picks one kind for that mode; --finishes one mode).
void RunP4(const Args& args) {
  const std::string common = std::to_string(args.workers) + " remote workers";
  const std::string slots = ", " + std::to_string(args.slots) + " handler threads each";
  const std::string server = "leases of up to 100; server 2 I/O + 32 handler threads";
  const std::string batch_clients = "one client thread and keep-alive connection per worker";
  const std::string each_clients =
      "a keep-alive connection per worker and per handler, all driven by 1 client thread (epoll)";
  if (args.finishes != "each") {
    const std::vector<double> batch = P4Rates(args, /*batch_finish=*/true, /*store_tokens=*/true);
    std::printf(
        "P4 remote workers, one finish call per leased batch, worker token kept in the store%s: "
        "median %.0f jobs/s (target >= 20,000). %s, %s, %s; commits %s\n",
        Diagnostic(args, "P4").c_str(), Median(batch), common.c_str(), batch_clients.c_str(),
        server.c_str(), SyncText(args));
    PrintRunFigure(args, "P4",
                   common + ", leases of 100, one finish call per batch, a token kept in the store",
                   batch, "jobs/s", 20'000);
  }
  if (args.finishes == "batch") return;
  const bool all = args.tokens == "both";
  te::bench::CpuSeries stored_cpu;
  const std::vector<double> stored = all || args.tokens == "store"
                                         ? P4Rates(args, false, /*store_tokens=*/true, &stored_cpu)
                                         : std::vector<double>{};
  const std::vector<double> fixed = all || args.tokens == "static"
                                        ? P4Rates(args, false, /*store_tokens=*/false)
                                        : std::vector<double>{};
  std::printf(
      "P4 remote workers, one complete call per execution%s: median %.0f jobs/s (target >= "
      "15,000) with a worker token kept in the store; %.0f jobs/s with static tokens. %s%s, "
      "%s, %s; commits %s; 0 for a series not run (--tokens)\n",
      Diagnostic(args, "P4").c_str(), Median(stored), Median(fixed), common.c_str(), slots.c_str(),
      each_clients.c_str(), server.c_str(), SyncText(args));
  PrintRunFigure(args, "P4",
                 common + slots +
                     ", leases of 100, one complete call per execution, a token kept in the "
                     "store (the server's authenticator)",
                 stored, "jobs/s", 15'000);
  PrintRunFigure(args, "P4",
                 common + slots +
                     ", one complete call per execution, static tokens (held in memory; only "
                     "the benchmark authenticates so)",
                 fixed, "jobs/s");
  if (args.synced) {
    stored_cpu.Print("P4cpu",
                     "P4 with one complete call per execution and a token kept in the store",
                     "execution", "jobs/s");
  }
}

// Latencies of `samples` GET `target` with `token`, in milliseconds.
std::vector<double> StatsLatencies(int port, int samples, const char* target = "/api/v1/stats",
                                   const char* token = kReadToken) {
  te::bench::BlockingConnection conn(port);
  std::vector<double> ms;
  for (int i = 0; i < samples; ++i) {
    auto t0 = SteadyClock::now();
    te::bench::HttpReply r = conn.Request("GET", target, token);
    ms.push_back(std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count());
    if (r.status != 200) {
      std::fprintf(stderr, "stats: %d %s\n", r.status, r.body.c_str());
      std::exit(1);
    }
  }
  return ms;
}

void RunP8(const Args& args) {
  const int kSamples = 1000;
  std::vector<double> small;
  std::vector<double> large;
  std::vector<double> tenant;
  std::vector<double> search;
  {
    Server server(args, "p8-small");
    server.Fill("parked", 500);
    server.Fill("parked-tenant", 500, kBenchTenants);
    small = StatsLatencies(server.port(), kSamples);
  }
  {
    Server server(args, "p8-large");
    auto t0 = SteadyClock::now();
    server.Fill("parked", args.executions / 2);
    server.Fill("parked-tenant", args.executions - args.executions / 2, kBenchTenants);
    std::printf("  P8: stored %ld executions (half over %d tenants) in %.1f s\n", args.executions,
                kBenchTenants, std::chrono::duration<double>(SteadyClock::now() - t0).count());
    large = StatsLatencies(server.port(), kSamples);
    tenant = StatsLatencies(server.port(), kSamples, "/api/v1/stats", kTenantReadToken);
    search = StatsLatencies(server.port(), 100, "/api/v1/executions?status=queued&offset=0",
                            kTenantReadToken);
  }
  std::printf(
      "P8 GET /api/v1/stats for a reader bound to one tenant, with %ld executions: p50 %.3f ms, "
      "p99 %.3f ms; GET /api/v1/executions?status=queued&offset=0 (page and exact total) for it: "
      "p50 %.3f ms, p99 %.3f ms\n",
      args.executions, Percentile(tenant, 0.5), Percentile(tenant, 0.99), Percentile(search, 0.5),
      Percentile(search, 0.99));
  std::printf(
      "P8 GET /api/v1/stats, %d samples over one keep-alive connection: with %ld "
      "executions p50 %.3f ms, p99 %.3f ms (target p99 < 50 ms); with 1,000 executions "
      "p50 %.3f ms, p99 %.3f ms; ratio of p99s %.2f\n",
      kSamples, args.executions, Percentile(large, 0.5), Percentile(large, 0.99),
      Percentile(small, 0.5), Percentile(small, 0.99),
      Percentile(large, 0.99) / std::max(1e-9, Percentile(small, 0.99)));
  const std::string stored = std::to_string(args.executions) + " executions";
  te::bench::PrintFigure("P8", "GET /api/v1/stats p99, " + stored, {Percentile(large, 0.99)}, "ms",
                         "<=", 50);
  te::bench::PrintFigure("P8", "GET /api/v1/stats p99, one tenant's reader, " + stored,
                         {Percentile(tenant, 0.99)}, "ms", "<=", 50);
  te::bench::PrintFigure("P8", "first page of queued executions with total p99, " + stored,
                         {Percentile(search, 0.99)}, "ms");
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", s.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (s == "--runs") {
      a.runs = std::max(1, std::stoi(value()));
    } else if (s == "--requests") {
      a.requests = std::max(1L, std::stol(value()));
    } else if (s == "--clients") {
      a.clients = std::max(1, std::stoi(value()));
    } else if (s == "--jobs") {
      a.jobs = std::max(1L, std::stol(value()));
    } else if (s == "--workers") {
      a.workers = std::max(1, std::stoi(value()));
    } else if (s == "--slots") {
      a.slots = std::max(1, std::stoi(value()));
    } else if (s == "--executions") {
      a.executions = std::max(1L, std::stol(value()));
    } else if (s == "--tokens") {
      a.tokens = value();
      if (a.tokens != "static" && a.tokens != "store" && a.tokens != "both") {
        std::fprintf(stderr, "--tokens: static, store or both\n");
        std::exit(2);
      }
    } else if (s == "--finishes") {
      a.finishes = value();
      if (a.finishes != "batch" && a.finishes != "each" && a.finishes != "both") {
        std::fprintf(stderr, "--finishes: batch, each or both\n");
        std::exit(2);
      }
    } else if (s == "--sync") {
      const std::string v = value();
      if (v != "full" && v != "normal") {
        std::fprintf(stderr, "--sync: full or normal\n");
        std::exit(2);
      }
      a.synced = v == "full";
    } else if (s == "--dir") {
      a.dir = value();
    } else if (s == "p3" || s == "p4" || s == "p8" || s == "all") {
      a.which = s;
    } else {
      std::fprintf(stderr,
                   "usage: taskengine-http-bench [p3|p4|p8|all] [--runs N] [--requests N] "
                   "[--clients N] [--tokens static|store|both]\n"
                   "       [--jobs N] [--workers N] [--slots N] [--finishes batch|each|both]\n"
                   "       [--executions N] [--sync full|normal] [--dir PATH]\n");
      std::exit(2);
    }
  }
  if (!a.synced && a.which != "p3" && a.which != "p4") {
    std::fprintf(stderr, "--sync normal: only with p3 or p4 (a diagnostic of their commits)\n");
    std::exit(2);
  }
  if (a.dir.empty())
    a.dir = (std::filesystem::temp_directory_path() / "taskengine-http-bench").string();
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  Args args = Parse(argc, argv);
  std::printf("taskengine-http-bench: %u hardware threads; runs per figure: %d\n",
              std::thread::hardware_concurrency(), args.runs);
  if (args.which == "p3" || args.which == "all") RunP3(args);
  if (args.which == "p4" || args.which == "all") RunP4(args);
  if (args.which == "p8" || args.which == "all") RunP8(args);
  return 0;
}
