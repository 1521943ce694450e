// Tests of the canonical JSON form and the admission fingerprint (A2).
//
// Besides hand-written cases, two randomized checks use nlohmann::json as an
// independent oracle: random documents written with random whitespace, member
// order, escapes and number spellings must canonicalize identically and parse
// back to the original; random mutations of valid text must be accepted or
// rejected as nlohmann::json does, except for the documented differences
// (duplicate keys). Seeds come from TASKENGINE_TEST_SEED when set, otherwise
// from std::random_device, and are printed on failure.
#include "core/canonical_json.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "testing_support/test_util.h"

namespace taskengine {
namespace {

using ::nlohmann::json;

std::string Canon(std::string_view text, CanonicalJsonOptions options = {}) {
  Result<std::string> r = CanonicalizeJson(text, options);
  EXPECT_TRUE(r.ok()) << "input: " << text << "\n" << r.status().ToString();
  return r.ok() ? *r : std::string("<error>");
}

std::string CanonAny(std::string_view text) {
  return Canon(text, CanonicalJsonOptions{.max_depth = 64, .require_object = false});
}

// The error message, or "ok".
std::string ErrorOf(std::string_view text, CanonicalJsonOptions options = {}) {
  Result<std::string> r = CanonicalizeJson(text, options);
  if (r.ok()) return "ok";
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument) << r.status().ToString();
  return r.status().message();
}

std::string ErrorOfAny(std::string_view text) {
  return ErrorOf(text, CanonicalJsonOptions{.max_depth = 64, .require_object = false});
}

std::uint64_t TestSeed() {
  if (const char* env = std::getenv("TASKENGINE_TEST_SEED"); env != nullptr && *env != '\0') {
    return std::strtoull(env, nullptr, 10);
  }
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

// ---------------------------------------------------------------------------
// Structure and whitespace

TEST(CanonicalJson, SortsKeysAndDropsWhitespace) {
  EXPECT_EQ(Canon(R"({"b":1,"a":2})"), R"({"a":2,"b":1})");
  EXPECT_EQ(Canon(" \t\r\n{ \"b\" :\n[ 1 , 2 ,\t3 ] ,\r\"a\" : { } , \"c\":[ ] }\n "),
            R"({"a":{},"b":[1,2,3],"c":[]})");
  EXPECT_EQ(Canon(R"({})"), "{}");
  EXPECT_EQ(Canon(R"({ })"), "{}");
}

TEST(CanonicalJson, SortsNestedObjectsAndKeepsArrayOrder) {
  EXPECT_EQ(Canon(R"({"z":{"y":[3,{"q":1,"p":2},1],"x":null},"a":[true,false]})"),
            R"({"a":[true,false],"z":{"x":null,"y":[3,{"p":2,"q":1},1]}})");
}

TEST(CanonicalJson, KeyOrderAndWhitespaceDoNotMatter) {
  const std::string a = Canon(R"({"name":"x","n":[1,2],"o":{"k":"v","j":null}})");
  const std::string b =
      Canon("{ \"o\" : {\"j\":null, \"k\":\"v\"},\n\"n\":[1, 2], \"name\": \"x\" }");
  EXPECT_EQ(a, b);
  EXPECT_EQ(AdmissionFingerprint(a, "alice"), AdmissionFingerprint(b, "alice"));
}

TEST(CanonicalJson, KeysSortByDecodedUtf8Bytes) {
  // '!' 0x21 < '"' 0x22 < '#' 0x23, although the escaped `\"` starts with 0x5C.
  EXPECT_EQ(Canon(R"({"#":1,"\"":2,"!":3})"), R"({"!":3,"\"":2,"#":1})");
  // Bytewise: "" < "\u0001" < "B" < "a" < "aa" < "é".
  EXPECT_EQ(Canon("{\"\xC3\xA9\":6,\"aa\":5,\"a\":4,\"B\":3,\"\\u0001\":2,\"\":1}"),
            "{\"\":1,\"\\u0001\":2,\"B\":3,\"a\":4,\"aa\":5,\"\xC3\xA9\":6}");
  // UTF-8 order, not UTF-16 order: U+FF61 (EF BD A1) sorts before U+1F600
  // (F0 9F 98 80), although its UTF-16 unit 0xFF61 is above 0xD83D.
  EXPECT_EQ(Canon(R"({"\ud83d\ude00":1,"\uff61":2})"),
            "{\"\xEF\xBD\xA1\":2,\"\xF0\x9F\x98\x80\":1}");
  // An escaped key sorts by what it decodes to.
  EXPECT_EQ(Canon(R"({"b":1,"\u0061":2})"), R"({"a":2,"b":1})");
}

TEST(CanonicalJson, IsIdempotent) {
  const std::vector<std::string> docs = {
      R"({"b":[1,2.5,-0,1e2,"x\u0000y"],"a":{"d":true,"c":null}})",
      R"({"s":"\ud83d\ude00 \u00e9 \/ \" \\ \b\f\n\r\t \u001F \u007f"})",
      R"({"n":[0e-400,123456789012345678901234567890.0,0e999,-0.0,5E-324,9223372036854775808]})",
      R"({"deep":[[[[{"z":1,"y":[{}]}]]]]})",
      R"({"big":18446744073709551615,"neg":-9223372036854775808,"f":0.1,"e":1e-7})",
  };
  for (const std::string& doc : docs) {
    const std::string once = Canon(doc);
    EXPECT_EQ(Canon(once), once) << doc;
  }
}

TEST(CanonicalJson, TopLevelMayBeAnyValueWhenNotRequiringAnObject) {
  EXPECT_EQ(CanonAny("  1.50 "), "1.5");
  EXPECT_EQ(CanonAny(R"("\u0041")"), R"("A")");
  EXPECT_EQ(CanonAny("[ 1 , {\"b\":1,\"a\":2} ]"), R"([1,{"a":2,"b":1}])");
  EXPECT_EQ(CanonAny("true"), "true");
  EXPECT_EQ(CanonAny("false"), "false");
  EXPECT_EQ(CanonAny("null"), "null");
  EXPECT_EQ(CanonAny("[]"), "[]");
}

// ---------------------------------------------------------------------------
// Strings

TEST(CanonicalJson, EscapesMinimally) {
  EXPECT_EQ(CanonAny(R"("\/")"), R"("/")");
  EXPECT_EQ(CanonAny(R"("\u0041\u0062")"), R"("Ab")");
  EXPECT_EQ(CanonAny(R"("\b\f\n\r\t")"), R"("\b\f\n\r\t")");
  EXPECT_EQ(CanonAny(R"("\u0008\u000c\u000A\u000d\u0009")"), R"("\b\f\n\r\t")");
  EXPECT_EQ(CanonAny(R"("\u0000")"), R"("\u0000")");
  EXPECT_EQ(CanonAny(R"("\u001F\u001b\u0001")"), R"("\u001f\u001b\u0001")");
  EXPECT_EQ(CanonAny(R"("\u0022\u005C")"), R"("\"\\")");
  EXPECT_EQ(CanonAny(R"("\"\\")"), R"("\"\\")");
  EXPECT_EQ(CanonAny(R"("\u007f")"), "\"\x7F\"");  // DEL is not a control char in JSON
  EXPECT_EQ(CanonAny("\"\x7F\""), "\"\x7F\"");
  EXPECT_EQ(CanonAny(R"("a\u0020b")"), R"("a b")");
}

TEST(CanonicalJson, UnicodeEscapesBecomeUtf8) {
  EXPECT_EQ(CanonAny(R"("\u00e9\u00E9")"), "\"\xC3\xA9\xC3\xA9\"");
  EXPECT_EQ(CanonAny(R"("\u20AC")"), "\"\xE2\x82\xAC\"");
  EXPECT_EQ(CanonAny(R"("\u2028\u2029")"), "\"\xE2\x80\xA8\xE2\x80\xA9\"");
  EXPECT_EQ(CanonAny(R"("\uD83D\uDE00")"), "\"\xF0\x9F\x98\x80\"");
  EXPECT_EQ(CanonAny(R"("\ud800\udc00")"), "\"\xF0\x90\x80\x80\"");  // U+10000
  EXPECT_EQ(CanonAny(R"("\udbff\udfff")"), "\"\xF4\x8F\xBF\xBF\"");  // U+10FFFF
  EXPECT_EQ(CanonAny(R"("\uffff")"), "\"\xEF\xBF\xBF\"");
}

TEST(CanonicalJson, RawUtf8PassesThrough) {
  const std::string s =
      "\"h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF \xC2\x80 \xED\x9F\xBF "
      "\xEE\x80\x80\"";
  EXPECT_EQ(CanonAny(s), s);
  // Raw and escaped spellings of the same text are the same canonical text.
  EXPECT_EQ(Canon("{\"k\":\"\xC3\xA9\"}"), Canon(R"({"k":"\u00e9"})"));
}

// ---------------------------------------------------------------------------
// Numbers

TEST(CanonicalJson, NormalizesNumbers) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"0", "0"},
      {"-0", "0"},
      {"-0.0", "0"},
      {"0e5", "0"},
      {"0.000", "0"},
      {"1", "1"},
      {"-1", "-1"},
      {"1.0", "1"},
      {"1.000000", "1"},
      {"1e0", "1"},
      {"10e-1", "1"},
      {"1e2", "100"},
      {"1E2", "100"},
      {"1e+2", "100"},
      {"100e-2", "1"},
      {"2.5e1", "25"},
      {"-2.5E+1", "-25"},
      {"0.1", "0.1"},
      {"1.5", "1.5"},
      {"-1.5", "-1.5"},
      {"4.35", "4.35"},
      {"0.30000000000000004", "0.30000000000000004"},
      {"1.23e-5", "1.23e-05"},
      {"1e-7", "1e-07"},
      {"0.000001", "1e-06"},
      {"1e15", "1000000000000000"},
      {"9.2e18", "9200000000000000000"},
      {"9223372036854775807", "9223372036854775807"},
      {"-9223372036854775808", "-9223372036854775808"},
      // Integer literals up to 2^64-1 are exact; integral doubles up to
      // there print as the same integer.
      {"9223372036854775808", "9223372036854775808"},
      {"10000000000000000000", "10000000000000000000"},
      {"1e19", "10000000000000000000"},
      {"18446744073709551615", "18446744073709551615"},
      {"18446744073709551614", "18446744073709551614"},
      {"-9.223372036854775808e18", "-9223372036854775808"},
      // Larger integral doubles keep an exponent.
      {"18446744073709551616.0", "1.8446744073709552e+19"},
      {"1e20", "1e+20"},
      {"-12345678901234567168.0", "-1.2345678901234567e+19"},
      {"-9223372036854777856.0", "-9.223372036854778e+18"},
      {"123456789012345678901234567890.5", "1.2345678901234568e+29"},
      {"1e300", "1e+300"},
      {"1.7976931348623157e308", "1.7976931348623157e+308"},
      {"5e-324", "5e-324"},
      {"2.2250738585072014e-308", "2.2250738585072014e-308"},
      // Exact int64, but a fraction makes it a double first (documented).
      {"9007199254740993", "9007199254740993"},
      {"9007199254740993.0", "9007199254740992"},
      // Zero stays zero however it is spelled.
      {"0e99999999999999999999999", "0"},
      {"0.000e-99999999999999999999999", "0"},
  };
  for (const auto& [in, want] : cases) {
    EXPECT_EQ(CanonAny(in), want) << "input: " << in;
    EXPECT_EQ(CanonAny(want), want) << "not idempotent: " << want;
  }
}

