// The retention policy (product.md I7): how long each kind of record is
// kept and how purges run; [retention] of the configuration. The purging
// itself is engine/retention.h.
#pragma once

#include "taskengine/clock.h"
#include "taskengine/status.h"

namespace taskengine {

inline constexpr Millis kRetentionDayMs = 86'400'000;

// How long each kind of record is kept, and how purges run. The ages are in
// milliseconds; 0 keeps that kind forever.
struct RetentionPolicy {
  bool enabled = true;  // serve runs the loop
  Millis executions_ms = 30 * kRetentionDayMs;
  Millis logs_ms = 7 * kRetentionDayMs;
  Millis audit_ms = 365 * kRetentionDayMs;
  int batch = 500;  // at most this many rows of each kind per transaction, 1..kMaxPurgeBatch
  // Transactions are sized to take about half of this: a slower one makes
  // the next smaller (down to 1 row), quick ones let them grow back up to
  // `batch`, so a purge never holds SQLite's one writer long enough to stall
  // dispatches. 0 = always `batch` rows.
  Millis max_transaction_ms = 2;
  Millis interval_ms = 60'000;  // between the starts of two passes of the loop
  Millis max_pause_ms = 100;    // longest pause between two batches of a pass
};

// Checks the ranges: ages 0..100 years, batch 1..kMaxPurgeBatch, interval
// 1 s..1 day, transaction budget and pause 0..10 s. kInvalidArgument names
// the field.
Status ValidateRetentionPolicy(const RetentionPolicy& policy);

}  // namespace taskengine
