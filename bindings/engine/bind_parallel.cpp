// habitat._engine: clusters and the collective cost model (csrc/include/habitat/collectives.h).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "habitat/collectives.h"

namespace habitat::python {

namespace py = pybind11;

namespace {

py::dict tier_dict(const LinkTier& t) {
  py::dict d;
  d["name"] = t.name;
  d["kind"] = t.kind;
  d["bandwidth_gbs"] = t.bandwidth_gbs;
  d["efficiency"] = t.efficiency;
  d["hop_latency_us"] = t.hop_latency_us;
  d["base_latency_us"] = t.base_latency_us;
  d["switch"] = t.switched;
  d["nvls_algbw_fraction"] = t.nvls_algbw_fraction;
  py::dict achieved;
  const char* names[] = {"LL", "LL128", "Simple"};
  for (std::size_t p = 0; p < t.achieved.size(); ++p) {
    if (t.achieved[p].busbw_fraction <= 0) continue;
    py::dict a;
    a["busbw_fraction"] = t.achieved[p].busbw_fraction;
    a["step_latency_us"] = t.achieved[p].step_latency_us;
    achieved[names[p]] = a;
  }
  for (const auto& [key, n] : {std::pair{"two_nodes", t.achieved_two_nodes},
                               std::pair{"more_nodes", t.achieved_more_nodes}}) {
    if (n.busbw_share <= 0) continue;
    py::dict a;
    a["latency_scale"] = n.latency_scale;
    a["busbw_share"] = n.busbw_share;
    achieved[key] = a;
  }
  if (t.achieved_nvls_chunk_overhead_us > 0) {
    achieved["nvls_latency_us"] = t.achieved_nvls_latency_us;
    achieved["nvls_chunk_overhead_us"] = t.achieved_nvls_chunk_overhead_us;
    achieved["nvls_channels"] = t.nvls_channels;
  }
  d["achieved"] = achieved;
  d["sources"] = t.sources;
  return d;
}

Collective collective_of(const std::string& name) {
  if (auto c = collective_from_name(name)) return *c;
  throw py::value_error("unknown collective \"" + name +
                        "\": use all_reduce, all_gather, reduce_scatter, broadcast, reduce, "
                        "send_recv or all_to_all");
}

CollectiveAlgorithm algorithm_of(const std::string& name) {
  if (auto a = algorithm_from_name(name)) return *a;
  throw py::value_error("unknown algorithm \"" + name + "\": use auto, ring, tree or nvls");
}

}  // namespace

void bind_parallel(py::module_& m) {
  py::register_local_exception<ClusterError>(m, "ClusterError", PyExc_ValueError);

  py::class_<Cluster>(m, "Cluster", "GPUs of one kind on nodes joined by two fabric tiers")
      .def_readonly("gpu", &Cluster::gpu)
      .def_readonly("gpus_per_node", &Cluster::gpus_per_node)
      .def_readonly("nodes", &Cluster::nodes)
      .def_property_readonly("world_size", &Cluster::world_size)
      .def_property_readonly("intra", [](const Cluster& c) { return tier_dict(c.intra); })
      .def_property_readonly("inter", [](const Cluster& c) { return tier_dict(c.inter); })
      .def(
          "collective",
          [](const Cluster& c, const std::string& kind, double bytes, std::optional<int> ranks,
             const std::string& algorithm) {
            const Collective coll = collective_of(kind);
            const auto e = estimate_collective(coll, bytes, ranks.value_or(c.world_size()), c,
                                               algorithm_of(algorithm));
            py::dict d;
            d["collective"] = to_string(coll);
            d["time_us"] = e.time_us;
            d["tuner_time_us"] = e.tuner_time_us;
            d["tuner_latency_us"] = e.tuner_latency_us;
            d["algbw_gbs"] = e.algbw_gbs;
            d["busbw_gbs"] = e.busbw_gbs;
            d["algorithm"] = to_string(e.algorithm);
            d["protocol"] = e.protocol;
            d["bottleneck"] = e.bottleneck;
            return d;
          },
          py::arg("kind"), py::arg("bytes"), py::arg("ranks") = py::none(),
          py::arg("algorithm") = "auto",
          "Time of one collective of `bytes` (nccl-tests' size) over `ranks` consecutive ranks.");

  py::class_<InterconnectDatabase>(m, "Interconnects", "Fabric tiers and each GPU's usual server")
      .def_static(
          "from_documents",
          [](const std::vector<std::string>& texts) {
            InterconnectDatabase db;
            for (const auto& t : texts) db.merge_json(t);
            return db;
          },
          py::arg("texts"), "From devices.json documents, later ones overriding earlier ones.")
      .def("link_names", &InterconnectDatabase::link_names)
      .def("link", [](const InterconnectDatabase& db,
                      const std::string& n) { return tier_dict(db.link(n)); })
      .def("server",
           [](const InterconnectDatabase& db, const std::string& device) -> py::object {
             const auto* s = db.layout(device);
             if (!s) return py::none();
             py::dict d;
             d["intra"] = s->intra;
             d["inter"] = s->inter;
             d["gpus_per_node"] = s->gpus_per_node;
             return d;
           })
      .def("make_cluster", &InterconnectDatabase::make_cluster, py::arg("device"),
           py::arg("world_size"), py::arg("gpus_per_node") = py::none(),
           py::arg("intra") = py::none(), py::arg("inter") = py::none());

  m.def(
      "bus_factor",
      [](const std::string& kind, int ranks) { return bus_factor(collective_of(kind), ranks); },
      py::arg("kind"), py::arg("ranks"));
  m.def(
      "collective_name",
      [](const std::string& name) -> py::object {
        if (auto c = collective_from_name(name)) return py::str(to_string(*c));
        return py::none();
      },
      py::arg("name"), "The collective a c10d op name runs (None for barrier and the like).");
}

}  // namespace habitat::python