TEST(CanonicalJson, EqualValuesHaveEqualText) {
  EXPECT_EQ(Canon(R"({"n":1.0})"), Canon(R"({"n":1})"));
  EXPECT_EQ(Canon(R"({"n":1e2})"), Canon(R"({"n":100})"));
  EXPECT_EQ(Canon(R"({"n":-0})"), Canon(R"({"n":0})"));
  EXPECT_EQ(Canon(R"({"n":0.5})"), Canon(R"({"n":5e-1})"));
  EXPECT_NE(Canon(R"({"n":1})"), Canon(R"({"n":"1"})"));
}

// Issue 13, finding 8: integers are never rounded. Two different integers
// always have different canonical text (so different fingerprints), and one
// that cannot be kept exactly is refused rather than rounded.
TEST(CanonicalJson, IntegerLiteralsAreExactOrRefused) {
  EXPECT_NE(Canon(R"({"n":18446744073709551615})"), Canon(R"({"n":18446744073709551614})"));
  EXPECT_NE(Canon(R"({"n":9007199254740993})"), Canon(R"({"n":9007199254740992})"));
  for (const char* big : {"18446744073709551616", "18446744073709551617", "-9223372036854775809",
                          "123456789012345678901234567890", "100000000000000000000"}) {
    Result<std::string> r = CanonicalizeJson(std::string(R"({"amount":)") + big + "}");
    ASSERT_FALSE(r.ok()) << big << " -> " << *r;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(r.status().message().rfind("offset 10: integer out of range", 0), 0u)
        << r.status().message();
  }
}

