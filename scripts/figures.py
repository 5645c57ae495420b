#!/usr/bin/env python3
"""Schematic figures of the ladder, drawn from the kernels' own sources, all by one command.

  python3 -m pip install numpy matplotlib   # once
  python3 scripts/figures.py                # writes docs/figures/*.png (listed below)
  python3 scripts/figures.py --out /tmp/f   # somewhere else
  python3 scripts/figures.py --only timeline   # only the files whose name contains "timeline"

No GPU and no build are needed: the figures are read from the source files, not measured. The
fragment-layout figures of rungs 03-04 come from the built code (scripts/fragment_figure.py).

What is read from where (the script stops with an error naming the file if something is missing,
so that a kernel changed without its figure does not go unnoticed):
  - kBr, kBc, kWarps (and kStages where the rung has one): `constexpr int kX = N;` in its .cu.
  - the copy schedule of rungs 05, 07, 08 and 09: the order of copy_tile_async(sQ/sK/sV ...),
    cp.async commit_group / wait_group<N>, __syncthreads() and the three compute phases (found by
    their comments "// S = Q_w", "// Online softmax", "// O += P") from the PROLOGUE comment to the
    EPILOGUE comment of the kernel. That program is run on a toy clock (copies take a fixed
    latency, the math a fixed time per phase: the CLOCK table below), which places every bar.
    The timelines are therefore schematic: they show what overlaps what, not measured durations.
  - the XOR swizzle: the expression `chunk ^ (row % 8)` in common/ptx/swizzle.cuh.
  - rung 09's k-loop panel: rQ[2] (the second register buffer) must be in its source; the loop
    itself (ldmatrix of slice k+1 before the mma of slice k) is drawn as its banner describes.
  - the Hopper rungs (19-21): the schedules that the banners and consumer() functions of
    kernels/19_*/ .. 21_*/ describe, run on a toy clock of their own (the HOPPER table below: a
    small event simulation of the producer, the ring's barriers, the named-barrier turns and the
    wgmma groups), so schematic too. The ring size is each kernel's kStages; the script checks
    that each consumer() still has the barrier and wait_group calls drawn (HOPPER_SRC).
  - the wgmma descriptor: the fields' bit positions and shifts from gmma::encode, kSw128GroupBytes,
    kmajor_sw128's LBO, Layout::k128B and the XOR of sw128_offset in common/ptx/gmma_desc.cuh;
    the V tile's LBO from rung 17's kBc.
  - the wgmma accumulator: the map stated in common/ptx/wgmma.cuh's banner (the script checks that
    the banner still says it), cross-checked against c_m16n8 and a_m16k16 of
    common/ptx/fragment.cuh.

Files (docs/figures/):
  tiling.png             one block's rows of Q, the KV loop, the online-softmax state (rung 03)
  timeline_05.png ..     copies, waits, barriers and math per KV tile, rungs 05, 07, 08, 09
  timeline_09.png        (09 adds the k-loop of S = Q·K_jᵀ, rung 08 vs 09)
  swizzle_banks.png      banks hit by one ldmatrix 8x8 matrix, row-major vs swizzled (rung 06)
  hopper_timeline_19.png .. _21.png   producer/consumer warpgroups (rungs 19-21), toy clock
  wgmma_descriptor.png   the 64-bit smem matrix descriptor, its K-major and MN-major (V) values,
                         the 128-byte swizzle of one 1024-byte group (rungs 17-19)
  wgmma_accumulator.png  which thread holds which accumulator element; S -> the RS A operand of P·V
"""

import argparse
import os
import re
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch, Rectangle  # noqa: E402
from png_pack import repack  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DPI = 110

RUNGS = {  # rung -> kernel source, relative to the repo root
    "03": "kernels/03_mma/mma.cu",
    "05": "kernels/05_cp_async/cp_async.cu",
    "07": "kernels/07_eager_kv/eager_kv.cu",
    "08": "kernels/08_double_buffer/double_buffer.cu",
    "09": "kernels/09_frag_double_buffer/frag_double_buffer.cu",
    "17": "kernels/17_wgmma/wgmma.cu",
}
SWIZZLE_HEADER = "common/ptx/swizzle.cuh"
GMMA_HEADER = "common/ptx/gmma_desc.cuh"
WGMMA_HEADER = "common/ptx/wgmma.cuh"
FRAGMENT_HEADER = "common/ptx/fragment.cuh"

# The toy clock of the timelines (arbitrary units; only the order and the overlaps mean anything).
CLOCK = {
    "issue": 0.25,  # issuing the cp.async of one tile (the thread moves on at once)
    "copy": 2.6,  # a tile's copy, issue -> in shared memory
    "barrier": 0.08,  # __syncthreads() once everyone is there
    "S": 2.0,  # S = Q·K_jᵀ, all k-slices
    "softmax": 1.0,  # online softmax of one tile
    "PV": 2.0,  # O += P·V_j
}
KV_TILES = 3  # KV tiles drawn per timeline

COLOURS = {
    "Q": "#9c755f",
    "K": "#4e79a7",
    "V": "#f28e2b",
    "S": "#59a14f",
    "softmax": "#edc948",
    "PV": "#e15759",
    "stall": "#d62728",
    "ldmatrix": "#76b7b2",
    "mma": "#59a14f",
    "tma": "#b07aa1",
    "idle": "#eeeeee",
}


def fail(msg):
    sys.exit(f"scripts/figures.py: {msg}")


def read(rel):
    path = os.path.join(ROOT, rel)
    if not os.path.exists(path):
        fail(f"{rel} not found")
    with open(path) as f:
        return f.read()


def constants(rel, names):
    """The values of `constexpr int NAME = <integer>;` in a source file, for every name asked."""
    text = read(rel)
    out = {}
    for name in names:
        m = re.search(r"constexpr\s+int\s+" + name + r"\s*=\s*(\d+)\s*;", text)
        if not m:
            fail(
                f"`constexpr int {name} = <integer>;` not found in {rel}: update the figure "
                "script along with the kernel"
            )
        out[name] = int(m.group(1))
    return out


def save(fig, out, name):
    """Stored as 256 indexed colours: a figure's flat fills and antialiased edges need no more, and
    the file is a third to a half of the RGBA one."""
    path = os.path.join(out, name)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    from PIL import Image  # matplotlib's own dependency

    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)
    repack(path)
    print(
        f"wrote {os.path.relpath(path, ROOT) if path.startswith(ROOT) else path} "
        f"({os.path.getsize(path) // 1024} KiB)"
    )


def box(
    ax, x, y, w, h, colour, text="", fs=8, alpha=1.0, hatch=None, ec="black", lw=0.6, tc="black"
):
    ax.add_patch(
        Rectangle((x, y), w, h, facecolor=colour, edgecolor=ec, lw=lw, alpha=alpha, hatch=hatch)
    )
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fs, color=tc)


