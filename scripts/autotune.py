#!/usr/bin/env python3
"""Rung 12's auto-tuner: searches the block shape (Br, Bc, warps, stages, Q load pattern) of the
kernel per (GPU architecture, head dim, dtype) and records the winners in
kernels/12_autotune/tuned_configs.h, which the normal build compiles in. Rungs 13-15 run a copy
of that table, kept in their own folders (the lessons' frozen state): this script does not write
them. Rung 16 is tuned the same way over its own space, into kernels/16_final/tuned_configs.h.
The vocabulary of a table (TunedConfig, kLoadQ*) and the tuner's C++ side (tune_main.cpp,
tune_candidate.cuh) are harness code, in common/tune/.

One call on the GPU machine does everything (a few minutes per rung on an H100 with 16 cores):

  python3 scripts/autotune.py --out-dir $OUT                 # rung 12
  python3 scripts/autotune.py --rungs 12,16 --out-dir $OUT   # rungs 12 and 16, one build

  1. writes the search space (SPACE below) to kernels/NN_*/tune_candidates.h;
  2. configures build-tune/ with -DFL_AUTOTUNE=ON and builds `tune_NN`, one object per candidate
     (sm_80 and sm_90 machine code: a winner must not spill on either, since the normal build
     compiles it for both), and reads each object's ptxas report (registers, spills per arch);
  3. runs tune_NN: every candidate is verified (fl::verify: the ladder's pass rule, bitwise
     repeatability, LSE, on a GQA problem and on every timed shape), then timed with CUDA events,
     L2 flushed, median of repeats, and checked again after timing; a candidate that crashes or
     hangs is recorded as such and the run goes on without it;
  4. picks, for each (d, dtype), the candidate with the best score (geometric mean of TFLOP/s
     over the timed shapes) among those that passed and spill on no architecture;
  5. writes kernels/NN_*/tuned_configs.h (entries of this GPU's architecture replaced, the
     others kept) and docs/results/autotune<NN>_<gpu>.json (every row: the page's search table),
     and copies both to --out-dir.

Other uses:
  scripts/autotune.py --rungs 12,16 --write-candidates   only step 1 (the committed lists)
  scripts/autotune.py --rungs 16 --write-default         tuned_configs.h with the hand-chosen
                                                         shape for every entry, marked not tuned
  scripts/autotune.py --from-rows rows.jsonl --ptxas ptxas.json   steps 4-5 from saved output
"""
import argparse
import datetime
import json
import math
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The tunable rungs: folder and namespace (the tuned table lives in it).
RUNGS = {12: ("12_autotune", "k12_autotune"), 16: ("16_final", "k16_final")}


def rung_dir(rung):
    return ROOT / "kernels" / RUNGS[rung][0]

Q_PER_TILE, Q_RESIDENT = 0, 1
LOAD_NAMES = {Q_PER_TILE: "kLoadQPerTile", Q_RESIDENT: "kLoadQResident"}

# The hand-chosen shape of rung 11 (Br = 128 over 4 warps, Bc = 32, 2 stages; Q fragments resident
# at d = 64, read per KV tile at d = 128): the default of every entry until it is tuned.
DEFAULT12 = {64: (128, 32, 4, 2, Q_RESIDENT), 128: (128, 32, 4, 2, Q_PER_TILE)}