// A nonzero number never silently becomes 0 (or infinity).
TEST(CanonicalJson, UnderflowIsRefused) {
  for (const char* tiny :
       {"1e-400", "-1e-400", "0.0000000000000000000001e-320", "1e-99999999999999999999999"}) {
    EXPECT_EQ(ErrorOfAny(tiny), "offset 0: number out of range (too small for a double)") << tiny;
  }
}

// ---------------------------------------------------------------------------
// Errors: every path, with its offset.

TEST(CanonicalJson, RejectsStructuralErrorsWithOffsets) {
  EXPECT_EQ(ErrorOf(""), "offset 0: unexpected end of input");
  EXPECT_EQ(ErrorOf("   "), "offset 3: unexpected end of input");
  EXPECT_EQ(ErrorOfAny(""), "offset 0: unexpected end of input");
  EXPECT_EQ(ErrorOf("{"), "offset 1: unexpected end of input");
  EXPECT_EQ(ErrorOf(R"({"a")"), "offset 4: unexpected end of input");
  EXPECT_EQ(ErrorOf(R"({"a":)"), "offset 5: unexpected end of input");
  EXPECT_EQ(ErrorOf(R"({"a":1)"), "offset 6: unexpected end of input");
  EXPECT_EQ(ErrorOf(R"({"a":1,)"), "offset 7: unexpected end of input");
  EXPECT_EQ(ErrorOfAny("[1,"), "offset 3: unexpected end of input");
  EXPECT_EQ(ErrorOf(R"({"a":1,})"), "offset 7: expected a string key");
  EXPECT_EQ(ErrorOf(R"({a:1})"), "offset 1: expected a string key");
  EXPECT_EQ(ErrorOf(R"({'a':1})"), "offset 1: expected a string key");
  EXPECT_EQ(ErrorOf(R"({,})"), "offset 1: expected a string key");
  EXPECT_EQ(ErrorOfAny("[1,]"), "offset 3: unexpected character ']'");
  EXPECT_EQ(ErrorOfAny("[,1]"), "offset 1: unexpected character ','");
  EXPECT_EQ(ErrorOf(R"({"a" 1})"), "offset 5: expected ':'");
  EXPECT_EQ(ErrorOf(R"({"a"=1})"), "offset 4: expected ':'");
  EXPECT_EQ(ErrorOf(R"({"a":1 "b":2})"), "offset 7: expected ',' or '}'");
  EXPECT_EQ(ErrorOf(R"({"a":1])"), "offset 6: expected ',' or '}'");
  EXPECT_EQ(ErrorOfAny("[1 2]"), "offset 3: expected ',' or ']'");
  EXPECT_EQ(ErrorOfAny("[1}"), "offset 2: expected ',' or ']'");
  EXPECT_EQ(ErrorOf(R"({"a":1}x)"), "offset 7: unexpected data after the JSON value");
  EXPECT_EQ(ErrorOf(R"({"a":1} {})"), "offset 8: unexpected data after the JSON value");
  EXPECT_EQ(ErrorOfAny("1 2"), "offset 2: unexpected data after the JSON value");
  EXPECT_EQ(ErrorOf(std::string("{}\0", 3)), "offset 2: unexpected data after the JSON value");
}

TEST(CanonicalJson, RequiresAnObjectByDefault) {
  EXPECT_EQ(ErrorOf("[1]"), "offset 0: expected a JSON object");
  EXPECT_EQ(ErrorOf("  1"), "offset 2: expected a JSON object");
  EXPECT_EQ(ErrorOf(R"("x")"), "offset 0: expected a JSON object");
  EXPECT_EQ(ErrorOf("null"), "offset 0: expected a JSON object");
  EXPECT_EQ(ErrorOfAny("[1]"), "ok");
}

