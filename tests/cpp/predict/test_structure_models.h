// The launch-structure models' forecasts in their tests (embedding_kernels.h, loss_kernels.h).
#pragma once

#include <gtest/gtest.h>

#include <optional>

#include "habitat/trace.h"
#include "test_devices.h"

namespace habitat::test {

// `model`'s forecast of `op` on `gpu` in us; fails the test where the model declines the op.
template <class Model>
double structure_us(Model model, const OpRecord& op, const char* gpu) {
  const std::optional<double> t = model(op, db().find(gpu));
  EXPECT_TRUE(t.has_value()) << op.name;
  return t.value_or(0);
}

}  // namespace habitat::test
