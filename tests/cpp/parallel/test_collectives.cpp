#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "habitat/collectives.h"

namespace habitat {
namespace {

const std::string kDevicesPath = HABITAT_SOURCE_DIR "/python/habitat/data/devices.json";

const InterconnectDatabase& interconnects() {
  static const InterconnectDatabase db = [] {
    std::ifstream in(kDevicesPath);
    std::ostringstream text;
    text << in.rdbuf();
    return InterconnectDatabase::from_json(text.str());
  }();
  return db;
}

constexpr double kMiB = 1024.0 * 1024.0;

TEST(BusFactor, IsNcclTestsCorrectionFactor) {
  EXPECT_DOUBLE_EQ(bus_factor(Collective::AllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::AllGather, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::ReduceScatter, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::AllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::Broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::AllReduce, 1), 0.0);
}

TEST(CollectiveNames, C10dOpsResolve) {
  EXPECT_EQ(collective_from_name("c10d::allreduce_"), Collective::AllReduce);
  EXPECT_EQ(collective_from_name("c10d::allreduce_coalesced_"), Collective::AllReduce);
  EXPECT_EQ(collective_from_name("c10d::_allgather_base_"), Collective::AllGather);
  EXPECT_EQ(collective_from_name("c10d::allgather_into_tensor_coalesced_"), Collective::AllGather);
  EXPECT_EQ(collective_from_name("c10d::_reduce_scatter_base_"), Collective::ReduceScatter);
  EXPECT_EQ(collective_from_name("c10d::reduce_scatter_tensor_coalesced_"),
            Collective::ReduceScatter);
  EXPECT_EQ(collective_from_name("c10d::broadcast_"), Collective::Broadcast);
  EXPECT_EQ(collective_from_name("c10d::send"), Collective::SendRecv);
  EXPECT_EQ(collective_from_name("c10d::recv_any_source_"), Collective::SendRecv);
  EXPECT_EQ(collective_from_name("c10d::alltoall_base_"), Collective::AllToAll);
  EXPECT_EQ(collective_from_name("all_reduce"), Collective::AllReduce);
  EXPECT_FALSE(collective_from_name("c10d::barrier").has_value());
}

TEST(Cluster, UsualServerOfEachSxmGpu) {
  const Cluster a100 = interconnects().make_cluster("A100-SXM4-40GB", 16);
  EXPECT_EQ(a100.gpus_per_node, 8);
  EXPECT_EQ(a100.nodes, 2);
  EXPECT_EQ(a100.intra.name, "nvlink3-nvswitch");
  EXPECT_DOUBLE_EQ(a100.intra.bandwidth_gbs, 300);
  EXPECT_EQ(a100.inter.name, "ib-hdr200");
  const Cluster h100 = interconnects().make_cluster("H100-SXM5-80GB", 4);
  EXPECT_EQ(h100.gpus_per_node, 4);
  EXPECT_EQ(h100.nodes, 1);
  EXPECT_EQ(h100.intra.name, "nvlink4-nvswitch");
  EXPECT_FALSE(h100.intra.sources.at("bandwidth_gbs").empty());
}

TEST(Cluster, KindsResolveAgainstTheServer) {
  EXPECT_EQ(interconnects().make_cluster("H100-SXM5-80GB", 8, 8, "nvlink").intra.name,
            "nvlink4-nvswitch");
  EXPECT_EQ(interconnects().make_cluster("H100-SXM5-80GB", 8, 8, "pcie").intra.name, "pcie4");
  EXPECT_EQ(
      interconnects().make_cluster("A100-SXM4-80GB", 16, 8, std::nullopt, "infiniband").inter.name,
      "ib-hdr200");
  EXPECT_EQ(interconnects().make_cluster("L4", 4).intra.name, "pcie4");
}

TEST(Cluster, BadInputSaysWhatToDo) {
  try {
    interconnects().make_cluster("A100-SXM4-80GB", 12, 8);
    FAIL();
  } catch (const ClusterError& e) {
    EXPECT_NE(std::string(e.what()).find("gpus_per_node"), std::string::npos) << e.what();
  }
  try {
    interconnects().make_cluster("L4", 4, std::nullopt, "nvlink");
    FAIL();
  } catch (const ClusterError& e) {
    EXPECT_NE(std::string(e.what()).find("no NVLink"), std::string::npos) << e.what();
  }
  try {
    interconnects().make_cluster("H100-SXM5-80GB", 8, 8, "warp-drive");
    FAIL();
  } catch (const ClusterError& e) {
    EXPECT_NE(std::string(e.what()).find("nvlink4-nvswitch"), std::string::npos) << e.what();
  }
  EXPECT_THROW(interconnects().link("nope"), ClusterError);
}

TEST(Interconnects, RejectsUnknownFieldsAndTiers) {
  EXPECT_THROW(
      InterconnectDatabase::from_json(R"({"interconnects": {"links": {"x": {"kind": "nvlink",
      "bandwidth_gbs": 1, "efficiency": 0.5, "hop_latency_us": 1, "speed": 3}}}})"),
      ClusterError);
  EXPECT_THROW(InterconnectDatabase::from_json(
                   R"({"interconnects": {"devices": {"A100": {"intra": "nope"}}}})"),
               ClusterError);
  EXPECT_THROW(
      InterconnectDatabase::from_json(R"({"interconnects": {"links": {"x": {"kind": "nvlink"}}}})"),
      ClusterError);
  EXPECT_TRUE(InterconnectDatabase::from_json(R"({"devices": []})").link_names().empty());
}

