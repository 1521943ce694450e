#include "taskengine/random.h"

#include <random>

#include "core/mutex.h"

namespace taskengine {

struct SeededRandom::State {
  explicit State(std::uint64_t seed) : gen(seed) {}
  Mutex mu;
  std::mt19937_64 gen GUARDED_BY(mu);
};

SeededRandom::SeededRandom(std::uint64_t seed) : state_(std::make_unique<State>(seed)) {}

SeededRandom::~SeededRandom() = default;

double SeededRandom::Uniform01() {
  MutexLock lock(state_->mu);
  return std::uniform_real_distribution<double>(0.0, 1.0)(state_->gen);
}

}  // namespace taskengine
