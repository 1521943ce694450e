// Versioned schema migrations of the SQLite backend (D4). Migration N moves
// the schema from version N-1 to N. Never edit a released migration: add one.
#pragma once

#include <array>

#include "storage/sql_statements.h"  // TE_SQLITE_HOLDS_LANE
#include "storage/store_rules.h"

namespace taskengine::sqlite {

inline constexpr const char* kMigrations[] = {
    // Version 1: job definitions, executions, logs.
    R"sql(
CREATE TABLE job_definitions (
  name TEXT PRIMARY KEY,
  display_name TEXT NOT NULL DEFAULT '',
  handler TEXT NOT NULL,
  queue TEXT NOT NULL,
  scope INTEGER NOT NULL,
  schedule TEXT NOT NULL DEFAULT '',
  timezone TEXT NOT NULL DEFAULT 'UTC',
  timeout_ms INTEGER NOT NULL,
  lease_ms INTEGER NOT NULL,
  max_attempts INTEGER NOT NULL,
  backoff_base_ms INTEGER NOT NULL,
  backoff_cap_ms INTEGER NOT NULL,
  max_permanent_attempts INTEGER NOT NULL,
  max_ambiguous_attempts INTEGER NOT NULL,
  max_consecutive_lease_expiries INTEGER NOT NULL,
  lane_template TEXT NOT NULL DEFAULT '',
  config_json TEXT NOT NULL DEFAULT '{}',
  enabled INTEGER NOT NULL DEFAULT 1,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE executions (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job TEXT NOT NULL,
  tenant TEXT NOT NULL DEFAULT '',
  queue TEXT NOT NULL,
  status INTEGER NOT NULL,
  trigger INTEGER NOT NULL,
  requester TEXT NOT NULL DEFAULT '',
  worker TEXT NOT NULL DEFAULT '',
  attempt INTEGER NOT NULL DEFAULT 0,
  idempotency_key TEXT,
  payload TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  result TEXT,
  progress INTEGER NOT NULL DEFAULT 0,
  error TEXT NOT NULL DEFAULT '',
  failure_class INTEGER NOT NULL DEFAULT 0,
  scheduled_at INTEGER NOT NULL DEFAULT 0,
  run_at INTEGER NOT NULL,
  queued_at INTEGER NOT NULL,
  started_at INTEGER NOT NULL DEFAULT 0,
  finished_at INTEGER NOT NULL DEFAULT 0,
  claim_version INTEGER NOT NULL DEFAULT 0,
  lease_expires_at INTEGER NOT NULL DEFAULT 0,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  lane_key TEXT NOT NULL DEFAULT '',
  parent_id INTEGER NOT NULL DEFAULT 0,
  consecutive_lease_expiries INTEGER NOT NULL DEFAULT 0,
  permanent_failures INTEGER NOT NULL DEFAULT 0,
  ambiguous_failures INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL,
  backoff_base_ms INTEGER NOT NULL,
  backoff_cap_ms INTEGER NOT NULL,
  max_permanent_attempts INTEGER NOT NULL,
  max_ambiguous_attempts INTEGER NOT NULL,
  max_consecutive_lease_expiries INTEGER NOT NULL,
  lease_ms INTEGER NOT NULL
) STRICT;

-- A2: idempotency scope is (job, tenant, key).
CREATE UNIQUE INDEX executions_idempotency ON executions(job, tenant, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
-- "Next due execution of queue Q" is a seek into this index at any depth.
CREATE INDEX executions_due ON executions(queue, run_at, id) WHERE status = 0;
-- The sweeper's staleness gate: running executions by lease expiry.
CREATE INDEX executions_leases ON executions(lease_expires_at) WHERE status = 1;
-- Executions that need an operator, by status.
CREATE INDEX executions_attention ON executions(status, id) WHERE status IN (3, 4);
CREATE INDEX executions_by_job ON executions(job, id);
CREATE INDEX executions_by_tenant ON executions(tenant, id) WHERE tenant <> '';

CREATE TABLE execution_logs (
  id INTEGER PRIMARY KEY,
  execution_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  at INTEGER NOT NULL,
  level INTEGER NOT NULL,
  message TEXT NOT NULL
) STRICT;
CREATE INDEX execution_logs_by_execution ON execution_logs(execution_id, id);
)sql",
    // Version 2: effect ledger, audit log, replay approvals, grants, lanes,
    // payload schema versions.
    R"sql(
ALTER TABLE job_definitions ADD COLUMN accepted_schema_versions TEXT NOT NULL DEFAULT '';
ALTER TABLE job_definitions ADD COLUMN max_unsupported_schema_attempts INTEGER NOT NULL DEFAULT 3;
ALTER TABLE executions ADD COLUMN max_unsupported_schema_attempts INTEGER NOT NULL DEFAULT 3;
-- O1: a lane member waits "parked" (not due) while an older member of its lane
-- is open; finishing the head un-parks the next one, so claims stay index seeks.
ALTER TABLE executions ADD COLUMN lane_parked INTEGER NOT NULL DEFAULT 0;
DROP INDEX executions_due;
CREATE INDEX executions_due ON executions(queue, run_at, id) WHERE status = 0 AND lane_parked = 0;
CREATE INDEX executions_lane_open ON executions(lane_key, id)
  WHERE lane_key <> '' AND status IN (0, 1, 3, 4);

-- E1: one row per effect key (execution id, name).
CREATE TABLE effects (
  execution_id INTEGER NOT NULL,
  name TEXT NOT NULL,
  committed INTEGER NOT NULL DEFAULT 0,
  reserved_by INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  reserved_at INTEGER NOT NULL,
  committed_at INTEGER NOT NULL DEFAULT 0,
  detail TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (execution_id, name)
) STRICT, WITHOUT ROWID;

-- X4: append-only; records younger than 365 days cannot be changed or removed.
CREATE TABLE audit_log (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at INTEGER NOT NULL,
  actor TEXT NOT NULL,
  tenant TEXT NOT NULL DEFAULT '',
  action TEXT NOT NULL,
  target TEXT NOT NULL,
  before_json TEXT NOT NULL DEFAULT '',
  after_json TEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX audit_log_by_target ON audit_log(target, id);
CREATE TRIGGER audit_log_append_only BEFORE UPDATE ON audit_log
BEGIN
  SELECT RAISE(ABORT, 'the audit log is append-only');
END;
CREATE TRIGGER audit_log_retention BEFORE DELETE ON audit_log
  WHEN old.at > CAST(strftime('%s', 'now') AS INTEGER) * 1000 - 31536000000
BEGIN
  SELECT RAISE(ABORT, 'the audit log is append-only (records younger than 365 days are kept)');
END;

-- R1: replays waiting for a second operator (four-eyes).
CREATE TABLE replay_requests (
  execution_id INTEGER PRIMARY KEY,
  requested_by TEXT NOT NULL,
  reason TEXT NOT NULL,
  requested_at INTEGER NOT NULL,
  ambiguous INTEGER NOT NULL DEFAULT 0
) STRICT;

-- R1: which principals may act for which tenants ("*" = all).
CREATE TABLE grants (
  principal TEXT NOT NULL,
  tenant TEXT NOT NULL,
  PRIMARY KEY (principal, tenant)
) STRICT, WITHOUT ROWID;
)sql",
    // Version 3: history of attempts that did not succeed.
    R"sql(
CREATE TABLE execution_attempts (
  execution_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  claim_version INTEGER NOT NULL,
  worker TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  ended_at INTEGER NOT NULL,
  outcome INTEGER NOT NULL,
  failure_class INTEGER NOT NULL,
  released INTEGER NOT NULL,
  error TEXT NOT NULL,
  PRIMARY KEY (execution_id, claim_version)
) STRICT, WITHOUT ROWID;
)sql",
    // Version 4: tenants, scheduler locks and per-job schedule state, catch-up
    // and window settings.
    R"sql(
ALTER TABLE job_definitions ADD COLUMN catch_up INTEGER NOT NULL DEFAULT 0;
ALTER TABLE job_definitions ADD COLUMN catch_up_window_ms INTEGER NOT NULL DEFAULT 600000;
ALTER TABLE job_definitions ADD COLUMN window_ms INTEGER NOT NULL DEFAULT 0;
CREATE TABLE tenants (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL DEFAULT '',
  active INTEGER NOT NULL DEFAULT 1,
  created_at INTEGER NOT NULL
) STRICT;
CREATE TABLE scheduler_locks (
  name TEXT PRIMARY KEY,
  holder TEXT NOT NULL,
  expires_at INTEGER NOT NULL
) STRICT;
CREATE TABLE schedule_state (
  job TEXT PRIMARY KEY,
  last_fire_at INTEGER NOT NULL DEFAULT 0,
  last_evaluated_at INTEGER NOT NULL DEFAULT 0,
  skipped_fires INTEGER NOT NULL DEFAULT 0,
  last_skipped_at INTEGER NOT NULL DEFAULT 0
) STRICT;
)sql",
    // Version 5: users, API tokens (hashed), dashboard sessions (hashed).
    R"sql(
CREATE TABLE users (
  name TEXT PRIMARY KEY,
  password_hash TEXT NOT NULL,
  scopes TEXT NOT NULL,
  tenants TEXT NOT NULL,
  disabled INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL
) STRICT;
CREATE TABLE api_tokens (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  secret_hash TEXT NOT NULL UNIQUE,
  principal TEXT NOT NULL,
  scopes TEXT NOT NULL,
  tenants TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL DEFAULT 0,
  revoked_at INTEGER NOT NULL DEFAULT 0,
  last_used_at INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE TABLE sessions (
  id_hash TEXT PRIMARY KEY,
  user TEXT NOT NULL,
  csrf_token TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  last_seen_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
) STRICT;
)sql",
    // Version 6: the worker registry (W5).
    R"sql(
CREATE TABLE workers (
  id TEXT PRIMARY KEY,
  hostname TEXT NOT NULL,
  pid INTEGER NOT NULL,
  state INTEGER NOT NULL,
  current_execution INTEGER NOT NULL DEFAULT 0,
  processed INTEGER NOT NULL DEFAULT 0,
  failed INTEGER NOT NULL DEFAULT 0,
  started_at INTEGER NOT NULL,
  last_heartbeat_at INTEGER NOT NULL
) STRICT;
)sql",
    // Version 7: status counters per queue and hourly outcome counts, kept by
    // the writer in the same transactions as the status changes (P8).
    R"sql(