TEST(AllReduce, LargeRingReachesTheTierBusBandwidth) {
  const Cluster c = interconnects().make_cluster("A100-SXM4-80GB", 8);
  const auto e = estimate_collective(Collective::AllReduce, 16.0 * 1024 * kMiB, 8, c);
  EXPECT_EQ(e.algorithm, CollectiveAlgorithm::Ring);
  // Achieved: the calibrated ring/Simple share of the spec (three published 8x A100 nodes reach
  // 228-231.6 GB/s at 1-8 GiB); NCCL's tuner models 240 (20 GB/s per link x 12).
  EXPECT_NEAR(e.busbw_gbs, 300 * 0.762, 1.0);
  EXPECT_NEAR(e.busbw_gbs, e.algbw_gbs * 2 * 7 / 8, 1e-9);
  const double tuner_busbw = 16.0 * 1024 * kMiB * 2 * 7 / 8 / (e.tuner_time_us * 1e-6) / 1e9;
  EXPECT_NEAR(tuner_busbw, 300 * 0.8, 240 * 0.01);
  EXPECT_EQ(e.bottleneck, "nvlink3-nvswitch");
}

TEST(AllReduce, NvlsOnHopperNvswitchBeatsTheRingAtLargeSizes) {
  const Cluster c = interconnects().make_cluster("H100-SXM5-80GB", 8);
  const auto nv = estimate_collective(Collective::AllReduce, 1024 * kMiB, 8, c);
  const auto rg =
      estimate_collective(Collective::AllReduce, 1024 * kMiB, 8, c, CollectiveAlgorithm::Ring);
  EXPECT_EQ(nv.algorithm, CollectiveAlgorithm::Nvls);
  EXPECT_LT(nv.time_us, rg.time_us);
  EXPECT_GT(nv.busbw_gbs, 450);  // above the wire rate, as nccl-tests reports NVLS
  EXPECT_THROW(estimate_collective(Collective::AllReduce, kMiB, 8,
                                   interconnects().make_cluster("A100-SXM4-80GB", 8),
                                   CollectiveAlgorithm::Nvls),
               ClusterError);
}

