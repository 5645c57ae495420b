#!/usr/bin/env python3
"""Host checks of the index algebra of rungs 12-15 (no GPU): every shortcut the kernels take gives
what the plain formula gives.

  rungs 12/14/16: the cp.async group bookkeeping of the K/V ring (S = 2 or 3 stages, tiles
           visited forward as in rung 12 or in reverse as in rungs 14-16, n = 1 .. 7 tiles):
           with K and V in separate groups and wait_group<2S - 3> before each use (rungs 12-15),
           or in one group per tile and wait_group<S - 2> once per tile (rung 16), every stage
           read holds the expected tile and the group that copied it is complete;
  rung 13: the ldmatrix addresses (tile base + lane_off) ^ (32 s) + 16-row immediates equal rung
           12's  tile base + swizzle::byte_offset(row, col, d)  for every lane, slice, M-tile,
           n-tile pair, k-step and stage of the configs below, given tile bases that are
           multiples of the row size (the shared memory is 1024-byte aligned);
  rung 15: the staging offsets of O (w_off ^ 16 c, r_off ^ 16 c, plus immediates) equal the
           swizzled [region][row][64] layout's, the 4-byte writes of one store hit 32 different
           banks, the 16-byte reads of 8 lanes 8 different bank groups, and the read-back returns
           every element once.

  python3 scripts/address_check.py        # prints the number of mismatches (0) per check
"""
import sys


def chunk(row, c):
    return c ^ (row % 8)


