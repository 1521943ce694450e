// /metrics (product.md I5): every family appears once with the right TYPE,
// the whole output is valid Prometheus text exposition (format 0.0.4), and
// each counter moves when its event happens: a permanent failure, a stale
// worker call, an already_done reservation, a sweep of an expired lease, a
// cancel, and a scheduler cycle that skips fires (on a FakeClock).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "api/metrics.h"
#include "api_harness.h"
#include "engine/scheduler.h"
#include "storage/sqlite/sqlite_store.h"
#include "storage/store.h"
#include "testing_support/test_util.h"

namespace taskengine::api::testing {
namespace {

using nlohmann::json;

// --- a strict reader of the exposition format ------------------------------------------------

struct Exposition {
  std::map<std::string, std::string> types;  // family -> counter|gauge|histogram
  std::map<std::string, double> samples;     // "name{labels}" exactly as written -> value
};

bool IsMetricName(std::string_view s) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool ok = std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':' ||
                    (i > 0 && std::isdigit(static_cast<unsigned char>(c)));
    if (!ok) return false;
  }
  return true;
}

bool IsLabelName(std::string_view s) {
  return IsMetricName(s) && s.find(':') == std::string_view::npos;
}

// Checks "{a=\"x\",b=\"y\"}" (escapes \\ \" \n only). Returns the label map.
bool ParseLabels(std::string_view s, std::map<std::string, std::string>* labels) {
  if (s.empty()) return true;
  if (s.front() != '{' || s.back() != '}') return false;
  std::size_t i = 1;
  while (i < s.size() - 1) {
    const std::size_t eq = s.find('=', i);
    if (eq == std::string_view::npos) return false;
    const std::string name(s.substr(i, eq - i));
    if (!IsLabelName(name) || labels->count(name) > 0) return false;
    if (eq + 1 >= s.size() || s[eq + 1] != '"') return false;
    std::string value;
    std::size_t j = eq + 2;
    for (; j < s.size() - 1 && s[j] != '"'; ++j) {
      if (s[j] == '\\') {
        ++j;
        if (s[j] != '\\' && s[j] != '"' && s[j] != 'n') return false;
        value += s[j] == 'n' ? '\n' : s[j];
      } else {
        value += s[j];
      }
    }
    if (j >= s.size() - 1) return false;  // unterminated value
    (*labels)[name] = value;
    i = j + 1;
    if (s[i] == ',') {
      ++i;
    } else if (i != s.size() - 1) {
      return false;
    }
  }
  return true;
}

// The family a sample belongs to: histograms own _bucket, _sum and _count.
std::string FamilyOf(const std::string& name, const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string sx(suffix);
    if (name.size() > sx.size() && name.compare(name.size() - sx.size(), sx.size(), sx) == 0) {
      const std::string base = name.substr(0, name.size() - sx.size());
      auto it = types.find(base);
      if (it != types.end() && it->second == "histogram") return base;
    }
  }
  return name;
}

