#!/bin/bash
# SPDX-License-Identifier: MIT
# test-readme.sh SOURCE_ROOT BUILD_ROOT: README.md's examples run as written and in order.
# Every ```sh block right after a line "<!-- test: run -->" is run, in README order, as one
# bash script (set -e -o pipefail: each command must exit 0) from a temporary folder that
# stands for the repository root: build/, scripts/ and .cache/ link to the real ones,
# scenarios/ and plots/ are copies, and runs/ starts empty there, so nothing is written into
# the user's runs/ (the data cache's token shards are shared, as training shares them). To
# keep the test to about a minute on a loaded 2-core machine, the copy of
# scenarios/train-tiny.ini trains 24 steps of a width-64 model on 4-token sequences instead of
# 40 steps of width 256 on 64 tokens (the same commands and files; the README's --stop-at 20
# and checkpoints every 10 steps still fall inside the run). Exit 77 (skip) without the
# fetched data (scripts/fetch-data) or without gnuplot (scripts/setup installs it).
set -u
src=$1
build=$2
cache=${PACER_CACHE:-$src/.cache}
if [ ! -d "$cache/gpt2" ] || [ ! -d "$cache/sotu" ]; then
    echo "SKIP: no fetched data in $cache (run scripts/fetch-data)"
    exit 77
fi
if ! command -v gnuplot > /dev/null; then
    echo "SKIP: the README's examples draw with gnuplot, which is not installed (scripts/setup)"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-readme-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
mkdir "$root" "$tmp/blocks"
ln -s "$build" "$root/build"
ln -s "$src/scripts" "$root/scripts"
ln -s "$cache" "$root/.cache"
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

# The marked blocks, one file each: block-1.sh, block-2.sh, ...
awk -v dir="$tmp/blocks" '
    /^<!-- test: run -->$/ { marked = NR; next }
    marked && marked == NR - 1 && /^```sh$/ { n++; file = sprintf("%s/block-%d.sh", dir, n); inside = 1; next }
    marked && marked == NR - 1 { printf "README.md:%d: a <!-- test: run --> line must come right before a ```sh line\n", NR - 1; bad = 1 }
    inside && /^```$/ { inside = 0; close(file); next }
    inside { print > file }
    END { exit bad }
' "$src/README.md" || exit 1
n=$(ls "$tmp/blocks" | wc -l)
# the simulator, the executor and time to accuracy at least
if [ "$n" -lt 3 ]; then
    echo "FAIL: README.md marks $n blocks with <!-- test: run -->; expected at least 3"
    exit 1
fi

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
        echo "ok: README block $i of $n ($(($(date +%s) - start)) s): $(head -n 1 "$block")"
    else
        echo "FAIL: README block $i of $n: $(head -n 1 "$block")"
        tail -n 30 "$tmp/out-$i.txt"
        status=1
        break # later blocks may need what this one makes
    fi
done
exit $status
