#include "storage/open_store.h"

#include <filesystem>
#include <system_error>

#include "storage/sqlite/sqlite_store.h"
#ifdef TASKENGINE_HAVE_POSTGRES
#include "storage/postgres/pg_store.h"
#endif
#ifdef TASKENGINE_HAVE_MARIADB
#include "storage/mariadb/maria_store.h"
#endif

namespace taskengine {

bool IsPostgresUrl(std::string_view url) {
  return url.rfind("postgres://", 0) == 0 || url.rfind("postgresql://", 0) == 0;
}

bool IsMariaDbUrl(std::string_view url) {
  return url.rfind("mysql://", 0) == 0 || url.rfind("mariadb://", 0) == 0;
}

std::string RedactUrl(std::string_view url) {
  std::string out(url);
  std::size_t scheme = out.find("://");
  if (scheme == std::string::npos) return out;
  std::size_t at = out.find('@', scheme + 3);
  if (at == std::string::npos) return out;
  std::size_t colon = out.find(':', scheme + 3);
  if (colon != std::string::npos && colon < at) {
    out.replace(colon + 1, at - colon - 1, "***");
  } else if (out.rfind("redis", 0) == 0) {
    // redis://secret@host: the one word is the password.
    out.replace(scheme + 3, at - scheme - 3, "***");
  }
  return out;
}

Result<OpenedStore> OpenStore(const StoreLocation& location, Clock* clock, RandomSource* random) {
  OpenedStore opened;
  if (IsMariaDbUrl(location.url)) {
#ifndef TASKENGINE_HAVE_MARIADB
    return InvalidArgument(
        "this build has no MariaDB backend (libmariadb-dev was missing when it was built)");
#else
    if (clock == nullptr) {
      TE_ASSIGN_OR_RETURN(std::unique_ptr<DatabaseClock> db_clock, OpenMariaClock(location.url));
      opened.owned_clock = std::move(db_clock);
      clock = opened.owned_clock.get();
    }
    MariaStoreOptions options;
    options.url = location.url;
    options.clock = clock;
    options.random = random;
    TE_ASSIGN_OR_RETURN(opened.store, OpenMariaStore(options));
    opened.clock = clock;
    return opened;
#endif
  }
  if (!location.url.empty()) {
    if (!IsPostgresUrl(location.url)) {
      return InvalidArgument(
          "database url must start with postgres://, postgresql://, mysql:// or mariadb://");
    }
#ifndef TASKENGINE_HAVE_POSTGRES
    return InvalidArgument(
        "this build has no PostgreSQL backend (libpq-dev was missing when it was built)");
#else
    if (clock == nullptr) {
      TE_ASSIGN_OR_RETURN(std::unique_ptr<DatabaseClock> db_clock, OpenPostgresClock(location.url));
      opened.owned_clock = std::move(db_clock);
      clock = opened.owned_clock.get();
    }
    PostgresStoreOptions options;
    options.url = location.url;
    options.schema = location.schema;
    options.clock = clock;
    options.random = random;
    TE_ASSIGN_OR_RETURN(opened.store, OpenPostgresStore(options));
    opened.clock = clock;
    return opened;
#endif
  }
  if (location.path.empty()) return InvalidArgument("a database path or url is required");
  if (clock == nullptr) clock = SystemClock::Get();
  std::error_code ec;
  auto dir = std::filesystem::path(location.path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  SqliteStoreOptions options;
  options.path = location.path;
  options.sync = location.sync;
  options.clock = clock;
  options.random = random;
  TE_ASSIGN_OR_RETURN(opened.store, OpenSqliteStore(options));
  opened.clock = clock;
  return opened;
}

}  // namespace taskengine