CREATE TABLE status_counts (
  queue TEXT NOT NULL,
  status INTEGER NOT NULL,
  count INTEGER NOT NULL,
  PRIMARY KEY (queue, status)
) STRICT, WITHOUT ROWID;
INSERT INTO status_counts (queue, status, count)
  SELECT queue, status, COUNT(*) FROM executions GROUP BY queue, status;
CREATE TABLE hourly_outcomes (
  hour INTEGER NOT NULL,
  status INTEGER NOT NULL,
  count INTEGER NOT NULL,
  PRIMARY KEY (hour, status)
) STRICT, WITHOUT ROWID;
INSERT INTO hourly_outcomes (hour, status, count)
  SELECT finished_at / 3600000, status, COUNT(*) FROM executions
  WHERE finished_at > 0 AND status IN (2, 3, 4, 5, 6) GROUP BY 1, 2;
)sql",
    // Version 8: lanes belong to a tenant (O1): a lane is (tenant, lane key).
    // Members that waited behind another tenant's member of the same key
    // become their own lane's head.
    R"sql(
DROP INDEX executions_lane_open;
CREATE INDEX executions_lane_open ON executions(tenant, lane_key, id)
  WHERE lane_key <> '' AND status IN (0, 1, 3, 4);
UPDATE executions SET lane_parked = 0
  WHERE lane_parked = 1 AND lane_key <> '' AND status IN (0, 1, 3, 4)
    AND id = (SELECT MIN(o.id) FROM executions o
              WHERE o.tenant = executions.tenant AND o.lane_key = executions.lane_key
                AND o.status IN (0, 1, 3, 4));
)sql",
    // Version 9: L4, whether the handler of the current claim started. A claim
    // that prefetches writes 0 and the pool marks the lease when a handler
    // takes it; the sweeper requeues an expired lease still at 0 for free.
    // Leases of older binaries count as started.
    R"sql(
