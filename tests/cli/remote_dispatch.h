// Bulk dispatch for the remote-worker drills (RD9, RD10): `jobs` executions
// of job "remote" with payload {"n": i} and idempotency key "<prefix>i", in
// batches of 1,000 through the public API. Every item must be acknowledged;
// their execution ids are appended to `ids`. Call inside
// ASSERT_NO_FATAL_FAILURE.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "taskengine_client/client.h"

namespace taskengine::testing {

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

}  // namespace taskengine::testing
