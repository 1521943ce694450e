// UTF-8 aware cutting of text that goes into bounded fields (logs, errors,
// notices): a cut never splits a multi-byte sequence.
#pragma once

#include <cstddef>
#include <string_view>

namespace taskengine {

// `s` cut to at most `max` bytes, backing off to the start of the UTF-8
// sequence the cut would split.
inline std::string_view CutUtf8(std::string_view s, std::size_t max) {
  if (s.size() <= max) return s;
  std::size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut);
}

}  // namespace taskengine
