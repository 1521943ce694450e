// Randomness as a dependency, so backoff jitter is reproducible in tests.
#pragma once

#include <cstdint>
#include <memory>

namespace taskengine {

// Thread-safe.
class RandomSource {
 public:
  virtual ~RandomSource() = default;
  // A uniformly distributed value in [0, 1).
  virtual double Uniform01() = 0;
};

// A seeded Mersenne twister behind a mutex. Thread-safe.
class SeededRandom final : public RandomSource {
 public:
  explicit SeededRandom(std::uint64_t seed);
  ~SeededRandom() override;
  double Uniform01() override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Always returns the same value; for tests that want no jitter (0.0). Thread-safe.
class FixedRandom final : public RandomSource {
 public:
  explicit FixedRandom(double v = 0.0) : v_(v) {}
  double Uniform01() override { return v_; }

 private:
  double v_;
};

}  // namespace taskengine
