// The fixture of the conformance suite, and its cases about the schema (D4),
// durability across a reopen (D1) and job definitions.
#include "storage/testing/conformance.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

namespace taskengine {

std::string StoreFactoryName(const ::testing::TestParamInfo<StoreFactory>& info) {
  return info.param.name;
}

void PrintTo(const StoreFactory& factory, std::ostream* os) { *os << factory.name; }

namespace {

// The case name without the "/<instantiation>" suffix gtest adds.
std::string CurrentCaseName() {
  std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  return name.substr(0, name.find('/'));
}

}  // namespace

void StoreConformance::SetUp() {
  const StoreFactory& factory = GetParam();
  if (auto it = factory.skips.find(CurrentCaseName()); it != factory.skips.end()) {
    GTEST_SKIP() << factory.name << " cannot pass this case: " << it->second;
  }
  dir_ = std::make_unique<TempDir>();
  env_ = StoreEnv{dir_->path().string(), &clock_, &random_};
  ASSERT_TRUE(factory.open) << "factory " << factory.name << " has no open function";
  ASSERT_OK_AND_ASSIGN(store_, factory.open(env_));
  ASSERT_TRUE(store_ != nullptr);
  ASSERT_OK(store_->Migrate());
}

void StoreConformance::TearDown() {
  store_.reset();
  dir_.reset();
}

void StoreConformance::Reopen() {
  store_.reset();
  ASSERT_OK_AND_ASSIGN(store_, GetParam().open(env_));
  ASSERT_OK(store_->Migrate());
}

JobDefinition StoreConformance::MakeJob(const std::string& name, const std::string& queue) {
  JobDefinition job;
  job.name = JobName(name);
  job.display_name = name;
  job.handler = "noop";
  job.queue = queue;
  return job;
}

void StoreConformance::DefineJob(const std::string& name, const std::string& queue) {
  DefineJob(MakeJob(name, queue));
}

void StoreConformance::DefineJob(const JobDefinition& job) {
  Status s = store_->UpsertJob(job);
  ASSERT_TRUE(s.ok()) << "UpsertJob(" << job.name.value << "): " << s.ToString();
}

AdmitRequest StoreConformance::MakeRequest(const std::string& job, int n, const std::string& tenant,
                                           const std::string& key) {
  AdmitRequest r;
  r.job = JobName(job);
  r.tenant = TenantId(tenant);
  r.payload_json = "{\"n\":" + std::to_string(n) + "}";
  // The store compares fingerprints; it does not compute them. Any
  // deterministic 64-hex-digit value per payload stands in for the SHA-256.
  char fp[65];
  std::snprintf(fp, sizeof fp, "%064x", static_cast<unsigned>(n));
  r.fingerprint = fp;
  r.idempotency_key = key;
  r.requester = "tester";
  return r;
}

ExecutionId StoreConformance::AdmitOne(const AdmitRequest& request) {
  Result<AdmitResult> r = store_->Admit(request);
  EXPECT_TRUE(r.ok()) << "Admit: " << r.status().ToString();
  if (!r.ok()) return ExecutionId();
  EXPECT_EQ(r->outcome, AdmitOutcome::kCreated);
  return r->id;
}

std::vector<Lease> StoreConformance::ClaimN(const std::string& queue, int max,
                                            const std::string& worker) {
  ClaimRequest req;
  req.worker = WorkerId(worker);
  req.slots.push_back(QueueSlot{queue, max});
  Result<std::vector<Lease>> r = store_->Claim(req);
  EXPECT_TRUE(r.ok()) << "Claim: " << r.status().ToString();
  if (!r.ok()) return {};
  return std::move(r).value();
}

Lease StoreConformance::ClaimOne(const std::string& queue, const std::string& worker) {
  std::vector<Lease> leases = ClaimN(queue, 1, worker);
  EXPECT_EQ(leases.size(), 1u) << "expected to claim one execution of queue " << queue;
  return leases.empty() ? Lease{} : leases.front();
}

Execution StoreConformance::Get(ExecutionId id) {
  Result<Execution> r = store_->GetExecution(id);
  EXPECT_TRUE(r.ok()) << "GetExecution(" << id.value << "): " << r.status().ToString();
  return r.ok() ? std::move(r).value() : Execution{};
}

std::vector<Execution> StoreConformance::All() {
  std::vector<Execution> all;
  ExecutionFilter filter;
  filter.limit = 1000;
  for (int pages = 0; pages < 10'000; ++pages) {
    Result<ExecutionPage> page = store_->ListExecutions(filter);
    EXPECT_TRUE(page.ok()) << "ListExecutions: " << page.status().ToString();
    if (!page.ok()) break;
    for (Execution& e : page->items) all.push_back(std::move(e));
    if (page->next_before.value == 0) break;
    filter.before = page->next_before;
  }
  return all;
}

std::string StoreConformance::Describe(const Execution& e) {
  std::ostringstream o;
  o << "id=" << e.id.value << "\njob=" << e.job.value << "\ntenant=" << e.tenant.value
    << "\nqueue=" << e.queue << "\nstatus=" << ToString(e.status)
    << "\ntrigger=" << ToString(e.trigger) << "\nrequester=" << e.requester
    << "\nworker=" << e.worker.value << "\nattempt=" << e.attempt
    << "\nidempotency_key=" << e.idempotency_key << "\npayload_json=" << e.payload_json
    << "\nfingerprint=" << e.fingerprint << "\nresult_json=" << e.result_json
    << "\nprogress=" << e.progress << "\nerror=" << e.error
    << "\nfailure_class=" << ToString(e.failure_class) << "\nscheduled_at=" << e.scheduled_at
    << "\nrun_at=" << e.run_at << "\nqueued_at=" << e.queued_at << "\nstarted_at=" << e.started_at
    << "\nfinished_at=" << e.finished_at << "\nclaim_version=" << e.claim_version.value
    << "\nlease_expires_at=" << e.lease_expires_at << "\ncancel_requested=" << e.cancel_requested
    << "\nlane_key=" << e.lane_key << "\nparent=" << e.parent.value
    << "\nconsecutive_lease_expiries=" << e.consecutive_lease_expiries
    << "\npermanent_failures=" << e.permanent_failures
    << "\nambiguous_failures=" << e.ambiguous_failures
    << "\nretry.max_attempts=" << e.retry.max_attempts
    << "\nretry.backoff_base_ms=" << e.retry.backoff_base_ms
    << "\nretry.backoff_cap_ms=" << e.retry.backoff_cap_ms
    << "\nretry.max_permanent_attempts=" << e.retry.max_permanent_attempts
    << "\nretry.max_unsupported_schema_attempts=" << e.retry.max_unsupported_schema_attempts
    << "\nretry.max_ambiguous_attempts=" << e.retry.max_ambiguous_attempts
    << "\nretry.max_consecutive_lease_expiries=" << e.retry.max_consecutive_lease_expiries
    << "\nlease_ms=" << e.lease_ms << "\n";
  return o.str();
}

std::string StoreConformance::Snapshot() {
  std::ostringstream o;
  for (const Execution& e : All()) {
    o << Describe(e);
    Result<std::vector<LogEntry>> logs = store_->GetLogs(e.id, 1000);
    EXPECT_TRUE(logs.ok()) << "GetLogs: " << logs.status().ToString();
    if (!logs.ok()) continue;
    for (const LogEntry& l : *logs) {
      o << "log " << l.execution.value << " attempt=" << l.attempt << " at=" << l.at << " "
        << ToString(l.level) << " " << l.message << "\n";
    }
    for (const EffectRecord& r : Effects(e.id)) o << DescribeEffect(r) << "\n";
  }
  for (const AuditRecord& r : Audit()) o << DescribeAudit(r);
  return o.str();
}

std::vector<EffectRecord> StoreConformance::Effects(ExecutionId id) {
  Result<std::vector<EffectRecord>> r = store_->GetEffects(id);
  EXPECT_TRUE(r.ok()) << "GetEffects(" << id.value << "): " << r.status().ToString();
  return r.ok() ? std::move(r).value() : std::vector<EffectRecord>{};
}

std::string StoreConformance::DescribeEffect(const EffectRecord& r) {
  std::ostringstream o;
  o << "effect execution=" << r.execution.value << " name=" << r.name << " key=" << r.key
    << " committed=" << r.committed << " reserved_by=" << r.reserved_by.value
    << " attempt=" << r.attempt << " reserved_at=" << r.reserved_at
    << " committed_at=" << r.committed_at << " detail=" << r.detail;
  return o.str();
}

EffectReply StoreConformance::Reserve(const Lease& lease, const std::string& name) {
  Result<EffectReply> r = store_->ReserveEffect(Ref(lease), name);
  EXPECT_TRUE(r.ok()) << "ReserveEffect(" << lease.id.value << ", " << name
                      << "): " << r.status().ToString();
  if (!r.ok()) {
    EffectReply failed;
    failed.answer = EffectAnswer::kStale;  // any answer a case would not expect
    failed.key = "<error>";
    return failed;
  }
  return std::move(r).value();
}

void StoreConformance::ReserveAndCommit(const Lease& lease, const std::string& name,
                                        const std::string& detail) {
  EXPECT_EQ(Reserve(lease, name).answer, EffectAnswer::kProceed) << "reserving " << name;
  Result<EffectRecord> r = store_->CommitEffect(Ref(lease), name, detail);
  EXPECT_TRUE(r.ok()) << "CommitEffect(" << lease.id.value << ", " << name
                      << "): " << r.status().ToString();
}

std::vector<AuditRecord> StoreConformance::Audit(const std::string& target) {
  std::vector<AuditRecord> all;
  AuditFilter filter;
  filter.target = target;
  filter.limit = 1000;
  for (int pages = 0; pages < 10'000; ++pages) {
    Result<std::vector<AuditRecord>> page = store_->ListAudit(filter);
    EXPECT_TRUE(page.ok()) << "ListAudit: " << page.status().ToString();
    if (!page.ok() || page->empty()) break;
    filter.before_id = page->back().id;
    const bool full = static_cast<int>(page->size()) == filter.limit;
    for (AuditRecord& r : *page) all.push_back(std::move(r));
    if (!full) break;
  }
  return all;
}

std::string StoreConformance::DescribeAudit(const AuditRecord& r) {
  std::ostringstream o;
  o << "audit id=" << r.id << "\nat=" << r.at << "\nactor=" << r.actor << "\ntenant=" << r.tenant
    << "\naction=" << r.action << "\ntarget=" << r.target << "\nbefore_json=" << r.before_json
    << "\nafter_json=" << r.after_json << "\nreason=" << r.reason << "\n";
  return o.str();
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(StoreConformance);

// --- the suite itself ---

// A skip entry that names no case (a typo, a renamed case) would silently
// stop skipping nothing; it is an error instead.
TEST_P(StoreConformance, Suite_SkipListNamesExistingCases) {
  std::set<std::string> cases;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(i);
    const std::string suite_name = suite.name();
    if (suite_name.find("StoreConformance") == std::string::npos) continue;
    for (int j = 0; j < suite.total_test_count(); ++j) {
      std::string name = suite.GetTestInfo(j)->name();
      cases.insert(name.substr(0, name.find('/')));
    }
  }
  for (const auto& [name, reason] : GetParam().skips) {
    EXPECT_TRUE(cases.count(name)) << "skip entry names no case: " << name;
    EXPECT_FALSE(reason.empty()) << "skip entry without a reason: " << name;
  }
}

// --- D4: schema ---

TEST_P(StoreConformance, D4_MigrateTwiceIsIdempotent) {
  ASSERT_OK_AND_ASSIGN(int version, store().SchemaVersion());
  EXPECT_GT(version, 0);
  DefineJob("report");
  const ExecutionId id = AdmitOne(MakeRequest("report", 1));
  const std::string before = Snapshot();

  ASSERT_OK(store().Migrate());
  ASSERT_OK_AND_ASSIGN(int again, store().SchemaVersion());
  EXPECT_EQ(again, version);
  EXPECT_EQ(Snapshot(), before);
  EXPECT_OK(store().GetJob(JobName("report")));
  EXPECT_EQ(Get(id).status, ExecutionStatus::kQueued);
}

TEST_P(StoreConformance, D4_MigrateFromAnotherStoreObjectIsIdempotent) {
  if (!GetParam().shares_data_between_opens) {
    GTEST_SKIP() << GetParam().name << " cannot open a second store over the same data";
  }
  ASSERT_OK_AND_ASSIGN(int version, store().SchemaVersion());
  DefineJob("report");
  AdmitOne(MakeRequest("report", 1));
  const std::string before = Snapshot();

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> other, OpenAnother());
  ASSERT_OK(other->Migrate());
  ASSERT_OK_AND_ASSIGN(int other_version, other->SchemaVersion());
  EXPECT_EQ(other_version, version);
  EXPECT_EQ(Snapshot(), before);
}

