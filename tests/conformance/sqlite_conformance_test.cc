// The storage conformance suite against the SQLite backend: once with its
// default (durable) settings — WAL, synchronous=FULL, group commit — and once
// under stress settings: no grouping (every operation its own transaction),
// one read connection shared by every reader, synchronous=NORMAL.
#include "storage/sqlite/sqlite_store.h"
#include "storage/testing/conformance.h"

namespace taskengine {
namespace {

SqliteStoreOptions BaseOptions(const StoreEnv& env) {
  SqliteStoreOptions options;
  options.path = env.dir + "/te.db";
  options.clock = env.clock;
  options.random = env.random;
  return options;
}

Result<std::unique_ptr<Store>> OpenSqlite(const StoreEnv& env) {
  return OpenSqliteStore(BaseOptions(env));
}

Result<std::unique_ptr<Store>> OpenSqliteStress(const StoreEnv& env) {
  SqliteStoreOptions options = BaseOptions(env);
  options.max_group = 1;
  options.read_connections = 1;
  options.sync = SyncMode::kNormal;
  return OpenSqliteStore(options);
}

StoreFactory SqliteFactory(std::string name,
                           Result<std::unique_ptr<Store>> (*open)(const StoreEnv&)) {
  StoreFactory factory;
  factory.name = std::move(name);
  factory.open = open;
  // Another store object over the same file acts like another process.
  factory.shares_data_between_opens = true;
  // Cases SQLite cannot pass, each with its reason. None.
  factory.skips = {};
  return factory;
}

INSTANTIATE_TEST_SUITE_P(Sqlite, StoreConformance,
                         ::testing::Values(SqliteFactory("Sqlite", OpenSqlite),
                                           SqliteFactory("SqliteStress", OpenSqliteStress)),
                         StoreFactoryName);

}  // namespace
}  // namespace taskengine
