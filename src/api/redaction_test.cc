#include "api/redaction.h"

#include <gtest/gtest.h>

namespace taskengine::api {
namespace {

using Json = nlohmann::ordered_json;

TEST(RedactJobConfigTest, MasksHeadersEnvNamedKeysAndUrlUserInfo) {
  const Json config = Json::parse(R"({
    "url": "https://user:pw@hooks.example.com/in?x=1",
    "allow_hosts": ["hooks.example.com"],
    "headers": {"Authorization": "Bearer s1", "X-Trace": "t"},
    "env": {"API_TOKEN": "s2"},
    "argv": ["/bin/sh", "-c", "true"],
    "nested": {"Password": "s3", "list": [{"API_KEY": "s4"}, {"keep": 1}]},
    "signing_key": "s5",
    "timeout_ms": 1000
  })");
  const Json masked = RedactJobConfig(config, /*reveal=*/false, {"signing_key"});
  const std::string text = masked.dump();
  for (const char* secret : {"s1", "s2", "s3", "s4", "s5", "user:pw"}) {
    EXPECT_EQ(text.find(secret), std::string::npos) << secret << " in " << text;
  }
  EXPECT_EQ(masked["url"], "https://[redacted]@hooks.example.com/in?x=1");
  EXPECT_EQ(masked["headers"]["Authorization"], kRedacted);
  EXPECT_EQ(masked["headers"]["X-Trace"], kRedacted) << "every header value";
  EXPECT_EQ(masked["env"]["API_TOKEN"], kRedacted);
  EXPECT_EQ(masked["argv"], config["argv"]);
  EXPECT_EQ(masked["allow_hosts"], config["allow_hosts"]);
  EXPECT_EQ(masked["nested"]["Password"], kRedacted) << "names compare case-insensitively";
  EXPECT_EQ(masked["nested"]["list"][0]["API_KEY"], kRedacted);
  EXPECT_EQ(masked["nested"]["list"][1]["keep"], 1);
  EXPECT_EQ(masked["timeout_ms"], 1000);
  EXPECT_EQ(RedactJobConfig(config, /*reveal=*/false)["signing_key"], "s5")
      << "only listed names beyond the built-in ones";
}

TEST(RedactJobConfigTest, RevealKeepsEverythingAndOddInputIsKept) {
  const Json config = Json::parse(R"({"env": {"A": "b"}, "url": "https://h/"})");
  EXPECT_EQ(RedactJobConfig(config, /*reveal=*/true), config);
  EXPECT_EQ(RedactJobConfig(config, false)["url"], "https://h/");
  EXPECT_EQ(RedactJobConfig(Json(nullptr), false), Json(nullptr));
  EXPECT_EQ(RedactJobConfig(Json("text"), false), Json("text"));
  EXPECT_EQ(RedactJobConfig(Json::parse(R"({"env": "x"})"), false)["env"], kRedacted);
}

}  // namespace
}  // namespace taskengine::api