// --- durability: what was acknowledged survives a restart ---

TEST_P(StoreConformance, D1_ReopenedStoreSeesEveryAcknowledgedChange) {
  if (!GetParam().shares_data_between_opens) {
    GTEST_SKIP() << GetParam().name << " cannot reopen a store over the same data";
  }
  DefineJob("report");
  for (int i = 0; i < 3; ++i) AdmitOne(MakeRequest("report", i, "", "k" + std::to_string(i)));
  ASSERT_OK(store().Complete(Ref(ClaimOne()), "{\"done\":1}"));
  const Lease running = ClaimOne();
  ASSERT_OK(store().AppendLog(Ref(running), LogLevel::kInfo, "before restart"));
  ASSERT_OK_AND_ASSIGN(std::vector<JobDefinition> jobs_before, store().ListJobs());
  const std::string before = Snapshot();

  Reopen();
  if (HasFatalFailure()) return;
  EXPECT_EQ(Snapshot(), before);
  ASSERT_OK_AND_ASSIGN(std::vector<JobDefinition> jobs_after, store().ListJobs());
  EXPECT_EQ(jobs_after.size(), jobs_before.size());
  // The lease is part of the durable state: its holder carries on.
  EXPECT_OK(store().Heartbeat(Ref(running), 50));
  ASSERT_OK_AND_ASSIGN(AdmitResult dup, store().Admit(MakeRequest("report", 2, "", "k2")));
  EXPECT_EQ(dup.outcome, AdmitOutcome::kDuplicate) << "idempotency keys survive a restart";
  EXPECT_EQ(ClaimN("default", 10).size(), 1u) << "the last queued one is still claimable";
}

