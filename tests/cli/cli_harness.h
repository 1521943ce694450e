// A throwaway taskengine installation for process-level tests: a temp
// directory with a config file and a database, and helpers that run the real
// binary (TASKENGINE_BIN, set by CMake) against them.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "process_util.h"
#include "testing_support/test_util.h"

namespace taskengine::testing {

inline constexpr std::chrono::milliseconds kCliTimeout{30'000};

class TaskengineInstall {
 public:
  // Writes `config_toml` to <dir>/taskengine.toml; the database is <dir>/data/te.db.
  explicit TaskengineInstall(const std::string& config_toml) {
    config_path_ = dir_.File("taskengine.toml");
    db_path_ = dir_.File("data/te.db");
    std::ofstream(config_path_) << config_toml;
  }

  const TempDir& dir() const { return dir_; }
  const std::string& db_path() const { return db_path_; }
  const std::string& config_path() const { return config_path_; }

  // argv for `taskengine --config <file> --db <db> <args...>`.
  std::vector<std::string> Argv(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {TASKENGINE_BIN, "--config", config_path_, "--db", db_path_};
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
  }

  // Runs one CLI command to completion (in the temp directory).
  ProcessResult Run(const std::vector<std::string>& args, const std::string& input = "",
                    const std::vector<std::string>& extra_env = {}) const {
    return RunProcess(Argv(args), input, kCliTimeout, ChildEnvironment(extra_env),
                      dir_.path().string());
  }

  // Runs `args` with --json; on exit 0 returns the parsed stdout, else adds a
  // test failure and returns a discarded value.
  nlohmann::json RunJson(std::vector<std::string> args) const {
    args.push_back("--json");
    ProcessResult r = Run(args);
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    if (r.exit_code != 0) return nlohmann::json(nlohmann::json::value_t::discarded);
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << "stdout is not one JSON document: " << r.out;
    return j;
  }

  // Starts `taskengine serve` with stdout and stderr appended to <dir>/serve.log.
  void StartServe(ChildProcess* child) const {
    SpawnOptions o;
    o.cwd = dir_.path().string();
    o.stdout_path = serve_log();
    o.stderr_path = serve_log();
    std::string error;
    ASSERT_TRUE(child->Start(Argv({"serve"}), o, &error)) << error;
  }

  // Starts `taskengine serve` on an ephemeral port (TASKENGINE_HTTP_PORT=0,
  // plus `extra_env`), output to serve_log(), and waits for its "listening
  // on" line. Returns the port; 0 (after a test failure) when it did not
  // come up.
  int StartServeOnEphemeralPort(ChildProcess* child,
                                std::vector<std::string> extra_env = {}) const {
    extra_env.push_back("TASKENGINE_HTTP_PORT=0");
    SpawnOptions o;
    o.env = ChildEnvironment(extra_env);
    o.cwd = dir_.path().string();
    o.stdout_path = serve_log();
    o.stderr_path = serve_log();
    std::string error;
    if (!child->Start(Argv({"serve"}), o, &error)) {
      ADD_FAILURE() << error;
      return 0;
    }
    int port = 0;
    const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
    WaitUntil(std::chrono::seconds(20), [&] {
      std::smatch m;
      const std::string log = ReadFile(serve_log());
      if (std::regex_search(log, m, listening)) port = std::stoi(m[1]);
      return port != 0;
    });
    EXPECT_NE(port, 0) << ReadFile(serve_log());
    return port;
  }

  std::string serve_log() const { return dir_.File("serve.log"); }

  // Waits until the serve log has `count` "serving" lines (one per start).
  bool WaitServing(int count, std::chrono::milliseconds timeout) const {
    return WaitUntil(timeout, [&] {
      std::string log = ReadFile(serve_log());
      int n = 0;
      for (std::size_t p = log.find("serving ("); p != std::string::npos;
           p = log.find("serving (", p + 1)) {
        ++n;
      }
      return n >= count;
    });
  }

 private:
  TempDir dir_;
  std::string config_path_;
  std::string db_path_;
};

}  // namespace taskengine::testing
