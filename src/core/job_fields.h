// The fields of a job definition (taskengine/types.h) as a [[job]] table of
// the configuration file and the job routes of the API name them: one list
// for both.
#pragma once

#include <string_view>

namespace taskengine {

inline constexpr std::string_view kJobDefinitionFields[] = {
    "name",
    "display_name",
    "handler",
    "queue",
    "scope",
    "schedule",
    "timezone",
    "timeout_ms",
    "lease_ms",
    "max_attempts",
    "backoff_base_ms",
    "backoff_cap_ms",
    "max_permanent_attempts",
    "max_unsupported_schema_attempts",
    "max_ambiguous_attempts",
    "max_consecutive_lease_expiries",
    "lane_template",
    "accepted_schema_versions",
    "catch_up",
    "catch_up_window_ms",
    "window_ms",
    "config",
    "enabled",
    "notify_on_failure",
    "notify_targets",
};

}  // namespace taskengine
