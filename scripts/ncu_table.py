#!/usr/bin/env python3
"""A Markdown table from the CSV files of scripts/profile_ncu.sh: one row per metric, one column
per profiled kernel, so that rung N and rung N-1 sit side by side.

    scripts/ncu_table.py ncu_5.csv ncu_6.csv [--metrics name1,name2]
    scripts/ncu_table.py ncu_5.csv ncu_6.csv --metrics ... --page docs/kernels/06_swizzle.md \
        --intro "text before the table"      # fills the page's <!-- BEGIN evidence --> block
"""
import argparse
import csv
import os
import re


def read(path):
    rows = list(csv.reader(open(path)))
    names, units, values = rows[0], rows[1], rows[2]
    d = dict(zip(names, values))
    m = re.search(r"ncu_(\d+)", os.path.basename(path))
    label = f"rung {int(m.group(1)):02d}" if m else os.path.basename(path)
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
    ap.add_argument("--page", default="", help="fill this page's evidence block")
    ap.add_argument("--intro", default="", help="text above the table in the page")
    args = ap.parse_args()
    cols = [read(p) for p in args.csv]
    metrics = args.metrics.split(",") if args.metrics else sorted({m for _, d in cols for m in d})
    lines = ["| metric | " + " | ".join(label for label, _ in cols) + " |",
             "|---|" + "---:|" * len(cols)]
    for m in metrics:
        unit = next((d[m][1] for _, d in cols if m in d and d[m][1]), "")
        cells = [fmt(d[m][0]) if m in d else "—" for _, d in cols]
        lines.append(f"| `{m}`{f' ({unit})' if unit else ''} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(table)
    if args.page:
        text = open(args.page).read()
        begin, end = "<!-- BEGIN evidence -->", "<!-- END evidence -->"
        i, j = text.find(begin), text.find(end)
        if i < 0 or j < i:
            raise SystemExit(f"{args.page}: no evidence block")
        body = (args.intro.strip() + "\n\n" if args.intro else "") + table
        open(args.page, "w").write(text[:i + len(begin)] + "\n" + body + "\n" + text[j:])


if __name__ == "__main__":
    main()
