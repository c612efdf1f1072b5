#include "habitat/collectives.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

namespace habitat {
namespace {

struct Named {
  std::string_view name;
  Collective c;
};

// c10d's op names (allreduce_, _allgather_base_, reduce_scatter_tensor_coalesced_, ...)
// reduce to these once '_' and the words base/tensor/coalesced/into are dropped.
constexpr std::array<Named, 9> kNames{{
    {"allreduce", Collective::AllReduce},
    {"allgather", Collective::AllGather},
    {"reducescatter", Collective::ReduceScatter},
    {"broadcast", Collective::Broadcast},
    {"reduce", Collective::Reduce},
    {"sendrecv", Collective::SendRecv},
    {"send", Collective::SendRecv},
    {"recv", Collective::SendRecv},
    {"alltoall", Collective::AllToAll},
}};

std::string squash(std::string_view name) {
  if (auto colons = name.rfind("::"); colons != std::string_view::npos)
    name = name.substr(colons + 2);
  std::string s;
  for (char ch : name)
    if (ch != '_') s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  for (bool stripped = true; stripped;) {
    stripped = false;
    for (std::string_view word : {"coalesced", "tensor", "base", "into", "anysource"}) {
      if (s.size() > word.size() && s.ends_with(word)) {
        s.erase(s.size() - word.size());
        stripped = true;
      }
    }
  }
  if (s == "alltoallv") s = "alltoall";
  return s;
}

struct Candidate {
  double time_us = std::numeric_limits<double>::infinity();
  double latency_us = 0;  // the part of time_us that does not grow with the bytes
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::Ring;
  std::string protocol = "Simple";
  std::string bottleneck;
  int proto = 2;  // index into kProtoNames
};

// NCCL's cost model, from NVIDIA/nccl src/graph/tuning.cc (commit 5067397, 2026-06-11):
// time = latency + bytes / (1000 x algorithm bandwidth GB/s), per algorithm and protocol.
// LL sends 4 data bytes per 8-byte flag+data word, LL128 120 of every 128 bytes, Simple whole
// buffers behind a memory fence: lower latency for less bandwidth.
enum Proto { LL = 0, LL128 = 1, Simple = 2 };
constexpr std::array<const char*, 3> kProtoNames{"LL", "LL128", "Simple"};
// baseLatencies (us), per call.
constexpr std::array<double, 3> kRingBaseLat{6.6, 14.0, 8.4};
constexpr std::array<double, 3> kTreeBaseLat{6.8, 14.0, 8.4};
// hwLatencies (us) per step for LL and LL128 (Simple comes from the tier's own constant, which
// devices.json cites from the same table): NVLink, PCI, NET.
constexpr std::array<double, 2> kRingHopNvlink{0.6, 1.9}, kRingHopPci{1.0, 2.5},
    kRingHopNet{2.7, 4.0};
constexpr std::array<double, 3> kTreeHopNvlink{0.6, 1.25, 4.0}, kTreeHopPci{1.0, 1.9, 4.0},
    kTreeHopNet{5.0, 8.5, 14.0};
// GPU families NCCL tunes for: Volta, Ampere, Hopper, Blackwell (compCapIndex).
// llMaxBws for one node per family; for several nodes (Intel host row): 2 nodes, >2 nodes.
constexpr std::array<double, 4> kLlMaxBwOneNode{39.0, 87.7, 141.0, 282.0};
constexpr std::array<double, 2> kLlMaxBwNodes{39.0, 20.4};
constexpr std::array<double, 4> kPerChRingLl128{20.0, 20.0, 36.7, 40.0};
// perChMaxTreeBws and perChMaxTreeLL128Bws: [family][1 node, 2 nodes, >2 nodes].
constexpr std::array<std::array<double, 3>, 4> kPerChTree{
    {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}}};
constexpr std::array<std::array<double, 3>, 4> kPerChTreeLl128{
    {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}}};
