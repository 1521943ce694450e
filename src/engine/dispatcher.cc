#include "engine/dispatcher.h"

#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "core/canonical_json.h"
#include "core/mutex.h"
#include "core/pickup_trace.h"

namespace taskengine {
namespace {

constexpr std::size_t kMaxLaneKeyBytes = 200;
constexpr std::size_t kMaxRequesterBytes = 200;
// Dispatch refuses run-at times more than this far ahead (an absurd number).
constexpr Millis kMaxDelayMs = 366LL * 24 * 3600 * 1000;

// True when `s` holds a C0 control character, DEL or a C1 control character
// (U+0080..U+009F in UTF-8): lane keys are names that operators read.
bool HasControlCharacter(std::string_view s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) <= 0x9f &&
        static_cast<unsigned char>(s[i + 1]) >= 0x80) {
      return true;
    }
  }
  return false;
}

// O1: "{field}" placeholders in a job's lane template take the payload's
// top-level field (strings as they are, numbers and booleans as JSON text).
Result<std::string> RenderLaneTemplate(const std::string& tmpl, const std::string& payload) {
  auto doc = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  std::string out;
  for (std::size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] != '{') {
      out += tmpl[i];
      continue;
    }
    std::size_t close = tmpl.find('}', i);
    if (close == std::string::npos) return InvalidArgument("lane template has an unclosed '{'");
    std::string field = tmpl.substr(i + 1, close - i - 1);
    auto it = doc.is_object() ? doc.find(field) : doc.end();
    if (!doc.is_object() || it == doc.end()) {
      return InvalidArgument("payload has no field '" + field + "' for the job's lane template");
    }
    if (it->is_string()) {
      out += it->get<std::string>();
    } else if (it->is_number() || it->is_boolean()) {
      out += it->dump();
    } else {
      return InvalidArgument("payload field '" + field +
                             "' of the lane template must be a "
                             "string, number or boolean");
    }
    i = close;
  }
  return out;
}

DispatchResult ToDispatchResult(const AdmitResult& a) {
  DispatchResult d;
  d.id = a.id;
  d.created = a.outcome == AdmitOutcome::kCreated;
  d.status = a.status;
  d.conflict = a.outcome == AdmitOutcome::kConflict;
  return d;
}

// What a dispatch takes from `job` (the admission checks it: AdmitRequest::prepared_with).
JobTerms TermsOf(const JobDefinition& job) { return {job.queue, job.scope, job.lane_template}; }

// Checks `r` against its job definition and builds the store request.
Result<AdmitRequest> PrepareOne(const DispatchRequest& r, const JobDefinition& job, Millis now,
                                std::size_t max_payload_bytes) {
  if (job.scope == JobScope::kPerTenant && r.tenant.empty()) {
    return InvalidArgument("job " + r.job.value + " is per-tenant: a tenant is required");
  }
  if (job.scope == JobScope::kGlobal && !r.tenant.empty()) {
    return InvalidArgument("job " + r.job.value + " is global: it takes no tenant");
  }
  if (!r.tenant.empty() && !IsValidTenantId(r.tenant.value)) {
    return InvalidArgument("invalid tenant '" + r.tenant.value +
                           "': must match [a-z0-9][a-z0-9_-]{0,49}");
  }
  if (!r.idempotency_key.empty() && !IsValidIdempotencyKey(r.idempotency_key)) {
    return InvalidArgument("invalid idempotency key: 1..200 printable ASCII characters, no spaces");
  }
  if (r.lane_key.size() > kMaxLaneKeyBytes)
    return InvalidArgument("lane key longer than 200 bytes");
  if (HasControlCharacter(r.lane_key)) {
    return InvalidArgument("lane key must not contain control characters");
  }
  if (r.requester.size() > kMaxRequesterBytes) {
    return InvalidArgument("requester longer than 200 bytes");
  }
  if (r.payload_json.size() > max_payload_bytes) {
    return InvalidArgument("payload of " + std::to_string(r.payload_json.size()) +
                           " bytes exceeds the limit of " + std::to_string(max_payload_bytes));
  }
  if (r.delay_ms < 0 || r.delay_ms > kMaxDelayMs) {
    return InvalidArgument("delay must be between 0 and 366 days");
  }
  if (r.run_at < 0 || (r.run_at > 0 && r.run_at > now + kMaxDelayMs)) {
    return InvalidArgument("run-at must be within 366 days from now");
  }
  auto canonical = CanonicalizeJson(r.payload_json.empty() ? "{}" : r.payload_json);
  if (!canonical.ok()) {
    return InvalidArgument("payload must be a JSON object: " + canonical.status().message());
  }
  AdmitRequest a;
  a.job = r.job;
  a.tenant = r.tenant;
  a.fingerprint = AdmissionFingerprint(*canonical, r.requester);
  a.payload_json = std::move(canonical).value();
  a.idempotency_key = r.idempotency_key;
  a.requester = r.requester;
  a.trigger = r.trigger;
  a.run_at = r.run_at > 0 ? r.run_at : now + r.delay_ms;
  a.lane_key = r.lane_key;
  if (a.lane_key.empty() && !job.lane_template.empty()) {
    TE_ASSIGN_OR_RETURN(a.lane_key, RenderLaneTemplate(job.lane_template, a.payload_json));
    if (a.lane_key.size() > kMaxLaneKeyBytes) {
      return InvalidArgument("rendered lane key longer than 200 bytes");
    }
    if (HasControlCharacter(a.lane_key)) {
      return InvalidArgument("rendered lane key must not contain control characters");
    }
  }
  a.parent = r.parent;
  a.prepared_with = TermsOf(job);
  a.token_id = r.token_id;
  return a;
}

}  // namespace

