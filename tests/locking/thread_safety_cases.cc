// Cases for thread_safety_test.sh, one per -DCASE=n: 0 uses the Mutex
// correctly and must compile under -Werror=thread-safety; each other case
// makes one locking mistake that clang's analysis must reject.
#include "core/mutex.h"

namespace taskengine {

class Account {
 public:
  void Deposit(int n) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    AddLocked(n);
    changed_.NotifyAll();
  }
  void AwaitAtLeast(int n) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    while (balance_ < n) changed_.Wait(mu_);
  }
  int Slow() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    lock.Unlock();
    lock.Lock();
    return balance_;
  }
  int AroundSlowCall() REQUIRES(mu_) {
    {
      MutexUnlock unlock(mu_);  // a slow call would run here
    }
    return balance_;
  }

#if CASE == 1
  // Reads a guarded field without the lock.
  int Peek() { return balance_; }
#elif CASE == 2
  // Calls a function that requires the lock without it.
  void Sneak() { AddLocked(1); }
#elif CASE == 3
  // Touches the field after releasing the lock.
  void Late() {
    MutexLock lock(mu_);
    lock.Unlock();
    balance_ = 0;
  }
#elif CASE == 4
  // Waits without holding the mutex.
  void WaitUnlocked() { changed_.Wait(mu_); }
#elif CASE == 5
  // Touches the field while a MutexUnlock has released it.
  void DuringUnlock() REQUIRES(mu_) {
    MutexUnlock unlock(mu_);
    balance_ = 0;
  }
#endif

 private:
  void AddLocked(int n) REQUIRES(mu_) { balance_ += n; }

  Mutex mu_;
  CondVar changed_;
  int balance_ GUARDED_BY(mu_) = 0;
};

}  // namespace taskengine
