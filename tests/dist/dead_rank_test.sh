#!/usr/bin/env bash
# kill -9 of rank 1 in a 2-rank job: rank 0 must name it (rank and host) and end the job,
# under both launches tests/dist/dead_rank.cpp describes.
#   dead_rank_test.sh MPIEXEC DEAD_RANK_BINARY
set -uo pipefail
mpiexec=$1
bin=$2
here=$(cd "$(dirname "$0")" && pwd)
host=$(hostname)
fail=0
run() {  # run MODE EXPECTED_TEXT MAX_SECONDS [MPIRUN ARGS...]
  local mode=$1 want=$2 max=$3
  shift 3
  local out start end rc
  start=$(date +%s%N)
  out=$(timeout 60 "$here/mpirun2.sh" "$mpiexec" "$@" "$bin" "$mode" 2>&1)
  rc=$?
  end=$(date +%s%N)
  local took=$(((end - start) / 1000000))  # ms
  if [[ $rc -eq 0 || $rc -eq 124 ]]; then
    echo "FAIL $mode: mpirun exited $rc (expected the job to fail, within 60 s)"
    fail=1
  fi
  if ! grep -qF "named: MPI collective: rank 1 (host $host) did not answer $want" <<<"$out"; then
    echo "FAIL $mode: rank 0 did not name rank 1 (host $host) as expected ('$want')"
    fail=1
  fi
  if ((took > max * 1000)); then
    echo "FAIL $mode: the job took ${took} ms (at most $max s)"
    fail=1
  fi
  echo "--- $mode (mpirun exit $rc, ${took} ms):"
  grep -E "^(named|after):" <<<"$out"
  [[ $fail -eq 0 ]] || echo "$out"
}
run deadline "within 2 s: it died or hangs" 20 --mca orte_abort_on_non_zero_status 0
run sigterm "before the wait was cancelled" 20
exit $fail
