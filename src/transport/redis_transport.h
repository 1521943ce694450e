// The Redis transport (D3) on hiredis: wakeups between engine nodes, for
// backends without a notification channel of their own (MariaDB) and for any
// deployment that wants pickup within milliseconds of a dispatch on another
// node.
//
// Keys (P = the prefix, N = a node id):
//   P:nodes           set of the node ids that take wakeups
//   P:node:N          N's liveness; expires node_ttl_ms after N's last heartbeat
//   P:pending:N       N's ready list: one entry per flush of another node's
//                     commits ("<origin>\t<ms>\t<queue>"), trimmed to max_list
//   P:processing:N    what N reserved from its ready list and has not acked
//
// A commit that made work due publishes (Publish, after the commit: A3 puts
// the work itself in the database first); a publisher thread pushes one entry
// to the ready list of every live node, itself included. Each node's consumer
// reserves with BLMOVE P:pending:N -> P:processing:N, wakes its engine (the
// claim then goes to the database, which decides who runs what), and acks by
// emptying P:processing:N. A node moves what it had reserved but not acked
// back to its ready list when it reconnects; a node gone for node_ttl_ms is
// dropped from P:nodes with its lists by whichever node notices.
//
// Every node gets its own list instead of all sharing one, so a node that is
// busy or only dispatches cannot swallow the wakeup an idle node needed.
//
// Redis down, flushed or holding stale entries only delays work to the next
// poll: Publish never blocks the committing thread (it hands the queue to the
// publisher thread, which coalesces what arrives while it is sending) and
// never fails it; a wakeup without due work costs one empty claim.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "taskengine/clock.h"
#include "taskengine/status.h"
#include "transport/redis_url.h"
#include "transport/work_transport.h"

namespace taskengine {

struct RedisTransportOptions {
  std::string url;
  // Nodes that share work must share the prefix; deployments that share one
  // Redis must not. 1..64 bytes of [A-Za-z0-9_.:-]. Default: "taskengine".
  std::string prefix = "taskengine";
  // This node's id in the key names. Default (empty): <hostname>:<pid>:<random>.
  std::string node_id;
  Millis connect_timeout_ms = 1'000;
  Millis command_timeout_ms = 1'000;
  // How long one BLMOVE blocks; heartbeats and Stop() are checked between.
  Millis block_ms = 1'000;
  // A node whose heartbeat is older than this is gone.
  Millis node_ttl_ms = 10'000;
  Millis reconnect_min_ms = 100;
  Millis reconnect_max_ms = 2'000;
  // Wakeups kept per ready list; older ones are trimmed.
  int max_list = 1'024;
};

// kInvalidArgument for a bad url, prefix, node id or setting. Does not
// connect: a Redis that is down when the engine starts only delays wakeups.
Result<std::unique_ptr<WorkTransport>> OpenRedisTransport(RedisTransportOptions options);

}  // namespace taskengine
