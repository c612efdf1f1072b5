// A cluster of GPUs and the fabric between them: what a collective forecast needs to know.
// The figures live in devices.json's "interconnects" section (every one cited there).
#pragma once

#include <array>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace habitat {

// What NCCL achieves with one wire protocol on a tier, as nccl-tests measures it (devices.json
// "achieved"; fitted on the published curves named there, each scored by a fit without it).
// 0 = not calibrated: NCCL's tuner constant times the collective instead.
struct AchievedProtocol {
  double busbw_fraction = 0;   // share of bandwidth_gbs a single-node ring's bus bandwidth reaches
  double step_latency_us = 0;  // per ring step, on top of NCCL's per-call base latency
};

// What NCCL achieves across nodes for an all_reduce, relative to its own tuner's estimate of
// the pick (devices.json "achieved": "two_nodes" / "more_nodes" of a network tier; fitted on the
// published multi-node curves named there, each scored by a fit without it): time =
// latency_scale x the tuner's latency + the tuner's bandwidth time / busbw_share.
// 0 = not calibrated.
struct AchievedNetwork {
  double latency_scale = 0;
  double busbw_share = 0;
};

// One tier of the fabric as one GPU sees it: its NVLink, its PCIe slot, or its NIC.
struct LinkTier {
  std::string name;  // e.g. "nvlink4-nvswitch", "ib-ndr400"
  std::string kind;  // "nvlink", "pcie" or "network"
  int generation =
      0;  // NVLink / PCIe generation (0: not given); picks NCCL's per-GPU-family tuning
  double bandwidth_gbs = 0;        // unidirectional spec per GPU, 1e9 B/s
  double efficiency = 0;           // share of it a ring's nccl-tests bus bandwidth reaches
  double hop_latency_us = 0;       // per ring step (NCCL's tuner constant for the tier)
  double base_latency_us = 0;      // per call
  bool switched = false;           // every GPU reaches every other at full rate (NVSwitch)
  double nvls_algbw_fraction = 0;  // > 0: NVLink SHARP all_reduce, algbw = this x bandwidth
  double nvls_latency_us = 0;
  // Achieved (see AchievedProtocol): LL, LL128, Simple; NVLS's per-call latency, the overhead
  // of one NVLS chunk on one (channel, head) pair, and NCCL's NVLS channel count.
  std::array<AchievedProtocol, 3> achieved{};
  double achieved_nvls_latency_us = 0;
  double achieved_nvls_chunk_overhead_us = 0;
  int nvls_channels = 0;
  // Network tiers: all_reduce across two nodes, and across more (NCCL's tree algorithms beat a
  // ring's network bound on two nodes only).
  AchievedNetwork achieved_two_nodes;
  AchievedNetwork achieved_more_nodes;
  std::map<std::string, std::string> sources;

  // The bus bandwidth a ring reaches over this tier, bytes/s.
  double ring_bytes_per_s() const { return bandwidth_gbs * efficiency * 1e9; }
};

// GPUs of one kind, `gpus_per_node` to a node joined by `intra`, nodes joined by `inter`
// (one NIC per GPU). Ranks fill nodes in order, as torchrun places them.
struct Cluster {
  std::string gpu;  // canonical device name
  int gpus_per_node = 1;
  int nodes = 1;
  LinkTier intra;
  LinkTier inter;

  int world_size() const { return gpus_per_node * nodes; }
  // How many nodes a group of `ranks` consecutive ranks spans, and ranks per node in it.
  int nodes_spanned(int ranks) const;
  int ranks_per_node(int ranks) const;
};

class ClusterError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The "interconnects" section of a device database document: fabric tiers by name and
// each GPU's usual server (intra tier, inter tier, GPUs per node).
class InterconnectDatabase {
 public:
  // Reads the "interconnects" object of a devices.json document (other keys are ignored);
  // a document without one gives an empty database. Throws ClusterError naming the entry.
  static InterconnectDatabase from_json(std::string_view json_text);
  // Adds or replaces tiers and device layouts from another document (user overrides).
  void merge_json(std::string_view json_text);

  const LinkTier& link(std::string_view name) const;  // ClusterError listing the known ones
  const LinkTier* try_link(std::string_view name) const;
  std::vector<std::string> link_names() const;

  struct ServerLayout {
    std::string intra;
    std::string inter;
    int gpus_per_node = 8;
  };
  const ServerLayout* layout(const std::string& device) const;

  // A cluster of `world_size` GPUs of `device` (canonical name). Unset parts come from the
  // device's usual server: gpus_per_node defaults to min(world_size, the server's), nodes to
  // world_size / gpus_per_node (which must divide it). `intra`/`inter` name tiers, or a kind
  // ("nvlink", "pcie", "infiniband", "ethernet") resolved against the device's server.
  Cluster make_cluster(const std::string& device, int world_size,
                       std::optional<int> gpus_per_node = std::nullopt,
                       const std::optional<std::string>& intra = std::nullopt,
                       const std::optional<std::string>& inter = std::nullopt) const;

 private:
  void merge_section(const nlohmann::json& section);

  std::map<std::string, LinkTier> links_;
  std::map<std::string, ServerLayout> layouts_;
  std::string resolve_tier(const std::string& device, const std::string& wanted,
                           const ServerLayout* server, bool intra) const;
};

}  // namespace habitat
