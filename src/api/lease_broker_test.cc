// LeaseBroker deadlines on a FakeClock: a parked poll ends when the broker's
// clock passes its deadline, not when real time does (no sleeping).
#include "api/lease_broker.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <vector>

#include "storage/sqlite/sqlite_store.h"
#include "taskengine/clock.h"
#include "testing_support/test_util.h"

namespace taskengine::api {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;

// Long enough that no test here could see it pass in real time.
constexpr auto kRealBound = std::chrono::seconds(10);

class LeaseBrokerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SqliteStoreOptions o;
    o.path = dir_.File("te.db");
    o.clock = &clock_;
    ASSERT_OK_AND_ASSIGN(store_, OpenSqliteStore(o));
    ASSERT_OK(store_->Migrate());
    LeaseBrokerOptions options;
    options.poll_interval = minutes(60);  // no periodic round within the tests
    broker_ = std::make_unique<LeaseBroker>(store_.get(), &clock_, options);
  }
  void TearDown() override {
    if (broker_) broker_->Stop();
  }

  // Parks a poll of worker `w` on the empty queue "default" that may wait
  // `wait`; the future holds what it was answered.
  std::future<std::vector<Lease>> Park(const std::string& w, milliseconds wait) {
    auto answer = std::make_shared<std::promise<std::vector<Lease>>>();
    std::future<std::vector<Lease>> future = answer->get_future();
    LeasePoll poll;
    poll.worker = WorkerId(w);
    poll.queues = {"default"};
    poll.wait = wait;
    poll.deliver = [answer](std::vector<Lease> leases) { answer->set_value(std::move(leases)); };
    EXPECT_TRUE(broker_->Submit(std::move(poll)).ok());
    return future;
  }

  TempDir dir_;
  FakeClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<LeaseBroker> broker_;
};

TEST_F(LeaseBrokerTest, ParkedPollsEndAtTheirDeadlinesByTheClock) {
  std::future<std::vector<Lease>> first = Park("w1", minutes(10));
  std::future<std::vector<Lease>> second = Park("w2", minutes(20));
  EXPECT_EQ(broker_->parked(), 2u);

  // A wake serves a round (nothing is due) but ends no poll: by the clock,
  // no time has passed.
  broker_->Wake();
  clock_.Advance(minutes(10) - milliseconds(1));
  EXPECT_EQ(broker_->parked(), 2u);

  clock_.Advance(milliseconds(1));  // the first poll's deadline
  broker_->Wake();
  ASSERT_EQ(first.wait_for(kRealBound), std::future_status::ready);
  EXPECT_TRUE(first.get().empty());
  // Both deadlines were judged in the same pass: the second is still parked.
  EXPECT_EQ(broker_->parked(), 1u);
  EXPECT_EQ(second.wait_for(milliseconds(0)), std::future_status::timeout);

  clock_.Advance(minutes(10));
  broker_->Wake();
  ASSERT_EQ(second.wait_for(kRealBound), std::future_status::ready);
  EXPECT_TRUE(second.get().empty());
  EXPECT_EQ(broker_->parked(), 0u);
}

TEST_F(LeaseBrokerTest, StopAnswersParkedPollsWhateverTheClock) {
  std::future<std::vector<Lease>> poll = Park("w1", minutes(10));
  broker_->Stop();
  ASSERT_EQ(poll.wait_for(milliseconds(0)), std::future_status::ready);
  EXPECT_TRUE(poll.get().empty());
}

}  // namespace
}  // namespace taskengine::api
