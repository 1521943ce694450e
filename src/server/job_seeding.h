// The config file seeds job definitions; the database is the source of truth
// (product.md §1).
//
// Every `serve` and `migrate` start seeds the file's [[job]]s (SeedJobs):
//
//   database row                          seeding
//   ------------------------------------  --------------------------------------
//   none                                  created as the file says (kInsert)
//   same as the file                      nothing (records the file's digest)
//   unedited since the file seeded it     follows the file (kFollow), audited
//                                         "job.seed"
//   edited at runtime (API, CLI), or of   kept (kKeep); a warning names the job,
//   unknown origin (created at runtime,   the fields that differ and
//   seeded by an older binary)            `migrate --sync-jobs --dry-run`
//
// "Unedited" means the row's own digest (api::JobDefinitionDigest) still
// equals the digest recorded when the file last seeded it
// (JobDefinition::seed_digest). So the file wins only where nobody changed
// the definition at runtime, and the log says where they differ.
//
// `taskengine migrate --sync-jobs` (SyncJobs) applies the file on purpose:
// every [[job]] that differs is written as the file says, each audited
// "job.sync" with the fields before and after; `--dry-run` only lists the
// differences. Jobs only in the database are left alone by both.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/job_edits.h"
#include "storage/store.h"
#include "taskengine/status.h"
#include "taskengine/types.h"

namespace taskengine {

enum class SeedAction {
  kInsert,     // no row: create it
  kUnchanged,  // the row says what the file says
  kFollow,     // nobody edited the row since it was seeded: write the file's
  kKeep,       // edited at runtime (or of unknown origin): leave it
};

// The pure decision of the table above for one [[job]] `file` and its row.
SeedAction PlanSeed(const std::optional<JobDefinition>& row, const JobDefinition& file);

// Seeds `jobs` (see the top of this file). Each write is one compare-and-set
// transaction: an edit that lands between the read and the write wins (the
// job is then kept). Logs each follow (info) and each kept difference
// (warning). Errors only when the store fails, naming the job.
Status SeedJobs(Store& store, const std::vector<JobDefinition>& jobs, Millis now);

// What `migrate --sync-jobs` found for one [[job]].
struct JobSync {
  std::string job;
  bool created = false;                   // the database did not have it
  std::vector<api::FieldChange> changes;  // database -> file; empty: in sync
};

// Compares every [[job]] of `jobs` with its row and, unless `dry_run`,
// writes the file's definition where they differ (and records its digest),
// audited "job.sync" by `actor` (before/after: the changed fields, configs
// masked with `redact_keys`). Returns one entry per [[job]], in file order.
// A row changed concurrently answers kConflict naming the job (run it again).
Result<std::vector<JobSync>> SyncJobs(Store& store, const std::vector<JobDefinition>& jobs,
                                      bool dry_run, const std::string& actor,
                                      const std::vector<std::string>& redact_keys);

}  // namespace taskengine
