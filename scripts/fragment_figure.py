#!/usr/bin/env python3
"""Figures of the mma.sync.m16n8k16 and ldmatrix fragment layouts, for docs/kernels/03-04.

The layouts come from common/ptx/fragment.cuh through build/fragment_map --json (rows of
[lane, reg, half, row, col]; for the ldmatrix maps, (row, col) inside 8x8 matrix `reg`), so the
figures are the code's own layouts. One PNG per map: colour = lane group (lane / 4), lighter for
higher lane % 4; text = lane and register.half.

  cmake --build build --target fragment_map && python3 scripts/fragment_figure.py
  python3 scripts/fragment_figure.py --json maps.json --out /tmp/figs   # from a saved --json
  python3 scripts/fragment_figure.py --bin build-fig/fragment_map

Writes docs/figures/{mma_a_fragment,mma_b_fragment,mma_c_fragment,ldmatrix_x4,ldmatrix_trans}.png.
"""
import argparse
import json
import os
import subprocess
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402  (installed with matplotlib)
from png_pack import repack  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# map key -> (file name, title, register prefix, row axis name, col axis name)
FIGURES = {
    "a": ("mma_a_fragment.png",
          "mma.m16n8k16 A (16x16, row-major): registers a0..a3, 2 halves each", "a", "row", "col"),
    "b": ("mma_b_fragment.png",
          'mma.m16n8k16 B ("col", 16x8 = k x n): registers b0..b1, 2 halves each', "b", "k", "n"),
    "c": ("mma_c_fragment.png",
          "mma.m16n8k16 C/D (16x8, f32): registers c0..c3, one float each", "c", "row", "col"),
    "ldmatrix": ("ldmatrix_x4.png",
                 "ldmatrix.m8n8.x4: register ri of every lane from 8x8 matrix i", "r", "row", "col"),
    "ldmatrix_trans": ("ldmatrix_trans.png",
                       "ldmatrix.m8n8.x4.trans: register ri from matrix i (as stored in smem)",
                       "r", "row", "col"),
}
PER_REGISTER_MATRIX = {"ldmatrix", "ldmatrix_trans"}  # register i holds matrix i

# Eight hues for the eight lane groups (lane / 4); quads (lane % 4) are mixed with white.
GROUP_COLOURS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                 "#76b7b2", "#edc948", "#b07aa1", "#ff9da7"]