Status ConflictStatus(const DispatchRequest& request, ExecutionId existing) {
  return Conflict("idempotency key '" + request.idempotency_key + "' of job " + request.job.value +
                  " was already used by execution " + std::to_string(existing.value) +
                  " with a different payload or requester; nothing was created");
}

struct Dispatcher::Core {
  Core(Store* s, Clock* c, std::size_t max_payload, std::function<void(const LifecycleEvent&)> l)
      : store(s), clock(c), max_payload_bytes(max_payload), lifecycle(std::move(l)) {}

  Store* const store;
  Clock* const clock;
  const std::size_t max_payload_bytes;
  const std::function<void(const LifecycleEvent&)> lifecycle;

  // Checked admissions with the definitions of their jobs.
  struct Admissions {
    Millis now = 0;
    std::unordered_map<std::string, std::shared_ptr<const JobDefinition>> jobs;
    std::vector<AdmitRequest> admits;  // in request order
    bool remembered = false;           // a definition was not read for them
  };

  // The definition of `job`: the remembered one unless `stored`, else read
  // (and remembered). kNotFound forgets it.
  Result<std::shared_ptr<const JobDefinition>> Definition(const JobName& job, bool stored,
                                                          bool* remembered) {
    if (!stored) {
      MutexLock lock(mu);
      if (auto it = known.find(job.value); it != known.end()) {
        *remembered = true;
        return it->second;
      }
    }
    Result<JobDefinition> read = store->GetJob(job);
    MutexLock lock(mu);
    if (!read.ok()) {
      if (read.status().code() == ErrorCode::kNotFound) known.erase(job.value);
      return read.status();
    }
    auto def = std::make_shared<const JobDefinition>(std::move(read).value());
    known[job.value] = def;
    return def;
  }

  // Checks every request against its job definition (the remembered ones
  // unless `stored`) into `a`; the first error. `a.remembered` tells, also on
  // an error, whether a remembered definition took part.
  Status PrepareBatch(const std::vector<DispatchRequest>& requests, bool stored, Admissions& a) {
    a.now = clock->NowMillis();
    a.admits.reserve(requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const DispatchRequest& r = requests[i];
      auto it = a.jobs.find(r.job.value);
      if (it == a.jobs.end()) {
        if (!IsValidJobName(r.job.value)) {
          return InvalidArgument("invalid job name '" + r.job.value + "'");
        }
        TE_ASSIGN_OR_RETURN(std::shared_ptr<const JobDefinition> def,
                            Definition(r.job, stored, &a.remembered));
        if (!def->enabled) return InvalidArgument("job " + r.job.value + " is disabled");
        it = a.jobs.emplace(r.job.value, std::move(def)).first;
      }
      auto admit = PrepareOne(r, *it->second, a.now, max_payload_bytes);
      if (!admit.ok()) {
        if (requests.size() == 1) return admit.status();
        return Status(admit.status().code(),
                      "item " + std::to_string(i) + ": " + admit.status().message());
      }
      a.admits.push_back(std::move(admit).value());
    }
    return Status::Ok();
  }

  // PrepareBatch from the stored definitions.
  Result<Admissions> PrepareStored(const std::vector<DispatchRequest>& requests) {
    Admissions a;
    TE_RETURN_IF_ERROR(PrepareBatch(requests, /*stored=*/true, a));
    return a;
  }

  // PrepareBatch from the remembered definitions; when that refuses and one
  // of them took part, again from the stored ones.
  Result<Admissions> Prepare(const std::vector<DispatchRequest>& requests) {
    Admissions a;
    Status s = PrepareBatch(requests, /*stored=*/false, a);
    if (s.ok()) return a;
    if (!a.remembered) return s;
    return PrepareStored(requests);
  }

  // After a failed admission prepared from remembered definitions: reads them
  // again; true when one had changed, so that preparing again may answer
  // otherwise. (Any other failure stands.)
  bool Outdated(const Admissions& used) {
    for (const auto& [name, before] : used.jobs) {
      bool remembered = false;
      Result<std::shared_ptr<const JobDefinition>> now =
          Definition(JobName(name), /*stored=*/true, &remembered);
      if (!now.ok()) {
        if (now.status().code() == ErrorCode::kNotFound) return true;
        continue;
      }
      if ((*now)->enabled != before->enabled || TermsOf(**now) != TermsOf(*before)) return true;
    }
    return false;
  }

