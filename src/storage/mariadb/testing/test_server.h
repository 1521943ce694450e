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
#include "testing_support/test_util.h"

namespace taskengine::maria::testing {

inline std::string SourceDir() {
  const char* dir = std::getenv("TASKENGINE_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

// Runs a shell command; returns its exit status and fills `out` with its
// stdout (trailing blanks and newlines removed).
inline int Shell(const std::string& command, std::string* out = nullptr) {
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return -1;
  std::string text;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) text += buf;
  const int rc = pclose(p);
  if (out != nullptr) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    *out = text;
  }
  return rc;
}

// A throwaway server in a temporary directory, stopped (and removed) on
// destruction.
class TestServer {
 public:
  TestServer() {
    // The mysql user must reach the server directory inside our temp dir.
    ::chmod(dir_.path().c_str(), 0755);
    server_dir_ = dir_.File("mariadb");
    started_ = Script("start", &url_);
  }
  ~TestServer() {
    if (started_) (void)Stop();
  }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  bool started() const { return started_; }
  // mysql://taskengine:taskengine@127.0.0.1:<port>/taskengine_test, or the
  // script's output when it failed.
  const std::string& url() const { return url_; }

  bool Stop() { return Script("stop"); }
  bool Start() {
    std::string out;
    return Script("start", &out);
  }

 private:
  bool Script(const char* verb, std::string* out = nullptr) {
    std::string ignored;
    return Shell(SourceDir() + "/scripts/mariadb_cluster.sh " + verb + " " + server_dir_ + " 2>&1",
                 out != nullptr ? out : &ignored) == 0;
  }

  TempDir dir_;
  std::string server_dir_;
  std::string url_;
  bool started_ = false;
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
