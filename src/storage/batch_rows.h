// BatchRows: the state rows a batch (finishes, heartbeats, marks of started
// handlers) read up front in one statement, as they were when read. The same
// execution may appear twice in a batch: a row the batch has changed since
// (Touch) is read again, through the backend's own single-row read (with its
// row lock where rows lock).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "storage/store_rules.h"
#include "taskengine/status.h"

namespace taskengine::storage_internal {

class BatchRows {
 public:
  void Add(StateRow row) { rows_.emplace(row.id.value, std::move(row)); }

  // The batch has written `id`: its next Get reads it again.
  void Touch(ExecutionId id) {
    rows_.erase(id.value);
    touched_.push_back(id.value);
  }

  // The row of `id` (nullopt: it does not exist). `reload(id)` reads a
  // touched row again and answers Result<std::optional<StateRow>>.
  template <typename Reload>
  Result<std::optional<StateRow>> Get(ExecutionId id, Reload&& reload) const {
    auto it = rows_.find(id.value);
    if (it != rows_.end()) return std::optional<StateRow>(it->second);
    if (std::find(touched_.begin(), touched_.end(), id.value) != touched_.end()) {
      return std::forward<Reload>(reload)(id);
    }
    return std::optional<StateRow>();  // does not exist
  }

 private:
  std::unordered_map<std::int64_t, StateRow> rows_;
  std::vector<std::int64_t> touched_;
};

}  // namespace taskengine::storage_internal
