#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Bubble rate of Megatron's interleaved 1F1B (chunks v per device) computed two ways, for
scripts/report's comparison with the zero-bubble paper's 1F1B-I column.

A list schedule: every device runs its fixed op order (v*p ... warm-up forwards, then one
forward and one backward alternately, then the remaining backwards); an op starts when its
device is free and its input has arrived (producer end + T_comm across devices). "full" keeps
every dependency; "first-only" keeps the dependency between a micro-batch's chunk c on the
last device and chunk c+1 on the first device (forward; the mirror for the backward) only for
the first micro-batch of each group of p, which is how the published numbers come out.

Usage: report-interleaved.py P M V T_F T_BW T_COMM   (times of one full stage, any unit)
Prints: "full first-only" bubble rates, (cost - m (T_F + T_BW)) / cost.
"""
import sys


def cost(p, m, v, f, bw, c, first_only):
    total = m * v

    def op_mb_chunk(j, backward):
        group, within = divmod(j, p * v)
        chunk = within // p
        return group * p + within % p, (v - 1 - chunk) if backward else chunk

    orders = []
    for rank in range(p):
        warm = min((p - rank - 1) * 2 + (v - 1) * p, total)
        ops = [("F", j) for j in range(warm)]
        nf = warm
        for nb in range(total):
            if nf < total:
                ops.append(("F", nf))
                nf += 1
            ops.append(("B", nb))
        orders.append(ops)
    end_f, end_b = {}, {}
    pos, free = [0] * p, [0.0] * p
    remaining = sum(len(o) for o in orders)
    while remaining:
        moved = False
        for rank in range(p):
            while pos[rank] < len(orders[rank]):
                kind, j = orders[rank][pos[rank]]
                mb, ch = op_mb_chunk(j, kind == "B")
                crossing = not first_only or j % p == 0
                if kind == "F":
                    if rank > 0:
                        ready = end_f.get((rank - 1, mb, ch))
                    elif ch > 0 and crossing:
                        ready = end_f.get((p - 1, mb, ch - 1))
                    else:
                        ready = -c
                    if ready is None:
                        break
                    t = max(free[rank], ready + c) + f
                    end_f[(rank, mb, ch)] = t
                else:
                    own = end_f[(rank, mb, ch)]
                    if rank < p - 1:
                        ready = end_b.get((rank + 1, mb, ch))
                    elif ch < v - 1 and crossing:
                        ready = end_b.get((0, mb, ch + 1))
                    else:
                        ready = own - c
                    if ready is None:
                        break
                    t = max(free[rank], ready + c, own) + bw
                    end_b[(rank, mb, ch)] = t
                free[rank] = t
                pos[rank] += 1
                remaining -= 1
                moved = True
        if not moved:
            sys.exit("report-interleaved: the op orders deadlock")
    return max(free)


def main():
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    p, m, v = (int(a) for a in sys.argv[1:4])
    f, bw, c = (float(a) for a in sys.argv[4:7])
    if p < 1 or v < 1 or m % p != 0:
        sys.exit("report-interleaved: needs P >= 1, V >= 1 and M a multiple of P")
    work = m * (f + bw)
    costs = [cost(p, m, v, f / v, bw / v, c, first) for first in (False, True)]
    print("%.6f %.6f" % tuple((t - work) / t for t in costs))


if __name__ == "__main__":
    main()
