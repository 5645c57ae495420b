#!/usr/bin/env python3
"""A paged K/V cache against the contiguous one, the same decode call: GB/s of K + V read.

For each shape (defaults: fp16, d = 128, GQA 32/8, one query row; B in 1, 8, 64; Nk in 8192 and
32768, every sequence at full length), this times in one process, in balanced rounds (the order
reversed every other round; each arm the median of its rounds):

  * contiguous: flash_ladder.attention_with_kvcache on a cache [B, Nk, H_kv, d] with
    cache_seqlens (rung 39, each sequence its own page);
  * paged N (N in --pages, default 64 and 256): the same keys in a pool of pages of N keys in a
    shuffled order, reached through a block table;
  * paged N in order (with --in-order): the same pages in order, so that the pool is the
    contiguous cache's memory and only the table's cost in the kernel differs;
  * paged N within 2 MiB and paged N 2 MiB spans (with --spans): the pages shuffled only inside
    each 2 MiB of the pool (each page a few pages from its place in order), and the pool's 2 MiB
    spans shuffled whole, the pages in order inside each: both touch as many 2 MiB spans of
    memory a tile as pages in order do (2 MiB: the large-page size assumed for device memory),
    the first with every page moved and the second with the spans' order as random as the
    shuffle's;
  * plain: flash_ladder.attention on the same cache without lengths (layout "bnhd"), the call
    the decode rungs took before the cache.

With --ragged, each sequence has its own length, drawn uniformly from [Nk / 4, Nk] (seeded), in a
cache of capacity Nk (the rule that picks the splits reads the capacity); the plain arm, which
has no lengths, is left out. With --lengths L1,L2,... every sequence holds L keys of a cache of
capacity Nk (each L < Nk a cell of its own: a sequence shorter than its cache, as in a serving
engine whose cache is allocated for the longest context); the plain arm is replaced by exact:
flash_ladder.attention on the first L keys alone (a cache of the sequence's length, the yardstick
of a cache call), and with --peers SDPA's FlashAttention-2 and cuDNN backends (enable_gqa=True)
run on those L keys too. bytes = 2 x H_kv x (the sum of the lengths) x d x 2, which is
2 x B x H_kv x Nk x d x 2 without --ragged; each arm captured in a CUDA graph and timed by its
replay, the
L2 flushed before every run (compare_sdpa's Timer; --flush as decode_bench's, by default reads,
which leave the L2 clean). Every arm's output must equal its rung's
contiguous arm bit for bit (the same keys in the same order of tiles), else the script exits 1; an
arm whose pages do not divide Nk (a capacity past Nk, from which the splits are decided), another
rung's contiguous arm, the exact arm and the peers (the same keys split otherwise) are held to
1e-2 instead. So is an arm of pages that are no multiple of 128 keys and does not equal its
contiguous arm: a rung may size its tile by the pages (rung 65 at d = 64 reads 128-key tiles
where a tile lies in one page, 64-key tiles else); the line printed says so. The last thing printed is a table: GB/s per arm and paged / contiguous.

  python3 scripts/paged_bench.py --out docs/results/h100_paged.json
  python3 scripts/paged_bench.py --kernels 48,49 --pages 16,64,256   # two rungs, one process
"""
import argparse
import datetime
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_sdpa as cs  # noqa: E402  (Timer, json_safe, the package on the path)
import flash_ladder  # noqa: E402


SPAN = 2 << 20  # bytes: the span --spans keeps together (the large-page size assumed)


