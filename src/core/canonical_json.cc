#include "core/canonical_json.h"
namespace taskengine {
Result<std::string> CanonicalizeJson(std::string_view, CanonicalJsonOptions) { return Internal("todo"); }
std::string Sha256Hex(std::string_view) { return {}; }
std::string AdmissionFingerprint(std::string_view, std::string_view) { return {}; }
}  // namespace taskengine