# ------------------------------------------------------------------------------------------------
# 1. Tiling of one block and the KV loop (rung 03)
# ------------------------------------------------------------------------------------------------
def fig_tiling(out):
    c = constants(RUNGS["03"], ["kBr", "kBc", "kWarps"])
    br, bc, warps = c["kBr"], c["kBc"], c["kWarps"]
    rows = br // warps
    d = 128  # drawn at d = 128 (the kernel also takes 64)
    nq, nk = 4 * br, 6 * bc  # a small problem: 4 blocks of queries, 6 KV tiles
    blk = 1  # the block drawn: blockIdx.x = 1
    r0 = blk * br  # its first query row
    s = 1.0 / 64  # drawing units per row / column

    fig, ax = plt.subplots(figsize=(12.4, 5.0))
    ax.set_aspect("equal")
    ax.axis("off")

    # S = Q·Kᵀ (nq x nk) in the middle; Q to its left, Kᵀ above it; O (nq x d) to its right.
    qx, sx = 0.0, d * s + 0.5
    ky = nq * s + 0.4
    ox = sx + nk * s + 1.25
    top = nq * s
    y_of = lambda r: top - r * s  # noqa: E731  (row 0 at the top)

    box(ax, qx, 0, d * s, nq * s, "#f4f4f4")
    box(ax, sx, ky, nk * s, d * s, "#f4f4f4")
    box(ax, sx, 0, nk * s, nq * s, "#fafafa")
    box(ax, ox, 0, d * s, nq * s, "#f4f4f4")
    ax.text(qx + d * s / 2, top + 0.12, "Q  (Nq x d)", ha="center", fontsize=9)
    ax.text(sx - 0.08, ky + d * s / 2, "Kᵀ\n(d x Nk)", ha="right", va="center", fontsize=9)
    ax.text(ox + d * s / 2, top + 0.12, "O  (Nq x d)", ha="center", fontsize=9)
    ax.text(
        sx + nk * s / 2, -0.25, "S = Q·Kᵀ  (Nq x Nk: never stored whole)", ha="center", fontsize=9
    )
    ax.text(qx, -0.62, f"drawn at Nq = {nq}, Nk = {nk}, d = {d}", fontsize=7.5, color="#555555")
    # V_j (Bc x d) above O: P_j·V_j is added to the block's rows of O.
    box(ax, ox, ky, d * s, bc * s, "#f28e2b", "V_j  (Bc x d)", fs=8, alpha=0.85)
    ax.text(
        ox + d * s / 2,
        ky + bc * s + 0.1,
        f"one of the Nk/Bc = {nk // bc} V tiles",
        ha="center",
        fontsize=7.5,
    )
    ax.annotate(
        "",
        xy=(ox - 0.04, y_of(r0 + br / 2)),
        xytext=(sx + nk * s + 0.04, y_of(r0 + br / 2)),
        arrowprops=dict(arrowstyle="->", lw=1.2),
    )
    ax.text(
        (ox + sx + nk * s) / 2,
        y_of(r0 + br / 2) + 0.08,
        "+= P_j·V_j",
        ha="center",
        va="bottom",
        fontsize=7.5,
    )

    # The block's rows, split among the warps.
    warp_colours = [
        "#4e79a7",
        "#f28e2b",
        "#59a14f",
        "#e15759",
        "#76b7b2",
        "#edc948",
        "#b07aa1",
        "#ff9da7",
    ]
    for w in range(warps):
        y = y_of(r0 + (w + 1) * rows)
        col = warp_colours[w % len(warp_colours)]
        box(
            ax,
            qx,
            y,
            d * s,
            rows * s,
            col,
            f"warp {w}: rows {r0 + w * rows}-{r0 + (w + 1) * rows - 1}",
            fs=6.3,
            alpha=0.75,
        )
        box(ax, ox, y, d * s, rows * s, col, f"O rows of warp {w}", fs=7, alpha=0.75)
    ax.text(
        qx - 0.08,
        y_of(r0 + br / 2),
        f"block {blk}\nBr = {br}\n{warps} warps\nx {rows} rows",
        ha="right",
        va="center",
        fontsize=8,
    )

    # The KV tiles and the loop over them.
    tiles = nk // bc
    for j in range(tiles):
        x = sx + j * bc * s
        box(
            ax,
            x,
            ky,
            bc * s,
            d * s,
            "#4e79a7" if j == 2 else "#c6d4e6",
            f"K{j}ᵀ" if j != 2 else "K_jᵀ",
            fs=8,
            alpha=0.9,
            tc="white" if j == 2 else "black",
        )
        box(
            ax,
            x,
            y_of(r0 + br),
            bc * s,
            br * s,
            "#59a14f" if j == 2 else "#cfe3c8",
            "S_j\n= Q·K_jᵀ" if j == 2 else f"S{j}",
            fs=8,
            alpha=0.9,
            tc="white" if j == 2 else "black",
        )
    ax.text(sx + bc * s / 2, ky + d * s + 0.1, f"Bc = {bc}", ha="center", fontsize=8)
    ax.annotate(
        "",
        xy=(sx + nk * s - 0.05, y_of(r0 + br) - 0.12),
        xytext=(sx + 0.05, y_of(r0 + br) - 0.12),
        arrowprops=dict(arrowstyle="->", lw=1.4),
    )
    ax.text(
        sx + nk * s / 2,
        y_of(r0 + br) - 0.3,
        "KV loop: j = 0, 1, ..., Nk/Bc - 1 (one block, in order)",
        ha="center",
        va="top",
        fontsize=8,
    )
    # Other blocks
    for b in range(nq // br):
        if b != blk and b != blk + 1:
            ax.text(
                sx + nk * s / 2,
                y_of(b * br + br / 2),
                f"block {b}: same loop, its own rows",
                ha="center",
                va="center",
                fontsize=8,
                color="#888888",
            )
            ax.plot([qx, ox + d * s], [y_of(b * br), y_of(b * br)], color="#cccccc", lw=0.5)

    # The per-row state, at the far right.
    ex = ox + d * s + 0.35
    lines = [
        "State of every query row, kept across the KV loop",
        "(in registers of the warp that owns the row):",
        "   m   running max of the scaled scores",
        "   l   running sum of exp(s - m)",
        "   O   unnormalised output row (fp32, d values)",
        "",
        "For each KV tile j:",
        "   S_j = scale * Q.K_j^T      (mma)",
        "   m'  = max(m, rowmax S_j)",
        "   P_j = exp(S_j - m')        (stays in registers)",
        "   c   = exp(m - m')",
        "   l   = c*l + rowsum P_j",
        "   O   = c*O + P_j.V_j        (mma)",
        "   m   = m'",
        "",
        "After the last tile:  O / l  (and LSE = m + log l)",
    ]
    ax.text(ex, top, "\n".join(lines), ha="left", va="top", fontsize=8.5, family="monospace")
    ax.set_xlim(-1.0, ex + 4.1)
    ax.set_ylim(-0.8, ky + d * s + 0.3)
    fig.suptitle(
        f"Rung 03 (Br = {br}, Bc = {bc}, {warps} warps of {rows} rows): one block's rows "
        "of Q, the loop over K/V tiles, the online-softmax state",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    save(fig, out, "tiling.png")


# ------------------------------------------------------------------------------------------------
# 2. Copy/compute timelines of rungs 05, 07, 08, 09 from their main loops
# ------------------------------------------------------------------------------------------------
TOKEN = re.compile(
    r"(?P<copy>copy_tile_async<[^>]*>\s*\(\s*(?P<dst>s[QKV])\b(?P<args>[^;]*);)"
    r"|(?P<commit>commit_group\s*\(\s*\))"
    r"|(?P<wait>wait_group\s*<\s*(?P<n>\d+)\s*>)"
    r"|(?P<sync>__syncthreads\s*\(\s*\))"
    r"|(?P<loop>for\s*\(\s*int64_t\s+j\s*=\s*0\s*;)"
    r"|(?P<phase>^\s*// (?:S = Q_w|Online softmax|O \+= P))",
    re.M,
)


def kernel_program(rel):
    """The kernel's prologue and loop as a list of operations, in source order."""
    text = read(rel)
    start = text.find("// PROLOGUE")
    end = text.find("// EPILOGUE", start)
    if start < 0 or end < 0:
        fail(f"{rel}: no '// PROLOGUE' ... '// EPILOGUE' comments around the main loop")
    body = text[start:end]
    # Comments are dropped, except the three that name the compute phases.
    phases = {"S = Q_w": "S", "Online softmax": "softmax", "O += P": "PV"}
    prog, in_loop = [], False
    for m in TOKEN.finditer(body):
        if m.group("phase"):
            name = next(v for k, v in phases.items() if k in m.group("phase"))
            prog.append(("math", name))
            continue
        line_start = body.rfind("\n", 0, m.start()) + 1
        if "//" in body[line_start : m.start()]:
            continue  # inside a comment
        if m.group("loop"):
            in_loop = True
            prog.append(("loop",))
        elif m.group("copy"):
            tile = m.group("dst")[1]
            nxt = "(j + 1)" in m.group("args") or "next" in m.group("args")
            prog.append(("copy", tile, (1 if nxt else 0) if in_loop else None))
        elif m.group("commit"):
            prog.append(("commit",))
        elif m.group("wait"):
            prog.append(("wait", int(m.group("n"))))
        elif m.group("sync"):
            prog.append(("sync",))
    if ("loop",) not in prog or [op for op in prog if op[0] == "math"] != [
        ("math", "S"),
        ("math", "softmax"),
        ("math", "PV"),
    ]:
        fail(f"{rel}: expected a KV loop with the phases S, softmax, PV in that order")
    return prog


def simulate(prog, tiles, stages):
    """Runs the program on the toy clock. Returns copy bars, math bars, stalls and barriers."""
    loop_at = prog.index(("loop",))
    prologue, body = prog[:loop_at], prog[loop_at + 1 :]
    t = 0.0
    groups = []  # land time of each committed group
    pending = []  # copies issued since the last commit: (tile name, land time)
    copies, math, stalls, barriers = [], [], [], []

    def run(ops, j):
        nonlocal t, pending
        for op in ops:
            kind = op[0]
            if kind == "copy":
                tile, ahead = op[1], op[2]
                idx = 0 if ahead is None else j + ahead
                if tile != "Q" and idx >= tiles:
                    continue  # `if (j + 1 < kv_tiles)`: nothing left to copy
                stage = None if (tile == "Q" or stages is None) else idx % stages
                copies.append((tile, idx, stage, t, t + CLOCK["copy"]))
                pending.append(t + CLOCK["copy"])
                t += CLOCK["issue"]
            elif kind == "commit":
                groups.append(max(pending, default=t))  # an empty group is complete at once
                pending = []
            elif kind == "wait":
                n = op[1]
                done = groups[: len(groups) - n] if n else groups
                ready = max(done, default=t)
                if ready > t:
                    stalls.append((t, ready, f"wait_group<{n}>"))
                    t = ready
            elif kind == "sync":
                barriers.append(t)
                t += CLOCK["barrier"]
            elif kind == "math":
                math.append((op[1], j, t, t + CLOCK[op[1]]))
                t += CLOCK[op[1]]

    run(prologue, 0)
    for j in range(tiles):
        run(body, j)
    return copies, math, stalls, barriers, t


def schedule_checks(prog):
    """Sanity of the parse: a cp.async rung commits groups and waits for them."""
    kinds = [op[0] for op in prog]
    if "wait" not in kinds or "commit" not in kinds:
        fail("no cp.async commit_group / wait_group found: is this a cp.async rung?")


def draw_timeline(ax, sim, title, xmax, lane_names=("Q copy", "K copies", "V copies", "4 warps")):
    copies, math, stalls, barriers, end = sim
    lanes = {"Q": 3, "K": 2, "V": 1, "warps": 0}
    h = 0.7
    for tile, idx, stage, t0, t1 in copies:
        label = (
            "Q" if tile == "Q" else f"{tile}{idx}" + ("" if stage is None else f" → stage {stage}")
        )
        box(ax, t0, lanes[tile] - h / 2, t1 - t0, h, COLOURS[tile], label, fs=7, alpha=0.55)
    short = {"S": "S{j}=Q·K{j}ᵀ", "softmax": "softmax", "PV": "O+=P·V{j}"}
    for name, j, t0, t1 in math:
        box(ax, t0, -h / 2, t1 - t0, h, COLOURS[name], short[name].format(j=j), fs=7, alpha=0.85)
    for t0, t1, label in stalls:
        box(
            ax,
            t0,
            -h / 2,
            t1 - t0,
            h,
            "white",
            label if t1 - t0 > 1.2 else "wait",
            fs=7,
            hatch="///",
            ec=COLOURS["stall"],
        )
    for tb in barriers:
        ax.plot([tb, tb], [-0.55, 3.55], color="black", lw=0.8, ls=(0, (2, 2)))
    ax.set_yticks([3, 2, 1, 0])
    ax.set_yticklabels(lane_names, fontsize=8)
    ax.set_ylim(-0.65, 3.65)
    ax.set_xlim(0, xmax)
    ax.set_xticks([])
    ax.set_title(title, fontsize=9, loc="left")
    ax.text(end, -0.5, " done", fontsize=7, va="bottom")
    for s in ("top", "right"):
        ax.spines[s].set_visible(False)


TIMELINE_TEXT = {
    "05": "Rung 05: K_j and V_j are copied, then waited for at once (wait_group<0>): the warps idle "
    "for a whole copy every tile",
    "07": "Rung 07: V_j is issued before S = Q·K_jᵀ, K_{{j+1}} before P·V_j: the copies land behind "
    "the math",
    "08": "Rung 08: a {stages}-stage ring: K_{{j+1}}, V_{{j+1}} go to the other stage, issued a "
    "half tile earlier (wait_group<1>)",
    "09": "Rung 09: the same copy schedule as rung 08 ({stages} stages)",
}


def legend(fig, extra=()):
    handles = [
        Patch(facecolor=COLOURS[k], alpha=a, label=l)
        for k, a, l in (
            ("K", 0.55, "cp.async of a tile, issue → in shared memory"),
            ("S", 0.85, "mma: S = Q·K_jᵀ"),
            ("softmax", 0.85, "online softmax"),
            ("PV", 0.85, "mma: O += P·V_j"),
        )
    ]
    handles.append(
        Patch(
            facecolor="white",
            edgecolor=COLOURS["stall"],
            hatch="///",
            label="warps stalled in cp.async.wait_group",
        )
    )
    handles.append(
        plt.Line2D([], [], color="black", lw=0.8, ls=(0, (2, 2)), label="__syncthreads()")
    )
    handles.extend(extra)
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=7.5, frameon=False)


def fig_timelines(out, only):
    sims = {}
    for rung in ("05", "07", "08", "09"):
        names = ["kBr", "kBc", "kWarps"] + (["kStages"] if rung in ("08", "09") else [])
        c = constants(RUNGS[rung], names)
        prog = kernel_program(RUNGS[rung])
        schedule_checks(prog)
        sims[rung] = (c, simulate(prog, KV_TILES, c.get("kStages")))
    xmax = max(sim[4] for _, sim in sims.values()) * 1.04
    foot = (
        f"Schematic, not measured: a toy clock (copy latency {CLOCK['copy']}, S {CLOCK['S']}, "
        f"softmax {CLOCK['softmax']}, P·V {CLOCK['PV']} units) runs the kernel's own order of "
        "copies, waits and barriers; one block, its warps in step. Same time scale in all "
        "four rungs."
    )
    for rung in ("05", "07", "08"):
        name = f"timeline_{rung}.png"
        if only and only not in name:
            continue
        c, sim = sims[rung]
        fig, ax = plt.subplots(figsize=(12, 3.4))
        title = TIMELINE_TEXT[rung].format(stages=c.get("kStages"))
        lanes = ("Q copy", "K copies", "V copies", f"{c['kWarps']} warps")
        draw_timeline(ax, sim, title + f"   (Br = {c['kBr']}, Bc = {c['kBc']})", xmax, lanes)
        fig.text(0.01, 0.2, foot, fontsize=7, color="#555555")
        legend(fig)
        fig.subplots_adjust(left=0.07, right=0.99, top=0.9, bottom=0.3)
        save(fig, out, name)
    if not only or only in "timeline_09.png":
        fig_timeline_09(out, sims, xmax, foot)


def fig_timeline_09(out, sims, xmax, foot):
    c, sim = sims["09"]
    text = read(RUNGS["09"])
    if not re.search(r"rQ\s*\[\s*2\s*\]", text):
        fail(f"{RUNGS['09']}: the double-buffered fragments rQ[2][...] were not found")
    slices = 128 // 16  # kQKSteps = kHeadDim / 16 at d = 128
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(12, 5.6), gridspec_kw={"height_ratios": [1.3, 1]})
    lanes = ("Q copy", "K copies", "V copies", f"{c['kWarps']} warps")
    draw_timeline(
        ax,
        sim,
        TIMELINE_TEXT["09"].format(stages=c["kStages"])
        + "; what changes is inside each mma phase, below",
        xmax,
        lanes,
    )

    # k-loop of S = Q·K_jᵀ: L = ldmatrix of a k-slice (issue, then its latency), M = its mma.
    issue, latency, mma = 0.3, 1.1, 1.0
    y08, y09 = 1.0, 0.0
    t = 0.0
    for k in range(slices):  # rung 08 as written: load slice k, multiply slice k
        box(bx, t, y08 - 0.3, issue, 0.6, COLOURS["ldmatrix"], "L", fs=6)
        ready = t + latency
        box(
            bx,
            t + issue,
            y08 - 0.3,
            ready - t - issue,
            0.6,
            "white",
            "",
            hatch="///",
            ec=COLOURS["stall"],
        )
        box(bx, ready, y08 - 0.3, mma, 0.6, COLOURS["mma"], f"M{k}", fs=7, alpha=0.85)
        t = ready + mma
    end08 = t
    t = 0.0
    ready_at = {}
    for kk in range(slices + 1):  # rung 09: L(kk) into buffer kk % 2, then M(kk - 1)
        if kk < slices:
            box(bx, t, y09 - 0.3, issue, 0.6, COLOURS["ldmatrix"], "L", fs=6)
            ready_at[kk] = t + latency
            t += issue
        if kk > 0:
            start = max(t, ready_at[kk - 1])
            if start > t:
                box(bx, t, y09 - 0.3, start - t, 0.6, "white", "", hatch="///", ec=COLOURS["stall"])
            box(bx, start, y09 - 0.3, mma, 0.6, COLOURS["mma"], f"M{kk - 1}", fs=7, alpha=0.85)
            t = start + mma
    end09 = t
    bx.set_yticks([y08, y09])
    bx.set_yticklabels(["rung 08\n(as written)", "rung 09"], fontsize=8)
    bx.set_ylim(-0.6, 1.6)
    bx.set_xlim(0, max(end08, end09) * 1.02)
    bx.set_xticks([])
    for s in ("top", "right"):
        bx.spines[s].set_visible(False)
    bx.set_title(
        f"The k-loop of S = Q·K_jᵀ at d = 128 ({slices} k-slices; L = ldmatrix of a slice, "
        "M = its mma): rung 09 loads slice k+1 into the other register buffer before the "
        "mma of slice k",
        fontsize=9,
        loc="left",
    )
    bx.text(
        max(end08, end09) * 1.02,
        -0.55,
        "rung 08 as its source reads; ptxas already hoists "
        "some of its loads (see rung 09's page)",
        fontsize=7,
        ha="right",
        va="bottom",
        color="#555555",
    )
    fig.text(0.01, 0.115, foot, fontsize=7, color="#555555")
    legend(
        fig,
        [
            Patch(facecolor=COLOURS["ldmatrix"], label="ldmatrix issue (k-loop panel)"),
            Patch(
                facecolor="white",
                edgecolor=COLOURS["stall"],
                hatch="///",
                label="mma waiting for its ldmatrix (short scoreboard)",
            ),
        ],
    )
    fig.subplots_adjust(left=0.08, right=0.99, top=0.94, bottom=0.2, hspace=0.35)
    save(fig, out, "timeline_09.png")