# The search space: (Br, Bc, warps, stages, load) per head dim, 12 each. Kept small on purpose:
# every candidate is compiled 4 times (fp16, bf16; sm_80, sm_90). Registers decide most of it: at
# d = 128 a warp with 2 M-tiles holds O (128 fp32 registers a lane), S (Bc / 2 per M-tile) and
# two buffers of V fragments (64), so Bc = 64 or resident Q may spill there (a spilling candidate
# is never chosen); with 1 M-tile per warp (8 warps for Br = 128) both fit, but each K/V fragment
# then feeds one mma instead of two.
SPACE12 = {
    128: [
        (128, 32, 4, 2, Q_PER_TILE),   # rung 11
        (128, 32, 4, 3, Q_PER_TILE),   # a third stage
        (128, 64, 4, 2, Q_PER_TILE),   # wider KV tiles: half the rescales of O per key
        (128, 64, 4, 3, Q_PER_TILE),
        (128, 32, 4, 2, Q_RESIDENT),   # no Q ldmatrix in the loop, if it fits
        (128, 32, 8, 2, Q_RESIDENT),   # 1 M-tile per warp, 8 warps
        (128, 64, 8, 2, Q_RESIDENT),
        (128, 64, 8, 3, Q_RESIDENT),
        (128, 128, 8, 2, Q_PER_TILE),
        (64, 32, 4, 2, Q_RESIDENT),    # 1 M-tile per warp, 4 warps: smaller blocks, more of them
        (64, 64, 4, 2, Q_RESIDENT),
        (256, 32, 8, 2, Q_PER_TILE),   # 2 M-tiles per warp, 8 warps: 256 rows a block
    ],
    64: [
        (128, 32, 4, 2, Q_RESIDENT),   # rung 11
        (128, 32, 4, 3, Q_RESIDENT),
        (128, 64, 4, 2, Q_RESIDENT),
        (128, 64, 4, 3, Q_RESIDENT),
        (128, 64, 4, 2, Q_PER_TILE),
        (128, 32, 4, 2, Q_PER_TILE),
        (128, 64, 8, 2, Q_RESIDENT),
        (128, 128, 8, 2, Q_RESIDENT),
        (64, 64, 4, 2, Q_RESIDENT),
        (64, 128, 4, 2, Q_RESIDENT),
        (256, 32, 8, 2, Q_RESIDENT),
        (256, 64, 8, 2, Q_RESIDENT),
    ],
}


# Rung 16 is tuned again over its own space: its kernel needs fewer registers than rung 12's (V
# fragments loaded by n-tile pair, rung 13; compile-time strides, rung 16), so Bc = 64 with 2
# M-tiles at d = 128, which spilled in rung 12, is a candidate again. See kernels/16_final/.
# d = 256 (rung 16 only): O alone is 128 fp32 registers a lane per M-tile, so one M-tile per warp
# (8 warps for Br = 128) and Bc = 32 (Bc = 64 adds 64 registers of S, P and K/V fragments: over
# 255). 8 warps also keep whole rows per copy step (32 chunks of 16 bytes a row).
DEFAULT16 = {**DEFAULT12, 256: (128, 32, 8, 2, Q_PER_TILE)}
SPACE16 = {
    128: [
        (128, 32, 4, 2, Q_PER_TILE),   # rung 11's shape
        (128, 32, 4, 3, Q_PER_TILE),
        (128, 64, 4, 2, Q_PER_TILE),   # spilled in rung 12
        (128, 64, 4, 3, Q_PER_TILE),   # spilled in rung 12
        (128, 32, 8, 2, Q_RESIDENT),
        (128, 64, 8, 2, Q_RESIDENT),
        (128, 64, 8, 3, Q_RESIDENT),
        (128, 128, 8, 2, Q_PER_TILE),
        (128, 128, 8, 3, Q_PER_TILE),
        (64, 32, 4, 2, Q_RESIDENT),
        (64, 64, 4, 2, Q_RESIDENT),
        (256, 32, 8, 2, Q_PER_TILE),
    ],
    64: SPACE12[64],
    256: [
        (128, 32, 8, 2, Q_PER_TILE),
        (128, 32, 8, 3, Q_PER_TILE),
        (128, 64, 8, 2, Q_PER_TILE),
    ],
}

DEFAULTS = {12: DEFAULT12, 16: DEFAULT16}
DEFAULT_NOTES = {12: "the rung-11 shape", 16: "the hand-chosen default"}
SPACES = {12: SPACE12, 16: SPACE16}


def smem_bytes(cfg, d):
    br, bc, _, stages, _ = cfg
    return (br + 2 * stages * bc) * d * 2


