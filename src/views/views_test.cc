#include "views/views.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace taskengine {
namespace {

TEST(ViewsTest, QueuesConfiguredByPriorityThenOthersByName) {
  std::vector<QueueDepth> depths(3);
  depths[0].queue = "zeta";
  depths[0].queued = 2;
  depths[0].oldest_queued_at = 1'000;
  depths[1].queue = "default";
  depths[1].queued = 5;
  depths[1].due = 4;
  depths[1].running = 1;
  depths[1].oldest_queued_at = 4'000;
  depths[2].queue = "alpha";
  depths[2].running = 1;
  std::vector<QueueConfig> configured = {{"default", 0, 0}, {"high", 10, 2}};
  std::vector<QueueView> views = QueueViews(depths, configured, /*now=*/5'000);
  ASSERT_EQ(views.size(), 4u);
  EXPECT_EQ(views[0].queue, "high");
  EXPECT_TRUE(views[0].configured);
  EXPECT_EQ(views[0].queued, 0);
  EXPECT_EQ(views[1].queue, "default");
  EXPECT_EQ(views[1].oldest_age_ms, 1'000);
  EXPECT_EQ(views[2].queue, "alpha");
  EXPECT_FALSE(views[2].configured);
  EXPECT_EQ(views[3].queue, "zeta");
  EXPECT_EQ(views[3].oldest_age_ms, 4'000);

  const Json high = QueueToJson(views[0]);
  EXPECT_TRUE(high["oldest_queued_at"].is_null());
  EXPECT_TRUE(high["oldest_queued_age_ms"].is_null());
  EXPECT_EQ(high["concurrency"], 2);
  EXPECT_EQ(QueueToJson(views[1])["oldest_queued_age_ms"], 1'000);
}

// The strings of a lease are written exactly as nlohmann::json prints them in
// every other response: plain ones as they are, the others escaped, invalid
// UTF-8 replaced.
TEST(ViewsTest, LeaseTextWritesStringsAsEveryResponseDoes) {
  const std::vector<std::string> strings = {
      "default",   "a b/c:d~e", "quo\"te",     "back\\slash",  std::string("nul\0in", 6),
      "tab\there", "del\x7f",   "caf\xc3\xa9", "\xe2\x82\xac", "bad\xff",
      "cut\xc3",   "\x1f"};
  for (const std::string& s : strings) {
    Lease lease;
    lease.id = ExecutionId(1);
    lease.job = JobName(s);
    lease.tenant = TenantId(s);
    lease.queue = s;
    lease.idempotency_key = s;
    std::string text;
    AppendLeaseJson(text, lease, nullptr, "null");
    const std::string want = Json(s).dump(-1, ' ', false, Json::error_handler_t::replace);
    for (const char* key : {"job", "tenant", "queue", "idempotency_key"}) {
      EXPECT_NE(text.find("\"" + std::string(key) + "\":" + want + ","), std::string::npos)
          << key << " of " << want << " in " << text;
    }
    EXPECT_NO_THROW((void)Json::parse(text)) << text;
  }
}

// A lease written as text is the document the worker protocol documents:
// every member, in order; the stored payload and config as JSON values; null
// for what is unset or gone; invalid UTF-8 replaced as in every response; a
// stored text that is not JSON (which the store never holds) as a string.
TEST(ViewsTest, LeaseTextIsTheDocumentOfTheWorkerProtocol) {
  Lease lease;
  lease.id = ExecutionId(9'007'199'254'740'993);  // beyond a double's integers
  lease.version = ClaimVersion(3);
  lease.job = JobName("send-mail");
  lease.queue = "default";
  lease.attempt = 2;
  lease.payload_json = R"({"to":"a@b.example","text":"h\u00e9 \"q\"\n","n":[1,2.5,-3e-7]})";
  lease.idempotency_key = std::string("key-\xff");
  lease.lease_ms = 30'000;
  lease.lease_expires_at = 1'700'000'000'123;
  JobDefinition job;
  job.name = lease.job;
  job.handler = "mailer";
  job.config_json = R"({"smtp":"relay"})";
  job.timeout_ms = 60'000;

  std::string text = "[";
  AppendLeaseJson(text, lease, &job, HandlerConfigText(job));
  text += ",";
  Lease gone = lease;
  gone.tenant = TenantId("acme");
  gone.payload_json = "not json";
  gone.idempotency_key.clear();
  gone.lease_expires_at = 0;
  AppendLeaseJson(text, gone, nullptr, "ignored");
  text += "]";
  const Json docs = Json::parse(text);
  ASSERT_EQ(docs.size(), 2u);
  const Json& l = docs[0];
  std::vector<std::string> keys;
  for (const auto& [key, value] : l.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"id", "claim_version", "job", "tenant", "queue",
                                            "attempt", "payload", "idempotency_key",
                                            "effect_key_prefix", "lease_ms", "lease_expires_at",
                                            "handler", "handler_config", "timeout_ms"}));
  EXPECT_EQ(l["id"], "9007199254740993");
  EXPECT_EQ(l["claim_version"], 3);
  EXPECT_EQ(l["job"], "send-mail");
  EXPECT_TRUE(l["tenant"].is_null());
  EXPECT_EQ(l["queue"], "default");
  EXPECT_EQ(l["attempt"], 2);
  EXPECT_EQ(l["payload"], Json::parse(lease.payload_json));
  EXPECT_EQ(l["idempotency_key"], "key-\xef\xbf\xbd");  // U+FFFD
  EXPECT_EQ(l["effect_key_prefix"], "9007199254740993:");
  EXPECT_EQ(l["lease_ms"], 30'000);
  EXPECT_EQ(l["lease_expires_at"], TimeOrNull(lease.lease_expires_at));
  EXPECT_EQ(l["handler"], "mailer");
  EXPECT_EQ(l["handler_config"], Json::parse(job.config_json));
  EXPECT_EQ(l["timeout_ms"], 60'000);

  const Json& g = docs[1];
  EXPECT_EQ(g["tenant"], "acme");
  EXPECT_EQ(g["payload"], "not json");
  EXPECT_TRUE(g["idempotency_key"].is_null());
  EXPECT_TRUE(g["lease_expires_at"].is_null());
  EXPECT_TRUE(g["handler"].is_null());
  EXPECT_TRUE(g["handler_config"].is_null());
  EXPECT_TRUE(g["timeout_ms"].is_null());

  job.config_json.clear();
  EXPECT_EQ(HandlerConfigText(job), "{}");
  EXPECT_EQ(EmbeddedJsonText(""), "null");
  EXPECT_EQ(EmbeddedJsonText(R"({"a": [1, 2]})"), R"({"a":[1,2]})");
}

TEST(ViewsTest, EffectStateAndEmptyConfig) {
  EffectRecord effect;
  effect.key = "7:send";
  effect.name = "send";
  EXPECT_EQ(EffectToJson(effect)["state"], "reserved");
  effect.committed = true;
  effect.committed_at = 1'000;
  EXPECT_EQ(EffectToJson(effect)["state"], "committed");
  EXPECT_FALSE(EffectToJson(effect).contains("committed"));

  JobDefinition job;
  job.name = JobName("hello");
  EXPECT_EQ(JobToJson(job, {})["config"], Json::object());
  job.config_json = R"({"argv":["/bin/true"]})";
  EXPECT_EQ(JobToJson(job, {})["config"]["argv"][0], "/bin/true");
}

TEST(ViewsTest, DetailListsEscapedEffectsOnlyWhenCanceled) {
  ExecutionDetail d;
  d.execution.id = ExecutionId(7);
  d.execution.status = ExecutionStatus::kSucceeded;
  EffectRecord sent;
  sent.committed = true;
  d.effects.push_back(sent);
  Json j = ExecutionDetailToJson(d);
  EXPECT_EQ(j["effects"].size(), 1u);
  EXPECT_TRUE(j["escaped_effects"].empty());
  EXPECT_EQ(j["status_url"], "/api/v1/executions/7");
  EXPECT_FALSE(j.contains("result"));
  d.execution.status = ExecutionStatus::kPartiallyCanceled;
  EXPECT_EQ(ExecutionDetailToJson(d)["escaped_effects"].size(), 1u);
  // A reservation never confirmed may have happened too: listed as reserved.
  EffectRecord unconfirmed;
  unconfirmed.name = "draft";
  d.effects.push_back(unconfirmed);
  j = ExecutionDetailToJson(d);
  ASSERT_EQ(j["escaped_effects"].size(), 2u);
  EXPECT_EQ(j["escaped_effects"][1]["state"], "reserved");
}

// W5: a pool's state, busy and idle threads as readers see them: live while
// it reports, stale once it missed its reports, stopped when it said so.
TEST(ViewsTest, WorkerStateIsComputedAtReadTime) {
  WorkerInfo pool;
  pool.id = WorkerId("h:7:pool");
  pool.kind = WorkerKind::kPool;
  pool.state = WorkerState::kBusy;
  pool.threads = 4;
  pool.busy = 3;
  pool.current = {ExecutionId(11), ExecutionId(12), ExecutionId(13)};
  pool.last_heartbeat_at = 100'000;
  Json live = WorkerToJson(pool, nullptr, 100'500);
  EXPECT_EQ(live["kind"], "pool");
  EXPECT_EQ(live["state"], "busy");
  EXPECT_EQ(live["concurrency"], 4);
  EXPECT_EQ(live["busy"], 3);
  EXPECT_EQ(live["idle"], 1);
  EXPECT_EQ(live["current"], Json::array({"11", "12", "13"}));
  EXPECT_EQ(live["stale_after_ms"], 5'000);
  Json stale = WorkerToJson(pool, nullptr, 100'000 + 5'001);
  EXPECT_EQ(stale["state"], "stale");
  EXPECT_EQ(stale["busy"], 0);
  EXPECT_EQ(stale["idle"], 0);
  pool.state = WorkerState::kStopped;
  EXPECT_EQ(WorkerToJson(pool, nullptr, 10'000'000)["state"], "stopped");

  WorkerInfo remote;
  remote.id = WorkerId("h:8");
  remote.last_heartbeat_at = 100'000;
  Json r = WorkerToJson(remote, nullptr, 100'000 + 30'000);
  EXPECT_EQ(r["kind"], "remote");
  EXPECT_EQ(r["state"], "idle") << "a remote worker heartbeats every 10 s when idle";
  EXPECT_EQ(r["concurrency"], nullptr);
  EXPECT_EQ(r["idle"], nullptr);
  EXPECT_EQ(WorkerToJson(remote, nullptr, 100'000 + 35'001)["state"], "stale");
}

// A single dispatch's answer, written as text, is byte for byte what
// printing DispatchResultToJson gives, for every status, both kinds of
// answer and ids up to the largest.
TEST(ViewsTest, DispatchResultTextIsTheJsonAnswer) {
  for (int s = 0; s < kExecutionStatusCount; ++s) {
    for (const bool created : {true, false}) {
      for (const std::int64_t id :
           {std::int64_t{1}, std::int64_t{42}, std::int64_t{9'007'199'254'740'993},
            std::numeric_limits<std::int64_t>::max()}) {
        DispatchResult r;
        r.id = ExecutionId(id);
        r.status = static_cast<ExecutionStatus>(s);
        r.created = created;
        const std::string want =
            DispatchResultToJson(r).dump(-1, ' ', false, Json::error_handler_t::replace);
        EXPECT_EQ(DispatchResultText(r), want);
      }
    }
  }
}

// The answer of a single complete, fail or release call, written as text, is
// byte for byte what printing FinishReplyToJson gives: every status, a fail's
// run_at (null unless queued again) and the other kinds without it.
TEST(ViewsTest, FinishReplyTextIsTheJsonAnswer) {
  for (int s = 0; s < kExecutionStatusCount; ++s) {
    for (const bool fail : {false, true}) {
      for (const Millis run_at : {Millis{0}, Millis{1'767'225'600'123}}) {
        FinishReply reply;
        reply.status = static_cast<ExecutionStatus>(s);
        reply.run_at = run_at;
        const std::string want =
            FinishReplyToJson(reply, fail).dump(-1, ' ', false, Json::error_handler_t::replace);
        EXPECT_EQ(FinishReplyText(reply, fail), want);
      }
    }
  }
  FinishReply requeued;
  requeued.status = ExecutionStatus::kQueued;
  requeued.run_at = 1'767'225'600'123;
  EXPECT_EQ(FinishReplyText(requeued, /*fail=*/true),
            R"({"status":"queued","run_at":"2026-01-01T00:00:00.123Z"})");
  EXPECT_EQ(FinishReplyText(requeued, /*fail=*/false), R"({"status":"queued"})");
}

}  // namespace
}  // namespace taskengine
