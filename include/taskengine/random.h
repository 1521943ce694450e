// Randomness as a dependency, so backoff jitter is reproducible in tests.
#pragma once

#include <cstdint>
#include <random>

#include "taskengine/mutex.h"

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
  explicit SeededRandom(std::uint64_t seed) : gen_(seed) {}
  double Uniform01() override EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return std::uniform_real_distribution<double>(0.0, 1.0)(gen_);
  }

 private:
  Mutex mu_;
  std::mt19937_64 gen_ GUARDED_BY(mu_);
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
