#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test-gpu-check.sh SOURCE_ROOT: scripts/gpu-check's own logic, without a GPU, through its
# --dry-run stubs: every row, the exit status and at most 7 files in $OUT when all pass; a
# failure, a skip (a FAIL that quotes the reason) and hangs (TIMEOUT rows) within a small
# budget; a budget so small that every step hangs or never starts; one GPU (NCCL not run, said
# in the summary line); and a TERM in the middle. Each run must end within its
# budget (plus the kill grace) and print the table last.
set -euo pipefail
src=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-gpu-check-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
bad() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

# check NAME BUDGET STUBS: runs the dry run; sets rc, secs and leaves the output in $tmp/NAME.
check() {
    local name=$1 budget=$2 stubs=$3 start
    start=$(date +%s)
    set +e
    OUT="$tmp/$name-out" GPU_CHECK_DIR="$tmp/$name-work" GPU_CHECK_BUDGET_S=$budget \
        GPU_CHECK_KILL_S=1 GPU_CHECK_STUBS="$stubs" "$src/scripts/gpu-check" --dry-run \
        >"$tmp/$name" 2>&1
    rc=$?
    set -e
    secs=$(($(date +%s) - start))
    echo "--- $name: exit $rc after $secs s (budget $budget s)"
    cat "$tmp/$name"
}
# row NAME KEY RESULT [DETAIL-PATTERN]: the table row of KEY has RESULT (and DETAIL).
row() {
    local line
    line=$(grep -E "^$2 +[A-Z]" "$tmp/$1" | tail -1 || true)
    [[ $line =~ ^$2\ +$3(\ |$) ]] || bad "$1: row '$2' is '$line', want $3"
    if [ $# -gt 3 ] && [[ ! $line == *"$4"* ]]; then
        bad "$1: row '$2' is '$line', want detail '$4'"
    fi
}
last_is() { # NAME PATTERN: the output's last line
    [[ "$(tail -1 "$tmp/$1")" == $2 ]] || bad "$1: last line '$(tail -1 "$tmp/$1")', want $2"
}

# 1. Every stub passes: every row PASS, exit 0.
check pass 120 ""
[ $rc = 0 ] || bad "pass: exit $rc, want 0"
for key in setup test-kernels-cuda test-optim-cuda test-slice-cuda test-exec-conformance-cuda \
    pacer-bench-cuda "124M 8-stage 1f1b" "124M 8-stage paci" "replay 1f1b \(sim / measured\)" \
    "mpi 2 ranks, host-staged" "mpi 2 replicas x 2 stages" "mpi 2 replicas own data, overlap" \
    "mpi 2 replicas x 2 stages, NCCL"; do
    row pass "$key" PASS
done
[ "$(grep -cE '^[^ ].* (PASS|FAIL|TIMEOUT|NOTRUN)' "$tmp/pass")" -ge 13 ] || bad "pass: rows"
# $OUT: at most 7 files, one under the 8 the device tool brings back.
[ "$(find "$tmp/pass-out" -type f | wc -l)" -le 7 ] || bad "pass: more than 7 files in OUT"
last_is pass "gpu-check: PASS, *"

# 2. A failure, a skip, two hangs: the skip fails with its reason, the hangs are killed within
# their shares, a failed 1f1b run leaves the replay NOTRUN, exit 1, within the budget.
check mixed 30 \
    "test-optim-cuda=fail test-slice-cuda=skip test-exec-conformance-cuda=hang train-1f1b=hang"
[ $rc = 1 ] || bad "mixed: exit $rc, want 1"
[ $secs -le 31 ] || bad "mixed: $secs s, over the 30 s budget"
row mixed test-kernels-cuda PASS
row mixed test-optim-cuda 'FAIL\(3\)' "stub: failing"
row mixed test-slice-cuda FAIL "skipped: no usable CUDA device: stub driver too old"
row mixed test-exec-conformance-cuda TIMEOUT "killed after its"
row mixed pacer-bench-cuda PASS
row mixed "124M 8-stage 1f1b" TIMEOUT
row mixed "124M 8-stage paci" PASS
row mixed "replay 1f1b \(sim / measured\)" NOTRUN "the 1f1b run failed"
row mixed "mpi 2 ranks, host-staged" PASS
row mixed "mpi 2 replicas x 2 stages" PASS
row mixed "mpi 2 replicas own data, overlap" PASS
last_is mixed "gpu-check: FAIL, *"

# 3. Everything hangs in 10 s: no row passes but setup, and the check still ends in time with
# its table.
all=""
for k in test-kernels-cuda test-optim-cuda test-slice-cuda test-exec-conformance-cuda \
    pacer-bench-cuda train-1f1b train-paci replay-1f1b mpi-one mpi-two mpi-replicas mpi-overlap \
    mpi-overlap-cpu mpi-nccl; do
    all="$all $k=hang"
done
check hang 10 "$all"
[ $rc = 1 ] || bad "hang: exit $rc, want 1"
[ $secs -le 11 ] || bad "hang: $secs s, over the 10 s budget"
row hang test-kernels-cuda '(TIMEOUT|NOTRUN)'
row hang test-exec-conformance-cuda '(TIMEOUT|NOTRUN)'
row hang "mpi 2 ranks, host-staged" '(TIMEOUT|NOTRUN)'
row hang "mpi 2 replicas x 2 stages" '(TIMEOUT|NOTRUN)'
[ "$(grep -cE '^[^ ].* (TIMEOUT|NOTRUN) ' "$tmp/hang")" -ge 8 ] || bad "hang: TIMEOUT rows"
last_is hang "gpu-check: FAIL, *"

# 4. One GPU: the NCCL step is a SKIP row that does not fail the check, and the summary line
# says that NCCL was not run (two GPUs: it does not).
GPU_CHECK_STUB_GPUS=1 check one-gpu 120 ""
[ $rc = 0 ] || bad "one-gpu: exit $rc, want 0"
row one-gpu "mpi 2 replicas x 2 stages, NCCL" SKIP "skipped: needs 2 GPUs"
last_is one-gpu "gpu-check: PASS, NCCL not run (one GPU), *"
[[ "$(tail -1 "$tmp/pass")" != *NCCL* ]] || bad "pass: the summary line mentions NCCL"
# A failing own-data run names its side.
check overlap-fail 120 "mpi-overlap-cpu=fail"
row overlap-fail "mpi 2 replicas own data, overlap" 'FAIL\(3\)' "cpu: stub: failing"

# 5. TERM while a step hangs: the step is stopped, the table still comes, exit 1.
set +e
OUT="$tmp/term-out" GPU_CHECK_DIR="$tmp/term-work" GPU_CHECK_BUDGET_S=100 GPU_CHECK_KILL_S=1 \
    GPU_CHECK_STUBS="test-kernels-cuda=hang" "$src/scripts/gpu-check" --dry-run >"$tmp/term" 2>&1 &
pid=$!
sleep 3
kill -TERM $pid
start=$(date +%s)
wait $pid
rc=$?
set -e
echo "--- term: exit $rc, $(($(date +%s) - start)) s after the TERM"
cat "$tmp/term"
[ $rc = 1 ] || bad "term: exit $rc, want 1"
[ $(($(date +%s) - start)) -le 4 ] || bad "term: slow to stop"
row term gpu-check FAIL "interrupted by a signal"
last_is term "gpu-check: FAIL, *"

echo "$fails failure(s)"
[ $fails = 0 ]
