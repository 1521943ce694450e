// The storage conformance suite against the MariaDB backend: once with its
// default settings and once under stress settings (a pool of one connection,
// so every call of a case queues behind the previous one).
//
// Needs a server: TASKENGINE_TEST_MYSQL_URL names a database on it (e.g. the
// URL scripts/mariadb_cluster.sh start <dir> prints); its user must be able
// to create databases. Each case gets a database of its own, named after the
// case's fresh directory, so a second open over the same env sees the same
// data (as another node would); it is dropped once the case is over. Without
// TASKENGINE_TEST_MYSQL_URL the run FAILS, unless
// TASKENGINE_TEST_MYSQL_OPTIONAL=1, when no case runs and the reason is
// printed.
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>

#include "storage/mariadb/maria_conn.h"
#include "storage/mariadb/maria_store.h"
#include "storage/testing/conformance.h"

namespace taskengine {
namespace {

std::string TestUrl() {
  const char* url = std::getenv("TASKENGINE_TEST_MYSQL_URL");
  return url != nullptr ? url : "";
}

// TestUrl() with its database replaced by `database`.
std::string UrlOf(const std::string& database) {
  std::string url = TestUrl();
  const std::size_t query = url.find('?');
  const std::string params = query == std::string::npos ? "" : url.substr(query);
  if (query != std::string::npos) url.resize(query);
  const std::size_t slash = url.find('/', url.find("://") + 3);
  if (slash != std::string::npos) url.resize(slash);
  return url + "/" + database + params;
}

// The database of the running case, and its case directory. Cases run one at
// a time; when a case opens its first store, the previous case's database is
// dropped (so the server does not grow).
std::mutex database_mu;
std::string current_dir;
std::string current_database;

void DropDatabase(const std::string& database) {
  maria::MariaConn admin;
  if (database.empty() || !admin.Connect(TestUrl()).ok()) return;
  (void)admin.Exec("DROP DATABASE IF EXISTS " + database);
}

// A database per case directory: same env, same database.
Result<std::string> DatabaseFor(const StoreEnv& env) {
  std::lock_guard<std::mutex> lock(database_mu);
  if (env.dir != current_dir) {
    DropDatabase(current_database);
    char name[40];
    std::snprintf(name, sizeof name, "te_conf_%016zx", std::hash<std::string>{}(env.dir));
    maria::MariaConn admin;
    TE_RETURN_IF_ERROR(admin.Connect(TestUrl()));
    TE_RETURN_IF_ERROR(admin.Exec(std::string("CREATE DATABASE ") + name +
                                  " CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin"));
    current_dir = env.dir;
    current_database = name;
  }
  return current_database;
}

class MariaEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (!TestUrl().empty()) return;
    const char* optional = std::getenv("TASKENGINE_TEST_MYSQL_OPTIONAL");
    if (optional != nullptr && std::string(optional) == "1") {
      GTEST_SKIP() << "TASKENGINE_TEST_MYSQL_URL is not set and TASKENGINE_TEST_MYSQL_OPTIONAL=1: "
                      "the MariaDB conformance suite did not run";
    }
    FAIL() << "TASKENGINE_TEST_MYSQL_URL is not set: the MariaDB conformance suite needs a "
              "server. Start one with `scripts/mariadb_cluster.sh start <dir>` and export the "
              "URL it prints, or set TASKENGINE_TEST_MYSQL_OPTIONAL=1 to skip this suite.";
  }

  void TearDown() override {
    if (TestUrl().empty()) return;
    std::lock_guard<std::mutex> lock(database_mu);
    DropDatabase(current_database);
    current_database.clear();
    current_dir.clear();
  }
};

const ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new MariaEnvironment);

Result<MariaStoreOptions> BaseOptions(const StoreEnv& env) {
  if (TestUrl().empty()) return Unavailable("TASKENGINE_TEST_MYSQL_URL is not set");
  TE_ASSIGN_OR_RETURN(std::string database, DatabaseFor(env));
  MariaStoreOptions options;
  options.url = UrlOf(database);
  options.clock = env.clock;
  options.random = env.random;
  return options;
}

Result<std::unique_ptr<Store>> OpenMaria(const StoreEnv& env) {
  TE_ASSIGN_OR_RETURN(MariaStoreOptions options, BaseOptions(env));
  return OpenMariaStore(options);
}

Result<std::unique_ptr<Store>> OpenMariaStress(const StoreEnv& env) {
  TE_ASSIGN_OR_RETURN(MariaStoreOptions options, BaseOptions(env));
  options.pool_size = 1;
  return OpenMariaStore(options);
}

StoreFactory MariaFactory(std::string name,
                          Result<std::unique_ptr<Store>> (*open)(const StoreEnv&)) {
  StoreFactory factory;
  factory.name = std::move(name);
  factory.open = open;
  // Another store object over the same database acts like another node.
  factory.shares_data_between_opens = true;
  // Cases MariaDB cannot pass, each with its reason. None.
  factory.skips = {};
  return factory;
}

INSTANTIATE_TEST_SUITE_P(MariaDB, StoreConformance,
                         ::testing::Values(MariaFactory("MariaDB", OpenMaria),
                                           MariaFactory("MariaDBStress", OpenMariaStress)),
                         StoreFactoryName);

}  // namespace
}  // namespace taskengine