// treeCorrectionFactor: trees are slower than their model at mid sizes; powers of two from 64 B.
constexpr std::array<std::array<double, 24>, 3> kTreeCorrection{
    {{1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7,  .7,  .7,  .6,  .5,
      .4,  .4,  .5,  .6,  .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
     {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7,  .6,  .6,
      .6,  .6,  .6,  .6,  .8,  .9, .9, .9, .9, 1.0, 1.0, 1.0},
     {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5,
      .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}}};
// search.cc: the per-channel speeds NCCL's ring search tries (GB/s), pre-Hopper and Hopper+.
constexpr std::array<double, 13> kSpeedsAmpere{40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0,
                                               9.0,  7.0,  6.0,  5.0,  4.0,  3.0};
constexpr std::array<double, 11> kSpeedsHopper{60.0, 50.0, 40.0, 30.0, 24.0, 20.0,
                                               15.0, 12.0, 11.0, 6.0,  3.0};

// The family NCCL tunes for, from the intra-node fabric: NVLink 2/3/4/5 come with
// Volta/Ampere/Hopper/Blackwell. Without NVLink the family only sets caps a PCIe ring never
// reaches, so Ampere stands in.
int gpu_family(const Cluster& cl) {
  if (cl.intra.kind == "nvlink" && cl.intra.generation >= 2)
    return std::min(cl.intra.generation - 2, 3);
  return 1;
}

// Channels NCCL's ring search settles on for a ring bus bandwidth of `bw_gbs`: the fastest
// per-channel speed that fits, as many channels as fit at it, then doubled at half the
// speed when the speed is high (ncclTopoDupChannels).
int ring_channels(double bw_gbs, int family) {
  const double* speeds = family >= 2 ? kSpeedsHopper.data() : kSpeedsAmpere.data();
  const std::size_t n = family >= 2 ? kSpeedsHopper.size() : kSpeedsAmpere.size();
  std::size_t i = 0;
  while (i + 1 < n && speeds[i] > bw_gbs) ++i;
  const double speed = speeds[i];
  int channels = std::clamp(static_cast<int>(bw_gbs / speed), 1, 16);
  const bool dup = speed >= 25.0 && !(family >= 2 && speed < 50.0 && channels > 4);
  return dup ? std::min(2 * channels, 32) : channels;
}

// Ring steps a collective takes over n ranks, and how many of them cross nodes (k nodes).
std::pair<int, int> ring_steps(Collective c, int n, int k) {
  switch (c) {
    case Collective::AllReduce:
      return {2 * (n - 1), 2 * (k - 1)};
    case Collective::SendRecv:
      return {1, k > 1 ? 1 : 0};
    default:
      return {n - 1, k - 1};
  }
}

// The bus bandwidth a ring gets, bytes/s, and the tier that bounds it: the GPU's intra-node
// link, or the node's NICs (one ring per NIC, so g NICs carry g rings).
std::pair<double, std::string> ring_bandwidth(const Cluster& cl, int g, int k) {
  double bw = std::numeric_limits<double>::infinity();
  std::string tier;
  if (g > 1) {
    bw = cl.intra.ring_bytes_per_s();
    tier = cl.intra.name;
  }
  if (k > 1 && g * cl.inter.ring_bytes_per_s() < bw) {
    bw = g * cl.inter.ring_bytes_per_s();
    tier = cl.inter.name;
  }
  return {bw, tier};
}

const std::array<double, 2>& ring_hops(const LinkTier& t) {
  return t.kind == "nvlink" ? kRingHopNvlink : t.kind == "pcie" ? kRingHopPci : kRingHopNet;
}
const std::array<double, 3>& tree_hops(const LinkTier& t) {
  return t.kind == "nvlink" ? kTreeHopNvlink : t.kind == "pcie" ? kTreeHopPci : kTreeHopNet;
}

// LL128 needs NVLink inside the node (NCCL enables it only up to NVB paths).
bool ll128_enabled(const Cluster& cl, int g) { return g == 1 || cl.intra.kind == "nvlink"; }

struct Shape {
  int n, k, g, family, channels;
  double bus_gbs;  // the ring's Simple bus bandwidth, GB/s
  std::string tier;
};

Shape shape_of(const Cluster& cl, int n) {
  Shape s{n, cl.nodes_spanned(n), cl.ranks_per_node(n), gpu_family(cl), 1, 0, {}};
  const auto [bw, tier] = ring_bandwidth(cl, s.g, s.k);
  s.bus_gbs = bw / 1e9;
  s.tier = tier;
  s.channels = ring_channels(s.bus_gbs, s.family);
  return s;
}

// ncclTopoTuneModel's ring: bus bandwidth per protocol, latency per ring step on each fabric.
Candidate ring(Collective c, double bytes, const Shape& s, const Cluster& cl, int p) {
  const double ll_max = s.k == 1 ? kLlMaxBwOneNode[s.family] : kLlMaxBwNodes[s.k == 2 ? 0 : 1];
  double bus = s.bus_gbs;
  if (p == LL) bus = std::min(ll_max, bus * 0.5);
  if (p == LL128) bus = std::min(bus * 0.92, s.channels * kPerChRingLl128[s.family]);
  const auto [steps, inter_steps] = ring_steps(c, s.n, s.k);
  const LinkTier& intra_tier = s.g > 1 ? cl.intra : cl.inter;
  double intra_lat = p == Simple ? intra_tier.hop_latency_us : ring_hops(intra_tier)[p];
  // Multi-node rings also pay the network post overhead on every step (1 us on an Intel host,
  // x3 for Simple).
  if (s.k > 1) intra_lat = std::max(intra_lat, p == Simple ? 3.0 : 1.0);
  const double inter_lat = p == Simple ? cl.inter.hop_latency_us : ring_hops(cl.inter)[p];
  double latency = (p == Simple ? intra_tier.base_latency_us : kRingBaseLat[p]) +
                   (steps - inter_steps) * intra_lat + inter_steps * inter_lat;
  // "Plateau effect of ring" for multi-node Simple all_reduce (x1.4 from Ampere on).
  if (p == Simple && s.k > 1 && c == Collective::AllReduce && bytes / (s.channels * s.n) >= 64)
    latency *= s.family >= 1 ? 1.4 : 1.9;
  const double busbw = bus * 1e9;
  return {latency + bytes * bus_factor(c, s.n) / busbw * 1e6,
          latency,
          CollectiveAlgorithm::Ring,
          kProtoNames[p],
          s.tier,
          p};
}

// NCCL's tree all_reduce: a chain inside each node, a binary tree across nodes; every byte
// goes up and down it (algbw = busbw / 2), latency 2 x (chain + log2 nodes) steps, and the
// tuner's per-size correction for mid-size trees.
Candidate tree(double bytes, const Shape& s, const Cluster& cl, int p) {
  const int col = s.k <= 2 ? s.k - 1 : 2;
  const double ll_max = s.k == 1 ? kLlMaxBwOneNode[s.family] : kLlMaxBwNodes[s.k == 2 ? 0 : 1];
  double bus = std::min(s.bus_gbs * 0.92, s.channels * kPerChTree[s.family][col]);
  if (p == LL) bus = std::min(bus / 3.8, ll_max);
  if (p == LL128)
    bus = std::min(bus * (s.k == 1 ? 7.0 / 9.0 : 120.0 / 128.0),
                   s.channels * kPerChTreeLl128[s.family][col]);
  const int log_size = bytes >= 64 ? static_cast<int>(std::log2(bytes / 64)) : -1;
  if (log_size >= 0 && log_size < 23) bus *= kTreeCorrection[p][log_size];
  const LinkTier& intra_tier = s.g > 1 ? cl.intra : cl.inter;
  const double intra_lat = tree_hops(intra_tier)[p];
  const double inter_lat = tree_hops(cl.inter)[p];
  const double latency = kTreeBaseLat[p] + 2 * ((s.g - 1) * intra_lat + std::log2(s.k) * inter_lat);
  return {latency + bytes / (0.5 * bus * 1e9) * 1e6,
          latency,
          CollectiveAlgorithm::Tree,
          kProtoNames[p],
          s.tier,
          p};
}

// NVLink SHARP: each GPU sends its buffer to the switch and receives the reduced one, so the
// time does not grow with the number of GPUs; single node only (NVLS across nodes needs
// SHARP-capable InfiniBand, not modelled).
Candidate nvls(double bytes, int n, const Cluster& cl) {
  Candidate none;
  if (cl.nodes_spanned(n) > 1 || cl.intra.nvls_algbw_fraction <= 0) return none;
  const double algbw = cl.intra.nvls_algbw_fraction * cl.intra.bandwidth_gbs * 1e9;
  return {cl.intra.nvls_latency_us + bytes / algbw * 1e6,
          cl.intra.nvls_latency_us,
          CollectiveAlgorithm::Nvls,
          "Simple",
          cl.intra.name + " (NVLS)",
          Simple};
}

// All-to-all: every rank sends (n-1)/n of its buffer, (g-1)/n over its intra link and
// (n-g)/n through its NIC, concurrently.
Candidate all_to_all(double bytes, int n, const Cluster& cl) {
  const int k = cl.nodes_spanned(n);
  const int g = cl.ranks_per_node(n);
  double t_intra = g > 1 ? bytes * (g - 1) / n / cl.intra.ring_bytes_per_s() : 0;
  double t_inter = k > 1 ? bytes * (n - g) / n / cl.inter.ring_bytes_per_s() : 0;
  const LinkTier& slow = t_inter > t_intra ? cl.inter : cl.intra;
  const double latency = cl.intra.base_latency_us + slow.hop_latency_us;
  return {latency + std::max(t_intra, t_inter) * 1e6,
          latency,
          CollectiveAlgorithm::Ring,
          "Simple",
          slow.name,
          Simple};
}

// NCCL's NVLS chunk for a message (enqueue.cc): NVLS_CHUNKSIZE (128 KiB) shrinks to 64, 32 and
// 16 KiB below 64, 8 and 2 x (channels x heads x chunk) bytes, so mid-size messages move in
// small chunks, each paying the same synchronisation with the switch.
constexpr double kNvlsMaxChunk = 131072;
double nvls_chunk(double bytes, double concurrent_ops) {
  double chunk = kNvlsMaxChunk;
  if (bytes < 64 * concurrent_ops * chunk && chunk > 65536) chunk = 65536;
  if (bytes < 8 * concurrent_ops * chunk && chunk > 32768) chunk = 32768;
  if (bytes < 2 * concurrent_ops * chunk && chunk > 16384) chunk = 16384;
  return chunk;
}

// An all_reduce across nodes, where the network tier carries a calibration for as many nodes:
// the tuner's latency and bandwidth time of its pick, each corrected by what published
// multi-node curves achieved (devices.json; benchmarks/collectives/README.md, "Across nodes").
// Other collectives across nodes keep the tuner's estimate (no curve of them was fitted).
double achieved_across_nodes(Collective c, const Shape& s, const Cluster& cl,
                             const Candidate& pick) {
  if (c != Collective::AllReduce) return pick.time_us;
  const AchievedNetwork& a = s.k == 2 ? cl.inter.achieved_two_nodes : cl.inter.achieved_more_nodes;
  if (a.latency_scale <= 0 || a.busbw_share <= 0) return pick.time_us;
  return a.latency_scale * pick.latency_us + (pick.time_us - pick.latency_us) / a.busbw_share;
}

// The time NCCL achieves for the tuner's pick, where the tier carries a calibration: across
// nodes, achieved_across_nodes; on one node, below; otherwise the tuner's own estimate stands.
// Ring: NCCL's base latency + 2(n-1) (or n-1) steps x the achieved per-step latency + bus bytes /
// the achieved bus bandwidth of the protocol. NVLS: per-call latency + bytes / algbw(chunk), where
// each (channel, head) pays `overhead` per chunk on top of streaming at the full-chunk rate:
// 1/algbw(c) = 1/algbw(128K) + overhead / (channels x heads) x (1/c - 1/128K).
double achieved_time_us(Collective c, double bytes, const Shape& s, const Cluster& cl,
                        const Candidate& pick) {
  if (s.k > 1) return achieved_across_nodes(c, s, cl, pick);
  if (s.g < 2) return pick.time_us;
  const LinkTier& t = cl.intra;
  if (pick.algorithm == CollectiveAlgorithm::Nvls) {
    if (t.achieved_nvls_chunk_overhead_us <= 0 || t.nvls_channels <= 0) return pick.time_us;
    const double ops = static_cast<double>(t.nvls_channels) * s.g;
    const double full = t.nvls_algbw_fraction * t.bandwidth_gbs * 1e9;
    const double per_byte = 1.0 / full + t.achieved_nvls_chunk_overhead_us * 1e-6 / ops *
                                             (1.0 / nvls_chunk(bytes, ops) - 1.0 / kNvlsMaxChunk);
    return t.achieved_nvls_latency_us + bytes * per_byte * 1e6;
  }
  if (pick.algorithm != CollectiveAlgorithm::Ring || c == Collective::AllToAll) return pick.time_us;
  const AchievedProtocol& a = t.achieved[static_cast<std::size_t>(pick.proto)];
  if (a.busbw_fraction <= 0) return pick.time_us;
  const int steps = ring_steps(c, s.n, 1).first;
  const double base = pick.proto == Simple ? t.base_latency_us : kRingBaseLat[pick.proto];
  const double bus = a.busbw_fraction * t.bandwidth_gbs * 1e9;
  return base + steps * a.step_latency_us + bytes * bus_factor(c, s.n) / bus * 1e6;
}

void check(const Cluster& cl, int ranks, double bytes) {
  if (ranks < 1) throw ClusterError("a collective needs >= 1 rank, got " + std::to_string(ranks));
  if (ranks > cl.world_size()) {
    throw ClusterError("a group of " + std::to_string(ranks) + " ranks does not fit a cluster of " +
                       std::to_string(cl.world_size()) + " GPUs");
  }
  if (!(bytes >= 0) || !std::isfinite(bytes))
    throw ClusterError("collective size must be a finite number of bytes >= 0");
  if (cl.intra.bandwidth_gbs <= 0 || cl.intra.efficiency <= 0)
    throw ClusterError("the cluster's intra-node tier has no bandwidth");
  if (cl.nodes > 1 && (cl.inter.bandwidth_gbs <= 0 || cl.inter.efficiency <= 0))
    throw ClusterError("the cluster's node-to-node tier has no bandwidth");
}

}  // namespace

