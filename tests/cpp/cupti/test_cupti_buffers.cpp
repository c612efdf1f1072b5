// The tracer against a fake CUPTI (fake_cupti.h) that applies CUPTI's one-callback-pair
// rule, beside a second client that behaves like torch.profiler's Kineto. Asserts that no
// activity buffer is ever completed into a client that did not request it when the two
// take turns, and what the tracer does with another client's buffer when one does reach it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <vector>

#include "cupti/cupti_tracer.h"
#include "fake_cupti.h"

namespace habitat::cupti {
namespace {

// The other client: Kineto's pattern (register, enable, trace; at stop flush, disable).
// Like Kineto it reports a buffer it did not lend as unknown and leaves it alone.
struct OtherClient {
  static inline std::set<uint8_t*> lent;
  static inline int64_t unknown = 0;
  static inline int64_t kernels = 0;

  static void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, 1 << 16));
    *size = 1 << 16;
    *max_records = 0;
    lent.insert(*buffer);
  }
  static void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    if (lent.erase(buffer) == 0) {
      ++unknown;  // Kineto: "bufferCompleted called with unknown buffer"
      return;
    }
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
      if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ++kernels;
    }
    std::free(buffer);
  }
  static void start() {
    ASSERT_EQ(cuptiActivityRegisterCallbacks(requested, completed), CUPTI_SUCCESS);
    for (auto kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME,
                      CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION}) {
      cuptiActivityEnable(kind);
    }
  }
  static void stop() {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (auto kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME,
                      CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION}) {
      cuptiActivityDisable(kind);
    }
  }
  static void reset() { unknown = kernels = 0; }
};

class CuptiBuffers : public ::testing::Test {
 protected:
  void SetUp() override {
    KernelTracer::instance().stop();
    fake_cupti::reset();
    OtherClient::reset();
    foreign_before_ = KernelTracer::instance().buffers().foreign;
    outstanding_before_ = KernelTracer::instance().buffers().outstanding;
  }
  void TearDown() override { KernelTracer::instance().stop(); }

  // One traced step as KernelTracing runs it: start, ops launch kernels, flush, stop.
  static int64_t traced_step(int ops) {
    KernelTracer& tracer = KernelTracer::instance();
    EXPECT_TRUE(tracer.start().ok);
    for (int i = 0; i < ops; ++i) {
      ScopedKernelAttribution op(static_cast<uint64_t>(100 + i));
      fake_cupti::launch_kernel("k");
    }
    const StepResult step = tracer.flush_step();
    EXPECT_TRUE(step.status.ok) << step.status.message;
    const Status stopped = tracer.stop();
    EXPECT_TRUE(stopped.ok) << stopped.message;
    return step.kernels.stats.attributed;
  }

  int64_t foreign_before_ = 0;
  int64_t outstanding_before_ = 0;
};

TEST_F(CuptiBuffers, StopHandsEveryBufferBackBeforeAnotherClientRegisters) {
  fake_cupti::set_records_per_buffer(5);  // several buffers per step
  EXPECT_EQ(traced_step(12), 12);
  EXPECT_EQ(KernelTracer::instance().buffers().outstanding, outstanding_before_);
  EXPECT_FALSE(fake_cupti::buffer_open());
  fake_cupti::launch_kernel("plain step");  // between steps: no kind on, no buffer asked for
  EXPECT_FALSE(fake_cupti::buffer_open());
}

#if CUPTI_API_VERSION >= 130000
TEST_F(CuptiBuffers, LaunchCallsAloneCanBeRecorded) {
  // HABITAT_CUPTI_API_RECORDS=launches: no record for every API call, only for the launch
  // calls, whose records still give each kernel its op and launch time; stop turns them off.
  setenv("HABITAT_CUPTI_API_RECORDS", "launches", 1);
  KernelTracer& tracer = KernelTracer::instance();
  ASSERT_TRUE(tracer.start().ok);
  EXPECT_FALSE(fake_cupti::kind_enabled(CUPTI_ACTIVITY_KIND_RUNTIME));
  EXPECT_FALSE(fake_cupti::kind_enabled(CUPTI_ACTIVITY_KIND_DRIVER));
  EXPECT_GT(fake_cupti::runtime_apis_enabled(), 0u);
  {
    ScopedKernelAttribution op(7);
    fake_cupti::launch_kernel("k");
  }
  std::vector<OpRecord> ops(1);
  ops[0].id = 7;
  const StepResult step = tracer.flush_into(ops);
  ASSERT_TRUE(step.status.ok) << step.status.message;
  EXPECT_EQ(step.kernels.stats.attributed, 1);
  ASSERT_EQ(ops[0].kernels.size(), 1u);
  EXPECT_TRUE(ops[0].kernels[0].launch_us.has_value());
  EXPECT_TRUE(tracer.stop().ok);
  EXPECT_EQ(fake_cupti::runtime_apis_enabled(), 0u);
  unsetenv("HABITAT_CUPTI_API_RECORDS");
  // Without the setting: every API call's records, as before.
  ASSERT_TRUE(tracer.start().ok);
  EXPECT_TRUE(fake_cupti::kind_enabled(CUPTI_ACTIVITY_KIND_RUNTIME));
  EXPECT_EQ(fake_cupti::runtime_apis_enabled(), 0u);
  EXPECT_TRUE(tracer.stop().ok);
}
#endif

