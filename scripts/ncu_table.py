#!/usr/bin/env python3
"""A Markdown table from the CSV files of scripts/profile_ncu.sh: one row per metric, one column
per profiled kernel, so that rung N and rung N-1 sit side by side.

    scripts/ncu_table.py ncu_05.csv ncu_06.csv [--metrics name1,name2] [--label "H100, N=4096"]
"""
import argparse
import csv
import os
import re


def read(path):
    rows = list(csv.reader(open(path)))
    names, units, values = rows[0], rows[1], rows[2]
    d = dict(zip(names, values))
    kernel = d.get("Kernel Name", os.path.basename(path))
    m = re.search(r"k(\d\d)_(\w+?)::", kernel)
    label = f"{m.group(1)}_{m.group(2)}" if m else os.path.basename(path)
    return label, {n: (v, u) for n, v, u in zip(names, values, units) if "__" in n}


def fmt(v):
    try:
        x = float(v.replace(",", ""))
    except ValueError:
        return v
    if x == int(x) and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:,.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--metrics", default="", help="only these metrics, in this order")
    args = ap.parse_args()
    cols = [read(p) for p in args.csv]
    metrics = args.metrics.split(",") if args.metrics else sorted({m for _, d in cols for m in d})
    print("| metric | " + " | ".join(label for label, _ in cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for m in metrics:
        unit = next((d[m][1] for _, d in cols if m in d and d[m][1]), "")
        cells = [fmt(d[m][0]) if m in d else "—" for _, d in cols]
        print(f"| `{m}`{f' ({unit})' if unit else ''} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
