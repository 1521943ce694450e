#include "platform/thread_name.h"

#include <pthread.h>

#include <string>

namespace taskengine {

void NameThread(std::thread& thread, std::string_view name) {
  const std::string cut(name.substr(0, kMaxThreadNameBytes));
  // Only a name longer than the kernel keeps fails, and it was cut.
  (void)pthread_setname_np(thread.native_handle(), cut.c_str());
}

}  // namespace taskengine
