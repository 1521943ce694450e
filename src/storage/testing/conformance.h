// The storage conformance suite: the contract of src/storage/store.h as
// executable cases, written once and instantiated per backend (D1).
//
// A backend instantiates it in its own test binary:
//
//   INSTANTIATE_TEST_SUITE_P(Sqlite, StoreConformance,
//                            ::testing::Values(StoreFactory{...}), StoreFactoryName);
//
// Every case gets a fresh, empty storage location (StoreEnv::dir), a FakeClock
// and a RandomSource that answers 0.0 (no jitter) unless the case sets it, and
// a store that was opened by the factory and Migrate()d. Nothing here may
// assume a particular backend: cases speak only through the Store interface.
//
// A backend that cannot pass a case lists it in StoreFactory::skips with a
// reason; the case then reports GTEST_SKIP() with that reason. Skip entries
// must name existing cases (Suite_SkipListNamesExistingCases checks it).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "storage/store.h"
#include "taskengine/clock.h"
#include "taskengine/random.h"
#include "testing_support/test_util.h"

namespace taskengine {

// Where and with what a factory opens a store for one case.
struct StoreEnv {
  std::string dir;       // a fresh empty directory owned by the case
  Clock* clock;          // not owned; the case's FakeClock
  RandomSource* random;  // not owned; 0.0 unless the case sets another value
};

// How to open one backend, and what it cannot do.
struct StoreFactory {
  std::string name;  // the instantiation's display name, e.g. "Sqlite"
  // Opens a store over env (not migrated: the fixture calls Migrate()). Each
  // call with an env whose dir is fresh must give an empty database.
  std::function<Result<std::unique_ptr<Store>>(const StoreEnv&)> open;
  // Whether a second open() with the same env gives another store object over
  // the SAME data (as another process or node would). Enables the
  // multi-store cases. Default: false.
  bool shares_data_between_opens = false;
  // Case name (e.g. "L4_SweepIsBoundedByMaxBatch") -> why this backend cannot
  // pass it. Such cases are skipped with the reason.
  std::map<std::string, std::string> skips;
};

// Readable values in gtest failure messages.
// (Candidates for include/taskengine/ once other suites want them too.)
inline void PrintTo(ErrorCode c, std::ostream* os) { *os << ErrorCodeName(c); }
inline void PrintTo(ExecutionStatus s, std::ostream* os) { *os << ToString(s); }
inline void PrintTo(FailureClass c, std::ostream* os) { *os << ToString(c); }
inline void PrintTo(EffectAnswer a, std::ostream* os) { *os << ToString(a); }
inline void PrintTo(ReplayOutcome o, std::ostream* os) {
  *os << (o == ReplayOutcome::kReplayed ? "replayed" : "pending_approval");
}
inline void PrintTo(AdmitOutcome o, std::ostream* os) {
  *os << (o == AdmitOutcome::kCreated     ? "created"
          : o == AdmitOutcome::kDuplicate ? "duplicate"
                                          : "conflict");
}
template <typename Tag>
void PrintTo(const IntId<Tag>& id, std::ostream* os) {
  *os << id.value;
}

// Names each instantiation after StoreFactory::name.
std::string StoreFactoryName(const ::testing::TestParamInfo<StoreFactory>& info);
// gtest prints parameters in failure messages.
void PrintTo(const StoreFactory& factory, std::ostream* os);

// The lease of the jobs the cases define with an explicit one.
inline constexpr Millis kCaseLeaseMs = 10'000;
// The default retry policy's first backoff (attempt 1, no jitter).
inline constexpr Millis kFirstBackoffMs = 5'000;

// The ids of `executions`, in their order.
inline std::vector<std::int64_t> ExecutionIds(const std::vector<Execution>& executions) {
  std::vector<std::int64_t> ids;
  for (const Execution& e : executions) ids.push_back(e.id.value);
  return ids;
}

// A RandomSource whose answer a case may change. Thread-safe.
class SettableRandom final : public RandomSource {
 public:
  double Uniform01() override { return value_.load(); }
  void Set(double v) { value_.store(v); }

 private:
  std::atomic<double> value_{0.0};
};

// The fixture of every conformance case. Not thread-safe itself; the store it
// holds is.
class StoreConformance : public ::testing::TestWithParam<StoreFactory> {
 protected:
  static constexpr Millis kSecond = 1000;

