#include "api/job_edits.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "api/errors.h"
#include "api/redaction.h"
#include "core/canonical_json.h"
#include "core/job_fields.h"
#include "core/notify_target.h"

namespace taskengine::api {
namespace {

constexpr std::size_t kMaxText = 4096;  // the definition check bounds each field
constexpr std::size_t kMaxReason = 1000;

// The fields a request may name: JobFields' and "reason".
// A job definition's fields, and the audit reason of a change.
bool IsRequestField(std::string_view key) {
  return key == "reason" ||
         std::find(std::begin(kJobDefinitionFields), std::end(kJobDefinitionFields), key) !=
             std::end(kJobDefinitionFields);
}

// Reads typed fields of a request body into a definition; the first problem
// wins and names its field.
class FieldReader {
 public:
  explicit FieldReader(const nlohmann::json& body) : body_(body) {}

  const nlohmann::json* Find(std::string_view field) const {
    auto it = body_.find(std::string(field));
    return it == body_.end() ? nullptr : &*it;
  }

  void Fail(std::string_view field, const std::string& problem) {
    if (!status_.ok()) return;
    field_ = std::string(field);
    status_ = InvalidArgument(std::string(field) + " " + problem);
  }

  // A string (null reads as "" when `nullable`).
  void String(std::string_view field, bool nullable, std::string* out) {
    const nlohmann::json* v = Find(field);
    if (v == nullptr) return;
    if (nullable && v->is_null()) {
      out->clear();
    } else if (!v->is_string()) {
      Fail(field, nullable ? "must be a string or null" : "must be a string");
    } else if (v->get_ref<const std::string&>().size() > kMaxText) {
      Fail(field, "is longer than " + std::to_string(kMaxText) + " bytes");
    } else {
      *out = v->get<std::string>();
    }
  }

  template <typename T>
  void Int(std::string_view field, T* out) {
    const nlohmann::json* v = Find(field);
    if (v == nullptr) return;
    if (!v->is_number_integer() && !v->is_number_unsigned()) {
      Fail(field, "must be an integer");
      return;
    }
    const auto lo = static_cast<std::int64_t>(std::numeric_limits<T>::min());
    const auto hi = static_cast<std::int64_t>(std::numeric_limits<T>::max());
    if (v->is_number_unsigned() &&
        v->get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) {
      Fail(field, "is out of range");
      return;
    }
    const std::int64_t n = v->get<std::int64_t>();
    if (n < lo || n > hi) {
      Fail(field, "is out of range");
      return;
    }
    *out = static_cast<T>(n);
  }

  void Bool(std::string_view field, bool* out) {
    const nlohmann::json* v = Find(field);
    if (v == nullptr) return;
    if (!v->is_boolean()) {
      Fail(field, "must be true or false");
      return;
    }
    *out = v->get<bool>();
  }

  Status status() const { return status_; }
  const std::string& field() const { return field_; }