TEST_P(StoreConformance, D1_LedgerAuditGrantsAndPendingReplaysSurviveARestart) {
  if (!GetParam().shares_data_between_opens) {
    GTEST_SKIP() << GetParam().name << " cannot reopen a store over the same data";
  }
  DefineJob("report");
  const ExecutionId quarantined = AdmitOne(MakeRequest("report", 1));
  const Lease first = ClaimOne();
  ReserveAndCommit(first, "notice", "msg-1");
  ASSERT_EQ(Reserve(first, "charge").answer, EffectAnswer::kProceed);
  ASSERT_OK(store().Fail(Ref(first), FailureClass::kAmbiguous, "timeout"));
  ReplayRequest replay;
  replay.id = quarantined;
  replay.action = By("alice", "checked");
  replay.require_approval = true;
  replay.ambiguous = AmbiguousResolution::kAssumeNotDone;
  ASSERT_OK(store().Replay(replay));
  const ExecutionId running = AdmitOne(MakeRequest("report", 2));
  const Lease second = ClaimOne();
  ASSERT_EQ(Reserve(second, "upload").answer, EffectAnswer::kProceed);
  ASSERT_OK(store().RequestCancel(running, By("bob")));
  ASSERT_OK(store().Grant("carol", "acme"));
  const std::string before = Snapshot();

  Reopen();
  if (HasFatalFailure()) return;
  EXPECT_EQ(Snapshot(), before) << "effects and the audit log are durable";
  ASSERT_OK_AND_ASSIGN(bool granted, store().IsGranted("carol", "acme"));
  EXPECT_TRUE(granted);
  // The reservation and the cancel request survived: the claim carries on.
  EXPECT_EQ(Reserve(second, "upload").answer, EffectAnswer::kCanceled);
  ASSERT_OK_AND_ASSIGN(HeartbeatReply hb, store().Heartbeat(Ref(second), std::nullopt));
  EXPECT_TRUE(hb.cancel_requested);
  // So did the pending replay, with its resolution.
  EXPECT_EQ(store().ApproveReplay(quarantined, By("alice")).status().code(), ErrorCode::kConflict);
  ASSERT_OK_AND_ASSIGN(ReplayReply approved, store().ApproveReplay(quarantined, By("dave")));
  EXPECT_EQ(approved.status, ExecutionStatus::kQueued);
  const Lease third = ClaimOne();
  ASSERT_EQ(third.id, quarantined);
  EXPECT_EQ(Reserve(third, "charge").answer, EffectAnswer::kProceed);
  EXPECT_EQ(Reserve(third, "notice").answer, EffectAnswer::kAlreadyDone);
}

