#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test-gpu-rehearsal.sh SOURCE_ROOT BUILD_ROOT HAVE_CUDA: scripts/gpu-check --rehearse on a
# machine with the CUDA build and no GPU: every command of the real check (the same scenarios,
# keys and ranks, BUILD's programs, the system's mpirun) must get past every configuration,
# scenario and launcher check and stop where the device is first needed, quoting the CUDA
# error; the CPU twin and the replay must pass. Skips (77) without the CUDA build (HAVE_CUDA
# false), with a GPU (run scripts/gpu-check itself), without mpirun or without the data.
set -uo pipefail
src=$1 build=$2 have_cuda=$3
if [ "$have_cuda" != true ]; then
    echo "SKIP: this build has no CUDA backend (meson setup -Dcuda=enabled)"
    exit 77
fi
if timeout 20 nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "SKIP: a GPU is visible: run scripts/gpu-check itself"
    exit 77
fi
if ! command -v mpirun >/dev/null 2>&1; then
    echo "SKIP: no mpirun (scripts/setup installs Open MPI)"
    exit 77
fi
if [ ! -d "$src/.cache/gpt2" ]; then
    echo "SKIP: no data: run scripts/fetch-data"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-gpu-rehearsal-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
OUT="$tmp/out" GPU_CHECK_DIR="$tmp/work" "$src/scripts/gpu-check" --rehearse "$build" \
    >"$tmp/log" 2>&1
rc=$?
cat "$tmp/log"
fails=0
bad() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
[ $rc = 0 ] || bad "gpu-check --rehearse exited $rc"
# Every device row stopped at the device with the CUDA error; the others passed outright.
for key in test-kernels-cuda test-optim-cuda test-slice-cuda test-exec-conformance-cuda \
    pacer-bench-cuda "124M 8-stage 1f1b" "124M 8-stage paci" "mpi 2 ranks, host-staged" \
    "mpi 2 replicas x 2 stages" "mpi 2 replicas own data, overlap" \
    "mpi 2 replicas x 2 stages, NCCL"; do
    line=$(grep -E "^$key +[A-Z]" "$tmp/log" | tail -1)
    [[ $line =~ ^$key\ +PASS\ +stopped\ at\ the\ device:\ .*(no\ usable\ CUDA\ device|no\ CUDA\ device\ is\ visible) ]] ||
        bad "row '$key' is '$line'"
done
grep -qE '^replay 1f1b \(sim / measured\) +PASS +calibrated [0-9]' "$tmp/log" ||
    bad "the replay row did not pass"
grep -qE '^mpi-overlap-cpu: PASS' "$tmp/log" || bad "the CPU twin did not pass"
[[ "$(tail -1 "$tmp/log")" == "gpu-check: PASS, "* ]] || bad "last line: $(tail -1 "$tmp/log")"
echo "$fails failure(s)"
[ $fails = 0 ]
