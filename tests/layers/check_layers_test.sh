#!/usr/bin/env bash
# scripts/check-layers: quiet on the real tree and on a fixture whose includes point down;
# fails, naming the file, the line and what the layer may include, on a fixture with an
# upward include, an include from outside the engine, and a folder that is no layer.
#   tests/layers/check_layers_test.sh [SOURCE_DIR]
set -uo pipefail

src=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
check=$src/scripts/check-layers
rules=$src/engine/layers.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

# expect NAME WANT_RC WANT_OUTPUT ROOT
expect() {
  local name=$1 want_rc=$2 want_out=$3 root=$4 out rc
  out=$("$check" "$root" "$rules" 2>&1)
  rc=$?
  if [[ $rc != "$want_rc" || $out != "$want_out" ]]; then
    printf 'FAILED: %s\n  exit %s (wanted %s)\n  output:\n%s\n  wanted:\n%s\n' \
      "$name" "$rc" "$want_rc" "$out" "$want_out"
    failures=$((failures + 1))
  else
    echo "ok: $name"
  fi
}

# A small engine whose includes all point down (or stay in their layer).
fixture() {
  local root=$tmp/$1
  mkdir -p "$root"/engine/{core,ir,passes,exec,cpu}
  printf '#pragma once\n#include <vector>\n' >"$root/engine/core/shape.h"
  printf '#pragma once\n#include "engine/core/shape.h"\n' >"$root/engine/ir/graph.h"
  printf '#include "engine/ir/graph.h"\n#include "engine/passes/passes.h"\n' >"$root/engine/passes/passes.cpp"
  printf '#pragma once\n#include "engine/ir/graph.h"\n' >"$root/engine/passes/passes.h"
  printf '#pragma once\n#include "engine/passes/passes.h"\n#include "engine/core/shape.h"\n' \
    >"$root/engine/exec/plan.h"
  printf '#include "plan.h"\n' >"$root/engine/exec/plan.cpp"
  printf '#include "engine/ir/graph.h"\n' >"$root/engine/cpu/kernels.cpp"
  echo "$root"
}

expect "the real tree" 0 "" "$src"

root=$(fixture down)
expect "a fixture whose includes point down" 0 "" "$root"

root=$(fixture up)
printf '// folding runs kernels\n#include "engine/passes/passes.h"\n\n  #  include "engine/exec/plan.h"\n' \
  >"$root/engine/passes/constant_folding.cpp"
expect "a pass that includes the executor" 1 \
  "engine/passes/constant_folding.cpp:4 includes engine/exec/plan.h: passes may include core, ir, autodiff, ops only" \
  "$root"

root=$(fixture core)
printf '#pragma once\n#include "engine/core/shape.h"\n#include "engine/ir/graph.h"\n' >"$root/engine/core/op.h"
printf '#include "engine/exec/plan.h"\n' >>"$root/engine/cpu/kernels.cpp"
expect "core including ir, and the CPU backend including exec" 1 \
  "engine/core/op.h:3 includes engine/ir/graph.h: core may include no other layer
engine/cpu/kernels.cpp:2 includes engine/exec/plan.h: cpu may include core, ir, autodiff, ops only" \
  "$root"

root=$(fixture outside)
printf '#include "nodes/document.h"\n' >"$root/engine/ir/lower.cpp"
mkdir -p "$root/engine/comm"
printf '#include "engine/core/shape.h"\n' >"$root/engine/comm/allreduce.cpp"
expect "an include from outside the engine, and a folder that is no layer" 1 \
  "engine/comm/allreduce.cpp: engine/comm is not a layer in engine/layers.txt
engine/ir/lower.cpp:1 includes nodes/document.h: the engine includes engine headers only" \
  "$root"

# Comments and strings that mention an include are not includes.
root=$(fixture comments)
printf '// #include "engine/exec/plan.h"\nconst char* s = "#include \\"engine/exec/plan.h\\"";\n' \
  >"$root/engine/core/notes.cpp"
expect "an include in a comment or a string" 0 "" "$root"

((failures == 0)) || { echo "$failures check(s) failed"; exit 1; }
