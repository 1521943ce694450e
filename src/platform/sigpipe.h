// Writing to a pipe or socket whose reader is gone without killing the
// process, while leaving the process-wide SIGPIPE disposition alone (an
// embedding application keeps its own).
#pragma once

#include <signal.h>

namespace taskengine {

// Blocks SIGPIPE in the calling thread for its lifetime: a write to a closed
// pipe or socket fails with EPIPE instead of raising the signal's default
// action. On destruction, a SIGPIPE that became pending meanwhile (raised by
// a write of this thread) is consumed, then the thread's previous mask is
// restored. A SIGPIPE already pending on entry is left as it was.
// Per-thread by nature: create and destroy it on the same thread.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock();
  ~ScopedSigpipeBlock();
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t old_mask_;
  bool was_pending_ = false;
};

}  // namespace taskengine
