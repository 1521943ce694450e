#!/usr/bin/env python3
"""What the SQLite writer's statements cost, alone, under callgrind.

Instructions per job inside SQLite (sqlite3_step, sqlite3_reset and the
binds) for the claim, the mark of a started handler and the finish as the
store writes them (the texts of sql_statements.h and sqlite_store.cc at
schema version 17), and for variants of each: an index of the executions
left out, the claim state in a narrow table of its own, the executions row
written once (claims and endings move its id between narrow tables), one
statement for a batch. It tells how far a change of the statements or of
the schema can take the writer's cost per job (bench/run.sh's callgrind
figure) before one is built.

  bench/sqlite_write_floor.py [--bench PATH] [--jobs N] [--only NAME,...]

The database is a copy of one `taskengine-bench fill` made (6,000 ended
executions), with N (5,000) new queued executions of queue 'q'. Each
variant runs in its own process under valgrind; its figure is its count
less that of the same set-up with nothing after it, divided by N. The
Python interpreter's own work is not counted. SQLite is the system's
(Debian: built without lookaside, so each of its allocations is a malloc).
"""
import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

STATE = ("id, status, attempt, claim_version, consecutive_lease_expiries, permanent_failures, "
         "ambiguous_failures, cancel_requested, failure_class, max_attempts, backoff_base_ms, "
         "backoff_cap_ms, max_permanent_attempts, max_ambiguous_attempts, "
         "max_consecutive_lease_expiries, lease_ms, run_at, started_at, finished_at, "
         "max_unsupported_schema_attempts, lane_key, tenant, status, worker, queue, "
         "handler_started, job")
CLAIM_DUE = ("SELECT " + STATE + ", job, (SELECT payload FROM execution_payloads WHERE "
             "execution_id = executions.id), COALESCE(idempotency_key, '') FROM executions "
             "INDEXED BY executions_due WHERE queue = ?1 AND status = 0 AND lane_parked = 0 "
             "AND run_at <= ?2 ORDER BY run_at, id LIMIT ?3")
CLAIM_UPDATE = ("UPDATE executions SET status = ?2, attempt = ?3, claim_version = ?4, "
                "worker = ?5, started_at = ?6, lease_expires_at = ?7, finished_at = 0, "
                "handler_started = ?8 WHERE id = ?1")
MARK_ONE = ("UPDATE executions SET handler_started = 1 WHERE id = ?1 AND claim_version = ?2"
            " AND status = 1")
MARK_MANY = ("UPDATE executions SET handler_started = 1 FROM json_each(?1) AS v"
             " WHERE executions.id = v.value ->> 0 AND executions.claim_version = v.value ->> 1"
             " AND executions.status = 1 RETURNING executions.id, executions.claim_version")
SELECT_STATE = "SELECT " + STATE + " FROM executions WHERE id = ?1"
SELECT_STATES = ("SELECT " + STATE + " FROM executions WHERE id IN "
                 "(SELECT value FROM json_each(?1))")
APPLY = ("UPDATE executions SET status = ?2, run_at = ?3, attempt = ?4, "
         "consecutive_lease_expiries = ?5, permanent_failures = ?6, ambiguous_failures = ?7, "
         "failure_class = ?8, cancel_requested = ?9, "
         "lease_expires_at = CASE WHEN ?10 THEN 0 ELSE lease_expires_at END, "
         "worker = CASE WHEN ?10 THEN '' ELSE worker END, finished_at = ?11, "
         "result = COALESCE(?12, result), error = COALESCE(?13, error), "
         "progress = COALESCE(?14, progress), \"trigger\" = COALESCE(?15, \"trigger\") "
         "WHERE id = ?1")

BATCH = 68  # leases per claim and per finish transaction in a P1 run
MARK_BATCH = 23  # leases per mark of started handlers in a P1 run
NOW = 1796404700000