::testing::AssertionResult Parse(const std::string& text, Exposition* out) {
  if (text.empty() || text.back() != '\n') {
    return ::testing::AssertionFailure() << "output must end with a newline";
  }
  std::istringstream lines(text);
  std::string current;  // the family whose samples may follow
  std::set<std::string> finished;
  std::set<std::string> helped;
  std::map<std::string, std::vector<std::pair<double, double>>> buckets;  // family -> (le, count)
  int n = 0;
  for (std::string line; std::getline(lines, line);) {
    ++n;
    auto fail = [&]() {
      return ::testing::AssertionFailure() << "line " << n << ": " << line << ": ";
    };
    if (line.empty()) return fail() << "empty line";
    if (line.rfind("# HELP ", 0) == 0) {
      const std::string rest = line.substr(7);
      const std::string name = rest.substr(0, rest.find(' '));
      if (!IsMetricName(name)) return fail() << "bad family name";
      if (!helped.insert(name).second) return fail() << "second HELP";
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream in(line.substr(7));
      std::string name, type, extra;
      in >> name >> type >> extra;
      if (!IsMetricName(name) || !extra.empty()) return fail() << "malformed TYPE";
      if (type != "counter" && type != "gauge" && type != "histogram") {
        return fail() << "unexpected type " << type;
      }
      if (out->types.count(name) > 0) return fail() << "second TYPE for " << name;
      if (type == "counter" && name.size() > 6 && name.compare(name.size() - 6, 6, "_total") != 0) {
        return fail() << "counter names end in _total";
      }
      if (!current.empty()) finished.insert(current);
      out->types[name] = type;
      current = name;
      continue;
    }
    if (line[0] == '#') return fail() << "unknown comment";
    // name{labels} value
    const std::size_t space = line.rfind(' ');
    if (space == std::string::npos) return fail() << "no value";
    const std::string series = line.substr(0, space);
    const std::string value_text = line.substr(space + 1);
    const std::size_t brace = series.find('{');
    const std::string name = series.substr(0, brace);
    std::map<std::string, std::string> labels;
    if (!IsMetricName(name)) return fail() << "bad metric name";
    if (brace != std::string::npos && !ParseLabels(series.substr(brace), &labels)) {
      return fail() << "bad labels";
    }
    double value = 0;
    if (value_text == "+Inf") {
      value = INFINITY;
    } else if (value_text == "-Inf") {
      value = -INFINITY;
    } else if (value_text == "NaN") {
      value = NAN;
    } else {
      char* end = nullptr;
      value = std::strtod(value_text.c_str(), &end);
      if (value_text.empty() || *end != '\0') return fail() << "bad value";
    }
    const std::string family = FamilyOf(name, out->types);
    if (out->types.count(family) == 0) return fail() << "sample before its TYPE";
    if (family != current) return fail() << "sample of " << family << " outside its family block";
    if (finished.count(family) > 0) return fail() << "family split";
    const std::string& type = out->types[family];
    if (type == "counter" && value < 0) return fail() << "negative counter";
    if (type == "histogram" && name == family + "_bucket") {
      if (labels.count("le") == 0) return fail() << "bucket without le";
      const std::string& le = labels["le"];
      buckets[family].push_back(
          {le == "+Inf" ? INFINITY : std::strtod(le.c_str(), nullptr), value});
    }
    if (!out->samples.emplace(series, value).second) return fail() << "duplicate series";
  }
  for (const auto& [family, type] : out->types) {
    if (helped.count(family) == 0) return ::testing::AssertionFailure() << family << " has no HELP";
    if (type != "histogram") continue;
    const auto& b = buckets[family];
    if (b.empty() || !std::isinf(b.back().first)) {
      return ::testing::AssertionFailure() << family << ": the last bucket must be +Inf";
    }
    for (std::size_t i = 1; i < b.size(); ++i) {
      if (b[i].first <= b[i - 1].first || b[i].second < b[i - 1].second) {
        return ::testing::AssertionFailure() << family << ": buckets must be cumulative";
      }
    }
    auto count = out->samples.find(family + "_count");
    if (count == out->samples.end() || count->second != b.back().second) {
      return ::testing::AssertionFailure() << family << ": _count must equal the +Inf bucket";
    }
    if (out->samples.count(family + "_sum") == 0) {
      return ::testing::AssertionFailure() << family << ": no _sum";
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(ExpositionReaderTest, RejectsWhatPrometheusRejects) {
  Exposition e;
  EXPECT_TRUE(Parse("# HELP a_total x\n# TYPE a_total counter\na_total{k=\"v\\\"\"} 1\n", &e));
  for (const char* bad : {
           "# HELP a x\n# TYPE a gauge\na 1",                         // no final newline
           "# HELP a x\n# TYPE a gauge\n# TYPE a gauge\na 1\n",       // two TYPEs
           "# HELP a x\n# TYPE a gauge\n1a 1\n",                      // bad name
           "# HELP a x\n# TYPE a gauge\na{k=v} 1\n",                  // unquoted label
           "# HELP a x\n# TYPE a gauge\na one\n",                     // bad value
           "b 1\n",                                                   // no TYPE
           "# HELP a_total x\n# TYPE a_total counter\na_total -1\n",  // negative counter
           "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\n"
           "h_sum 1\nh_count 1\n",  // not cumulative
       }) {
    Exposition x;
    EXPECT_FALSE(Parse(bad, &x)) << bad;
  }
}

// --- the API's /metrics -----------------------------------------------------------------------

JobDefinition RemoteJob(const std::string& name, Millis lease_ms, const std::string& queue) {
  JobDefinition job;
  job.name = JobName(name);
  job.handler = "command";
  job.queue = queue;
  job.scope = JobScope::kGlobal;
  job.lease_ms = lease_ms;
  job.timeout_ms = 60'000;
  job.config_json = R"({"argv":["/bin/true"]})";
  job.retry.max_attempts = 5;
  job.retry.backoff_base_ms = 20;
  job.retry.backoff_cap_ms = 40;
  return job;
}

class ApiMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    harness_ = std::make_unique<ApiHarness>();
    ASSERT_OK(harness_->Start());
    // Queues no in-process worker takes: only this test's remote worker leases them.
    ASSERT_OK(harness_->engine().DefineJob(RemoteJob("remote", 30'000, "remote")));
    ASSERT_OK(harness_->engine().DefineJob(RemoteJob("short", 300, "short")));
    client_ = std::make_unique<TestClient>(harness_->port());
  }

  Exposition Scrape() {
    ClientResponse r = client_->Get("/metrics", kReader);
    EXPECT_EQ(r.status, 200) << r.body;
    Exposition e;
    EXPECT_TRUE(Parse(r.body, &e)) << r.body;
    return e;
  }
  double Value(const std::string& series) {
    Exposition e = Scrape();
    auto it = e.samples.find(series);
    EXPECT_NE(it, e.samples.end()) << "no series " << series;
    return it == e.samples.end() ? -1 : it->second;
  }
  // Waits until `series` reaches at least `at_least`.
  bool WaitFor(const std::string& series, double at_least) {
    return WaitUntil([&] { return Value(series) >= at_least; });
  }

  std::int64_t Dispatch(const std::string& job, const std::string& tenant = "") {
    DispatchRequest r;
    r.job = JobName(job);
    r.tenant = TenantId(tenant);
    r.requester = "test";
    auto d = harness_->engine().Dispatch(r);
    EXPECT_OK(d);
    return d.ok() ? d->id.value : 0;
  }
  json LeaseOne(const std::string& queue) {
    json body = {{"worker_id", "metrics-w"}, {"queues", {queue}}, {"max", 1}, {"wait_ms", 5000}};
    ClientResponse r = client_->Post("/api/v1/worker/lease", kWorker, body);
    EXPECT_EQ(r.status, 200) << r.body;
    json leases = r.json()["leases"];
    EXPECT_EQ(leases.size(), 1u) << r.body;
    return leases.empty() ? json::object() : leases[0];
  }
  static std::string W(const json& lease, const std::string& rest) {
    return "/api/v1/worker/executions/" + lease["id"].get<std::string>() + "/" + rest;
  }
  static json CV(const json& lease, json extra = json::object()) {
    extra["claim_version"] = lease["claim_version"];
    return extra;
  }

  std::unique_ptr<ApiHarness> harness_;
  std::unique_ptr<TestClient> client_;
};

TEST_F(ApiMetricsTest, EveryFamilyAppearsOnceWithItsType) {
  Exposition e = Scrape();
  const std::map<std::string, std::string> expected = {
      {"taskengine_queue_depth", "gauge"},
      {"taskengine_queue_running", "gauge"},
      {"taskengine_queue_oldest_age_seconds", "gauge"},
      {"taskengine_executions", "gauge"},
      {"taskengine_executions_ended_24h", "gauge"},
      {"taskengine_quarantine_oldest_age_seconds", "gauge"},
      {"taskengine_tenant_executions_ended_24h", "gauge"},
      {"taskengine_claims_total", "counter"},
      {"taskengine_handler_successes_total", "counter"},
      {"taskengine_handler_failures_total", "counter"},
      {"taskengine_completions_total", "counter"},
      {"taskengine_failures_total", "counter"},
      {"taskengine_lease_expirations_total", "counter"},
      {"taskengine_stale_rejections_total", "counter"},
      {"taskengine_effect_duplicates_prevented_total", "counter"},
      {"taskengine_leases_released_total", "counter"},
      {"taskengine_outcomes_published_total", "counter"},
      {"taskengine_cancel_latency_seconds", "histogram"},
  };
  EXPECT_EQ(e.types, expected);
  for (const char* cls : {"retryable", "permanent", "ambiguous", "unsupported_schema"}) {
    for (const char* source : {"in_process", "remote"}) {
      EXPECT_EQ(e.samples.count(std::string("taskengine_failures_total{class=\"") + cls +
                                "\",source=\"" + source + "\"}"),
                1u)
          << cls << " " << source;
    }
  }
  EXPECT_EQ(e.samples.count("taskengine_failures_total{class=\"lease_expiry\",source=\"sweeper\"}"),
            1u);
  EXPECT_EQ(e.samples.count("taskengine_cancel_latency_seconds_bucket{le=\"+Inf\"}"), 1u);
  EXPECT_EQ(e.samples.count("taskengine_cancel_latency_seconds_bucket{le=\"0.01\"}"), 1u);
  EXPECT_EQ(e.samples.count("taskengine_cancel_latency_seconds_bucket{le=\"30\"}"), 1u);
}

TEST_F(ApiMetricsTest, APermanentFailureCountsByClass) {
  const std::string series = "taskengine_failures_total{class=\"permanent\",source=\"in_process\"}";
  const double before = Value(series);
  EXPECT_EQ(Value("taskengine_quarantine_oldest_age_seconds"), 0);
  harness_->WaitForStatus(Dispatch("poison", "a"), "quarantined");
  EXPECT_TRUE(WaitFor(series, before + 1));
  // The quarantine gauges: the age (real clock here, so only its presence and
  // bound) and the tenant's outcomes of the last 24 hours.
  Exposition e = Scrape();
  ASSERT_EQ(e.samples.count("taskengine_quarantine_oldest_age_seconds"), 1u);
  EXPECT_GE(e.samples["taskengine_quarantine_oldest_age_seconds"], 0);
  EXPECT_LT(e.samples["taskengine_quarantine_oldest_age_seconds"], 60);
  EXPECT_EQ(
      e.samples["taskengine_tenant_executions_ended_24h{tenant=\"a\",status=\"quarantined\"}"], 1);
  EXPECT_EQ(e.samples["taskengine_tenant_executions_ended_24h{tenant=\"a\",status=\"succeeded\"}"],
            0);
  EXPECT_EQ(Value("taskengine_failures_total{class=\"retryable\",source=\"in_process\"}"), 0);
  EXPECT_GE(Value("taskengine_handler_failures_total"), before + 1);
}

TEST_F(ApiMetricsTest, RemoteClaimsOutcomesStaleCallsAndDuplicateEffectsCount) {
  const double claims = Value("taskengine_claims_total");
  Dispatch("remote");
  json l = LeaseOne("remote");
  EXPECT_GE(Value("taskengine_claims_total"), claims + 1);

  // An already_done reservation: the effect was committed before.
  ASSERT_EQ(client_->Post(W(l, "effects/notice/reserve"), kWorker, CV(l)).json()["answer"],
            "proceed");
  ASSERT_EQ(client_->Post(W(l, "effects/notice/commit"), kWorker, CV(l, {{"detail", "d"}})).status,
            200);
  EXPECT_EQ(Value("taskengine_effect_duplicates_prevented_total{source=\"remote\"}"), 0);
  ASSERT_EQ(client_->Post(W(l, "effects/notice/reserve"), kWorker, CV(l)).json()["answer"],
            "already_done");
  EXPECT_EQ(Value("taskengine_effect_duplicates_prevented_total{source=\"remote\"}"), 1);

  // A call with a claim version that is not current: 409 stale, single and in a batch.
  json stale = l;
  stale["claim_version"] = l["claim_version"].get<std::int64_t>() + 5;
  const double stale_before = Value("taskengine_stale_rejections_total");
  ClientResponse hb = client_->Post(W(l, "heartbeat"), kWorker, CV(stale));
  ASSERT_EQ(hb.status, 409) << hb.body;
  ASSERT_EQ(hb.error_code(), "stale");
  EXPECT_EQ(Value("taskengine_stale_rejections_total"), stale_before + 1);
  ClientResponse batch =
      client_->Post("/api/v1/worker/heartbeats", kWorker,
                    {{"worker_id", "metrics-w"},
                     {"items", {{{"id", l["id"]}, {"claim_version", stale["claim_version"]}}}}});
  ASSERT_EQ(batch.status, 200) << batch.body;
  ASSERT_EQ(batch.json()["items"][0]["ok"], false) << batch.body;
  EXPECT_EQ(Value("taskengine_stale_rejections_total"), stale_before + 2);
  // A 409 that is not `stale` does not count.
  ClientResponse conflict =
      client_->Post(W(l, "effects/notice/commit"), kWorker, CV(l, {{"detail", "another"}}));
  if (conflict.status == 409) {
    EXPECT_EQ(Value("taskengine_stale_rejections_total"), stale_before + 2) << conflict.body;
  }

  // A remote permanent failure.
  ClientResponse failed =
      client_->Post(W(l, "fail"), kWorker, CV(l, {{"class", "permanent"}, {"error", "bad input"}}));
  ASSERT_EQ(failed.status, 200) << failed.body;
  EXPECT_EQ(Value("taskengine_failures_total{class=\"permanent\",source=\"remote\"}"), 1);
  EXPECT_EQ(Value("taskengine_completions_total{source=\"remote\"}"), 0);

  // A remote completion.
  Dispatch("remote");
  json l2 = LeaseOne("remote");
  ASSERT_EQ(client_->Post(W(l2, "complete"), kWorker, CV(l2, {{"result", 1}})).status, 200);
  EXPECT_EQ(Value("taskengine_completions_total{source=\"remote\"}"), 1);

  // C1: a complete reported after a cancel request ends canceled: no completion.
  const std::int64_t late = Dispatch("remote");
  json l3 = LeaseOne("remote");
  ASSERT_EQ(l3["id"], std::to_string(late));
  ASSERT_EQ(client_
                ->Post("/api/v1/executions/" + std::to_string(late) + "/cancel", kOperator,
                       {{"reason", "late"}})
                .status,
            200);
  ClientResponse done = client_->Post(W(l3, "complete"), kWorker, CV(l3, {{"result", 2}}));
  ASSERT_EQ(done.status, 200) << done.body;
  EXPECT_EQ(done.json()["status"], "canceled") << done.body;
  EXPECT_EQ(Value("taskengine_completions_total{source=\"remote\"}"), 1);
}

TEST_F(ApiMetricsTest, TheSweeperRecoveringAnExpiredLeaseCounts) {
  EXPECT_EQ(Value("taskengine_lease_expirations_total"), 0);
  Dispatch("short");
  json l = LeaseOne("short");  // lease 300 ms, never heartbeated
  ASSERT_FALSE(l.empty());
  EXPECT_TRUE(WaitFor("taskengine_lease_expirations_total", 1));
  EXPECT_GE(Value("taskengine_failures_total{class=\"lease_expiry\",source=\"sweeper\"}"), 1);
}

TEST_F(ApiMetricsTest, CancelLatencyObservesQueuedAndRunningCancels) {
  EXPECT_EQ(Value("taskengine_cancel_latency_seconds_count"), 0);
  // A queued execution ends at once.
  const std::int64_t parked = Dispatch("parked");
  ClientResponse c1 = client_->Post("/api/v1/executions/" + std::to_string(parked) + "/cancel",
                                    kOperator, {{"reason", "not needed"}});
  ASSERT_EQ(c1.status, 200) << c1.body;
  EXPECT_EQ(Value("taskengine_cancel_latency_seconds_count"), 1);
  EXPECT_EQ(Value("taskengine_cancel_latency_seconds_bucket{le=\"+Inf\"}"), 1);

  // A running one ends when its handler stops and the pool publishes.
  const std::int64_t running = Dispatch("blocker", "a");
  harness_->WaitForStatus(running, "running");
  ClientResponse c2 = client_->Post("/api/v1/executions/" + std::to_string(running) + "/cancel",
                                    kOperator, {{"reason", "stop"}});
  ASSERT_EQ(c2.status, 200) << c2.body;
  harness_->WaitForStatus(running, "canceled");
  EXPECT_TRUE(WaitFor("taskengine_cancel_latency_seconds_count", 2));
  const double sum = Value("taskengine_cancel_latency_seconds_sum");
  EXPECT_GE(sum, 0);
  EXPECT_LT(sum, 30) << "both cancels ended within seconds";
  EXPECT_EQ(Value("taskengine_cancel_latency_seconds_bucket{le=\"30\"}"), 2);
}

// The ApiOptions hooks: shared worker counters and extra families (the
// scheduler's, in serve), through the router without a server.
TEST_F(ApiMetricsTest, ExtraFamiliesAndSharedCountersAppear) {
  AnonymousAuthenticator anonymous;
  ApiOptions options;
  options.worker_metrics = std::make_shared<ApiMetrics>();
  options.worker_metrics->claims = 7;
  options.extra_metrics = [](std::string* out) {
    MetricsWriter w(out);
    w.Single("taskengine_test_extra", "gauge", "A family added by the owner.", 42);
  };
  Api api(&harness_->engine(), &anonymous, options);
  HttpRequest request;
  request.method = HttpMethod::kGet;
  request.method_name = "GET";
  request.target = request.path = "/metrics";
  request.remote_address = "127.0.0.1:1";
  std::promise<HttpResponse> answered;
  api.handler()(request, Responder([&](HttpResponse r) { answered.set_value(std::move(r)); }));
  HttpResponse r = answered.get_future().get();
  ASSERT_EQ(r.status, 200) << r.body;
  Exposition e;
  ASSERT_TRUE(Parse(r.body, &e)) << r.body;
  EXPECT_EQ(e.types["taskengine_test_extra"], "gauge");
  EXPECT_EQ(e.samples["taskengine_test_extra"], 42);
  EXPECT_GE(e.samples["taskengine_claims_total"], 7);
}

// --- engine counters without HTTP ---------------------------------------------------------------

TEST(EngineStatsTest, FailuresByClassAndInProcessEffectDuplicates) {
  TempDir dir;
  EngineOptions eo;
  eo.database_path = dir.File("te.db");
  eo.worker_threads = 1;
  eo.poll_interval_ms = 20;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Engine> engine, Engine::Open(eo));
  auto define = [&](const std::string& name, std::vector<int> versions = {}) {
    JobDefinition job;
    job.name = JobName(name);
    job.handler = name;
    job.retry.max_attempts = 1;
    job.accepted_schema_versions = std::move(versions);
    ASSERT_OK(engine->DefineJob(job));
  };
  define("retry");
  define("ambiguous");
  define("twice");
  define("schema", {2});
  ASSERT_OK(engine->RegisterHandler(
      "retry", [](JobContext&) { return HandlerResult::Retryable("try later"); }));
  ASSERT_OK(engine->RegisterHandler(
      "ambiguous", [](JobContext&) { return HandlerResult::Ambiguous("unknown"); }));
  ASSERT_OK(
      engine->RegisterHandler("schema", [](JobContext&) { return HandlerResult::Success(); }));
  ASSERT_OK(engine->RegisterHandler("twice", [](JobContext& ctx) {
    auto first = ctx.ReserveEffect("mail");
    if (!first.ok() || first->answer != EffectAnswer::kProceed)
      return HandlerResult::Permanent("1");
    if (!ctx.CommitEffect("mail", "sent").ok()) return HandlerResult::Permanent("2");
    auto second = ctx.ReserveEffect("mail");
    if (!second.ok() || second->answer != EffectAnswer::kAlreadyDone) {
      return HandlerResult::Permanent("3");
    }
    return HandlerResult::Success();
  }));
  ASSERT_OK(engine->Start());
  for (const char* job : {"retry", "ambiguous", "twice"}) {
    ASSERT_OK(engine->Dispatch({.job = JobName(job), .requester = "test"}).status());
  }
  ASSERT_OK(engine
                ->Dispatch({.job = JobName("schema"),
                            .payload_json = R"({"schema_version":1})",
                            .requester = "test"})
                .status());
  ASSERT_TRUE(WaitUntil([&] { return engine->stats().published >= 4; })) << "outcomes published";
  EngineStats s = engine->stats();
  EXPECT_EQ(s.failed_retryable, 1);
  EXPECT_EQ(s.failed_ambiguous, 1);
  EXPECT_EQ(s.failed_unsupported_schema, 1);
  EXPECT_EQ(s.failed_permanent, 0);
  EXPECT_EQ(s.failed, 3);
  EXPECT_EQ(s.succeeded, 1);
  EXPECT_EQ(s.effect_duplicates, 1);
  engine->Stop();
}

// --- the scheduler's families -------------------------------------------------------------------

TEST(SchedulerMetricsTest, SkippedFiresLagAndDurationOnAFakeClock) {
  constexpr Millis kT0 = 1'767'225'600'000;  // 2026-01-01T00:00Z
  TempDir dir;
  FakeClock clock(kT0);
  SqliteStoreOptions so;
  so.path = dir.File("te.db");
  so.clock = &clock;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, OpenSqliteStore(so));
  ASSERT_OK(store->Migrate());
  JobDefinition tick;
  tick.name = JobName("tick");
  tick.handler = "noop";
  tick.schedule = "* * * * *";
  ASSERT_OK(store->UpsertJob(tick));
  SchedulerOptions o;
  o.node_id = "node-a";
  Scheduler scheduler(store.get(), &clock, o);

  std::string empty;
  AppendSchedulerMetrics(scheduler.totals(), &empty);
  Exposition before;
  ASSERT_TRUE(Parse(empty, &before)) << empty;
  EXPECT_EQ(before.samples["taskengine_scheduler_skipped_fires_total"], 0);
  EXPECT_EQ(before.types["taskengine_scheduler_lag_seconds"], "gauge");
  EXPECT_EQ(before.types["taskengine_scheduler_cycle_duration_seconds"], "gauge");
  EXPECT_EQ(before.types["taskengine_scheduler_job_skipped_fires_total"], "counter");

  // A day without a scheduler, then a cycle 2.5 s after the minute.
  clock.Set(kT0 + 24 * 3'600'000 + 2'500);
  ASSERT_OK_AND_ASSIGN(CycleReport report, scheduler.RunCycle());
  ASSERT_TRUE(report.leader);
  ASSERT_GT(report.skipped, 0);
  SchedulerTotals t = scheduler.totals();
  EXPECT_EQ(t.cycles, 1);
  EXPECT_EQ(t.skipped, report.skipped);
  EXPECT_EQ(t.skipped_by_job["tick"], report.skipped);
  EXPECT_EQ(t.last_lag_ms, 2'500);

  std::string text;
  AppendSchedulerMetrics(t, &text);
  Exposition e;
  ASSERT_TRUE(Parse(text, &e)) << text;
  EXPECT_EQ(e.samples["taskengine_scheduler_skipped_fires_total"],
            static_cast<double>(report.skipped));
  EXPECT_EQ(e.samples["taskengine_scheduler_job_skipped_fires_total{job=\"tick\"}"],
            static_cast<double>(report.skipped));
  EXPECT_EQ(e.samples["taskengine_scheduler_cycles_total{result=\"leader\"}"], 1);
  EXPECT_EQ(e.samples["taskengine_scheduler_lag_seconds"], 2.5);
  EXPECT_GT(e.samples["taskengine_scheduler_cycle_duration_seconds"], 0);
  EXPECT_EQ(e.types["taskengine_scheduler_cycles_total"], "counter");

  // A second cycle in the same minute skips nothing more.
  clock.Advance(std::chrono::milliseconds(1'000));
  ASSERT_OK(scheduler.RunCycle().status());
  EXPECT_EQ(scheduler.totals().skipped, report.skipped);
  EXPECT_EQ(scheduler.totals().cycles, 2);
  EXPECT_EQ(scheduler.totals().last_lag_ms, 3'500);
}

}  // namespace
}  // namespace taskengine::api::testing
