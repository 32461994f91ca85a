#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# blas-coretype.sh TYPE PROGRAM [ARGS...]: runs a BLAS-dependent test program under one of
# OpenBLAS's core types (its kernel families), so that the suite checks every one this CPU can
# run, not only the one the environment happens to set. TYPE 'default' unsets
# OPENBLAS_CORETYPE (OpenBLAS then picks by itself, as on a machine that sets nothing); other
# types are OpenBLAS's names. A type whose instructions the CPU lacks is skipped (TAP "1..0").
set -euo pipefail
type=$1
shift

# Instruction-set flags (/proc/cpuinfo) each core type's kernels execute.
case $type in
default) need=() ;;
Sandybridge) need=(avx) ;;
Haswell | Zen) need=(avx2 fma) ;;
SkylakeX) need=(avx512f avx512dq avx512cd avx512bw avx512vl) ;;
Cooperlake) need=(avx512f avx512dq avx512cd avx512bw avx512vl avx512_bf16) ;;
*)
    echo "blas-coretype.sh: unknown core type '$type' (default, Sandybridge, Haswell, Zen," \
        "SkylakeX, Cooperlake)" >&2
    exit 2
    ;;
esac
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
for f in "${need[@]}"; do
    if [[ $flags != *" $f "* ]]; then
        echo "1..0 # SKIP this CPU lacks $f, which OpenBLAS's $type kernels need"
        exit 0
    fi
done

if [ "$type" = default ]; then
    unset OPENBLAS_CORETYPE
else
    export OPENBLAS_CORETYPE=$type
fi
exec "$@"