# ------------------------------------------------------------------------------------------------
# 3. Banks of one ldmatrix 8x8 matrix, before and after the swizzle (rung 06)
# ------------------------------------------------------------------------------------------------
def swizzle_formula():
    text = read(SWIZZLE_HEADER)
    m = re.search(
        r"int\s+chunk\s*\(\s*int\s+row\s*,\s*int\s+chunk\s*\)\s*\{\s*return\s+"
        r"chunk\s*\^\s*\(\s*row\s*%\s*(\d+)\s*\)\s*;",
        text,
    )
    if not m:
        fail(f"{SWIZZLE_HEADER}: `return chunk ^ (row % N);` not found in fl::swizzle::chunk")
    period = int(m.group(1))
    return lambda row, chunk: chunk ^ (row % period)


def fig_swizzle(out):
    chunk_of = swizzle_formula()
    d = 64  # a 128-byte row: one line of the 32 banks (d = 128: two lines per row)
    chunks = d * 2 // 16  # 16-byte chunks per row
    read_chunk = 0  # the logical chunk (dims 0-7) that one 8x8 matrix reads
    fig, axes = plt.subplots(1, 2, figsize=(12.5, 4.6))
    for ax, swz in zip(axes, (False, True)):
        hits = [0] * 8
        for r in range(8):
            for c in range(chunks):
                phys = chunk_of(r, c) if swz else c
                x = phys * 4
                sel = c == read_chunk
                col = "#4e79a7" if sel else "#f2f2f2"
                box(
                    ax,
                    x,
                    7 - r,
                    4,
                    1,
                    col,
                    f"r{r} c{c}",
                    fs=7,
                    tc="white" if sel else "#777777",
                    lw=1.6 if sel else 0.4,
                )
                if sel:
                    hits[phys % 8] += 1
        worst = max(hits)
        for g in range(8):
            colour = COLOURS["stall"] if hits[g] > 1 else ("#59a14f" if hits[g] else "#dddddd")
            box(
                ax,
                g * 4,
                -1.6,
                4,
                0.9,
                colour,
                f"{hits[g]}",
                fs=8,
                tc="white" if hits[g] else "#777777",
            )
        ax.text(-0.4, -1.15, "rows read\nin group", ha="right", va="center", fontsize=7)
        ax.set_xlim(-4.5, 32.2)
        ax.set_ylim(-1.8, 8.3)
        ax.set_xticks([g * 4 + 2 for g in range(8)])
        ax.set_xticklabels([f"banks\n{4 * g}-{4 * g + 3}" for g in range(8)], fontsize=7)
        ax.xaxis.tick_top()
        ax.set_yticks([7 - r + 0.5 for r in range(8)])
        ax.set_yticklabels([f"row {r}" for r in range(8)], fontsize=7)
        ax.tick_params(length=0)
        for s in ax.spines.values():
            s.set_visible(False)
        if swz:
            title = (
                f"swizzled: chunk c of row r at c ^ (r % 8) — the 8 rows hit "
                f"{sum(1 for x in hits if x)} bank groups: "
                + ("conflict-free, 1 pass" if worst == 1 else f"{worst}-way conflict")
            )
        else:
            title = (
                f"row-major: chunk c of row r at c — all 8 rows in banks 0-3: "
                f"{worst}-way conflict, {worst} passes"
            )
        ax.set_title(title, fontsize=8.5, pad=30)
    fig.suptitle(
        f"One ldmatrix 8x8 matrix reads chunk {read_chunk} (16 bytes: dims 0-7) of 8 "
        f"consecutive rows (d = {d}: a row is 128 bytes, one pass over the 32 banks; at "
        "d = 128 a row is two)",
        fontsize=9.5,
    )
    fig.text(
        0.01,
        0.015,
        "rN cM = logical 16-byte chunk M of row N, drawn where it is stored; "
        "blue = the 8 rows one matrix reads (one address per lane). Formula: "
        "fl::swizzle::chunk in common/ptx/swizzle.cuh.",
        fontsize=7.5,
        color="#555555",
    )
    fig.subplots_adjust(left=0.06, right=0.99, top=0.8, bottom=0.07, wspace=0.12)
    save(fig, out, "swizzle_banks.png")


