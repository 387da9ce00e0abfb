#!/usr/bin/env bash
# Runs a test binary as 2 ranks on this machine: mpirun2.sh MPIEXEC BINARY [ARGS...]
# --oversubscribe: 2 ranks even where there are fewer cores (CI); --allow-run-as-root where
# the tests run as root (containers): OpenMPI refuses root without it.
set -euo pipefail
mpiexec=$1
shift
args=(-np 2 --oversubscribe)
[[ $(id -u) -eq 0 ]] && args+=(--allow-run-as-root)
exec "$mpiexec" "${args[@]}" "$@"
