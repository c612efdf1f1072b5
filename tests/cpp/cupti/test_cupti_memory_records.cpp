// Copies within the GPU's memory and memsets, against the fake CUPTI (fake_cupti.h): ATen's
// copy_ of two contiguous tensors of one dtype (a clone) is a cudaMemcpyAsync, not a kernel, and
// its device time belongs to the op as a kernel's does; host <-> device copies do not.
#include <gtest/gtest.h>

#include <vector>

#include "cupti/cupti_tracer.h"
#include "fake_cupti.h"
#include "habitat/trace.h"

namespace habitat::cupti {
namespace {

TEST(CuptiMemoryRecords, DeviceCopiesAndMemsetsAreTheOpsDeviceWork) {
  KernelTracer& tracer = KernelTracer::instance();
  tracer.stop();
  fake_cupti::reset();
  ASSERT_TRUE(tracer.start().ok);
  EXPECT_TRUE(fake_cupti::kind_enabled(CUPTI_ACTIVITY_KIND_MEMCPY));
  EXPECT_TRUE(fake_cupti::kind_enabled(CUPTI_ACTIVITY_KIND_MEMSET));
  {
    ScopedKernelAttribution clone(7);
    fake_cupti::copy_memory(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, 1 << 20);
  }
  {
    ScopedKernelAttribution zero(8);
    fake_cupti::set_memory(1 << 20);
    fake_cupti::launch_kernel("k");
  }
  {
    ScopedKernelAttribution to_host(9);  // .cpu(): the timeline's, not device work
    fake_cupti::copy_memory(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, 1 << 20);
    fake_cupti::copy_memory(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 1 << 20);
  }
  std::vector<OpRecord> ops(3);
  ops[0].id = 7;
  ops[1].id = 8;
  ops[2].id = 9;
  const StepResult step = tracer.flush_into(ops);
  ASSERT_TRUE(step.status.ok) << step.status.message;
  EXPECT_TRUE(tracer.stop().ok);

  ASSERT_EQ(ops[0].kernels.size(), 1u);
  EXPECT_EQ(ops[0].kernels[0].name.str(), kDeviceCopyName);
  EXPECT_DOUBLE_EQ(ops[0].kernels[0].duration_us, 0.3);
  EXPECT_TRUE(ops[0].kernels[0].launch_us.has_value());
  ASSERT_EQ(ops[1].kernels.size(), 2u);
  EXPECT_EQ(ops[1].kernels[0].name.str(), kDeviceMemsetName);
  EXPECT_DOUBLE_EQ(ops[1].kernels[0].duration_us, 0.2);
  EXPECT_EQ(ops[1].kernels[1].name.str(), "k");
  EXPECT_TRUE(ops[2].kernels.empty());
  EXPECT_EQ(step.kernels.stats.attributed, 3);
}

}  // namespace
}  // namespace habitat::cupti