// --- job definitions ---

namespace {

// A definition in which every field differs from its default.
JobDefinition FullJob() {
  JobDefinition job;
  job.name = JobName("billing.invoice-run_2");
  job.display_name = "Invoice run";
  job.handler = "command";
  job.queue = "billing";
  job.scope = JobScope::kPerTenant;
  job.schedule = "0 3 * * *";
  job.timezone = "Europe/Paris";
  job.timeout_ms = 123'456;
  job.lease_ms = 45'000;
  job.retry.max_attempts = 7;
  job.retry.backoff_base_ms = 1'500;
  job.retry.backoff_cap_ms = 600'000;
  job.retry.max_permanent_attempts = 3;
  job.retry.max_unsupported_schema_attempts = 6;
  job.retry.max_ambiguous_attempts = 2;
  job.retry.max_consecutive_lease_expiries = 4;
  job.lane_template = "{{tenant}}:{{payload.account}}";
  job.accepted_schema_versions = {1, 3, 4};
  job.config_json = "{\"argv\":[\"/bin/true\"],\"env\":{}}";
  job.enabled = false;
  job.seed_digest = "d1g35t";
  return job;
}

// Every field of a definition except the timestamps, one per line.
std::string DescribeJob(const JobDefinition& j) {
  std::ostringstream o;
  o << "name=" << j.name.value << "\ndisplay_name=" << j.display_name << "\nhandler=" << j.handler
    << "\nqueue=" << j.queue << "\nscope=" << ToString(j.scope) << "\nschedule=" << j.schedule
    << "\ntimezone=" << j.timezone << "\ntimeout_ms=" << j.timeout_ms << "\nlease_ms=" << j.lease_ms
    << "\nretry.max_attempts=" << j.retry.max_attempts
    << "\nretry.backoff_base_ms=" << j.retry.backoff_base_ms
    << "\nretry.backoff_cap_ms=" << j.retry.backoff_cap_ms
    << "\nretry.max_permanent_attempts=" << j.retry.max_permanent_attempts
    << "\nretry.max_unsupported_schema_attempts=" << j.retry.max_unsupported_schema_attempts
    << "\nretry.max_ambiguous_attempts=" << j.retry.max_ambiguous_attempts
    << "\nretry.max_consecutive_lease_expiries=" << j.retry.max_consecutive_lease_expiries
    << "\nlane_template=" << j.lane_template << "\naccepted_schema_versions=";
  for (int v : j.accepted_schema_versions) o << v << ",";
  o << "\nconfig_json=" << j.config_json << "\nenabled=" << j.enabled
    << "\nseed_digest=" << j.seed_digest << "\n";
  return o.str();
}

}  // namespace

