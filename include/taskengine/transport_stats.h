// What the wakeup transport between engine nodes did (EngineOptions::redis_url).
#pragma once

#include <cstdint>

namespace taskengine {

// Counts are since the engine opened.
struct TransportStats {
  bool enabled = false;         // a transport is configured
  bool connected = false;       // it can take wakeups now
  std::int64_t published = 0;   // wakeups sent (one per flush, to every node)
  std::int64_t dropped = 0;     // wakeups not sent (server unreachable)
  std::int64_t received = 0;    // wakeups taken from this node's list
  std::int64_t reconnects = 0;  // connections made again after a loss
  std::int64_t nodes = 0;       // live nodes seen at the last refresh
};

}  // namespace taskengine
