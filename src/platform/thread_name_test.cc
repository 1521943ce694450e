#include "platform/thread_name.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <future>
#include <string>

namespace taskengine {
namespace {

// The calling thread's name as the kernel shows it (/proc/self/task/<tid>/comm).
std::string KernelName() {
  std::ifstream in("/proc/self/task/" + std::to_string(::syscall(SYS_gettid)) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

// The name a thread started by NamedThread sees once NamedThread returned.
std::string NameSeenBy(std::string_view name) {
  std::promise<void> named;
  std::string seen;
  std::thread thread = NamedThread(name, [&, after = named.get_future()] {
    after.wait();
    seen = KernelName();
  });
  named.set_value();
  thread.join();
  return seen;
}

TEST(ThreadNameTest, TheKernelShowsTheNameCutTo15Bytes) {
  EXPECT_EQ(NameSeenBy("te-writer"), "te-writer");
  EXPECT_EQ(NameSeenBy("te-a-name-longer-than-fifteen"), "te-a-name-longe");
}

}  // namespace
}  // namespace taskengine
