// The storage conformance suite against the SQLite backend, with its default
// (durable) settings: WAL, synchronous=FULL.
#include "storage/sqlite/sqlite_store.h"
#include "storage/testing/conformance.h"

namespace taskengine {
namespace {

Result<std::unique_ptr<Store>> OpenSqlite(const StoreEnv& env) {
  SqliteStoreOptions options;
  options.path = env.dir + "/te.db";
  options.clock = env.clock;
  options.random = env.random;
  return OpenSqliteStore(options);
}

StoreFactory SqliteFactory() {
  StoreFactory factory;
  factory.name = "Sqlite";
  factory.open = OpenSqlite;
  // Another store object over the same file acts like another process.
  factory.shares_data_between_opens = true;
  // Cases SQLite cannot pass, each with its reason. None.
  factory.skips = {};
  return factory;
}

INSTANTIATE_TEST_SUITE_P(Sqlite, StoreConformance, ::testing::Values(SqliteFactory()),
                         StoreFactoryName);

}  // namespace
}  // namespace taskengine
