# SPDX-License-Identifier: MIT
# timeline.gp: Gantt chart of a trace CSV (ops.csv of pacer-sim --out or pacer-train --out, or
# calibrated.csv of pacer-sim replay --out): one row per stage, one box per op coloured by kind
# (legend: F forward, B input gradient, W weight gradient, BW fused backward, U update, and the
# executor's speed reference in grey where the trace has one), with
# the micro-batch number inside every box wide enough for it.
# Usage: gnuplot -e "trace='runs/x/ops.csv'; out='timeline.png'; title='1F1B, 4 stages'" \
#            plots/timeline.gp
if (!exists("trace")) trace = 'ops.csv'
if (!exists("out")) out = 'timeline.png'
# This script's folder, for common.gp (ARG0: the path gnuplot ran it by).
slash_(s, i) = i < 1 ? 0 : (s[i:i] eq '/' ? i : slash_(s, i - 1))
load ARG0[1:slash_(ARG0, strlen(ARG0))].'common.gp'
if (!exists("title")) title = 'Pipeline timeline: '.run_name(trace)
set terminal pngcairo size 1600,600 noenhanced font ',10'
set output out
stats trace skip 1 using 7 nooutput
t_end_ms = STATS_max / 1e6
stats trace skip 1 using 1 nooutput
n_stages = int(STATS_max) + 1
# Speed-reference rows (pacer-train with run.speed_reference): grey, keyed only when present.
stats trace skip 1 using (strcol(10) eq 'reference' ? 1 : 0) nooutput
n_reference = STATS_sum
set title title
set xlabel 'time (ms)'
set ylabel 'pipeline stage'
set xrange [0:t_end_ms * 1.01]
set yrange [n_stages - 0.5:-0.5]
set ytics 1
set key outside right top title 'op'
set style fill solid 0.9 border lc rgb '#333333'
# A label fits when the box is wider than ~1.5% of the time axis.
fits(w_ms) = w_ms > 0.015 * t_end_ms
plot trace skip 1 using (($6 + $7) / 2e6):1:(($7 - $6) / 2e6):(0.4):(strcol(10) eq 'reference' ? 0x999999 : op_color(strcol(2))) \
         with boxxyerror lc rgb variable notitle, \
     '' skip 1 using (($6 + $7) / 2e6):1:((fits(($7 - $6) / 1e6) && strcol(2) ne 'U') ? \
         sprintf('%d', $3) : '') with labels font ',7' tc rgb 'white' notitle, \
     NaN with boxes lc rgb '#4477cc' title 'F forward', \
     NaN with boxes lc rgb '#44aa66' title 'B input grad', \
     NaN with boxes lc rgb '#ee9933' title 'W weight grad', \
     NaN with boxes lc rgb '#228888' title 'BW backward', \
     NaN with boxes lc rgb '#cc3333' title 'U update', \
     NaN with boxes lc rgb '#999999' title (n_reference > 0 ? 'speed reference' : '')
