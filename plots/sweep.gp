# SPDX-License-Identifier: MIT
# sweep.gp: throughput and bubble against a swept key (the micro-batch count by default), one
# line per value of a second key (the schedule), from a pacer-sim sweep CSV.
# Usage: gnuplot -e "sweep='sweep.csv'; out='sweep.png'" plots/sweep.gp
#   xkey='pipeline.microbatches' (the x column), by='pipeline.schedule' (one line per value;
#   '' for one line), xlabel, title: optional.
if (!exists("sweep")) sweep = 'sweep.csv'
# This script's folder, for common.gp (ARG0: the path gnuplot ran it by).
slash_(s, i) = i < 1 ? 0 : (s[i:i] eq '/' ? i : slash_(s, i - 1))
load ARG0[1:slash_(ARG0, strlen(ARG0))].'common.gp'
if (!exists("out")) out = dir_of(sweep).'/sweep.png'
if (!exists("xkey")) xkey = 'pipeline.microbatches'
if (!exists("by")) by = 'pipeline.schedule'
if (!exists("xlabel")) xlabel = 'micro-batches per optimizer step (m, or a for paci)'
if (!exists("title")) title = 'Throughput and bubble against '.xkey
set datafile columnheaders
# The values of column 'by' in order of first appearance (rows with an error left out) and,
# per value, the rows that hold it (a pipe through awk: a line needs its rows in a row).
if (by eq '') {
    groups = 'all'
    rows_of(g) = sweep
} else {
    bycol = int(system(sprintf("awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) { h = $i; " . \
        "gsub(/\"/, \"\", h); if (h == \"%s\") print i } exit }' %s", by, sweep)))
    groups = system(sprintf("awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) " . \
        "if ($i == \"error\") e = i; next } $e == \"\" { v = $%d; gsub(/\"/, \"\", v); " . \
        "if (!(v in s)) { s[v] = 1; printf \"%%s \", v } }' %s", bycol, sweep))
    rows_of(g) = sprintf("< awk -F, 'NR == 1 { print; next } { v = $%d; " . \
        "gsub(/\"/, \"\", v); if (v == \"%s\") print }' %s", bycol, g, sweep)
}
set terminal pngcairo size 1400,600 noenhanced font ',10'
set output out
set multiplot layout 1,2 title title
set key top left opaque box
set grid
set logscale x 2
set xlabel xlabel
set ylabel 'throughput (tokens/s)'
set title 'Steady-state throughput'
plot for [g in groups] rows_of(g) using (column(xkey)):'throughput_tokens_per_s' \
     with linespoints pt 7 lw 2 title g
set ylabel 'bubble (fraction of the step)'
set title 'Bubble: (C - m(F+B+W)) / C'
set yrange [0:*]
plot for [g in groups] rows_of(g) using (column(xkey)):'bubble_fraction' \
     with linespoints pt 7 lw 2 title g
unset multiplot
