# SPDX-License-Identifier: MIT
# replay.gp: predicted against measured, op by op, from the compare.csv of pacer-sim replay
# --out: left, each op's start as measured and as the calibrated simulator predicts it; right,
# each op's measured duration against the calibrated one (the stage's median for its kind).
# Points on the diagonal are exact predictions. Colour: op kind.
# Usage: gnuplot -e "compare='runs/x/pred/compare.csv'; out='replay.png'" plots/replay.gp
if (!exists("compare")) compare = 'compare.csv'
# This script's folder, for common.gp (ARG0: the path gnuplot ran it by).
slash_(s, i) = i < 1 ? 0 : (s[i:i] eq '/' ? i : slash_(s, i - 1))
load ARG0[1:slash_(ARG0, strlen(ARG0))].'common.gp'
if (!exists("out")) out = dir_of(compare).'/replay.png'
if (!exists("title")) title = 'Predicted vs measured, op by op: '.run_name(compare)
set datafile columnheaders
set terminal pngcairo size 1400,650 noenhanced font ',10'
set output out
set multiplot layout 1,2 title title
set grid
set key top left opaque box
ms(c) = column(c) / 1e6
# The legend lists only the op kinds the run has.
kinds = ''
do for [k in 'F B W BW U'] {
    stats compare using (strcol(2) eq k ? 1 : 0) nooutput
    kinds = kinds.(STATS_sum > 0 ? k : '-').' '
}
key_of(i) = word(kinds, i) eq '-' ? '' : word(kinds, i)
set title 'Op start'
set xlabel 'measured start (ms)'
set ylabel 'calibrated prediction (ms)'
plot compare using (ms('measured_start_ns')):(ms('calibrated_start_ns')):(op_color(strcol(2))) \
         with points pt 7 ps 0.5 lc rgb variable notitle, \
     x with lines lc rgb '#888888' dt 2 title 'exact', \
     NaN with points pt 7 lc rgb '#4477cc' title key_of(1), \
     NaN with points pt 7 lc rgb '#44aa66' title key_of(2), \
     NaN with points pt 7 lc rgb '#ee9933' title key_of(3), \
     NaN with points pt 7 lc rgb '#228888' title key_of(4), \
     NaN with points pt 7 lc rgb '#cc3333' title key_of(5)
set title 'Op duration'
set xlabel 'measured duration (ms)'
set ylabel 'calibrated duration (ms)'
plot compare using (ms('measured_end_ns') - ms('measured_start_ns')): \
         (ms('calibrated_end_ns') - ms('calibrated_start_ns')):(op_color(strcol(2))) \
         with points pt 7 ps 0.5 lc rgb variable notitle, \
     x with lines lc rgb '#888888' dt 2 title 'exact'
unset multiplot
