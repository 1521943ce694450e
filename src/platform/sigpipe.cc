#include "platform/sigpipe.h"

#include <pthread.h>

#include <cerrno>
#include <ctime>

namespace taskengine {
namespace {

sigset_t PipeSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  return set;
}

bool SigpipePending() {
  sigset_t pending;
  sigemptyset(&pending);
  sigpending(&pending);
  return sigismember(&pending, SIGPIPE) == 1;
}

}  // namespace

ScopedSigpipeBlock::ScopedSigpipeBlock() {
  const sigset_t pipe_set = PipeSet();
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask_);
  was_pending_ = SigpipePending();
}

ScopedSigpipeBlock::~ScopedSigpipeBlock() {
  if (!was_pending_ && SigpipePending()) {
    const sigset_t pipe_set = PipeSet();
    const timespec zero{0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

}  // namespace taskengine
