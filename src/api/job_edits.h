// Job definitions as runtime data (product.md §1, I1, X4): create, edit,
// enable, disable and delete, shared by the REST API (routes_jobs.cc) and the
// CLI (job:create, job:edit, ...), so that both parse the same request shape,
// apply the same rules and write the same audit records.
//
// A request names fields as JobToJson does (views.h): name, display_name,
// handler, queue, scope, schedule (null = none), timezone, timeout_ms,
// lease_ms, max_attempts, backoff_base_ms, backoff_cap_ms,
// max_permanent_attempts, max_unsupported_schema_attempts,
// max_ambiguous_attempts, max_consecutive_lease_expiries, lane_template,
// accepted_schema_versions, catch_up, catch_up_window_ms, window_ms, config,
// enabled; plus "reason" (kept in the audit record). Only types are checked
// here; what is allowed is decided by JobEditor::check_job, the check config
// loading uses (server.h, CheckJobDefinition).
//
// What runs on the server never comes from a request: the config keys a
// handler's settings own (JobEditor::server_owned_config_keys: a `command`
// job's argv/cwd/env, an `http` job's url/allow_hosts/...) cannot be set by a
// create and may only be repeated unchanged by an edit; a request names a
// [[command_profile]] or [[http_target]] of the server's configuration
// instead (config {"profile": NAME} / {"target": NAME}).
//
// Pure except for the store writes. Thread-safe (each call is one
// compare-and-set transaction: a definition changed since it was read
// answers kConflict).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "storage/store.h"
#include "taskengine/status.h"
#include "taskengine/types.h"
#include "views/views.h"

namespace taskengine::api {

// The fields of a definition an operator writes, by JobToJson's names and in
// its order (no timestamps, no schedule state).
Json JobFields(const JobDefinition& job);

// Hex SHA-256 of JobFields with the config's keys sorted: equal exactly when
// two definitions say the same.
std::string JobDefinitionDigest(const JobDefinition& job);

// One field whose value differs.
struct FieldChange {
  std::string field;
  Json before;
  Json after;
};

// The JobFields of `before` and `after` that differ, in JobFields order.
// Configs are masked (RedactJobConfig, reveal=false, `redact_keys`) when
// `mask` — a config whose difference lies only in secrets still appears.
std::vector<FieldChange> DiffJobs(const JobDefinition& before, const JobDefinition& after,
                                  bool mask, const std::vector<std::string>& redact_keys);

// {field: before, ...} and {field: after, ...} of `changes`.
Json ChangesBefore(const std::vector<FieldChange>& changes);
Json ChangesAfter(const std::vector<FieldChange>& changes);

// What a job edit needs besides the request.
struct JobEditor {
  Store* store = nullptr;  // not owned
  // The definition check of config loading; FIELD of a refusal in *field.
  // Required.
  std::function<Status(const JobDefinition&, std::string* field)> check_job;
  // The config keys of `handler` the server's configuration owns. Default
  // (empty): none.
  std::function<std::vector<std::string>(std::string_view handler)> server_owned_config_keys;
  // Masked in audit records on top of the built-in keys. Default: none.
  std::vector<std::string> redact_keys;
};

// Every call below refuses bad input with kInvalidArgument naming the field
// (also in *field, "" when none) and changes nothing then.

// POST /api/v1/jobs, job:create. `body` must name "name" and "handler";
// every other field takes its default. kConflict when the name exists.
// Audited "job.create" (before {}, after every field). Returns the stored
// definition.
Result<JobDefinition> CreateJob(const JobEditor& editor, const nlohmann::json& body,
                                const std::string& actor, std::string* field);

// PATCH /api/v1/jobs/{name}, job:edit: the fields `body` names replace those
// of `current` (read by the caller); name, handler and scope may only be
// repeated unchanged. "config" replaces the editable keys; owned keys are
// kept. kInvalidArgument when nothing is given. No change: no write, no
// record. Audited "job.update" with the changed fields before and after.
Result<JobDefinition> EditJob(const JobEditor& editor, const JobDefinition& current,
                              const nlohmann::json& body, const std::string& actor,
                              std::string* field);

// POST .../enable|disable, job:enable, job:disable. Audited "job.enable" /
// "job.disable" with `reason` (required to disable: kInvalidArgument when
// empty). Already so: no write, no record.
Result<JobDefinition> SetJobEnabled(const JobEditor& editor, const JobDefinition& current,
                                    bool enabled, const std::string& actor,
                                    const std::string& reason);

// DELETE /api/v1/jobs/{name}, job:delete. kConflict naming how many when
// executions of the job are open (Store::ChangeJob). Audited "job.delete"
// (before: every field, after {}).
Status DeleteJob(const JobEditor& editor, const JobDefinition& current, const std::string& actor,
                 const std::string& reason);

}  // namespace taskengine::api
