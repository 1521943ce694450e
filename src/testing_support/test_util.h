// Helpers for tests: status assertions, throwaway directories, bounded waits.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "taskengine/status.h"

#define ASSERT_OK(expr)                                     \
  do {                                                      \
    const auto& te_st_ = (expr);                            \
    ASSERT_TRUE(te_st_.ok()) << te_st_.status().ToString(); \
  } while (0)
#define EXPECT_OK(expr)                                     \
  do {                                                      \
    const auto& te_st_ = (expr);                            \
    EXPECT_TRUE(te_st_.ok()) << te_st_.status().ToString(); \
  } while (0)
#define TE_TEST_CONCAT_INNER(a, b) a##b
#define TE_TEST_CONCAT(a, b) TE_TEST_CONCAT_INNER(a, b)
#define ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, expr)   \
  auto tmp = (expr);                                \
  ASSERT_TRUE(tmp.ok()) << tmp.status().ToString(); \
  lhs = std::move(tmp).value()
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL(TE_TEST_CONCAT(te_t_, __LINE__), lhs, expr)

namespace taskengine {

// Status has status() so ASSERT_OK works on both Status and Result<T>.
inline const Status& StatusOf(const Status& s) { return s; }

// A fresh directory under $TMPDIR, removed on destruction.
// Polls `pred` every 2 ms until it holds or `limit` passed; its last answer.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return pred();
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "taskengine-test-XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    path_ = p ? std::filesystem::path(p) : std::filesystem::path(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace taskengine
