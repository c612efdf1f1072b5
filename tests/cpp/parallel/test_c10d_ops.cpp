// c10d collectives in a trace are communication: no device compute of one GPU (the cluster
// forecast adds them), and the collective model knows which collective each one runs.
#include <gtest/gtest.h>

#include "cost/test_op_cost_builders.h"
#include "habitat/collectives.h"
#include "habitat/op_cost.h"

namespace habitat {
namespace {

using namespace habitat::test;

TEST(C10dOps, AreNoDeviceWorkOnOneGpu) {
  const auto rec = op("c10d::allreduce_", "", {tensor("tensors", T({9610}))}, {T({9610})});
  EXPECT_EQ(estimate_cost(rec).op_class, OpClass::NoKernel);
  EXPECT_EQ(collective_from_name(rec.name), Collective::AllReduce);
}

}  // namespace
}  // namespace habitat