TEST(CanonicalJson, RejectsCommentsAndNonJsonTokens) {
  EXPECT_EQ(ErrorOf(R"({"a":1 /* c */})"), "offset 7: expected ',' or '}'");
  EXPECT_EQ(ErrorOf("// c\n{}"), "offset 0: expected a JSON object");
  EXPECT_EQ(ErrorOfAny("// c\n{}"), "offset 0: unexpected character '/'");
  EXPECT_EQ(ErrorOfAny("# c\n{}"), "offset 0: unexpected character '#'");
  EXPECT_EQ(ErrorOf(R"({"a":NaN})"), "offset 5: unexpected character 'N'");
  EXPECT_EQ(ErrorOf(R"({"a":Infinity})"), "offset 5: unexpected character 'I'");
  EXPECT_EQ(ErrorOf(R"({"a":-Infinity})"), "offset 6: expected a digit");
  EXPECT_EQ(ErrorOf(R"({"a":undefined})"), "offset 5: unexpected character 'u'");
  EXPECT_EQ(ErrorOf(R"({"a":True})"), "offset 5: unexpected character 'T'");
  EXPECT_EQ(ErrorOf(R"({"a":tru})"), "offset 5: invalid literal");
  EXPECT_EQ(ErrorOf(R"({"a":nul)"), "offset 5: invalid literal");
  EXPECT_EQ(ErrorOf(R"({"a":fals})"), "offset 5: invalid literal");
  EXPECT_EQ(ErrorOf(R"({"a":truex})"), "offset 9: expected ',' or '}'");
  EXPECT_EQ(ErrorOfAny("\x01"), "offset 0: unexpected byte 0x01");
  EXPECT_EQ(ErrorOfAny("\xFF"), "offset 0: unexpected byte 0xff");
  EXPECT_EQ(ErrorOfAny("\xEF\xBB\xBF{}"), "offset 0: unexpected byte 0xef");  // no BOM
  EXPECT_EQ(ErrorOfAny("\f1"), "offset 0: unexpected byte 0x0c");             // not JSON whitespace
  EXPECT_EQ(ErrorOfAny("\xC2\xA0"
                       "1"),
            "offset 0: unexpected byte 0xc2");  // NBSP neither
}

TEST(CanonicalJson, RejectsBadNumbersWithOffsets) {
  EXPECT_EQ(ErrorOf(R"({"a":01})"), "offset 5: leading zeros are not allowed");
  EXPECT_EQ(ErrorOf(R"({"a":-01})"), "offset 6: leading zeros are not allowed");
  EXPECT_EQ(ErrorOf(R"({"a":00.5})"), "offset 5: leading zeros are not allowed");
  EXPECT_EQ(ErrorOf(R"({"a":1.})"), "offset 7: expected a digit after '.'");
  EXPECT_EQ(ErrorOf(R"({"a":1.e5})"), "offset 7: expected a digit after '.'");
  EXPECT_EQ(ErrorOf(R"({"a":.5})"), "offset 5: unexpected character '.'");
  EXPECT_EQ(ErrorOf(R"({"a":1e})"), "offset 7: expected a digit in the exponent");
  EXPECT_EQ(ErrorOf(R"({"a":1e+})"), "offset 8: expected a digit in the exponent");
  EXPECT_EQ(ErrorOf(R"({"a":1E-x})"), "offset 8: expected a digit in the exponent");
  EXPECT_EQ(ErrorOf(R"({"a":-})"), "offset 6: expected a digit");
  EXPECT_EQ(ErrorOf(R"({"a":--1})"), "offset 6: expected a digit");
  EXPECT_EQ(ErrorOf(R"({"a":+1})"), "offset 5: unexpected character '+'");
  EXPECT_EQ(ErrorOf(R"({"a":0x10})"), "offset 6: expected ',' or '}'");
  EXPECT_EQ(ErrorOf(R"({"a":1.5.2})"), "offset 8: expected ',' or '}'");
  EXPECT_EQ(ErrorOfAny("-"), "offset 1: expected a digit");
  EXPECT_EQ(ErrorOf(R"({"a":1e999})"), "offset 5: number out of range");
  EXPECT_EQ(ErrorOf(R"({"a":-1e999})"), "offset 5: number out of range");
  EXPECT_EQ(ErrorOf(R"({"a":1.7976931348623159e308})"), "offset 5: number out of range");
  EXPECT_EQ(ErrorOf(R"({"a":0.001e312})"), "offset 5: number out of range");
  EXPECT_EQ(ErrorOfAny("1e99999999999999999999999"), "offset 0: number out of range");
  EXPECT_EQ(ErrorOfAny(std::string(400, '9') + ".0"), "offset 0: number out of range");
  EXPECT_EQ(ErrorOfAny(std::string(400, '9')).rfind("offset 0: integer out of range", 0), 0u);
}

