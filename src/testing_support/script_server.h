// A throwaway server for tests, started and stopped by one of the project's
// scripts (scripts/mariadb_cluster.sh, scripts/redis_server.sh: each takes
// `start|stop|url <dir>` and prints the server's URL on start).
// TASKENGINE_SOURCE_DIR, set by te_add_test, locates the scripts.
#pragma once

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "testing_support/test_util.h"

namespace taskengine::testing {

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

// The server of `script` (relative to the source dir) in a temporary
// directory, started on construction, stopped (and removed) on destruction.
class ScriptServer {
 public:
  explicit ScriptServer(std::string script) : script_(SourceDir() + "/" + std::move(script)) {
    // A server that runs as another user (mysql) must reach its directory.
    ::chmod(dir_.path().c_str(), 0755);
    server_dir_ = dir_.File("server");
    started_ = Script("start", &url_);
  }
  ~ScriptServer() {
    if (started_) (void)Stop();
  }
  ScriptServer(const ScriptServer&) = delete;
  ScriptServer& operator=(const ScriptServer&) = delete;

  bool started() const { return started_; }
  // The URL the script printed, or its output when it failed.
  const std::string& url() const { return url_; }
  const std::string& dir() const { return server_dir_; }

  bool Stop() { return Script("stop"); }
  // Starts it again (same directory, same port).
  bool Start() {
    std::string out;
    return Script("start", &out);
  }

 private:
  bool Script(const char* verb, std::string* out = nullptr) {
    std::string ignored;
    return Shell(script_ + " " + verb + " " + server_dir_ + " 2>&1",
                 out != nullptr ? out : &ignored) == 0;
  }

  std::string script_;
  TempDir dir_;
  std::string server_dir_;
  std::string url_;
  bool started_ = false;
};

}  // namespace taskengine::testing
