#include "api/json_util.h"

#include <gtest/gtest.h>

#include "testing_support/test_util.h"

namespace taskengine::api {
namespace {

HttpRequest Body(std::string body, std::string content_type = "application/json") {
  HttpRequest r;
  r.body = std::move(body);
  if (!content_type.empty()) r.headers.emplace_back("content-type", content_type);
  return r;
}

TEST(CheckJsonDepthTest, CountsOutsideStringsOnly) {
  EXPECT_OK(CheckJsonDepth("{\"a\":\"[[[[[[\"}", 1));
  EXPECT_OK(CheckJsonDepth("[[]]", 2));
  EXPECT_FALSE(CheckJsonDepth("[[[]]]", 2).ok());
  EXPECT_OK(CheckJsonDepth("{\"a\\\"[[\":1}", 1));  // escaped quote keeps the string open
  std::string deep(65, '[');
  deep += std::string(65, ']');
  EXPECT_FALSE(CheckJsonDepth(deep).ok());
  std::string ok(64, '[');
  ok += std::string(64, ']');
  EXPECT_OK(CheckJsonDepth(ok));
}

TEST(ParseJsonBodyTest, AcceptsJsonAndRefusesTheRest) {
  ASSERT_OK_AND_ASSIGN(auto j, ParseJsonBody(Body("{\"a\":1}"), false));
  EXPECT_EQ(j["a"], 1);
  ASSERT_OK_AND_ASSIGN(auto e, ParseJsonBody(Body(""), true));
  EXPECT_TRUE(e.is_object());
  EXPECT_FALSE(ParseJsonBody(Body(""), false).ok());
  EXPECT_OK(ParseJsonBody(Body("{}", "Application/JSON; charset=utf-8"), false));
  EXPECT_OK(ParseJsonBody(Body("{}", ""), false));
  auto wrong_type = ParseJsonBody(Body("{}", "text/plain"), false);
  EXPECT_EQ(wrong_type.status().code(), ErrorCode::kInvalidArgument);
  auto malformed = ParseJsonBody(Body("{\"a\":"), false);
  ASSERT_FALSE(malformed.ok());
  EXPECT_NE(malformed.status().message().find("malformed JSON"), std::string::npos);
  EXPECT_EQ(malformed.status().message().find("[json.exception"), std::string::npos);
  EXPECT_FALSE(ParseJsonBody(Body("{\"a\":1e999}"), false).ok());
  EXPECT_FALSE(ParseJsonBody(Body("\"\xff\""), false).ok());  // invalid UTF-8
}

TEST(StrictObjectTest, ReadsTypedFieldsAndRefusesUnknownOnes) {
  auto j = nlohmann::json::parse(R"({"s":"x","b":true,"i":5,"n":null,"extra":1})");
  StrictObject in(j, "body");
  EXPECT_EQ(in.String("s", 10), "x");
  EXPECT_EQ(in.Bool("b"), true);
  EXPECT_EQ(in.Int("i", 0, 10), 5);
  EXPECT_EQ(in.String("n", 10), std::nullopt);
  EXPECT_EQ(in.String("absent", 10), std::nullopt);
  Status s = in.Finish();
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'extra'"), std::string::npos) << s.message();
}

TEST(StrictObjectTest, WrongTypesAndRanges) {
  auto j = nlohmann::json::parse(
      R"({"s":1,"i":1.5,"big":1e30,"neg":-1,"u":18446744073709551615,"f":2.0})");
  {
    StrictObject in(j, "body");
    in.String("s", 10);
    EXPECT_NE(in.Finish().message().find("'s' must be a string"), std::string::npos);
  }
  for (const char* field : {"i", "big", "neg", "u"}) {
    StrictObject in(j, "body");
    EXPECT_EQ(in.Int(field, 0, 1'000'000), std::nullopt) << field;
    EXPECT_FALSE(in.ok()) << field;
  }
  StrictObject in(j, "body");
  EXPECT_EQ(in.Int("f", 0, 10), 2);  // an integral number written as 2.0
  const nlohmann::json array = nlohmann::json::array();
  EXPECT_FALSE(StrictObject(array, "body").Finish().ok());
  const nlohmann::json long_string = {{"s", "abcdef"}};
  StrictObject longer(long_string, "body");
  longer.String("s", 3);
  EXPECT_FALSE(longer.ok());
}

TEST(StrictObjectTest, Require) {
  const nlohmann::json j = {{"a", nullptr}};
  StrictObject in(j, "body");
  in.Require("a");
  EXPECT_NE(in.Finish().message().find("'a' is required"), std::string::npos);
}

TEST(QueryParamsTest, ParsesDecodesAndRefuses) {
  ASSERT_OK_AND_ASSIGN(auto q, QueryParams::Parse("a=1&b=x%20y+z&c"));
  EXPECT_EQ(*q.Get("a"), "1");
  EXPECT_EQ(*q.Get("b"), "x y z");
  EXPECT_EQ(*q.Get("c"), "");
  EXPECT_EQ(q.Get("d"), nullptr);
  EXPECT_OK(q.RejectUnknown({"a", "b", "c"}));
  EXPECT_FALSE(q.RejectUnknown({"a"}).ok());
  EXPECT_FALSE(QueryParams::Parse("a=1&a=2").ok());
  EXPECT_FALSE(QueryParams::Parse("a=%g1").ok());
  EXPECT_OK(QueryParams::Parse(""));
}

TEST(ParseIntegerTest, Bounds) {
  EXPECT_EQ(*ParseInteger("42", 1, 100, "n"), 42);
  EXPECT_EQ(*ParseInteger("-5", -10, 0, "n"), -5);
  for (const char* bad : {"", "-", "+1", "01", "1a", " 1", "101", "0", "99999999999999999999",
                          "9223372036854775808"}) {
    EXPECT_FALSE(ParseInteger(bad, 1, 100, "n").ok()) << bad;
  }
}

}  // namespace
}  // namespace taskengine::api
