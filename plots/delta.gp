# SPDX-License-Identifier: MIT
# delta.gp: histogram of the weight-version drift per stage: for every micro-batch's backward
# (B or BW row of a trace: pacer-sim --out or pacer-train --out ops.csv), the optimizer
# updates its stage applied between the micro-batch's forward and that backward,
# version_b - version_f. One bar colour per stage.
# Usage: gnuplot -e "trace='runs/x/ops.csv'; out='delta.png'" plots/delta.gp
#   table='FILE': also writes the bars (x, count) to FILE, one block per stage (for tests).
if (!exists("trace")) trace = 'ops.csv'
# This script's folder, for common.gp (ARG0: the path gnuplot ran it by).
slash_(s, i) = i < 1 ? 0 : (s[i:i] eq '/' ? i : slash_(s, i - 1))
load ARG0[1:slash_(ARG0, strlen(ARG0))].'common.gp'
if (!exists("out")) out = dir_of(trace).'/delta.png'
if (!exists("title")) title = 'Weight-version drift per stage: '.run_name(trace)
stats trace skip 1 using 1 nooutput
n_stages = int(STATS_max) + 1
stats trace skip 1 using ((strcol(2) eq 'B' || strcol(2) eq 'BW') ? $9 - $8 : NaN) nooutput
d_max = int(STATS_max)
set terminal pngcairo size 1100,600 noenhanced font ',10'
set output out
set title title
set xlabel 'drift Δ (optimizer updates between a micro-batch''s forward and its backward)'
set ylabel 'micro-batches (backwards)'
set xrange [-0.6:d_max + 0.6]
set xtics 1
set yrange [0:*]
set grid ytics
set key outside right top title 'stage'
set style fill solid 0.85 border lc rgb '#333333'
w = 0.8 / n_stages
set boxwidth w absolute
# Every row counts, with weight 1 when it is a backward of stage s and 0 otherwise: rows left
# out as NaN would cut gnuplot's frequency sums into one-row pieces (every bar 1 high).
back(s) = $1 == s && (strcol(2) eq 'B' || strcol(2) eq 'BW')
bar_x(s, d) = d - 0.4 + (s + 0.5) * w
if (exists("table")) set table table
plot for [s=0:n_stages - 1] trace skip 1 \
     using (bar_x(s, back(s) ? $9 - $8 : 0)):(back(s) ? 1 : 0) smooth frequency with boxes \
     lc rgb run_color(s + 1) \
     title sprintf('%d', s)
