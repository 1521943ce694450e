// Integer arithmetic shared by the calendar and scheduling code. Pure.
#pragma once

#include <cstdint>

namespace taskengine {

// a / b rounded toward negative infinity (C++ division truncates toward
// zero). REQUIRES: b != 0.
constexpr std::int64_t FloorDiv(std::int64_t a, std::int64_t b) {
  const std::int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

}  // namespace taskengine
