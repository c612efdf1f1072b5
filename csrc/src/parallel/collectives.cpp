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
  if (auto colons = name.rfind("::"); colons != std::string_view::npos) name = name.substr(colons + 2);
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
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::Ring;
  std::string bottleneck;
};

// Ring steps a collective takes over n ranks, and how many of them cross nodes (k nodes).
std::pair<int, int> ring_steps(Collective c, int n, int k) {
  switch (c) {
    case Collective::AllReduce: return {2 * (n - 1), 2 * (k - 1)};
    case Collective::SendRecv: return {1, k > 1 ? 1 : 0};
    default: return {n - 1, k - 1};
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

Candidate ring(Collective c, double bytes, int n, const Cluster& cl) {
  const int k = cl.nodes_spanned(n);
  const int g = cl.ranks_per_node(n);
  const auto [bw, tier] = ring_bandwidth(cl, g, k);
  const auto [steps, inter_steps] = ring_steps(c, n, k);
  const LinkTier& first = k > 1 && g == 1 ? cl.inter : cl.intra;
  const double latency = first.base_latency_us + (steps - inter_steps) * cl.intra.hop_latency_us +
                         inter_steps * cl.inter.hop_latency_us;
  return {latency + bytes * bus_factor(c, n) / bw * 1e6, CollectiveAlgorithm::Ring, tier};
}

// NCCL's tree all_reduce: a chain inside each node, a binary tree across nodes; every byte
// goes up and down it, so algbw = busbw / 2 (tuning.cc's ratio 0.5) at 0.92 of the ring's bus
// bandwidth (its Simple-protocol refinement), for latency 2 x (intra chain + log2 nodes).
Candidate tree(double bytes, int n, const Cluster& cl) {
  const int k = cl.nodes_spanned(n);
  const int g = cl.ranks_per_node(n);
  const auto [bw, tier] = ring_bandwidth(cl, g, k);
  const double latency = cl.intra.base_latency_us +
                         2 * ((g - 1) * cl.intra.hop_latency_us + std::log2(k) * cl.inter.hop_latency_us);
  return {latency + bytes / (0.5 * 0.92 * bw) * 1e6, CollectiveAlgorithm::Tree, tier};
}

// NVLink SHARP: each GPU sends its buffer to the switch and receives the reduced one, so the
// time does not grow with the number of GPUs; single node only (NVLS across nodes needs
// SHARP-capable InfiniBand, not modelled).
Candidate nvls(double bytes, int n, const Cluster& cl) {
  Candidate none;
  if (cl.nodes_spanned(n) > 1 || cl.intra.nvls_algbw_fraction <= 0) return none;
  const double algbw = cl.intra.nvls_algbw_fraction * cl.intra.bandwidth_gbs * 1e9;
  return {cl.intra.nvls_latency_us + bytes / algbw * 1e6, CollectiveAlgorithm::Nvls,
          cl.intra.name + " (NVLS)"};
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
  return {latency + std::max(t_intra, t_inter) * 1e6, CollectiveAlgorithm::Ring, slow.name};
}

void check(const Cluster& cl, int ranks, double bytes) {
  if (ranks < 1) throw ClusterError("a collective needs >= 1 rank, got " + std::to_string(ranks));
  if (ranks > cl.world_size()) {
    throw ClusterError("a group of " + std::to_string(ranks) + " ranks does not fit a cluster of " +
                       std::to_string(cl.world_size()) + " GPUs");
  }
  if (!(bytes >= 0) || !std::isfinite(bytes)) throw ClusterError("collective size must be a finite number of bytes >= 0");
  if (cl.intra.bandwidth_gbs <= 0 || cl.intra.efficiency <= 0)
    throw ClusterError("the cluster's intra-node tier has no bandwidth");
  if (cl.nodes > 1 && (cl.inter.bandwidth_gbs <= 0 || cl.inter.efficiency <= 0))
    throw ClusterError("the cluster's node-to-node tier has no bandwidth");
}

}  // namespace

const char* to_string(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::AllGather: return "all_gather";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::Broadcast: return "broadcast";
    case Collective::Reduce: return "reduce";
    case Collective::SendRecv: return "send_recv";
    case Collective::AllToAll: return "all_to_all";
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
    case CollectiveAlgorithm::Auto: return "auto";
    case CollectiveAlgorithm::Ring: return "ring";
    case CollectiveAlgorithm::Tree: return "tree";
    case CollectiveAlgorithm::Nvls: return "nvls";
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
    case Collective::AllReduce: return 2 * (n - 1) / n;
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll: return (n - 1) / n;
    case Collective::Broadcast:
    case Collective::Reduce:
    case Collective::SendRecv: return 1;
  }
  return 1;
}

CollectiveEstimate estimate_collective(Collective c, double bytes, int ranks, const Cluster& cluster,
                                       CollectiveAlgorithm algorithm) {
  check(cluster, ranks, bytes);
  CollectiveEstimate out;
  out.algorithm = algorithm == CollectiveAlgorithm::Auto ? CollectiveAlgorithm::Ring : algorithm;
  if (ranks == 1 || bytes == 0) return out;

  std::vector<Candidate> candidates;
  const bool reduces = c == Collective::AllReduce;
  auto wanted = [&](CollectiveAlgorithm a) {
    return algorithm == CollectiveAlgorithm::Auto || algorithm == a;
  };
  if (c == Collective::AllToAll) {
    candidates.push_back(all_to_all(bytes, ranks, cluster));
  } else {
    if (wanted(CollectiveAlgorithm::Ring)) candidates.push_back(ring(c, bytes, ranks, cluster));
    if (reduces && wanted(CollectiveAlgorithm::Tree)) candidates.push_back(tree(bytes, ranks, cluster));
    if (reduces && wanted(CollectiveAlgorithm::Nvls)) {
      Candidate n = nvls(bytes, ranks, cluster);
      if (std::isfinite(n.time_us)) candidates.push_back(n);
    }
  }
  if (candidates.empty()) {
    throw ClusterError(std::string("algorithm ") + to_string(algorithm) + " does not run " +
                       to_string(c) + " on this cluster");
  }
  const Candidate& best = *std::min_element(candidates.begin(), candidates.end(),
      [](const Candidate& a, const Candidate& b) { return a.time_us < b.time_us; });
  out.time_us = best.time_us;
  out.algorithm = best.algorithm;
  out.bottleneck = best.bottleneck;
  out.algbw_gbs = bytes / (best.time_us * 1e-6) / 1e9;
  out.busbw_gbs = out.algbw_gbs * bus_factor(c, ranks);
  return out;
}

}  // namespace habitat
