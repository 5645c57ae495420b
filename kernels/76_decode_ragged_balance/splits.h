// Rung 38's split rule and its workspace (rung 63's copy of rung 62's, which is rung 40's: a rung
// includes only its own files), rung 40's one change to what the rule is told, rung 50's price
// of a split, rung 57's share of a sequence's tiles, rungs 58-61's clusters, rung 62's cut-off
// past one wave and launch, rung 63's cut-off at d = 128, rung 64's price at d = 96, rung 65's
// tiles of 128 keys at d = 64, rung 66's lone blocks only for grids past half the SMs, rung 67's
// one wave of one block an SM for short d = 96 calls, rung 69's two slots an SM for blocks of
// many rows and rung 73's one split for such a grid past the SMs, rung 75's launch size for
// the block table, and rung 76's deal of a ragged batch's tiles, in plain integers (no CUDA):
// the kernel's host side asks them with the device's figures, the tests with made-up ones, and
// the split kernel asks split_tiles.
// The rule is asked with the capacity seqlen_k (the host cannot read the cache lengths); the
// keys each split takes are cut on the device, from the lengths.
//
// A decode grid has blocks = B x H_kv blocks. Where one wave of them fills enough of the GPU
// there is nothing to gain: one split. Else each (KV head, batch) may be cut into s chunks of
// whole key tiles, s blocks in its place, and s is picked for the waves it makes
// (FlashAttention's rule, in this ladder's words): with slots = SMs x blocks an SM holds, w =
// blocks s / slots waves, of which the last is partly idle; eff(s) = w / ceil(w) is the share of
// the slots the waves use. The pick is the smallest s whose eff is at least 85% of the best eff
// over s = 1 .. min(128, SMs, key tiles): fewer, longer chunks where more would gain little (each
// split costs a partial O to write and merge).
#pragma once

#include <algorithm>
#include <cstdint>

