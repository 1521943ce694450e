// The SDK's Client against the real REST API (tests/api harness: a real
// engine on a throwaway SQLite file behind the real HTTP server on port 0).
#include "taskengine_client/client.h"

#include <gtest/gtest.h>

#include <thread>

#include "api_harness.h"  // (after storage/store.h: FinishReply must be complete)
#include "storage/store.h"

namespace taskengine_client {
namespace {

using taskengine::api::testing::ApiHarness;
namespace t = taskengine::api::testing;

class ClientApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    harness_ = std::make_unique<ApiHarness>();
    taskengine::Status s = harness_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    url_ = "http://127.0.0.1:" + std::to_string(harness_->port());
  }
  std::unique_ptr<Client> As(const char* token) {
    return std::make_unique<Client>(ClientOptions{url_, token});
  }
  // Polls GetExecution until `status` (or 10 s); returns the last document.
  Json WaitFor(Client& client, const std::string& id, const std::string& status) {
    Json last;
    for (int i = 0; i < 1000; ++i) {
      auto doc = client.GetExecution(id);
      if (doc.ok()) {
        last = *doc;
        if (last.value("status", "") == status) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return last;
  }

  std::unique_ptr<ApiHarness> harness_;
  std::string url_;
};

TEST_F(ClientApiTest, DispatchRunsAndTheResultIsReadable) {
  auto client = As(t::kAdmin);
  auto r = client->Dispatch("echo", {.payload = {{"n", 7}}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->created);
  EXPECT_FALSE(r->id.empty());
  EXPECT_EQ(r->status_url, "/api/v1/executions/" + r->id);
  Json detail = WaitFor(*client, r->id, "succeeded");
  ASSERT_EQ(detail.value("status", ""), "succeeded") << detail.dump();
  auto result = client->GetResult(r->id);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_NE(result->dump().find("\"n\":7"), std::string::npos) << result->dump();
}

TEST_F(ClientApiTest, IdempotencyKeyAnswersTheSameExecutionAndConflictsOnAnotherPayload) {
  auto client = As(t::kDispatcher);
  DispatchOptions o{.payload = {{"n", 1}}, .idempotency_key = "sdk-key-1"};
  auto first = client->Dispatch("echo", o);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto again = client->Dispatch("echo", o);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->id, first->id);
  EXPECT_FALSE(again->created);
  o.payload = {{"n", 2}};
  auto conflict = client->Dispatch("echo", o);
  ASSERT_FALSE(conflict.ok());
  EXPECT_EQ(conflict.status().http_status(), 409);
  EXPECT_EQ(conflict.status().code(), "conflict");
  EXPECT_EQ(IdToString(conflict.status().details().value("existing_execution_id", Json())),
            first->id);
}

TEST_F(ClientApiTest, BulkDispatchAnswersPerItem) {
  auto client = As(t::kDispatcher);
  std::vector<BulkItem> items;
  for (int i = 0; i < 5; ++i) {
    items.push_back(
        {"echo", {.payload = {{"i", i}}, .idempotency_key = "bulk-" + std::to_string(i)}});
  }
  auto r = client->DispatchBulk(items);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 5u);
  for (const BulkItemResult& item : *r) {
    EXPECT_TRUE(item.status.ok()) << item.status.ToString();
    EXPECT_TRUE(item.result.created);
  }
  auto repeat = client->DispatchBulk(items);
  ASSERT_TRUE(repeat.ok());
  EXPECT_EQ((*repeat)[3].result.id, (*r)[3].result.id);
  EXPECT_FALSE((*repeat)[3].result.created);
}

TEST_F(ClientApiTest, ListCancelReplayAndStats) {
  auto admin = As(t::kAdmin);
  auto blocker = admin->Dispatch("blocker", {.tenant = "a"});
  ASSERT_TRUE(blocker.ok()) << blocker.status().ToString();
  WaitFor(*admin, blocker->id, "running");
  auto page = admin->ListExecutions({.job = "blocker"});
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->items.size(), 1u);
  EXPECT_EQ(IdToString(page->items[0]["id"]), blocker->id);
  auto canceled = admin->Cancel(blocker->id, "sdk test");
  ASSERT_TRUE(canceled.ok()) << canceled.status().ToString();
  EXPECT_EQ(WaitFor(*admin, blocker->id, "canceled").value("status", ""), "canceled");

  auto poison = admin->Dispatch("poison", {.tenant = "a"});
  ASSERT_TRUE(poison.ok());
  Json q = WaitFor(*admin, poison->id, "quarantined");
  ASSERT_EQ(q.value("status", ""), "quarantined") << q.dump();
  auto replay = admin->Replay(poison->id, "fixed upstream");
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();

  auto stats = admin->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_TRUE(stats->is_object());
}

TEST_F(ClientApiTest, ErrorsCarryTheApiCodeAndHttpStatus) {
  auto reader = As(t::kReader);
  auto missing = reader->GetExecution("999999");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().http_status(), 404);
  EXPECT_TRUE(missing.status().not_found());
  auto forbidden = reader->Dispatch("echo", {});
  ASSERT_FALSE(forbidden.ok());
  EXPECT_EQ(forbidden.status().http_status(), 403);
  EXPECT_EQ(forbidden.status().code(), "forbidden");
  auto anonymous = As("");
  auto unauthenticated = anonymous->Stats();
  EXPECT_EQ(unauthenticated.status().http_status(), 401);
  EXPECT_EQ(unauthenticated.status().code(), "unauthenticated");
}

TEST_F(ClientApiTest, ADownServerIsATransportError) {
  const std::string url = url_;
  harness_->StopServer(100);
  Client client({url, t::kAdmin, std::chrono::milliseconds(2000)});
  auto r = client.Stats();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().transport_error()) << r.status().ToString();
  EXPECT_TRUE(r.status().retryable());
  EXPECT_EQ(r.status().code(), "unavailable");
}

TEST_F(ClientApiTest, ManyThreadsShareOneClient) {
  auto client = As(t::kDispatcher);
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        auto r = client->Dispatch("echo", {.payload = {{"t", t}, {"i", i}}});
        if (r.ok() && r->created) ++ok;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 100);
}

}  // namespace
}  // namespace taskengine_client
