#include "habitat/cluster.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <sstream>

#include "trace/json_reader.h"

namespace habitat {
namespace {

using json = nlohmann::json;
using json_reader::Loc;

bool is_comment(const std::string& key) { return !key.empty() && key.front() == '_'; }

[[noreturn]] void bad(const Loc& at, const std::string& what) {
  const std::string where = at.str();
  throw ClusterError("interconnects" + (where.empty() ? "" : "." + where) + ": " + what);
}

double read_number(const json& v, const Loc& at, bool positive) {
  if (!v.is_number()) bad(at, "must be a number, got " + v.dump());
  const double x = v.get<double>();
  if (positive ? !(x > 0) : !(x >= 0)) bad(at, positive ? "must be > 0" : "must be >= 0");
  return x;
}

// A network tier's all_reduce across nodes: {latency_scale, busbw_share}, both > 0.
void apply_achieved_network(AchievedNetwork& n, const json& obj, const Loc& at) {
  if (!obj.is_object()) bad(at, "must be an object {latency_scale, busbw_share}");
  for (const auto& [field, x] : obj.items()) {
    if (field == "latency_scale") {
      n.latency_scale = read_number(x, at.child(field), true);
    } else if (field == "busbw_share") {
      n.busbw_share = read_number(x, at.child(field), true);
    } else if (!is_comment(field)) {
      bad(at.child(field), "unknown field (known: latency_scale, busbw_share)");
    }
  }
  if (!(n.latency_scale > 0) || !(n.busbw_share > 0))
    bad(at, "needs \"latency_scale\" and \"busbw_share\"");
}

// The "achieved" block of a tier: per protocol {busbw_fraction, step_latency_us}, NVLS's
// latency_us, chunk_overhead_us and channels, and a network tier's all_reduce across two_nodes
// and more_nodes; descriptive keys (calibrated_on, notes, _...) are skipped.
void apply_achieved(LinkTier& t, const json& obj, const Loc& at) {
  if (!obj.is_object()) bad(at, "must be an object");
  static constexpr std::array<const char*, 3> kProtocols{"LL", "LL128", "Simple"};
  for (const auto& [key, v] : obj.items()) {
    const Loc k = at.child(key);
    const auto proto = std::find(kProtocols.begin(), kProtocols.end(), key);
    if (is_comment(key) || key == "notes" || key == "calibrated_on" || key == "sources") {
      continue;
    } else if (proto != kProtocols.end()) {
      if (!v.is_object()) bad(k, "must be an object {busbw_fraction, step_latency_us}");
      AchievedProtocol& p = t.achieved[static_cast<std::size_t>(proto - kProtocols.begin())];
      for (const auto& [field, x] : v.items()) {
        if (field == "busbw_fraction") {
          p.busbw_fraction = read_number(x, k.child(field), true);
          if (p.busbw_fraction > 1.0) bad(k.child(field), "must be <= 1 (a share of the spec)");
        } else if (field == "step_latency_us") {
          p.step_latency_us = read_number(x, k.child(field), false);
        } else if (!is_comment(field)) {
          bad(k.child(field), "unknown field (known: busbw_fraction, step_latency_us)");
        }
      }
      if (!(p.busbw_fraction > 0)) bad(k, "needs \"busbw_fraction\"");
    } else if (key == "two_nodes" || key == "more_nodes") {
      apply_achieved_network(key == "two_nodes" ? t.achieved_two_nodes : t.achieved_more_nodes, v,
                             k);
    } else if (key == "nvls_latency_us") {
      t.achieved_nvls_latency_us = read_number(v, k, false);
    } else if (key == "nvls_chunk_overhead_us") {
      t.achieved_nvls_chunk_overhead_us = read_number(v, k, false);
    } else if (key == "nvls_channels") {
      t.nvls_channels = static_cast<int>(read_number(v, k, true));
    } else {
      bad(k,
          "unknown field (known: LL, LL128, Simple, nvls_latency_us, nvls_chunk_overhead_us, "
          "nvls_channels, two_nodes, more_nodes, calibrated_on, notes)");
    }
  }
}

void apply_link(LinkTier& t, const json& obj, const Loc& at, bool is_new) {
  if (!obj.is_object()) bad(at, "must be an object");
  for (const auto& [key, v] : obj.items()) {
    const Loc k = at.child(key);
    if (is_comment(key) || key == "notes" || key == "links" || key == "link_gbs") {
      continue;  // descriptive: the model reads bandwidth_gbs
    } else if (key == "generation") {
      t.generation = static_cast<int>(read_number(v, k, false));
    } else if (key == "kind") {
      if (!v.is_string()) bad(k, "must be a string");
      t.kind = v.get<std::string>();
      if (t.kind != "nvlink" && t.kind != "pcie" && t.kind != "network")
        bad(k, "must be \"nvlink\", \"pcie\" or \"network\", got \"" + t.kind + "\"");
    } else if (key == "bandwidth_gbs") {
      t.bandwidth_gbs = read_number(v, k, true);
    } else if (key == "efficiency") {
      t.efficiency = read_number(v, k, true);
      if (t.efficiency > 1.0) bad(k, "must be <= 1 (a share of the spec)");
    } else if (key == "hop_latency_us") {
      t.hop_latency_us = read_number(v, k, false);
    } else if (key == "base_latency_us") {
      t.base_latency_us = read_number(v, k, false);
    } else if (key == "switch") {
      if (!v.is_boolean()) bad(k, "must be true or false");
      t.switched = v.get<bool>();
    } else if (key == "nvls_algbw_fraction") {
      t.nvls_algbw_fraction = read_number(v, k, false);
    } else if (key == "nvls_latency_us") {
      t.nvls_latency_us = read_number(v, k, false);
    } else if (key == "achieved") {
      apply_achieved(t, v, k);
    } else if (key == "sources") {
      if (!v.is_object()) bad(k, "must be an object of field -> source tags");
      for (const auto& [f, s] : v.items())
        if (s.is_string()) t.sources[f] = s.get<std::string>();
    } else {
      bad(k,
          "unknown field (known: kind, bandwidth_gbs, efficiency, hop_latency_us, "
          "base_latency_us, switch, nvls_algbw_fraction, nvls_latency_us, achieved, sources, "
          "notes)");
    }
  }
  if (is_new) {
    for (const char* required : {"kind", "bandwidth_gbs", "efficiency", "hop_latency_us"})
      if (!obj.contains(required)) bad(at, std::string("a new tier needs \"") + required + "\"");
  }
}

std::string known_list(const std::vector<std::string>& names) {
  std::ostringstream out;
  for (std::size_t i = 0; i < names.size(); ++i) out << (i ? ", " : "") << names[i];
  return out.str();
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

int Cluster::nodes_spanned(int ranks) const {
  return std::max(1, (ranks + gpus_per_node - 1) / gpus_per_node);
}

int Cluster::ranks_per_node(int ranks) const { return std::min(ranks, gpus_per_node); }

InterconnectDatabase InterconnectDatabase::from_json(std::string_view json_text) {
  InterconnectDatabase db;
  db.merge_json(json_text);
  return db;
}

void InterconnectDatabase::merge_json(std::string_view json_text) {
  json doc;
  try {
    doc = json_reader::parse(json_text);
  } catch (const json_reader::DecodeError& e) {
    throw ClusterError("device database: " + e.message);
  }
  if (!doc.is_object() || !doc.contains("interconnects")) return;
  try {
    merge_section(doc.at("interconnects"));
  } catch (const json_reader::DecodeError& e) {
    throw ClusterError("interconnects: " + e.message);
  }
}

void InterconnectDatabase::merge_section(const nlohmann::json& section) {
  const Loc root;
  if (!section.is_object()) bad(root, "must be an object");
  for (const auto& [key, v] : section.items()) {
    if (is_comment(key) || key == "source_tags") continue;
    if (key == "links") {
      if (!v.is_object()) bad(root.child(key), "must be an object of tiers by name");
      for (const auto& [name, entry] : v.items()) {
        if (is_comment(name)) continue;
        const bool is_new = links_.find(name) == links_.end();
        LinkTier& t = links_[name];
        t.name = name;
        apply_link(t, entry, root.child("links").child(name), is_new);
      }
    } else if (key == "devices") {
      if (!v.is_object()) bad(root.child(key), "must be an object of server layouts by GPU");
      for (const auto& [name, entry] : v.items()) {
        if (is_comment(name)) continue;
        const Loc at = root.child("devices").child(name);
        if (!entry.is_object()) bad(at, "must be an object");
        ServerLayout& s = layouts_[name];
        if (entry.contains("intra"))
          s.intra = json_reader::read_string(entry.at("intra"), at.child("intra"));
        if (entry.contains("inter"))
          s.inter = json_reader::read_string(entry.at("inter"), at.child("inter"));
        if (entry.contains("gpus_per_node"))
          s.gpus_per_node =
              json_reader::read_int32(entry.at("gpus_per_node"), at.child("gpus_per_node"), 1);
      }
    } else {
      bad(root.child(key), "unknown field (known: links, devices, source_tags)");
    }
  }
  for (const auto& [device, s] : layouts_) {
    for (const std::string* tier : {&s.intra, &s.inter}) {
      if (!tier->empty() && links_.find(*tier) == links_.end())
        bad(root.child("devices").child(device), "names the unknown tier \"" + *tier + "\"");
    }
  }
}

const LinkTier* InterconnectDatabase::try_link(std::string_view name) const {
  auto it = links_.find(std::string(name));
  return it == links_.end() ? nullptr : &it->second;
}

const LinkTier& InterconnectDatabase::link(std::string_view name) const {
  if (const LinkTier* t = try_link(name)) return *t;
  throw ClusterError("unknown interconnect \"" + std::string(name) +
                     "\"; known: " + known_list(link_names()));
}

std::vector<std::string> InterconnectDatabase::link_names() const {
  std::vector<std::string> out;
  for (const auto& [name, t] : links_) out.push_back(name);
  return out;
}

const InterconnectDatabase::ServerLayout* InterconnectDatabase::layout(
    const std::string& device) const {
  auto it = layouts_.find(device);
  return it == layouts_.end() ? nullptr : &it->second;
}

// A tier's name, or a kind resolved against the device's server ("nvlink" on an H100 is its
// NVLink 4 NVSwitch fabric; "infiniband" is its NIC when that is InfiniBand).
std::string InterconnectDatabase::resolve_tier(const std::string& device, const std::string& wanted,
                                               const ServerLayout* server, bool intra) const {
  if (links_.count(wanted)) return wanted;
  const std::string w = lower(wanted);
  const std::string usual = server ? (intra ? server->intra : server->inter) : "";
  auto kind_of = [&](const std::string& tier) { return tier.empty() ? "" : links_.at(tier).kind; };
  if (w == "nvlink" || w == "nvswitch") {
    if (kind_of(usual) == "nvlink") return usual;
    throw ClusterError(
        device + " has no NVLink fabric in the database; pick one of: " + known_list(link_names()));
  }
  if (w == "pcie") {
    if (kind_of(usual) == "pcie") return usual;
    return "pcie4";
  }
  if (w == "infiniband" || w == "ib") {
    if (usual.rfind("ib-", 0) == 0) return usual;
    return "ib-ndr400";
  }
  if (w == "ethernet" || w == "roce") return "ethernet-100g";
  throw ClusterError(
      "unknown interconnect \"" + wanted +
      "\"; use nvlink, pcie, infiniband, ethernet or one of: " + known_list(link_names()));
}

Cluster InterconnectDatabase::make_cluster(const std::string& device, int world_size,
                                           std::optional<int> gpus_per_node,
                                           const std::optional<std::string>& intra,
                                           const std::optional<std::string>& inter) const {
  if (world_size < 1)
    throw ClusterError("world_size must be >= 1, got " + std::to_string(world_size));
  const ServerLayout* server = layout(device);
  if (!server && (!intra || !inter)) {
    throw ClusterError("no usual server is known for " + device +
                       ": give both interconnects, e.g. intra=\"pcie4\", inter=\"ethernet-100g\" "
                       "(known: " +
                       known_list(link_names()) + ")");
  }
  Cluster c;
  c.gpu = device;
  const int per_node =
      gpus_per_node ? *gpus_per_node : std::min(world_size, server ? server->gpus_per_node : 8);
  if (per_node < 1) throw ClusterError("gpus_per_node must be >= 1");
  if (world_size % per_node != 0) {
    throw ClusterError("world_size " + std::to_string(world_size) +
                       " is not a whole number of nodes of " + std::to_string(per_node) +
                       " GPUs; set gpus_per_node to a divisor of it");
  }
  c.gpus_per_node = per_node;
  c.nodes = world_size / per_node;
  c.intra = link(intra ? resolve_tier(device, *intra, server, true) : server->intra);
  c.inter = link(inter ? resolve_tier(device, *inter, server, false) : server->inter);
  return c;
}

}  // namespace habitat
