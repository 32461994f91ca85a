# SPDX-License-Identifier: MIT
# tta.gp: time-to-accuracy chart from pacer-sim tta --out DIR: each run's validation loss
# against wall-clock time (its updates times its step time; curves.csv), with the thresholds
# of tta.csv as dashed lines.
# Usage: gnuplot -e "curves='tta/curves.csv'; out='tta.png'" plots/tta.gp
#   thresholds: optional, default the val_loss values of tta.csv next to curves.csv.
if (!exists("curves")) curves = 'curves.csv'
# This script's folder, for common.gp (ARG0: the path gnuplot ran it by).
slash_(s, i) = i < 1 ? 0 : (s[i:i] eq '/' ? i : slash_(s, i - 1))
load ARG0[1:slash_(ARG0, strlen(ARG0))].'common.gp'
if (!exists("out")) out = dir_of(curves).'/tta.png'
if (!exists("title")) title = 'Time to accuracy: validation loss against training time'
runs = system(sprintf("awk -F, 'NR > 1 && !($1 in s) { s[$1] = 1; printf \"%%s \", $1 }' %s", \
    curves))
if (!exists("thresholds")) thresholds = system(sprintf("awk -F, 'NR > 1 && !($7 in s) " . \
    "{ s[$7] = 1; printf \"%%s \", $7 }' %s/tta.csv 2>/dev/null", dir_of(curves)))
rows_of(r) = sprintf("< awk -F, 'NR == 1 || $1 == \"%s\"' %s", r, curves)
set datafile columnheaders
set terminal pngcairo size 1200,700 noenhanced font ',10'
set output out
set title title
set xlabel 'training time (s)'
set ylabel 'validation loss (nats per token)'
set grid
set key top right opaque box
do for [t in thresholds] {
    set arrow from graph 0, first t to graph 1, first t nohead dt 2 lc rgb '#888888'
    set label 'threshold '.sprintf('%g', real(t)) at graph 0.01, first t offset 0, 0.6 tc rgb '#555555' font ',9'
}
plot for [i=1:words(runs)] rows_of(word(runs, i)) using 'time_s':'val_loss' \
     with linespoints pt 7 ps 0.6 lw 2 lc rgb run_color(i) title word(runs, i), \
     NaN with lines dt 2 lc rgb '#888888' title 'thresholds'
