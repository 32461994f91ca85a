# SPDX-License-Identifier: MIT
# memory.gp: each stage's peak memory by category (weights, gradients, optimizer state,
# stashed weight copies, activations at the moment of the peak), stacked, in GiB, from the
# stages.csv of pacer-sim --out.
# Usage: gnuplot -e "stages='runs/sim/stages.csv'; out='memory.png'" plots/memory.gp
if (!exists("stages")) stages = 'stages.csv'
# This script's folder, for common.gp (ARG0: the path gnuplot ran it by).
slash_(s, i) = i < 1 ? 0 : (s[i:i] eq '/' ? i : slash_(s, i - 1))
load ARG0[1:slash_(ARG0, strlen(ARG0))].'common.gp'
if (!exists("out")) out = dir_of(stages).'/memory.png'
if (!exists("title")) title = 'Peak memory per stage by category: '.run_name(stages)
set datafile columnheaders
set terminal pngcairo size 1100,650 noenhanced font ',10'
set output out
set title title
set xlabel 'pipeline stage'
set ylabel 'memory at the stage''s peak (GiB, 2^30 bytes)'
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border lc rgb '#333333'
set boxwidth 0.7
set key outside right top
set grid ytics
set yrange [0:*]
gib(c) = column(c) / 2.0**30
plot stages using (gib('weights_bytes')):xtic(1) title 'weights (bf16 + fp32 master)' \
         lc rgb '#4477cc', \
     '' using (gib('grads_bytes')) title 'gradients' lc rgb '#66ccee', \
     '' using (gib('optim_bytes')) title 'optimizer state' lc rgb '#228833', \
     '' using (gib('stash_peak_bytes')) title 'stashed weights' lc rgb '#ccbb44', \
     '' using (gib('activation_peak_bytes')) title 'activations' lc rgb '#ee6677'