# ------------------------------------------------------------------------------------------------
# 4. Hopper: producer / consumer warpgroups (rungs 19-21, the kernels' schedules on a toy clock)
# ------------------------------------------------------------------------------------------------
HOPPER = {  # the toy clock of the Hopper timelines; the ring size is each kernel's own kStages
    "consumers": 2,  # consumer warpgroups, `rows` query rows each
    "rows": 64,
    "tiles": 5,  # KV tiles drawn
    "tma": 0.8,  # TMA of K_j and V_j: issue -> "full" barrier complete
    "issue": 0.25,  # the producer thread: wait, arm expect_tx, issue
    "gemm": 1.0,  # one wgmma product (S or P·V) of one warpgroup, tensor cores to itself
    "softmax": 1.0,  # online softmax of one S tile of one warpgroup (rescale of O and packing P
    #                  included: rung 21 does those 0.2 of it after its wait for P·V)
    "rescale": 0.2,
    "drift": 0.12,  # consumer c's softmax is (1 + c * drift) slower: left alone, they drift apart
}
HOPPER_SRC = {  # rung -> (source, calls its consumer() must make, in this order, as drawn)
    "19": (
        "kernels/19_warp_specialization/warp_specialization.cu",
        [
            "ptx::mbarrier::wait(smem_u32(&full[stage])",
            "ptx::wgmma::wait_group<0>();",
            "online_softmax<false>(",
            "ptx::wgmma::wait_group<0>();",
            "ptx::mbarrier::arrive(smem_u32(&empty[stage]))",
        ],
    ),
    "20": (
        "kernels/20_pingpong/pingpong.cu",
        [
            "if (wg == 1) ptx::named_barrier_arrive(kTurn + 0",
            "wait_full(j);",
            "ptx::named_barrier_sync(my_turn",
            "issue_s(",
            "issue_pv(",
            "ptx::named_barrier_arrive(other_turn",
            "finish_batch();",
            "release(j - 1);",
            "softmax_and_pack(std::false_type{});",
        ],
    ),
    "21": (
        "kernels/21_intra_wg_overlap/intra_wg_overlap.cu",
        [
            "if (wg == 1) ptx::named_barrier_arrive(kTurn + 0",
            "wait_full(j);",
            "ptx::named_barrier_sync(my_turn",
            "issue_s(",
            "commit_group();  // group 1: S_j",
            "issue_pv(",
            "commit_group();  // group 2: P_{j-1}·V_{j-1}",
            "ptx::named_barrier_arrive(other_turn",
            "ptx::wgmma::wait_group<1>();",
            "online_softmax<false>(",
            "wait_pv_after(row_sum);",
            "release(j - 1);",
            "rescale_o(rO, correction);",
            "pack_p();",
        ],
    ),
}


def hopper_source(rung):
    """The rung's kStages, after checking that its consumer() still makes the calls drawn."""
    rel, calls = HOPPER_SRC[rung]
    text = read(rel)
    at = text.find("void consumer(")
    if at < 0:
        fail(f"{rel}: no consumer() function")
    for s in calls:
        found = text.find(s, at)
        if found < 0:
            fail(
                f"{rel}: `{s}` not found in consumer() after the calls before it: the figure of "
                f"rung {rung} no longer matches its kernel (update HOPPER_SRC and the drawing)"
            )
        at = found + len(s)
    if rung == "19" and "named_barrier" in text:
        fail(f"{rel}: named barriers in rung 19: the figure draws its consumers unordered")
    return constants(rel, ["kStages"])["kStages"], rel


def producer(release, stages):
    """One thread of the producer warpgroup: for tile j, wait until the tile `stages` earlier left
    its stage (every consumer arrived on "empty"), arm "full" with expect_tx, issue the TMA of K_j
    and V_j into the stage (one stage holds both, with one full and one empty barrier)."""
    H = HOPPER
    t, bars, tma, full = 0.0, [], [], []
    for j in range(len(release)):
        if j >= stages and release[j - stages] > t:
            bars.append(("wait", t, release[j - stages], f"wait empty[{j % stages}]"))
            t = release[j - stages]
        bars.append(("issue", t, t + H["issue"], ""))
        tma.append(("tma", t, t + H["tma"], f"K{j}, V{j} → stage {j % stages}"))
        full.append(t + H["tma"])
        t += H["issue"]
    return full, (bars, tma)


def consumers_19(full):
    """Each consumer, per tile j: wait full[j]; S_j (wgmma, wait_group 0); softmax_j; P·V_j (wgmma,
    wait_group 0); arrive empty[j]. Nothing orders the two: both in a GEMM at once share the tensor
    cores (each at half rate)."""
    H = HOPPER
    nc, n, step = H["consumers"], H["tiles"], 0.005
    prog = [
        op
        for j in range(n)
        for op in (("full", j), ("S", j), ("softmax", j), ("PV", j), ("arrive", j))
    ]
    pos, cur, ready = [0] * nc, [None] * nc, [0.0] * nc
    bars = {c: [] for c in range(nc)}
    arrive = [[0.0] * nc for _ in range(n)]
    busy, clock = [], 0.0
    while any(pos[c] < len(prog) or cur[c] for c in range(nc)):
        for c in range(nc):
            while cur[c] is None and pos[c] < len(prog) and ready[c] <= clock + 1e-9:
                kind, j = prog[pos[c]]
                pos[c] += 1
                if kind == "full":
                    if full[j] > clock + 1e-9:
                        bars[c].append(("wait", clock, full[j], "wait full"))
                        ready[c] = full[j]
                elif kind == "arrive":
                    arrive[j][c] = clock
                else:
                    work = H["gemm"] if kind != "softmax" else H["softmax"] * (1 + c * H["drift"])
                    cur[c] = [kind, j, work, clock]
        gemm = [c for c in range(nc) if cur[c] and cur[c][0] != "softmax"]
        if gemm:
            busy.append((clock, clock + step))
        for c in range(nc):
            if cur[c]:
                cur[c][2] -= step / len(gemm) if c in gemm else step
                if cur[c][2] <= 1e-9:
                    kind, j, _, start = cur[c]
                    bars[c].append((kind, start, clock + step, f"{kind_name(kind)}{j}"))
                    cur[c], ready[c] = None, clock + step
        clock += step
        if clock > 500:
            fail("rung 19 schedule does not finish")
    return [max(a) for a in arrive], bars, busy


def turn_program(c, n, overlap):
    """The consumer() of rung 20 (overlap False) or 21 (True) as a list of operations.

    Step 0: S_0 alone; step j: S_j and P_{j-1}·V_{j-1} in one batch; step n: P_{n-1}·V_{n-1}
    alone. Each batch between "sync my turn" and "arrive on the other's turn". Rung 20 commits the
    batch as one group and waits for it (wait_group 0), then releases stage j-1 and runs the
    softmax of S_j. Rung 21 commits S_j and P·V apart, waits for S_j (wait_group 1), runs the
    softmax under P·V, then waits for P·V (wait_group 0), releases and rescales O / packs P_j."""
    sm, rs = "softmax", "rescale"
    prog = []
    for b in range(n + 1):
        if b < n:
            prog.append(("full", b))
        prog.append(("turn",))
        if b < n:
            prog.append(("gemm", "S", b))
            if overlap:
                prog.append(("commit",))
        if b > 0:
            prog.append(("gemm", "PV", b - 1))
        prog.append(("commit",))
        if b < n or c == 0:  # consumer 1's last hand-over is left out: nobody syncs on it
            prog.append(("hand",))
        if b == 0:
            prog += [("wait", 0), (sm, 0, 1.0)]
        elif b == n:
            prog += [("wait", 0), ("release", b - 1)]
        elif not overlap:
            prog += [("wait", 0), ("release", b - 1), (sm, b, 1.0)]
        else:
            prog += [("wait", 1), (sm, b, 1.0 - HOPPER[rs]), ("wait", 0), ("release", b - 1)]
            prog.append((rs, b, HOPPER[rs]))
    return prog


def consumers_turns(full, overlap):
    """Runs both consumers' turn_program on the toy clock. The tensor cores run the wgmma in the
    order they are issued (the other consumer's batch queues behind one's own); the named barrier
    of consumer c completes once it syncs and the other has arrived (consumer 1 arrives on
    consumer 0's once at the start). Returns the release times, per consumer the bars of its warps
    and of its wgmma, and the tensor cores' busy intervals."""
    H = HOPPER
    nc, n = H["consumers"], H["tiles"]
    progs = [turn_program(c, n, overlap) for c in range(nc)]
    pc, t = [0] * nc, [0.0] * nc
    groups = [[] for _ in range(nc)]  # per consumer: committed groups, [(start, end)] each
    open_ = [[] for _ in range(nc)]  # the group being issued
    hands, syncs = [[0.0], []], [0, 0]  # arrivals on the turn barrier of consumer 0, 1
    warps = {c: [] for c in range(nc)}
    gemms = {c: [] for c in range(nc)}
    arrive = [[0.0] * nc for _ in range(n)]
    tc, busy = 0.0, []
    while any(pc[c] < len(progs[c]) for c in range(nc)):
        ready = [
            c
            for c in range(nc)
            if pc[c] < len(progs[c]) and (progs[c][pc[c]] != ("turn",) or len(hands[c]) > syncs[c])
        ]
        if not ready:
            fail("rung 20/21 schedule: both consumers wait for their turn (deadlock)")
        c = min(ready, key=lambda k: (t[k], k))
        op = progs[c][pc[c]]
        pc[c] += 1
        kind = op[0]
        if kind == "full":
            if full[op[1]] > t[c]:
                warps[c].append(("wait", t[c], full[op[1]], "wait full"))
                t[c] = full[op[1]]
        elif kind == "turn":
            go = hands[c][syncs[c]]
            syncs[c] += 1
            if go > t[c] + 1e-9:
                warps[c].append(("turn", t[c], go, "turn"))
                t[c] = go
        elif kind == "gemm":
            start = max(t[c], tc)
            tc = start + H["gemm"]
            gemms[c].append((op[1], start, tc, f"{kind_name(op[1])}{op[2]}"))
            busy.append((start, tc))
            open_[c].append((start, tc))
        elif kind == "commit":
            groups[c].append(open_[c])
            open_[c] = []
        elif kind == "hand":
            hands[1 - c].append(t[c])
        elif kind == "wait":  # wgmma.wait_group N: all but the N newest groups complete
            waited = groups[c][: len(groups[c]) - op[1]]
            groups[c] = groups[c][len(groups[c]) - op[1] :]
            done = max((e for g in waited for _, e in g), default=t[c])
            if done > t[c] + 1e-9:
                warps[c].append(("wgwait", t[c], done, f"wait_group {op[1]}"))
                t[c] = done
        elif kind == "release":
            arrive[op[1]][c] = t[c]
        else:  # softmax / rescale on the warps
            d = op[2] * H["softmax"] * (1 + c * H["drift"])
            label = f"sm{op[1]}" if kind == "softmax" else ""
            warps[c].append((kind, t[c], t[c] + d, label))
            t[c] += d
    return [max(a) for a in arrive], (warps, gemms), busy