def byte_offset(row, col, d):
    """common/ptx/swizzle.cuh: swizzle::byte_offset."""
    return 2 * (row * d + chunk(row, col // 8) * 8 + col % 8)


CONFIGS = [(128, 4, 32, 2), (128, 4, 64, 3), (128, 8, 128, 2), (64, 4, 64, 2), (256, 8, 32, 2)]


def check_13():
    bad = 0
    for d in (64, 128):
        R = 2 * d
        for Br, warps, Bc, stages in CONFIGS:
            rows_per_warp = Br // warps
            mtiles = rows_per_warp // 16
            sQ = 1024  # the dynamic shared memory starts 1024-byte aligned
            sK = sQ + Br * R
            sV = sK + stages * Bc * R
            for lane in range(32):
                lane_off = byte_offset(lane % 16, (lane // 16) * 8, d)
                k_lane_off = byte_offset((lane // 16) * 8 + lane % 8, ((lane // 8) % 2) * 8, d)
                for w in range(warps):
                    sQw = sQ + w * rows_per_warp * R
                    for kk in range(d // 16):
                        for mt in range(mtiles):
                            new = ((sQw + lane_off) ^ (kk * 32)) + mt * 16 * R
                            old = sQw + byte_offset(16 * mt + lane % 16, kk * 16 + (lane // 16) * 8, d)
                            bad += new != old
                for st in range(stages):
                    kj, vj = sK + st * Bc * R, sV + st * Bc * R
                    for kk in range(d // 16):
                        for nt in range(0, Bc // 8, 2):
                            new = ((kj + k_lane_off) ^ (kk * 32)) + (nt // 2) * 16 * R
                            key = nt * 8 + (lane // 16) * 8 + lane % 8
                            old = kj + byte_offset(key, kk * 16 + ((lane // 8) % 2) * 8, d)
                            bad += new != old
                    for ks in range(Bc // 16):
                        for nt in range(0, d // 8, 2):
                            new = ((vj + lane_off) ^ ((nt // 2) * 32)) + ks * 16 * R
                            old = vj + byte_offset(ks * 16 + lane % 16, nt * 8 + (lane // 16) * 8, d)
                            bad += new != old
    return bad


def staged(row, col, rows_per_warp):
    """Rung 15's staging layout: [d/64 regions][rows][64 columns], chunk c of row r at c ^ r%8."""
    return ((col // 64) * rows_per_warp * 128 + row * 128 +
            ((((col % 64) // 8) ^ (row % 8)) * 16) + (col % 8) * 2)


def check_15():
    bad = 0
    for d in (64, 128):
        for rpw in (16, 32):
            mtiles = rpw // 16
            for mt in range(mtiles):
                for r in range(2):
                    for nt in range(d // 8):
                        banks = set()
                        for lane in range(32):
                            group, quad = lane // 4, lane % 4
                            row, col = mt * 16 + r * 8 + group, nt * 8 + 2 * quad
                            w_off = group * 144 + quad * 4
                            new = ((w_off ^ ((nt % 8) * 16)) + (nt // 8) * rpw * 128 +
                                   (mt * 16 + r * 8) * 128)
                            bad += new != staged(row, col, rpw)
                            banks.add((new // 4) % 32)
                        bad += len(banks) != 32
            cpr = d // 8
            rps = 32 // cpr
            seen = {}
            for i in range(rpw // rps):
                for phase in range(4):
                    groups = set()
                    for lane in range(8 * phase, 8 * phase + 8):
                        srow, cc = lane // cpr, lane % cpr
                        r_off = (cc // 8) * rpw * 128 + srow * 128 + ((cc % 8) ^ srow) * 16
                        new = (r_off ^ (((i * rps) % 8) * 16)) + i * rps * 128
                        row, col = i * rps + srow, cc * 8
                        bad += new != staged(row, col, rpw)
                        groups.add((new // 16) % 8)
                        for e in range(8):
                            seen[new + 2 * e] = (row, col + e)
                    bad += len(groups) != 8
            bad += len(seen) != rpw * d
    return bad


def ring(S, n, reverse, one_group=False):
    """Mismatches of one schedule: cp.async.wait_group N completes all but the N newest groups."""
    groups, pending, where, complete, bad = [], [], {}, set(), 0

    def issue(kind, tile, stage):
        pending.append(1)
        where[(kind, stage)] = (tile, len(groups))  # the group this copy will be committed in

    def commit():
        groups.append(list(pending))
        pending.clear()

    def wait(N):
        complete.update(range(len(groups) - N))

    def read(kind, tile, stage):
        t, g = where[(kind, stage)]
        return (t != tile) + (g not in complete)

    order = list(range(n - 1, -1, -1)) if reverse else list(range(n))
    if one_group:  # rung 16: {K, V} of a tile in one group, one wait (and barrier) per tile
        W = S - 2
        issue("Q", 0, 0)
        issue("K", order[0], 0)
        issue("V", order[0], 0)
        commit()
        for s in range(1, S - 1):
            if s < n:
                issue("K", order[s], s)
                issue("V", order[s], s)
            commit()
        for t, j in enumerate(order):
            stage, refill = t % S, (t + S - 1) % S
            wait(W)
            bad += read("Q", 0, 0) + read("K", j, stage) + read("V", j, stage)
            if t + S - 1 < n:
                issue("K", order[t + S - 1], refill)
                issue("V", order[t + S - 1], refill)
            commit()
        return bad
    W = 2 * S - 3
    issue("Q", 0, 0)
    issue("K", order[0], 0)
    commit()
    issue("V", order[0], 0)
    commit()
    for s in range(1, S - 1):
        if s < n:
            issue("K", order[s], s)
        commit()
        if s < n:
            issue("V", order[s], s)
        commit()
    for t, j in enumerate(order):
        stage, refill = t % S, (t + S - 1) % S
        wait(W)
        bad += read("Q", 0, 0) + read("K", j, stage)
        if t + S - 1 < n:
            issue("K", order[t + S - 1], refill)
        commit()
        wait(W)
        bad += read("V", j, stage)
        if t + S - 1 < n:
            issue("V", order[t + S - 1], refill)
        commit()
    return bad


def check_ring():
    return sum(ring(S, n, rev, one) for S in (2, 3) for n in range(1, 8) for rev in (False, True)
               for one in (False, True))


def main():
    br, b13, b15 = check_ring(), check_13(), check_15()
    print(f"rungs 12-16 K/V ring:       {br} wrong tiles or incomplete groups")
    print(f"rung 13 ldmatrix addresses: {b13} mismatches")
    print(f"rung 15 staging of O:       {b15} mismatches or bank conflicts")
    sys.exit(1 if br or b13 or b15 else 0)


if __name__ == "__main__":
    main()
