#include "habitat/device.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "habitat/file_io.h"
#include "trace/json_reader.h"

namespace habitat {
namespace {

using json = nlohmann::json;

constexpr std::string_view kFormat = "habitat-devices";
constexpr int kMaxVersion = 1;

struct SmField {
  std::string_view key;
  int SmLimits::*member;
};

constexpr std::array<SmField, 11> kSmFields{{
    {"max_threads", &SmLimits::max_threads},
    {"max_warps", &SmLimits::max_warps},
    {"max_blocks", &SmLimits::max_blocks},
    {"registers", &SmLimits::registers},
    {"max_registers_per_thread", &SmLimits::max_registers_per_thread},
    {"register_alloc_unit", &SmLimits::register_alloc_unit},
    {"warp_alloc_granularity", &SmLimits::warp_alloc_granularity},
    {"shared_memory", &SmLimits::shared_memory},
    {"shared_memory_per_block", &SmLimits::shared_memory_per_block},
    {"shared_alloc_unit", &SmLimits::shared_alloc_unit},
    {"reserved_shared_per_block", &SmLimits::reserved_shared_per_block},
}};

// Fields a count or size of which must be positive; the rest may be 0.
constexpr std::array<std::string_view, 7> kPositiveSmFields{
    "max_threads",      "max_warps",           "max_blocks",
    "registers",        "register_alloc_unit", "warp_alloc_granularity",
    "shared_alloc_unit"};

struct NumberField {
  std::string_view key;
  double Device::*member;
  bool may_be_zero;  // 0 = unknown is allowed where the engine does not divide by it
  double min;        // the smallest non-zero value a real GPU could have
  double max;        // and the largest, with room for a few generations to come
};

// Ranges wide enough for every GPU there is or will be soon, narrow enough that arithmetic
// on them stays finite (a bandwidth of 1e-300 GB/s would make times overflow to inf).
constexpr std::array<NumberField, 5> kNumberFields{{
    {"boost_clock_mhz", &Device::boost_clock_mhz, false, 1, 1e5},
    {"memory_gb", &Device::memory_gb, false, 1e-3, 1e6},
    {"memory_bandwidth_gbs", &Device::memory_bandwidth_gbs, false, 1e-3, 1e7},
    {"l2_mb", &Device::l2_mb, true, 1e-3, 1e6},
    {"tdp_w", &Device::tdp_w, true, 1e-3, 1e6},
}};

// Peak TFLOPS of one precision, and the largest SM count, per-SM limit and compute
// capability part a device may give.
constexpr double kMinTflops = 1e-3;
constexpr double kMaxTflops = 1e6;
constexpr int kMaxCount = 1 << 24;

constexpr std::array<std::string_view, 14> kDeviceKeys{"name",        "display_name",
                                                       "aliases",     "compute_capability",
                                                       "sms",         "boost_clock_mhz",
                                                       "memory_gb",   "memory_bandwidth_gbs",
                                                       "l2_mb",       "tdp_w",
                                                       "peak_tflops", "sm_limits",
                                                       "sources",     "notes"};

// A new device must give these; an existing one may be updated by any subset.
constexpr std::array<std::string_view, 8> kRequiredKeys{
    "compute_capability",   "sms",   "boost_clock_mhz", "memory_gb",
    "memory_bandwidth_gbs", "l2_mb", "tdp_w",           "peak_tflops"};

constexpr std::array<std::string_view, 3> kVendorWords{"nvidia", "tesla", "geforce"};

// Keys starting with '_' are comments and ignored everywhere.
bool is_comment(const std::string& key) { return !key.empty() && key.front() == '_'; }

template <std::size_t N>
bool contains(const std::array<std::string_view, N>& set, std::string_view key) {
  return std::find(set.begin(), set.end(), key) != set.end();
}

using json_reader::DecodeError;
using json_reader::Loc;

// Problems are DecodeErrors naming where they are ("devices[3] (\"MyGPU\").sms: ..."); the
// public entry points turn them into std::runtime_error("device database: ...").
using json_reader::fail;

template <class F>
auto as_runtime_error(F&& body) {
  try {
    return body();
  } catch (const DecodeError& e) {
    throw std::runtime_error("device database: " + e.message);
  }
}

std::string in_quotes(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.append(1, '"').append(s).append(1, '"');
  return out;
}

std::string where_device(std::string_view name) { return "device " + in_quotes(name); }

// A value quoted in a message, cut to 40 characters (nesting is capped at parse).
std::string describe(const json& v) {
  if (v.is_array() || v.is_object()) return v.is_array() ? "a list" : "an object";
  const std::string text = v.dump();
  return text.size() > 40 ? text.substr(0, 40) + "..." : text;
}

int as_int(const json& v, const Loc& at, bool positive) {
  const bool integral = v.is_number_integer() ||
                        (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  if (!integral || v.get<double>() < (positive ? 1 : 0) || v.get<double>() > kMaxCount) {
    fail(at, std::string("must be a ") + (positive ? "positive" : "non-negative") +
                 " integer up to " + std::to_string(kMaxCount) + ", got " + describe(v));
  }
  return static_cast<int>(v.get<double>());
}

std::string number_text(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

double as_number(const json& v, const Loc& at, bool may_be_zero, double min, double max) {
  const bool number = v.is_number() && std::isfinite(v.get<double>());
  const double x = number ? v.get<double>() : 0;
  if (!number || x < 0 || (x == 0 && !may_be_zero) || (x != 0 && (x < min || x > max))) {
    fail(at, std::string("must be a number from ") + number_text(min) + " to " + number_text(max) +
                 (may_be_zero ? " (or 0: unknown)" : "") + ", got " + describe(v));
  }
  return x;
}

// "8.0", "10.0" or the number 8.6 -> (8, 0), (10, 0), (8, 6).
std::pair<int, int> parse_compute_capability(const json& v, const Loc& at) {
  std::string text;
  if (v.is_string()) {
    text = v.get<std::string>();
  } else if (v.is_number() && v.get<double>() > 0) {
    std::ostringstream out;
    out.precision(1);
    out << std::fixed << v.get<double>();
    text = out.str();
  }
  const auto dot = text.find('.');
  const auto all_digits = [](std::string_view s) {
    return !s.empty() && s.size() <= 3 &&
           std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
  };
  if (dot == std::string::npos || !all_digits(std::string_view(text).substr(0, dot)) ||
      !all_digits(std::string_view(text).substr(dot + 1))) {
    fail(at, "must look like \"8.0\", got " + describe(v));
  }
  return {std::stoi(text.substr(0, dot)), std::stoi(text.substr(dot + 1))};
}

std::string cc_key(int major, int minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// Applies the fields of `obj` to `limits`; with `complete`, every field must be given.
void apply_sm_limits(SmLimits& limits, const json& obj, const Loc& at, bool complete) {
  if (!obj.is_object()) fail(at, "must be an object, got " + describe(obj));
  for (const auto& [key, value] : obj.items()) {
    if (is_comment(key) || key == "sources" || key == "notes") continue;
    const std::string& name = key;  // clang 14 captures no structured binding (the fuzz build)
    const auto* field = std::find_if(kSmFields.begin(), kSmFields.end(),
                                     [&](const SmField& f) { return f.key == name; });
    if (field == kSmFields.end()) fail(at, "unknown field " + in_quotes(key));
    limits.*(field->member) = as_int(value, at.child(key), contains(kPositiveSmFields, key));
  }
  if (complete) {
    for (const auto& f : kSmFields) {
      if (!obj.contains(std::string(f.key))) {
        fail(at, "misses field " + in_quotes(f.key));
      }
    }
  }
}

void check_sm_limits(const SmLimits& l, const Loc& at) {
  for (const auto& f : kSmFields) {
    const int value = l.*(f.member);
    if (value < (contains(kPositiveSmFields, f.key) ? 1 : 0)) {
      fail(at,
           "field " + in_quotes(f.key) + " is missing or invalid (" + std::to_string(value) + ")");
    }
  }
  if (l.shared_memory_per_block + l.reserved_shared_per_block > l.shared_memory) {
    fail(at, "shared_memory_per_block plus reserved_shared_per_block exceeds shared_memory");
  }
}

json parse_document(std::string_view text) {
  const Loc root;
  json doc;
  try {
    doc = json_reader::parse(text);
  } catch (const DecodeError& e) {
    fail(root, "malformed JSON (" + e.message + ")");
  }
  if (!doc.is_object()) fail(root, "the top level must be an object with a \"devices\" list");
  for (const auto& [key, value] : doc.items()) {
    if (is_comment(key)) continue;
    if (key == "format") {
      if (!value.is_string() || value.get<std::string>() != kFormat) {
        fail(root, "\"format\" must be \"" + std::string(kFormat) + "\", got " + describe(value));
      }
    } else if (key == "version") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1 ||
          value.get<int64_t>() > kMaxVersion) {
        fail(root, "unsupported \"version\" " + describe(value) + " (this Habitat reads version " +
                       std::to_string(kMaxVersion) + ")");
      }
    } else if (key == "devices") {
      if (!value.is_array()) fail(root, "\"devices\" must be a list");
    } else if (key == "sm_limits" || key == "source_tags" || key == "interconnects") {
      // "interconnects" is read by InterconnectDatabase (parallel/cluster.cpp).
      if (!value.is_object()) fail(root, in_quotes(key) + " must be an object");
    } else {
      fail(root, "unknown top-level field " + in_quotes(key));
    }
  }
  return doc;
}

// Merges the document's per-compute-capability table into `tables`. Existing entries
// are updated field by field (and so are the devices that inherit them); new entries
// must be complete.
void merge_sm_tables(std::map<std::string, SmLimits>& tables, std::vector<Device>& devices,
                     const json& doc) {
  if (!doc.contains("sm_limits")) return;
  const Loc root;
  const Loc tables_at = root.child("sm_limits");
  for (const auto& [key, value] : doc.at("sm_limits").items()) {
    if (is_comment(key)) continue;
    const std::string quoted = in_quotes(key);
    const Loc where = tables_at.child(quoted);
    const auto [major, minor] = parse_compute_capability(json(key), where);
    const std::string cc = cc_key(major, minor);
    const bool is_new = tables.find(cc) == tables.end();
    SmLimits& limits = tables[cc];
    apply_sm_limits(limits, value, where, is_new);
    check_sm_limits(limits, where);
    if (is_new) continue;
    for (auto& d : devices) {
      if (cc_key(d.cc_major, d.cc_minor) == cc) apply_sm_limits(d.limits, value, where, false);
    }
  }
}

// Applies one entry of "devices" to `d`: every field for a new device, the given ones
// for an existing device.
void apply_entry(Device& d, const json& entry, const std::map<std::string, SmLimits>& tables,
                 bool is_new, const Loc& where) {
  for (const auto& [key, value] : entry.items()) {
    if (!is_comment(key) && !contains(kDeviceKeys, key)) {
      fail(where, "unknown field " + in_quotes(key));
    }
  }
  if (is_new) {
    std::string missing;
    for (auto key : kRequiredKeys) {
      if (!entry.contains(std::string(key)))
        missing += (missing.empty() ? "" : ", ") + std::string(key);
    }
    if (!missing.empty()) {
      fail(where, "a new device needs the field(s) " + missing +
                      " (a partial entry can only update a device that already exists)");
    }
  }
  if (entry.contains("display_name")) {
    d.display_name =
        json_reader::read_string(entry.at("display_name"), where.child("display_name"));
  }
  if (entry.contains("aliases")) {
    const json& aliases = entry.at("aliases");
    d.aliases = json_reader::read_strings(aliases, where.child("aliases"));
  }
  if (entry.contains("compute_capability")) {
    std::tie(d.cc_major, d.cc_minor) =
        parse_compute_capability(entry.at("compute_capability"), where.child("compute_capability"));
    const auto table = tables.find(cc_key(d.cc_major, d.cc_minor));
    if (table != tables.end()) {
      d.limits = table->second;
    } else if (!entry.contains("sm_limits")) {
      fail(where, "no sm_limits table for compute capability " + cc_key(d.cc_major, d.cc_minor) +
                      ": give the device's \"sm_limits\" (all fields)");
    } else {
      d.limits = SmLimits{};
    }
  }
  if (entry.contains("sm_limits")) {
    apply_sm_limits(d.limits, entry.at("sm_limits"), where.child("sm_limits"), false);
  }
  check_sm_limits(d.limits, where);
  if (entry.contains("sms")) d.sms = as_int(entry.at("sms"), where.child("sms"), true);
  for (const auto& f : kNumberFields) {
    const std::string key(f.key);
    if (entry.contains(key))
      d.*(f.member) = as_number(entry.at(key), where.child(f.key), f.may_be_zero, f.min, f.max);
  }
  if (entry.contains("peak_tflops")) {
    const json& peaks = entry.at("peak_tflops");
    const Loc peaks_at = where.child("peak_tflops");
    if (!peaks.is_object()) fail(peaks_at, "must be an object");
    for (const auto& [key, value] : peaks.items()) {
      if (is_comment(key)) continue;
      const auto precision = precision_from_string(key);
      if (!precision) {
        fail(where, "unknown precision " + in_quotes(key) +
                        " in peak_tflops (use fp32, tf32, fp16, bf16, fp8, fp64)");
      }
      if (value.is_null()) {  // an override may remove a peak the device lacks
        d.peak_tflops.erase(*precision);
      } else {
        d.peak_tflops[*precision] =
            as_number(value, peaks_at.child(key), false, kMinTflops, kMaxTflops);
      }
    }
  }
  if (!d.peak_tflops.contains(Precision::Fp32Simt)) {
    fail(where,
         "field \"peak_tflops\" needs \"fp32\" (the SIMT peak every other precision "
         "falls back to)");
  }
  if (entry.contains("sources")) {
    const json& sources = entry.at("sources");
    const Loc sources_at = where.child("sources");
    if (!sources.is_object()) fail(sources_at, "must be an object");
    for (const auto& [key, value] : sources.items()) {
      if (!is_comment(key)) d.sources[key] = json_reader::read_string(value, sources_at.child(key));
    }
  }
  if (entry.contains("notes"))
    d.notes = json_reader::read_string(entry.at("notes"), where.child("notes"));
}

std::string entry_name(const json& entry, const Loc& where) {
  if (!entry.is_object()) fail(where, "each device must be an object");
  std::string name =
      json_reader::read_string(json_reader::required(entry, where, "name"), where.child("name"));
  if (name.find_first_not_of(" \t") == std::string::npos) fail(where.child("name"), "is empty");
  return name;
}

// Lower case, separators removed, vendor words dropped: "NVIDIA H100 80GB HBM3",
// "h100_80gb-hbm3" and "Tesla H100 80GB HBM3" all become "h10080gbhbm3".
std::string normalise(std::string_view name) {
  std::string out;
  std::string token;
  const auto flush = [&] {
    if (!contains(kVendorWords, token)) out += token;
    token.clear();
  };
  for (const char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      token += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else {
      flush();
    }
  }
  flush();
  return out;
}

std::vector<std::string> all_names(const Device& d) {
  std::vector<std::string> names{d.name, d.display_name};
  names.insert(names.end(), d.aliases.begin(), d.aliases.end());
  return names;
}

using NameIndex = std::unordered_map<std::string, std::size_t>;

// Every name of every device must lead to exactly one device: the index of the names
// (device_name_key form) to the devices' positions.
NameIndex index_names(const std::vector<Device>& devices) {
  NameIndex owner;
  std::unordered_map<std::string, std::string> spelled;  // the name as written, for messages
  for (std::size_t i = 0; i < devices.size(); ++i) {
    for (const auto& name : all_names(devices[i])) {
      const std::string key = normalise(name);
      const std::string device = where_device(devices[i].name);
      const Loc at{nullptr, device, -1, {}};
      if (key.empty()) fail(at, "name " + in_quotes(name) + " is empty");
      const auto [it, inserted] = owner.try_emplace(key, i);
      if (inserted) {
        spelled.emplace(key, name);
      } else if (it->second != i) {
        fail(at, "name " + in_quotes(name) + " also names device " +
                     in_quotes(devices[it->second].name) + " (as " + in_quotes(spelled[key]) +
                     "); each name must lead to one device");
      }
    }
  }
  return owner;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

double Device::peak_flops(Precision p) const {
  auto it = peak_tflops.find(p);
  if (it == peak_tflops.end()) it = peak_tflops.find(Precision::Fp32Simt);
  return it == peak_tflops.end() ? 0.0 : it->second * 1e12;
}

bool at_least_as_good(const Device& a, const Device& b, Precision p) {
  return a.peak_flops(p) >= b.peak_flops(p) &&
         a.peak_flops(Precision::Fp32Simt) >= b.peak_flops(Precision::Fp32Simt) &&
         a.memory_bandwidth_gbs >= b.memory_bandwidth_gbs && a.sms >= b.sms && a.l2_mb >= b.l2_mb &&
         a.boost_clock_mhz >= b.boost_clock_mhz;
}

DeviceDatabase DeviceDatabase::from_json(std::string_view json_text) {
  as_runtime_error([&] {
    const json doc = parse_document(json_text);
    if (!doc.contains("devices")) fail(Loc(), "missing the \"devices\" list");
  });
  DeviceDatabase db;
  db.merge_json(json_text);
  return db;
}

DeviceDatabase DeviceDatabase::load_file(const std::string& path) {
  try {
    return from_json(read_file(path, "device database", kPackagedFileMaxBytes));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + " (in " + path + ")");
  }
}

void DeviceDatabase::merge_json(std::string_view json_text) {
  as_runtime_error([&] {
    const json doc = parse_document(json_text);
    // Work on a copy so a bad document leaves the database as it was.
    std::vector<Device> devices = devices_;
    std::map<std::string, SmLimits> tables = sm_limit_tables_;
    merge_sm_tables(tables, devices, doc);
    if (doc.contains("devices")) {
      // Names are looked up in an index, not by a scan per entry: a file of 20,000 GPUs
      // loads in well under a second.
      NameIndex index = by_name_;
      std::unordered_set<std::string> seen;
      const json& entries = doc.at("devices");
      const Loc root;
      const Loc entries_at = root.child("devices");
      for (std::size_t i = 0; i < entries.size(); ++i) {
        const std::string name = entry_name(entries[i], entries_at.at(static_cast<int64_t>(i)));
        const std::string quoted = in_quotes(name);
        const Loc where{&entries_at, {}, static_cast<int64_t>(i), quoted};
        const std::string key = normalise(name);
        if (!seen.insert(key).second) fail(where, "appears twice in the same document");
        // A name, display name or alias of an existing device updates that device.
        const auto existing = index.find(key);
        std::size_t at = devices.size();
        if (existing != index.end()) {
          at = existing->second;
          apply_entry(devices[at], entries[i], tables, false, where);
        } else {
          Device d;
          d.name = name;
          d.display_name = name;
          apply_entry(d, entries[i], tables, true, where);
          devices.push_back(std::move(d));
        }
        for (const auto& n : all_names(devices[at])) index.try_emplace(normalise(n), at);
      }
    }
    by_name_ = index_names(devices);
    devices_ = std::move(devices);
    sm_limit_tables_ = std::move(tables);
  });
}

std::string device_name_key(std::string_view name) { return normalise(name); }

const Device* DeviceDatabase::try_find(std::string_view name) const {
  const auto it = by_name_.find(normalise(name));
  return it == by_name_.end() ? nullptr : &devices_[it->second];
}

const Device& DeviceDatabase::find(std::string_view name) const {
  if (const Device* d = try_find(name)) return *d;
  std::string message = "unknown GPU " + in_quotes(name) + ".";
  const auto close = closest_names(name);
  if (!close.empty()) {
    message += " Closest known devices: ";
    for (std::size_t i = 0; i < close.size(); ++i) message += (i ? ", " : "") + close[i];
    message += ".";
  }
  message +=
      " `habitat devices` lists them all. To add a GPU, give its figures in a JSON file laid out "
      "like habitat/data/devices.json and load it with habitat.load_devices(path) or "
      "HABITAT_DEVICES=path.";
  throw UnknownDeviceError(message);
}

std::vector<std::string> DeviceDatabase::closest_names(std::string_view name, std::size_t n) const {
  const std::string key = normalise(name);
  std::vector<std::pair<std::size_t, std::string>> scored;
  for (const auto& d : devices_) {
    std::size_t best = std::numeric_limits<std::size_t>::max();
    for (const auto& candidate : all_names(d)) {
      const std::string other = normalise(candidate);
      // A name that contains the query (or the reverse) is a near miss whatever its length.
      const bool nested = !key.empty() && (other.find(key) != std::string::npos ||
                                           key.find(other) != std::string::npos);
      best = std::min(best, nested ? std::size_t{1} : edit_distance(key, other));
    }
    scored.emplace_back(best, d.name);
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> names;
  for (std::size_t i = 0; i < scored.size() && i < n; ++i) names.push_back(scored[i].second);
  return names;
}

}  // namespace habitat
