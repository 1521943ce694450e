#include "platform/sigpipe.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

namespace taskengine {
namespace {

bool Blocked() {
  sigset_t mask;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  return sigismember(&mask, SIGPIPE) == 1;
}

bool Pending() {
  sigset_t pending;
  sigpending(&pending);
  return sigismember(&pending, SIGPIPE) == 1;
}

sigset_t PipeSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  return set;
}

// Blocks SIGPIPE in this thread; the mask before.
sigset_t BlockPipe() {
  const sigset_t pipe_set = PipeSet();
  sigset_t before;
  pthread_sigmask(SIG_BLOCK, &pipe_set, &before);
  return before;
}

// Writes to a stream socket whose peer is closed; the errno of the write
// that failed.
int WriteToClosedPeer() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return -1;
  ::close(fds[1]);
  const char byte = 'x';
  const int rc = static_cast<int>(::write(fds[0], &byte, 1));
  const int err = rc < 0 ? errno : 0;
  ::close(fds[0]);
  return err;
}

TEST(ScopedSigpipeBlockTest, AWriteToAClosedPeerFailsWithEpipeAndLeavesNothingPending) {
  // The default disposition (terminate) is in force: without the guard the
  // write below would kill this test.
  ASSERT_EQ(signal(SIGPIPE, SIG_DFL), SIG_DFL);
  ASSERT_FALSE(Blocked());
  {
    ScopedSigpipeBlock guard;
    EXPECT_TRUE(Blocked());
    EXPECT_EQ(WriteToClosedPeer(), EPIPE);
    EXPECT_TRUE(Pending());
  }
  EXPECT_FALSE(Blocked());
  EXPECT_FALSE(Pending());
}

TEST(ScopedSigpipeBlockTest, NestsAndKeepsAMaskThatAlreadyBlockedIt) {
  const sigset_t before = BlockPipe();
  {
    ScopedSigpipeBlock outer;
    {
      ScopedSigpipeBlock inner;
      EXPECT_EQ(WriteToClosedPeer(), EPIPE);
    }
    EXPECT_FALSE(Pending());
    EXPECT_TRUE(Blocked());
  }
  EXPECT_TRUE(Blocked());
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &before, nullptr), 0);
}

TEST(ScopedSigpipeBlockTest, ASignalPendingOnEntryIsLeftPending) {
  const sigset_t before = BlockPipe();
  ASSERT_EQ(pthread_kill(pthread_self(), SIGPIPE), 0);
  ASSERT_TRUE(Pending());
  { ScopedSigpipeBlock guard; }
  EXPECT_TRUE(Pending());
  // Consume it before unblocking, so the test process lives on.
  const timespec zero{0, 0};
  const sigset_t pipe_set = PipeSet();
  EXPECT_EQ(sigtimedwait(&pipe_set, nullptr, &zero), SIGPIPE);
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &before, nullptr), 0);
}

TEST(ScopedSigpipeBlockTest, EachThreadGuardsItself) {
  std::thread t([] {
    ScopedSigpipeBlock guard;
    EXPECT_EQ(WriteToClosedPeer(), EPIPE);
  });
  t.join();
  EXPECT_FALSE(Blocked());
  EXPECT_FALSE(Pending());
}

}  // namespace
}  // namespace taskengine
