// docs/openapi.json and the router agree: every registered route is
// documented with the access it really needs, every documented operation is
// registered, and the document is internally consistent ($refs resolve, every
// operation has an id and responses, path parameters are declared).
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "api_harness.h"

namespace taskengine::api::testing {
namespace {

using nlohmann::json;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

class OpenApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(harness_.Start());
    doc_ = json::parse(OpenApiDocument(), nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(doc_.is_object()) << "the embedded document is not JSON";
  }

  // Resolves "#/components/..." against the document; nullptr when dangling.
  const json* Resolve(const std::string& ref) const {
    if (ref.rfind("#/", 0) != 0) return nullptr;
    try {
      return &doc_.at(json::json_pointer(ref.substr(1)));
    } catch (const json::exception&) {
      return nullptr;
    }
  }

  void CheckRefs(const json& node, const std::string& where, int* count) const {
    if (node.is_object()) {
      auto it = node.find("$ref");
      if (it != node.end()) {
        ++*count;
        EXPECT_NE(Resolve(it->get<std::string>()), nullptr) << where << ": " << *it;
      }
      for (auto& [k, v] : node.items()) CheckRefs(v, where + "/" + k, count);
    } else if (node.is_array()) {
      for (std::size_t i = 0; i < node.size(); ++i) {
        CheckRefs(node[i], where + "/" + std::to_string(i), count);
      }
    }
  }

  ApiHarness harness_;
  json doc_;
};

TEST_F(OpenApiTest, EmbeddedDocumentIsTheCheckedInFile) {
  const char* src = std::getenv("TASKENGINE_SOURCE_DIR");
  if (src == nullptr) GTEST_SKIP() << "TASKENGINE_SOURCE_DIR not set (run through ctest)";
  std::ifstream in(std::string(src) + "/docs/openapi.json", std::ios::binary);
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), std::string(OpenApiDocument()));
}

TEST_F(OpenApiTest, EveryRouteIsDocumentedAndViceVersa) {
  std::set<std::pair<std::string, std::string>> routes;
  for (const Router::RouteInfo& r : harness_.api().router().routes()) {
    routes.emplace(Lower(ToString(r.method)), r.pattern);
    const json* op = nullptr;
    auto path = doc_["paths"].find(r.pattern);
    if (path != doc_["paths"].end()) {
      auto it = path->find(Lower(ToString(r.method)));
      if (it != path->end()) op = &*it;
    }
    ASSERT_NE(op, nullptr) << ToString(r.method) << " " << r.pattern
                           << " is not in docs/openapi.json";
    EXPECT_EQ(op->value("x-taskengine-access", ""), r.access.Describe())
        << ToString(r.method) << " " << r.pattern;
    if (r.access.kind == RouteAccess::Kind::kPublic) {
      EXPECT_TRUE(op->contains("security") && (*op)["security"].empty())
          << r.pattern << " is public: its operation must say security: []";
    }
  }
  const std::set<std::string> kMethods = {"get",     "put",  "post",  "delete",
                                          "options", "head", "patch", "trace"};
  std::size_t documented = 0;
  for (auto& [path, item] : doc_["paths"].items()) {
    for (auto& [method, op] : item.items()) {
      if (kMethods.count(method) == 0) continue;
      ++documented;
      EXPECT_TRUE(routes.count({method, path}))
          << method << " " << path << " is documented but not registered";
    }
  }
  EXPECT_EQ(documented, routes.size());
}

TEST_F(OpenApiTest, DocumentIsConsistent) {
  EXPECT_EQ(doc_["openapi"].get<std::string>().rfind("3.", 0), 0u);
  EXPECT_TRUE(doc_["info"].contains("title"));
  int refs = 0;
  CheckRefs(doc_, "", &refs);
  EXPECT_GT(refs, 50);
  std::set<std::string> operation_ids;
  for (auto& [path, item] : doc_["paths"].items()) {
    std::set<std::string> path_params;
    for (std::size_t i = path.find('{'); i != std::string::npos; i = path.find('{', i + 1)) {
      path_params.insert(path.substr(i + 1, path.find('}', i) - i - 1));
    }
    for (auto& [method, op] : item.items()) {
      const std::string where = method + " " + path;
      ASSERT_TRUE(op.contains("operationId")) << where;
      EXPECT_TRUE(operation_ids.insert(op["operationId"].get<std::string>()).second)
          << "duplicate operationId " << op["operationId"];
      ASSERT_TRUE(op.contains("responses") && !op["responses"].empty()) << where;
      bool has_success = false;
      for (auto& [code, response] : op["responses"].items()) {
        has_success = has_success || code[0] == '2';
        if (code[0] == '4' || code[0] == '5') {
          const json& r = response.contains("$ref") ? *Resolve(response["$ref"]) : response;
          EXPECT_EQ(r["content"]["application/json"]["schema"]["$ref"],
                    "#/components/schemas/Error")
              << where << " " << code << ": errors use the Error shape";
        }
      }
      EXPECT_TRUE(has_success) << where;
      std::set<std::string> declared;
      for (const json& p : op.value("parameters", json::array())) {
        const json& param = p.contains("$ref") ? *Resolve(p["$ref"]) : p;
        if (param["in"] == "path") declared.insert(param["name"]);
      }
      EXPECT_EQ(declared, path_params) << where;
      const std::string access = op.value("x-taskengine-access", "");
      EXPECT_FALSE(access.empty()) << where;
      if (access != "public") EXPECT_TRUE(op["responses"].contains("401")) << where;
    }
  }
}

}  // namespace
}  // namespace taskengine::api::testing
