// Masking of secrets in job definition configs (quality.md §3.10, X2).
//
// A job's config may hold credentials: an `http` job's static headers (e.g.
// Authorization), a `command` job's environment, and whatever a deployment
// names in its redaction list. Every view of a config that leaves the server
// (API responses, CLI output, audit records) goes through RedactJobConfig,
// which masks them for everyone but the global admin. Remote workers are the
// exception: a lease carries the config unmasked, because the worker needs it
// to run the job.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace taskengine::api {

// What a masked value is replaced with.
inline constexpr char kRedacted[] = "[redacted]";

// Masks the secrets of a job config unless `reveal`:
//   - every value inside a member named "headers" or "env" (the names stay,
//     so an operator can see which headers or variables are set);
//   - the whole value of every member whose name is in `keys` or is one of
//     "password", "secret", "token", "api_key", "authorization" (names
//     compared case-insensitively, at any depth, arrays included);
//   - the user information of a string member named "url"
//     ("https://user:pw@host/..." -> "https://[redacted]@host/...").
// Other values, and anything that is not an object, are kept. Pure; never
// throws.
nlohmann::ordered_json RedactJobConfig(const nlohmann::ordered_json& config, bool reveal,
                                       const std::vector<std::string>& keys = {});

}  // namespace taskengine::api