TEST_P(StoreConformance, Jobs_UpsertGetRoundTripsEveryField) {
  JobDefinition job = FullJob();
  job.created_at = Now();
  job.updated_at = Now();
  ASSERT_OK(store().UpsertJob(job));

  ASSERT_OK_AND_ASSIGN(JobDefinition got, store().GetJob(job.name));
  EXPECT_EQ(DescribeJob(got), DescribeJob(job));
  // Whether the store keeps the caller's timestamps or stamps its clock's
  // time, both are "now" here.
  EXPECT_EQ(got.created_at, Now());
  EXPECT_EQ(got.updated_at, Now());

  ASSERT_OK_AND_ASSIGN(std::vector<JobDefinition> all, store().ListJobs());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(DescribeJob(all[0]), DescribeJob(job));
}

TEST_P(StoreConformance, Jobs_UpsertReplacesByName) {
  JobDefinition job = FullJob();
  ASSERT_OK(store().UpsertJob(job));
  Advance(kSecond);

  JobDefinition changed = MakeJob(job.name.value, "other");
  changed.handler = "http";
  changed.lease_ms = 5'000;
  changed.retry.max_attempts = 2;
  ASSERT_OK(store().UpsertJob(changed));

  ASSERT_OK_AND_ASSIGN(JobDefinition got, store().GetJob(job.name));
  EXPECT_EQ(DescribeJob(got), DescribeJob(changed));
  ASSERT_OK_AND_ASSIGN(std::vector<JobDefinition> all, store().ListJobs());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(DescribeJob(all[0]), DescribeJob(changed));
}

