# SPDX-License-Identifier: MIT
# timeline.gp: Gantt chart of a trace CSV (ops.csv of pacer-sim --out or pacer-train --out, or
# calibrated.csv of pacer-sim replay --out): one row per stage, one box per op coloured by kind
# (legend: F forward, B input gradient, W weight gradient, BW fused backward, U update, and the
# executor's speed reference in grey where the trace has one), with
# the micro-batch number inside every box wide enough for it.
# Usage: gnuplot -e "trace='runs/x/ops.csv'; out='timeline.png'; title='1F1B, 4 stages'" \
#            plots/timeline.gp
#   xmin=MS, xmax=MS: the time axis shown (default the whole trace): zoom into a long run, or
#   give two timelines meant to be compared the same scale.
#   table='FILE': also writes the legend's entries to FILE, one per line (for tests).
if (!exists("trace")) trace = 'ops.csv'
# This script's folder, for common.gp (ARG0: the path gnuplot ran it by).
slash_(s, i) = i < 1 ? 0 : (s[i:i] eq '/' ? i : slash_(s, i - 1))
load ARG0[1:slash_(ARG0, strlen(ARG0))].'common.gp'
if (!exists("out")) out = dir_of(trace).'/timeline.png'
if (!exists("title")) title = 'Pipeline timeline: '.run_name(trace)
width_px = 1600
set terminal pngcairo size width_px,600 noenhanced font ',10'
set output out
stats trace skip 1 using 7 nooutput
if (!exists("xmin")) xmin = 0
if (!exists("xmax")) xmax = STATS_max / 1e6 * 1.01
stats trace skip 1 using 1 nooutput
n_stages = int(STATS_max) + 1
# The legend lists only the kinds the trace has: count the rows of each (the speed-reference
# rows of pacer-train with run.speed_reference are grey).
has(what) = (strcol(2) eq what && strcol(10) ne 'reference') ? 1 : 0
stats trace skip 1 using (has('F')) nooutput
n_f = STATS_sum
stats trace skip 1 using (has('B')) nooutput
n_b = STATS_sum
stats trace skip 1 using (has('W')) nooutput
n_w = STATS_sum
stats trace skip 1 using (has('BW')) nooutput
n_bw = STATS_sum
stats trace skip 1 using (has('U')) nooutput
n_u = STATS_sum
stats trace skip 1 using (strcol(10) eq 'reference' ? 1 : 0) nooutput
n_reference = STATS_sum
key_f = n_f > 0 ? 'F forward' : ''
key_b = n_b > 0 ? 'B input grad' : ''
key_w = n_w > 0 ? 'W weight grad' : ''
key_bw = n_bw > 0 ? 'BW backward' : ''
key_u = n_u > 0 ? 'U update' : ''
key_ref = n_reference > 0 ? 'speed reference' : ''
# (table: the entries, one per line; blank lines for the kinds left out)
if (exists("table")) {
    set print table
    print key_f."\n".key_b."\n".key_w."\n".key_bw."\n".key_u."\n".key_ref
    unset print
}
set title title
set xlabel 'time (ms)'
set ylabel 'pipeline stage'
set xrange [xmin:xmax]
set yrange [n_stages - 0.5:-0.5]
set ytics 1
set key outside right top title 'op'
set style fill solid 0.9 border lc rgb '#333333'
# A micro-batch number fits in a box at least as wide as its digits at font size 7 (about 6
# pixels each, a little margin), the plot area being about 85% of the picture's width.
fits(w_ms, mb) = w_ms / (xmax - xmin) * 0.85 * width_px >= 6 * strlen(sprintf('%d', mb)) + 4
plot trace skip 1 using (($6 + $7) / 2e6):1:(($7 - $6) / 2e6):(0.4):(strcol(10) eq 'reference' ? 0x999999 : op_color(strcol(2))) \
         with boxxyerror lc rgb variable notitle, \
     '' skip 1 using (($6 + $7) / 2e6):1:((fits(($7 - $6) / 1e6, $3) && strcol(2) ne 'U' && \
         strcol(10) ne 'reference') ? sprintf('%d', $3) : '') \
         with labels font ',7' tc rgb 'white' notitle, \
     NaN with boxes lc rgb '#4477cc' title key_f, \
     NaN with boxes lc rgb '#44aa66' title key_b, \
     NaN with boxes lc rgb '#ee9933' title key_w, \
     NaN with boxes lc rgb '#228888' title key_bw, \
     NaN with boxes lc rgb '#cc3333' title key_u, \
     NaN with boxes lc rgb '#999999' title key_ref
