#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <variant>
#include <vector>

#include "habitat/kernel_correlation.h"

namespace habitat {
namespace {

constexpr uint32_t kKinetoKind = 3;  // CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0

using Record = std::variant<KernelRecord, ApiRecord, ExternalCorrelationRecord>;

// Builds the records CUPTI would emit for a sequence of launches, the way it does: each
// launch call makes an API record (plus one external record per pushed kind) and the kernel
// it launched makes a kernel record with the same correlation id.
class Fixture {
 public:
  explicit Fixture(uint32_t generation) : generation_(generation) {}

  // A kernel launched inside op `op_id` by thread `thread` on `stream`.
  void launch(uint64_t op_id, const std::string& name, uint64_t start_ns, uint64_t duration_ns,
              uint32_t thread = 7, uint32_t stream = 13) {
    const uint32_t corr = next_corr_++;
    records.emplace_back(ExternalCorrelationRecord{kHabitatExternalKind,
                                                   encode_external_id(generation_, op_id), corr});
    records.emplace_back(ApiRecord{corr, thread, 211, false});
    records.emplace_back(kernel(corr, name, start_ns, duration_ns, stream));
  }

  // A kernel launched outside any op (another thread, user CUDA code).
  void foreign_launch(const std::string& name, uint64_t start_ns, uint64_t duration_ns,
                      uint32_t thread, uint32_t stream) {
    const uint32_t corr = next_corr_++;
    records.emplace_back(ApiRecord{corr, thread, 211, false});
    records.emplace_back(kernel(corr, name, start_ns, duration_ns, stream));
  }

  static KernelRecord kernel(uint32_t corr, const std::string& name, uint64_t start_ns,
                             uint64_t duration_ns, uint32_t stream) {
    KernelRecord k;
    k.correlation_id = corr;
    k.name = name;
    k.grid[0] = static_cast<int>(corr) * 10;
    k.grid[1] = 2;
    k.block[0] = 256;
    k.registers_per_thread = 32;
    k.static_shared_bytes = 1024;
    k.dynamic_shared_bytes = 4096;
    k.start_ns = start_ns;
    k.end_ns = start_ns + duration_ns;
    k.stream = stream;
    return k;
  }

  uint32_t next_corr() const { return next_corr_; }
  std::vector<Record> records;

