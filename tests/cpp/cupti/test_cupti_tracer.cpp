// The CUPTI client against the real CUPTI library. On a machine without a GPU or driver
// start() must fail with a message and every other call must stay harmless; on a GPU it
// must start, flush an empty step and stop.
#include <gtest/gtest.h>

#include "cupti/cupti_tracer.h"

namespace habitat::cupti {
namespace {

TEST(CuptiTracer, IsCompiledInWhenBuiltWithCupti) {
#ifdef HABITAT_WITH_CUPTI
  EXPECT_TRUE(compiled_in());
#else
  EXPECT_FALSE(compiled_in());
  EXPECT_NE(KernelTracer::instance().status().find("not compiled in"), std::string::npos);
#endif
}

TEST(CuptiTracer, StartFlushStopNeverThrowAndExplainFailures) {
  KernelTracer& tracer = KernelTracer::instance();
  const Status started = tracer.start();
  if (!started.ok) {
    EXPECT_FALSE(started.message.empty());
    EXPECT_FALSE(tracer.active());
    EXPECT_EQ(tracer.status(), started.message);
    const StepResult step = tracer.flush_step();
    EXPECT_FALSE(step.status.ok);
    EXPECT_TRUE(step.kernels.by_op.empty());
    ScopedKernelAttribution guard(7);  // tracing off: pushes nothing
    EXPECT_TRUE(tracer.stop().ok);
    return;
  }
  EXPECT_TRUE(tracer.active());
  EXPECT_EQ(tracer.status(), "tracing");
  EXPECT_TRUE(tracer.start().ok);  // idempotent
  {
    ScopedKernelAttribution outer(1);
    ScopedKernelAttribution inner(2);
  }
  const StepResult step = tracer.flush_step();
  EXPECT_TRUE(step.status.ok) << step.status.message;
  EXPECT_EQ(step.kernels.stats.kernels, 0);  // nothing was launched
  EXPECT_TRUE(tracer.stop().ok);
  EXPECT_FALSE(tracer.active());
  EXPECT_TRUE(tracer.start().ok) << "restart after stop";
  tracer.detach("test");
  EXPECT_FALSE(tracer.active());
  EXPECT_NE(tracer.status().find("detached"), std::string::npos);
}

}  // namespace
}  // namespace habitat::cupti
