#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test-no-data.sh PROGRAM...: each Check program that needs the fetched data (the GPT-2
# vocabulary, the corpus) runs with the data cache pointed at an empty folder (PACER_CACHE),
# as in a clean checkout before scripts/fetch-data: it must exit 0 with its cases that need the
# data reported as TAP skips naming scripts/fetch-data, and every other case passing.
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: test-no-data.sh PROGRAM..."; exit 2; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-no-data-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/empty"
failed=0
for prog in "$@"; do
    name=$(basename "$prog")
    PACER_CACHE="$tmp/empty" CK_TAP_LOG_FILE_NAME=- CK_VERBOSITY=silent "$prog" >"$tmp/out" 2>&1
    rc=$?
    n_skip=$(grep -c '^ok [0-9]* - .* # SKIP .*scripts/fetch-data' "$tmp/out")
    n_fail=$(grep -c '^not ok' "$tmp/out")
    n_run=$(grep -c '^ok ' "$tmp/out")
    plan=$(grep -x '1\.\.[0-9]*' "$tmp/out" | tail -n 1)
    if [ "$rc" -ne 0 ] || [ "$n_fail" -ne 0 ] || [ "$n_skip" -eq 0 ] || [ "$plan" != "1..$n_run" ]
    then
        echo "FAIL $name: exit $rc, $n_fail failed, $n_skip skipped, plan '$plan' for $n_run"
        sed 's/^/    /' "$tmp/out" | tail -n 20
        failed=1
    else
        echo "ok $name: $((n_run - n_skip)) ran, $n_skip skipped without the data"
    fi
done
exit $failed
