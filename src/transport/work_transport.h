// A wakeup transport between engine nodes (A3, D3): it carries "work was
// made due" from the node whose commit made it to the nodes that may run it,
// so they claim at once instead of at their next poll. The database stays the
// authority: a transport never decides who runs what, and whatever it loses,
// duplicates or delivers late only delays work to the next poll or sweep.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "taskengine/transport_stats.h"

namespace taskengine {

class WorkTransport {
 public:
  virtual ~WorkTransport() = default;
  // Starts delivering wakeups to `on_work` (called on a transport thread; it
  // must not block). Publish works before Start too.
  virtual void Start(std::function<void()> on_work) = 0;
  // Stops its threads; no call of on_work is in progress when it returns.
  virtual void Stop() = 0;
  // A commit made work due in `queue`. Never blocks on the network and never
  // fails the caller (called right after a commit, on the committing thread).
  virtual void Publish(const std::string& queue) = 0;
  virtual TransportStats stats() const = 0;
};

}  // namespace taskengine
