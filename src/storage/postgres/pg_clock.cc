// OpenPostgresClock: a DatabaseClock that follows PostgreSQL's clock_timestamp().
#include <memory>

#include "storage/database_clock.h"
#include "storage/postgres/pg_conn.h"
#include "storage/postgres/pg_store.h"

namespace taskengine {

Result<std::unique_ptr<DatabaseClock>> OpenPostgresClock(const std::string& url,
                                                         std::chrono::milliseconds resample) {
  if (url.empty()) return InvalidArgument("the PostgreSQL clock needs a connection URL");
  auto conn = std::make_shared<pg::PgConn>();
  return DatabaseClock::Open(
      [conn, url]() -> Result<Millis> {
        if (!conn->healthy()) TE_RETURN_IF_ERROR(conn->Connect(url, ""));
        TE_ASSIGN_OR_RETURN(
            pg::PgResult r,
            conn->Query("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"));
        if (r.rows() != 1) return Internal("clock_timestamp() returned no row");
        return r.Int(0, 0);
      },
      resample);
}

}  // namespace taskengine