def kind_name(kind):
    return {"S": "S", "PV": "PV", "softmax": "sm"}[kind]


def hopper_run(consumer_fn, stages):
    release = [0.0] * HOPPER["tiles"]
    for _ in range(50):
        full, pbars = producer(release, stages)
        new, cbars, busy = consumer_fn(full)
        if all(abs(a - b) < 1e-6 for a, b in zip(new, release)):
            return pbars, cbars, merge(busy)
        release = new
    fail("producer/consumer schedule does not settle")


def merge(intervals):
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1] + 1e-6:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


HOPPER_STYLE = {
    "tma": (COLOURS["tma"], 0.6, None),
    "issue": ("#59386b", 1, None),
    "S": (COLOURS["S"], 0.85, None),
    "PV": (COLOURS["PV"], 0.85, None),
    "softmax": (COLOURS["softmax"], 0.85, None),
    "rescale": ("#9c755f", 0.85, None),
    "wait": ("white", 1, "///"),
    "turn": ("white", 1, "..."),
    "wgwait": ("white", 1, "\\\\\\"),
}


def draw_hopper(name, title, lanes, busy, out, note, stages):
    fig, ax = plt.subplots(figsize=(12.5, 0.55 * (len(lanes) + 1) + 1.9))
    h = 0.66
    end = max(b[2] for _, bars in lanes for b in bars)
    end = max(end, max(b for _, b in busy))
    ys = list(range(len(lanes), 0, -1))
    for y, (lane, bars) in zip(ys, lanes):
        for kind, t0, t1, text in bars:
            colour, alpha, hatch = HOPPER_STYLE[kind]
            ec = COLOURS["stall"] if hatch else "black"
            fs = 7 if t1 - t0 > 0.5 else 5.5
            if kind == "tma":  # TMA copies overlap: stagger them, one row per stage
                row = int(re.match(r"K(\d+)", text).group(1)) % stages
                hh = 1.2 * h / stages
                yy = y + 0.6 * h - (row + 1) * hh
                box(ax, t0, yy, t1 - t0, hh, colour, text, fs=6, alpha=alpha)
                continue
            fits = t1 - t0 > 0.0056 * len(text) * end
            box(
                ax,
                t0,
                y - h / 2,
                t1 - t0,
                h,
                colour,
                text if fits else "",
                fs=fs,
                alpha=alpha,
                hatch=hatch,
                ec=ec,
            )
    for a, b in busy:
        box(ax, a, -h / 2, b - a, h, "#333333", "", lw=0)
    ax.text(
        end,
        0,
        f"  tensor cores busy {sum(b - a for a, b in busy) / end:.0%} of the time",
        va="center",
        fontsize=7.5,
    )
    ax.set_yticks(ys + [0])
    ax.set_yticklabels([lane for lane, _ in lanes] + ["tensor cores (SM)"], fontsize=8)
    ax.set_ylim(-0.6, len(lanes) + 0.6)
    ax.set_xlim(-0.015 * end, end * 1.22)
    ax.set_xticks([])
    for s in ("top", "right"):
        ax.spines[s].set_visible(False)
    ax.set_title(title, fontsize=9, loc="left")
    kinds = {b[0] for _, bars in lanes for b in bars}
    handles = [
        Patch(facecolor=COLOURS["tma"], alpha=0.6, label="TMA of K_j, V_j into one stage"),
        Patch(facecolor=COLOURS["S"], alpha=0.85, label="Sj: wgmma S_j = Q·K_jᵀ"),
        Patch(facecolor=COLOURS["softmax"], alpha=0.85, label="smj: softmax of S_j (warps)"),
        Patch(facecolor=COLOURS["PV"], alpha=0.85, label="PVj: wgmma O += P_j·V_j"),
    ]
    if "rescale" in kinds:
        handles.append(
            Patch(
                facecolor=HOPPER_STYLE["rescale"][0], alpha=0.85, label="O *= correction, pack P_j"
            )
        )
    handles.append(
        Patch(
            facecolor="white",
            edgecolor=COLOURS["stall"],
            hatch="///",
            label="waiting on an mbarrier (full / empty)",
        )
    )
    if "turn" in kinds:
        handles.append(
            Patch(
                facecolor="white",
                edgecolor=COLOURS["stall"],
                hatch="...",
                label="waiting for its turn (named barrier)",
            )
        )
    if "wgwait" in kinds:
        handles.append(
            Patch(
                facecolor="white",
                edgecolor=COLOURS["stall"],
                hatch="\\\\\\",
                label="wgmma.wait_group (its wgmma queued / running)",
            )
        )
    inch = fig.get_size_inches()[1]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=7.5, frameon=False)
    fig.text(0.01, 0.5 / inch, textwrap.fill(note, 200), fontsize=7, color="#555555", va="bottom")
    fig.subplots_adjust(left=0.13, right=0.99, top=1 - 0.35 / inch, bottom=1.2 / inch)
    save(fig, out, name)


def fig_hopper(out, only):
    H = HOPPER
    rows = H["rows"]
    cons = [
        f"consumer WG {c}\n(rows {c * rows}-{(c + 1) * rows - 1})" for c in range(H["consumers"])
    ]
    common = (
        "The kernel's schedule on a toy clock, schematic (not measured): TMA {tma}, one wgmma "
        "product {gemm}, softmax {softmax} units (consumer 1's {drift:.0%} slower); {tiles} KV "
        "tiles of one block; a {stages}-stage ring from {src}."
    )
    for rung, title, extra in (
        (
            "19",
            "Rung 19, warp specialisation: 1 producer warpgroup fills a {s}-stage ring; 2 consumer "
            "warpgroups of {r} rows wait 'full', compute, arrive 'empty'",
            " Per tile a consumer waits 'full', runs S_j (wgmma, wait), the softmax, P·V_j (wgmma, "
            "wait) and arrives 'empty'. Nothing orders the two consumers: they drift, both in the "
            "softmax at once leaves the tensor cores idle, both in a GEMM share them (each at half "
            "rate).",
        ),
        (
            "20",
            "Rung 20, ping-pong: step j is one batch, S_j with P_{{j-1}}·V_{{j-1}}; named barriers "
            "give the consumers' batches turns, so one's softmax runs under the other's GEMMs",
            " Step j: wait 'full', sync on its turn, issue S_j and P_{j-1}·V_{j-1}, arrive on the "
            "other's turn, wait_group 0, release stage j-1, softmax of S_j (step 0: S_0 alone, "
            "step n: P_{n-1}·V_{n-1} alone); a stage is released after step j+1. The tensor cores "
            "run the batches in issue order: the other's batch queues behind one's own. On "
            "this clock a consumer's turn has always been handed over by the time it syncs; what "
            "holds it is its batch queued behind the other's (wait_group).",
        ),
        (
            "21",
            "Rung 21, intra-warpgroup overlap: S_j and P_{{j-1}}·V_{{j-1}} committed apart; "
            "wait_group 1, the softmax of S_j while P_{{j-1}}·V_{{j-1}} runs, then wait_group 0",
            " As rung 20 (turns, the same 3-stage ring of K_j and V_j), but the batch is two "
            "commit groups: wait_group 1 (S_j only), softmax of S_j under the warpgroup's own "
            "P_{j-1}·V_{j-1}, wait_group 0, release stage j-1, rescale O and pack P_j. Upper "
            "lane of a consumer: its wgmma on the tensor cores (async); lower: its warps. On this "
            "clock the tensor cores are already saturated in rung 20, so their busy share does not "
            "move: the figure shows where the softmax runs now, not a speed-up.",
        ),
    ):
        name = f"hopper_timeline_{rung}.png"
        if only and only not in name:
            continue
        stages, src = hopper_source(rung)
        fn = consumers_19 if rung == "19" else lambda f, r=rung: consumers_turns(f, r == "21")
        pbars, cbars, busy = hopper_run(fn, stages)
        lanes = [("producer WG\n(1 thread)", pbars[0]), ("TMA in flight", pbars[1])]
        if rung == "19":
            lanes += [(cons[c], cbars[c]) for c in range(H["consumers"])]
        elif rung == "20":  # the warps wait for their batch: its GEMMs drawn in their lane
            warps, gemms = cbars
            for c in range(H["consumers"]):
                bars = warps[c] + gemms[c]
                # a wait_group drawn only until the batch starts on the tensor cores
                bars = [
                    (k, a, min([b] + [g[1] for g in gemms[c] if a - 1e-9 <= g[1] < b]), x)
                    if k == "wgwait"
                    else (k, a, b, x)
                    for k, a, b, x in bars
                ]
                lanes.append((cons[c], [x for x in bars if x[2] - x[1] > 1e-6]))
        else:
            warps, gemms = cbars
            for c in range(H["consumers"]):
                lanes.append((f"WG {c}: wgmma\n(async)", gemms[c]))
                lanes.append((cons[c].replace("\n", ": warps\n"), warps[c]))
        note = common.format(stages=stages, src=src, **H) + extra
        draw_hopper(name, title.format(s=stages, r=rows), lanes, busy, out, note, stages)


