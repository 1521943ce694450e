// Test support for the MariaDB backend: a throwaway MariaDB server started
// with scripts/mariadb_cluster.sh (mariadb-server must be installed;
// TASKENGINE_SOURCE_DIR, set by te_add_test, locates the script), and fresh
// databases on it. Header-only, for test binaries (it registers a GoogleTest
// environment that stops the shared server when the binary ends).
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "storage/mariadb/maria_conn.h"
#include "testing_support/script_server.h"
#include "testing_support/test_util.h"

namespace taskengine::maria::testing {

using taskengine::testing::Shell;
using taskengine::testing::SourceDir;

// A throwaway server (scripts/mariadb_cluster.sh), stopped (and removed) on
// destruction.
class TestServer : public taskengine::testing::ScriptServer {
 public:
  TestServer() : ScriptServer("scripts/mariadb_cluster.sh") {}
};

namespace internal {

inline TestServer*& SharedServerSlot() {
  static TestServer* server = nullptr;
  return server;
}

class SharedServerEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    delete SharedServerSlot();
    SharedServerSlot() = nullptr;
  }
};
inline const ::testing::Environment* const kSharedServerEnvironment =
    ::testing::AddGlobalTestEnvironment(new SharedServerEnvironment);

}  // namespace internal

// One server for the binary (mariadb-install-db takes seconds), started on
// first use and stopped when the binary ends.
inline TestServer& SharedServer() {
  (void)internal::kSharedServerEnvironment;
  TestServer*& server = internal::SharedServerSlot();
  if (server == nullptr) server = new TestServer();
  return *server;
}

// `url` with its database replaced by `database`.
inline std::string WithDatabase(const std::string& url, const std::string& database) {
  return url.substr(0, url.rfind('/') + 1) + database;
}

// A lower-case database name made of the current test's name and `suffix`.
inline std::string TestDatabaseName(const std::string& suffix = "") {
  std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  name = "t_" + name + suffix;
  for (char& c : name) {
    c = std::isalnum(static_cast<unsigned char>(c))
            ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
            : '_';
  }
  return name;
}

// Drops and creates `database` on the shared server (utf8mb4, as the
// server's default); returns its URL.
inline Result<std::string> FreshDatabase(const std::string& database) {
  TestServer& server = SharedServer();
  if (!server.started()) return Unavailable("no MariaDB server: " + server.url());
  MariaConn admin;
  TE_RETURN_IF_ERROR(admin.Connect(server.url()));
  TE_RETURN_IF_ERROR(
      admin.Exec("DROP DATABASE IF EXISTS " + database + "; CREATE DATABASE " + database));
  return WithDatabase(server.url(), database);
}

}  // namespace taskengine::maria::testing