# name: (what it measures, indexes dropped first)
VARIANTS = {
    "claim": ("claim: kClaimDue, then kClaimUpdate per row (as the store)", []),
    "claim-no-finished-at": ("claim without `finished_at = 0`", []),
    "claim-no-by-status": ("claim without the index executions_by_status",
                           ["executions_by_status"]),
    "claim-no-leases": ("claim without the index executions_leases", ["executions_leases"]),
    "claim-no-lane-open": ("claim without the index executions_lane_open",
                           ["executions_lane_open"]),
    "claim-narrow": ("claim of a narrow table of the claim state (11 columns, 3 indexes)", []),
    "claim-write-once": ("claim when the executions row is written once: leaves a table of"
                         " due ids, enters a table of leases (1 index)", []),
    "mark": ("mark of a started handler: kMarkStartedOne per row (as the store)", []),
    "mark-many": ("mark: one UPDATE ... FROM json_each ... RETURNING per %d" % MARK_BATCH, []),
    "finish-read": ("finish's read: kSelectState per row (as the store)", []),
    "finish-read-many": ("finish's read: one SELECT ... json_each per %d" % BATCH, []),
    "finish-apply": ("finish's write: kApplyTransition per row (as the store)", []),
    "finish-write-once": ("finish when the executions row is written once: reads the lease"
                          " and the row, leaves the leases, enters a table of endings"
                          " (2 indexes)", []),
}
WRITE_ONCE = ("claim-write-once", "finish-write-once")


def setup(db, jobs, drop, narrow, write_once=False):
    c = sqlite3.connect(db, isolation_level=None)
    c.execute("PRAGMA journal_mode = WAL")
    c.execute("PRAGMA synchronous = OFF")  # the writes are counted, not their fsyncs
    for ix in drop:
        c.execute("DROP INDEX " + ix)
    c.execute("BEGIN")
    first = c.execute("SELECT MAX(id) FROM executions").fetchone()[0] + 1
    for i in range(jobs):
        c.execute(
            "INSERT INTO executions (job, tenant, queue, status, \"trigger\", requester,"
            " idempotency_key, fingerprint, scheduled_at, run_at, queued_at, lane_key, parent_id,"
            " max_attempts, backoff_base_ms, backoff_cap_ms, max_permanent_attempts,"
            " max_ambiguous_attempts, max_consecutive_lease_expiries, lease_ms,"
            " max_unsupported_schema_attempts, lane_parked) VALUES ('report', '', 'q', 0, 0, '',"
            " NULL, '84e565a30726aafc1dedb7a71488b988eec00a76c4a8c5d2da88f9ceacf6875b', 0, ?1, ?1,"
            " '', 0, 5, 1000, 3600000, 1, 1, 3, 30000, 3, 0)", (NOW - 10,))
        c.execute("INSERT INTO execution_payloads VALUES (?1, ?2)", (first + i, '{"i":%d}' % i))
    if narrow:
        c.execute("CREATE TABLE claim_state (id INTEGER PRIMARY KEY, queue TEXT NOT NULL,"
                  " status INTEGER NOT NULL, run_at INTEGER NOT NULL, lane_parked INTEGER NOT NULL"
                  " DEFAULT 0, attempt INTEGER NOT NULL DEFAULT 0, claim_version INTEGER NOT NULL"
                  " DEFAULT 0, worker TEXT NOT NULL DEFAULT '', started_at INTEGER NOT NULL"
                  " DEFAULT 0, lease_expires_at INTEGER NOT NULL DEFAULT 0, handler_started"
                  " INTEGER NOT NULL DEFAULT 0) STRICT")
        c.execute("CREATE INDEX claim_state_due ON claim_state(queue, run_at, id)"
                  " WHERE status = 0 AND lane_parked = 0")
        c.execute("CREATE INDEX claim_state_leases ON claim_state(lease_expires_at)"
                  " WHERE status = 1")
        c.execute("CREATE INDEX claim_state_by_status ON claim_state(status, id)"
                  " WHERE status <> 1")
        c.execute("INSERT INTO claim_state (id, queue, status, run_at)"
                  " SELECT id, queue, status, run_at FROM executions")
        c.execute("DROP INDEX executions_due")
    if write_once:
        # The executions row keeps what admission wrote; a claim and an
        # ending move the id between three narrow tables.
        c.execute("CREATE TABLE due (queue TEXT NOT NULL, run_at INTEGER NOT NULL,"
                  " id INTEGER NOT NULL, PRIMARY KEY (queue, run_at, id)) STRICT, WITHOUT ROWID")
        c.execute("CREATE TABLE leases (id INTEGER PRIMARY KEY, attempt INTEGER NOT NULL,"
                  " claim_version INTEGER NOT NULL, worker TEXT NOT NULL, started_at INTEGER"
                  " NOT NULL, lease_expires_at INTEGER NOT NULL, handler_started INTEGER NOT NULL)"
                  " STRICT")
        c.execute("CREATE INDEX leases_by_expiry ON leases(lease_expires_at)")
        c.execute("CREATE TABLE endings (id INTEGER PRIMARY KEY, status INTEGER NOT NULL,"
                  " attempt INTEGER NOT NULL, finished_at INTEGER NOT NULL, failure_class INTEGER"
                  " NOT NULL, result TEXT, error TEXT NOT NULL) STRICT")
        c.execute("CREATE INDEX endings_by_status ON endings(status, id)")
        c.execute("CREATE INDEX endings_by_finished_at ON endings(finished_at)")
        c.execute("INSERT INTO due SELECT queue, run_at, id FROM executions WHERE status = 0")
    c.execute("COMMIT")
    return c