# ------------------------------------------------------------------------------------------------
# 5. Hopper: the wgmma shared-memory descriptor and the accumulator layout (rungs 17-19)
# ------------------------------------------------------------------------------------------------
def descriptor_fields():
    """The fields of gmma::encode in GMMA_HEADER: name -> (low bit, width, right shift of value).

    Parsed from the body of `encode`: one `static_cast<uint64_t>((f.X >> S) & 0xMASK) << LOW` per
    field (the shift and the mask optional; a field without a mask runs to bit 63)."""
    text = read(GMMA_HEADER)
    m = re.search(
        r"uint64_t\s+encode\s*\(\s*const\s+DescFields\s*&\s*f\s*\)\s*\{(.*?)\}", text, re.S
    )
    if not m:
        fail(f"{GMMA_HEADER}: `uint64_t encode(const DescFields& f) {{...}}` not found")
    terms = re.findall(r"static_cast<uint64_t>\((.*?)\)\s*<<\s*(\d+)", m.group(1))
    fields = {}
    for expr, low in terms:
        name = re.search(r"f\.(\w+)", expr)
        if not name:
            fail(f"{GMMA_HEADER}: encode term `{expr}` names no field f.X")
        shift = re.search(r">>\s*(\d+)", expr)
        mask = re.search(r"&\s*0x([0-9A-Fa-f]+)", expr)
        low = int(low)
        width = bin(int(mask.group(1), 16)).count("1") if mask else 64 - low
        fields[name.group(1)] = (low, width, int(shift.group(1)) if shift else 0)
    want = {"start_addr", "lbo", "sbo", "base_offset", "layout"}
    if set(fields) != want:
        fail(f"{GMMA_HEADER}: encode's fields are {sorted(fields)}, expected {sorted(want)}")
    spans = sorted((lo, lo + w) for lo, w, _ in fields.values())
    if any(a[1] > b[0] for a, b in zip(spans, spans[1:])) or spans[-1][1] > 64:
        fail(f"{GMMA_HEADER}: encode's fields overlap or pass bit 63: {fields}")
    return fields


def gmma_constants():
    """kSw128GroupBytes, the LBO that kmajor_sw128 encodes, Layout::k128B and the swizzle period of
    sw128_offset, all from GMMA_HEADER."""
    text = read(GMMA_HEADER)
    out = {}
    m = re.search(r"kSw128GroupBytes\s*=\s*(\d+)\s*\*\s*(\d+)\s*;", text)
    if not m:
        fail(f"{GMMA_HEADER}: `kSw128GroupBytes = A * B;` not found")
    out["group"] = int(m.group(1)) * int(m.group(2))
    m = re.search(
        r"kmajor_sw128\s*\([^)]*\)\s*\{\s*return\s+encode\(\{\s*\w+\s*,\s*(\d+)\s*,", text
    )
    if not m:
        fail(f"{GMMA_HEADER}: kmajor_sw128's `return encode({{addr, LBO, ...}})` not found")
    out["k_lbo"] = int(m.group(1))
    m = re.search(r"k128B\s*=\s*(\d+)", text)
    if not m:
        fail(f"{GMMA_HEADER}: `k128B = N` not found in enum Layout")
    out["layout"] = int(m.group(1))
    m = re.search(r"sw128_offset\s*\(.*?\{(.*?)\}", text, re.S)
    xor = r"\(\s*c\s*%\s*64\s*\)\s*/\s*8\s*\)\s*\^\s*\(\s*r\s*%\s*(\d+)\s*\)"
    p = m and re.search(xor, m.group(1))
    if not p:
        fail(f"{GMMA_HEADER}: `((c % 64) / 8) ^ (r % N)` not found in sw128_offset")
    out["period"] = int(p.group(1))
    return out


def encode_desc(fields, values):
    d = 0
    for name, (low, width, shift) in fields.items():
        d |= ((values[name] >> shift) & ((1 << width) - 1)) << low
    return d


def fig_descriptor(out):
    fields = descriptor_fields()
    g = gmma_constants()
    bc = constants(RUNGS["17"], ["kBc"])["kBc"]
    row_bytes = 128  # 64 16-bit columns
    kinds = [
        (
            "K-major (Q, K in S = Q·Kᵀ)",
            {"start_addr": 0, "lbo": g["k_lbo"], "sbo": g["group"], "base_offset": 0,
             "layout": g["layout"]},
            {"lbo": f"LBO {g['k_lbo']} B: unused", "sbo": f"SBO {g['group']} B: next 8 rows"},
            f"k-step of 16 dims = 32 B: start += 32 >> 4 = 2 (s % 4 = 0..3 in a 64-column block; "
            f"the next block is R x {row_bytes} B on)",
        ),
        (
            "MN-major, transpose bit (V in O = P·V)",
            {"start_addr": 0, "lbo": bc * row_bytes, "sbo": g["group"], "base_offset": 0,
             "layout": g["layout"]},
            {"lbo": f"LBO {bc}x{row_bytes} = {bc * row_bytes} B:\nnext 64 dims", "sbo":
             f"SBO {g['group']} B: next 8 keys"},
            f"k-step of 16 keys = 16 x {row_bytes} B = {16 * row_bytes} B: start += "
            f"{16 * row_bytes} >> 4 = {16 * row_bytes >> 4}",
        ),
    ]
    names = {
        "start_addr": "start address >> 4",
        "lbo": "leading-dim byte offset >> 4",
        "sbo": "stride-dim byte offset >> 4",
        "base_offset": "base\noffset",
        "layout": "layout",
    }
    colours = {
        "start_addr": "#4e79a7",
        "lbo": "#f28e2b",
        "sbo": "#59a14f",
        "base_offset": "#b07aa1",
        "layout": "#e15759",
    }
    fig = plt.figure(figsize=(13, 6.8))
    ax = fig.add_axes([0.02, 0.38, 0.96, 0.61])
    W = 0.19  # width of one bit

    def x_of(bit):  # bit 63 on the left
        return (63 - bit) * W

    def bar(y, h, labels, alpha=1.0, fs=8):
        taken = set()
        for name, (low, width, _) in fields.items():
            taken.update(range(low, low + width))
            box(ax, x_of(low + width - 1), y, width * W, h, colours[name], labels[name], fs=fs,
                alpha=alpha, tc="black")
        bit = 0
        while bit < 64:  # the zero gaps
            if bit in taken:
                bit += 1
                continue
            end = bit
            while end + 1 < 64 and end + 1 not in taken:
                end += 1
            box(ax, x_of(end), y, (end - bit + 1) * W, h, "#eeeeee", "0", fs=7, tc="#888888")
            bit = end + 1

    # The format
    top = 6.9
    bar(top, 0.9, {k: names[k] for k in fields}, fs=7.5)
    edges = set()
    for low, width, _ in fields.values():
        edges.update((low, low + width - 1))
    for b in range(64):
        ax.plot([x_of(b), x_of(b) + W], [top + 0.9, top + 0.9], lw=0)
        if b in edges or b % 8 == 0:
            ax.text(x_of(b) + W / 2, top + 1.0, str(b), ha="center", va="bottom", fontsize=6.5)
        ax.plot([x_of(b), x_of(b)], [top + 0.9, top + 0.75], color="black", lw=0.3)
    ax.text(0, top + 1.45, "wgmma shared-memory matrix descriptor (64 bits; fields from "
            "gmma::encode in " + GMMA_HEADER + ")", fontsize=10, weight="bold")
    for name, (low, width, shift) in fields.items():
        ax.text(x_of(low + width - 1) + width * W / 2, top - 0.12,
                f"bits {low}-{low + width - 1}" + (f", value >> {shift}" if shift else ""),
                ha="center", va="top", fontsize=6.5, color="#444444")

    # The two operand kinds
    y = 4.6
    for title, vals, extra, step in kinds:
        d = encode_desc(fields, vals)
        labels = {
            "start_addr": "tile address >> 4\n(1024-B aligned)",
            "lbo": f"{vals['lbo'] >> fields['lbo'][2]}\n" + extra["lbo"],
            "sbo": f"{vals['sbo'] >> fields['sbo'][2]}\n" + extra["sbo"],
            "base_offset": str(vals["base_offset"]),
            "layout": f"{vals['layout']}\n128B",
        }
        ax.text(0, y + 1.02, f"{title}:  0x{d:016x} + (address >> 4)", fontsize=9, weight="bold")
        bar(y, 0.85, labels, alpha=0.55, fs=7)
        ax.text(0, y - 0.12, step, fontsize=8, va="top", color="#333333")
        y -= 2.05
    ax.set_xlim(-0.1, 64 * W + 0.1)
    ax.set_ylim(2.1, 9.0)
    ax.axis("off")

    # The 128-byte swizzle of one 1024-byte group
    ax2 = fig.add_axes([0.62, 0.02, 0.36, 0.32])
    per = g["period"]
    for r in range(8):
        for c in range(8):
            slot = c ^ (r % per)
            box(ax2, slot, 7 - r, 1, 1, plt.cm.tab10(c / 10), f"c{c}", fs=6.5, alpha=0.45)
    ax2.set_xlim(0, 8)
    ax2.set_ylim(0, 8)
    ax2.set_xticks([s + 0.5 for s in range(8)])
    ax2.set_xticklabels([f"byte {16 * s}" for s in range(8)], fontsize=6)
    ax2.xaxis.tick_top()
    ax2.set_yticks([7 - r + 0.5 for r in range(8)])
    ax2.set_yticklabels([f"row {r}" for r in range(8)], fontsize=6)
    ax2.tick_params(length=0, pad=1)
    ax2.set_aspect("auto")
    fig.text(0.44, 0.32, "128-byte swizzle of one 1024-byte\ngroup (8 rows of 128 B = 64 "
             "16-bit\ncolumns): 16-byte chunk c of row r\nis stored at byte 16 (c ^ (r % "
             f"{per}))\n(gmma::sw128_offset). Chunk 0, the\nfirst 8 columns, sits on a diagonal.",
             fontsize=7.5, va="top")
    fig.text(0.02, 0.30, textwrap.fill(
        f"Every tile of rungs 17-19 is 64-column blocks of 128-byte rows in this swizzle, "
        f"1024-byte aligned (base offset 0). A d = 128 tile of R rows is two blocks, R x 128 B "
        f"apart. SBO = {g['group']} B steps 8 rows (K-major) or 8 keys (MN-major); with this "
        f"swizzle the K-major LBO is ignored ({g['k_lbo']} encoded), while for V it steps the "
        f"n = dim direction to the second block (R = kBc = {bc} keys of rung 17). Only the start "
        "field moves per k-step (gmma::advance adds bytes >> 4).", 80),
        fontsize=8, va="top", color="#333333")
    save(fig, out, "wgmma_descriptor.png")