TEST_F(CuptiBuffers, TakingTurnsWithTheProfilerDeliversEveryBufferToItsOwner) {
  // gpu_table.py's pattern: traced steps, profiled steps and plain steps in turns.
  for (int turn = 0; turn < 4; ++turn) {
    EXPECT_EQ(traced_step(3), 3);
    fake_cupti::launch_kernel("plain");
    OtherClient::start();
    fake_cupti::launch_kernel("profiled");
    fake_cupti::launch_kernel("profiled");
    OtherClient::stop();
    fake_cupti::launch_kernel("plain");
  }
  EXPECT_EQ(fake_cupti::misdelivered(), 0);
  EXPECT_EQ(OtherClient::unknown, 0);
  EXPECT_EQ(OtherClient::kernels, 8);  // no record of the profiler's was lost
  EXPECT_EQ(KernelTracer::instance().buffers().foreign, foreign_before_);
  EXPECT_EQ(KernelTracer::instance().buffers().outstanding, outstanding_before_);
}

TEST_F(CuptiBuffers, StartSendsTheOtherClientsOpenBufferToItBeforeRegistering) {
  // A client that stops without a forced flush (or not at all) leaves its buffer open: our
  // start must not receive it, the other client gets it back.
  OtherClient::start();
  fake_cupti::launch_kernel("profiled");
  ASSERT_TRUE(fake_cupti::buffer_open());
  EXPECT_EQ(traced_step(2), 2);
  EXPECT_EQ(fake_cupti::misdelivered(), 0);
  EXPECT_EQ(OtherClient::unknown, 0);
  EXPECT_EQ(OtherClient::kernels, 1);
  EXPECT_EQ(KernelTracer::instance().buffers().foreign, foreign_before_);
}

TEST_F(CuptiBuffers, ATracerLeftStartedBetweenStepsLosesABufferToTheProfiler) {
  // What the H100 run showed ("bufferCompleted called with unknown buffer"): tracing left on
  // after a flushed step, a plain step's launch opens a buffer of ours, the profiler
  // registers and completes it into its own callbacks. stop() after each step prevents it.
  KernelTracer& tracer = KernelTracer::instance();
  ASSERT_TRUE(tracer.start().ok);
  fake_cupti::launch_kernel("traced");
  tracer.flush_step();
  fake_cupti::launch_kernel("plain");  // the kinds are still on: a buffer of ours opens
  OtherClient::start();
  OtherClient::stop();
  EXPECT_EQ(OtherClient::unknown, 1);
  EXPECT_EQ(fake_cupti::misdelivered(), 1);
  EXPECT_EQ(tracer.buffers().outstanding, outstanding_before_ + 1);  // never comes back
  tracer.detach("test");
}

TEST_F(CuptiBuffers, AForeignBufferIsNeitherReadNorFreed) {
  KernelTracer& tracer = KernelTracer::instance();
  ASSERT_TRUE(tracer.start().ok);         // our pair registered
  OtherClient::start();                   // theirs replaces it
  fake_cupti::launch_kernel("profiled");  // into a buffer they lent
  ASSERT_TRUE(fake_cupti::buffer_open());
  uint8_t* theirs = *OtherClient::lent.begin();
  fake_cupti::reregister_previous();            // our pair back with their buffer still open
  const StepResult step = tracer.flush_step();  // completes their buffer into our callback
  EXPECT_EQ(fake_cupti::misdelivered(), 1);
  EXPECT_EQ(tracer.buffers().foreign, foreign_before_ + 1);
  EXPECT_EQ(step.kernels.stats.kernels, 0);        // their records were not read as ours
  EXPECT_EQ(OtherClient::lent.count(theirs), 1u);  // nor freed: still theirs
  OtherClient::lent.erase(theirs);
  std::free(theirs);
}

}  // namespace
}  // namespace habitat::cupti