namespace fl {
namespace k76_decode_ragged_balance {

// Rung 65: the keys of a K/V tile. At d = 64 a tile of 64 keys is 16 KiB of K and V, half of
// d = 128's, and every rule below that reads a tile's bytes (the ring, the slots, the cut-off,
// the price, the launch alone) held it for a small tile: three blocks an SM, four stages, an 80%
// cut-off, no price. With 128 keys a d = 64 tile is d = 128's 32 KiB, and those rules take it as
// they take d = 128's. Two kinds of call keep 64 keys (measured on an H200 against rung 64):
//   - a block of more rows than one warp (key_warps false): up to four times the tensor work a
//     key, and 104 KiB blocks leave two an SM where 72 KiB left three. GQA 32/8 with 16 query
//     rows (64 rows a block) ran 0.65-0.98x rung 64 at B = 8, and at B = 1 0.72-0.88x with
//     1024, 32768 and 131072 keys (1.07-1.17x with 4096 and 8192);
//   - a tile across pages (page_size, 0 without a table, not a multiple of 128): copied in runs
//     that each lie in a page (eight of 16 keys, or two of 64), GQA 32/8 at B = 8 with 32768
//     keys read 0.64x rung 64 through pages of 16 and 0.75-0.87x through pages of 64.
// Other head dims keep 64 keys.
constexpr int tile_keys(int64_t head_dim, bool key_warps, int64_t page_size) {
  return head_dim == 64 && key_warps && page_size % 128 == 0 ? 128 : 64;
}

constexpr int kMaxSplits = 128;          // the combine reads at most this many partials a row
constexpr int64_t kMinTilesToSplit = 5;  // at 4 key tiles or fewer a chunk is not worth a block

// The number of splits for a grid of `blocks` blocks over `key_tiles` tiles of keys, on a GPU of
// `sms` SMs holding `blocks_per_sm` blocks each, where one wave of `cut_pct`% of the slots or more
// is not split (cut_pct below: 80, or rung 63's 60 at d = 128). 1 when any figure is < 1 (no
// device).
inline int choose_splits(int64_t blocks, int sms, int blocks_per_sm, int64_t key_tiles,
                         int cut_pct) {
  if (blocks < 1 || sms < 1 || blocks_per_sm < 1 || key_tiles < kMinTilesToSplit) return 1;
  const int64_t slots = int64_t{sms} * blocks_per_sm;
  // One wave already fills cut_pct% of the slots: no split. Rung 62: only one wave; a grid of
  // more blocks than slots has a last wave too, and is weighed as any split count is.
  if (blocks <= slots && blocks * 100 >= slots * cut_pct) return 1;
  const int most = static_cast<int>(std::min<int64_t>({kMaxSplits, sms, key_tiles}));
  // eff(s) = num(s) / den(s) exactly: num = blocks s, den = slots ceil(num / slots).
  auto num = [&](int s) { return blocks * s; };
  auto den = [&](int s) { return slots * ((blocks * s + slots - 1) / slots); };
  int best = 1;
  for (int s = 2; s <= most; ++s) {
    if (num(s) * den(best) > num(best) * den(s)) best = s;
  }
  for (int s = 1; s <= most; ++s) {  // eff(s) >= 0.85 eff(best), in integers
    if (100 * num(s) * den(best) >= 85 * num(best) * den(s)) return s;
  }
  return best;
}

// Rung 40: a tile of K and V of kBigTileBytes or more (64 keys at d >= 128) is big enough for one
// block to keep its SM's share of HBM busy. Such a block's ring has 3 stages (two tiles in
// flight), and a split grid gets one block an SM: the rule above is told of 1 slot an SM, not of
// the blocks an SM holds (two at d = 128), whose waves would put two blocks on some SMs and one
// on others. Smaller tiles (d <= 96) keep rung 39's ring of 4 stages and its slots: one of
// their blocks leaves its SM short, and two an SM are what such a split grid needs.
constexpr int64_t kBigTileBytes = 32 * 1024;
constexpr int ring_stages(int64_t tile_bytes) { return tile_bytes >= kBigTileBytes ? 3 : 4; }
inline int split_slots_per_sm(int64_t tile_bytes, int blocks_per_sm) {
  return tile_bytes >= kBigTileBytes && blocks_per_sm > 0 ? 1 : blocks_per_sm;
}

// Rung 63: where one wave is enough. The 80% cut-off is FlashAttention's, for blocks that each
// need their SM. At d = 128 a block of big tiles alone on its SM keeps two tiles (64 KiB) in
// flight, and a wave of such blocks over 60% of the SMs keeps HBM busy: splitting it adds waves
// and a combine for nothing. Measured on an H100 (132 SMs, one query row; one split against
// rung 62's count): 80-104 blocks (GQA 32/8 at B = 10-13, MHA at B = 3) ran 1.008-1.105x faster
// unsplit, 56-72 blocks 0.90-0.98x (splitting wins). So tiles of kCutTileBytes (d = 128) are
// cut at 60% of the slots (one an SM: 80 blocks on 132 SMs). Other tiles keep 80%: at d = 192
// 80 blocks unsplit ran 0.891x the split grid (why is not profiled; its blocks read Q from
// shared memory at every tile, d = 128's keep it in registers), and d <= 96 was not measured.
constexpr int kCutPct = 80;
constexpr int kCutTilePct = 60;
constexpr int64_t kCutTileBytes = 32 * 1024;
constexpr int cut_pct(int64_t tile_bytes) {
  return tile_bytes == kCutTileBytes ? kCutTilePct : kCutPct;
}

// Rung 62: and the launch makes it so where it pays. A block of big tiles at d = 128 asks 112
// KiB, and an SM holds two: the GPU ran a split grid of more blocks than SMs two blocks an SM
// where it could, some SMs with two and others with one, not the waves the rule counted. Where
// each split reads a long chunk, kAloneChunkBytes of K and V or more (32 tiles, 2048 keys at
// d = 128), the split kernel's launch asks `alone` bytes (common/clusters.h: more than half an
// SM's shared memory) and each block has an SM to itself. A short chunk keeps the kernel's own
// size: there a second block on the SM hides the start and the end of the first (measured on an
// H100, GQA at B = 6 and 7 with 4096 keys, 10-13 tiles a split: 0.970-0.977x rung 61 alone).
// d = 192's 168 KiB is alone already, small tiles keep their slots, and a grid of one split
// keeps its launch. 0 for `alone`: no such figure (the kernel's own).
constexpr int64_t kAloneChunkBytes = 1024 * 1024;
constexpr int split_launch_smem(int64_t tile_bytes, int64_t chunk_tiles, int smem, int alone) {
  return tile_bytes >= kBigTileBytes && chunk_tiles * tile_bytes >= kAloneChunkBytes &&
                 alone > smem
             ? alone
             : smem;
}

// Rung 75: the shared memory of a launch of one-row blocks (key warps) that runs one block an SM:
// it asks at least `table` bytes (the ring and the split's block-table entries, table_smem), so
// that the kernel copies its table as rung 74's cluster launches do. Such a launch asks more
// than half an SM already (`alone`, rung 62's figure, or a block of that size: d = 192), so the
// few KiB more cost it no block. Any other launch keeps its size: two blocks an SM would not fit
// with the table beside them (d = 128: 112 KiB fit twice, 116 KiB do not). alone = 0 (no
// device figure): no table.
constexpr int with_table(int smem, int table, int alone, bool key_warps) {
  return key_warps && alone > 0 && smem >= alone && table > smem ? table : smem;
}

// Rung 50: a split has a price. Each one is a block more to start and a partial more to write and
// merge, and the first one brings the combine in; what it buys is a shorter chunk for every
// block. Measured on an H100 (d = 128), a call whose blocks read little pays more than it gains
// past one block on half the SMs: the rule above, which fills the GPU's slots, is then cut back.
// With tiles of kPriceTileBytes or more, a block's rows in one warp (rows <= 16: rung 48's key
// warps) and `waves` the count above: half = the splits that put one block on half the SMs,
// floor(SMs / 2 / blocks), at least 1. Where half < waves and a block of `half` splits reads at
// most kShortChunkBytes of K and V (512 keys at d = 128), or, for half = 1 (no split, no
// combine), at most kLoneChunkBytes (2048 keys), the call takes half splits; else the count
// above. Smaller tiles (d = 64) and blocks of more rows (four times the tensor work a key, and
// slower at 8 splits where measured) keep the count above.
//
// Rung 66: 1 MiB only where `half` is 1 by the "at least". floor(SMs / 2 / blocks) is 0 for a
// grid of more than half the SMs, whose blocks already have more than half the GPU: its lone
// blocks may read 1 MiB. A grid on half the SMs or fewer (34-66 blocks on 132 SMs) has half = 1
// too, but there lone blocks leave half the SMs or more idle; rung 66 holds them to
// kShortChunkBytes, as every count above one. Rung 50 drew the 1 MiB line on an H100 with
// its combine kernel (GQA 32/8 at B = 8, 64 blocks, d = 128: 25.10 us unsplit against 25.97 for
// two splits at 1024 keys, 39.30 against 40.30 at 2048). On an H200 with rung 65's merges,
// the waves' count won on such grids: 40 and 64 blocks at d = 64-192, 1.00-1.59x rung 65; on
// grids of 72-192 blocks it lost (0.76-0.99x), and those keep the lone block.
//
// Rung 64: the price from d = 96 on. Rungs 50-63 priced big tiles alone (d >= 128), and at d = 96
// a short call took the waves' count of two blocks an SM: on 132 SMs the rule cuts GQA 32/8 at
// B = 1 with 1024 and 4096 keys into 14 and 29 splits of one to three tiles, merged by the
// combine kernel (0.874x cuDNN on an H100). Priced, they take 8 splits merged in a cluster
// (1.19x and 1.22x rung 63 on an H100). The count the price cuts back is still d = 96's own.
// One thing is new at d = 96. Priced to one split, a grid of d = 96 runs at the kernel's
// own two blocks an SM (`per_sm`), and one of more blocks than those slots has a last wave;
// there the waves' count was the better bet on an H100 but where the grid is two waves or more
// and its last holds at most a sixth of the slots (GQA 32/8 at B = 67-136: 1.03-1.07x rung 63).
// At 1.03-1.33 waves (B = 34-44) one split read 0.92-0.98x rung 63's split grid, and at 2.3
// waves (B = 76, a last wave of 80 blocks on 264 slots) 0.95-0.97x.
constexpr int64_t kPriceTileBytes = 24 * 1024;
constexpr int64_t kShortChunkBytes = 256 * 1024;
constexpr int64_t kLoneChunkBytes = 1024 * 1024;
constexpr int64_t kLastWaveShare = 6;  // a last wave of at most slots / 6 blocks
inline int price_splits(int waves, int64_t blocks, int sms, int64_t key_tiles,
                        int64_t tile_bytes, int64_t rows, int per_sm) {
  if (tile_bytes < kPriceTileBytes || rows > 16 || blocks < 1 || sms < 1 || key_tiles < 1) {
    return waves;
  }
  const int64_t half = std::max<int64_t>(1, sms / 2 / blocks);
  if (half >= waves) return waves;
  const int64_t slots = int64_t{sms} * per_sm;
  if (half == 1 && tile_bytes < kBigTileBytes && blocks > slots &&
      (blocks < 2 * slots || blocks % slots > slots / kLastWaveShare)) {
    return waves;
  }
  const int64_t chunk = (key_tiles + half - 1) / half * tile_bytes;  // a block's K and V bytes
  const bool past_half = sms / 2 < blocks;  // rung 66: only such a grid's lone blocks read 1 MiB
  return chunk <= (past_half ? kLoneChunkBytes : kShortChunkBytes) ? static_cast<int>(half)
                                                                   : waves;
}

// Rung 67: one wave of one block an SM for a short d = 96 call. The rules above count a d = 96
// split grid (tiles of kPriceTileBytes, below kBigTileBytes) at the blocks an SM holds, two of
// 108 KiB: a call of a few KV heads and sequences is cut into the splits that put two blocks
// on most SMs, chunks about half as long as those of one block an SM. Each split is a block to
// start, a partial to write and one more to merge; the second block an SM pays for that where
// chunks are long, not where they are short. So for a block whose rows fit one warp the rule is
// also asked with one slot an SM (the waves' count and the price), and that count is taken
// where it makes one wave (blocks x splits <= SMs) whose blocks each read under
// kAloneChunkBytes of K and V (the launch keeps its own size: no block is launched alone).
// Measured on an H200 (132 SMs, one query row) against rung 66: GQA 32/8 at B = 1 with 8192
// keys, 29 -> 15 splits, 1.01-1.18x in six processes (Nsight Compute: the split kernels take
// the same time, the combine 7.0 -> 5.4 us); at B = 8 with 1024 keys, 4 -> 2, 1.11-1.16x. One
// block an SM reading 1 MiB or more lost: B = 1 with 131072 keys (15 splits of 3.2 MiB) 0.94x,
// B = 8 with 32768 keys (2 of 6 MiB) 0.90x; those keep the count above. A count past one wave
// would put two blocks on some SMs again, and keeps the count above too: in practice the rule
// moves grids of at most half the SMs (one of 67-132 blocks counts one split, or more than one
// wave). 0: the count above.
inline int one_wave_splits(int64_t blocks, int sms, int64_t key_tiles, int64_t tile_bytes,
                           int64_t rows) {
  if (tile_bytes < kPriceTileBytes || tile_bytes >= kBigTileBytes || rows > 16 || blocks < 1 ||
      sms < 1 || key_tiles < 1) {
    return 0;
  }
  const int s = price_splits(choose_splits(blocks, sms, 1, key_tiles, cut_pct(tile_bytes)),
                             blocks, sms, key_tiles, tile_bytes, rows, 1);
  const int64_t chunk = (key_tiles + s - 1) / s * tile_bytes;  // a block's K and V bytes
  return blocks * s <= sms && chunk < kAloneChunkBytes ? s : 0;
}

// Rung 69: a block of many rows runs two an SM where its chunks stay long. Rung 40 counts one
// slot an SM for big tiles (d = 128), and rung 62 launches a split grid of long chunks alone,
// one block an SM: right for a block whose rows fit one warp, whose four warps share each
// tile's keys. A block of more rows (GQA with 16 query rows: 64) computes with all four warps,
// each its 16 rows against every key, and alone on its SM it is one warp a scheduler with
// nothing to fill its waits: on an H200 at d = 128, B = 8, 32768 keys its split kernel issued
// on 37% of the cycles and read at 67% of DRAM peak (one query row, the same grid: 94%). An SM
// holds two such blocks. So for rows > 16 and big tiles the waves' count is asked with the
// blocks an SM holds, and taken, launched at the kernel's own size, where it splits the keys and
// each split still reads kTwoChunkBytes of K and V or more. A trial on an H200 (rung 68 with
// that count taken everywhere): 1.05-1.18x rung 68 wherever the chunk stayed 512 KiB or more,
// and 0.79-0.99x where it left 160-288 KiB, the count doubling short splits (one exception,
// 256 KiB at B = 4, 1.09x). Where the count is one split of more blocks than SMs (B = 20-28)
// some SMs run two blocks and the rest one: B = 20 (160 blocks) ran 0.91-0.93x rung 68's three
// splits alone. 0: not such a call (rung 68's count).
//
// Rung 73: that exception was measured on rung 68's mma.sync blocks; rung 72's blocks (one
// warpgroup of wgmma, K and V by TMA) gain from the one split instead, where every sequence has
// the same length. Where the count of two slots an SM is one split of more blocks than SMs and
// the call passes no cache lengths (`equal_lengths`: every sequence the capacity's), it is
// taken. On 132 SMs that moves the grids of 160-224 blocks of 64 rows (GQA 32/8 with 16 query
// rows at B = 20-28; at B = 29-33 rung 68's count is one split too), which rung 68's count cut
// into 2-4 splits, each a partial to write and merge, launched one block an SM where a split
// reads 1 MiB or more (2.7-6.8 waves, the last partly idle). Unsplit, every block is resident at
// once, one on some SMs and two on the others, and all of them share HBM to the end. On an H200
// (d = 128, 16 query rows, B = 20, 24 and 28, 4096-131072 keys) it ran 1.039-1.193x rung 72
// (notebook 73). With cache lengths the host cannot see whether they differ, and where they do a
// block of the longest sequence runs on after the others have finished, where rung 68's shorter
// splits let the GPU fill the SMs they free: lengths uniform in [8192, 32768] at B = 20 read
// 0.910x rung 72 with one split. Such calls keep rung 68's count.
constexpr int64_t kTwoChunkBytes = 512 * 1024;
inline int two_slot_splits(int64_t blocks, int sms, int blocks_per_sm, int64_t key_tiles,
                           int64_t tile_bytes, int64_t rows, bool equal_lengths) {
  if (rows <= 16 || tile_bytes < kBigTileBytes || blocks_per_sm < 2 || blocks < 1 || sms < 1 ||
      key_tiles < 1) {
    return 0;
  }
  const int s = choose_splits(blocks, sms, blocks_per_sm, key_tiles, cut_pct(tile_bytes));
  if (s == 1) return equal_lengths && blocks > sms ? 1 : 0;  // rung 73: one split past the SMs
  const int64_t chunk = (key_tiles + s - 1) / s * tile_bytes;  // a block's K and V bytes
  return chunk >= kTwoChunkBytes ? s : 0;
}

// Rung 57: split s of S takes the tiles [s T / S, (s + 1) T / S) of T, the tiles of the batch's
// longest sequence, cut at its own sequence's n tiles (none past them). Rung 56 cut the
// capacity's tiles so, and a batch shorter than its cache filled only its first splits; with T
// the longest sequence's, that sequence's S shares differ by one tile at most and none is empty
// where T >= S. The other sequences are cut as rung 56 cut them, at the same boundaries, which
// are rung 56's where the longest sequence fills the capacity. The integer floors are the same
// on the host (the tests) and in the kernel.
struct SplitTiles {
  int first, end;  // tiles [first, end) of the sequence's; first == end: no share
};
constexpr SplitTiles split_tiles(int split, int splits, int longest, int tiles) {
  const int first = static_cast<int>(int64_t{split} * longest / splits);
  const int end = static_cast<int>(int64_t{split + 1} * longest / splits);
  return {first, end < tiles ? end : (tiles > first ? tiles : first)};
}

// Rung 76: the deal. Rung 57's cut gives every sequence the same S shares of the longest's tiles,
// so with ragged lengths a short sequence's last shares are empty and the blocks of the longest
// run on after the others have finished. A call with cache lengths whose splits merge in the
// combine kernel deals instead. Lay a KV head's sequences end to end, U tiles in all (sequence
// i's t_i tiles from T_i = t_0 + .. + t_(i-1) on), and give its S x B blocks (block (s, hk, b) is
// block j = b S + s) chunk = ceil(U / (S x B)) tiles each: block j takes tiles [j chunk,
// (j + 1) chunk) of U, every block but the last as many as the others, whatever the lengths. A
// block's tiles may hold the end of one sequence, some whole ones, and the start of another:
// it computes each piece ("segment") as rung 57's block computes its split, one after the
// other. A sequence whole in one block writes O; a sequence cut by the chunks' ends writes one
// partial from each block it lies in, merged by the combine kernel: a block writes at most two,
// for the sequence it starts with (slot 2 j) and the one it ends with (slot 2 j + 1, where that
// sequence starts inside the block), so the workspace holds 2 S x B slots. A sequence lies in at
// most kMaxSplits blocks, what the combine reads: the chunk is at least ceil(t_max / (kMaxSplits
// - 1)). The host cannot read the lengths: the split kernel and the combine each work the chunk
// out on the device, and these integers are the tests' too.
constexpr int64_t deal_chunk(int64_t total_tiles, int64_t most_tiles, int64_t blocks) {
  const int64_t even = blocks > 0 ? (total_tiles + blocks - 1) / blocks : total_tiles;
  const int64_t cap = (most_tiles + kMaxSplits - 2) / (kMaxSplits - 1);
  return std::max<int64_t>({even, cap, 1});
}
// The blocks a sequence of `tiles` tiles from tile `before` on lies in: [first, last].
struct DealSpan {
  int64_t first, last;
};
constexpr DealSpan deal_span(int64_t before, int64_t tiles, int64_t chunk) {
  return {before / chunk, (before + tiles - 1) / chunk};
}
// The slot of the partial that block `block` writes for a sequence from tile `before` on.
constexpr int64_t deal_slot(int64_t block, int64_t before, int64_t chunk) {
  return 2 * block + (before > block * chunk ? 1 : 0);
}
// Whether a call deals: it passes cache lengths for kDealBatch sequences or more, splits, each
// split reads kDealChunkBytes of K and V or more (the capacity's share: the deal costs each block
// a pass over the lengths before its first copy, and a piece's start where its tiles cross from
// one sequence to the next), and its split grid runs in one wave (grid_blocks at most the
// `resident` blocks the GPU holds at once: the deal gives every block as many tiles, and a last
// wave of such blocks would leave SMs idle for a whole block's time). Such a call takes the combine
// kernel, in place of a cluster too (whose blocks are one sequence's splits: it cannot deal).
// Measured on an H200 (GQA 32/8, one query row, lengths uniform in [Nk / 4, Nk], d = 128,
// notebook 76): with 32768 keys B = 8 (two splits of 8 MiB, rung 75's cluster) 1.06-1.09x rung
// 75, B = 4 (four of 4 MiB) 1.04-1.08x, B = 2 (eight of 2 MiB) 0.955x; with 131072
// keys B = 4 and 8 1.08x and 1.20x; with 8192 keys (1 and 2 MiB) 0.94x and 0.98x; every
// sequence at the capacity 0.98-0.99x.
constexpr int64_t kDealBatch = 4;
constexpr int64_t kDealChunkBytes = 4 * 1024 * 1024;
constexpr bool deals(bool lengths, int64_t batch, int splits, int64_t chunk_bytes,
                     int64_t grid_blocks, int64_t resident) {
  return lengths && batch >= kDealBatch && splits > 1 && chunk_bytes >= kDealChunkBytes &&
         grid_blocks <= resident;
}

// Rung 58: a call of two splits merges them in a thread block cluster (the splits of a KV head
// and sequence, one cluster) where the GPU has clusters; rung 59: a call of two to eight. More,
// or without clusters: rung 57's combine kernel. Eight is the most blocks a cluster may portably
// have, and the most splits the merge's sum order (the combine kernel's eight lanes) covers.
// Measured on an H100 (d = 128, GQA 32/8 and MHA 32/32): rung 58's merge read 0.96-1.00x rung
// 57's combine at four and eight splits (B = 1); rung 59's merge is the one that pays there.
// Rung 61: and only where the call's clusters (B x H_kv: one a KV head and sequence) all run at
// once, each block on an SM of its own: `fit`, the clusters of `splits` blocks the GPU runs so at
// once (common/clusters.h; 0 without clusters). A GPU places whole clusters in a GPC, so a grid
// of more clusters runs some of them on SMs that hold two of its blocks, or after the others: on
// an H100, 32 clusters of four (MHA at B = 1, d = 128 with 8192 keys or more, and d = 192) read
// 0.944-0.995x and 0.58-0.67x rung 57.
constexpr int kClusterSplits = 8;
constexpr bool combines_in_cluster(int splits, int64_t clusters, int fit) {
  return splits > 1 && splits <= kClusterSplits && clusters <= fit;
}

inline int64_t round_up_256(int64_t bytes) { return (bytes + 255) / 256 * 256; }

// The partials of `splits` splits: O_s, fp32 [splits][B][H_q][Nq][d], then LSE_s, fp32
// [splits][B][H_q][Nq], each part starting 256-byte aligned. 0 for one split (no partials), and
// for a call that combines in a cluster (its partials stay in shared memory): the kernel's
// workspace() asks combines_in_cluster first.
inline int64_t lse_part_offset(int splits, int64_t batch, int64_t heads_q, int64_t seqlen_q,
                               int64_t head_dim) {
  return round_up_256(splits * batch * heads_q * seqlen_q * head_dim * 4);
}
inline int64_t split_workspace_bytes(int splits, int64_t batch, int64_t heads_q,
                                     int64_t seqlen_q, int64_t head_dim) {
  if (splits <= 1) return 0;
  return lse_part_offset(splits, batch, heads_q, seqlen_q, head_dim) +
         round_up_256(splits * batch * heads_q * seqlen_q * 4);
}

}  // namespace k76_decode_ragged_balance
}  // namespace fl
