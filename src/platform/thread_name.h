// Threads with names the operating system shows (top -H, ps -L, perf's comm,
// gdb's thread list): the engine's long-lived threads carry "te-" names
// ("te-writer", "te-worker", "te-http-io", ...).
#pragma once

#include <cstddef>
#include <string_view>
#include <thread>
#include <utility>

namespace taskengine {

// Linux keeps 15 bytes of a thread's name: a longer one is cut there.
inline constexpr std::size_t kMaxThreadNameBytes = 15;

// Names `thread` (running or not yet scheduled).
void NameThread(std::thread& thread, std::string_view name);

// Starts `body` on a new thread, named `name` before this returns.
template <typename F>
std::thread NamedThread(std::string_view name, F&& body) {
  std::thread thread(std::forward<F>(body));
  NameThread(thread, name);
  return thread;
}

}  // namespace taskengine