ALTER TABLE executions ADD COLUMN handler_started INTEGER NOT NULL DEFAULT 1;
)sql",
    // Version 10: product.md §1, the config file seeds definitions and the
    // database is the source of truth. The digest of the definition the file
    // last seeded into a row ('' = not seeded, or seeded by an older binary):
    // a row whose definition no longer has this digest was edited at runtime.
    R"sql(
ALTER TABLE job_definitions ADD COLUMN seed_digest TEXT NOT NULL DEFAULT '';
)sql",
    // Version 11: W5, what a worker row tells (issue 14): its kind (0 remote,
    // 1 in-process pool), handler threads, executions running now and their
    // ids (a comma-separated list, at most kMaxWorkerCurrent). Rows of older
    // binaries are remote workers with current_execution as their one id.
    R"sql(
ALTER TABLE workers ADD COLUMN kind INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN threads INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN busy INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workers ADD COLUMN current_executions TEXT NOT NULL DEFAULT '';
)sql",
    // Version 12: tenant-scoped stats and execution search (X2, I1). The
    // status counters and hourly outcomes gain the tenant ('' for global jobs),
    // recounted once from the executions; indexes serve the search by status
    // and by queued or finish time in id order (the by-status index takes in
    // the attention index, which covered failed and quarantined only).
    R"sql(
