// Versioned schema migrations of the MariaDB backend (D4), for MariaDB 10.11.
// Migration N moves the schema from version N-1 to N; the version lives in
// the one-row table schema_version. Never edit a released migration: add one.
//
// Version 1 is the final state of the PostgreSQL schema
// (src/storage/postgres/pg_schema.h, version 12): the same tables, columns,
// defaults, primary keys, unique and secondary indexes, and the same
// conventions as the other backends (times are milliseconds since the epoch
// in BIGINT, statuses and enums INT codes), so the backends share the row
// mapping, the state machine and the statements of sql_statements.h. Not
// here: PostgreSQL's stored functions (enqueue, admit_from_sql) and the
// append-only trigger of audit_log (X4).
//
// How it is transcribed:
// - Every table is InnoDB, utf8mb4, collation utf8mb4_nopad_bin: text
//   compares byte for byte, case and trailing spaces included, as on
//   PostgreSQL and SQLite. (utf8mb4_bin is a PAD SPACE collation: there
//   'alice' = 'alice ', and the two would be one key of grants.)
// - PostgreSQL's integer is INT, bigint BIGINT, an identity column
//   `id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY`.
// - A text column in a primary key, unique or secondary index is a VARCHAR
//   long enough for every value the engine accepts (the source of each limit
//   is named at the column); InnoDB keys are at most 3072 bytes, 4 per
//   character in utf8mb4, and every index here stays below that. Other text
//   is TEXT (at most 65,535 bytes: names, lists, digests, reasons — each far
//   shorter) or LONGTEXT where it may be large (payloads, results, errors,
//   logs, JSON, effect details).
// - `trigger` is a reserved word in MariaDB and is written "trigger" (the
//   session runs with ANSI_QUOTES); no other column or table name here is
//   reserved (maria_schema_test checks each one).
// - MariaDB has no partial indexes: each partial index of PostgreSQL is a full
//   index. Where the partial predicate is what makes the index a seek (the
//   due, lease and open-lane indexes), its columns join the key, so that the
//   rows the predicate left out are skipped by the key rather than read.
// - Indexes are declared in their table's CREATE TABLE, and every statement
//   is idempotent (IF NOT EXISTS, INSERT IGNORE): MariaDB's DDL is not
//   transactional, each statement commits on its own, so a migration stopped
//   half-way leaves whole tables and simply runs again.
#pragma once

#include <iterator>

