#include "storage/sqlite/sqlite_store.h"

namespace taskengine {
Result<std::unique_ptr<Store>> OpenSqliteStore(const SqliteStoreOptions&) {
  return Unavailable("not built yet");
}
}  // namespace taskengine
