// DatabaseClock: the local steady clock plus an offset to a database's
// clock, re-sampled by a background thread.
#include "storage/database_clock.h"

#include <atomic>
#include <thread>

#include "core/mutex.h"
#include "platform/thread_name.h"

namespace taskengine {
namespace {

Millis SteadyMillis(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

}  // namespace

struct DatabaseClock::Impl {
  // Constant after construction.
  DatabaseClock::Reader read_now;
  std::chrono::milliseconds resample{};
  // Read by any thread.
  std::atomic<Millis> offset_ms{0};
  // One sample at a time.
  Mutex sample_mu;
  Mutex stop_mu;
  CondVar stop_cv;
  bool stopping GUARDED_BY(stop_mu) = false;
  std::thread sampler;  // started by Open, joined by the destructor

  Status Sample() EXCLUDES(sample_mu) {
    MutexLock lock(sample_mu);
    const auto before = std::chrono::steady_clock::now();
    TE_ASSIGN_OR_RETURN(Millis database_now, read_now());
    const auto after = std::chrono::steady_clock::now();
    // The server read its clock somewhere in the round trip: take the middle.
    const Millis local = (SteadyMillis(before) + SteadyMillis(after)) / 2;
    offset_ms.store(database_now - local, std::memory_order_release);
    return Status::Ok();
  }

  void Loop() EXCLUDES(stop_mu) {
    MutexLock lock(stop_mu);
    while (!stopping) {
      const auto next_sample = std::chrono::steady_clock::now() + resample;
      while (!stopping && stop_cv.WaitUntil(stop_mu, next_sample)) {
      }
      if (stopping) break;
      lock.Unlock();
      (void)Sample();  // on failure the last offset stays
      lock.Lock();
    }
  }
};

DatabaseClock::DatabaseClock(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DatabaseClock::~DatabaseClock() {
  {
    MutexLock lock(impl_->stop_mu);
    impl_->stopping = true;
  }
  impl_->stop_cv.NotifyAll();
  if (impl_->sampler.joinable()) impl_->sampler.join();
}

Result<std::unique_ptr<DatabaseClock>> DatabaseClock::Open(Reader read_now,
                                                           std::chrono::milliseconds resample) {
  if (!read_now) return InvalidArgument("DatabaseClock needs a reader of the database's clock");
  if (resample.count() < 1) return InvalidArgument("DatabaseClock resample period must be >= 1 ms");
  auto impl = std::make_unique<Impl>();
  impl->read_now = std::move(read_now);
  impl->resample = resample;
  TE_RETURN_IF_ERROR(impl->Sample());
  Impl* raw = impl.get();
  std::unique_ptr<DatabaseClock> clock(new DatabaseClock(std::move(impl)));
  raw->sampler = NamedThread("te-db-clock", [raw] { raw->Loop(); });
  return clock;
}

Millis DatabaseClock::NowMillis() const {
  return SteadyMillis(std::chrono::steady_clock::now()) +
         impl_->offset_ms.load(std::memory_order_acquire);
}

Clock::SteadyTime DatabaseClock::Steady() const { return std::chrono::steady_clock::now(); }

Status DatabaseClock::Resample() { return impl_->Sample(); }

Millis DatabaseClock::offset_ms() const { return impl_->offset_ms.load(std::memory_order_acquire); }

}  // namespace taskengine
