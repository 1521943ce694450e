// Named server-side settings a job's config refers to (W2, W3).
//
// What runs on the server never comes from an API call: the server's
// configuration file defines named `command` profiles (argv, cwd, env) and
// `http` targets (url, allow_hosts, allow_http, allow_private, headers), and a
// job — from the file or created through the API — names one:
//
//   {"profile": "report", "timeout_ms": 60000}     command job
//   {"target": "hook"}                             http job
//
// Before a run (and when a definition is checked) the reference is replaced
// by the named settings, giving the config the handler has always read.
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>

#include "taskengine/status.h"

namespace taskengine {

// Named settings: name -> a JSON object text holding only server-owned keys.
using NamedConfigs = std::map<std::string, std::string, std::less<>>;

// The key of a `command` job's config naming a profile, and of an `http`
// job's naming a target.
inline constexpr std::string_view kCommandProfileKey = "profile";
inline constexpr std::string_view kHttpTargetKey = "target";

// `config_json` with its reference `ref_key` replaced by the keys of the
// settings it names in `named`; unchanged when it has no `ref_key` or is not
// a JSON object (the handler's parser refuses that). kInvalidArgument when the
// reference is not
// a string, names nothing in `named` (`kind` names the table in the message,
// e.g. "[[command_profile]]"), or the config also sets one of `owned` (the
// named settings say what runs: they are never mixed with inline ones).
Result<std::string> ExpandNamedConfig(std::string_view config_json, std::string_view ref_key,
                                      const NamedConfigs& named,
                                      std::span<const std::string_view> owned,
                                      std::string_view kind);

}  // namespace taskengine