# What a claim reads of the executions row `e` besides the claim state: the
# job's policy, the lane, the tenant, the payload and the key.
CLAIM_ROW = ("e.job, e.max_attempts, e.backoff_base_ms, e.backoff_cap_ms,"
             " e.max_permanent_attempts, e.max_ambiguous_attempts,"
             " e.max_consecutive_lease_expiries, e.lease_ms, e.max_unsupported_schema_attempts,"
             " e.lane_key, e.tenant, (SELECT payload FROM execution_payloads WHERE"
             " execution_id = e.id), COALESCE(e.idempotency_key, '')")


def claim_batches(c, jobs, select, claim_row):
    """Claims `jobs` executions in transactions of BATCH: `select` reads the
    due ones of queue 'q', then claim_row(row, claim version) for each."""
    version, done = 1000, 0
    while done < jobs:
        c.execute("BEGIN")
        rows = c.execute(select, ("q", NOW, BATCH)).fetchall()
        for r in rows:
            version += 1
            claim_row(r, version)
        c.execute("COMMIT")
        done += len(rows)


def claim_all(c, jobs, update=CLAIM_UPDATE):
    claim_batches(c, jobs, CLAIM_DUE, lambda r, version: c.execute(
        update, (r[0], 1, r[2] + 1, version, "w-1", NOW, NOW + 30000, 0)))


def claim_narrow(c, jobs):
    claim_batches(
        c, jobs,
        "SELECT h.id, h.attempt, " + CLAIM_ROW + " FROM claim_state h"
        " INDEXED BY claim_state_due JOIN executions e ON e.id = h.id WHERE h.queue = ?1"
        " AND h.status = 0 AND h.lane_parked = 0 AND h.run_at <= ?2"
        " ORDER BY h.run_at, h.id LIMIT ?3",
        lambda r, version: c.execute(
            "UPDATE claim_state SET status = ?2, attempt = ?3, claim_version = ?4,"
            " worker = ?5, started_at = ?6, lease_expires_at = ?7,"
            " handler_started = ?8 WHERE id = ?1",
            (r[0], 1, r[1] + 1, version, "w-1", NOW, NOW + 30000, 0)))


