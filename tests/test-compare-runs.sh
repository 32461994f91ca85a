#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test-compare-runs.sh BUILD_ROOT SOURCE_ROOT: pacer-compare-runs on CPU runs of one small
# command (train-tiny, 2 stages, 2 steps): two launches are the same (0 apart), a run with
# another learning rate is DIFFERENT (exit 1) unless the bounds are loosened past its distance,
# a non-finite loss is DIFFERENT, a missing checkpoint is an error naming the folder, and a
# bad bound is a usage error (2). Skips (77) without the data.
set -uo pipefail
build=$1 src=$2
if [ ! -d "$src/.cache/gpt2" ]; then
    echo "SKIP: no data: run scripts/fetch-data"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-compare-runs-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0
bad() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}
train() { # DIR [--set ...]
    local dir=$1
    shift
    "$build/exec/pacer-train" "$src/scenarios/train-tiny.ini" --quiet --out "$tmp/$dir" \
        --set pipeline.stages=2 --set pipeline.schedule=1f1b --set pipeline.microbatches=2 \
        --set training.steps=2 --set optimizer.warmup_steps=1 \
        --set "data.cache_dir=$src/.cache" "$@" >/dev/null || bad "training $dir failed"
}
compare() { # EXPECTED-RC PATTERN ARGS...: runs it, checks the exit status and the last line
    local want=$1 pattern=$2 rc
    shift 2
    "$build/exec/pacer-compare-runs" "$@" >"$tmp/out" 2>&1
    rc=$?
    echo "--- pacer-compare-runs $* -> $rc"
    cat "$tmp/out"
    [ $rc = "$want" ] || bad "$*: exit $rc, want $want"
    [[ "$(tail -1 "$tmp/out")" == $pattern ]] || bad "$*: last line $(tail -1 "$tmp/out")"
}
train a
train b
train lr --set optimizer.lr=2e-3
compare 0 "pacer-compare-runs: the same: 2 losses within 0 (*), 53 tensors within relative L2 0 (*" \
    "$tmp/a" "$tmp/b"
compare 1 "pacer-compare-runs: DIFFERENT: *" "$tmp/a" "$tmp/lr"
compare 0 "pacer-compare-runs: the same: *" --loss-rtol 1 --weight-rtol 10 "$tmp/a" "$tmp/lr"
# A loss that is not finite is never the same.
cp -r "$tmp/a" "$tmp/nan"
sed -i '2s/^\([^,]*,[^,]*,\)[^,]*/\1nan/' "$tmp/nan/log.csv"
compare 1 "pacer-compare-runs: DIFFERENT: *" "$tmp/a" "$tmp/nan"
rm -rf "$tmp/nan/checkpoints"
compare 1 "pacer-compare-runs: *nan/checkpoints*" "$tmp/a" "$tmp/nan"
compare 2 "pacer-compare-runs: *" --loss-rtol -1 "$tmp/a" "$tmp/b"
echo "$fails failure(s)"
[ $fails = 0 ]
