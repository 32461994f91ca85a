#!/bin/bash
# SPDX-License-Identifier: MIT
# test-readme.sh SOURCE_ROOT BUILD_ROOT: the commands of the docs run as written and in order.
# The pages are README.md, then docs/*.md, then each folder's README.md, in that order. Every
# ```sh block in them is marked on the line before it: "<!-- test: run -->" blocks are run, in
# that order, each as one bash script (set -e -o pipefail: each command must exit 0), and
# "<!-- test: skip: REASON -->" blocks are not (they need what the suite lacks: a GPU, mpirun,
# minutes of training, the reader's own runs); a block with neither mark fails the test. In
# every block, run or not, each program and file it names under build/, scripts/, scenarios/,
# plots/ and tests/ must exist (a build/ program not built here must be one a meson.build defines).
# The blocks run from a temporary folder that stands for the repository root: build/,
# scripts/, tests/ (the examples' inputs under tests/data, read only) and .cache/ link to the
# real ones, scenarios/ and plots/ are copies, and runs/
# starts empty there, so nothing is written into the user's runs/ (the data cache's token
# shards are shared, as training shares them). To keep the test to about a minute on a loaded
# 2-core machine, the copy of scenarios/train-tiny.ini trains 24 steps of a width-64 model on
# 4-token sequences instead of 40 steps of width 256 on 64 tokens (the same commands and
# files; the --stop-at 20 and checkpoints every 10 steps of docs/checkpoints.md still fall
# inside the run). Exit 77 (skip) without the fetched data (scripts/fetch-data) or without
# gnuplot (scripts/setup installs it).
set -u
src=$1
build=$2
cache=${PACER_CACHE:-$src/.cache}
if [ ! -d "$cache/gpt2" ] || [ ! -d "$cache/sotu" ]; then
    echo "SKIP: no fetched data in $cache (run scripts/fetch-data)"
    exit 77
fi
if ! command -v gnuplot > /dev/null; then
    echo "SKIP: the docs' examples draw with gnuplot, which is not installed (scripts/setup)"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-readme-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
mkdir "$root" "$tmp/blocks"
touch "$tmp/blocks.txt" "$tmp/paths.txt"
ln -s "$build" "$root/build"
ln -s "$src/scripts" "$root/scripts"
ln -s "$cache" "$root/.cache"
ln -s "$src/tests" "$root/tests"
cp -r "$src/scenarios" "$src/plots" "$root/"
tiny=$root/scenarios/train-tiny.ini
sed -i 's/^seq_len = 64$/seq_len = 4/; s/^steps = 40$/steps = 24/; s/^hidden = 256$/hidden = 64/' \
    "$tiny"
for line in 'seq_len = 4' 'steps = 24' 'hidden = 64'; do
    if ! grep -q "^$line\$" "$tiny"; then
        echo "FAIL: scenarios/train-tiny.ini changed: could not shorten it to '$line'"
        exit 1
    fi
done
export PACER_CACHE=$cache

# The pages in order, then their blocks: the run blocks one file each (block-1.sh, ...),
# named in blocks.txt with where they come from; every block's paths in paths.txt.
pages=("$src/README.md")
for f in "$src"/docs/*.md "$src"/*/README.md; do
    [ -f "$f" ] && pages+=("$f")
done
for page in "${pages[@]}"; do
    awk -v dir="$tmp/blocks" -v name="${page#"$src"/}" -v n0="$(ls "$tmp/blocks" | wc -l)" '
        BEGIN { n = n0 }
        /^```sh$/ && !marked_line {
            printf "%s:%d: a ```sh block needs <!-- test: run --> or <!-- test: skip: REASON --> on the line before it\n", name, NR
            bad = 1
        }
        marked_line && !/^```sh$/ {
            printf "%s:%d: a test mark must come right before a ```sh line\n", name, NR - 1
            bad = 1
        }
        /^```sh$/ && marked_line {
            inside = 1; run = (marked_line == "run")
            if (run) { n++; file = sprintf("%s/block-%d.sh", dir, n); print name ":" NR >> (dir "/../blocks.txt") }
            marked_line = ""; next
        }
        { marked_line = "" }
        /^<!-- test: run -->$/ { marked_line = "run"; next }
        /^<!-- test: skip: .+ -->$/ { marked_line = "skip"; next }
        /^<!-- test:/ { printf "%s:%d: a test mark is <!-- test: run --> or <!-- test: skip: REASON -->\n", name, NR; bad = 1 }
        inside && /^```$/ { inside = 0; if (run) close(file); next }
        inside && run { print > file }
        inside { print name ":" NR ": " $0 >> (dir "/../paths.txt") }
        END { exit bad }
    ' "$page" || exit 1
done
n=$(ls "$tmp/blocks" | wc -l)
# the simulator, the planner, the executor and measured vs predicted at least
readme_runs=$(grep -c '^README.md:' "$tmp/blocks.txt" || true)
if [ "$readme_runs" -lt 3 ]; then
    echo "FAIL: README.md marks $readme_runs blocks with <!-- test: run -->; expected at least 3"
    exit 1
fi

# Every path a block names under build/, scripts/, scenarios/, plots/ or tests/ exists.
missing=0
while IFS= read -r entry; do
    where=${entry%%: *}
    for path in $(sed -E 's/^[^ ]+ //' <<<"$entry" |
        grep -o -E '(^|[^A-Za-z0-9_./$-])(build|scripts|scenarios|plots|tests)/[A-Za-z0-9_./-]*[A-Za-z0-9_]' |
        sed -E 's/^[^a-z]//'); do
        case $path in
        build/*)
            rel=${path#build/}
            if [ ! -e "$build/$rel" ] &&
                ! grep -q -F "'$(basename "$rel")'" "$src/$(dirname "$rel")/meson.build" 2>/dev/null; then
                echo "FAIL: $where: $path is neither built here nor defined in $(dirname "$rel")/meson.build"
                missing=1
            fi
            ;;
        *)
            if [ ! -e "$src/$path" ]; then
                echo "FAIL: $where: $path does not exist"
                missing=1
            fi
            ;;
        esac
    done
done < "$tmp/paths.txt"
[ "$missing" = 0 ] || exit 1

status=0
for i in $(seq 1 "$n"); do
    block=$tmp/blocks/block-$i.sh
    script=$tmp/run-$i.sh
    {
        echo 'set -e -o pipefail'
        echo 'trap '\''echo "test-readme: this command exited $?: $BASH_COMMAND" >&2'\'' ERR'
        cat "$block"
    } > "$script"
    start=$(date +%s)
    if (cd "$root" && CI=true bash "$script" > "$tmp/out-$i.txt" 2>&1); then
        echo "ok: block $i of $n, $(sed -n "${i}p" "$tmp/blocks.txt") ($(($(date +%s) - start)) s): $(head -n 1 "$block")"
    else
        echo "FAIL: block $i of $n, $(sed -n "${i}p" "$tmp/blocks.txt"): $(head -n 1 "$block")"
        tail -n 30 "$tmp/out-$i.txt"
        status=1
        break # later blocks may need what this one makes
    fi
done
exit $status
