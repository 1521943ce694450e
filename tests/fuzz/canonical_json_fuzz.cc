// libFuzzer target for CanonicalizeJson (RD17).
//
// Feeds arbitrary bytes to the canonicalizer with any top-level value allowed.
// Properties checked on every input (a violation aborts, which libFuzzer
// reports as a crash):
//   - a rejection is kInvalidArgument with "offset N: ..." and N <= size;
//   - an accepted input canonicalizes to text that is itself accepted and
//     canonicalizes to the same text (idempotence);
//   - with require_object the same text is accepted exactly when it is an
//     object;
//   - nothing crashes, hangs or trips ASan/UBSan (the sanitizers check that).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/canonical_json.h"
#include "taskengine/status.h"

namespace {

using ::taskengine::CanonicalizeJson;
using ::taskengine::CanonicalJsonOptions;
using ::taskengine::ErrorCode;

// Checks the shape of a rejection: "offset N: reason" with N within the input.
void CheckError(const taskengine::Status& status, std::size_t size) {
  TE_CHECK(status.code() == ErrorCode::kInvalidArgument);
  const std::string& m = status.message();
  TE_CHECK(m.rfind("offset ", 0) == 0);
  const char* digits = m.c_str() + 7;
  char* end = nullptr;
  const unsigned long long offset = std::strtoull(digits, &end, 10);
  TE_CHECK(end != digits && end[0] == ':' && end[1] == ' ' && end[2] != '\0');
  TE_CHECK(offset <= size);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const CanonicalJsonOptions any{.max_depth = 64, .require_object = false};

  const taskengine::Result<std::string> once = CanonicalizeJson(input, any);
  const taskengine::Result<std::string> object = CanonicalizeJson(input);
  if (!once.ok()) {
    CheckError(once.status(), size);
    TE_CHECK(!object.ok());
    CheckError(object.status(), size);
    return 0;
  }
  const bool is_object = !once->empty() && (*once)[0] == '{';
  TE_CHECK(object.ok() == is_object);
  if (object.ok()) TE_CHECK(*object == *once);

  const taskengine::Result<std::string> twice = CanonicalizeJson(*once, any);
  TE_CHECK(twice.ok());
  TE_CHECK(*twice == *once);
  return 0;
}
