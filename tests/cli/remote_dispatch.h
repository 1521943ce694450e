// API pieces shared by the remote-worker drills (RD9, RD10) and the black-box
// soak: bulk dispatch and listing every execution over the public API.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "taskengine_client/client.h"

namespace taskengine::testing {

// Bulk dispatch: `jobs` executions of job "remote" with payload {"n": i} and
// idempotency key "<prefix>i", in batches of 1,000. Every item must be
// acknowledged; their execution ids are appended to `ids`. Call inside
// ASSERT_NO_FATAL_FAILURE.
inline void DispatchRemoteJobs(taskengine_client::Client& client, int jobs,
                               const std::string& key_prefix, std::vector<std::string>* ids) {
  for (int start = 0; start < jobs; start += 1000) {
    std::vector<taskengine_client::BulkItem> batch;
    for (int i = start; i < std::min(jobs, start + 1000); ++i) {
      taskengine_client::BulkItem item;
      item.job = "remote";
      item.options.payload = {{"n", i}};
      item.options.idempotency_key = key_prefix + std::to_string(i);
      batch.push_back(std::move(item));
    }
    auto r = client.DispatchBulk(batch);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    for (const auto& item : *r) {
      ASSERT_TRUE(item.status.ok()) << item.status.ToString();
      ids->push_back(item.result.id);
    }
  }
}

// Every execution (filtered by `status` and `job` when not empty) over the
// API, in listing order, so a duplicate would show. nullopt when a page failed
// (the server may be restarting), with the failure in *error when given.
inline std::optional<std::vector<nlohmann::json>> ListOverHttp(
    taskengine_client::Client& client, const std::string& status = "", const std::string& job = "",
    taskengine_client::Status* error = nullptr) {
  std::vector<nlohmann::json> out;
  taskengine_client::ListFilter filter;
  filter.status = status;
  filter.job = job;
  filter.limit = 1000;
  for (int page = 0; page < 1000; ++page) {
    auto r = client.ListExecutions(filter);
    if (!r.ok()) {
      if (error != nullptr) *error = r.status();
      return std::nullopt;
    }
    for (const auto& e : r->items) out.push_back(e);
    if (r->next_cursor.empty()) return out;
    filter.cursor = r->next_cursor;
  }
  return std::nullopt;
}

}  // namespace taskengine::testing