TEST(AllReduce, SmallMessagesAreLatencyBound) {
  const Cluster c = interconnects().make_cluster("A100-SXM4-80GB", 8);
  const auto tiny = estimate_collective(Collective::AllReduce, 8, 8, c);
  // NCCL's tuner picks ring/LL with its constants (tuning.cc): 6.6 us + 2(n-1) x 0.6 us per
  // NVLink step; what LL achieves per step on 8 A100s is 2.39 us (calibrated).
  EXPECT_EQ(tiny.algorithm, CollectiveAlgorithm::Ring);
  EXPECT_EQ(tiny.protocol, "LL");
  EXPECT_NEAR(tiny.tuner_time_us, 6.6 + 14 * 0.6, 0.01);
  EXPECT_NEAR(tiny.time_us, 6.6 + 14 * 2.39, 0.01);
  // A large ring/Simple: NCCL's 8.4 + 14 x 3.4 us and 240 GB/s for the pick; achieved 10.94 us
  // per step and 0.762 x 300 GB/s.
  const auto big = estimate_collective(Collective::AllReduce, 1024 * kMiB, 8, c);
  EXPECT_EQ(big.protocol, "Simple");
  EXPECT_NEAR(big.tuner_time_us, 8.4 + 14 * 3.4 + 1024 * kMiB * 2 * 7 / 8 / 240e9 * 1e6, 0.01);
  EXPECT_NEAR(big.time_us, 8.4 + 14 * 10.94 + 1024 * kMiB * 2 * 7 / 8 / (0.762 * 300e9) * 1e6,
              0.01);
  double previous = 0;
  for (double mib = 1; mib <= 1024; mib *= 2) {
    const double busbw = estimate_collective(Collective::AllReduce, mib * kMiB, 8, c).busbw_gbs;
    EXPECT_GT(busbw, previous);
    previous = busbw;
  }
}

TEST(AllReduce, ProtocolFollowsNcclsTunerAsTheMessageGrows) {
  // On 8 A100s NCCL's model picks LL for small messages, LL128 for mid-size, Simple for large.
  const Cluster a100 = interconnects().make_cluster("A100-SXM4-80GB", 8);
  EXPECT_EQ(estimate_collective(Collective::AllReduce, 256 * 1024, 8, a100).protocol, "LL");
  EXPECT_EQ(estimate_collective(Collective::AllReduce, 8 * kMiB, 8, a100).protocol, "LL128");
  EXPECT_EQ(estimate_collective(Collective::AllReduce, 256 * kMiB, 8, a100).protocol, "Simple");
  // On 8 H100s: ring/LL up to 1 MiB, then NVLink SHARP (what NCCL_DEBUG=TUNING showed on 8 H200s,
  // stas00/ml-engineering all-reduce-8xH200.md).
  const Cluster h100 = interconnects().make_cluster("H100-SXM5-80GB", 8);
  const auto one = estimate_collective(Collective::AllReduce, kMiB, 8, h100);
  EXPECT_EQ(one.algorithm, CollectiveAlgorithm::Ring);
  EXPECT_EQ(one.protocol, "LL");
  EXPECT_EQ(estimate_collective(Collective::AllReduce, 2 * kMiB, 8, h100).algorithm,
            CollectiveAlgorithm::Nvls);
  // LL128 needs NVLink: a PCIe-only server never picks it.
  const Cluster pcie = interconnects().make_cluster("L4", 8);
  for (double mib : {0.25, 8.0, 256.0})
    EXPECT_NE(estimate_collective(Collective::AllReduce, mib * kMiB, 8, pcie).protocol, "LL128");
}

