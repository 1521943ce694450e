// Multi-node operation on PostgreSQL (D2; issue #6) with the `command`
// handler: the drill of three_node_drill.h (three `taskengine serve` nodes,
// one killed with SIGKILL and restarted; L, D, S, C), where every `work`
// execution starts a shell that performs its countable effect through
// `taskengine effect:reserve` / `effect:commit` (tests/cli/drill_support.h):
// the effect ledger exercised by real processes that die with their node.
// Each job starts a shell and two CLI processes (a few jobs/s on a 2-core
// machine), so it runs TASKENGINE_MULTINODE_COMMAND_JOBS jobs (default 800;
// capped by TASKENGINE_MULTINODE_JOBS when only that is set, as in the
// sanitizer stage). The 20,000-job run is multinode_drill_test (`http`).
#include <gtest/gtest.h>

#include <algorithm>

#include "three_node_drill.h"

namespace taskengine::testing {
namespace {

int CommandJobCount() {
  const int fallback = std::min(800, JobCountFromEnv("TASKENGINE_MULTINODE_JOBS", 800));
  return JobCountFromEnv("TASKENGINE_MULTINODE_COMMAND_JOBS", fallback);
}

TEST(MultinodeCommandDrillTest, ThreeNodesOneKilledKeepLDSC) {
  RunThreeNodeDrill(WorkEffect::kCommand, CommandJobCount());
}

}  // namespace
}  // namespace taskengine::testing
