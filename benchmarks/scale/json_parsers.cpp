// How fast the JSON parsers a trace could be read with parse one (issue 33): habitat's json_dom
// (csrc/src/trace/json_dom.h), simdjson's DOM, simdjson's tree copied into json_dom's (what
// json_dom would cost with simdjson as its parser), RapidJSON's Document (copying and in situ)
// and nlohmann::json; then the engine's whole read (habitat::trace_from_json: json_dom's parse
// and the validating decode), so the parse's share of a read is known. Built and run by
// benchmarks/scale/json_parsers.sh; figures in benchmarks/results/json-parsers.md.
//
//   json_parsers PARSER FILE REPEATS
//
// PARSER: json_dom, simdjson, simdjson_into_dom, rapidjson, rapidjson_insitu, nlohmann or
// trace_from_json. One parser per process, so that the peak RSS (getrusage) is that parser's.
// Each repeat parses the file and reads every op's "id" and "name" (steps[*].ops[*]) from the
// tree, which keeps the parse from being optimised away and costs what the decode's lookups
// cost at the least. Prints one line: parser, MB, the best MB/s of the repeats by CPU time and
// by wall time, the median wall time, the peak RSS and how much of it is above what the file's
// text held before the first parse.
#include <rapidjson/document.h>
#include <simdjson.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "habitat/trace.h"
#include "trace/json_dom.h"
#include "trace/json_reader.h"

