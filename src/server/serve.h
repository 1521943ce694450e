// `taskengine serve`: run the engine until SIGTERM or SIGINT, then stop
// gracefully (L6).
#pragma once

#include "server/config.h"
#include "taskengine/status.h"

namespace taskengine {

// Blocks SIGTERM and SIGINT in the calling thread (every thread started later
// inherits the mask, so only sigwait sees them), opens the engine in
// EngineMode::kServe, logs what it serves, and waits for one of the signals.
// Then it stops the engine: claiming stops, running handlers may finish for up
// to config.shutdown_grace_ms, and the leases that remain are released. A
// second signal during that wait ends the process at once with exit code 5
// (leases left behind are recovered by a sweeper when they expire).
// Returns ok after a graceful stop; the OpenEngine error otherwise (nothing
// keeps running then). SIGTERM and SIGINT stay blocked on return, so a late
// signal cannot kill the process while it exits.
// The REST API listens on config.http (logged as "listening on
// http://HOST:PORT" with the bound port, so port 0 can be discovered) behind
// the store's users, tokens and sessions, or as "anonymous" when auth is off.
// The HTTP server stops first on shutdown (in-flight requests may finish).
// kInvalidArgument before anything starts when auth is off on a non-loopback
// host; kUnavailable when the address cannot be bound.
// REQUIRES: no other thread of the process is running yet.
Status Serve(const ServerConfig& config);

// kInvalidArgument when `http` turns auth off on a non-loopback host.
Status CheckHttpConfig(const HttpConfig& http);

}  // namespace taskengine
