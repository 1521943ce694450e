// Mutexes the compiler checks: clang's thread-safety analysis
// (-Wthread-safety, an error in clang builds) proves that each field marked
// GUARDED_BY(mu_) is touched only with mu_ held, that each function marked
// REQUIRES(mu_) is called with it held, and that none marked EXCLUDES(mu_) is.
// libstdc++'s std::mutex carries no capability attributes, so the analysis
// cannot see it: every mutex of taskengine is a Mutex from this header, the
// only place that names std::mutex (tests/locking/mutex_audit_test.sh keeps
// it so).
//
//   class Counter {                        // Thread-safe.
//    public:
//     void Add(int n) EXCLUDES(mu_) {
//       MutexLock lock(mu_);
//       total_ += n;
//       changed_.NotifyAll();
//     }
//     void AwaitAtLeast(int n) EXCLUDES(mu_) {
//       MutexLock lock(mu_);
//       while (total_ < n) changed_.Wait(mu_);
//     }
//    private:
//     Mutex mu_;
//     CondVar changed_;
//     int total_ GUARDED_BY(mu_) = 0;
//   };
//
// Everything here is inline over std::mutex and std::condition_variable and
// costs nothing more than they do. With GCC the attribute macros expand to
// nothing. Lambdas are analysed as functions of their own: one run with a
// mutex held (a predicate, a visitor) says so with mu_.AssertHeld().
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define TE_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define TE_THREAD_ANNOTATION_(x)
#endif

// The attribute names of clang's documentation (this header is internal: it is
// not installed, so they reach no outside project).
#ifndef CAPABILITY
#define CAPABILITY(x) TE_THREAD_ANNOTATION_(capability(x))
#endif
#ifndef SCOPED_CAPABILITY
#define SCOPED_CAPABILITY TE_THREAD_ANNOTATION_(scoped_lockable)
#endif
// The field may be read or written only with the mutex held.
#ifndef GUARDED_BY
#define GUARDED_BY(x) TE_THREAD_ANNOTATION_(guarded_by(x))
#endif
// What the pointer field points to may be touched only with the mutex held.
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) TE_THREAD_ANNOTATION_(pt_guarded_by(x))
#endif
// Lock order: this mutex is taken after / before the named ones.
#ifndef ACQUIRED_AFTER
#define ACQUIRED_AFTER(...) TE_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
#endif
#ifndef ACQUIRED_BEFORE
#define ACQUIRED_BEFORE(...) TE_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
#endif
// The caller must hold the mutexes (exclusively / at least shared).
#ifndef REQUIRES
#define REQUIRES(...) TE_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#endif
#ifndef REQUIRES_SHARED
#define REQUIRES_SHARED(...) TE_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))
#endif
// The function takes the mutexes and returns holding them / releases them.
#ifndef ACQUIRE
#define ACQUIRE(...) TE_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#endif
#ifndef ACQUIRE_SHARED
#define ACQUIRE_SHARED(...) TE_THREAD_ANNOTATION_(acquire_shared_capability(__VA_ARGS__))
#endif
#ifndef RELEASE
#define RELEASE(...) TE_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#endif
#ifndef RELEASE_SHARED
#define RELEASE_SHARED(...) TE_THREAD_ANNOTATION_(release_shared_capability(__VA_ARGS__))
#endif
// The function takes the mutex when it returns the given value.
#ifndef TRY_ACQUIRE
#define TRY_ACQUIRE(...) TE_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
#endif
// The caller must not hold the mutexes (the function takes them).
#ifndef EXCLUDES
#define EXCLUDES(...) TE_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#endif
// After the call the analysis takes the mutex as held.
#ifndef ASSERT_CAPABILITY
#define ASSERT_CAPABILITY(x) TE_THREAD_ANNOTATION_(assert_capability(x))
#endif
// The function returns (a reference to) the given mutex.
#ifndef RETURN_CAPABILITY
#define RETURN_CAPABILITY(x) TE_THREAD_ANNOTATION_(lock_returned(x))
#endif
// Turns the analysis off for one function: only where it cannot follow the
// code, with a comment saying why.
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS TE_THREAD_ANNOTATION_(no_thread_safety_analysis)
#endif

namespace taskengine {

class CondVar;

// A std::mutex the analysis knows as a capability. Not recursive. Prefer
// MutexLock to Lock/Unlock pairs.
class TE_THREAD_ANNOTATION_(capability("mutex")) Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() TE_THREAD_ANNOTATION_(acquire_capability()) { mu_.lock(); }
  void Unlock() TE_THREAD_ANNOTATION_(release_capability()) { mu_.unlock(); }
  // Takes the mutex if it is free; true when it did.
  bool TryLock() TE_THREAD_ANNOTATION_(try_acquire_capability(true)) { return mu_.try_lock(); }
  // Tells the analysis the calling thread holds this mutex (a lambda or
  // callback that runs under it). Checks nothing at run time.
  void AssertHeld() const TE_THREAD_ANNOTATION_(assert_capability(this)) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope. Unlock() and Lock() release and take it again
// within the scope (e.g. around a store call); the destructor releases it
// only if held.
class TE_THREAD_ANNOTATION_(scoped_lockable) MutexLock {
 public:
  explicit MutexLock(Mutex& mu) TE_THREAD_ANNOTATION_(acquire_capability(mu)) : mu_(mu) {
    mu_.Lock();
  }
  ~MutexLock() TE_THREAD_ANNOTATION_(release_capability()) {
    if (held_) mu_.Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() TE_THREAD_ANNOTATION_(release_capability()) {
    mu_.Unlock();
    held_ = false;
  }
  void Lock() TE_THREAD_ANNOTATION_(acquire_capability()) {
    mu_.Lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

// Releases `mu`, which the caller holds, for its scope and takes it again at
// the end (also when an exception leaves the scope). For a function that
// REQUIRES(mu) and lets it go around a slow call.
class TE_THREAD_ANNOTATION_(scoped_lockable) MutexUnlock {
 public:
  explicit MutexUnlock(Mutex& mu) TE_THREAD_ANNOTATION_(release_capability(mu)) : mu_(mu) {
    mu_.Unlock();
  }
  // Takes the mutex again (the analysis spells the end of a scoped release
  // as a release of the scope).
  ~MutexUnlock() TE_THREAD_ANNOTATION_(release_capability()) { mu_.Lock(); }
  MutexUnlock(const MutexUnlock&) = delete;
  MutexUnlock& operator=(const MutexUnlock&) = delete;

 private:
  Mutex& mu_;
};

// A std::condition_variable that waits on a Mutex the caller holds (the
// analysis checks it is held). Each wait releases the mutex while it blocks
// and holds it again when it returns; wakeups may be spurious, so callers
// wait in a loop on their condition.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void Wait(Mutex& mu) TE_THREAD_ANNOTATION_(requires_capability(mu)) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held: the caller's
  }
  // False when the time ran out (std::cv_status::timeout).
  template <class Rep, class Period>
  bool WaitFor(Mutex& mu, const std::chrono::duration<Rep, Period>& timeout)
      TE_THREAD_ANNOTATION_(requires_capability(mu)) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    const bool woken = cv_.wait_for(lock, timeout) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  template <class Clock, class Duration>
  bool WaitUntil(Mutex& mu, const std::chrono::time_point<Clock, Duration>& deadline)
      TE_THREAD_ANNOTATION_(requires_capability(mu)) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    const bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  void NotifyOne() noexcept { cv_.notify_one(); }
  void NotifyAll() noexcept { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace taskengine
