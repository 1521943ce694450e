// Canonical JSON and the admission fingerprint (A2).
//
// The fingerprint must not change when a client re-sends the same payload with
// different whitespace or key order, so it hashes a canonical form: no
// insignificant whitespace, object members sorted by key (bytewise UTF-8),
// strings re-escaped minimally (only `"`, `\`, and control characters, as
// \b \f \n \r \t or \u00XX), numbers normalized by value. Integer literals
// are exact: from -2^63 to 2^64-1 they are kept digit for digit, beyond that
// they are rejected (never rounded, so two different ids or amounts can never
// share a fingerprint). A number with a fraction or an exponent is an IEEE-754
// double (RFC 8785) printed in its shortest round-trip form, and as an integer
// when it is integral and within that range, so 1.0 == 1 and 1e2 == 100; a
// nonzero number that overflows or underflows a double is rejected. Duplicate
// keys and invalid UTF-8 are rejected.
// The top-level value counts as depth 1.
// Pure: no I/O.
#pragma once

#include <string>
#include <string_view>

#include "taskengine/status.h"

namespace taskengine {

struct CanonicalJsonOptions {
  int max_depth = 64;          // nesting deeper than this -> kInvalidArgument
  bool require_object = true;  // the top-level value must be an object
};

// Parses `json` and returns its canonical text, or kInvalidArgument with the
// byte offset and reason ("offset 17: expected ':'").
Result<std::string> CanonicalizeJson(std::string_view json, CanonicalJsonOptions options = {});

// Lower-case hex SHA-256 of `data`.
std::string Sha256Hex(std::string_view data);

// A2: SHA-256 of the canonical payload plus the requester, hex.
std::string AdmissionFingerprint(std::string_view canonical_payload, std::string_view requester);

}  // namespace taskengine
