// The PostgreSQL backend of the storage contract (D1, D2): several nodes
// share one database and the work in it.
//
// Design: a small pool of libpq connections; every Store method is ONE
// transaction on one connection (READ COMMITTED), made correct for concurrent
// callers on several nodes by row locks rather than by serializable
// isolation: every call about an execution locks its row (SELECT ... FOR
// UPDATE) before it decides anything; claims and sweeps take their batch with
// FOR UPDATE SKIP LOCKED; idempotency and upserts use the unique indexes (ON
// CONFLICT); lane bookkeeping takes a transaction-scoped advisory lock per
// lane. A deadlock or serialization failure reruns the whole transaction (a
// few times). Reads run in REPEATABLE READ READ ONLY transactions.
//
// Wakeups (A3): transactions that make work due notify '<schema>_work' (at
// most once each, delivered at commit); SetWorkListener LISTENs on a
// dedicated connection with its own thread that reconnects with backoff and
// calls the listener once after a reconnect.
//
// Every timing decision uses the Clock the store was opened with, exactly as
// the SQLite backend does. In production, open it with a DatabaseClock so all
// nodes share PostgreSQL's clock.
//
// Connection loss (server restart, network): the call in flight answers
// kUnavailable and changes nothing (its transaction never committed; only a
// loss during the COMMIT round trip itself leaves the outcome unknown, as
// for any client); the connection is dropped and a later call reconnects,
// with backoff while the server stays unreachable. The store object never
// needs reopening.
//
// A6: Migrate() also installs the SQL function <schema>.enqueue(job, payload,
// idempotency_key, tenant, run_at, lane_key, requester, fingerprint) with
// which an application admits an execution inside its own transaction (see
// pg_schema.h, version 2).
//
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "storage/database_clock.h"
#include "storage/store.h"
#include "taskengine/clock.h"
#include "taskengine/random.h"

namespace taskengine {

struct PostgresStoreOptions {
  // libpq connection string or URL, e.g. postgres://user@host:5432/db. Required.
  std::string url;
  // The schema that holds every table (created by Migrate()). Default: taskengine.
  std::string schema = "taskengine";
  Clock* clock = nullptr;          // not owned; default: the system clock
  RandomSource* random = nullptr;  // not owned; default: seeded from the clock
  // Connections in the pool (opened lazily). Default: 4.
  int pool_size = 4;
  // Reconnect backoff while the server is unreachable: first wait, doubling
  // up to the cap, by the clock's monotonic reading (Clock::Steady). The
  // wake-up listener's own reconnect waits real time. Defaults: 100 ms, 2 s.
  std::chrono::milliseconds reconnect_backoff_min{100};
  std::chrono::milliseconds reconnect_backoff_max{2000};
  // How often a transaction that hit a deadlock or serialization failure is
  // run again before the call answers kUnavailable. Default: 5.
  int max_retries = 5;
};

// Validates the options and opens the first connection (kUnavailable when the
// server cannot be reached, kInvalidArgument for bad options). Does NOT
// migrate: call Migrate() (the engine and `taskengine migrate` do).
Result<std::unique_ptr<Store>> OpenPostgresStore(const PostgresStoreOptions& options);

// True when `schema` is a valid schema name for the store: [a-z_][a-z0-9_]{0,62}.
bool IsValidPostgresSchemaName(std::string_view schema);

// A DatabaseClock (storage/database_clock.h) that follows PostgreSQL's
// clock_timestamp(), over a connection of its own; kUnavailable when the
// server cannot be reached.
Result<std::unique_ptr<DatabaseClock>> OpenPostgresClock(
    const std::string& url, std::chrono::milliseconds resample = std::chrono::seconds(5));

}  // namespace taskengine