DROP TABLE status_counts;
CREATE TABLE status_counts (
  tenant TEXT NOT NULL,
  queue TEXT NOT NULL,
  status INTEGER NOT NULL,
  count INTEGER NOT NULL,
  PRIMARY KEY (tenant, queue, status)
) STRICT, WITHOUT ROWID;
INSERT INTO status_counts (tenant, queue, status, count)
  SELECT tenant, queue, status, COUNT(*) FROM executions GROUP BY tenant, queue, status;
DROP TABLE hourly_outcomes;
CREATE TABLE hourly_outcomes (
  hour INTEGER NOT NULL,
  tenant TEXT NOT NULL,
  status INTEGER NOT NULL,
  count INTEGER NOT NULL,
  PRIMARY KEY (hour, tenant, status)
) STRICT, WITHOUT ROWID;
INSERT INTO hourly_outcomes (hour, tenant, status, count)
  SELECT finished_at / 3600000, tenant, status, COUNT(*) FROM executions
  WHERE finished_at > 0 AND status IN (2, 3, 4, 5, 6) GROUP BY 1, 2, 3;
DROP INDEX executions_attention;
CREATE INDEX executions_by_status ON executions(status, id);
CREATE INDEX executions_by_queued_at ON executions(queued_at);
CREATE INDEX executions_by_finished_at ON executions(finished_at) WHERE finished_at > 0;
)sql",
    // Version 13: failure notifications (I6). A job's notify targets; the
    // outbox of endings still to be told (written in the transaction of the
    // ending) and each job's notifier state (rate-limit window, suppressed
    // failures).
    R"sql(
ALTER TABLE job_definitions ADD COLUMN notify_on_failure INTEGER NOT NULL DEFAULT 1;
ALTER TABLE job_definitions ADD COLUMN notify_targets TEXT NOT NULL DEFAULT '';
CREATE TABLE notify_outbox (
  execution_id INTEGER PRIMARY KEY,
  job TEXT NOT NULL,
  ended_at INTEGER NOT NULL
) STRICT;
CREATE TABLE notify_state (
  job TEXT PRIMARY KEY,
  sent_at TEXT NOT NULL,
  suppressed INTEGER NOT NULL,
  suppressed_since INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
)sql",
    // Version 14: the session's user column has the name it has on every
    // other backend (`user` is a reserved word there).
    R"sql(
ALTER TABLE sessions RENAME COLUMN user TO user_name;
)sql",
    // Version 15: each payload in a row of its own, written once at
    // admission. SQLite rewrites the whole row on every UPDATE, overflow pages
    // included: in the execution's row, a payload was copied again at each
    // claim and each ending (TE_SQLITE_PAYLOAD reads it).
    R"sql(
CREATE TABLE execution_payloads (
  execution_id INTEGER PRIMARY KEY,
  payload TEXT NOT NULL
) STRICT;
INSERT INTO execution_payloads (execution_id, payload) SELECT id, payload FROM executions;
ALTER TABLE executions DROP COLUMN payload;
)sql",
    // Version 16: the index of statuses leaves running executions out. Each
    // execution is running for moments between two status changes; with its
    // entries in this index, a claim and an ending each moved one. The
    // leases index holds the running ones. A search by another status says
    // `status <> 1`, which is how SQLite's planner learns that this index
    // holds its rows.
    R"sql(
DROP INDEX executions_by_status;
CREATE INDEX executions_by_status ON executions(status, id) WHERE status <> 1;
)sql",
    // Version 17: the index of open lanes names the statuses that hold a lane
    // as TE_SQLITE_HOLDS_LANE does (sql_statements.h), not as an IN list:
    // SQLite built a temporary b-tree for the list at each row it wrote.
    R"sql(
DROP INDEX executions_lane_open;
CREATE INDEX executions_lane_open ON executions(tenant, lane_key, id)
  WHERE lane_key <> '' AND )sql" TE_SQLITE_HOLDS_LANE R"sql(;
)sql",
};

inline constexpr int kSchemaVersion = static_cast<int>(std::size(kMigrations));

// How the searches read the indexes: since version 16, executions_by_status
// holds no running execution, and a search for those names the leases index.
inline constexpr storage_internal::ListIndexing kListIndexing{.status_index_without_running = true,
                                                              .index_hints = true};

}  // namespace taskengine::sqlite
