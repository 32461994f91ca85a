# SPDX-License-Identifier: MIT
# loss.gp: training and validation loss against tokens for one or more pacer-train log.csv
# files (step,tokens,train_loss,val_loss,lr,grad_norm,tokens_per_s,delta_max). The legend
# names each run after the folder holding its log.csv (or the words of names=...).
# train='no' leaves the per-step training losses out (long runs: their noise hides the
# validation curves).
# Usage: gnuplot -e "logs='runs/a/log.csv runs/b/log.csv'; out='loss.png'" plots/loss.gp
if (!exists("logs")) logs = 'log.csv'
if (!exists("out")) out = 'loss.png'
# This script's folder, for common.gp (ARG0: the path gnuplot ran it by).
slash_(s, i) = i < 1 ? 0 : (s[i:i] eq '/' ? i : slash_(s, i - 1))
load ARG0[1:slash_(ARG0, strlen(ARG0))].'common.gp'
if (!exists("names")) names = ''
if (!exists("train")) train = 'yes'
if (!exists("title")) title = 'Training and validation loss'
name_of(i) = words(names) >= i ? word(names, i) : run_name(word(logs, i))
set terminal pngcairo size 1200,700 noenhanced font ',10'
set output out
set title title
set xlabel 'training tokens'
set ylabel 'cross-entropy loss (nats per token)'
set key top right
set grid
# One colour per run: thin lines its per-step training loss (unless train='no'), points its
# validation loss.
val(i) = '< awk -F, '."'NR > 1 && $4 != \"\"'".' '.word(logs, i)
if (train ne 'no') {
    plot for [i=1:words(logs)] word(logs, i) skip 1 using 2:3 with lines lw 0.5 lc i notitle, \
         for [i=1:words(logs)] val(i) using 2:4 with linespoints pt 7 ps 0.7 lw 2 lc i \
             title name_of(i), \
         NaN with lines lw 0.5 lc 'gray40' title 'thin: training loss per step', \
         NaN with linespoints pt 7 ps 0.7 lw 2 lc 'gray40' title 'points: validation loss'
} else {
    set ylabel 'validation loss (nats per token)'
    plot for [i=1:words(logs)] val(i) using 2:4 with linespoints pt 7 ps 0.7 lw 2 lc i \
         title name_of(i)
}