namespace {

// What every parser reads from the tree: the number of ops and the bytes of their names.
struct Touched {
  uint64_t ops = 0;
  uint64_t id_sum = 0;
  uint64_t name_bytes = 0;
};

// Resident now (statm's second field, pages), to subtract from the peak.
double rss_mb() {
  std::ifstream statm("/proc/self/statm");
  double pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
}

std::string read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(std::string("cannot open ") + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

Touched touch_json_dom(const habitat::json_reader::Document& doc) {
  using habitat::json_reader::Value;
  Touched t;
  const Value& steps = doc.root()["steps"];
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const Value& ops = steps[s]["ops"];
    for (std::size_t i = 0; i < ops.size(); ++i) {
      t.ops += 1;
      t.id_sum += ops[i]["id"].get<uint64_t>();
      t.name_bytes += ops[i]["name"].get_ref<const std::string&>().size();
    }
  }
  return t;
}

Touched with_json_dom(const std::string& text) {
  return touch_json_dom(habitat::json_reader::parse_document(text));
}

Touched with_simdjson(simdjson::dom::parser& parser, const simdjson::padded_string& text) {
  const simdjson::dom::element root = parser.parse(text);  // throws simdjson_error
  Touched t;
  for (simdjson::dom::object step : root["steps"].get_array()) {
    for (simdjson::dom::object op : step["ops"].get_array()) {
      t.ops += 1;
      t.id_sum += uint64_t(op["id"]);
      t.name_bytes += std::string_view(op["name"]).size();
    }
  }
  return t;
}

// simdjson's tree copied into json_dom's arena tree (DocumentBuilder, what TraceTree fills):
// what json_dom would be with its parser replaced by simdjson's, the Value interface, the
// reader and the decode unchanged. simdjson's own tree is read-only, so TraceTree (documents
// handed over as Python objects) cannot use it.
void copy_into(habitat::json_reader::Document& doc, habitat::json_reader::Value& out,
               simdjson::dom::element e) {
  using habitat::json_reader::DocumentBuilder;
  using Type = simdjson::dom::element_type;
  switch (e.type()) {
    case Type::ARRAY: {
      const simdjson::dom::array array = e.get_array();
      habitat::json_reader::Value* items = DocumentBuilder::set_array(doc, out, array.size());
      for (const simdjson::dom::element item : array) copy_into(doc, *items++, item);
      break;
    }
    case Type::OBJECT: {
      const simdjson::dom::object object = e.get_object();
      DocumentBuilder::set_object(doc, out, object.size());
      std::size_t i = 0;
      for (const simdjson::dom::key_value_pair field : object) {
        habitat::json_reader::Member& member = DocumentBuilder::member(out, i++);
        DocumentBuilder::set_key(doc, member, field.key);
        copy_into(doc, member.value, field.value);
      }
      break;
    }
    case Type::INT64:
      DocumentBuilder::set_int(out, int64_t(e));
      break;
    case Type::UINT64:
      DocumentBuilder::set_uint(out, uint64_t(e));
      break;
    case Type::DOUBLE:
      DocumentBuilder::set_real(out, double(e));
      break;
    case Type::STRING:
      DocumentBuilder::set_string(doc, out, std::string_view(e));
      break;
    case Type::BOOL:
      DocumentBuilder::set_bool(out, bool(e));
      break;
    case Type::NULL_VALUE:
      DocumentBuilder::set_null(out);
      break;
  }
}

// A fresh simdjson parser per document and unpadded text (simdjson copies it), as a
// parse_document(text) built on it would have.
Touched with_simdjson_into_dom(const std::string& text) {
  using habitat::json_reader::DocumentBuilder;
  simdjson::dom::parser parser;
  const simdjson::dom::element root = parser.parse(text.data(), text.size());
  habitat::json_reader::Document doc = DocumentBuilder::make();
  copy_into(doc, DocumentBuilder::root(doc), root);
  return touch_json_dom(doc);
}

template <class Document>
Touched touch_rapidjson(const Document& doc) {
  Touched t;
  for (const auto& step : doc["steps"].GetArray()) {
    for (const auto& op : step["ops"].GetArray()) {
      t.ops += 1;
      t.id_sum += op["id"].GetUint64();
      t.name_bytes += op["name"].GetStringLength();
    }
  }
  return t;
}

// What json_dom does: numbers read as exactly as strtod reads them, UTF-8 checked (RapidJSON
// takes any bytes by default), and no recursion on the stack (a deeply nested document would
// overflow it).
constexpr unsigned kRapidFlags = rapidjson::kParseFullPrecisionFlag |
                                 rapidjson::kParseValidateEncodingFlag |
                                 rapidjson::kParseIterativeFlag;

Touched with_rapidjson(const std::string& text) {
  rapidjson::Document doc;
  doc.Parse<kRapidFlags>(text.data(), text.size());
  if (doc.HasParseError()) throw std::runtime_error("rapidjson: parse error");
  return touch_rapidjson(doc);
}

// In situ: strings are decoded into the text itself (the caller's copy, made and timed before
// each parse).
Touched with_rapidjson_insitu(std::string& scratch) {
  rapidjson::Document doc;
  doc.ParseInsitu<kRapidFlags>(scratch.data());
  if (doc.HasParseError()) throw std::runtime_error("rapidjson: parse error");
  return touch_rapidjson(doc);
}

Touched with_nlohmann(const std::string& text) {
  const auto doc = nlohmann::json::parse(text);
  Touched t;
  for (const auto& step : doc.at("steps")) {
    for (const auto& op : step.at("ops")) {
      t.ops += 1;
      t.id_sum += op.at("id").get<uint64_t>();
      t.name_bytes += op.at("name").get_ref<const std::string&>().size();
    }
  }
  return t;
}

Touched with_trace_from_json(const std::string& text) {
  const habitat::Trace trace = habitat::trace_from_json(text);
  Touched t;
  for (const auto& step : trace.steps) {
    for (const auto& op : step.ops) {
      t.ops += 1;
      t.id_sum += op.id;
      t.name_bytes += op.name.str().size();
    }
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s PARSER FILE REPEATS\n", argv[0]);
    return 2;
  }
  const std::string parser = argv[1];
  const int repeats = std::max(1, std::atoi(argv[3]));
  try {
    // simdjson reads the file into padded text of its own, as a reader using it would.
    std::string text = parser == "simdjson" ? std::string() : read_file(argv[2]);
    std::string scratch;             // rapidjson_insitu's copy of the text
    simdjson::padded_string padded;  // simdjson reads padded text
    simdjson::dom::parser simd;      // reused: its buffers are allocated on the first parse
    std::function<Touched()> run;
    if (parser == "json_dom") {
      run = [&] { return with_json_dom(text); };
    } else if (parser == "simdjson") {
      padded = simdjson::padded_string::load(argv[2]);
      run = [&] { return with_simdjson(simd, padded); };
    } else if (parser == "simdjson_into_dom") {
      run = [&] { return with_simdjson_into_dom(text); };
    } else if (parser == "rapidjson") {
      run = [&] { return with_rapidjson(text); };
    } else if (parser == "rapidjson_insitu") {
      run = [&] {
        scratch.assign(text);  // timed with the parse below: subtract a memcpy (~10 GB/s)
        return with_rapidjson_insitu(scratch);
      };
    } else if (parser == "nlohmann") {
      run = [&] { return with_nlohmann(text); };
    } else if (parser == "trace_from_json") {
      run = [&] { return with_trace_from_json(text); };
    } else {
      std::fprintf(stderr, "unknown parser %s\n", parser.c_str());
      return 2;
    }
    const double mb = static_cast<double>(parser == "simdjson" ? padded.size() : text.size()) / 1e6;
    const double base_rss = rss_mb();
    std::vector<double> wall;  // seconds per repeat
    std::vector<double> cpu;   // the process's CPU seconds per repeat: steadier on a busy machine
    Touched touched;
    for (int r = 0; r < repeats; ++r) {
      const double cpu_start = cpu_seconds();
      const auto start = std::chrono::steady_clock::now();
      touched = run();
      wall.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      cpu.push_back(cpu_seconds() - cpu_start);
    }
    std::sort(wall.begin(), wall.end());
    std::sort(cpu.begin(), cpu.end());
    const double peak = peak_rss_mb();
    std::printf(
        "%-17s %6.1f MB  cpu best %5.0f MB/s  wall best %5.0f MB/s median %5.0f ms  "
        "peak RSS %4.0f MB (+%.0f)  ops %llu ids %llu name bytes %llu\n",
        parser.c_str(), mb, mb / cpu.front(), mb / wall.front(), wall[wall.size() / 2] * 1e3, peak,
        peak - base_rss, static_cast<unsigned long long>(touched.ops),
        static_cast<unsigned long long>(touched.id_sum),
        static_cast<unsigned long long>(touched.name_bytes));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", parser.c_str(), e.what());
    return 1;
  } catch (const habitat::json_reader::DecodeError& e) {
    std::fprintf(stderr, "%s: %s\n", parser.c_str(), e.message.c_str());
    return 1;
  }
  return 0;
}