def pool_order(pages, span, how, gen):
    """Where each of `pages` pages goes in the pool: "shuffled" (any place), "in order",
    "within" (shuffled inside each run of `span` pages) or "spans" (the runs of `span` pages
    shuffled whole, in order inside)."""
    if how == "shuffled":
        return torch.randperm(pages, generator=gen)
    order = torch.arange(pages)
    if how == "in order":
        return order
    runs = -(-pages // span)
    if how == "within":
        for r in range(runs):
            lo, hi = r * span, min(pages, (r + 1) * span)
            order[lo:hi] = lo + torch.randperm(hi - lo, generator=gen)
        return order
    assert how == "spans", how
    whole = pages // span  # a last run shorter than a span stays last
    order[:whole * span] = (torch.randperm(whole, generator=gen)[:, None] * span
                            + torch.arange(span)[None, :]).reshape(-1)
    return order


def paged_copy(k, v, page, gen, how="shuffled"):
    """k and v [B, Nk, H, d] as pools [B * P, page, H, d], P = ceil(Nk / page) pages a sequence
    (a last page that Nk does not fill is padded with zeros, past the sequence's length), the
    pages placed as pool_order's `how` says (in order, the pool is the cache's own layout), and
    the int32 block table [B, P] that finds each sequence's pages in both."""
    b, nk, h, d = k.shape
    per = -(-nk // page)
    span = max(1, SPAN // (page * h * d * k.element_size()))  # pages a 2 MiB span holds
    order = pool_order(b * per, span, how, gen).to(k.device)
    pools = []
    for t in (k, v):
        padded = torch.zeros(b, per * page, h, d, dtype=t.dtype, device=t.device)
        padded[:, :nk] = t
        pool = torch.empty(b * per, page, h, d, dtype=t.dtype, device=t.device)
        pool[order] = padded.reshape(b * per, page, h, d)
        pools.append(pool)
    return pools[0], pools[1], order.reshape(b, per).to(torch.int32)


def sdpa_out(backend, qv, kv, vv):
    """SDPA on [B, H, N, d] views with `backend` forced, back in q's [B, Nq, H, d] layout."""
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(qv, kv, vv, enable_gqa=True).transpose(1, 2)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--b", default="1,8,64")
    ap.add_argument("--nk", default="8192,32768")
    ap.add_argument("--heads", default="32/8")
    ap.add_argument("--nq", type=int, default=1)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--pages", default="64,256")
    ap.add_argument("--in-order", action="store_true",
                    help="also time each page size with its pages in order (paged N in order): "
                         "the same memory as the contiguous cache, so that the table's cost "
                         "shows apart from where the pages lie")
    ap.add_argument("--spans", action="store_true",
                    help="also time each page size with its pages shuffled within each 2 MiB of "
                         "the pool (paged N within 2 MiB) and with the pool's 2 MiB spans "
                         "shuffled whole (paged N 2 MiB spans)")
    ap.add_argument("--flush", choices=cs.FLUSHES, default="reads",
                    help="how the L2 is emptied before a timed run (default reads: "
                         "scripts/decode_bench.py)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--ragged", action="store_true",
                    help="a length per sequence, uniform in [Nk / 4, Nk]; no plain arm")
    ap.add_argument("--lengths", default="",
                    help="comma-separated L: every sequence at L keys of the capacity Nk (a cell "
                         "per L < Nk); the plain arm becomes exact (the first L keys alone)")
    ap.add_argument("--peers", action="store_true",
                    help="with --lengths, also SDPA flash and cuDNN on the first L keys")
    ap.add_argument("--kernels", default="best",
                    help="the rungs that run every arm, comma-separated (default: best); with "
                         "more than one, each arm's name ends in its rung and every arm is "
                         "held to the first rung's contiguous arm")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    kernels = [x.strip() for x in args.kernels.split(",") if x.strip()]
    if not kernels:
        ap.error("--kernels is empty")
    fixed = [int(x) for x in args.lengths.split(",") if x.strip()]
    if fixed and args.ragged:
        ap.error("--lengths and --ragged are two ways of choosing the lengths: pick one")
    if args.peers and not fixed:
        ap.error("--peers needs --lengths (SDPA has no cache lengths)")
    hq, hkv = (int(x) for x in args.heads.split("/"))
    timer = cs.Timer(3, args.repeats, 1.0, flush=args.flush)
    gen = torch.Generator(device="cpu").manual_seed(11)
    rows, failed = [], False
    print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}, L2 flush: {args.flush}")
    cells = [(b, nk, length) for b in (int(x) for x in args.b.split(","))
             for nk in (int(x) for x in args.nk.split(","))
             for length in ([x for x in fixed if x < nk] if fixed else [None])]
    for b, nk, length in cells:
        q = torch.randn(b, args.nq, hq, args.d, generator=gen).half().cuda()
        k = torch.randn(b, nk, hkv, args.d, generator=gen).half().cuda()
        v = torch.randn(b, nk, hkv, args.d, generator=gen).half().cuda()
        if args.ragged:
            lens = torch.randint(max(1, nk // 4), nk + 1, (b,), generator=gen,
                                 dtype=torch.int32).cuda()
        else:
            lens = torch.full((b,), length or nk, dtype=torch.int32, device="cuda")
        pools = [(f"{page}", *paged_copy(k, v, page, gen))
                 for page in (int(x) for x in args.pages.split(","))]
        if args.in_order:
            pools += [(f"{page} in order", *paged_copy(k, v, page, gen, "in order"))
                      for page in (int(x) for x in args.pages.split(","))]
        if args.spans:
            print(f"B={b} Nk={nk}: the pools start {pools[0][1].data_ptr() % SPAN} bytes past a "
                  "2 MiB boundary")
            pools += [(f"{page} {name}", *paged_copy(k, v, page, gen, how))
                      for page in (int(x) for x in args.pages.split(","))
                      for how, name in (("within", "within 2 MiB"), ("spans", "2 MiB spans"))]
        arms = {}
        for kern in kernels:
            tag = "" if len(kernels) == 1 else f" {kern}"
            kn = kern if kern == "best" else int(kern)
            arms["contiguous" + tag] = (lambda kn=kn: flash_ladder.attention_with_kvcache(
                q, k, v, cache_seqlens=lens, causal=False, kernel=kn))
            if length:
                arms["exact" + tag] = (lambda kn=kn: flash_ladder.attention(
                    q, k[:, :length], v[:, :length], layout="bnhd", kernel=kn))
            elif not args.ragged:
                arms["plain" + tag] = (lambda kn=kn: flash_ladder.attention(
                    q, k, v, layout="bnhd", kernel=kn))
            for page, kp, vp, table in pools:
                arms[f"paged {page}" + tag] = (lambda kp=kp, vp=vp, table=table, kn=kn:
                                               flash_ladder.attention_with_kvcache(
                                                   q, kp, vp, cache_seqlens=lens,
                                                   block_table=table, causal=False,
                                                   kernel=kn))
        if args.peers:
            qv, kv_, vv = (t.transpose(1, 2) for t in (q, k[:, :length], v[:, :length]))
            for impl, backend in (("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                                  ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION)):
                arms[impl] = (lambda backend=backend: sdpa_out(backend, qv, kv_, vv))
        first = "contiguous" + ("" if len(kernels) == 1 else f" {kernels[0]}")
        wants = {}  # each rung's contiguous arm's output
        for name, fn in arms.items():
            out = fn()
            rung = name.split()[-1] if len(kernels) > 1 else ""
            if name.startswith("contiguous"):
                wants[rung] = out
            want = wants.get(rung, wants[first.split()[-1] if len(kernels) > 1 else ""])
            page = int(name.split()[1]) if name.startswith("paged") else 0
            loose = ((page and nk % page) or name.startswith(("exact", "sdpa"))
                     or (name.startswith("contiguous") and name != first))
            if loose:
                # The same keys split otherwise (a capacity of whole pages past Nk, the
                # first L keys alone, SDPA, another rung): another order of the sums.
                want = wants[first.split()[-1] if len(kernels) > 1 else ""]
                err = (out.float() - want.float()).abs().max().item()
                same = err <= 1e-2
                what = f"differs from {first} by {err:.3g} > 1e-2"
            else:
                same, what = torch.equal(out, want), "differs from its contiguous arm"
                if not same and page % 128:
                    # Pages that hold no whole 128-key tile: perhaps another tile (rung 65).
                    err = (out.float() - want.float()).abs().max().item()
                    same = err <= 1e-2
                    print(f"  B={b} Nk={nk} L={length or '-'} {name}: not its contiguous arm's "
                          f"bits (pages of {page}: another tile?), within {err:.3g} of it")
                    what = f"differs from its contiguous arm by {err:.3g} > 1e-2"
            failed |= not same
            if not same:
                print(f"  B={b} Nk={nk} L={length or '-'} {name}: output {what}")
        # Each arm captured in a CUDA graph (as a decode loop runs it) and timed by replay: a
        # call of 10-100 us would otherwise time the Python in front of its launches.
        graphs = {name: cs.captured(fn) for name, fn in arms.items()}  # (replay, captured)
        times = {name: [] for name in arms}
        names = list(arms)
        for r in range(args.rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                times[name].append(timer.time(graphs[name][0])[0])
        keys = int(lens.sum().item())
        kv = 2 * hkv * keys * args.d * 2
        for name in names:
            ms = statistics.median(times[name])
            rows.append(dict(arm=name, B=b, Nk=nk, L=length, H=hq, H_kv=hkv, Nq=args.nq,
                             d=args.d, ragged=args.ragged, keys=keys, ms=ms,
                             round_ms=times[name], gbps=kv / (ms * 1e-3) / 1e9,
                             graph=graphs[name][1], flush=args.flush))
        del q, k, v, arms, graphs, pools
        torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "flush": args.flush, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                           timespec="seconds"), "rows": cs.json_safe(rows)}, fh, indent=1)
            fh.write("\n")
    names = list(dict.fromkeys(r["arm"] for r in rows))
    print("\nGB/s of K + V (paged / contiguous" + (", contiguous / exact)" if fixed else ")"))
    for b, nk, length in dict.fromkeys((r["B"], r["Nk"], r["L"]) for r in rows):
        cell = {r["arm"]: r["gbps"] for r in rows if (r["B"], r["Nk"], r["L"]) == (b, nk, length)}
        def base(n, what):  # the `what` arm of n's rung
            return cell[what if len(kernels) == 1 else f"{what} " + n.split()[-1]]
        def ratio(n):
            if "paged" in n:
                return f" ({cell[n] / base(n, 'contiguous'):.3f})"
            if length and n.startswith("contiguous"):
                peer = max((cell[p] for p in ("sdpa_flash", "sdpa_cudnn") if p in cell),
                           default=0)
                return (f" ({cell[n] / base(n, 'exact'):.3f} of exact"
                        + (f", {cell[n] / peer:.3f} of the faster peer" if peer else "") + ")")
            return ""
        print(f"B={b:<3} Nk={nk:<7}" + (f" L={length:<6}" if length else "") + " " + "  ".join(
            f"{n} {cell[n]:6.0f}" + ratio(n) for n in names if n in cell))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