  // The answers to committed admissions; emits their lifecycle events.
  std::vector<DispatchResult> Conclude(const Admissions& admissions,
                                       const std::vector<AdmitResult>& admitted) const {
    std::vector<DispatchResult> out;
    out.reserve(admitted.size());
    bool created = false;
    for (const AdmitResult& r : admitted) {
      created = created || r.outcome == AdmitOutcome::kCreated;
      out.push_back(ToDispatchResult(r));
    }
    if (created && lifecycle) {
      for (std::size_t i = 0; i < admitted.size(); ++i) {
        if (admitted[i].outcome != AdmitOutcome::kCreated) continue;
        const AdmitRequest& admit = admissions.admits[i];
        LifecycleEvent e;
        e.kind = LifecycleKind::kDispatched;
        e.id = admitted[i].id;
        e.job = admit.job;
        e.tenant = admit.tenant;
        e.queue = admissions.jobs.at(admit.job.value)->queue;
        e.status = admitted[i].status;
        e.trigger = admit.trigger;
        e.run_at = admit.run_at;
        e.at = admissions.now;
        lifecycle(e);
      }
    }
    return out;
  }

  // Admits `admissions` (the store takes the requests; the events need
  // them only with a lifecycle listener).
  static std::vector<AdmitRequest> TakeAdmits(Admissions& admissions, bool keep) {
    return keep ? admissions.admits : std::move(admissions.admits);
  }

  Mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const JobDefinition>> known GUARDED_BY(mu);
};

Dispatcher::Dispatcher(Store* store, Clock* clock, std::size_t max_payload_bytes,
                       std::function<void(const LifecycleEvent&)> lifecycle)
    : core_(std::make_shared<Core>(store, clock, max_payload_bytes, std::move(lifecycle))) {}

Dispatcher::~Dispatcher() = default;

Result<DispatchResult> Dispatcher::Dispatch(const DispatchRequest& request) {
  TE_ASSIGN_OR_RETURN(auto results, DispatchBatch({request}));
  if (results.front().conflict) return ConflictStatus(request, results.front().id);
  return results.front();
}

Result<std::vector<DispatchResult>> Dispatcher::DispatchBatch(
    const std::vector<DispatchRequest>& requests) {
  if (requests.empty()) return std::vector<DispatchResult>{};
  Core& core = *core_;
  TE_ASSIGN_OR_RETURN(Core::Admissions admissions, core.Prepare(requests));
  Result<std::vector<AdmitResult>> admitted = core.store->AdmitBatch(admissions.admits);
  if (!admitted.ok() && admissions.remembered && core.Outdated(admissions)) {
    // Prepared from an out-of-date definition: once more from the stored ones.
    TE_ASSIGN_OR_RETURN(admissions, core.PrepareStored(requests));
    admitted = core.store->AdmitBatch(admissions.admits);
  }
  if (!admitted.ok()) return admitted.status();
  if (pickup_trace::PickupTrace* trace = pickup_trace::Installed(); trace != nullptr) [[unlikely]] {
    pickup_trace::MarkWrite(trace, pickup_trace::kAdmitQueued, pickup_trace::last_write);
    pickup_trace::MarkAt(trace, pickup_trace::kAdmitReturned, pickup_trace::NowNs());
  }
  return core.Conclude(admissions, *admitted);
}

void Dispatcher::DispatchBatchAsync(std::vector<DispatchRequest> requests, DispatchDone done) {
  if (requests.empty()) return done(std::vector<DispatchResult>{});
  Result<Core::Admissions> prepared = core_->Prepare(requests);
  if (!prepared.ok()) return done(prepared.status());
  auto admissions = std::make_shared<Core::Admissions>(std::move(prepared).value());
  std::vector<AdmitRequest> admits =
      Core::TakeAdmits(*admissions, /*keep=*/static_cast<bool>(core_->lifecycle));
  // Prepared from a remembered definition that turns out to be out of date, a
  // failed admission is tried once more (DispatchBatch): the callback then
  // needs the requests.
  std::shared_ptr<const std::vector<DispatchRequest>> again;
  if (admissions->remembered) {
    again = std::make_shared<const std::vector<DispatchRequest>>(std::move(requests));
  }
  core_->store->AdmitBatchAsync(
      std::move(admits), [core = core_, admissions, again, done = std::move(done)](
                             Result<std::vector<AdmitResult>> admitted) mutable {
        if (admitted.ok()) return done(core->Conclude(*admissions, *admitted));
        if (!again || !core->Outdated(*admissions)) return done(admitted.status());
        Result<Core::Admissions> fresh = core->PrepareStored(*again);
        if (!fresh.ok()) return done(fresh.status());
        auto retried = std::make_shared<Core::Admissions>(std::move(fresh).value());
        std::vector<AdmitRequest> admits =
            Core::TakeAdmits(*retried, /*keep=*/static_cast<bool>(core->lifecycle));
        core->store->AdmitBatchAsync(
            std::move(admits),
            [core, retried, done = std::move(done)](Result<std::vector<AdmitResult>> admitted) {
              if (!admitted.ok()) return done(admitted.status());
              done(core->Conclude(*retried, *admitted));
            });
      });
}

}  // namespace taskengine