def fragment_fn(name):
    """A `RowCol NAME(int lane, int X) { return {ROW, COL}; }` of FRAGMENT_HEADER as a Python
    function of (lane, X) (C integer division)."""
    text = read(FRAGMENT_HEADER)
    m = re.search(name + r"\s*\(\s*int\s+lane\s*,\s*int\s+(\w+)(?:\s*,\s*int\s+(\w+))?\s*\)\s*\{"
                  r"\s*return\s*\{([^,]+),([^}]+)\}\s*;", text)
    if not m:
        fail(f"{FRAGMENT_HEADER}: `{name}(int lane, int x) {{ return {{row, col}}; }}` not found")
    args = ["lane", m.group(1)] + ([m.group(2)] if m.group(2) else [])
    row, col = (e.strip().replace("/", "//") for e in (m.group(3), m.group(4)))
    return eval(f"lambda {', '.join(args)}: ({row}, {col})")  # noqa: S307 (our own header)


def wgmma_acc(w, lane, i):
    """Element i of the accumulator of lane `lane` of warp w, as common/ptx/wgmma.cuh states it."""
    group, quad, b = lane // 4, lane % 4, i // 4
    return 16 * w + group + 8 * ((i % 4) // 2), 8 * b + 2 * quad + i % 2


def fig_accumulator(out):
    text = " ".join(read(WGMMA_HEADER).replace("//", " ").split())
    for s in ("owns rows 16w..16w+15", "d[4b + 0], d[4b + 1] = D[16w + group ][8b + 2 quad]",
              "d[4b + 2], d[4b + 3] = D[16w + group + 8][8b + 2 quad]",
              "a[0] = (row group, k 2quad, +1), a[1] = (row group + 8, k 2quad, +1), a[2] = "
              "(row group, k 8 + 2quad, +1), a[3] = (row group + 8, k 8 + 2quad, +1)"):
        if " ".join(s.split()) not in text:
            fail(f"{WGMMA_HEADER}: the banner no longer says `{s}`: update the figure")
    c_frag, a_frag = fragment_fn("c_m16n8"), fragment_fn("a_m16k16")
    for lane in range(32):  # per 8-column block, the C fragment of mma.sync m16n8k16
        for i in range(16):
            for w in range(4):
                r, c = wgmma_acc(w, lane, i)
                fr, fc = c_frag(lane, i % 4)
                if (r, c) != (16 * w + fr, 8 * (i // 4) + fc):
                    fail(f"wgmma accumulator map != {FRAGMENT_HEADER} c_m16n8 at lane {lane} d{i}")
        for s in range(2):  # blocks 2s, 2s+1 packed in pairs = the A fragment of k-step s
            for reg in range(4):
                for e in range(2):
                    r, c = wgmma_acc(0, lane, 8 * s + 2 * reg + e)
                    if (r, c - 16 * s) != a_frag(lane, reg, e):
                        fail(f"d[{8 * s + 2 * reg + e}] of lane {lane} is not A register {reg} "
                             f"half {e} of {FRAGMENT_HEADER} a_m16k16")
    warp_col = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1"]
    fig = plt.figure(figsize=(12, 9.5))
    ax = fig.add_axes([0.05, 0.04, 0.43, 0.87])
    owner = {}
    for w in range(4):
        for lane in range(32):
            for i in range(8):  # blocks 0 and 1
                owner[wgmma_acc(w, lane, i)] = (w, lane, i)
    for (r, c), (w, lane, i) in owner.items():
        label = lane in (0, 5) or (w == 0 and lane < 8)
        bold = lane == 5
        box(ax, c, 63 - r, 1, 1, warp_col[w], f"T{lane} d{i}" if label else "", fs=5.2,
            alpha=0.75 if bold else 0.35, lw=0.25)
    for w in range(5):
        ax.plot([0, 16], [64 - 16 * w] * 2, color="black", lw=1.6)
    ax.plot([8, 8], [0, 64], color="black", lw=1.6)
    for w in range(4):
        ax.text(-0.3, 63.5 - 16 * w - 7.5, f"warp {w}\nrows {16 * w}-{16 * w + 15}", ha="right",
                va="center", fontsize=8, color=warp_col[w], weight="bold")
    ax.set_xlim(-3.2, 16)
    ax.set_ylim(0, 64)
    ax.set_xticks([c + 0.5 for c in range(16)])
    ax.set_xticklabels([str(c) for c in range(16)], fontsize=6.5)
    ax.xaxis.tick_top()
    ax.set_yticks([63 - r + 0.5 for r in range(0, 64, 4)])
    ax.set_yticklabels([str(r) for r in range(0, 64, 4)], fontsize=6.5)
    ax.tick_params(length=0, pad=1)
    for sp in ax.spines.values():
        sp.set_visible(False)
    ax.text(4, 64.9, "block b = 0 (d0-d3)", ha="center", fontsize=8)
    ax.text(12, 64.9, "block b = 1 (d4-d7)", ha="center", fontsize=8)
    fig.text(0.02, 0.975, "Who holds what of a wgmma m64nNk16 accumulator (fp32, N/2 registers a "
             "thread): the 64 x 16 top-left corner", fontsize=10.5, weight="bold", va="top")
    fig.text(0.02, 0.952, "Tl dI = lane l of the cell's warp (thread 32w + l of the warpgroup), "
             "register d[I]. Labelled: lanes 0-7 of warp 0, lanes 0 and 5 (darker) of every warp. "
             "Blocks b = 2..N/8-1 repeat with d[4b..4b+3].", fontsize=8, va="top", color="#444444")

    # The RS A operand of k-step s of P·V, from blocks 2s and 2s+1 of S
    ax2 = fig.add_axes([0.56, 0.42, 0.41, 0.46])
    a_col = ["#4e79a7", "#e15759", "#59a14f", "#edc948"]
    for lane in range(32):
        for reg in range(4):
            for e in range(2):
                r, c = a_frag(lane, reg, e)
                hi = lane == 5
                text = f"T{lane}\na{reg}.{'lo' if e == 0 else 'hi'}" if lane < 8 else ""
                box(ax2, c, 15 - r, 1, 1, a_col[reg], text, fs=5.2, alpha=0.85 if hi else
                    0.3, lw=1.5 if hi else 0.25)
    ax2.plot([8, 8], [0, 16], color="black", lw=1.6)
    ax2.plot([0, 16], [8, 8], color="black", lw=0.8, ls="--")
    ax2.set_xlim(0, 16)
    ax2.set_ylim(0, 16)
    ax2.set_xticks([c + 0.5 for c in range(16)])
    ax2.set_xticklabels([f"16s+{c}" if c in (0, 8) else str(c) for c in range(16)], fontsize=6)
    ax2.xaxis.tick_top()
    ax2.set_yticks([15 - r + 0.5 for r in range(16)])
    ax2.set_yticklabels([f"16w+{r}" if r in (0, 8) else str(r) for r in range(16)], fontsize=6)
    ax2.tick_params(length=0, pad=1)
    ax2.set_title("P of one warp, keys 16s..16s+15 = S blocks 2s | 2s+1, as the\n"
                  "RS A operand of k-step s of O += P·V (16-bit, packed in pairs)",
                  fontsize=8.5, pad=16)
    fig.text(0.56, 0.395, textwrap.fill(
        "Each thread packs its own S registers, rounded to 16 bits, two by two (lower key in the "
        "low half): no shuffle, no shared memory.", 72), fontsize=8, va="top")
    rows = [
        ("a0", "d[8s+0], d[8s+1]", "row group", "keys 16s + 2quad, +1", 0),
        ("a1", "d[8s+2], d[8s+3]", "row group+8", "keys 16s + 2quad, +1", 1),
        ("a2", "d[8s+4], d[8s+5]", "row group", "keys 16s + 8 + 2quad, +1", 2),
        ("a3", "d[8s+6], d[8s+7]", "row group+8", "keys 16s + 8 + 2quad, +1", 3),
    ]
    y = 0.345
    fig.text(0.56, y, "A reg   = pack(S regs)            element of P", fontsize=8,
             family="monospace", weight="bold")
    for reg, ds, row, keys, k in rows:
        y -= 0.026
        fig.text(0.56, y, f"{reg:<7} = pack({ds})  {row:<11} {keys}", fontsize=8,
                 family="monospace", color="black",
                 bbox=dict(facecolor=a_col[k], alpha=0.3, lw=0, pad=1.5))
    fig.text(0.56, y - 0.04, textwrap.fill(
        "a0, a1 come from S block 2s, a2, a3 from block 2s+1. Lane l = 4 group + quad; e.g. T5 "
        "(group 1, quad 1, highlighted): a0 = P[1][16s+2, 16s+3], a3 = P[9][16s+10, 16s+11]. "
        f"The map is checked against {FRAGMENT_HEADER}: per 8-column block the accumulator is "
        "c_m16n8, and the pairs are a_m16k16 of mma.sync m16n8k16.", 72),
        fontsize=8, va="top", color="#444444")
    save(fig, out, "wgmma_accumulator.png")


# ------------------------------------------------------------------------------------------------
def fig_persistent(out):
    """Rungs 21, 22 and 23 at the boundary between two work items on one SM: a schematic on a toy
    clock (not measured). Checks that rung 22's kernel still walks the items with Q released after
    an item's last S and O stored from registers, and that rung 23's still has the calls drawn."""
    src22 = read("kernels/22_persistent/persistent.cu")
    for call in ("t += gridDim.x", "ptx::mbarrier::arrive(ptx::smem_addr(&bar.q_empty))",
                 "TypeTraits<T>::from_float2("):
        if call not in src22:
            fail(f"hopper_persistent_22: `{call}` not in kernels/22_persistent/persistent.cu")
    src23 = read("kernels/23_tma_store/tma_store.cu")
    for call in ("ptx::mbarrier::arrive(ptx::smem_addr(&bar.q_empty))", "ptx::stmatrix_x4(",
                 "ptx::tma::store_4d(", "ptx::tma::wait_group_read<0>();"):
        if call not in src23:
            fail(f"hopper_persistent_22: `{call}` not in kernels/23_tma_store/tma_store.cu")
    T = {"launch": 0.6, "load": 0.8, "step": 1.0, "tiles": 4, "epi21": 0.8, "stsm": 0.2,
         "store": 0.6}
    steps = T["tiles"] * T["step"]
    # Rung 21: one block per query tile; the SM's next block starts when this one has exited.
    prod, cons, busy21 = [], [], []
    t = 0.0
    for item in "AB":
        cons.append(("idle", t, t + T["launch"], "init"))
        prod.append(("issue", t + T["launch"], t + T["load"] + T["launch"], f"load {item}"))
        t += T["launch"] + T["load"]
        cons.append(("steps", t, t + steps, f"item {item}: {T['tiles']} steps"))
        busy21.append((t, t + steps))
        t += steps
        cons.append(("epi", t, t + T["epi21"], "O → gmem"))
        t += T["epi21"]
    panel21 = ([("producer / TMA", prod), ("consumers (warps)", cons)], busy21, t)

    # Rungs 22 and 23: one block per SM; the last S of A releases Q, and the producer loads B's Q
    # (and its K/V) during A's last step. Rung 22 still writes O from the warps; rung 23 puts it
    # into shared memory by stmatrix and leaves the rest to a TMA store nobody waits for.
    def persistent(tma_store):
        prod, cons, store, busy = [], [], [], []
        cons.append(("idle", 0.0, T["launch"], "init"))
        prod.append(("issue", T["launch"], T["launch"] + T["load"], "load A"))
        t = T["launch"] + T["load"]
        for k, item in enumerate("AB"):
            cons.append(("steps", t, t + steps, f"item {item}: {T['tiles']} steps"))
            busy.append((t, t + steps))
            if k == 0:
                q_free = t + steps - T["step"]
                prod.append(("issue", q_free, q_free + T["load"], "load B"))
            t += steps
            if tma_store:
                cons.append(("epi", t, t + T["stsm"], ""))
                store.append(("store", t + T["stsm"], t + T["stsm"] + T["store"], f"O_{item}"))
                t += T["stsm"]
            else:
                cons.append(("epi", t, t + T["epi21"], "O → gmem"))
                t += T["epi21"]
        lanes = [("producer / TMA", prod), ("consumers (warps)", cons)]
        if tma_store:
            lanes.append(("TMA store", store))
            t = max(t, store[-1][2])
        return lanes, busy, t

    panels = [
        (panel21, "Rung 21: a block per query tile; the SM's next block starts when this one has "
         "written O and exited"),
        (persistent(False), "Rung 22: one block per SM walks the items; B's loads under A's last "
         "step, O still written by the warps"),
        (persistent(True), "Rung 23: as rung 22, and O leaves by stmatrix + a TMA store that the "
         "warps do not wait for"),
    ]
    style = {"idle": (COLOURS["idle"], None), "issue": (COLOURS["tma"], None),
             "steps": (COLOURS["S"], None), "epi": (COLOURS["softmax"], None),
             "store": (COLOURS["PV"], None)}
    end = max(e for (_, _, e), _ in panels)
    fig, axes = plt.subplots(3, 1, figsize=(11.5, 6.2), gridspec_kw={
        "height_ratios": [len(lanes) + 1.2 for (lanes, _, _), _ in panels]})
    for ax, ((lanes, busy, e), title) in zip(axes, panels):
        ys = list(range(len(lanes), 0, -1))
        for y, (_, bars) in zip(ys, lanes):
            for kind, a, b, text in bars:
                box(ax, a, y - 0.33, b - a, 0.66, style[kind][0], text, fs=6.5, alpha=0.85)
        for a, b in busy:
            box(ax, a, -0.33, b - a, 0.66, "#333333", "", lw=0)
        ax.text(e, 0, f"  done at {e:.1f}; tensor cores busy {sum(b - a for a, b in busy) / e:.0%}",
                va="center", fontsize=7.5)
        ax.set_yticks(ys + [0])
        ax.set_yticklabels([lane for lane, _ in lanes] + ["tensor cores"], fontsize=8)
        ax.set_xlim(-0.1, end * 1.25)
        ax.set_ylim(-0.6, len(lanes) + 0.6)
        ax.set_xticks([])
        for sp in ("top", "right"):
            ax.spines[sp].set_visible(False)
        ax.set_title(title, fontsize=9, loc="left")
    foot = ("Schematic on a toy clock (not measured): two work items of "
            f"{T['tiles']} KV tiles on one SM; a step is both consumers' turn-taking GEMMs and "
            "softmax (rung 21's); 'load': Q and the first K/V tiles (TMA); yellow: the epilogue "
            "on the warps. The measured effects are on pages 22 and 23.")
    fig.text(0.01, 0.005, textwrap.fill(foot, 180), fontsize=7, color="#555555")
    fig.subplots_adjust(left=0.13, right=0.99, top=0.95, bottom=0.08, hspace=0.5)
    save(fig, out, "hopper_persistent_22.png")


def fig_item_assignment(out):
    """Rung 25's assignment of work items to blocks (kernels/25_schedule/schedule.cuh: work_of,
    unit_item, item_of), computed for two causal calls: each block's total KV tiles under the
    round robin of items of rungs 22-24, under a snake of items and under rung 25's units, the
    query tiles counted from a head's last row in all three (rung 25's work_of). Arithmetic on the
    schedule, not a measurement."""
    src = read("kernels/25_schedule/schedule.cuh")
    for needle in ("round % 2 == 0 ? block : blocks - 1 - block", "s.seqlen_q - (t % s.q_tiles) * kBr",
                   "member == 0 ? r : tq - 1 - r", "head * tq + half"):
        if needle not in src:
            fail("item_assignment: kernels/25_schedule/schedule.cuh no longer has "
                 f"'{needle}' (the snake of units, the order of work_of, the pairs) that this "
                 "figure draws")
    blocks = 132

    def loads_for(n, heads, br, bc):
        tq = -(-n // br)

        def tiles(t):  # work_of, causal, Nq = Nk = n: the KV tiles of item t (rows up to q1)
            q1 = n - (t % tq) * br
            return -(-q1 // bc)

        def unit_item(p, member):  # schedule.cuh's unit_item, causal
            half, odd = tq // 2, tq % 2
            a, r = 2 * (p // (2 * half + odd)), p % (2 * half + odd)
            if r < half:
                return a * tq + (r if member == 0 else tq - 1 - r)
            if r >= half + odd:
                k = r - half - odd
                return (a + 1) * tq + (k if member == 0 else tq - 1 - k)
            head = a + member
            return head * tq + half if head < heads else -1

        count = tq * heads
        units = (tq // 2) * heads + (tq % 2) * ((heads + 1) // 2)
        loads = {"round robin of items (rungs 22-24)": [0] * blocks,
                 "snake of items": [0] * blocks,
                 "snake of units (rung 25's item_of)": [0] * blocks}
        for r in range(-(-count // blocks)):
            for i in range(blocks):
                t = r * blocks + i
                if t < count:
                    loads["round robin of items (rungs 22-24)"][i] += tiles(t)
                t = r * blocks + (blocks - 1 - i if r % 2 else i)
                if t < count:
                    loads["snake of items"][i] += tiles(t)
        for r in range(-(-units // blocks)):
            for i in range(blocks):
                p = r * blocks + (blocks - 1 - i if r % 2 else i)
                for member in (0, 1):
                    t = unit_item(p, member) if p < units else -1
                    if t >= 0:
                        loads["snake of units (rung 25's item_of)"][i] += tiles(t)
        return tq, loads

    fig, axes = plt.subplots(1, 2, figsize=(12.5, 3.8))
    colors = ("#d62728", "#ff7f0e", "#1f77b4")
    for ax, (n, heads, br, bc, what) in zip(axes, ((4097, 256, 128, 128, "d = 128"),
                                                   (16384, 64, 192, 128, "d = 64"))):
        tq, loads = loads_for(n, heads, br, bc)
        for (name, load), color in zip(loads.items(), colors):
            ax.plot(range(blocks), load, color=color, lw=1.4,
                    label=f"{name}: max / mean {max(load) / (sum(load) / blocks):.2f}")
        ax.axhline(sum(load) / blocks, color="#555555", lw=0.8, ls="--", label="mean")
        ax.set_xlabel("block (one per SM)")
        ax.set_ylabel("KV tiles visited")
        ax.set_title(f"{what}: {br} x {bc} tiles, Nq = Nk = {n} ({tq} query tiles a head), "
                     f"B x H = {heads}", fontsize=9)
        ax.legend(fontsize=7.5, frameon=False, loc="upper right")
        ax.set_xlim(0, blocks - 1)
        ax.set_ylim(0, max(max(v) for v in loads.values()) * 1.45)
    fig.text(0.01, 0.01, "Causal, 132 blocks. Computed from the kernel's work_of, unit_item and "
             "item_of, not measured. The kernel takes as long as its busiest block.", fontsize=7,
             color="#555555")
    fig.subplots_adjust(left=0.06, right=0.99, top=0.9, bottom=0.18, wspace=0.18)
    save(fig, out, "item_assignment.png")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "figures"))
    ap.add_argument("--only", default="", help="draw only the figures whose file name has this")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if not args.only or args.only in "tiling.png":
        fig_tiling(args.out)
    fig_timelines(args.out, args.only)
    if not args.only or args.only in "swizzle_banks.png":
        fig_swizzle(args.out)
    fig_hopper(args.out, args.only)
    if not args.only or args.only in "wgmma_descriptor.png":
        fig_descriptor(args.out)
    if not args.only or args.only in "wgmma_accumulator.png":
        fig_accumulator(args.out)
    if not args.only or args.only in "hopper_persistent_22.png":
        fig_persistent(args.out)
    if not args.only or args.only in "item_assignment.png":
        fig_item_assignment(args.out)


if __name__ == "__main__":
    main()
