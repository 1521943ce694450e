// The MariaDB/MySQL backend of the storage contract (D1, D3): several nodes
// share one database and the work in it, as on PostgreSQL.
//
// Design: a pool of libmariadb connections (SqlPool); every Store method is
// ONE InnoDB transaction on one connection (READ COMMITTED), made correct for
// concurrent callers on several nodes by row locks: every call about an
// execution locks its row (SELECT ... FOR UPDATE) before it decides anything,
// batches lock their rows in id order; claims, sweeps and retention take
// their rows with FOR UPDATE SKIP LOCKED; idempotency uses the unique index
// (a duplicate key answers with the execution that holds it); the admissions
// and un-parking of one lane take turns on the lane's row of lane_locks
// (locked until the transaction ends, as by the enqueue() procedure an
// application calls in its own transaction). A deadlock or lock wait timeout reruns the whole
// transaction (a few times). Reads run in REPEATABLE READ READ ONLY
// transactions (one snapshot). Status counters are striped by connection, as
// on PostgreSQL.
//
// The shared SQL (sql_statements.h, sql_store.h) runs as written, with the
// MariaDB dialect's upserts (maria_statements.h); the session's sql_mode has
// ANSI_QUOTES and PIPES_AS_CONCAT (maria_conn.h).
//
// Every timing decision uses the Clock the store was opened with; in
// production that is OpenMariaClock's, as on PostgreSQL.
//
// MariaDB has no LISTEN/NOTIFY: engines on other nodes find new work by
// polling (or through Redis wakeups when configured).
//
// Connection loss (server restart, network): the call in flight answers
// kUnavailable and changes nothing (only a loss during the COMMIT round trip
// itself leaves the outcome unknown, as for any client); a later call
// reconnects, with backoff while the server stays unreachable.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "storage/database_clock.h"
#include "storage/sql_session.h"
#include "storage/store.h"
#include "taskengine/clock.h"
#include "taskengine/random.h"

namespace taskengine {

struct MariaStoreOptions {
  // mysql://user:password@host:port/database or mariadb://...; the database
  // holds every table (created by Migrate()). Required.
  std::string url;
  Clock* clock = nullptr;          // not owned; default: the system clock
  RandomSource* random = nullptr;  // not owned; default: seeded from the clock
  // Connections in the pool (opened lazily). Default: 4.
  int pool_size = 4;
  // Reconnect backoff while the server is unreachable (Clock::Steady).
  // Defaults: 100 ms, 2 s.
  std::chrono::milliseconds reconnect_backoff_min{100};
  std::chrono::milliseconds reconnect_backoff_max{2000};
  // How often a transaction that hit a deadlock or a lock wait timeout is run
  // again before the call answers kUnavailable. Default: 5.
  int max_retries = 5;
  // Test seam: called in every write transaction after its statements and
  // counter changes, just before COMMIT, on the transaction's session, with
  // how many times this transaction ran before (0 the first time). An error
  // fails the attempt as a failing statement would: a deadlock or lock wait
  // timeout met here runs the whole transaction again. Default: none.
  std::function<Status(storage_internal::SqlSession& session, int attempt)>
      before_commit_for_testing;
};

// Validates the options and opens the first connection (kUnavailable when the
// server cannot be reached, kInvalidArgument for bad options). Does NOT
// migrate: call Migrate().
Result<std::unique_ptr<Store>> OpenMariaStore(const MariaStoreOptions& options);

// A DatabaseClock (storage/database_clock.h) that follows the server's clock
// (SYSDATE), over a connection of its own; kUnavailable when the server
// cannot be reached. Open the store with it so that every node judges leases,
// backoff and schedules by the database's time.
Result<std::unique_ptr<DatabaseClock>> OpenMariaClock(
    const std::string& url, std::chrono::milliseconds resample = std::chrono::seconds(5));

}  // namespace taskengine