const char* to_string(Collective c) {
  switch (c) {
    case Collective::AllReduce:
      return "all_reduce";
    case Collective::AllGather:
      return "all_gather";
    case Collective::ReduceScatter:
      return "reduce_scatter";
    case Collective::Broadcast:
      return "broadcast";
    case Collective::Reduce:
      return "reduce";
    case Collective::SendRecv:
      return "send_recv";
    case Collective::AllToAll:
      return "all_to_all";
  }
  return "?";
}

std::optional<Collective> collective_from_name(std::string_view name) {
  const std::string s = squash(name);
  for (const auto& n : kNames)
    if (s == n.name) return n.c;
  return std::nullopt;
}

const char* to_string(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::Auto:
      return "auto";
    case CollectiveAlgorithm::Ring:
      return "ring";
    case CollectiveAlgorithm::Tree:
      return "tree";
    case CollectiveAlgorithm::Nvls:
      return "nvls";
  }
  return "?";
}

std::optional<CollectiveAlgorithm> algorithm_from_name(std::string_view name) {
  for (auto a : {CollectiveAlgorithm::Auto, CollectiveAlgorithm::Ring, CollectiveAlgorithm::Tree,
                 CollectiveAlgorithm::Nvls})
    if (name == to_string(a)) return a;
  return std::nullopt;
}