TEST(AllReduce, CrossingNodesIsBoundByTheNodesNics) {
  const Cluster c = interconnects().make_cluster("A100-SXM4-80GB", 16);
  const auto e =
      estimate_collective(Collective::AllReduce, 4096 * kMiB, 16, c, CollectiveAlgorithm::Ring);
  EXPECT_EQ(e.bottleneck, "ib-hdr200");
  // 8 HDR NICs per node at 24 GB/s each (nccl-tests #119): NCCL's tuner says busbw ~192 GB/s.
  const double tuner_busbw = 4096 * kMiB / (e.tuner_time_us * 1e-6) / 1e9 * 2 * 15 / 16;
  EXPECT_NEAR(tuner_busbw, 8 * 25 * 0.96, 2.0);
  // A group inside one node never touches the NICs.
  EXPECT_EQ(estimate_collective(Collective::AllReduce, 4096 * kMiB, 8, c).bottleneck,
            "nvlink3-nvswitch");
  // Tree beats ring on latency for tiny messages across many nodes.
  const Cluster big = interconnects().make_cluster("A100-SXM4-80GB", 256);
  EXPECT_EQ(estimate_collective(Collective::AllReduce, 1024, 256, big).algorithm,
            CollectiveAlgorithm::Tree);
}

TEST(OtherCollectives, ScaleWithTheirBusFactors) {
  const Cluster c = interconnects().make_cluster("H100-SXM5-80GB", 8);
  const double bytes = 512 * kMiB;
  const auto ag = estimate_collective(Collective::AllGather, bytes, 8, c);
  const auto rs = estimate_collective(Collective::ReduceScatter, bytes, 8, c);
  const auto ar =
      estimate_collective(Collective::AllReduce, bytes, 8, c, CollectiveAlgorithm::Ring);
  EXPECT_DOUBLE_EQ(ag.time_us, rs.time_us);
  EXPECT_LT(ag.time_us, ar.time_us);  // half the traffic of a ring all_reduce
  EXPECT_NEAR(ag.busbw_gbs, ar.busbw_gbs, ar.busbw_gbs * 0.02);
  const auto p2p = estimate_collective(Collective::SendRecv, bytes, 2, c);
  // One step at the achieved ring/Simple share and per-step latency on NVLink 4.
  EXPECT_NEAR(p2p.time_us, 8.4 + 10.94 + bytes / (0.781 * 450e9) * 1e6, 0.01);
  const auto a2a = estimate_collective(Collective::AllToAll, bytes, 8, c);
  EXPECT_GT(a2a.time_us, 0);
  EXPECT_EQ(estimate_collective(Collective::AllReduce, bytes, 1, c).time_us, 0);
  EXPECT_THROW(estimate_collective(Collective::AllReduce, bytes, 9, c), ClusterError);
  EXPECT_THROW(estimate_collective(Collective::AllReduce, -1, 8, c), ClusterError);
}

TEST(Achieved, TimesTheTunersPickWithoutChangingIt) {
  // The same cluster with the calibration removed: NCCL's tuner alone.
  const Cluster calibrated = interconnects().make_cluster("H100-SXM5-80GB", 8);
  Cluster tuner_only = calibrated;
  tuner_only.intra.achieved = {};
  tuner_only.intra.achieved_nvls_chunk_overhead_us = 0;
  for (double mib = 1.0 / 64; mib <= 4096; mib *= 2) {
    const auto a = estimate_collective(Collective::AllReduce, mib * kMiB, 8, calibrated);
    const auto t = estimate_collective(Collective::AllReduce, mib * kMiB, 8, tuner_only);
    EXPECT_EQ(a.algorithm, t.algorithm) << mib << " MiB";
    EXPECT_EQ(a.protocol, t.protocol) << mib << " MiB";
    EXPECT_DOUBLE_EQ(a.tuner_time_us, t.time_us) << mib << " MiB";
    EXPECT_DOUBLE_EQ(t.tuner_time_us, t.time_us);
    // NCCL's tuner is optimistic at every size the calibration covers.
    if (mib >= 1) {
      EXPECT_GT(a.time_us, a.tuner_time_us) << mib << " MiB";
    }
  }
}