TEST_P(StoreConformance, Jobs_ListReturnsEveryDefinition) {
  ASSERT_OK_AND_ASSIGN(std::vector<JobDefinition> none, store().ListJobs());
  EXPECT_TRUE(none.empty());

  std::map<std::string, std::string> expected;
  for (const char* name : {"zeta", "alpha", "mid.job", "b-2"}) {
    JobDefinition job = MakeJob(name, std::string("q-") + name);
    job.lease_ms = 1'000 + static_cast<Millis>(expected.size());
    DefineJob(job);
    expected[name] = DescribeJob(job);
  }
  ASSERT_OK_AND_ASSIGN(std::vector<JobDefinition> all, store().ListJobs());
  std::map<std::string, std::string> got;
  for (const JobDefinition& j : all) got[j.name.value] = DescribeJob(j);
  EXPECT_EQ(all.size(), expected.size());
  EXPECT_EQ(got, expected);
}

TEST_P(StoreConformance, Jobs_InvalidNameIsInvalidArgument) {
  for (const std::string& bad :
       {std::string(), std::string("Upper"), std::string("-lead"), std::string("has space"),
        std::string("slash/name"), std::string(101, 'a')}) {
    JobDefinition job = MakeJob("placeholder");
    job.name = JobName(bad);
    Status s = store().UpsertJob(job);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << "name '" << bad << "': " << s.ToString();
  }
  ASSERT_OK_AND_ASSIGN(std::vector<JobDefinition> all, store().ListJobs());
  EXPECT_TRUE(all.empty());
}

TEST_P(StoreConformance, Jobs_InvalidQueueNameIsInvalidArgument) {
  for (const std::string& bad : {std::string(), std::string("Default"), std::string("a b")}) {
    JobDefinition job = MakeJob("report", bad);
    Status s = store().UpsertJob(job);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << "queue '" << bad << "': " << s.ToString();
  }
  ASSERT_OK_AND_ASSIGN(std::vector<JobDefinition> all, store().ListJobs());
  EXPECT_TRUE(all.empty());
}

TEST_P(StoreConformance, Jobs_GetMissingIsNotFound) {
  DefineJob("present");
  Result<JobDefinition> r = store().GetJob(JobName("absent"));
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound) << r.status().ToString();
}

// --- product.md §1: definitions edited at runtime, each with its audit record ---

namespace {

AuditRecord JobAudit(const std::string& action, const std::string& job) {
  AuditRecord r;
  r.actor = "admin";
  r.action = action;
  r.target = "job:" + job;
  r.before_json = "{}";
  r.after_json = "{\"enabled\":false}";
  r.reason = "maintenance";
  return r;
}

}  // namespace

