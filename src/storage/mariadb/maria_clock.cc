// OpenMariaClock: a DatabaseClock that follows the MariaDB server's clock.
#include <memory>
#include <optional>

#include "storage/mariadb/maria_conn.h"
#include "storage/mariadb/maria_store.h"

namespace taskengine {

Result<std::unique_ptr<DatabaseClock>> OpenMariaClock(const std::string& url,
                                                      std::chrono::milliseconds resample) {
  if (url.empty()) return InvalidArgument("the MariaDB clock needs a connection URL");
  auto conn = std::make_shared<maria::MariaConn>();
  return DatabaseClock::Open(
      [conn, url]() -> Result<Millis> {
        if (!conn->healthy()) TE_RETURN_IF_ERROR(conn->Connect(url));
        std::optional<Millis> now;
        // SYSDATE (unlike NOW) is the time the statement reads it; the
        // session's time zone is UTC.
        TE_RETURN_IF_ERROR(
            conn->Run("SELECT CAST(FLOOR(UNIX_TIMESTAMP(SYSDATE(3)) * 1000) AS SIGNED)",
                      storage_internal::SqlArgs(),
                      [&](const storage_internal::Row& r) { now = r.Int(0); })
                .status());
        if (!now) return Internal("MariaDB: SYSDATE() returned no row");
        return *now;
      },
      resample);
}

}  // namespace taskengine
