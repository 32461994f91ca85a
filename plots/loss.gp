# SPDX-License-Identifier: MIT
# loss.gp: training and validation loss curves from one or more pacer-train log.csv files
# (columns: step,tokens,train_loss,val_loss,lr,grad_norm,tokens_per_s,delta_max).
# Usage: gnuplot -e "logs='runs/a/log.csv runs/b/log.csv'; out='loss.png'" plots/loss.gp
if (!exists("logs")) logs = 'log.csv'
if (!exists("out")) out = 'loss.png'
set terminal pngcairo size 1200,700 noenhanced
set output out
set datafile separator ','
set datafile missing 'nan'
set xlabel 'tokens'
set ylabel 'loss'
set key top right
plot for [f in logs] f skip 1 using 2:3 with lines title f.' train', \
     for [f in logs] f skip 1 using 2:($4 > 0 ? $4 : 1/0) with linespoints pt 7 ps 0.6 \
     title f.' val'