TEST_P(StoreConformance, Jobs_ChangeCreatesReplacesAndDeletesWithTheirAudit) {
  JobChange create{JobChange::Kind::kCreate, FullJob(), 0, JobAudit("job.create", "j")};
  ASSERT_OK(store().ChangeJob(create));
  ASSERT_OK_AND_ASSIGN(JobDefinition created, store().GetJob(FullJob().name));
  EXPECT_EQ(DescribeJob(created), DescribeJob(FullJob()));
  ASSERT_EQ(Audit("job:j").size(), 1u);
  EXPECT_EQ(Audit("job:j")[0].reason, "maintenance");

  // Twice: a conflict, nothing written (no second record either).
  Status again = store().ChangeJob(create);
  EXPECT_EQ(again.code(), ErrorCode::kConflict) << again.ToString();
  EXPECT_EQ(Audit("job:j").size(), 1u);

  // Replace within the same millisecond still moves updated_at forward.
  JobDefinition edited = created;
  edited.enabled = true;
  edited.schedule = "*/5 * * * *";
  ASSERT_OK(store().ChangeJob(
      {JobChange::Kind::kReplace, edited, created.updated_at, JobAudit("job.update", "j")}));
  ASSERT_OK_AND_ASSIGN(JobDefinition replaced, store().GetJob(edited.name));
  EXPECT_EQ(DescribeJob(replaced), DescribeJob(edited));
  EXPECT_EQ(replaced.created_at, created.created_at);
  EXPECT_GT(replaced.updated_at, created.updated_at);
  EXPECT_EQ(Audit("job:j").size(), 2u);

  // A stale version: kConflict, nothing changes.
  JobDefinition stale = edited;
  stale.enabled = false;
  Status lost = store().ChangeJob(
      {JobChange::Kind::kReplace, stale, created.updated_at, JobAudit("job.update", "j")});
  EXPECT_EQ(lost.code(), ErrorCode::kConflict) << lost.ToString();
  ASSERT_OK_AND_ASSIGN(JobDefinition unchanged, store().GetJob(edited.name));
  EXPECT_EQ(DescribeJob(unchanged), DescribeJob(edited));
  EXPECT_EQ(Audit("job:j").size(), 2u);

  JobChange remove{JobChange::Kind::kDelete, edited, 0, JobAudit("job.delete", "j")};
  ASSERT_OK(store().ChangeJob(remove));
  EXPECT_EQ(store().GetJob(edited.name).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(Audit("job:j").size(), 3u);
  EXPECT_EQ(store().ChangeJob(remove).code(), ErrorCode::kNotFound);
  JobChange missing{JobChange::Kind::kReplace, edited, 0, std::nullopt};
  EXPECT_EQ(store().ChangeJob(missing).code(), ErrorCode::kNotFound);
  EXPECT_EQ(Audit("job:j").size(), 3u);
}

TEST_P(StoreConformance, Jobs_DeleteIsRefusedWhileExecutionsAreOpen) {
  DefineJob("busy");
  AdmitOne(MakeRequest("busy", 1));
  AdmitOne(MakeRequest("busy", 2));
  const Lease running = ClaimOne();  // one running, one queued
  JobChange remove{JobChange::Kind::kDelete, MakeJob("busy"), 0, JobAudit("job.delete", "busy")};
  Status s = store().ChangeJob(remove);
  EXPECT_EQ(s.code(), ErrorCode::kConflict) << s.ToString();
  EXPECT_NE(s.message().find("2 open executions"), std::string::npos) << s.message();
  EXPECT_OK(store().GetJob(JobName("busy")).status());
  EXPECT_TRUE(Audit("job:busy").empty());

  // Terminal executions keep their history and do not block the delete.
  ASSERT_OK(store().Complete(Ref(running), "").status());
  ASSERT_OK(store().Complete(Ref(ClaimOne()), "").status());
  ASSERT_OK(store().ChangeJob(remove));
  EXPECT_EQ(store().GetJob(JobName("busy")).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(CountExecutions(), 2);
  EXPECT_EQ(Audit("job:busy").size(), 1u);
}

}  // namespace taskengine