 private:
  uint32_t generation_;
  uint32_t next_corr_ = 100;
};

void feed(Correlator& c, const Record& r) {
  std::visit([&](const auto& rec) { c.add(rec); }, r);
}

// Three ops; op 2 launches two kernels, op 3 runs on the autograd thread and another stream.
Fixture training_like(uint32_t generation) {
  Fixture f(generation);
  f.launch(1, "gemm_a", 1000, 5000);
  f.launch(2, "elementwise_b", 7000, 2000);
  f.launch(2, "reduce_c", 9500, 1500);
  f.launch(3, "backward_d", 12000, 3000, /*thread=*/8, /*stream=*/14);
  return f;
}

TEST(KernelCorrelation, JoinsKernelsToTheOpThatLaunchedThem) {
  Correlator c;
  for (const Record& r : training_like(c.generation()).records) feed(c, r);
  StepKernels s = c.take_step();

  ASSERT_EQ(s.by_op.size(), 3u);
  ASSERT_EQ(s.by_op[2].size(), 2u);
  EXPECT_EQ(s.by_op[2][0].name, "elementwise_b");
  EXPECT_EQ(s.by_op[2][1].name, "reduce_c");
  const KernelLaunch& k = s.by_op[1][0];
  EXPECT_EQ(k.name, "gemm_a");
  EXPECT_EQ(k.grid[0], 1000);  // correlation id 100 * 10
  EXPECT_EQ(k.grid[1], 2);
  EXPECT_EQ(k.grid[2], 1);
  EXPECT_EQ(k.block[0], 256);
  EXPECT_EQ(k.registers_per_thread, 32);
  EXPECT_EQ(k.static_shared_bytes, 1024);
  EXPECT_EQ(k.dynamic_shared_bytes, 4096);
  EXPECT_DOUBLE_EQ(k.duration_us, 5.0);
  EXPECT_EQ(k.stream, 13u);
  EXPECT_EQ(s.by_op[3][0].stream, 14u);

  EXPECT_EQ(s.stats.kernels, 4);
  EXPECT_EQ(s.stats.attributed, 4);
  EXPECT_EQ(s.stats.unattributed, 0);
  EXPECT_DOUBLE_EQ(s.stats.attributed_us, 11.5);
  EXPECT_TRUE(s.stats.lossless());
}

TEST(KernelCorrelation, AnyBufferSplitAndOrderGivesTheSameResult) {
  Correlator reference;
  for (const Record& r : training_like(reference.generation()).records) feed(reference, r);
  const StepKernels expected = reference.take_step();

  std::mt19937 rng(42);
  for (int trial = 0; trial < 50; ++trial) {
    Correlator c;
    std::vector<Record> records = training_like(c.generation()).records;
    // Per-thread and per-stream buffers complete in any order; within a buffer the order
    // is also not something the join may rely on.
    std::shuffle(records.begin(), records.end(), rng);
    std::size_t i = 0;
    while (i < records.size()) {
      const std::size_t buffer = 1 + rng() % 3;
      for (std::size_t j = 0; j < buffer && i < records.size(); ++j, ++i) feed(c, records[i]);
    }
    const StepKernels got = c.take_step();
    ASSERT_EQ(got.by_op.size(), expected.by_op.size()) << "trial " << trial;
    for (const auto& [op, kernels] : expected.by_op) {
      ASSERT_EQ(got.by_op.at(op).size(), kernels.size());
      for (std::size_t k = 0; k < kernels.size(); ++k) {
        EXPECT_EQ(got.by_op.at(op)[k].name, kernels[k].name) << "trial " << trial;
        EXPECT_DOUBLE_EQ(got.by_op.at(op)[k].duration_us, kernels[k].duration_us);
      }
    }
    EXPECT_EQ(got.stats.attributed, 4);
  }
}

TEST(KernelCorrelation, ExternalRecordArrivingAfterTheKernelStillJoins) {
  Correlator c;
  KernelRecord k = Fixture::kernel(500, "late_join", 100, 900, 13);
  c.add(k);                              // buffer 1: the stream's buffer completes first
  c.add(ApiRecord{500, 7, 211, false});  // buffer 2: the thread's buffer, later
  c.add(
      ExternalCorrelationRecord{kHabitatExternalKind, encode_external_id(c.generation(), 42), 500});
  StepKernels s = c.take_step();
  ASSERT_EQ(s.by_op.count(42), 1u);
  EXPECT_EQ(s.by_op[42][0].name, "late_join");
  EXPECT_DOUBLE_EQ(s.by_op[42][0].duration_us, 0.9);
}

TEST(KernelCorrelation, KernelsFromOtherThreadsAndStreamsAreCountedNotAttached) {
  Correlator c;
  Fixture f(c.generation());
  f.launch(1, "op_kernel", 1000, 1000);
  f.foreign_launch("nccl_allreduce", 1500, 4000, /*thread=*/99, /*stream=*/21);
  f.foreign_launch("user_kernel", 6000, 2000, /*thread=*/98, /*stream=*/13);
  f.foreign_launch("dataloader_copy", 9000, 1000, /*thread=*/99, /*stream=*/22);
  for (const Record& r : f.records) feed(c, r);
  StepKernels s = c.take_step();

  ASSERT_EQ(s.by_op.size(), 1u);
  EXPECT_EQ(s.by_op[1].size(), 1u);
  EXPECT_EQ(s.stats.attributed, 1);
  EXPECT_EQ(s.stats.unattributed, 3);
  EXPECT_DOUBLE_EQ(s.stats.unattributed_us, 7.0);
  EXPECT_EQ(s.stats.unattributed_by_thread.at(99), 2);
  EXPECT_EQ(s.stats.unattributed_by_thread.at(98), 1);
  EXPECT_EQ(s.stats.unattributed_by_stream.at(21), 1);
  EXPECT_EQ(s.stats.unattributed_by_stream.at(13), 1);
  EXPECT_EQ(s.stats.unattributed_by_stream.at(22), 1);
}

TEST(KernelCorrelation, KernelWithoutAnApiRecordHasUnknownThread) {
  Correlator c;
  c.add(Fixture::kernel(7, "graph_replay", 10, 20, 5));
  StepKernels s = c.take_step();
  EXPECT_EQ(s.stats.unattributed, 1);
  EXPECT_EQ(s.stats.unattributed_by_thread.at(0), 1);
}

TEST(KernelCorrelation, OtherToolsExternalKindsAreIgnored) {
  Correlator c;
  // torch.profiler's CUSTOM0 id on a launch outside any habitat op, and on one inside op 5.
  c.add(ExternalCorrelationRecord{kKinetoKind, 777, 1});
  c.add(Fixture::kernel(1, "profiled_only", 10, 20, 5));
  c.add(ExternalCorrelationRecord{kKinetoKind, 778, 2});
  c.add(ExternalCorrelationRecord{kHabitatExternalKind, encode_external_id(c.generation(), 5), 2});
  c.add(Fixture::kernel(2, "both", 40, 20, 5));
  StepKernels s = c.take_step();
  EXPECT_EQ(s.stats.unattributed, 1);
  ASSERT_EQ(s.by_op.size(), 1u);
  EXPECT_EQ(s.by_op[5][0].name, "both");
}

TEST(KernelCorrelation, DroppedRecordsAreReportedOncePerStep) {
  Correlator c;
  c.add_dropped(3);
  c.add_dropped(2);
  StepKernels s = c.take_step();
  EXPECT_EQ(s.stats.dropped, 5);
  EXPECT_FALSE(s.stats.lossless());
  EXPECT_EQ(c.take_step().stats.dropped, 0);
}

TEST(KernelCorrelation, IncompleteKernelsAreCountedNotAttached) {
  Correlator c;
  KernelRecord k = Fixture::kernel(9, "still_running", 100, 0, 5);
  k.end_ns = 0;
  c.add(k);
  c.add(ExternalCorrelationRecord{kHabitatExternalKind, encode_external_id(c.generation(), 1), 9});
  StepKernels s = c.take_step();
  EXPECT_TRUE(s.by_op.empty());
  EXPECT_EQ(s.stats.incomplete, 1);
  EXPECT_EQ(s.stats.kernels, 1);
  EXPECT_FALSE(s.stats.lossless());
}

TEST(KernelCorrelation, RecordsOfAnEarlierStepAreStaleNotMisattributed) {
  Correlator c;
  const uint32_t first = c.generation();
  // Step 1 flushes before its last kernel record arrived.
  c.add(ExternalCorrelationRecord{kHabitatExternalKind, encode_external_id(first, 3), 10});
  c.add(ExternalCorrelationRecord{kHabitatExternalKind, encode_external_id(first, 4), 11});
  c.add(Fixture::kernel(10, "on_time", 10, 10, 5));
  StepKernels step1 = c.take_step();
  EXPECT_EQ(step1.stats.attributed, 1);
  EXPECT_NE(c.generation(), first);

  // Step 2 reuses op ids 3 and 4, and receives step 1's late records.
  Fixture f(c.generation());
  f.launch(3, "step2_op3", 1000, 100);
  for (const Record& r : f.records) feed(c, r);
  c.add(Fixture::kernel(11, "late_kernel", 50, 10, 5));  // its external record came in step 1
  c.add(ExternalCorrelationRecord{kHabitatExternalKind, encode_external_id(first, 4), 12});
  c.add(Fixture::kernel(12, "late_both", 60, 10, 5));  // both records late
  StepKernels step2 = c.take_step();
  EXPECT_EQ(step2.stats.attributed, 1);
  EXPECT_EQ(step2.stats.stale, 2);
  EXPECT_EQ(step2.stats.unattributed, 0);
  ASSERT_EQ(step2.by_op.size(), 1u);
  EXPECT_EQ(step2.by_op[3][0].name, "step2_op3");
}

TEST(KernelCorrelation, StateIsClearedEveryStep) {
  Correlator c;
  for (const Record& r : training_like(c.generation()).records) feed(c, r);
  EXPECT_GT(c.pending_records(), 0u);
  c.take_step();
  EXPECT_EQ(c.pending_records(), 0u);
  StepKernels empty = c.take_step();
  EXPECT_TRUE(empty.by_op.empty());
  EXPECT_EQ(empty.stats.kernels, 0);
}

TEST(KernelCorrelation, MemoryIsBoundedAndOverflowIsCounted) {
  Correlator c(/*max_records=*/5);
  Fixture f(c.generation());
  for (int i = 0; i < 4; ++i) f.launch(1, "k", 100 * (i + 1), 10);  // 12 records
  for (const Record& r : f.records) feed(c, r);
  EXPECT_LE(c.pending_records(), 5u);
  StepKernels s = c.take_step();
  EXPECT_EQ(s.stats.overflow, 7);
  EXPECT_FALSE(s.stats.lossless());
  // The bound applies per step: the next step has room again.
  Fixture g(c.generation());
  g.launch(2, "k", 10, 10);
  for (const Record& r : g.records) feed(c, r);
  EXPECT_EQ(c.take_step().stats.attributed, 1);
}

TEST(KernelCorrelation, ExternalIdsRoundTripAndGenerationsWrapPastZero) {
  const uint64_t id = encode_external_id(12345, 987654321);
  EXPECT_EQ(external_generation(id), 12345u);
  EXPECT_EQ(external_op_id(id), 987654321u);
  EXPECT_EQ(external_generation(encode_external_id(kGenerationMask + 2, 1)), 1u);

  Correlator c;
  uint32_t previous = c.generation();
  for (uint32_t i = 0; i < 3; ++i) {
    c.take_step();
    EXPECT_NE(c.generation(), previous);
    EXPECT_NE(c.generation(), 0u);
    previous = c.generation();
  }
}

TEST(KernelCorrelation, AttachFillsOpsAndCountsKernelsOfUnknownOps) {
  Step step;
  step.ops.resize(3);
  step.ops[0].id = 1;
  step.ops[1].id = 2;
  step.ops[2].id = 3;
  Correlator c;
  Fixture f(c.generation());
  f.launch(1, "a", 10, 10);
  f.launch(3, "b", 30, 10);
  f.launch(3, "c", 50, 10);
  f.launch(9, "d", 70, 10);  // op 9 was dropped at the step's record cap
  for (const Record& r : f.records) feed(c, r);
  EXPECT_EQ(attach_kernels(step.ops, c.take_step()), 1);
  EXPECT_EQ(step.ops[0].kernels.size(), 1u);
  EXPECT_TRUE(step.ops[1].kernels.empty());
  ASSERT_EQ(step.ops[2].kernels.size(), 2u);
  EXPECT_EQ(step.ops[2].kernels[1].name, "c");
}

}  // namespace
}  // namespace habitat
