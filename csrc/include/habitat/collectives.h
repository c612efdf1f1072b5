// The time of one collective on a cluster: ring, tree and NVLink SHARP algorithms on a
// latency + bandwidth model per fabric tier, reported as nccl-tests reports it
// (algorithm bandwidth = bytes / time; bus bandwidth = algbw x bus_factor).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "habitat/cluster.h"

namespace habitat {

enum class Collective {
  AllReduce,
  AllGather,
  ReduceScatter,
  Broadcast,
  Reduce,
  SendRecv,
  AllToAll
};
const char* to_string(Collective c);
// "all_reduce", "allreduce", c10d's "allreduce_" / "_allgather_base_" /
// "reduce_scatter_tensor_coalesced_"...
std::optional<Collective> collective_from_name(std::string_view name);

enum class CollectiveAlgorithm { Auto, Ring, Tree, Nvls };
const char* to_string(CollectiveAlgorithm a);
std::optional<CollectiveAlgorithm> algorithm_from_name(std::string_view name);

// nccl-tests doc/PERFORMANCE.md: busbw = algbw x this. all_reduce 2(n-1)/n; all_gather,
// reduce_scatter, all_to_all (n-1)/n; broadcast, reduce, send/recv 1.
double bus_factor(Collective c, int ranks);

struct CollectiveEstimate {
  double time_us = 0;  // what the collective takes: the achieved model where the tier has one
  double tuner_time_us =
      0;  // NCCL's own tuner estimate for the same pick (its selection heuristic)
  double tuner_latency_us = 0;  // the part of tuner_time_us that does not grow with the bytes
  double algbw_gbs = 0;         // bytes / time, 1e9 B/s
  double busbw_gbs = 0;         // algbw x bus_factor
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::Ring;
  std::string protocol;    // NCCL's wire protocol the forecast picked: "LL", "LL128" or "Simple"
  std::string bottleneck;  // the tier whose bandwidth bounds it
};

// `bytes` is nccl-tests' "size": the buffer all_reduce reduces, all_gather's whole output,
// reduce_scatter's whole input, the message of broadcast/send. `ranks` consecutive ranks of
// `cluster` take part (1 = no communication, 0 us). Auto picks the fastest algorithm the
// fabric offers, as NCCL's tuner does: every algorithm x protocol (LL, LL128, Simple) is
// costed with NCCL's latency + bytes / bandwidth model and the smallest time wins. NCCL's
// tuner numbers are a selection heuristic, not achieved bandwidth: on one node of a tier with
// an "achieved" calibration the pick is then timed with what that protocol achieves (per-step
// latency and bus bandwidth; NVLS with NCCL's chunk size for the message); across nodes an
// all_reduce is timed with the network tier's calibration for two or more nodes (the tuner's
// latency and bandwidth time, each scaled). Throws ClusterError on a group the cluster cannot
// hold.
CollectiveEstimate estimate_collective(Collective c, double bytes, int ranks,
                                       const Cluster& cluster,
                                       CollectiveAlgorithm algorithm = CollectiveAlgorithm::Auto);

}  // namespace habitat
