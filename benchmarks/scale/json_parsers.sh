#!/usr/bin/env bash
# Builds benchmarks/scale/json_parsers.cpp and json_semantics.cpp, prints what each parser reads
# differently, then times every parser over the traces that benchmarks/scale/json_traces.py
# writes and prints the table of benchmarks/results/json-parsers.md (issue 33). Needs
# libsimdjson-dev and rapidjson-dev (apt-get install); nothing else in the project does.
#
#   bash benchmarks/scale/json_parsers.sh [TRACE_DIR [REPEATS [ROUNDS]]]
#
# TRACE_DIR defaults to /tmp/habitat-json-traces (written first when it holds no traces);
# BUILD_DIR (default build/json-parsers) gets the programs. The engine's trace reader is
# compiled from its sources with the default build's flags: no CMake option, nothing of the
# default build changes.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
traces=${1:-/tmp/habitat-json-traces}
repeats=${2:-5}
rounds=${3:-3}
build=${BUILD_DIR:-$repo/build/json-parsers}
mkdir -p "$build"

if ! compgen -G "$traces/*.json" > /dev/null; then
  python3 "$repo/benchmarks/scale/json_traces.py" "$traces"
fi

exe=$build/json_parsers
sources=()
for src in trace/{file_io,input_limits,interned_string,json_dom,json_reader,op_consistency,trace,trace_json,trace_tree}.cpp hardware/{device,precision}.cpp; do
  sources+=("$repo/csrc/src/$src")
done
objects=()
for src in "${sources[@]}" "$repo"/benchmarks/scale/json_{parsers,semantics}.cpp; do
  obj=$build/$(basename "$src" .cpp).o
  objects+=("$obj")
  # Rebuilt when it or anything of the engine changed since.
  [[ -f $obj && -z $(find "$repo/csrc" "$src" -newer "$obj" -print -quit) ]] && continue
  # The flags of the default build (CMakeLists.txt: Release is -O2 -DNDEBUG).
  g++ -std=c++20 -O2 -DNDEBUG -Wall -Wextra -Werror -I"$repo/csrc/include" -I"$repo/csrc/src" \
    -c "$src" -o "$obj"
done
# The last object is json_semantics'; the others make json_parsers.
g++ -o "$exe" "${objects[@]:0:${#objects[@]}-1}" -lsimdjson
g++ -o "$build/json_semantics" "$build"/{json_dom,json_reader,input_limits,json_semantics}.o -lsimdjson

echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; g++ $(g++ -dumpfullversion) -O2;" \
     "simdjson $(dpkg-query -W -f '${Version}' libsimdjson-dev 2>/dev/null)," \
     "RapidJSON $(dpkg-query -W -f '${Version}' rapidjson-dev 2>/dev/null)," \
     "nlohmann $(dpkg-query -W -f '${Version}' nlohmann-json3-dev 2>/dev/null);" \
     "$rounds rounds of $repeats repeats; load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$build/json_semantics"
# Rounds of every parser in turn, so that a busy spell of the shared machine slows one round of
# every parser rather than all of one; the table keeps each parser's best round.
raw=$build/runs.txt
: > "$raw"
for round in $(seq "$rounds"); do
  for trace in "$traces"/*.json; do
    for parser in json_dom simdjson simdjson_into_dom rapidjson rapidjson_insitu nlohmann trace_from_json; do
      echo "$(basename "$trace") $("$exe" "$parser" "$trace" "$repeats")" | tee -a "$raw"
    done
  done
done
echo "# load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
# Fields: 1 trace, 2 parser, 3 MB, 7 CPU MB/s, 11 wall MB/s, 18 peak RSS, 20 (+above the text),
# 22.. what was read from the tree (the same for every parser of a trace, or the table says so).
awk '{
  key = $1 " " $2; parsers[key] = 1
  if (!($1 in mb)) traces[++ntraces] = $1
  mb[$1] = $3
  if ($7 > cpu[key]) cpu[key] = $7
  if ($11 > wall[key]) wall[key] = $11
  if ($18 > peak[key]) { peak[key] = $18; added[key] = $20 }
  read = ""; for (i = 22; i <= NF; i++) read = read " " $i
  if (!($1 in seen)) seen[$1] = read; else if (seen[$1] != read) odd[$1] = 1
}
END {
  print "| trace | MB | parser | MB/s (CPU time) | MB/s (wall) | vs json_dom (CPU) | peak RSS MB (above the text) |"
  print "|---|---:|---|---:|---:|---:|---:|"
  n = split("json_dom simdjson simdjson_into_dom rapidjson rapidjson_insitu nlohmann trace_from_json", order, " ")
  for (k = 1; k <= ntraces; k++) {
    t = traces[k]
    for (i = 1; i <= n; i++) {
      key = t " " order[i]
      if (!(key in parsers)) continue
      printf "| %s | %s | %s | %d | %d | %.2fx | %d %s |\n", t, mb[t], order[i], cpu[key], wall[key],
             cpu[key] / cpu[t " json_dom"], peak[key], added[key]
    }
    if (t in odd) print "| " t " | | the parsers read different ops: a bug | | | | |"
  }
}' "$raw"