 private:
  const nlohmann::json& body_;
  Status status_;
  std::string field_;
};

// Reads every field of `body` but name, handler, scope and config into *job.
void ReadCommonFields(FieldReader& r, JobDefinition* job) {
  r.String("display_name", false, &job->display_name);
  r.String("queue", false, &job->queue);
  r.String("schedule", true, &job->schedule);
  r.String("timezone", false, &job->timezone);
  r.Int("timeout_ms", &job->timeout_ms);
  r.Int("lease_ms", &job->lease_ms);
  RetryPolicy& p = job->retry;
  r.Int("max_attempts", &p.max_attempts);
  r.Int("backoff_base_ms", &p.backoff_base_ms);
  r.Int("backoff_cap_ms", &p.backoff_cap_ms);
  r.Int("max_permanent_attempts", &p.max_permanent_attempts);
  r.Int("max_unsupported_schema_attempts", &p.max_unsupported_schema_attempts);
  r.Int("max_ambiguous_attempts", &p.max_ambiguous_attempts);
  r.Int("max_consecutive_lease_expiries", &p.max_consecutive_lease_expiries);
  r.String("lane_template", true, &job->lane_template);
  if (const nlohmann::json* v = r.Find("accepted_schema_versions")) {
    if (!v->is_array() || v->size() > 1000) {
      r.Fail("accepted_schema_versions", "must be an array of integers, e.g. [1, 2]");
    } else {
      std::vector<int> versions;
      for (const auto& item : *v) {
        if (!item.is_number_integer() || item.get<std::int64_t>() < 0 ||
            item.get<std::int64_t>() > std::numeric_limits<int>::max()) {
          r.Fail("accepted_schema_versions", "must hold integers from 1 to 1000000");
          break;
        }
        versions.push_back(item.get<int>());
      }
      job->accepted_schema_versions = std::move(versions);
    }
  }
  std::string catch_up(ToString(job->catch_up));
  r.String("catch_up", false, &catch_up);
  if (auto policy = ParseCatchUpPolicy(catch_up)) {
    job->catch_up = *policy;
  } else {
    r.Fail("catch_up", "must be \"coalesce\", \"all\" or \"none\"");
  }
  r.Int("catch_up_window_ms", &job->catch_up_window_ms);
  r.Int("window_ms", &job->window_ms);
  r.Bool("enabled", &job->enabled);
  r.Bool("notify_on_failure", &job->notify_on_failure);
  if (const nlohmann::json* v = r.Find("notify_targets")) {
    if (!v->is_array() || v->size() > kMaxNotifyTargets) {
      r.Fail("notify_targets", "must be an array of at most " + std::to_string(kMaxNotifyTargets) +
                                   " strings, e.g. [\"ops@example.com\", \"webhook:NAME\"]");
    } else {
      std::vector<std::string> targets;
      for (const auto& item : *v) {
        if (!item.is_string()) {
          r.Fail("notify_targets", "must hold only strings");
          break;
        }
        targets.push_back(item.get<std::string>());
      }
      job->notify_targets = std::move(targets);
    }
  }
}

// kInvalidArgument naming the first field of `body` no request has.
Status RejectUnknownFields(const nlohmann::json& body, std::string* field) {
  for (const auto& [key, unused] : body.items()) {
    if (!IsRequestField(key)) {
      *field = key.substr(0, 100);
      std::string known;
      for (std::string_view f : kJobDefinitionFields)
        known += (known.empty() ? "" : ", ") + std::string(f);
      known += ", reason";
      return InvalidArgument("unknown field '" + *field + "' (known: " + known + ")");
    }
  }
  return Status::Ok();
}

Result<std::string> ReadReason(const nlohmann::json& body, std::string* field) {
  auto it = body.find("reason");
  if (it == body.end() || it->is_null()) return std::string();
  if (!it->is_string() || it->get_ref<const std::string&>().size() > kMaxReason) {
    *field = "reason";
    return InvalidArgument("reason must be a string of at most " + std::to_string(kMaxReason) +
                           " bytes");
  }
  return it->get<std::string>();
}

std::vector<std::string> OwnedKeys(const JobEditor& editor, std::string_view handler) {
  if (!editor.server_owned_config_keys) return {};
  return editor.server_owned_config_keys(handler);
}

Status OwnedKeyError(std::string_view handler, const std::string& key, std::string* field) {
  *field = "config." + key;
  const std::string ref = handler == "command" ? "profile" : "target";
  const std::string table = handler == "command" ? "[[command_profile]]" : "[[http_target]]";
  return InvalidArgument("config." + key + " of " + std::string(handler) +
                         " jobs comes from the server's configuration only (taskengine.toml): "
                         "name a " +
                         table + " with config." + ref + " instead");
}

// The config an edit asks for (`requested`) applied to the current one: the
// keys the server's configuration owns are kept from `current`, and may only
// be repeated unchanged; every other key is replaced by the request's.
Result<nlohmann::json> EditedConfig(const JobEditor& editor, const JobDefinition& job,
                                    const nlohmann::json& requested, std::string* field) {
  nlohmann::json current = nlohmann::json::parse(job.config_json, nullptr, false);
  if (!current.is_object()) current = nlohmann::json::object();
  const std::vector<std::string> owned = OwnedKeys(editor, job.handler);
  nlohmann::json edited = nlohmann::json::object();
  for (const auto& [key, value] : requested.items()) {
    const bool is_owned = std::find(owned.begin(), owned.end(), key) != owned.end();
    auto kept = current.find(key);
    if (is_owned && (kept == current.end() || *kept != value)) {
      return OwnedKeyError(job.handler, key, field);
    }
    edited[key] = value;
  }
  for (const std::string& key : owned) {
    if (auto kept = current.find(key); kept != current.end()) edited[key] = *kept;
  }
  return edited;
}

AuditRecord JobAudit(const std::string& action, const JobDefinition& job, const std::string& actor,
                     const Json& before, const Json& after, const std::string& reason) {
  AuditRecord audit;
  audit.actor = actor;
  audit.action = action;
  audit.target = "job:" + job.name.value;
  audit.before_json = DumpJson(before);
  audit.after_json = DumpJson(after);
  audit.reason = reason;
  return audit;
}

// Checks `job` and writes it (kReplace against `current`'s version, or
// kCreate) with its audit record.
Status CheckAndWrite(const JobEditor& editor, JobChange change, std::string* field) {
  if (Status s = editor.check_job(change.job, field); !s.ok()) return s;
  field->clear();
  return editor.store->ChangeJob(change);
}

}  // namespace

Json JobFields(const JobDefinition& job) {
  Json all = JobToJson(job, JobScheduleInfo{});
  Json fields = Json::object();
  for (auto& [key, value] : all.items()) {
    if (std::find(std::begin(kJobDefinitionFields), std::end(kJobDefinitionFields), key) !=
        std::end(kJobDefinitionFields)) {
      fields[key] = value;
    }
  }
  return fields;
}

std::string JobDefinitionDigest(const JobDefinition& job) {
  Json fields = JobFields(job);
  // Fields added after the digest was first stored count only when they are
  // not at their defaults, so that a definition seeded by an older binary
  // still reads as unedited.
  const JobDefinition defaults;
  if (job.notify_on_failure == defaults.notify_on_failure) fields.erase("notify_on_failure");
  if (job.notify_targets.empty()) fields.erase("notify_targets");
  // nlohmann::json (not ordered) sorts the keys of the config.
  fields["config"] = nlohmann::json::parse(fields["config"].dump()).dump();
  return Sha256Hex(fields.dump());
}

std::vector<FieldChange> DiffJobs(const JobDefinition& before, const JobDefinition& after,
                                  bool mask, const std::vector<std::string>& redact_keys) {
  Json a = JobFields(before);
  Json b = JobFields(after);
  std::vector<FieldChange> changes;
  for (auto& [key, value] : a.items()) {
    if (key == "config") {
      if (nlohmann::json::parse(value.dump()) == nlohmann::json::parse(b[key].dump())) continue;
      FieldChange c{key, value, b[key]};
      if (mask) {
        c.before = RedactJobConfig(c.before, /*reveal=*/false, redact_keys);
        c.after = RedactJobConfig(c.after, /*reveal=*/false, redact_keys);
      }
      changes.push_back(std::move(c));
    } else if (value != b[key]) {
      changes.push_back({key, value, b[key]});
    }
  }
  return changes;
}

Json ChangesBefore(const std::vector<FieldChange>& changes) {
  Json out = Json::object();
  for (const FieldChange& c : changes) out[c.field] = c.before;
  return out;
}

Json ChangesAfter(const std::vector<FieldChange>& changes) {
  Json out = Json::object();
  for (const FieldChange& c : changes) out[c.field] = c.after;
  return out;
}

Result<JobDefinition> CreateJob(const JobEditor& editor, const nlohmann::json& body,
                                const std::string& actor, std::string* field) {
  field->clear();
  if (!body.is_object()) return InvalidArgument("the request body must be a JSON object");
  TE_RETURN_IF_ERROR(RejectUnknownFields(body, field));
  TE_ASSIGN_OR_RETURN(std::string reason, ReadReason(body, field));
  JobDefinition job;
  FieldReader r(body);
  for (std::string_view required : {"name", "handler"}) {
    const nlohmann::json* v = r.Find(required);
    if (v == nullptr || v->is_null()) r.Fail(required, "is required");
  }
  std::string name;
  r.String("name", false, &name);
  job.name = JobName(name);
  r.String("handler", false, &job.handler);
  std::string scope(ToString(job.scope));
  r.String("scope", false, &scope);
  if (auto parsed = ParseJobScope(scope)) {
    job.scope = *parsed;
  } else {
    r.Fail("scope", "must be \"global\" or \"per_tenant\"");
  }
  ReadCommonFields(r, &job);
  if (const nlohmann::json* config = r.Find("config")) {
    if (!config->is_object()) {
      r.Fail("config", "must be a JSON object");
    } else {
      for (const std::string& key : OwnedKeys(editor, job.handler)) {
        if (config->contains(key)) return OwnedKeyError(job.handler, key, field);
      }
      job.config_json = config->dump();
    }
  }
  if (!r.status().ok()) {
    *field = r.field();
    return r.status();
  }
  const Json after = JobFields(job);
  Json masked = after;
  masked["config"] = RedactJobConfig(after["config"], /*reveal=*/false, editor.redact_keys);
  JobChange change{JobChange::Kind::kCreate, job, 0,
                   JobAudit("job.create", job, actor, Json::object(), masked, reason)};
  TE_RETURN_IF_ERROR(CheckAndWrite(editor, std::move(change), field));
  return editor.store->GetJob(job.name);
}

Result<JobDefinition> EditJob(const JobEditor& editor, const JobDefinition& current,
                              const nlohmann::json& body, const std::string& actor,
                              std::string* field) {
  field->clear();
  if (!body.is_object()) return InvalidArgument("the request body must be a JSON object");
  TE_RETURN_IF_ERROR(RejectUnknownFields(body, field));
  TE_ASSIGN_OR_RETURN(std::string reason, ReadReason(body, field));
  bool any = false;
  for (const auto& [key, unused] : body.items()) any = any || key != "reason";
  if (!any) {
    return InvalidArgument("nothing to change: give at least one field of the job definition");
  }
  JobDefinition job = current;
  FieldReader r(body);
  // What a job is cannot change under its executions: only repeated as is.
  const Json now = JobFields(current);
  for (std::string_view fixed : {"name", "handler", "scope"}) {
    const nlohmann::json* v = r.Find(fixed);
    if (v != nullptr && nlohmann::json::parse(now[std::string(fixed)].dump()) != *v) {
      r.Fail(fixed, "cannot be changed: create a job under another name (and delete this one)");
    }
  }
  ReadCommonFields(r, &job);
  if (const nlohmann::json* config = r.Find("config")) {
    if (!config->is_object()) {
      r.Fail("config", "must be a JSON object");
    } else if (r.status().ok()) {
      TE_ASSIGN_OR_RETURN(nlohmann::json edited, EditedConfig(editor, current, *config, field));
      job.config_json = edited.dump();
    }
  }
  if (!r.status().ok()) {
    *field = r.field();
    return r.status();
  }
  const std::vector<FieldChange> changes =
      DiffJobs(current, job, /*mask=*/true, editor.redact_keys);
  if (changes.empty()) return current;  // no change: no write, no record
  JobChange change{
      JobChange::Kind::kReplace, job, current.updated_at,
      JobAudit("job.update", job, actor, ChangesBefore(changes), ChangesAfter(changes), reason)};
  TE_RETURN_IF_ERROR(CheckAndWrite(editor, std::move(change), field));
  return editor.store->GetJob(job.name);
}

Result<JobDefinition> SetJobEnabled(const JobEditor& editor, const JobDefinition& current,
                                    bool enabled, const std::string& actor,
                                    const std::string& reason) {
  if (!enabled && reason.empty()) {
    return InvalidArgument("reason is required to disable a job (say why, for the audit log)");
  }
  if (reason.size() > kMaxReason) {
    return InvalidArgument("reason is longer than " + std::to_string(kMaxReason) + " bytes");
  }
  if (current.enabled == enabled) return current;
  JobDefinition job = current;
  job.enabled = enabled;
  JobChange change{
      JobChange::Kind::kReplace, job, current.updated_at,
      JobAudit(enabled ? "job.enable" : "job.disable", job, actor,
               Json{{"enabled", current.enabled}}, Json{{"enabled", enabled}}, reason)};
  TE_RETURN_IF_ERROR(editor.store->ChangeJob(change));
  return editor.store->GetJob(job.name);
}

Status DeleteJob(const JobEditor& editor, const JobDefinition& current, const std::string& actor,
                 const std::string& reason) {
  if (reason.size() > kMaxReason) {
    return InvalidArgument("reason is longer than " + std::to_string(kMaxReason) + " bytes");
  }
  Json before = JobFields(current);
  before["config"] = RedactJobConfig(before["config"], /*reveal=*/false, editor.redact_keys);
  JobChange change{JobChange::Kind::kDelete, current, current.updated_at,
                   JobAudit("job.delete", current, actor, before, Json::object(), reason)};
  return editor.store->ChangeJob(change);
}

}  // namespace taskengine::api
