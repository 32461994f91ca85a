# SPDX-License-Identifier: MIT
# plan.gp: a pacer-sim plan search at a glance, from its plan.csv (plan --out DIR): the job's
# throughput against the peak memory per GPU of every simulated layout, one colour per schedule
# (hollow: over the memory limit), the memory limit as a vertical line, the top-ranked layout
# marked and labelled.
# Usage: gnuplot -e "plan='runs/plan/plan.csv'; out='plan.png'" plots/plan.gp
#   title: optional; table='FILE': also write the plotted points as text (gnuplot's set
#   table), for the tests to read the picture's numbers back.
if (!exists("plan")) plan = 'plan.csv'
slash_(s, i) = i < 1 ? 0 : (s[i:i] eq '/' ? i : slash_(s, i - 1))
load ARG0[1:slash_(ARG0, strlen(ARG0))].'common.gp'
if (!exists("out")) out = dir_of(plan).'/plan.png'
if (!exists("title")) title = 'Every layout plan simulated ('.run_name(plan).')'
set datafile columnheaders
gib = 1024.0 ** 3
# The schedules in the order of their best row (the file is ranked), and per schedule the
# rows that hold it (column 3; libcsv quotes the texts).
schedules = system(sprintf("awk -F, 'NR > 1 { v = $3; gsub(/\"/, \"\", v); " . \
    "if (!(v in s)) { s[v] = 1; printf \"%%s \", v } }' '%s'", plan))
rows_of(g, fits) = sprintf("< awk -F, 'NR == 1 { print; next } { v = $3; " . \
    "gsub(/\"/, \"\", v); if (v == \"%s\" && $2 == %d) print }' '%s'", g, fits, plan)
best = sprintf("< awk -F, 'NR == 1 || $1 == 1' '%s'", plan)
stats plan using 'memory_limit_bytes' nooutput
limit_gib = STATS_max / gib
stats plan using 'peak_memory_bytes' nooutput
xmax = (STATS_max / gib > limit_gib ? STATS_max / gib : limit_gib) * 1.05
if (exists("table")) {
    set table table
    plot for [g in schedules] rows_of(g, 1) using (column('peak_memory_bytes') / gib):'tokens_per_s' \
        with points title g, \
        for [g in schedules] rows_of(g, 0) using (column('peak_memory_bytes') / gib):'tokens_per_s' \
        with points title g.' over', \
        best using (column('peak_memory_bytes') / gib):'tokens_per_s' with points title 'rank 1'
    unset table
}
set terminal pngcairo size 1100,700 noenhanced font ',10'
set output out
set title title
set key outside right top box
set grid
set xlabel 'peak memory per GPU (GiB, the largest stage)'
set ylabel 'whole job throughput (tokens/s)'
set xrange [0:xmax]
set yrange [0:*]
set offsets 0, 0, graph 0.06, 0
set arrow 1 from limit_gib, graph 0 to limit_gib, graph 1 nohead lw 2 dt 2 lc rgb '#cc3333'
set label 1 sprintf('memory limit %.1f GiB', limit_gib) at limit_gib, graph 0.03 right \
    offset -0.5, 0 textcolor rgb '#cc3333'
set format y '%.1s%c'
nsched = words(schedules)
plot for [i = 1:nsched] rows_of(word(schedules, i), 1) \
         using (column('peak_memory_bytes') / gib):'tokens_per_s' with points pt 7 ps 0.8 \
         lc rgb run_color(i) title word(schedules, i), \
     for [i = 1:nsched] rows_of(word(schedules, i), 0) \
         using (column('peak_memory_bytes') / gib):'tokens_per_s' with points pt 6 ps 0.8 \
         lc rgb run_color(i) notitle, \
     best using (column('peak_memory_bytes') / gib):'tokens_per_s' with points pt 3 ps 3 \
         lw 2 lc rgb '#000000' title 'rank 1', \
     best using (column('peak_memory_bytes') / gib):'tokens_per_s': \
         (sprintf('%s D%d T%d C%d N%d v%d b%d', stringcolumn('schedule'), column('data'), \
                  column('tensor'), column('context'), column('stages'), column('chunks'), \
                  column('microbatch_size'))) \
         with labels right offset -1.5, 0.8 notitle
