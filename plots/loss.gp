# SPDX-License-Identifier: MIT
# loss.gp: training and validation loss against tokens for one or more pacer-train log.csv
# files (step,tokens,train_loss,val_loss,lr,grad_norm,tokens_per_s,delta_max). The legend
# names each run after the folder holding its log.csv (or the words of names=...).
# train='no' leaves the per-step training losses out (long runs: their noise hides the
# validation curves); gaps='yes' adds a panel of each run's gap to the first run.
# Usage: gnuplot -e "logs='runs/a/log.csv runs/b/log.csv'; out='loss.png'" plots/loss.gp
#   out: default loss.png next to the first log (in its run's folder).
if (!exists("logs")) logs = 'log.csv'
# This script's folder, for common.gp (ARG0: the path gnuplot ran it by).
slash_(s, i) = i < 1 ? 0 : (s[i:i] eq '/' ? i : slash_(s, i - 1))
load ARG0[1:slash_(ARG0, strlen(ARG0))].'common.gp'
if (!exists("out")) out = dir_of(word(logs, 1)).'/loss.png'
if (!exists("names")) names = ''
if (!exists("train")) train = 'yes'
if (!exists("title")) title = 'Training and validation loss: '.(words(logs) == 1 ? \
    run_name(word(logs, 1)) : sprintf('%d runs', words(logs)))
name_of(i) = words(names) >= i ? word(names, i) : run_name(word(logs, i))
if (!exists("gaps")) gaps = 'no'
set terminal pngcairo size 1200,(gaps eq 'yes' ? 1000 : 700) noenhanced font ',10'
set output out
set xlabel 'training tokens'
set key top right opaque box
set grid
# One colour per run (run_color): thin lines its per-step training loss (unless train='no'),
# points its validation loss.
val(i) = '< awk -F, '."'NR > 1 && $4 != \"\"'".' '.word(logs, i)
if (gaps eq 'yes') {
    set multiplot layout 2,1 title title
    set title 'Validation loss'
} else {
    set title title
}
if (train ne 'no') {
    set ylabel 'cross-entropy loss (nats per token)'
    plot for [i=1:words(logs)] word(logs, i) skip 1 using 2:3 with lines lw 0.5 \
             lc rgb run_color(i) notitle, \
         for [i=1:words(logs)] val(i) using 2:4 with linespoints pt 7 ps 0.7 lw 2 \
             lc rgb run_color(i) title name_of(i), \
         NaN with lines lw 0.5 lc 'gray40' title 'thin: training loss per step', \
         NaN with linespoints pt 7 ps 0.7 lw 2 lc 'gray40' title 'points: validation loss'
} else {
    set ylabel 'validation loss (nats per token)'
    plot for [i=1:words(logs)] val(i) using 2:4 with linespoints pt 7 ps 0.7 lw 2 \
         lc rgb run_color(i) title name_of(i)
}
# gaps='yes': a second panel with each run's validation loss minus the first run's at the same
# number of training tokens, so that gaps of a few hundredths, invisible beside the loss's
# whole fall, can be read.
if (gaps eq 'yes') {
    gap(i) = sprintf("< awk -F, 'NR == FNR { if (FNR > 1 && $4 != \"\") ref[$2] = $4; next } " . \
        "FNR > 1 && $4 != \"\" && ($2 in ref) { print $2 \",\" $4 - ref[$2] }' %s %s", \
        word(logs, 1), word(logs, i))
    set title 'Gap to '.name_of(1).': each validation loss minus that of '.name_of(1)
    set ylabel 'difference (nats per token)'
    plot for [i=1:words(logs)] gap(i) using 1:2 with linespoints pt 7 ps 0.6 lw 2 \
         lc rgb run_color(i) title name_of(i)
    unset multiplot
}