  void SetUp() override;
  void TearDown() override;

  // The store under test (opened and migrated).
  Store& store() { return *store_; }
  const StoreEnv& env() const { return env_; }
  Millis Now() const { return clock_.NowMillis(); }
  void Advance(Millis ms) { clock_.Advance(std::chrono::milliseconds(ms)); }
  // What the store's RandomSource answers from now on (backoff jitter).
  void SetJitter(double v) { random_.Set(v); }

  // Opens another store object over the same env (not migrated).
  Result<std::unique_ptr<Store>> OpenAnother() { return GetParam().open(env_); }
  // Closes the store under test and opens and migrates a new one over the
  // same env, as a restart would. Fails the case when that fails.
  // REQUIRES: GetParam().shares_data_between_opens.
  void Reopen();

  // A valid job definition of queue `queue` with the default policy.
  static JobDefinition MakeJob(const std::string& name, const std::string& queue = "default");
  // Upserts MakeJob(name, queue), failing the case when that fails.
  void DefineJob(const std::string& name, const std::string& queue = "default");
  void DefineJob(const JobDefinition& job);

  // A request for `job` with payload {"n":<n>}; its fingerprint is a function
  // of n alone (same n, same fingerprint).
  static AdmitRequest MakeRequest(const std::string& job, int n = 0, const std::string& tenant = "",
                                  const std::string& key = "");
  // Admits one request and returns its id; fails the case when not created.
  ExecutionId AdmitOne(const AdmitRequest& request);
  // Claims at most `max` from `queue` for `worker`.
  std::vector<Lease> ClaimN(const std::string& queue, int max, const std::string& worker = "w1");
  // Claims exactly one lease from `queue`; fails the case otherwise.
  Lease ClaimOne(const std::string& queue = "default", const std::string& worker = "w1");

  // Reads an execution; fails the case when the read fails.
  Execution Get(ExecutionId id);
  // Every execution (newest first), following the cursor.
  std::vector<Execution> All();
  int CountExecutions() { return static_cast<int>(All().size()); }
  // Every field of an execution, one per line: compare two snapshots with
  // EXPECT_EQ and gtest shows the difference.
  static std::string Describe(const Execution& e);
  // A snapshot of everything observable about the store's executions: every
  // execution with its logs and effects, and the whole audit log. "Nothing
  // changed" means equal snapshots.
  std::string Snapshot();

  // Every effect of `id`, by reservation time; fails the case when the read fails.
  std::vector<EffectRecord> Effects(ExecutionId id);
  // Every field of an effect record on one line.
  static std::string DescribeEffect(const EffectRecord& r);
  // ReserveEffect; fails the case when it returns an error status.
  EffectReply Reserve(const Lease& lease, const std::string& name);
  // Reserves `name` (expecting kProceed) and commits it with `detail`; fails
  // the case otherwise.
  void ReserveAndCommit(const Lease& lease, const std::string& name, const std::string& detail);

  // Every audit record, newest first, following the cursor; only the records
  // about `target` unless it is empty. Fails the case when a read fails.
  std::vector<AuditRecord> Audit(const std::string& target = "");
  // Every field of an audit record, one per line.
  static std::string DescribeAudit(const AuditRecord& r);
  // The audit target naming an execution: "execution:<id>".
  static std::string Target(ExecutionId id) { return "execution:" + std::to_string(id.value); }
  static OperatorAction By(const std::string& actor, const std::string& reason = "") {
    return OperatorAction{actor, reason};
  }

  static LeaseRef Ref(const Lease& lease) { return LeaseRef{lease.id, lease.version}; }

  // The execution search (conformance_search.cc): the ids of every match of
  // `filter`, following its cursor pages; and a mix of jobs a (queue default)
  // and b (queue high), tenants "", t1 and t2, triggers api and scheduled and
  // every open and ended status, admitted in three steps a minute apart
  // (returns the time after each step's admissions).
  std::vector<std::int64_t> SearchIds(ExecutionFilter filter);
  std::vector<Millis> PopulateSearchMix();

 private:
  FakeClock clock_;
  SettableRandom random_;
  std::unique_ptr<TempDir> dir_;
  StoreEnv env_{};
  std::unique_ptr<Store> store_;
};

}  // namespace taskengine
