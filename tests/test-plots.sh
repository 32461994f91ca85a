#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test-plots.sh BUILD_ROOT SOURCE_ROOT: scripts/plots draws every plot its inputs allow. Makes
# a simulator run (--out), a sweep, a replay of that run and a tta table, runs scripts/plots on
# them and checks that each expected file is a PNG. Says nothing about what the pictures show.
# Exit 77 (skipped) without gnuplot.
set -euo pipefail
build=$1
src=$2
command -v gnuplot >/dev/null 2>&1 || { echo "skip: gnuplot not installed"; exit 77; }
sim=$build/sim/pacer-sim
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-plots-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$sim" "$src/tests/data/sim/paci.ini" --out "$tmp/run" >/dev/null
"$sim" replay "$tmp/run/scenario.ini" --trace "$tmp/run/ops.csv" --out "$tmp/run/replay" \
    >/dev/null
"$sim" sweep "$src/tests/data/sim/1f1b.ini" --sweep pipeline.microbatches=4,8 \
    --sweep pipeline.schedule=1f1b,zb-h1 --out "$tmp/sweep.csv"
t=$src/tests/data/tta
"$sim" tta "$t/f4" "$t/p4" --threshold 4.5 --step-ms f4=100 --step-ms p4=50 \
    --out "$tmp/tta" >/dev/null
mkdir -p "$tmp/logs/paci-a4"
cp "$t/p4/log.csv" "$tmp/logs/paci-a4/"

"$src/scripts/plots" "$tmp" >"$tmp/list"
for png in run/timeline.png run/delta.png run/memory.png run/replay/replay.png \
    run/replay/timeline-calibrated.png sweep.png tta/tta.png loss.png; do
    grep -qx "$tmp/$png" "$tmp/list" || { echo "scripts/plots did not list $png"; exit 1; }
    [ "$(head -c 8 "$tmp/$png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
        { echo "$png is not a PNG"; exit 1; }
done
# A folder without anything to plot: nothing drawn, still success.
mkdir "$tmp/empty"
[ -z "$("$src/scripts/plots" "$tmp/empty")" ] || { echo "drew something from nothing"; exit 1; }
echo "ok: $(wc -l <"$tmp/list") plots"
