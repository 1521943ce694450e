#include "server/job_seeding.h"

#include <spdlog/spdlog.h>

#include "api/errors.h"
#include "api/redaction.h"
#include "server/logging.h"

namespace taskengine {
namespace {

// The definition as the file says it, stamped with its digest.
JobDefinition Seeded(const JobDefinition& file) {
  JobDefinition job = file;
  job.seed_digest = api::JobDefinitionDigest(file);
  return job;
}

std::string FieldList(const std::vector<api::FieldChange>& changes) {
  std::string out;
  for (const api::FieldChange& c : changes) out += (out.empty() ? "" : ", ") + c.field;
  return out;
}

Result<std::optional<JobDefinition>> ReadRow(Store& store, const JobName& name) {
  Result<JobDefinition> row = store.GetJob(name);
  if (row.ok()) return std::optional<JobDefinition>(std::move(row).value());
  if (row.status().code() == ErrorCode::kNotFound) return std::optional<JobDefinition>();
  return row.status();
}

}  // namespace

SeedAction PlanSeed(const std::optional<JobDefinition>& row, const JobDefinition& file) {
  if (!row) return SeedAction::kInsert;
  const std::string file_digest = api::JobDefinitionDigest(file);
  const std::string row_digest = api::JobDefinitionDigest(*row);
  if (row_digest == file_digest) return SeedAction::kUnchanged;
  if (!row->seed_digest.empty() && row->seed_digest == row_digest) return SeedAction::kFollow;
  return SeedAction::kKeep;
}

Status SeedJobs(Store& store, const std::vector<JobDefinition>& jobs, Millis now) {
  (void)now;
  for (const JobDefinition& file : jobs) {
    auto fail = [&](const Status& s) {
      return Status(s.code(), "seeding job '" + file.name.value + "': " + s.message());
    };
    auto row = ReadRow(store, file.name);
    if (!row.ok()) return fail(row.status());
    const JobDefinition seeded = Seeded(file);
    Status written;
    switch (PlanSeed(*row, file)) {
      case SeedAction::kInsert:
        written = store.ChangeJob({JobChange::Kind::kCreate, seeded, 0, std::nullopt});
        break;
      case SeedAction::kUnchanged:
        if ((*row)->seed_digest != seeded.seed_digest) {  // record that the file says it too
          JobDefinition adopted = **row;
          adopted.seed_digest = seeded.seed_digest;
          written = store.ChangeJob(
              {JobChange::Kind::kReplace, adopted, (*row)->updated_at, std::nullopt});
        }
        break;
      case SeedAction::kFollow: {
        const auto changes = api::DiffJobs(**row, seeded, /*mask=*/true, {});
        AuditRecord audit;
        audit.actor = "config-file";
        audit.action = "job.seed";
        audit.target = "job:" + file.name.value;
        audit.before_json = api::DumpJson(api::ChangesBefore(changes));
        audit.after_json = api::DumpJson(api::ChangesAfter(changes));
        audit.reason = "the config file changed and nobody edited the job at runtime";
        written = store.ChangeJob({JobChange::Kind::kReplace, seeded, (*row)->updated_at, audit});
        if (written.ok()) {
          LogEvent(spdlog::level::info, "job follows the config file",
                   {{"job", file.name.value}, {"fields", FieldList(changes)}});
        }
        break;
      }
      case SeedAction::kKeep: {
        const auto changes = api::DiffJobs(**row, seeded, /*mask=*/true, {});
        LogEvent(spdlog::level::warn,
                 "job was edited at runtime and differs from the config file; the database's "
                 "definition is kept (see `taskengine migrate --sync-jobs --dry-run`)",
                 {{"job", file.name.value}, {"fields", FieldList(changes)}});
        break;
      }
    }
    // A concurrent edit or seed between the read and the write: theirs wins.
    if (!written.ok() && written.code() != ErrorCode::kConflict) return fail(written);
  }
  return Status::Ok();
}

Result<std::vector<JobSync>> SyncJobs(Store& store, const std::vector<JobDefinition>& jobs,
                                      bool dry_run, const std::string& actor,
                                      const std::vector<std::string>& redact_keys) {
  std::vector<JobSync> out;
  for (const JobDefinition& file : jobs) {
    auto fail = [&](const Status& s) {
      return Status(s.code(), "job '" + file.name.value + "': " + s.message());
    };
    TE_ASSIGN_OR_RETURN(std::optional<JobDefinition> row, ReadRow(store, file.name));
    const JobDefinition seeded = Seeded(file);
    JobSync sync;
    sync.job = file.name.value;
    sync.created = !row.has_value();
    JobDefinition empty;
    empty.name = file.name;
    sync.changes = api::DiffJobs(row ? *row : empty, seeded, /*mask=*/true, redact_keys);
    if (sync.created) {
      // Creation lists every field of the file's definition.
      Json after = api::JobFields(seeded);
      sync.changes.clear();
      for (auto& [key, value] : after.items()) {
        Json v = value;
        if (key == "config") v = api::RedactJobConfig(v, /*reveal=*/false, redact_keys);
        sync.changes.push_back({key, nullptr, v});
      }
    }
    if (!dry_run) {
      Status written;
      if (sync.created || !sync.changes.empty()) {
        AuditRecord audit;
        audit.actor = actor;
        audit.action = "job.sync";
        audit.target = "job:" + file.name.value;
        audit.before_json =
            api::DumpJson(sync.created ? Json::object() : api::ChangesBefore(sync.changes));
        audit.after_json = api::DumpJson(api::ChangesAfter(sync.changes));
        audit.reason = "migrate --sync-jobs: the config file applied on purpose";
        written =
            store.ChangeJob({sync.created ? JobChange::Kind::kCreate : JobChange::Kind::kReplace,
                             seeded, sync.created ? 0 : row->updated_at, audit});
      } else if (row->seed_digest != seeded.seed_digest) {
        JobDefinition adopted = *row;
        adopted.seed_digest = seeded.seed_digest;
        written =
            store.ChangeJob({JobChange::Kind::kReplace, adopted, row->updated_at, std::nullopt});
      }
      if (!written.ok()) return fail(written);
    }
    out.push_back(std::move(sync));
  }
  return out;
}

}  // namespace taskengine