def config_error(cfg, d):
    """The rules of config.h's config_error(), kept in step with it."""
    br, bc, warps, stages, load = cfg
    if warps not in (4, 8):
        return "warps must be 4 or 8"
    if br % (16 * warps):
        return "Br must be a multiple of 16 x warps"
    if br // (16 * warps) > 2:
        return "at most 2 M-tiles per warp"
    if bc % 16 or bc < 32 or bc > 128:
        return "Bc must be 32..128, a multiple of 16"
    if stages not in (2, 3):
        return "stages must be 2 or 3"
    if load not in LOAD_NAMES:
        return "unknown load pattern"
    if (bc * d // 8) % (32 * warps) or (br * d // 8) % (32 * warps):
        return "copies must cover the tiles evenly"
    if smem_bytes(cfg, d) > 227 * 1024:
        return "more than 227 KiB of shared memory"
    return ""


def candidates(rung):
    out = []
    space = SPACES[rung]
    for d in sorted(space):
        for cfg in space[d]:
            err = config_error(cfg, d)
            if err:
                sys.exit(f"autotune.py: SPACE{rung}[{d}] {cfg}: {err}")
            out.append((len(out), d, cfg))
    return out


def write_candidates(rung):
    path = rung_dir(rung) / "tune_candidates.h"
    lines = [
        f"// Generated by scripts/autotune.py (--write-candidates) from its SPACE{rung}: the",
        f"// candidates of rung {rung}'s search. Do not edit: change SPACE{rung} and run it again.",
        "//   FL_CANDIDATE(index, head_dim, Br, Bc, warps, stages, load)",
        "//   load: 0 = Q fragments read per KV tile, 1 = Q fragments resident in registers",
        "#pragma once",
        "",
        "#define FL_TUNE_CANDIDATES(FL_CANDIDATE) \\",
    ]
    for i, d, (br, bc, w, s, l) in candidates(rung):
        lines.append(f"  FL_CANDIDATE({i}, {d}, {br}, {bc}, {w}, {s}, {l}) \\")
    lines.append("  /* end */")
    text = "\n".join(lines) + "\n"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


# ------------------------------------------------------------------------------------------------
# tuned_configs.h
# ------------------------------------------------------------------------------------------------
ENTRY_RE = re.compile(
    r"(?://\s*(.*)\n\s*)?"
    r"\{(\d+), (\d+), DType::(f16|bf16), \{(\d+), (\d+), (\d+), (\d+), (kLoad\w+)\}, (true|false)\},")


def read_tuned(rung):
    """{(sm, d, dtype): dict(cfg=(...), tuned=bool, note=str)} from an existing tuned_configs.h."""
    path = rung_dir(rung) / "tuned_configs.h"
    entries = {}
    if not path.exists():
        return entries
    inv = {v: k for k, v in LOAD_NAMES.items()}
    for m in ENTRY_RE.finditer(path.read_text()):
        sm, d, t = int(m.group(2)), int(m.group(3)), m.group(4)
        cfg = tuple(int(m.group(i)) for i in range(5, 9)) + (inv[m.group(9)],)
        entries[(sm, d, t)] = dict(cfg=cfg, tuned=m.group(10) == "true", note=m.group(1) or "")
    return entries


def default_entries(rung):
    out = {}
    for sm in (80, 90):
        for d in DEFAULTS[rung]:
            for t in ("f16", "bf16"):
                out[(sm, d, t)] = dict(cfg=DEFAULTS[rung][d], tuned=False,
                                       note="not yet tuned: " + DEFAULT_NOTES[rung])
    return out


def write_tuned(rung, entries, header_note):
    path = rung_dir(rung) / "tuned_configs.h"
    ns = RUNGS[rung][1]
    who = f"rung {rung}"
    lines = [
        f"// Generated by scripts/autotune.py: the block shape {who} runs per GPU",
        "// architecture, head dim and dtype. Do not edit by hand: run the tuner on the GPU",
        f"// (python3 scripts/autotune.py --rungs {rung} --out-dir DIR) and commit what it writes.",
    ]
    lines += [f"//   {line}" for line in header_note]
    lines += [
        "// sm = 90 serves compute capability 9.0 and later, sm = 80 every 8.x device. `tuned` is",
        "// false where the entry is still the hand-chosen default.",
        "#pragma once",
        "",
        '#include "common/tune/config.h"',
        "",
        f"namespace fl::{ns} {{",
        "",
    ]
    if ns != "k12_autotune":
        lines += ["using k12_autotune::kLoadQPerTile;", "using k12_autotune::kLoadQResident;",
                  "using k12_autotune::TunedConfig;", ""]
    lines += [
        "constexpr TunedConfig kTunedConfigs[] = {",
        "    // sm, d, dtype, {Br, Bc, warps, stages, load}, tuned",
    ]
    for key in sorted(entries, key=lambda k: (k[0], k[1], k[2] != "f16")):
        sm, d, t = key
        e = entries[key]
        br, bc, w, s, l = e["cfg"]
        if e.get("note"):
            lines.append(f"    // {e['note']}")
        lines.append(f"    {{{sm}, {d}, DType::{t}, {{{br}, {bc}, {w}, {s}, {LOAD_NAMES[l]}}}, "
                     f"{'true' if e['tuned'] else 'false'}}},")
    lines += ["};", "", f"}}  // namespace fl::{ns}", ""]
    path.write_text("\n".join(lines))
    return path


# ------------------------------------------------------------------------------------------------
# build and run
# ------------------------------------------------------------------------------------------------
def run(cmd, **kw):
    print("+", " ".join(str(c) for c in cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def build(build_dir, archs, jobs, rungs):
    run(["cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja",
         "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_CUDA_ARCHITECTURES={archs}",
         "-DFL_AUTOTUNE=ON", f"-DFL_AUTOTUNE_RUNGS={';'.join(map(str, rungs))}",
         "-DFL_KERNELS=00", "-DFL_BUILD_TESTS=OFF", "-DFL_BUILD_BENCH=OFF"],
        stdout=subprocess.DEVNULL)
    t0 = time.time()
    run(["ninja", "-C", str(build_dir), "-j", str(jobs)] + [f"tune_{r}" for r in rungs])
    print(f"built {', '.join(f'tune_{r}' for r in rungs)} in {time.time() - t0:.0f} s", flush=True)


def demangle(names):
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                         text=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def read_ptxas(build_dir, rung):
    """{candidate: {dtype: {arch: {"regs", "spill_stores", "spill_loads"}}}} from the reports the
    compiler launcher keeps beside each candidate object."""
    reports = sorted((pathlib.Path(build_dir) / "CMakeFiles" / f"tune_{rung}.dir").rglob(
        "candidate_*.cu.o.ptxas.txt"))
    out = {}
    for rep in reports:
        idx = int(re.search(r"candidate_(\d+)\.cu", rep.name).group(1))
        text = rep.read_text()
        cur = None
        funcs = []
        for line in text.splitlines():
            m = re.search(r"Compiling entry function '(\S+)' for '(sm_\w+)'", line)
            if m:
                cur = {"fn": m.group(1), "arch": m.group(2), "regs": 0, "spill_stores": 0,
                       "spill_loads": 0}
                funcs.append(cur)
                continue
            m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if m and cur is not None:
                cur["spill_stores"], cur["spill_loads"] = int(m.group(1)), int(m.group(2))
            m = re.search(r"Used (\d+) registers", line)
            if m and cur is not None:
                cur["regs"] = int(m.group(1))
        names = demangle(sorted({f["fn"] for f in funcs}))
        for f in funcs:
            name = names[f["fn"]]
            if "attention_kernel" not in name:
                continue
            dtype = "bf16" if "bfloat16" in name else "fp16"
            # Several instantiations per candidate (rung 16: contiguous and strided K/V): keep
            # the worst of each number.
            slot = out.setdefault(idx, {}).setdefault(dtype, {}).setdefault(
                f["arch"], {"regs": 0, "spill_stores": 0, "spill_loads": 0})
            for k in ("regs", "spill_stores", "spill_loads"):
                slot[k] = max(slot[k], f[k])
    return out


def run_tuner(rung, exe, rows_path, timeout_quiet, extra):
    """Runs tune_NN, one dtype at a time, until every candidate has a row; a crash or a hang is
    pinned on the candidate whose "start" line came last, recorded as failed, and the run goes on
    with the candidates left."""
    done, failed = set(), []
    all_idx = [i for i, _, _ in candidates(rung)]
    for dtype in extra.get("dtype", "fp16,bf16").split(","):
        for _attempt in range(len(all_idx) + 1):
            todo = [i for i in all_idx if (i, dtype) not in done]
            if not todo:
                break
            cmd = [str(exe), "--out", str(rows_path), "--dtype", dtype,
                   "--candidates", ",".join(map(str, todo))]
            for k, v in extra.items():
                if k != "dtype":
                    cmd += [f"--{k}", str(v)]
            print("+", " ".join(cmd), flush=True)
            proc = subprocess.Popen(cmd)
            last_size, last_change = -1, time.time()
            while proc.poll() is None:
                time.sleep(2)
                size = rows_path.stat().st_size if rows_path.exists() else 0
                if size != last_size:
                    last_size, last_change = size, time.time()
                elif time.time() - last_change > timeout_quiet:
                    proc.kill()
                    proc.wait()
                    print(f"{exe.name}: no output for {timeout_quiet} s: killed", flush=True)
                    break
            rc = proc.returncode
            started = None
            for line in rows_path.read_text().splitlines():
                ev = json.loads(line)
                if ev.get("event") == "start":
                    started = (ev["candidate"], ev["dtype"])
                elif ev.get("event") == "row":
                    done.add((ev["candidate"], ev["dtype"]))
                    started = None
            if started is None:
                if rc != 0:
                    sys.exit(f"autotune.py: {exe.name} failed (exit {rc}) outside a candidate")
                continue
            why = "crashed (CUDA error poisoned the context)" if rc == 3 else \
                f"hung or died (exit {rc})"
            print(f"candidate {started[0]} {started[1]}: {why}", flush=True)
            i, t = started
            d, cfg = next((d, c) for j, d, c in candidates(rung) if j == i)
            with open(rows_path, "a") as fh:
                fh.write(json.dumps({"event": "row", "candidate": i, "d": d, "dtype": t,
                                     "config": dict(zip(("br", "bc", "warps", "stages", "load"),
                                                        cfg)),
                                     "shapes": [], "passed": False, "score": 0, "why": why}) + "\n")
            done.add(started)
            failed.append(started)
    return failed


def load_rows(rows_path):
    device, rows = {}, {}
    for line in pathlib.Path(rows_path).read_text().splitlines():
        ev = json.loads(line)
        if ev.get("event") == "device":
            device = ev
        elif ev.get("event") == "row":
            rows[(ev["candidate"], ev["dtype"])] = ev  # the last row of a candidate wins
    return device, list(rows.values())


def gpu_slug(name):
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def choose(device, rows, ptxas):
    """Winners per (d, dtype) and the annotated table."""
    for r in rows:
        arch_info = ptxas.get(r["candidate"], {}).get(r["dtype"], {})
        r["ptxas"] = arch_info
        spills = {a: v for a, v in arch_info.items() if v["spill_stores"] or v["spill_loads"]}
        r["spills_anywhere"] = bool(spills)
        r["eligible"] = bool(r["passed"]) and not spills and bool(arch_info)
        if r["passed"] and spills:
            r["why"] = (r.get("why") or "") + "spills on " + ",".join(sorted(spills))
        if r["passed"] and not arch_info:
            r["why"] = (r.get("why") or "") + "no ptxas report found"
    winners = {}
    for r in rows:
        if not r["eligible"]:
            continue
        key = (r["d"], r["dtype"])
        if key not in winners or r["score"] > winners[key]["score"]:
            winners[key] = r
    return winners


def tune_rung(rung, args, build_dir, rows_path, ptxas):
    """Steps 3-5 for one rung; returns the paths written."""
    if rows_path is None:
        rows_path = build_dir / f"tune_rows_{rung}.jsonl"
        if rows_path.exists():
            rows_path.unlink()
        run_tuner(rung, build_dir / f"tune_{rung}", rows_path, args.quiet_timeout,
                  {"n": args.n, "dtype": args.dtype, "repeats": args.repeats})
    device, rows = load_rows(rows_path)
    if not device:
        sys.exit("autotune.py: no device line in the rows")
    winners = choose(device, rows, ptxas)
    cc = device["cc"]
    sm = 90 if cc >= 90 else 80
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")

    entries = read_tuned(rung) or default_entries(rung)
    for key, e in default_entries(rung).items():
        entries.setdefault(key, e)
    for (d, dtype), r in sorted(winners.items()):
        c = r["config"]
        shapes = ", ".join(f"N={s['n']}: {s['tflops']:.0f}" for s in r["shapes"])
        entries[(sm, d, "f16" if dtype == "fp16" else "bf16")] = dict(
            cfg=(c["br"], c["bc"], c["warps"], c["stages"], c["load"]), tuned=True,
            note=f"candidate {r['candidate']}, {shapes} TFLOP/s")
    space = SPACES[rung]
    missing = [(d, t) for d in sorted(space) for t in args.dtype.split(",") if (d, t) not in winners]
    note = [f"sm_{sm}: tuned on {device['gpu']} (cc {cc / 10:.1f}) on {date},",
            f"  B = H = {device.get('batch')}, N = {device.get('n')}"]
    other = 80 if sm == 90 else 90
    if not any(e["tuned"] for k, e in entries.items() if k[0] == other):
        note.append(f"sm_{other}: not yet tuned (the hand-chosen default): run the tuner there")
    if missing:
        note.append(f"no eligible candidate for {missing}: those entries kept as they were")
    tuned_path = write_tuned(rung, entries, note)

    stem = "autotune" if rung == 12 else f"autotune{rung}"
    results = ROOT / "docs" / "results" / f"{stem}_{gpu_slug(device['gpu'])}.json"
    results.parent.mkdir(parents=True, exist_ok=True)
    doc = {"rung": rung, "gpu": device["gpu"], "cc": cc, "sm": sm, "date": date,
           "shapes": {"batch": device.get("batch"), "heads": device.get("heads"),
                      "n": device.get("n"), "repeats": device.get("repeats")},
           "score": "geometric mean of TFLOP/s over the shapes; 0 when a check failed",
           "winners": {f"d{d}_{t}": r["candidate"] for (d, t), r in sorted(winners.items())},
           "rows": sorted(rows, key=lambda r: (r["d"], r["dtype"], -(r["score"] or 0)))}
    results.write_text(json.dumps(doc, indent=1) + "\n")

    # The table, best first per (d, dtype).
    for (d, t) in sorted({(r["d"], r["dtype"]) for r in rows}):
        print(f"\nrung {rung} d={d} {t}:  cand  Br  Bc  w  s  load  regs80 regs90  " +
              "  ".join(f"N={n}" for n in device.get("n", [])) + "   score  note")
        for r in sorted((r for r in rows if r["d"] == d and r["dtype"] == t),
                        key=lambda r: -(r["score"] or 0)):
            c = r["config"]
            regs = [r["ptxas"].get(a, {}).get("regs", "-") for a in ("sm_80", "sm_90")]
            tf = "  ".join(f"{s['tflops']:6.1f}" for s in r["shapes"])
            mark = "*" if winners.get((d, t)) is r else " "
            print(f"       {mark}{r['candidate']:3d} {c['br']:3d} {c['bc']:3d} {c['warps']:2d} "
                  f"{c['stages']:2d} {c['load']:4d}  {str(regs[0]):>6} {str(regs[1]):>6}  {tf}  "
                  f"{r['score'] or 0:6.1f}  {r.get('why', '')[:100]}")
    print(f"\nwrote {tuned_path}\nwrote {results}")
    return [tuned_path, results]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rungs", default="12", help="tunable rungs, e.g. 12,16 (default 12)")
    ap.add_argument("--write-candidates", action="store_true")
    ap.add_argument("--write-default", action="store_true")
    ap.add_argument("--build-dir", default=str(ROOT / "build-tune"))
    ap.add_argument("--archs", default="80;90",
                    help="machine code of the tuning build (default 80;90: spills are checked "
                         "on both, as the normal build compiles the winners for both)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 4)
    ap.add_argument("--n", default="1024,4096", help="timed sequence lengths (B = H = 16)")
    ap.add_argument("--dtype", default="fp16,bf16")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--quiet-timeout", type=int, default=120,
                    help="seconds without output after which tune_NN is killed as hung")
    ap.add_argument("--from-rows", default="",
                    help="skip build and run: use these tune_NN rows (one rung)")
    ap.add_argument("--ptxas", default="", help="with --from-rows: the ptxas summary JSON")
    ap.add_argument("--out-dir", default="", help="copy the results here as well")
    args = ap.parse_args()
    rungs = [int(r) for r in args.rungs.split(",") if r.strip()]
    for r in rungs:
        if r not in RUNGS:
            sys.exit(f"autotune.py: rung {r} is not tunable (tunable: {sorted(RUNGS)})")

    if args.write_candidates:
        for r in rungs:
            print(f"wrote {write_candidates(r)}")
        return
    if args.write_default:
        for r in rungs:
            print(f"wrote {write_tuned(r, default_entries(r), ['no architecture tuned yet'])}")
        return

    for r in rungs:
        write_candidates(r)
    build_dir = pathlib.Path(args.build_dir)
    written = []
    if args.from_rows:
        if len(rungs) != 1:
            sys.exit("autotune.py: --from-rows takes one rung")
        ptxas = {int(k): v for k, v in json.loads(pathlib.Path(args.ptxas).read_text()).items()} \
            if args.ptxas else {}
        written += tune_rung(rungs[0], args, build_dir, pathlib.Path(args.from_rows), ptxas)
    else:
        build(build_dir, args.archs, args.jobs, rungs)
        for r in rungs:
            ptxas = read_ptxas(build_dir, r)
            (build_dir / f"ptxas_{r}.json").write_text(json.dumps(ptxas, indent=1))
            written += tune_rung(r, args, build_dir, None, ptxas)
    if args.out_dir:
        out = pathlib.Path(args.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for path in written:
            name = path.name if path.suffix == ".json" else f"{path.parent.name}_{path.name}"
            shutil.copy(path, out / name)
        print(f"copied {len(written)} files to {out}")


if __name__ == "__main__":
    main()
