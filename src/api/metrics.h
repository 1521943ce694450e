// /metrics (product.md I5): the writer (core/prometheus_text.h) under the
// API's names, and the counters the API's worker-protocol routes keep. Every
// metric this process exposes is listed in docs/operations.md, "Metrics and
// logs".
#pragma once

#include <atomic>
#include <cstdint>

#include "core/prometheus_text.h"

namespace taskengine::api {

using taskengine::Label;
using taskengine::LabelValue;
using taskengine::MetricsWriter;

// What the worker-protocol routes of one Api (remote workers, W4) did since
// it was constructed. Monotonic counters. Thread-safe.
struct ApiMetrics {
  std::atomic<std::int64_t> claims{0};            // leases handed to remote workers
  std::atomic<std::int64_t> completions{0};       // complete outcomes recorded
  std::atomic<std::int64_t> failed_retryable{0};  // fail outcomes recorded, by class
  std::atomic<std::int64_t> failed_permanent{0};
  std::atomic<std::int64_t> failed_ambiguous{0};
  std::atomic<std::int64_t> failed_unsupported_schema{0};  // fail with unsupported_schema
  // Calls or batch items answered `stale` (409 for a single call): the claim
  // version the worker sent is not current.
  std::atomic<std::int64_t> stale_rejections{0};
  // Effect reservations answered already_done (E1).
  std::atomic<std::int64_t> effect_duplicates{0};
};

}  // namespace taskengine::api
