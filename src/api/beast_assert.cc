// BOOST_ASSERT in builds without NDEBUG (the sanitizer trees; Release has
// none) reports here: BOOST_ENABLE_ASSERT_DEBUG_HANDLER is a public
// definition of te_api, the one library that includes Boost (Beast and Asio).
//
// A failed assertion aborts with its expression and place, as assert() does,
// with one exception: Boost.Beast before 1.86 asserts `n >= 5` in
// basic_parser::parse_chunk_header when a chunk header arrives as
// "0\r\n" followed by fewer bytes than its CRLF needs (fixed upstream in
// boostorg/beast#2861: the assertion is wrong, and the code after it answers
// need_more or an error, which the server handles). Debian 12 ships Boost
// 1.74, so the fuzzer (RD17) met it. The parse goes on exactly as in Release.
#include <boost/assert.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace boost {
namespace {

bool IsKnownFalseBeastAssertion(const char* expr, const char* file) {
  return std::strcmp(expr, "n >= 5") == 0 &&
         std::strstr(file, "boost/beast/http/impl/basic_parser.ipp") != nullptr;
}

}  // namespace

void assertion_failed(const char* expr, const char* function, const char* file, long line) {
  if (IsKnownFalseBeastAssertion(expr, file)) return;
  std::fprintf(stderr, "%s:%ld: %s: Assertion `%s' failed.\n", file, line, function, expr);
  std::abort();
}

void assertion_failed_msg(const char* expr, const char* msg, const char* function, const char* file,
                          long line) {
  if (IsKnownFalseBeastAssertion(expr, file)) return;
  std::fprintf(stderr, "%s:%ld: %s: Assertion `%s' failed: %s\n", file, line, function, expr, msg);
  std::abort();
}

}  // namespace boost