TEST(Achieved, NvlsRampsWithNcclsChunkSize) {
  const Cluster c = interconnects().make_cluster("H100-SXM5-80GB", 8);
  auto marginal_algbw = [&](double mib) {  // GB/s between mib and 2 x mib, latency cancels
    const double t1 =
        estimate_collective(Collective::AllReduce, mib * kMiB, 8, c, CollectiveAlgorithm::Nvls)
            .time_us;
    const double t2 =
        estimate_collective(Collective::AllReduce, 2 * mib * kMiB, 8, c, CollectiveAlgorithm::Nvls)
            .time_us;
    return mib * kMiB / ((t2 - t1) * 1e-6) / 1e9;
  };
  // 16 x 8 (channel, head) streams: 16 KiB chunks below 8 MiB, 32 KiB below 64 MiB, 64 KiB below
  // 1 GiB, then 128 KiB (enqueue.cc): each step up moves bytes faster.
  EXPECT_LT(marginal_algbw(2), marginal_algbw(16));
  EXPECT_LT(marginal_algbw(16), marginal_algbw(128));
  EXPECT_LT(marginal_algbw(128), marginal_algbw(1024));
  // With 128 KiB chunks the rate is the NCCL maintainer's ~275 GB/s (0.61 x 450).
  EXPECT_NEAR(marginal_algbw(1024), 0.61 * 450, 0.5);
}

TEST(Achieved, AcrossNodesAnAllReduceScalesTheTunersLatencyAndBandwidthTime) {
  const Cluster c = interconnects().make_cluster("A100-SXM4-80GB", 32);
  const AchievedNetwork two = c.inter.achieved_two_nodes, more = c.inter.achieved_more_nodes;
  ASSERT_GT(two.busbw_share, 0);
  ASSERT_GT(more.busbw_share, 0);
  for (int ranks : {16, 32}) {
    const AchievedNetwork& a = ranks == 16 ? two : more;
    const auto e = estimate_collective(Collective::AllReduce, 256 * kMiB, ranks, c);
    EXPECT_NEAR(e.time_us,
                a.latency_scale * e.tuner_latency_us +
                    (e.tuner_time_us - e.tuner_latency_us) / a.busbw_share,
                1e-6)
        << ranks;
    EXPECT_GT(e.tuner_latency_us, 0);
    EXPECT_LT(e.tuner_latency_us, e.tuner_time_us);
  }
  // Other collectives across nodes keep the tuner's estimate (no curve of them was fitted).
  const auto ag = estimate_collective(Collective::AllGather, 256 * kMiB, 16, c);
  EXPECT_DOUBLE_EQ(ag.time_us, ag.tuner_time_us);
  // Inside a node the per-protocol calibration still times it.
  const auto inside =
      estimate_collective(Collective::AllReduce, 256 * kMiB, 8, c, CollectiveAlgorithm::Ring);
  EXPECT_GT(inside.time_us, inside.tuner_time_us);
}

TEST(Achieved, BadCalibrationSaysWhatIsWrong) {
  auto db = [](const char* achieved) {
    return std::string(R"({"interconnects": {"links": {"x": {"kind": "nvlink", "bandwidth_gbs": 100,
        "efficiency": 0.8, "hop_latency_us": 1, "achieved": )") +
           achieved + "}}}}";
  };
  EXPECT_NO_THROW(InterconnectDatabase::from_json(
      db(R"({"Simple": {"busbw_fraction": 0.7, "step_latency_us": 9}})")));
  EXPECT_NO_THROW(InterconnectDatabase::from_json(
      db(R"({"two_nodes": {"latency_scale": 1.4, "busbw_share": 1.05}})")));
  for (const char* bad :
       {R"({"Simple": {"busbw_fraction": 1.2}})", R"({"LL": {"step_latency_us": 2}})",
        R"({"Simple": {"busbw": 0.7}})", R"({"SIMPLE": {"busbw_fraction": 0.7}})",
        R"({"two_nodes": {"latency_scale": 1.4}})", R"({"more_nodes": {"busbw_share": 0}})",
        R"({"two_nodes": {"share": 1}})"}) {
    try {
      InterconnectDatabase::from_json(db(bad));
      ADD_FAILURE() << "accepted " << bad;
    } catch (const ClusterError& e) {
      EXPECT_NE(std::string(e.what()).find("achieved"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace habitat
