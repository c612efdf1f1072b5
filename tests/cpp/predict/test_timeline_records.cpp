// CUPTI's timeline records (launch times, kernel starts, syncs, stream waits) joined by the
// Correlator from synthetic records, as CUPTI would deliver them: no GPU needed.
#include <gtest/gtest.h>

#include <vector>

#include "habitat/kernel_correlation.h"
#include "habitat/trace.h"

namespace habitat {
namespace {

KernelRecord kernel(uint32_t correlation, uint64_t start_ns, uint64_t end_ns, uint32_t stream) {
  KernelRecord k;
  k.correlation_id = correlation;
  k.name = "k" + std::to_string(correlation);
  k.start_ns = start_ns;
  k.end_ns = end_ns;
  k.stream = stream;
  return k;
}

TEST(TimelineRecords, KernelsCarryTheirLaunchAndStartTimes) {
  Correlator c;
  const uint32_t gen = c.generation();
  c.add(ExternalCorrelationRecord{kHabitatExternalKind, encode_external_id(gen, 3), 10});
  c.add(ApiRecord{10, 1, 211, false, 1'000'000, 1'002'500});  // the launch call, 1000-1002.5 us
  c.add(kernel(10, 1'004'000, 1'010'000, 7));
  StepKernels step = c.take_step();
  ASSERT_EQ(step.by_op.at(3).size(), 1u);
  const KernelLaunch& k = step.by_op.at(3).front();
  EXPECT_DOUBLE_EQ(*k.launch_us, 1000.0);
  EXPECT_DOUBLE_EQ(*k.launch_wall_us, 2.5);  // enter to exit of the launch call
  EXPECT_DOUBLE_EQ(*k.device_start_us, 1004.0);
  EXPECT_DOUBLE_EQ(k.duration_us, 6.0);

  // On the step's clock: the step started at CUPTI time 900 us.
  std::vector<OpRecord> ops(1);
  ops[0].id = 3;
  attach_kernels(ops, std::move(step));
  std::vector<SyncRecord> none;
  shift_to_step(ops, none, 900.0);
  EXPECT_DOUBLE_EQ(*ops[0].kernels[0].launch_us, 100.0);
  EXPECT_DOUBLE_EQ(*ops[0].kernels[0].device_start_us, 104.0);
  EXPECT_DOUBLE_EQ(*ops[0].kernels[0].launch_wall_us, 2.5);  // a duration: not shifted
}

TEST(TimelineRecords, ALaunchCallWithoutAnEndHasNoDuration) {
  Correlator c;
  c.add(ExternalCorrelationRecord{kHabitatExternalKind, encode_external_id(c.generation(), 1), 4});
  c.add(ApiRecord{4, 1, 211, false, 2'000'000});  // CUPTI gave no end time
  c.add(kernel(4, 2'003'000, 2'004'000, 7));
  const StepKernels step = c.take_step();
  const KernelLaunch& k = step.by_op.at(1).front();
  EXPECT_DOUBLE_EQ(*k.launch_us, 2000.0);
  EXPECT_FALSE(k.launch_wall_us.has_value());
}

TEST(TimelineRecords, SyncsAndStreamWaitsAreJoinedToTheirStreams) {
  Correlator c;
  c.add(EventActivityRecord{77, 13});                         // an event recorded on stream 13
  c.add(SyncActivityRecord{3, 5'000'000, 5'250'000, 7, 0});   // cudaStreamSynchronize(7)
  c.add(SyncActivityRecord{2, 4'000'000, 4'001'000, 7, 77});  // stream 7 waits on the event
  c.add(SyncActivityRecord{1, 6'000'000, 6'100'000, 0, 77});  // cudaEventSynchronize
  c.add(SyncActivityRecord{4, 7'000'000, 7'000'500, 0, 0});   // cudaDeviceSynchronize
  c.add(SyncActivityRecord{2, 8'000'000, 8'000'100, 7, 99});  // a wait on an unknown event
  StepKernels step = c.take_step();
  ASSERT_EQ(step.syncs.size(), 4u);  // in host order; the unknown event's wait is dropped
  EXPECT_EQ(step.syncs[0].kind, SyncRecord::Kind::StreamWait);
  EXPECT_EQ(step.syncs[0].stream, 7u);
  EXPECT_EQ(step.syncs[0].wait_stream, 13u);
  EXPECT_EQ(step.syncs[1].kind, SyncRecord::Kind::Stream);
  EXPECT_DOUBLE_EQ(step.syncs[1].start_us, 5000.0);
  EXPECT_DOUBLE_EQ(step.syncs[1].wall_us, 250.0);
  EXPECT_EQ(step.syncs[2].kind, SyncRecord::Kind::Event);
  EXPECT_EQ(step.syncs[2].stream, 13u);
  EXPECT_EQ(step.syncs[3].kind, SyncRecord::Kind::Device);
  std::vector<OpRecord> ops;
  shift_to_step(ops, step.syncs, 4500.0);
  EXPECT_DOUBLE_EQ(step.syncs[0].start_us, 0.0);  // before the step: clamped
  EXPECT_DOUBLE_EQ(step.syncs[1].start_us, 500.0);
  // The next step starts empty.
  EXPECT_TRUE(c.take_step().syncs.empty());
}

}  // namespace
}  // namespace habitat
