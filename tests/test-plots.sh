#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test-plots.sh BUILD_ROOT SOURCE_ROOT: scripts/plots draws every plot its inputs allow. Makes
# a simulator run (--out), a sweep, a replay of that run, a tta table and a plan --out, runs
# scripts/plots on them and checks that each expected file is a PNG; checks the drift
# histogram's counts against the trace and plan.gp's points against plan.csv (gnuplot's
# table), the timeline's legend, where pictures go by default and that checkpoint units' logs
# are not drawn as runs.
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
"$sim" plan "$src/tests/data/sim/cluster.ini" --gpus 32 --headroom 60 --out "$tmp/plan" >/dev/null
mkdir -p "$tmp/logs/paci-a4"
cp "$t/p4/log.csv" "$tmp/logs/paci-a4/"

"$src/scripts/plots" "$tmp" >"$tmp/list"
for png in run/timeline.png run/delta.png run/memory.png run/replay/replay.png \
    run/replay/timeline-calibrated.png sweep.png tta/tta.png loss.png plan/plan.png; do
    grep -qx "$tmp/$png" "$tmp/list" || { echo "scripts/plots did not list $png"; exit 1; }
    [ "$(head -c 8 "$tmp/$png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
        { echo "$png is not a PNG"; exit 1; }
done

# The drift histogram's bars are the counts of backwards per stage and drift (delta.gp's
# table), as counted from the trace.
gp=$src/plots
gnuplot -e "trace='$tmp/run/ops.csv'; out='$tmp/d.png'; table='$tmp/delta.txt'" "$gp/delta.gp"
awk -F, 'NR > 1 && ($2 == "B" || $2 == "BW") { c[$1 " " $9 - $8]++ }
         END { for (k in c) print k, c[k] }' "$tmp/run/ops.csv" | sort >"$tmp/want"
n=$(awk -F, 'NR > 1 && $1 + 1 > n { n = $1 + 1 } END { print n }' "$tmp/run/ops.csv")
awk -v n="$n" '/^# Curve [0-9]+ of/ { s = $3 } /^ *-?[0-9]/ && $2 > 0 {
        d = $1 + 0.4 - (s + 0.5) * 0.8 / n; printf "%d %d %d\n", s, (d < 0 ? d - 0.5 : d + 0.5), $2 }' \
    "$tmp/delta.txt" | sort >"$tmp/got"
[ "$(wc -l <"$tmp/want")" -gt 2 ] || { echo "the drift trace has too few bars to test"; exit 1; }
diff "$tmp/want" "$tmp/got" || { echo "delta.gp's bars are not the trace's counts"; exit 1; }

# plan.gp draws every row of plan.csv once: per schedule its fitting and over-memory points,
# and the rank-1 layout at its peak memory (GiB) and throughput (plan.gp's table).
gnuplot -e "plan='$tmp/plan/plan.csv'; out='$tmp/p.png'; table='$tmp/plan.txt'" "$gp/plan.gp" \
    2>/dev/null
awk -F, 'NR > 1 { s = $3; gsub(/"/, "", s); c[s ($2 == 1 ? "" : " over")]++ }
         END { for (k in c) print k, c[k] }' "$tmp/plan/plan.csv" | sort >"$tmp/want"
awk '/^# Curve title:/ { t = $4; for (i = 5; i <= NF; i++) t = t " " $i; gsub(/"/, "", t) }
     /^ *[0-9]/ { c[t]++ } END { for (k in c) if (k != "rank 1") print k, c[k] }' \
    "$tmp/plan.txt" | sort >"$tmp/got"
grep -q ' over ' "$tmp/want" || { echo "the plan has no layout over memory to test"; exit 1; }
diff "$tmp/want" "$tmp/got" || { echo "plan.gp's points are not plan.csv's rows"; exit 1; }
want=$(awk -F, '$1 == 1 { printf "%.4f %.6g\n", $19 / 2^30, $17 }' "$tmp/plan/plan.csv")
got=$(awk '/^# Curve title: "rank 1"/ { r = 1; next } r && /^ *[0-9]/ {
           printf "%.4f %.6g\n", $1, $2; exit }' "$tmp/plan.txt")
[ -n "$want" ] && [ "$want" = "$got" ] ||
    { echo "plan.gp marks '$got' as rank 1, plan.csv says '$want'"; exit 1; }

# Timelines key only the op kinds their trace holds.
legend() {
    gnuplot -e "trace='$1'; out='$tmp/t.png'; table='$tmp/keys.txt'" "$gp/timeline.gp"
    grep -v '^$' "$tmp/keys.txt" | tr '\n' ','
}
"$sim" "$src/tests/data/sim/1f1b.ini" --out "$tmp/f" >/dev/null
[ "$(legend "$tmp/f/ops.csv")" = "F forward,BW backward,U update," ] ||
    { echo "1f1b legend: $(legend "$tmp/f/ops.csv")"; exit 1; }
"$sim" "$src/tests/data/sim/1f1b.ini" --set pipeline.schedule=zb-h1 --out "$tmp/z" >/dev/null
[ "$(legend "$tmp/z/ops.csv")" = "F forward,B input grad,W weight grad,U update," ] ||
    { echo "zb-h1 legend: $(legend "$tmp/z/ops.csv")"; exit 1; }

# Without out=..., a picture goes next to its input.
gnuplot -e "trace='$tmp/f/ops.csv'" "$gp/delta.gp"
[ -f "$tmp/f/delta.png" ] || { echo "delta.gp did not write next to its trace"; exit 1; }

# A checkpoint unit's copy of log.csv is not a run of its own.
mkdir -p "$tmp/units/checkpoints/step-00000003"
cp "$t/p4/log.csv" "$tmp/units/checkpoints/step-00000003/"
[ -z "$("$src/scripts/plots" "$tmp/units")" ] || { echo "drew a checkpoint unit's log"; exit 1; }

# A folder without anything to plot: nothing drawn, still success.
mkdir "$tmp/empty"
[ -z "$("$src/scripts/plots" "$tmp/empty")" ] || { echo "drew something from nothing"; exit 1; }
echo "ok: $(wc -l <"$tmp/list") plots"
