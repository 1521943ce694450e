// PlanSeed: what seeding does with one [[job]] of the config file and its
// database row (product.md §1: the file seeds, the database is the source of
// truth).
#include "server/job_seeding.h"

#include <gtest/gtest.h>

#include "api/job_edits.h"

namespace taskengine {
namespace {

JobDefinition FileJob() {
  JobDefinition job;
  job.name = JobName("report");
  job.handler = "command";
  job.config_json = R"({"argv":["/bin/true"]})";
  return job;
}

// The row as seeding wrote it from `file`.
JobDefinition SeededRow(const JobDefinition& file) {
  JobDefinition row = file;
  row.seed_digest = api::JobDefinitionDigest(file);
  row.created_at = 1;
  row.updated_at = 2;
  return row;
}

TEST(PlanSeedTest, DecidesFromTheRowAndTheDigestItWasSeededWith) {
  const JobDefinition file = FileJob();
  JobDefinition changed_file = file;
  changed_file.schedule = "0 3 * * *";
  JobDefinition edited = SeededRow(file);
  edited.retry.max_attempts = 9;  // a runtime edit keeps the old seed digest
  JobDefinition unknown = file;   // created at runtime, or seeded by an older binary
  unknown.retry.max_attempts = 2;
  JobDefinition reordered = SeededRow(file);
  reordered.config_json = R"({ "argv" : [ "/bin/true" ] })";

  struct Case {
    const char* what;
    std::optional<JobDefinition> row;
    JobDefinition file;
    SeedAction want;
  };
  const Case cases[] = {
      {"no row", std::nullopt, file, SeedAction::kInsert},
      {"as seeded, file unchanged", SeededRow(file), file, SeedAction::kUnchanged},
      {"as seeded, file changed", SeededRow(file), changed_file, SeedAction::kFollow},
      {"edited, file unchanged", edited, file, SeedAction::kKeep},
      {"edited, file changed", edited, changed_file, SeedAction::kKeep},
      {"edited back to the file", SeededRow(changed_file), changed_file, SeedAction::kUnchanged},
      {"no seed digest, differs", unknown, file, SeedAction::kKeep},
      {"no seed digest, same", file, file, SeedAction::kUnchanged},
      {"same config, other spelling", reordered, file, SeedAction::kUnchanged},
  };
  for (const Case& c : cases) EXPECT_EQ(PlanSeed(c.row, c.file), c.want) << c.what;
}

TEST(PlanSeedTest, TimestampsAndTheDigestItselfAreNotPartOfTheDefinition) {
  JobDefinition a = FileJob();
  JobDefinition b = SeededRow(a);
  b.created_at = 123;
  b.updated_at = 456;
  EXPECT_EQ(api::JobDefinitionDigest(a), api::JobDefinitionDigest(b));
  b.enabled = false;
  EXPECT_NE(api::JobDefinitionDigest(a), api::JobDefinitionDigest(b));
}

}  // namespace
}  // namespace taskengine