def claim_write_once(c, jobs):
    def claim_row(r, version):
        c.execute("DELETE FROM due WHERE queue = ?1 AND run_at = ?2 AND id = ?3",
                  ("q", r[0], r[1]))
        c.execute("INSERT INTO leases VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                  (r[1], 1, version, "w-1", NOW, NOW + 30000, 0))
    claim_batches(
        c, jobs,
        "SELECT d.run_at, d.id, " + CLAIM_ROW + " FROM due d JOIN executions e ON e.id = d.id"
        " WHERE d.queue = ?1 AND d.run_at <= ?2 ORDER BY d.run_at, d.id LIMIT ?3",
        claim_row)


def finish_write_once(c, leases):
    for batch in batches(leases, BATCH):
        c.execute("BEGIN")
        for lease in batch:
            c.execute("SELECT l.attempt, l.claim_version, l.worker, l.started_at,"
                      " l.lease_expires_at, l.handler_started, e.job, e.tenant, e.queue,"
                      " e.lane_key, e.max_attempts, e.backoff_base_ms, e.backoff_cap_ms,"
                      " e.max_permanent_attempts, e.max_ambiguous_attempts,"
                      " e.max_consecutive_lease_expiries, e.lease_ms,"
                      " e.max_unsupported_schema_attempts FROM leases l JOIN executions e"
                      " ON e.id = l.id WHERE l.id = ?1", (lease[0],)).fetchone()
            c.execute("DELETE FROM leases WHERE id = ?1", (lease[0],))
            c.execute("INSERT INTO endings VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                      (lease[0], 2, 1, NOW + 5, 0, "null", ""))
        c.execute("COMMIT")


def batches(items, n):
    for k in range(0, len(items), n):
        yield items[k:k + n]


def child(args):
    name, _, base = args.variant.partition(":")
    shutil.copy(args.base, args.db)
    c = setup(args.db, args.jobs, VARIANTS[name][1], name == "claim-narrow",
              name in WRITE_ONCE)
    if name == "finish-write-once":
        claim_write_once(c, args.jobs)
        leases = c.execute("SELECT id, claim_version FROM leases ORDER BY id").fetchall()
        if not base:
            finish_write_once(c, leases)
    elif name.startswith("claim"):
        if base:
            return
        if name == "claim-narrow":
            claim_narrow(c, args.jobs)
        elif name == "claim-write-once":
            claim_write_once(c, args.jobs)
        elif name == "claim-no-finished-at":
            claim_all(c, args.jobs, CLAIM_UPDATE.replace(" finished_at = 0,", ""))
        else:
            claim_all(c, args.jobs)
    else:
        # The set-up of marks and finishes, counted in both runs: the claims,
        # and the read of the leases they made.
        claim_all(c, args.jobs)
        leases = c.execute("SELECT id, claim_version FROM executions WHERE status = 1"
                           " ORDER BY id").fetchall()
        if base:
            return
        if name == "mark":
            for batch in batches(leases, MARK_BATCH):
                c.execute("BEGIN")
                for lease in batch:
                    c.execute(MARK_ONE, lease)
                c.execute("COMMIT")
        elif name == "mark-many":
            for batch in batches(leases, MARK_BATCH):
                c.execute("BEGIN")
                c.execute(MARK_MANY, (json.dumps([list(x) for x in batch]),)).fetchall()
                c.execute("COMMIT")
        elif name == "finish-read":
            for batch in batches(leases, BATCH):
                c.execute("BEGIN")
                for lease in batch:
                    c.execute(SELECT_STATE, (lease[0],)).fetchone()
                c.execute("COMMIT")
        elif name == "finish-read-many":
            for batch in batches(leases, BATCH):
                c.execute("BEGIN")
                c.execute(SELECT_STATES, (json.dumps([x[0] for x in batch]),)).fetchall()
                c.execute("COMMIT")
        elif name == "finish-apply":
            for batch in batches(leases, BATCH):
                c.execute("BEGIN")
                for lease in batch:
                    c.execute(APPLY, (lease[0], 2, NOW - 10, 1, 0, 0, 0, 0, 0, 1, NOW + 5, "null",
                                      None, 100, None))
                c.execute("COMMIT")
    c.close()


def count(args, variant, work):
    out = os.path.join(work, "cg." + variant.replace(":", "_"))
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
           "--toggle-collect=sqlite3_step", "--toggle-collect=sqlite3_reset",
           "--toggle-collect=sqlite3_bind_*", sys.executable, os.path.abspath(__file__),
           "--child", variant, "--base", args.base, "--db", os.path.join(work, "run.db"),
           "--jobs", str(args.jobs)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        for line in f:
            if line.startswith("summary:"):
                return int(line.split()[1])
    raise RuntimeError("no summary in " + out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bench", default="build/release/bench/taskengine-bench")
    p.add_argument("--jobs", type=int, default=5000)
    p.add_argument("--only", default="")
    p.add_argument("--child", dest="variant")
    p.add_argument("--base")
    p.add_argument("--db")
    args = p.parse_args()
    if args.variant:
        return child(args)
    work = tempfile.mkdtemp(prefix="taskengine-write-floor.")
    try:
        args.base = os.path.join(work, "base.db")
        subprocess.run([args.bench, "fill", "--jobs", "6000", "--db", args.base], check=True,
                       stdout=subprocess.DEVNULL)
        print("SQLite %s; instructions per job inside SQLite; %d jobs; batches of %d"
              " (marks: %d)" % (sqlite3.sqlite_version, args.jobs, BATCH, MARK_BATCH))
        names = args.only.split(",") if args.only else list(VARIANTS)
        bases = {}
        for name in names:
            base_key = ("claim" if name.startswith("claim") else "after-claim",
                        tuple(VARIANTS[name][1]), name == "claim-narrow", name in WRITE_ONCE)
            if base_key not in bases:
                bases[base_key] = count(args, name + ":base", work)
            n = (count(args, name, work) - bases[base_key]) / args.jobs
            print("  %-22s %8.0f  %s" % (name, n, VARIANTS[name][0]))
            sys.stdout.flush()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
