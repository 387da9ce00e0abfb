#!/usr/bin/env bash
# The link-level twin of scripts/check-layers: no engine library calls a function that only a
# layer above it defines (a declaration in a lower header, the body in a higher layer: the
# include check cannot see it, and a static link only works by the order of the archives).
# Checked on the built archives, then on a fixture pair that must fail.
#   tests/layers/link_layers_test.sh RULES CXX layer=libmls_layer.a [layer=... ...]
set -uo pipefail

rules=$1
cxx=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

declare -A below
while IFS= read -r line || [[ -n $line ]]; do
  line=${line%%#*}
  [[ $line == *:* ]] || continue
  layer=${line%%:*}
  layer=${layer//[[:space:]]/}
  read -r -a names <<<"${line#*:}"
  below[$layer]=" ${names[*]} "
done <"$rules"

# check OUT_DIR layer=archive...: prints one line per symbol a layer takes from above it.
check() {
  local dir=$1 l h s n
  shift
  declare -A lib=()
  for a in "$@"; do lib[${a%%=*}]=${a#*=}; done
  for l in "${!lib[@]}"; do
    # Strong definitions (T, D, B, R); weak ones (inline functions, templates) every user has.
    nm -g -P --defined-only "${lib[$l]}" 2>/dev/null | awk 'NF >= 2 && $2 ~ /^[TDBR]$/ {print $1}' |
      LC_ALL=C sort -u >"$dir/$l.strong"
    nm -g -P --defined-only "${lib[$l]}" 2>/dev/null | awk 'NF >= 2 && $2 != "U" {print $1}' |
      LC_ALL=C sort -u >"$dir/$l.any"
    nm -g -P -u "${lib[$l]}" 2>/dev/null | awk '{print $1}' | LC_ALL=C sort -u >"$dir/$l.undef"
  done
  for l in $(printf '%s\n' "${!lib[@]}" | LC_ALL=C sort); do
    # What l needs from elsewhere, less what the layers it may use define.
    LC_ALL=C comm -23 "$dir/$l.undef" "$dir/$l.any" >"$dir/need"
    for h in "${!lib[@]}"; do
      [[ $h == "$l" || ${below[$l]:-} != *" $h "* ]] && continue
      LC_ALL=C comm -23 "$dir/need" "$dir/$h.any" >"$dir/rest"
      mv "$dir/rest" "$dir/need"
    done
    for h in $(printf '%s\n' "${!lib[@]}" | LC_ALL=C sort); do
      [[ $h == "$l" ]] && continue
      while IFS= read -r s; do
        n=$(c++filt "$s" 2>/dev/null || echo "$s")
        echo "$l uses $n, which only $h (above it) defines"
      done < <(LC_ALL=C comm -12 "$dir/need" "$dir/$h.strong")
    done
  done
}

failures=0
mkdir -p "$tmp/real"
out=$(check "$tmp/real" "$@")
if [[ -n $out ]]; then
  printf 'FAILED: the engine libraries take symbols from layers above them:\n%s\n' "$out"
  failures=$((failures + 1))
else
  echo "ok: no engine library uses a symbol that only a layer above it defines ($# libraries)"
fi

# A fixture: core declares engine_init, ops defines it, and core calls it.
mkdir -p "$tmp/fix"
printf 'namespace mls { void engine_init(); void start() { engine_init(); } }\n' >"$tmp/fix/core.cpp"
printf 'namespace mls { void engine_init() {} }\n' >"$tmp/fix/ops.cpp"
for l in core ops; do
  "$cxx" -c "$tmp/fix/$l.cpp" -o "$tmp/fix/$l.o" && ar rcs "$tmp/fix/lib$l.a" "$tmp/fix/$l.o" ||
    { echo "FAILED: cannot build the fixture with $cxx"; exit 1; }
done
want="core uses mls::engine_init(), which only ops (above it) defines"
out=$(check "$tmp/fix" core="$tmp/fix/libcore.a" ops="$tmp/fix/libops.a")
if [[ $out == "$want" ]]; then
  echo "ok: a fixture whose core calls a function defined in ops fails: $want"
else
  printf 'FAILED: the fixture gave:\n%s\nwanted:\n%s\n' "$out" "$want"
  failures=$((failures + 1))
fi

((failures == 0)) || exit 1
