#include "platform/thread_name.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

namespace taskengine {
namespace {

// The name as the kernel shows it (/proc/self/task/<tid>/comm).
std::string KernelName() {
  std::ifstream in("/proc/self/task/" + std::to_string(::syscall(SYS_gettid)) + "/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

TEST(ThreadNameTest, TheKernelShowsTheNameCutTo15Bytes) {
  std::string shown, cut;
  std::thread([&] {
    SetThreadName("te-writer");
    shown = KernelName();
    SetThreadName("te-a-name-longer-than-fifteen");
    cut = KernelName();
  }).join();
  EXPECT_EQ(shown, "te-writer");
  EXPECT_EQ(cut, "te-a-name-longe");
}

}  // namespace
}  // namespace taskengine
