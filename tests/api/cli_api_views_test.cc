// One view layer (views/views.h): for the same database, the CLI's --json
// output and the REST API of the real `serve` return the same documents —
// execution detail, execution list, job definitions, queues, lanes and audit.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "drill_support.h"
#include "test_client.h"

namespace taskengine::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// A job that logs, reports progress, performs one effect through the effect
// verbs and returns a result.
std::string Config() {
  const std::string script = R"(echo '{"progress": 40}'
echo '{"log": "about to send"}'
")" + std::string(TASKENGINE_BIN) +
                             R"(" effect:reserve notice >/dev/null
")" + std::string(TASKENGINE_BIN) +
                             R"(" effect:commit notice --detail sent-1 >/dev/null
echo '{"result": {"sent": 1}}'
)";
  return "[http]\nport = 0\nauth = false\n" + EngineSection(1) +
         "priority = 0\n\n[[queue]]\nname = \"high\"\npriority = 10\nconcurrency = 2\n" +
         ShellJob("hello", script, "schedule = \"*/5 * * * *\"\ntimezone = \"Europe/Berlin\"") +
         "\n[[job]]\nname = \"parked\"\nhandler = \"command\"\nqueue = \"high\"\n"
         "config = { argv = [\"/bin/true\"] }\n";
}

class CliApiViewsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    te_ = std::make_unique<TaskengineInstall>(Config());
    ProcessResult migrated = te_->Run({"migrate"});
    ASSERT_EQ(migrated.exit_code, 0) << migrated.Describe();
    te_->StartServe(&serve_);
    ASSERT_TRUE(te_->WaitServing(1, milliseconds(20'000))) << ReadFile(te_->serve_log());
    std::smatch m;
    const std::string log = ReadFile(te_->serve_log());
    ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(listening on http://127\.0\.0\.1:(\d+))")))
        << log;
    client_ = std::make_unique<api::testing::TestClient>(std::stoi(m[1]));
  }
  void TearDown() override { StopServe(&serve_); }

  json Api(const std::string& target) {
    api::testing::ClientResponse r = client_->Get(target);
    EXPECT_EQ(r.status, 200) << target << ": " << r.body;
    return r.json();
  }

  std::unique_ptr<TaskengineInstall> te_;
  ChildProcess serve_;
  std::unique_ptr<api::testing::TestClient> client_;
};

TEST_F(CliApiViewsTest, CliJsonAndApiReturnTheSameDocuments) {
  const std::int64_t id =
      te_->RunJson({"job:dispatch", "hello", "--payload", R"({"to":"ada"})", "--key", "k-1"})
          .value("id", std::int64_t{0});
  ASSERT_GT(id, 0);
  json done;
  ASSERT_TRUE(WaitExecution(
      *te_, id, milliseconds(20'000), [](const json& e) { return e["status"] == "succeeded"; },
      &done))
      << done.dump(2) << ReadFile(te_->serve_log());
  // Work queued for later, and an audited cancel.
  const std::int64_t parked =
      te_->RunJson({"job:dispatch", "parked", "--delay", "86400"}).value("id", std::int64_t{0});
  ASSERT_GT(parked, 0);
  const std::int64_t canceled =
      te_->RunJson({"job:dispatch", "parked", "--delay", "86400", "--payload", R"({"n":2})"})
          .value("id", std::int64_t{0});
  ASSERT_EQ(te_->Run({"execution:cancel", std::to_string(canceled), "--reason", "test"}).exit_code,
            0);

  // The execution's detail: every field, logs, effects, attempts, audit.
  const json cli_detail = ShowJson(*te_, id);
  const json api_detail = Api("/api/v1/executions/" + std::to_string(id));
  EXPECT_EQ(cli_detail, api_detail) << "CLI:\n"
                                    << cli_detail.dump(2) << "\nAPI:\n"
                                    << api_detail.dump(2);
  ASSERT_EQ(api_detail["effects"].size(), 1u) << api_detail.dump(2);
  EXPECT_EQ(api_detail["effects"][0]["state"], "committed");
  EXPECT_EQ(api_detail["effects"][0]["detail"], "sent-1");
  EXPECT_EQ(api_detail["payload"], json::parse(R"({"to":"ada"})"));
  EXPECT_EQ(api_detail["progress"], 100);  // success completes the progress
  EXPECT_FALSE(api_detail["logs"].empty());
  EXPECT_EQ(ShowJson(*te_, canceled), Api("/api/v1/executions/" + std::to_string(canceled)));

  // Listings.
  EXPECT_EQ(te_->RunJson({"execution:list"}), Api("/api/v1/executions"));
  EXPECT_EQ(te_->RunJson({"job:list"}), Api("/api/v1/jobs"));
  EXPECT_EQ(te_->RunJson({"lane:status"}), Api("/api/v1/lanes"));
  const json cli_audit = te_->RunJson({"audit:list"});
  EXPECT_EQ(cli_audit, Api("/api/v1/audit"));
  EXPECT_FALSE(cli_audit["items"].empty());

  // Queues: the same apart from the queued age, which moves with the clock.
  json cli_queues = te_->RunJson({"queue:status"});
  json api_queues = Api("/api/v1/queues");
  ASSERT_EQ(cli_queues["items"].size(), 2u) << cli_queues.dump(2);
  ASSERT_EQ(api_queues["items"].size(), 2u) << api_queues.dump(2);
  EXPECT_EQ(api_queues["items"][0]["queue"], "high");
  EXPECT_EQ(api_queues["items"][0]["configured"], true);
  EXPECT_EQ(api_queues["items"][0]["priority"], 10);
  EXPECT_EQ(api_queues["items"][0]["concurrency"], 2);
  EXPECT_EQ(api_queues["items"][0]["queued"], 1);
  EXPECT_EQ(api_queues["items"][0]["due"], 0);
  EXPECT_EQ(api_queues["items"][1]["queue"], "default");
  for (std::size_t i = 0; i < 2; ++i) {
    json& c = cli_queues["items"][i];
    json& a = api_queues["items"][i];
    if (c["oldest_queued_age_ms"].is_number() && a["oldest_queued_age_ms"].is_number()) {
      EXPECT_LT(std::llabs(c["oldest_queued_age_ms"].get<long long>() -
                           a["oldest_queued_age_ms"].get<long long>()),
                10'000);
      c["oldest_queued_age_ms"] = a["oldest_queued_age_ms"];
    }
  }
  EXPECT_EQ(cli_queues, api_queues);
  EXPECT_EQ(ShowJson(*te_, parked), Api("/api/v1/executions/" + std::to_string(parked)));
}

}  // namespace
}  // namespace taskengine::testing