namespace taskengine::maria {

inline constexpr const char* kMigrations[] = {
    // Version 1: everything PostgreSQL has at its version 12.
    R"sql(
-- The schema version (D4). The store may create it first, to read the
-- version, before any migration has run.
CREATE TABLE IF NOT EXISTS schema_version (
  version INT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;

-- Job definitions (the database is the source of truth, product.md §1):
-- policy, schedule and lane template of each job (A1, L1, T1-T5, I6).
CREATE TABLE IF NOT EXISTS job_definitions (
  -- IsValidJobName: [a-z0-9][a-z0-9._-]{0,99}.
  name VARCHAR(100) NOT NULL PRIMARY KEY,
  display_name TEXT NOT NULL DEFAULT '',
  handler TEXT NOT NULL,
  queue TEXT NOT NULL,
  scope INT NOT NULL,
  schedule TEXT NOT NULL DEFAULT '',
  timezone TEXT NOT NULL DEFAULT 'UTC',
  timeout_ms BIGINT NOT NULL,
  lease_ms BIGINT NOT NULL,
  max_attempts INT NOT NULL,
  backoff_base_ms BIGINT NOT NULL,
  backoff_cap_ms BIGINT NOT NULL,
  max_permanent_attempts INT NOT NULL,
  max_ambiguous_attempts INT NOT NULL,
  max_consecutive_lease_expiries INT NOT NULL,
  lane_template TEXT NOT NULL DEFAULT '',
  config_json LONGTEXT NOT NULL DEFAULT '{}',
  enabled INT NOT NULL DEFAULT 1,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  accepted_schema_versions TEXT NOT NULL DEFAULT '',
  max_unsupported_schema_attempts INT NOT NULL DEFAULT 3,
  catch_up INT NOT NULL DEFAULT 0,
  catch_up_window_ms BIGINT NOT NULL DEFAULT 600000,
  window_ms BIGINT NOT NULL DEFAULT 0,
  -- The digest of the definition the config file last seeded (empty: none).
  seed_digest TEXT NOT NULL DEFAULT '',
  -- I6: failure notifications.
  notify_on_failure INT NOT NULL DEFAULT 1,
  notify_targets TEXT NOT NULL DEFAULT ''
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;

-- Executions: one row per admitted run of a job, with the policy snapshot it
-- was admitted with (A1-A6, L1-L4, O1, C1, R1).
CREATE TABLE IF NOT EXISTS executions (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  -- IsValidJobName: at most 100.
  job VARCHAR(100) NOT NULL,
  -- IsValidTenantId: [a-z0-9][a-z0-9_-]{0,49}, empty for a global job.
  tenant VARCHAR(50) NOT NULL DEFAULT '',
  -- IsValidQueueName: [a-z0-9][a-z0-9._-]{0,99}.
  queue VARCHAR(100) NOT NULL,
  status INT NOT NULL,
  "trigger" INT NOT NULL,
  requester TEXT NOT NULL DEFAULT '',
  worker TEXT NOT NULL DEFAULT '',
  attempt INT NOT NULL DEFAULT 0,
  -- IsValidIdempotencyKey: 1..200 printable ASCII characters.
  idempotency_key VARCHAR(200),
  -- Up to [engine] max_payload_bytes, at most kMaxPayloadLimit (16 MiB).
  payload LONGTEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  result LONGTEXT,
  progress INT NOT NULL DEFAULT 0,
  error LONGTEXT NOT NULL DEFAULT '',
  failure_class INT NOT NULL DEFAULT 0,
  scheduled_at BIGINT NOT NULL DEFAULT 0,
  run_at BIGINT NOT NULL,
  queued_at BIGINT NOT NULL,
  started_at BIGINT NOT NULL DEFAULT 0,
  finished_at BIGINT NOT NULL DEFAULT 0,
  claim_version BIGINT NOT NULL DEFAULT 0,
  lease_expires_at BIGINT NOT NULL DEFAULT 0,
  cancel_requested INT NOT NULL DEFAULT 0,
  -- kMaxLaneKeyBytes (dispatcher.cc): at most 200 bytes, given or rendered.
  lane_key VARCHAR(200) NOT NULL DEFAULT '',
  parent_id BIGINT NOT NULL DEFAULT 0,
  consecutive_lease_expiries INT NOT NULL DEFAULT 0,
  permanent_failures INT NOT NULL DEFAULT 0,
  ambiguous_failures INT NOT NULL DEFAULT 0,
  max_attempts INT NOT NULL,
  backoff_base_ms BIGINT NOT NULL,
  backoff_cap_ms BIGINT NOT NULL,
  max_permanent_attempts INT NOT NULL,
  max_ambiguous_attempts INT NOT NULL,
  max_consecutive_lease_expiries INT NOT NULL,
  lease_ms BIGINT NOT NULL,
  max_unsupported_schema_attempts INT NOT NULL DEFAULT 3,
  -- O1: a lane member waits "parked" (not due) while an older member of its
  -- lane is open. Finishing the head un-parks the next one, so claims stay
  -- index seeks.
  lane_parked INT NOT NULL DEFAULT 0,
  -- L4: whether the handler of the current claim started (0: a prefetched
  -- claim no handler took yet).
  handler_started INT NOT NULL DEFAULT 1,
  -- A2: idempotency scope is (job, tenant, key). The index of PostgreSQL is
  -- partial (WHERE idempotency_key IS NOT NULL). A unique index of MariaDB
  -- admits any number of NULLs, so the full index means the same. 350
  -- characters, 1400 bytes.
  UNIQUE KEY executions_idempotency (job, tenant, idempotency_key),
  -- "Next due execution of queue Q" is a seek into this index at any depth.
  -- PostgreSQL: (queue, run_at, id) WHERE status = 0 AND lane_parked = 0. The
  -- full index keeps the leading queue and puts the columns of the predicate
  -- next, so that the seek skips the ended and parked executions of a queue.
  KEY executions_due (queue, status, lane_parked, run_at, id),
  -- The staleness gate of the sweeper: running executions by lease expiry.
  -- PostgreSQL: (lease_expires_at) WHERE status = 1. The status leads here.
  KEY executions_leases (status, lease_expires_at),
  KEY executions_by_job (job, id),
  -- PostgreSQL: partial (WHERE tenant is not empty), here the full index.
  KEY executions_by_tenant (tenant, id),
  -- O1: the open members of a lane (tenant, lane key). PostgreSQL:
  -- (tenant, lane_key, id) WHERE the lane key is not empty AND status IN
  -- (0, 1, 3, 4). The status joins the key so that the ended members of a
  -- lane are skipped.
  -- 250 characters and two integers: 1020 bytes.
  KEY executions_lane_open (tenant, lane_key, status, id),
  -- X2, I1: the search by status and by queued or finish time, in id order.
  KEY executions_by_status (status, id),
  KEY executions_by_queued_at (queued_at),
  -- PostgreSQL: partial, WHERE finished_at > 0. Here the full index, whose
  -- range finished_at > 0 skips the open executions.
  KEY executions_by_finished_at (finished_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;

-- The log lines of executions, by execution (W3).
CREATE TABLE IF NOT EXISTS execution_logs (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  execution_id BIGINT NOT NULL,
  attempt INT NOT NULL,
  at BIGINT NOT NULL,
  level INT NOT NULL,
  message LONGTEXT NOT NULL,
  KEY execution_logs_by_execution (execution_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;

-- E1: one row per effect key (execution id, name).
CREATE TABLE IF NOT EXISTS effects (
  execution_id BIGINT NOT NULL,
  -- IsValidEffectName: 1..120 characters of [A-Za-z0-9._:-].
  name VARCHAR(120) NOT NULL,
  committed INT NOT NULL DEFAULT 0,
  reserved_by BIGINT NOT NULL,
  attempt INT NOT NULL,
  reserved_at BIGINT NOT NULL,
  committed_at BIGINT NOT NULL DEFAULT 0,
  -- ValidateEffectCommit: up to 64 KiB, one byte more than TEXT holds.
  detail LONGTEXT NOT NULL DEFAULT '',
  PRIMARY KEY (execution_id, name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;

-- X4: append-only, records younger than 365 days cannot be changed or removed
-- (the guard trigger of PostgreSQL is not part of this schema yet).
CREATE TABLE IF NOT EXISTS audit_log (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  at BIGINT NOT NULL,
  actor TEXT NOT NULL,
  tenant TEXT NOT NULL DEFAULT '',
  action TEXT NOT NULL,
  -- "<kind>:<name>": the longest the engine writes is "principal:" and a
  -- principal of at most 200 bytes (ValidateGrant, kMaxPrincipalBytes). The
  -- audit search takes targets of at most 300 bytes (routes_overview.cc).
  target VARCHAR(300) NOT NULL,
  before_json LONGTEXT NOT NULL DEFAULT '',
  after_json LONGTEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT '',
  KEY audit_log_by_target (target, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;

-- R1: replays waiting for a second operator (four-eyes).
CREATE TABLE IF NOT EXISTS replay_requests (
  execution_id BIGINT NOT NULL PRIMARY KEY,
  requested_by TEXT NOT NULL,
  reason TEXT NOT NULL,
  requested_at BIGINT NOT NULL,
  ambiguous INT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;

-- R1: which principals may act for which tenants ("*" = all).
CREATE TABLE IF NOT EXISTS grants (
  -- ValidateGrant: 1..200 bytes.
  principal VARCHAR(200) NOT NULL,
  -- ValidateGrant: "*" or a tenant id (IsValidTenantId, at most 50).
  tenant VARCHAR(50) NOT NULL,
  PRIMARY KEY (principal, tenant)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;

-- History of attempts that did not succeed.
CREATE TABLE IF NOT EXISTS execution_attempts (
  execution_id BIGINT NOT NULL,
  attempt INT NOT NULL,
  claim_version BIGINT NOT NULL,
  worker TEXT NOT NULL,
  started_at BIGINT NOT NULL,
  ended_at BIGINT NOT NULL,
  outcome INT NOT NULL,
  failure_class INT NOT NULL,
  released INT NOT NULL,
  error LONGTEXT NOT NULL,
  PRIMARY KEY (execution_id, claim_version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;

-- Tenants (T3).
CREATE TABLE IF NOT EXISTS tenants (
  -- ValidateTenant (IsValidTenantId): [a-z0-9][a-z0-9_-]{0,49}.
  id VARCHAR(50) NOT NULL PRIMARY KEY,
  name TEXT NOT NULL DEFAULT '',
  active INT NOT NULL DEFAULT 1,
  created_at BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;

-- Leader locks of the scheduler, retention and notifier (T4).
CREATE TABLE IF NOT EXISTS scheduler_locks (
  -- ValidateLock bounds no length: the names are constants
  -- (kSchedulerLockName "scheduler", kRetentionLockName, kNotifierLockName).
  name VARCHAR(200) NOT NULL PRIMARY KEY,
  holder TEXT NOT NULL,
  expires_at BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;

-- Per-job schedule state (T1, T4).
CREATE TABLE IF NOT EXISTS schedule_state (
  -- IsValidJobName: at most 100.
  job VARCHAR(100) NOT NULL PRIMARY KEY,
  last_fire_at BIGINT NOT NULL DEFAULT 0,
  last_evaluated_at BIGINT NOT NULL DEFAULT 0,
  skipped_fires BIGINT NOT NULL DEFAULT 0,
  last_skipped_at BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;

-- Users, API tokens (hashed), dashboard sessions (hashed) (X1).
CREATE TABLE IF NOT EXISTS users (
  -- ValidateUser: 1..100 characters of [a-z0-9._@-].
  name VARCHAR(100) NOT NULL PRIMARY KEY,
  password_hash TEXT NOT NULL,
  scopes TEXT NOT NULL,
  tenants TEXT NOT NULL,
  disabled INT NOT NULL DEFAULT 0,
  created_at BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;
CREATE TABLE IF NOT EXISTS api_tokens (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  name TEXT NOT NULL,
  -- ValidateToken: hex SHA-256, 64 characters.
  secret_hash VARCHAR(64) NOT NULL,
  principal TEXT NOT NULL,
  scopes TEXT NOT NULL,
  tenants TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL DEFAULT 0,
  revoked_at BIGINT NOT NULL DEFAULT 0,
  last_used_at BIGINT NOT NULL DEFAULT 0,
  -- The UNIQUE column constraint of PostgreSQL, under its name there.
  UNIQUE KEY api_tokens_secret_hash_key (secret_hash)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;
CREATE TABLE IF NOT EXISTS sessions (
  -- ValidateSession: hex SHA-256, 64 characters.
  id_hash VARCHAR(64) NOT NULL PRIMARY KEY,
  user_name TEXT NOT NULL,
  csrf_token TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  last_seen_at BIGINT NOT NULL,
  expires_at BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;

-- The worker registry (W5): kind 0 remote, 1 in-process pool, and the ids of
-- the executions running now, comma-separated (at most kMaxWorkerCurrent).
CREATE TABLE IF NOT EXISTS workers (
  -- ValidateWorker: 1..200 bytes.
  id VARCHAR(200) NOT NULL PRIMARY KEY,
  hostname TEXT NOT NULL,
  pid BIGINT NOT NULL,
  state INT NOT NULL,
  current_execution BIGINT NOT NULL DEFAULT 0,
  processed BIGINT NOT NULL DEFAULT 0,
  failed BIGINT NOT NULL DEFAULT 0,
  started_at BIGINT NOT NULL,
  last_heartbeat_at BIGINT NOT NULL,
  kind INT NOT NULL DEFAULT 0,
  threads INT NOT NULL DEFAULT 0,
  busy INT NOT NULL DEFAULT 0,
  current_executions TEXT NOT NULL DEFAULT ''
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;

-- Status counters per tenant and queue, and hourly outcome counts per tenant
-- (empty for global jobs), kept in the same transactions as the status changes
-- (P8, X2). Striped (P5): a writer adds to one of several rows of a key, so
-- concurrent writers seldom wait for the same row. Readers sum the stripes.
CREATE TABLE IF NOT EXISTS status_counts (
  -- IsValidTenantId (50) and IsValidQueueName (100): 600 bytes and two INTs.
  tenant VARCHAR(50) NOT NULL,
  queue VARCHAR(100) NOT NULL,
  status INT NOT NULL,
  stripe INT NOT NULL DEFAULT 0,
  count BIGINT NOT NULL,
  PRIMARY KEY (tenant, queue, status, stripe)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;
CREATE TABLE IF NOT EXISTS hourly_outcomes (
  hour BIGINT NOT NULL,
  -- IsValidTenantId: at most 50.
  tenant VARCHAR(50) NOT NULL,
  status INT NOT NULL,
  stripe INT NOT NULL DEFAULT 0,
  count BIGINT NOT NULL,
  PRIMARY KEY (hour, tenant, status, stripe)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;

-- Engine settings the database keeps (A1: [engine] max_payload_bytes, which
-- `serve` and `migrate` write).
CREATE TABLE IF NOT EXISTS settings (
  -- Names are constants of the engine ("max_payload_bytes").
  name VARCHAR(100) NOT NULL PRIMARY KEY,
  value BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;
INSERT IGNORE INTO settings (name, value) VALUES ('max_payload_bytes', 262144);

-- I6: the endings still to be notified (written in the transaction of the
-- ending), and the notifier state of each job (rate-limit window, suppressed
-- failures).
CREATE TABLE IF NOT EXISTS notify_outbox (
  execution_id BIGINT NOT NULL PRIMARY KEY,
  job TEXT NOT NULL,
  ended_at BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;
CREATE TABLE IF NOT EXISTS notify_state (
  -- IsValidJobName: at most 100.
  job VARCHAR(100) NOT NULL PRIMARY KEY,
  sent_at TEXT NOT NULL,
  suppressed BIGINT NOT NULL,
  suppressed_since BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;
)sql",
    // Version 2: fewer index entries move per status change (P11). The due
    // and open-lane indexes of version 1 had the status in their key, so
    // every status change of every execution moved an entry in each. Their
    // keys are now stored generated columns that are NULL for the rows
    // PostgreSQL's partial indexes leave out, and lead the key so that a seek
    // never passes those rows: due_queue is the queue while the execution is
    // due (queued, not parked), open_lane the lane key while the execution is
    // an open member of its lane (status 0, 1, 3 or 4). An execution outside a
    // lane never moves in the open-lane index, and a claimed execution leaves
    // the due index until it is queued again: a finish moves neither (it
    // keeps run_at). Each statement can run again after a crash half-way
    // (IF [NOT] EXISTS; InnoDB's DDL is atomic per statement).
    R"sql(
ALTER TABLE executions
  ADD COLUMN IF NOT EXISTS due_queue VARCHAR(100)
    AS (CASE WHEN status = 0 AND lane_parked = 0 THEN queue END) PERSISTENT,
  ADD COLUMN IF NOT EXISTS open_lane VARCHAR(200)
    AS (CASE WHEN lane_key <> '' AND status IN (0, 1, 3, 4) THEN lane_key END) PERSISTENT,
  ADD KEY IF NOT EXISTS executions_due_now (due_queue, run_at, id),
  ADD KEY IF NOT EXISTS executions_open_lanes (open_lane, tenant, id);
ALTER TABLE executions DROP KEY IF EXISTS executions_due, DROP KEY IF EXISTS executions_lane_open;
)sql",
    // Version 3: A6, transactional enqueue, and the lanes' locks it needs.
    //
    // lane_locks: admissions and un-parking of a lane (tenant, lane key) take
    // turns on its row, which each locks by bumping its version (an upsert,
    // an exclusive row lock held until the transaction ends). The engine's
    // transactions and an application's transaction that calls enqueue()
    // take the same lock, so an admission never decides on a lane another
    // transaction is changing. The rows stay: a lane's version only grows.
    //
    // enqueue(job, payload, idempotency_key, tenant, run_at, lane_key,
    // requester, fingerprint, OUT id), called inside the application's own
    // transaction: the execution exists if and only if that transaction
    // commits. Called outside one (autocommit), it is one transaction. NULL
    // stands for a default (no key, no tenant, now, no lane, requester 'sql',
    // the fingerprint below). It refuses what the dispatcher
    // refuses (SQLSTATE 22023 and a message naming the problem; nothing is
    // admitted) and admits as the store does: idempotency by (job, tenant,
    // key) with the fingerprint (a different one: SQLSTATE 23000, error
    // 1062), the job's policy snapshot, lane parking, the striped counter,
    // and the database's clock. The fingerprint defaults to the SHA-256 of the
    // payload text and the requester; pass the dispatcher's fingerprint to
    // share keys with the API. No wakeup: the nodes see the execution at
    // their next poll.
    //
    // A lane member is admitted on a view of its lane that is current: the
    // version read in the transaction's snapshot must be the one the lock
    // found. Under REPEATABLE READ a snapshot older than the lane's last
    // change would hide it, so enqueue() then refuses with SQLSTATE 40001
    // and error 1213, as a deadlock does: roll back and run the transaction
    // again (or call enqueue() before the transaction's first read, or use
    // READ COMMITTED).
    R"sql(
CREATE TABLE IF NOT EXISTS lane_locks (
  -- IsValidTenantId (50) and the dispatcher's kMaxLaneKeyBytes (200).
  tenant VARCHAR(50) NOT NULL,
  lane_key VARCHAR(200) NOT NULL,
  version BIGINT NOT NULL,
  PRIMARY KEY (tenant, lane_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_nopad_bin;
CREATE OR REPLACE PROCEDURE enqueue(IN p_job TEXT, IN p_payload LONGTEXT,
    IN p_idempotency_key TEXT, IN p_tenant TEXT, IN p_run_at BIGINT, IN p_lane_key TEXT,
    IN p_requester TEXT, IN p_fingerprint TEXT, OUT p_id BIGINT)
  MODIFIES SQL DATA
admit: BEGIN
  DECLARE v_tenant TEXT DEFAULT COALESCE(p_tenant, '');
  DECLARE v_lane TEXT DEFAULT COALESCE(p_lane_key, '');
  DECLARE v_requester TEXT DEFAULT COALESCE(p_requester, 'sql');
  -- The database's clock in milliseconds, whatever the session's time zone.
  DECLARE v_now BIGINT DEFAULT UNIX_TIMESTAMP() * 1000 + MICROSECOND(NOW(6)) DIV 1000;
  DECLARE v_found INT DEFAULT 0;
  DECLARE v_queue TEXT;
  DECLARE v_scope INT;
  DECLARE v_enabled INT;
  DECLARE v_max_attempts INT;
  DECLARE v_backoff_base BIGINT;
  DECLARE v_backoff_cap BIGINT;
  DECLARE v_max_permanent INT;
  DECLARE v_max_ambiguous INT;
  DECLARE v_max_expiries INT;
  DECLARE v_lease BIGINT;
  DECLARE v_max_unsupported INT;
  DECLARE v_limit BIGINT;
  DECLARE v_fp TEXT;
  DECLARE v_existing TEXT;
  DECLARE v_seen BIGINT DEFAULT 0;
  DECLARE v_version BIGINT;
  DECLARE v_parked INT DEFAULT 0;
  DECLARE v_duplicate INT DEFAULT 0;
  DECLARE v_message TEXT;
  -- Called outside a transaction (autocommit on, none open), enqueue() runs
  -- as one transaction of its own; else within the caller's.
  DECLARE v_own INT DEFAULT @@autocommit = 1 AND @@in_transaction = 0;
  DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    IF v_own THEN
      ROLLBACK;
    END IF;
    RESIGNAL;
  END;
  IF v_own THEN
    START TRANSACTION;
  END IF;

  SELECT 1, queue, scope, enabled, max_attempts, backoff_base_ms, backoff_cap_ms,
         max_permanent_attempts, max_ambiguous_attempts, max_consecutive_lease_expiries,
         lease_ms, max_unsupported_schema_attempts
    INTO v_found, v_queue, v_scope, v_enabled, v_max_attempts, v_backoff_base, v_backoff_cap,
         v_max_permanent, v_max_ambiguous, v_max_expiries, v_lease, v_max_unsupported
    FROM job_definitions WHERE name = p_job;
  IF v_found = 0 THEN
    SET v_message = CONCAT('enqueue: no job named ', LEFT(COALESCE(p_job, 'NULL'), 120));
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = v_message;
  END IF;
  IF v_enabled = 0 THEN
    SET v_message = CONCAT('enqueue: job ', p_job, ' is disabled');
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = v_message;
  END IF;
  IF v_scope = 1 AND v_tenant = '' THEN
    SET v_message = CONCAT('enqueue: job ', p_job, ' is per-tenant: a tenant is required');
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = v_message;
  END IF;
  IF v_scope = 0 AND v_tenant <> '' THEN
    SET v_message = CONCAT('enqueue: job ', p_job, ' is global: it takes no tenant');
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = v_message;
  END IF;
  IF v_tenant <> '' AND NOT v_tenant REGEXP '^[a-z0-9][a-z0-9_-]{0,49}$' THEN
    SET v_message = CONCAT('enqueue: invalid tenant ', LEFT(v_tenant, 60));
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = v_message;
  END IF;
  IF p_idempotency_key IS NOT NULL AND NOT p_idempotency_key REGEXP '^[!-~]{1,200}$' THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT =
      'enqueue: an idempotency key is 1 to 200 printable ASCII characters';
  END IF;
  IF OCTET_LENGTH(v_lane) > 200 OR v_lane REGEXP '[[:cntrl:]]' THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT =
      'enqueue: a lane key is at most 200 bytes, without control characters';
  END IF;
  IF COALESCE(p_run_at, 0) < 0 THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'enqueue: run_at is negative';
  END IF;
  IF p_payload IS NULL OR NOT JSON_VALID(p_payload) THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'enqueue: the payload must be a JSON object';
  END IF;
  IF JSON_TYPE(p_payload) <> 'OBJECT' THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'enqueue: the payload must be a JSON object';
  END IF;
  SELECT value INTO v_limit FROM settings WHERE name = 'max_payload_bytes';
  SET v_limit = COALESCE(v_limit, 262144);
  IF OCTET_LENGTH(p_payload) > v_limit THEN
    SET v_message = CONCAT('enqueue: the payload is ', OCTET_LENGTH(p_payload),
                           ' bytes, more than ', v_limit);
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = v_message;
  END IF;
  SET v_fp = COALESCE(p_fingerprint, SHA2(CONCAT(p_payload, v_requester), 256));

  -- A2: a key admitted before answers with its execution.
  IF p_idempotency_key IS NOT NULL THEN
    SET v_found = 0;
    SELECT 1, id, fingerprint INTO v_found, p_id, v_existing FROM executions
      WHERE job = p_job AND tenant = v_tenant AND idempotency_key = p_idempotency_key;
    IF v_found = 1 THEN
      IF v_existing <> v_fp THEN
        SET v_message = CONCAT('enqueue: idempotency key ', p_idempotency_key, ' of job ', p_job,
                               ' was used with another payload');
        SIGNAL SQLSTATE '23000' SET MYSQL_ERRNO = 1062, MESSAGE_TEXT = v_message;
      END IF;
      IF v_own THEN
        COMMIT;
      END IF;
      LEAVE admit;
    END IF;
  END IF;
  -- O1: the lane's lock, and a view of its members that is current.
  IF v_lane <> '' THEN
    SELECT version INTO v_seen FROM lane_locks WHERE tenant = v_tenant AND lane_key = v_lane;
    INSERT INTO lane_locks (tenant, lane_key, version) VALUES (v_tenant, v_lane, 1)
      ON DUPLICATE KEY UPDATE version = version + 1;
    SELECT version INTO v_version FROM lane_locks WHERE tenant = v_tenant AND lane_key = v_lane;
    IF v_version <> v_seen + 1 THEN
      SIGNAL SQLSTATE '40001' SET MYSQL_ERRNO = 1213, MESSAGE_TEXT =
        'enqueue: the lane changed after this transaction''s snapshot; roll back and run the transaction again';
    END IF;
    IF EXISTS (SELECT 1 FROM executions WHERE open_lane = v_lane AND tenant = v_tenant) THEN
      SET v_parked = 1;
    END IF;
  END IF;
  BEGIN
    -- The key was admitted by a transaction this one's snapshot does not see:
    -- its execution, read as committed.
    DECLARE EXIT HANDLER FOR 1062 BEGIN
      SELECT id, fingerprint INTO p_id, v_existing FROM executions
        WHERE job = p_job AND tenant = v_tenant AND idempotency_key = p_idempotency_key
        LOCK IN SHARE MODE;
      IF p_idempotency_key IS NULL OR v_existing <> v_fp THEN
        SET v_message = CONCAT('enqueue: idempotency key ', COALESCE(p_idempotency_key, 'NULL'),
                               ' of job ', p_job, ' was used with another payload');
        SIGNAL SQLSTATE '23000' SET MYSQL_ERRNO = 1062, MESSAGE_TEXT = v_message;
      END IF;
      SET v_duplicate = 1;
    END;
    INSERT INTO executions (job, tenant, queue, status, "trigger", requester, idempotency_key,
        payload, fingerprint, scheduled_at, run_at, queued_at, lane_key, parent_id, max_attempts,
        backoff_base_ms, backoff_cap_ms, max_permanent_attempts, max_ambiguous_attempts,
        max_consecutive_lease_expiries, lease_ms, max_unsupported_schema_attempts, lane_parked)
      VALUES (p_job, v_tenant, v_queue, 0, 2, v_requester, p_idempotency_key, p_payload, v_fp, 0,
        IF(COALESCE(p_run_at, 0) > 0, p_run_at, v_now), v_now, v_lane, 0, v_max_attempts,
        v_backoff_base, v_backoff_cap, v_max_permanent, v_max_ambiguous, v_max_expiries, v_lease,
        v_max_unsupported, v_parked);
    SET p_id = LAST_INSERT_ID();
  END;
  IF v_duplicate = 0 THEN
    INSERT INTO status_counts (tenant, queue, status, stripe, count)
      VALUES (v_tenant, v_queue, 0, CONNECTION_ID() % 16, 1)
      ON DUPLICATE KEY UPDATE count = count + 1;
  END IF;
  IF v_own THEN
    COMMIT;
  END IF;
END;
)sql",
};

inline constexpr int kSchemaVersion = static_cast<int>(std::size(kMigrations));

}  // namespace taskengine::maria