double bus_factor(Collective c, int ranks) {
  if (ranks <= 1) return 0;
  const double n = ranks;
  switch (c) {
    case Collective::AllReduce:
      return 2 * (n - 1) / n;
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll:
      return (n - 1) / n;
    case Collective::Broadcast:
    case Collective::Reduce:
    case Collective::SendRecv:
      return 1;
  }
  return 1;
}

CollectiveEstimate estimate_collective(Collective c, double bytes, int ranks,
                                       const Cluster& cluster, CollectiveAlgorithm algorithm) {
  check(cluster, ranks, bytes);
  CollectiveEstimate out;
  out.algorithm = algorithm == CollectiveAlgorithm::Auto ? CollectiveAlgorithm::Ring : algorithm;
  if (ranks == 1 || bytes == 0) return out;

  std::vector<Candidate> candidates;
  const Shape shape = shape_of(cluster, ranks);
  const bool reduces = c == Collective::AllReduce;
  auto wanted = [&](CollectiveAlgorithm a) {
    return algorithm == CollectiveAlgorithm::Auto || algorithm == a;
  };
  if (c == Collective::AllToAll) {
    candidates.push_back(all_to_all(bytes, ranks, cluster));
  } else {
    // NCCL's point-to-point path (send/recv) is not tuned per protocol; collectives are.
    for (int p : {LL, LL128, Simple}) {
      if (c == Collective::SendRecv && p != Simple) continue;
      if (p == LL128 && !ll128_enabled(cluster, shape.g)) continue;
      if (wanted(CollectiveAlgorithm::Ring))
        candidates.push_back(ring(c, bytes, shape, cluster, p));
      if (reduces && wanted(CollectiveAlgorithm::Tree))
        candidates.push_back(tree(bytes, shape, cluster, p));
    }
    if (reduces && wanted(CollectiveAlgorithm::Nvls)) {
      Candidate n = nvls(bytes, ranks, cluster);
      if (std::isfinite(n.time_us)) candidates.push_back(n);
    }
  }
  if (candidates.empty()) {
    throw ClusterError(std::string("algorithm ") + to_string(algorithm) + " does not run " +
                       to_string(c) + " on this cluster");
  }
  const Candidate& best = *std::min_element(
      candidates.begin(), candidates.end(),
      [](const Candidate& a, const Candidate& b) { return a.time_us < b.time_us; });
  out.tuner_time_us = best.time_us;
  out.tuner_latency_us = best.latency_us;
  out.time_us = achieved_time_us(c, bytes, shape, cluster, best);
  out.algorithm = best.algorithm;
  out.protocol = best.protocol;
  out.bottleneck = best.bottleneck;
  out.algbw_gbs = bytes / (out.time_us * 1e-6) / 1e9;
  out.busbw_gbs = out.algbw_gbs * bus_factor(c, ranks);
  return out;
}

}  // namespace habitat
