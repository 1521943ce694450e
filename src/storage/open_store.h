// The one place that picks a storage backend (D1): a SQLite file by default,
// PostgreSQL when a postgres:// URL is given, MariaDB/MySQL for mysql:// or
// mariadb://.
#pragma once

#include <memory>
#include <string>

#include "storage/store.h"
#include "taskengine/clock.h"
#include "taskengine/random.h"

namespace taskengine {

struct StoreLocation {
  // SQLite database file (used when `url` is empty).
  std::string path;
  SyncMode sync = SyncMode::kFull;
  // postgres://... or postgresql://... selects PostgreSQL; mysql://... or
  // mariadb://... MariaDB (the URL's database holds the tables); empty = SQLite.
  std::string url;
  // PostgreSQL: the schema holding the tables. Default: taskengine.
  std::string schema = "taskengine";
};

// True when `url` names a PostgreSQL database.
bool IsPostgresUrl(std::string_view url);
// True when `url` names a MariaDB/MySQL database.
bool IsMariaDbUrl(std::string_view url);

// A URL with its password replaced by "***", for logs.
std::string RedactUrl(std::string_view url);

struct OpenedStore {
  std::unique_ptr<Store> store;
  // The clock the store decides time by: `clock` when one was given; else the
  // system clock for SQLite and the database's clock for PostgreSQL and MariaDB (every
  // node then judges leases by the same time). Owned by `owned_clock` when
  // made here.
  Clock* clock = nullptr;
  std::unique_ptr<Clock> owned_clock;
};

// Opens (does not migrate) the store at `location`. `clock` and `random` are
// not owned; nullptr picks the defaults described above.
Result<OpenedStore> OpenStore(const StoreLocation& location, Clock* clock, RandomSource* random);

}  // namespace taskengine
