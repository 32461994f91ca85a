# SPDX-License-Identifier: MIT
# common.gp: helpers the other scripts load (each finds this file next to itself through
# ARG0, the path gnuplot gives a script run from the command line): the PNG terminal, CSV input, and run names from
# paths (the folder a file sits in), so that legends show runs, not paths.
set datafile separator ','
set datafile missing 'nan'
# Position of the last '/' in s at or before i (0 when none).
last_slash(s, i) = i < 1 ? 0 : (s[i:i] eq '/' ? i : last_slash(s, i - 1))
# The folder of path p ('.' when none), the last component of p, and the name of the folder
# holding a file: run_name('runs/paci-a4/log.csv') is 'paci-a4'.
dir_of(p) = last_slash(p, strlen(p)) > 0 ? p[1:last_slash(p, strlen(p)) - 1] : '.'
base_of(p) = p[last_slash(p, strlen(p)) + 1:]
# A folder inside a run (replay --out runs/x/pred) is named with its run: 'x/pred'.
in_run(d) = d ne '.' && system(sprintf("test -f '%s/ops.csv' && echo 1", dir_of(d))) eq '1'
run_name(p) = in_run(dir_of(p)) ? base_of(dir_of(dir_of(p))).'/'.base_of(dir_of(p)) : \
              base_of(dir_of(p))
# Colours of runs (loss, tta, sweep lines): eight that read on white, none of them pale
# (Okabe and Ito's colour-blind safe set, its yellow replaced by a dark red); they repeat after 8.
run_color(i) = word('#0072b2 #d55e00 #009e73 #cc79a7 #000000 #e69f00 #56b4e9 #882255', \
                    (i - 1) % 8 + 1)
# Colours of the op kinds in every plot: F blue, B green, W orange, BW teal, U red.
op_color(op) = op eq 'F' ? 0x4477cc : op eq 'B' ? 0x44aa66 : op eq 'W' ? 0xee9933 : \
               op eq 'BW' ? 0x228888 : 0xcc3333
