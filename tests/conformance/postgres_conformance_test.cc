// The storage conformance suite against the PostgreSQL backend: once with its
// default settings and once under stress settings (a pool of one connection,
// so every call of a case queues behind the previous one).
//
// Needs a server: TASKENGINE_TEST_PG_URL names a database (e.g. the one
// scripts/pg_cluster.sh start <dir> prints). Each case gets a schema of its
// own, named after the case's fresh directory, so a second open over the same
// env sees the same data (as another node would); it is dropped once the
// case is over. Without TASKENGINE_TEST_PG_URL the run FAILS, unless
// TASKENGINE_TEST_PG_OPTIONAL=1, when no case runs and the reason is printed.
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>

#include "storage/postgres/pg_conn.h"
#include "storage/postgres/pg_store.h"
#include "storage/testing/conformance.h"

namespace taskengine {
namespace {

std::string TestUrl() {
  const char* url = std::getenv("TASKENGINE_TEST_PG_URL");
  return url != nullptr ? url : "";
}

// The schema of the running case, and its case directory. Cases run one at a
// time; when a case opens its first store, the previous case's stores are
// closed and its schema is dropped (so the database does not grow).
std::mutex schema_mu;
std::string current_dir;
std::string current_schema;

void DropSchema(const std::string& schema) {
  pg::PgConn admin;
  if (schema.empty() || !admin.Connect(TestUrl(), "").ok()) return;
  (void)admin.Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
}

// A schema name per case directory: same env, same schema.
std::string SchemaFor(const StoreEnv& env) {
  std::lock_guard<std::mutex> lock(schema_mu);
  if (env.dir != current_dir) {
    DropSchema(current_schema);
    char name[40];
    std::snprintf(name, sizeof name, "te_conf_%016zx", std::hash<std::string>{}(env.dir));
    current_dir = env.dir;
    current_schema = name;
  }
  return current_schema;
}

class PostgresEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (!TestUrl().empty()) return;
    const char* optional = std::getenv("TASKENGINE_TEST_PG_OPTIONAL");
    if (optional != nullptr && std::string(optional) == "1") {
      GTEST_SKIP() << "TASKENGINE_TEST_PG_URL is not set and TASKENGINE_TEST_PG_OPTIONAL=1: "
                      "the PostgreSQL conformance suite did not run";
    }
    FAIL() << "TASKENGINE_TEST_PG_URL is not set: the PostgreSQL conformance suite needs a "
              "server. Start one with `scripts/pg_cluster.sh start <dir>` and export the URL "
              "it prints, or set TASKENGINE_TEST_PG_OPTIONAL=1 to skip this suite.";
  }

  void TearDown() override {
    if (TestUrl().empty()) return;
    std::lock_guard<std::mutex> lock(schema_mu);
    DropSchema(current_schema);
    current_schema.clear();
    current_dir.clear();
  }
};

const ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new PostgresEnvironment);

PostgresStoreOptions BaseOptions(const StoreEnv& env) {
  PostgresStoreOptions options;
  options.url = TestUrl();
  options.schema = SchemaFor(env);
  options.clock = env.clock;
  options.random = env.random;
  return options;
}

Result<std::unique_ptr<Store>> OpenPostgres(const StoreEnv& env) {
  if (TestUrl().empty()) return Unavailable("TASKENGINE_TEST_PG_URL is not set");
  return OpenPostgresStore(BaseOptions(env));
}

Result<std::unique_ptr<Store>> OpenPostgresStress(const StoreEnv& env) {
  if (TestUrl().empty()) return Unavailable("TASKENGINE_TEST_PG_URL is not set");
  PostgresStoreOptions options = BaseOptions(env);
  options.pool_size = 1;
  return OpenPostgresStore(options);
}

StoreFactory PostgresFactory(std::string name,
                             Result<std::unique_ptr<Store>> (*open)(const StoreEnv&)) {
  StoreFactory factory;
  factory.name = std::move(name);
  factory.open = open;
  // Another store object over the same schema acts like another node.
  factory.shares_data_between_opens = true;
  // Cases PostgreSQL cannot pass, each with its reason. None.
  factory.skips = {};
  return factory;
}

INSTANTIATE_TEST_SUITE_P(Postgres, StoreConformance,
                         ::testing::Values(PostgresFactory("Postgres", OpenPostgres),
                                           PostgresFactory("PostgresStress", OpenPostgresStress)),
                         StoreFactoryName);

}  // namespace
}  // namespace taskengine
