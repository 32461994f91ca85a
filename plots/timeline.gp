# SPDX-License-Identifier: MIT
# timeline.gp: Gantt chart of a trace CSV (ops.csv from pacer-sim --out or pacer-train --out).
# One row per stage, one box per op, coloured by kind (F blue, B/BW green, W orange, U red).
# Usage: gnuplot -e "trace='runs/x/ops.csv'; out='timeline.png'" plots/timeline.gp
if (!exists("trace")) trace = 'ops.csv'
if (!exists("out")) out = 'timeline.png'
set terminal pngcairo size 1600,600 noenhanced
set output out
set datafile separator ','
set key off
set xlabel 'time (ms)'
set ylabel 'stage'
set ytics 1
set yrange [*:*] reverse
set style fill solid 0.9 border lc rgb '#333333'
color(op) = op eq 'F' ? 0x4477cc : (op eq 'B' || op eq 'BW') ? 0x44aa66 : \
            op eq 'W' ? 0xee9933 : 0xcc3333
plot trace skip 1 using (($6 + $7) / 2e6):1:(($7 - $6) / 2e6):(0.4):(color(strcol(2))) \
     with boxxyerror lc rgb variable
