// DatabaseClock: the local steady clock plus an offset to PostgreSQL's
// clock_timestamp(), re-sampled by a background thread over its own connection.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "storage/postgres/pg_conn.h"
#include "storage/postgres/pg_store.h"

namespace taskengine {
namespace {

constexpr const char* kDatabaseNow =
    "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint";

Millis SteadyMillis(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

}  // namespace

struct DatabaseClock::Impl {
  // Constant after construction.
  std::string url;
  std::chrono::milliseconds resample{};
  // Read by any thread.
  std::atomic<Millis> offset_ms{0};
  // Protected by conn_mu: one sample at a time.
  std::mutex conn_mu;
  pg::PgConn conn;
  // Protected by stop_mu.
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopping = false;
  std::thread sampler;

  Status Sample() {
    std::lock_guard<std::mutex> lock(conn_mu);
    if (!conn.healthy()) TE_RETURN_IF_ERROR(conn.Connect(url, ""));
    const auto before = std::chrono::steady_clock::now();
    TE_ASSIGN_OR_RETURN(pg::PgResult r, conn.Query(kDatabaseNow));
    const auto after = std::chrono::steady_clock::now();
    if (r.rows() != 1) return Internal("clock_timestamp() returned no row");
    // The server read its clock somewhere in the round trip: take the middle.
    const Millis local = (SteadyMillis(before) + SteadyMillis(after)) / 2;
    offset_ms.store(r.Int(0, 0) - local, std::memory_order_release);
    return Status::Ok();
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(stop_mu);
    while (!stopping) {
      stop_cv.wait_for(lock, resample, [&] { return stopping; });
      if (stopping) break;
      lock.unlock();
      (void)Sample();  // on failure the last offset stays
      lock.lock();
    }
  }
};

DatabaseClock::DatabaseClock(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DatabaseClock::~DatabaseClock() {
  {
    std::lock_guard<std::mutex> lock(impl_->stop_mu);
    impl_->stopping = true;
  }
  impl_->stop_cv.notify_all();
  if (impl_->sampler.joinable()) impl_->sampler.join();
}

Result<std::unique_ptr<DatabaseClock>> DatabaseClock::Open(const std::string& url,
                                                           std::chrono::milliseconds resample) {
  if (url.empty()) return InvalidArgument("DatabaseClock needs a connection URL");
  if (resample.count() < 1) return InvalidArgument("DatabaseClock resample period must be >= 1 ms");
  auto impl = std::make_unique<Impl>();
  impl->url = url;
  impl->resample = resample;
  TE_RETURN_IF_ERROR(impl->Sample());
  Impl* raw = impl.get();
  std::unique_ptr<DatabaseClock> clock(new DatabaseClock(std::move(impl)));
  raw->sampler = std::thread([raw] { raw->Loop(); });
  return clock;
}

Millis DatabaseClock::NowMillis() const {
  return SteadyMillis(std::chrono::steady_clock::now()) +
         impl_->offset_ms.load(std::memory_order_acquire);
}

Status DatabaseClock::Resample() { return impl_->Sample(); }

Millis DatabaseClock::offset_ms() const { return impl_->offset_ms.load(std::memory_order_acquire); }

}  // namespace taskengine
