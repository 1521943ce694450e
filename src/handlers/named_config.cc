#include "handlers/named_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace taskengine {

Result<std::string> ExpandNamedConfig(std::string_view config_json, std::string_view ref_key,
                                      const NamedConfigs& named,
                                      std::span<const std::string_view> owned,
                                      std::string_view kind) {
  nlohmann::json config = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  // Not an object: nothing to expand; the handler's own parser says what is wrong.
  if (!config.is_object()) return std::string(config_json);
  auto ref = config.find(std::string(ref_key));
  if (ref == config.end()) return std::string(config_json);
  const std::string field = "config." + std::string(ref_key);
  if (!ref->is_string())
    return InvalidArgument(field + " must be a string naming a " + std::string(kind));
  const std::string name = ref->get<std::string>();
  auto found = named.find(name);
  if (found == named.end()) {
    std::string known;
    for (const auto& [n, unused] : named) known += (known.empty() ? "" : ", ") + n;
    return InvalidArgument(
        field + " names '" + name.substr(0, 100) + "', which no " + std::string(kind) +
        " of the server's configuration defines (known: " + (known.empty() ? "none" : known) + ")");
  }
  for (std::string_view key : owned) {
    if (config.contains(std::string(key))) {
      return InvalidArgument("config." + std::string(key) + " and " + field +
                             " exclude each other: the " + std::string(kind) + " '" + name +
                             "' says it");
    }
  }
  nlohmann::json settings =
      nlohmann::json::parse(found->second, nullptr, /*allow_exceptions=*/false);
  if (!settings.is_object()) return Internal(std::string(kind) + " '" + name + "' is not a table");
  config.erase(std::string(ref_key));
  for (const auto& [key, value] : settings.items()) config[key] = value;
  return config.dump();
}

}  // namespace taskengine