TEST(CanonicalJson, RejectsBadStringsWithOffsets) {
  EXPECT_EQ(ErrorOf(R"({"a":"b)"), "offset 5: unterminated string");
  EXPECT_EQ(ErrorOf(R"({"a)"), "offset 1: unterminated string");
  EXPECT_EQ(ErrorOf("{\"a\":\"\x01\"}"), "offset 6: control character in string");
  EXPECT_EQ(ErrorOf("{\"a\":\"x\ny\"}"), "offset 7: control character in string");
  EXPECT_EQ(ErrorOf("{\"a\":\"\t\"}"), "offset 6: control character in string");
  EXPECT_EQ(ErrorOf("{\"\x1f\":1}"), "offset 2: control character in string");
  EXPECT_EQ(ErrorOf(R"({"a":"\q"})"), "offset 6: invalid escape");
  EXPECT_EQ(ErrorOf(R"({"a":"\'"})"), "offset 6: invalid escape");
  EXPECT_EQ(ErrorOf(R"({"a":"\U0041"})"), "offset 6: invalid escape");
  EXPECT_EQ(ErrorOf(R"({"a":"\)"), "offset 6: unterminated escape");
  EXPECT_EQ(ErrorOf(R"({"a":"\u12"})"), "offset 6: invalid \\u escape");
  EXPECT_EQ(ErrorOf(R"({"a":"\u12G4"})"), "offset 6: invalid \\u escape");
  EXPECT_EQ(ErrorOf(R"({"a":"\u004)"), "offset 6: invalid \\u escape");
  EXPECT_EQ(ErrorOf(R"({"a":"\ud800"})"),
            "offset 6: high surrogate not followed by a low surrogate");
  EXPECT_EQ(ErrorOf(R"({"a":"\ud800\u0041"})"),
            "offset 6: high surrogate not followed by a low surrogate");
  EXPECT_EQ(ErrorOf(R"({"a":"\ud800\ud800"})"),
            "offset 6: high surrogate not followed by a low surrogate");
  EXPECT_EQ(ErrorOf(R"({"a":"\ud800x"})"),
            "offset 6: high surrogate not followed by a low surrogate");
  EXPECT_EQ(ErrorOf(R"({"a":"\ud800\n"})"),
            "offset 6: high surrogate not followed by a low surrogate");
  EXPECT_EQ(ErrorOf(R"({"a":"\udc00"})"), "offset 6: lone low surrogate");
  EXPECT_EQ(ErrorOf(R"({"a":"\udfff\ud800"})"), "offset 6: lone low surrogate");
  EXPECT_EQ(ErrorOf(R"({"a":"x\ud83d\ude00\udc00"})"), "offset 19: lone low surrogate");
}

TEST(CanonicalJson, RejectsInvalidUtf8WithOffsets) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"\x80", "lone continuation byte"},
      {"\xBF", "lone continuation byte"},
      {"\xC0\x80", "overlong NUL"},
      {"\xC1\xBF", "overlong 2-byte"},
      {"\xE0\x80\x80", "overlong 3-byte"},
      {"\xE0\x9F\xBF", "overlong 3-byte"},
      {"\xF0\x80\x80\x80", "overlong 4-byte"},
      {"\xF0\x8F\xBF\xBF", "overlong 4-byte"},
      {"\xED\xA0\x80", "UTF-8 encoded high surrogate"},
      {"\xED\xBF\xBF", "UTF-8 encoded low surrogate"},
      {"\xF4\x90\x80\x80", "above U+10FFFF"},
      {"\xF5\x80\x80\x80", "F5 lead byte"},
      {"\xFE", "FE"},
      {"\xFF", "FF"},
      {"\xC3", "truncated 2-byte"},
      {"\xE2\x82", "truncated 3-byte"},
      {"\xF0\x9F\x98", "truncated 4-byte"},
      {"\xC3\x28", "bad continuation"},
      {"\xE2\x28\xA1", "bad continuation"},
      {"\xF0\x9F\x28\x80", "bad continuation"},
  };
  for (const auto& [bytes, why] : bad) {
    EXPECT_EQ(ErrorOf("{\"a\":\"x" + bytes + "\"}"), "offset 7: invalid UTF-8") << why;
    EXPECT_EQ(ErrorOf("{\"" + bytes + "\":1}"), "offset 2: invalid UTF-8") << why;
    // Truncated at the very end of the input.
    EXPECT_EQ(ErrorOfAny("\"" + bytes), "offset 1: invalid UTF-8") << why;
  }
  // Boundaries that are valid.
  for (const std::string ok :
       {"\xC2\x80", "\xDF\xBF", "\xE0\xA0\x80", "\xED\x9F\xBF", "\xEE\x80\x80", "\xEF\xBF\xBF",
        "\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF"}) {
    EXPECT_EQ(CanonAny("\"" + ok + "\""), "\"" + ok + "\"");
  }
}

TEST(CanonicalJson, RejectsDuplicateKeys) {
  EXPECT_EQ(ErrorOf(R"({"a":1,"a":2})"), "offset 7: duplicate key \"a\"");
  EXPECT_EQ(ErrorOf(R"({"a":1,"a":1})"), "offset 7: duplicate key \"a\"");
  EXPECT_EQ(ErrorOf(R"({"b":1,"a":2,"b":3})"), "offset 13: duplicate key \"b\"");
  // The first duplicate in input order is reported.
  EXPECT_EQ(ErrorOf(R"({"a":1,"b":2,"b":3,"a":4})"), "offset 13: duplicate key \"b\"");
  // Spelled differently, the same key.
  EXPECT_EQ(ErrorOf(R"({"a":1,"\u0061":2})"), "offset 7: duplicate key \"a\"");
  EXPECT_EQ(ErrorOf(R"({"\"":1,"\u0022":2})"), "offset 8: duplicate key \"\\\"\"");
  EXPECT_EQ(ErrorOf(R"({"\u0000":1,"\u0000":2})"), "offset 12: duplicate key \"\\u0000\"");
  // Nested objects are checked; the same key in different objects is fine.
  EXPECT_EQ(ErrorOf(R"({"x":{"a":1,"a":2}})"), "offset 12: duplicate key \"a\"");
  EXPECT_EQ(ErrorOfAny(R"([{"a":1},{"a":1,"a":1}])"), "offset 16: duplicate key \"a\"");
  EXPECT_EQ(Canon(R"({"a":{"a":1},"b":{"a":2}})"), R"({"a":{"a":1},"b":{"a":2}})");
  // Long keys are not echoed.
  const std::string k(100, 'k');
  EXPECT_EQ(ErrorOf("{\"" + k + "\":1,\"" + k + "\":2}"), "offset 106: duplicate key");
}

// ---------------------------------------------------------------------------
// Depth

std::string Nested(int depth, std::string_view inner = "1") {
  return std::string(depth, '[') + std::string(inner) + std::string(depth, ']');
}

TEST(CanonicalJson, EnforcesMaxDepth) {
  const CanonicalJsonOptions three{.max_depth = 3, .require_object = false};
  EXPECT_EQ(Canon(Nested(3), three), Nested(3));
  EXPECT_EQ(ErrorOf(Nested(4), three), "offset 3: nesting deeper than 3");
  EXPECT_EQ(ErrorOf(R"({"a":{"b":{"c":{}}}})", three), "offset 15: nesting deeper than 3");
  EXPECT_EQ(Canon(R"({"a":{"b":{"c":1}}})", three), R"({"a":{"b":{"c":1}}})");
  // Siblings do not add up.
  EXPECT_EQ(Canon("[[[1]],[[2]],[[3]]]", three), "[[[1]],[[2]],[[3]]]");

  const CanonicalJsonOptions zero{.max_depth = 0, .require_object = false};
  EXPECT_EQ(ErrorOf("{}", CanonicalJsonOptions{.max_depth = 0}), "offset 0: nesting deeper than 0");
  EXPECT_EQ(Canon("7", zero), "7");

  // The default is 64, the top-level object included.
  EXPECT_EQ(Canon("{\"a\":" + Nested(63) + "}"), "{\"a\":" + Nested(63) + "}");
  EXPECT_EQ(ErrorOf("{\"a\":" + Nested(64) + "}"), "offset 68: nesting deeper than 64");
}

TEST(CanonicalJson, DeepNestingDoesNotExhaustTheStack) {
  // The parser keeps its own stack, so even an absurd limit is safe.
  const CanonicalJsonOptions huge{.max_depth = 1'000'000, .require_object = false};
  const std::string doc = Nested(300'000);
  EXPECT_EQ(Canon(doc, huge), doc);
  std::string objects;
  for (int i = 0; i < 100'000; ++i) objects += "{\"k\":";
  objects += "0" + std::string(100'000, '}');
  EXPECT_EQ(Canon(objects, huge), objects);
  EXPECT_EQ(ErrorOf(std::string(1'000'000, '['), CanonicalJsonOptions{.require_object = false}),
            "offset 64: nesting deeper than 64");
  EXPECT_EQ(ErrorOf(std::string(500'000, '['), huge), "offset 500000: unexpected end of input");
}

// ---------------------------------------------------------------------------
// Hashes

TEST(Sha256Hex, KnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1'000'000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(AdmissionFingerprint, IsSha256OfPayloadNewlineRequester) {
  EXPECT_EQ(AdmissionFingerprint(R"({"a":1})", "alice"), Sha256Hex("{\"a\":1}\nalice"));
  EXPECT_EQ(AdmissionFingerprint("", ""), Sha256Hex("\n"));
  EXPECT_EQ(AdmissionFingerprint("{}", ""), Sha256Hex("{}\n"));
  EXPECT_EQ(AdmissionFingerprint("{}", "bob").size(), 64u);
}

TEST(AdmissionFingerprint, DependsOnPayloadAndRequester) {
  const std::string p = Canon(R"({"case":47})");
  EXPECT_EQ(AdmissionFingerprint(p, "alice"),
            AdmissionFingerprint(Canon(R"({ "case" : 47.0 })"), "alice"));
  EXPECT_NE(AdmissionFingerprint(p, "alice"), AdmissionFingerprint(p, "bob"));
  EXPECT_NE(AdmissionFingerprint(p, "alice"),
            AdmissionFingerprint(Canon(R"({"case":48})"), "alice"));
  EXPECT_NE(AdmissionFingerprint(p, "alice"), Sha256Hex(p + "alice"));
}

// ---------------------------------------------------------------------------
// Randomized cross-check against nlohmann::json

// `v` as the canonical form sees it. Integers are exact on both sides
// (nlohmann keeps them as int64 or uint64), so this is `v` itself.
json AsCanonicalValue(const json& v) { return v; }

class RandomJson {
 public:
  explicit RandomJson(std::uint64_t seed) : rng_(seed) {}

  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool OneIn(int n) { return Uniform(0, n - 1) == 0; }
  std::mt19937_64& rng() { return rng_; }

  // A random document. Sets *inexact when any number is a double, whose
  // canonical spelling differs from nlohmann's.
  json Value(int depth, bool* inexact) {
    const int kind = Uniform(0, depth < 5 ? 9 : 6);
    switch (kind) {
      case 0:
        return nullptr;
      case 1:
        return OneIn(2);
      case 2:
        return static_cast<std::int64_t>(Uniform(-1000, 1000));
      case 3:
        return static_cast<std::int64_t>(rng_());
      case 4: {
        if (OneIn(2)) return static_cast<std::uint64_t>(rng_());
        *inexact = true;
        return Double();
      }
      case 5:
      case 6:
        return String();
      case 7: {
        json a = json::array();
        for (int n = Uniform(0, 4); n > 0; --n) a.push_back(Value(depth + 1, inexact));
        return a;
      }
      default: {
        json o = json::object();
        for (int n = Uniform(0, 5); n > 0; --n) o[String()] = Value(depth + 1, inexact);
        return o;
      }
    }
  }

  json Object(bool* inexact) {
    json o = json::object();
    for (int n = Uniform(0, 6); n > 0; --n) o[String()] = Value(1, inexact);
    return o;
  }

  double Double() {
    switch (Uniform(0, 5)) {
      case 0:
        return Uniform(-50, 50) / 4.0;  // often integral
      case 1:
        return OneIn(2) ? 0.0 : -0.0;
      case 2:
        return std::uniform_real_distribution<double>(-1e6, 1e6)(rng_);
      case 3:
        return std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng_),
                          Uniform(-1074, 1023));
      case 4:
        return static_cast<double>(static_cast<std::int64_t>(rng_())) * (OneIn(2) ? 1 : 1024);
      default: {
        for (;;) {
          std::uint64_t bits = rng_();
          double d;
          std::memcpy(&d, &bits, sizeof(d));
          if (std::isfinite(d)) return d;
        }
      }
    }
  }

  std::string String() {
    std::string s;
    for (int n = Uniform(0, 8); n > 0; --n) {
      std::uint32_t cp;
      switch (Uniform(0, 7)) {
        case 0:
          cp = static_cast<std::uint32_t>(Uniform(0, 0x1F));
          break;
        case 1:
          cp = static_cast<unsigned char>("\"\\/\x7F"[Uniform(0, 3)]);
          break;
        case 2:
          cp = static_cast<std::uint32_t>(Uniform(0x80, 0x7FF));
          break;
        case 3:
          do {
            cp = static_cast<std::uint32_t>(Uniform(0x800, 0xFFFF));
          } while (cp >= 0xD800 && cp <= 0xDFFF);
          break;
        case 4:
          cp = static_cast<std::uint32_t>(Uniform(0x10000, 0x10FFFF));
          break;
        default:
          cp = static_cast<std::uint32_t>(Uniform(0x20, 0x7E));
          break;
      }
      AppendUtf8(cp, &s);
    }
    return s;
  }

  // Writes `v` as valid JSON with random whitespace, member order, escapes
  // and number spellings.
  void Write(const json& v, std::string* out) {
    Space(out);
    switch (v.type()) {
      case json::value_t::null:
        *out += "null";
        break;
      case json::value_t::boolean:
        *out += v.get<bool>() ? "true" : "false";
        break;
      case json::value_t::number_integer:
        WriteInt(v.get<std::int64_t>(), out);
        break;
      case json::value_t::number_unsigned:
        *out += std::to_string(v.get<std::uint64_t>());
        break;
      case json::value_t::number_float:
        WriteDouble(v.get<double>(), out);
        break;
      case json::value_t::string:
        WriteString(v.get_ref<const std::string&>(), out);
        break;
      case json::value_t::array: {
        *out += '[';
        bool first = true;
        for (const json& e : v) {
          if (!first) *out += ',';
          first = false;
          Write(e, out);
        }
        Space(out);
        *out += ']';
        break;
      }
      case json::value_t::object: {
        std::vector<std::pair<std::string, const json*>> members;
        for (auto it = v.begin(); it != v.end(); ++it) members.emplace_back(it.key(), &it.value());
        std::shuffle(members.begin(), members.end(), rng_);
        *out += '{';
        bool first = true;
        for (const auto& [k, e] : members) {
          if (!first) *out += ',';
          first = false;
          Space(out);
          WriteString(k, out);
          Space(out);
          *out += ':';
          Write(*e, out);
        }
        Space(out);
        *out += '}';
        break;
      }
      default:
        ADD_FAILURE() << "unexpected type";
        break;
    }
    Space(out);
  }

  static void AppendUtf8(std::uint32_t cp, std::string* s) {
    if (cp < 0x80) {
      s->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s->push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      s->push_back(static_cast<char>(0xE0 | (cp >> 12)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      s->push_back(static_cast<char>(0xF0 | (cp >> 18)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

 private:
  void Space(std::string* out) {
    static constexpr char kSpace[] = {' ', '\t', '\n', '\r'};
    if (OneIn(2)) return;
    for (int n = Uniform(1, 3); n > 0; --n) *out += kSpace[Uniform(0, 3)];
  }

  void WriteInt(std::int64_t x, std::string* out) {
    const bool small = x > -(std::int64_t{1} << 53) && x < (std::int64_t{1} << 53);
    switch (small ? Uniform(0, 4) : 0) {
      case 1:
        *out += std::to_string(x) + ".0";
        break;
      case 2:
        *out += std::to_string(x) + (OneIn(2) ? "e0" : "E+0");
        break;
      case 3:
        *out += x == 0 ? std::string("0e-1") : std::to_string(x) + "0e-1";
        break;
      case 4: {
        if (x == 0) {
          *out += OneIn(2) ? "-0" : "0.000e7";
        } else {
          *out += std::to_string(x) + "00E-2";
        }
        break;
      }
      default:
        *out += std::to_string(x);
        break;
    }
  }

  void WriteDouble(double d, std::string* out) {
    char buf[64];
    char* end;
    switch (Uniform(0, 3)) {
      case 0:
        end = std::to_chars(buf, buf + sizeof(buf), d).ptr;
        break;
      case 1:
        end = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific, 17).ptr;
        break;
      case 2:
        end = buf + std::snprintf(buf, sizeof(buf), "%.17g", d);
        break;
      default:
        end = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific).ptr;
        break;
    }
    std::string s(buf, end);
    // A double spelled without fraction or exponent reads as an integer
    // literal, which must lie in [-2^63, 2^64): write a fraction beyond.
    if (s.find_first_of(".eE") == std::string::npos &&
        (d < -9223372036854775808.0 || d >= 18446744073709551616.0)) {
      s += ".0";
    }
    // %.17g and to_chars may produce "1e+300" (valid) or "inf" (never: finite).
    if (OneIn(3)) {
      for (char& c : s) {
        if (c == 'e') c = 'E';
      }
    }
    *out += s;
  }

  void WriteString(const std::string& s, std::string* out) {
    *out += '"';
    std::size_t i = 0;
    while (i < s.size()) {
      const auto b = static_cast<unsigned char>(s[i]);
      const std::size_t len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
      std::uint32_t cp = len == 1 ? b : b & (0x3F >> (len - 1));
      for (std::size_t k = 1; k < len; ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
      const bool must_escape = cp < 0x20 || cp == '"' || cp == '\\';
      if (!must_escape && OneIn(3) == false) {
        out->append(s, i, len);
      } else if (cp == '"' && OneIn(2)) {
        *out += "\\\"";
      } else if (cp == '\\' && OneIn(2)) {
        *out += "\\\\";
      } else if (cp == '\n' && OneIn(2)) {
        *out += "\\n";
      } else if (cp == '/' && OneIn(2)) {
        *out += "\\/";
      } else if (cp < 0x10000) {
        UnicodeEscape(cp, out);
      } else {
        const std::uint32_t v = cp - 0x10000;
        UnicodeEscape(0xD800 + (v >> 10), out);
        UnicodeEscape(0xDC00 + (v & 0x3FF), out);
      }
      i += len;
    }
    *out += '"';
  }

  void UnicodeEscape(std::uint32_t unit, std::string* out) {
    const char* digits = OneIn(2) ? "0123456789abcdef" : "0123456789ABCDEF";
    *out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) *out += digits[(unit >> shift) & 0xF];
  }

  std::mt19937_64 rng_;
};

TEST(CanonicalJsonRandomized, MatchesNlohmannAndIgnoresSpelling) {
  const std::uint64_t seed = TestSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed) + " (rerun with TASKENGINE_TEST_SEED)");
  RandomJson gen(seed);
  int exact_only = 0;
  for (int i = 0; i < 3000; ++i) {
    bool inexact = false;
    const json doc = gen.Object(&inexact);
    std::string a;
    std::string b;
    gen.Write(doc, &a);
    gen.Write(doc, &b);
    Result<std::string> ca = CanonicalizeJson(a);
    Result<std::string> cb = CanonicalizeJson(b);
    ASSERT_TRUE(ca.ok()) << "iteration " << i << " input: " << a << "\n" << ca.status().ToString();
    ASSERT_TRUE(cb.ok()) << "iteration " << i << " input: " << b << "\n" << cb.status().ToString();
    ASSERT_EQ(*ca, *cb) << "iteration " << i << "\nA: " << a << "\nB: " << b;
    ASSERT_EQ(json::parse(*ca), AsCanonicalValue(doc))
        << "iteration " << i << " canonical: " << *ca;
    Result<std::string> again = CanonicalizeJson(*ca);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    ASSERT_EQ(*again, *ca) << "not idempotent, iteration " << i;
    if (!inexact) {
      // Without doubles, nlohmann's compact dump (sorted std::map keys, the
      // same minimal escapes) is an independent spelling of the canonical form.
      ++exact_only;
      ASSERT_EQ(*ca, doc.dump()) << "iteration " << i;
    }
  }
  EXPECT_GT(exact_only, 100);
}

// Random small edits of valid documents: whatever nlohmann::json accepts we
// accept (and mean the same value), except duplicate keys and numbers nlohmann
// would round (integers beyond 64 bits, nonzero underflow), which we reject,
// and text after a NUL byte, which nlohmann does not read.
TEST(CanonicalJsonRandomized, AcceptsWhatNlohmannAcceptsOnMutations) {
  const std::uint64_t seed = TestSeed();
  SCOPED_TRACE("seed=" + std::to_string(seed) + " (rerun with TASKENGINE_TEST_SEED)");
  RandomJson gen(seed);
  const CanonicalJsonOptions any{.max_depth = 64, .require_object = false};
  static constexpr std::string_view kInteresting =
      "{}[]:,\"\\ue.-+0123456789tfn \x01\x80\xC3\xED\xF4\xFF";
  int accepted = 0;
  int rejected = 0;
  for (int i = 0; i < 4000; ++i) {
    bool inexact = false;
    std::string text;
    gen.Write(gen.Object(&inexact), &text);
    const int edits = gen.Uniform(1, 3);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const auto at = static_cast<std::size_t>(gen.Uniform(0, static_cast<int>(text.size()) - 1));
      const char c = gen.OneIn(4)
                         ? static_cast<char>(gen.Uniform(0, 255))
                         : kInteresting[gen.Uniform(0, static_cast<int>(kInteresting.size()) - 1)];
      switch (gen.Uniform(0, 3)) {
        case 0:
          text[at] = c;
          break;
        case 1:
          text.insert(at, 1, c);
          break;
        case 2:
          text.erase(at, 1);
          break;
        default:
          text.insert(at, text.substr(at, static_cast<std::size_t>(gen.Uniform(1, 8))));
          break;
      }
    }
    const bool theirs = json::accept(text);
    Result<std::string> ours = CanonicalizeJson(text, any);
    if (ours.ok()) {
      ++accepted;
      ASSERT_TRUE(theirs) << "we accept what nlohmann rejects: " << text;
      ASSERT_EQ(json::parse(*ours), AsCanonicalValue(json::parse(text))) << text;
    } else {
      ++rejected;
      ASSERT_EQ(ours.status().code(), ErrorCode::kInvalidArgument);
      // nlohmann::json stops reading at a NUL byte, so "{}\0x" passes there.
      if (theirs && text.find('\0') == std::string::npos) {
        const std::string m = ours.status().message();
        ASSERT_TRUE(m.find("duplicate key") != std::string::npos ||
                    m.find("integer out of range") != std::string::npos ||
                    m.find("too small for a double") != std::string::npos)
            << "nlohmann accepts what we reject: " << text << "\n"
            << ours.status().ToString();
      }
    }
  }
  // Both outcomes are exercised.
  EXPECT_GT(accepted, 100);
  EXPECT_GT(rejected, 100);
}

}  // namespace
}  // namespace taskengine