def lane_colour(lane):
    base = np.array(matplotlib.colors.to_rgb(GROUP_COLOURS[lane // 4]))
    return base + (1.0 - base) * (0.15 * (lane % 4) + 0.25)


def load_maps(args):
    if args.json:
        with open(args.json) as f:
            return json.load(f)
    binary = args.bin or os.path.join(ROOT, "build", "fragment_map")
    if not os.path.exists(binary):
        sys.exit(f"{binary} not found: build it (cmake --build build --target fragment_map), "
                 "or pass --bin PATH or --json FILE")
    out = subprocess.run([binary, "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def grids(key, elements):
    """One (rows x cols) grid of element rows per matrix: a list of (matrix index, grid)."""
    per_reg = key in PER_REGISTER_MATRIX
    shape = (1 + max(e[3] for e in elements), 1 + max(e[4] for e in elements))
    count = 1 + max(e[1] for e in elements) if per_reg else 1
    out = [np.empty(shape, dtype=object) for _ in range(count)]
    for lane, reg, half, row, col in elements:
        g = out[reg if per_reg else 0]
        if g[row, col] is not None:
            sys.exit(f"{key}: ({row}, {col}) held twice")
        g[row, col] = (lane, reg, half)
    for g in out:
        if any(v is None for v in g.flat):
            sys.exit(f"{key}: an element is held by no lane")
    return list(enumerate(out))


def draw_panel(ax, key, grid, matrix, prefix, row_name, col_name, halves):
    rows, cols = grid.shape
    image = np.array([[lane_colour(grid[r, c][0]) for c in range(cols)] for r in range(rows)])
    ax.imshow(image, interpolation="nearest", aspect="equal")
    for r in range(rows):
        for c in range(cols):
            lane, reg, half = grid[r, c]
            reg_text = f"{prefix}{reg}.{half}" if halves else f"{prefix}{reg}"
            ax.text(c, r, f"T{lane}\n{reg_text}", ha="center", va="center", fontsize=7,
                    linespacing=1.1, color="#111111")
    # thin cell borders, thick every 8 (the 8x8 blocks the registers are built from)
    for x in range(cols + 1):
        ax.axvline(x - 0.5, color="white" if x % 8 else "#222222", lw=0.6 if x % 8 else 1.6)
    for y in range(rows + 1):
        ax.axhline(y - 0.5, color="white" if y % 8 else "#222222", lw=0.6 if y % 8 else 1.6)
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.set_xlabel(col_name, fontsize=9)
    ax.tick_params(length=0, labelsize=8)
    if matrix is None:
        ax.set_ylabel(row_name, fontsize=9)
    else:
        # ldmatrix .x4: row r of matrix i is read from the address that lane 8i + r passes
        # (PTX ISA, ldmatrix; the same rule as tools/fragment_map.cpp's ldmatrix_x4_address_lane).
        ax.set_yticklabels([f"{r} @T{8 * matrix + r}" for r in range(rows)])
        ax.set_title(f"matrix {matrix} -> r{matrix}", fontsize=10, fontweight="bold")


def draw(key, elements, out_dir, dpi):
    filename, title, prefix, row_name, col_name = FIGURES[key]
    halves = any(e[2] for e in elements)
    panels = grids(key, elements)
    per_reg = key in PER_REGISTER_MATRIX
    rows, cols = panels[0][1].shape
    cell = 0.46
    if per_reg:  # the four 8x8 matrices, two per line
        across = 2
        down = (len(panels) + across - 1) // across
        size = (across * (cols * cell + 1.0), down * (rows * cell + 1.0) + 0.8)
        fig, axes = plt.subplots(down, across, squeeze=False, figsize=size, layout="constrained")
        axes = axes.flat
    else:
        size = (max(cols * cell + 1.0, 6.0), rows * cell + 1.6)
        fig, axes = plt.subplots(1, 1, figsize=size, layout="constrained")
        axes = [axes]
    for ax, (matrix, grid) in zip(axes, panels):
        draw_panel(ax, key, grid, matrix if per_reg else None, prefix, row_name, col_name, halves)
    legend = ["cell: lane Tn, register" + (".half" if halves else ""),
              "colour: lane group = lane / 4, lighter for higher lane % 4"]
    if per_reg:
        legend.append("@Tn: the lane whose address gives that row")
    legend.append("from tools/fragment_map.cpp (common/ptx/fragment.cuh)")
    chars = int(size[0] * 15)  # about what fits across the figure at 7.5 pt
    fig.suptitle(textwrap.fill(title, int(size[0] * 11.5)), fontsize=11)
    fig.supxlabel(textwrap.fill(";  ".join(legend), chars), fontsize=7.5, color="#444444")
    path = os.path.join(out_dir, filename)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    # A few dozen flat colours: a palette PNG is a third of the size of the RGBA one.
    with Image.open(path) as im:
        im.convert("RGB").quantize(colors=96, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    repack(path)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", metavar="FILE", help="read the maps from this fragment_map --json output")
    ap.add_argument("--bin", metavar="PATH", help="fragment_map to run (default build/fragment_map)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "figures"), help="output folder")
    ap.add_argument("--dpi", type=int, default=110)
    ap.add_argument("maps", nargs="*", help="a b c ldmatrix ldmatrix_trans (default: all)")
    args = ap.parse_args()
    maps = load_maps(args)
    os.makedirs(args.out, exist_ok=True)
    for key in args.maps or list(FIGURES):
        if key not in maps:
            sys.exit(f"map '{key}' is not in the input (has: {', '.join(maps)})")
        if key not in FIGURES:
            sys.exit(f"no figure for map '{key}'")
        path = draw(key, maps[key], args.out, args.dpi)
        print(f"{path} ({os.path.getsize(path) // 1024} KB)")


if __name__ == "__main__":
    main()
