// Names the calling thread as the operating system shows it (top -H, ps -L,
// perf's comm, gdb's thread list): the engine's long-lived threads carry
// "te-" names ("te-writer", "te-worker", "te-http-io", ...).
#pragma once

#include <cstddef>
#include <string_view>

namespace taskengine {

// Linux keeps 15 bytes of a thread's name: a longer one is cut there.
inline constexpr std::size_t kMaxThreadNameBytes = 15;

void SetThreadName(std::string_view name);

}  // namespace taskengine
