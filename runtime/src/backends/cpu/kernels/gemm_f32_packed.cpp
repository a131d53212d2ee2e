// The fast f32 gemm: Goto-style blocking around the ISA's register tile.
// Work is split into (batch, row block, column block) items over the
// threads; each item accumulates its mc x nc block of c in thread scratch over
// k in kc steps (so c, which may alias the residual, is written once, after
// the epilogue), with a packed from any strides and b either pre-packed at
// load (weights) or packed per panel here (any strides).
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "ein/half_float.hpp"

#include "backends/cpu/kernels/element_io.hpp"
#include "backends/cpu/kernels/gemm_blocks.hpp"

namespace ein::detail::cpu {
namespace {

// Block sizes: an mc x kc block of a, the mc x nc accumulator block and the
// kc x nr panel of b being used stay in L2 (and the register tile's rows of a
// in L1). kc 768 takes a transformer's K = 384 or 768 in one pass, so c is
// written once; measured on Zen 5: 2.5% faster on ViT-S than 256 (where the
// panel fits L1 but c is reloaded), and 2-3% faster on ViT-B than 384.
constexpr int64_t kKc = 768, kMaxMc = 96, kMaxNc = 256, kMaxNr = 64;
// The room for packed rows of a (f32, or twice as many bf16 pairs' worth).
constexpr int64_t kAPackFloats = kMaxMc * kKc;
// Items of the tall bf16 tile over one block of k (no accumulator block, so
// no scratch bound): as wide as a transformer's widest weights, so a row
// tile's rows of a are reused over more panels.
constexpr int64_t kMaxNcTileByTile = 1536;
// Up to this many bytes of an item's weight pairs, the tall tile walks the
// item row tile by row tile (the weights stay in L2, 2 MB a core on every
// CPU with AMX: ViT-S and MiniLM's 1.2 MB); beyond, panel by panel over
// several row tiles, each panel read from memory once per item.
constexpr int64_t kTileByTileWeightBytes = 1536 * 1024;

// dst[p * mr + r] = a[(row + r) * sM + (col + p) * sK] for a panel of mr rows
// (rows past `rows` are zero) and kc columns.
void packA(const float *a, int64_t sM, int64_t sK, int64_t rows, int64_t kc, int mr, float *dst) {
  for (int r = 0; r < mr; ++r) {
    if (r >= rows) {
      for (int64_t p = 0; p < kc; ++p) dst[p * mr + r] = 0.0f;
      continue;
    }
    const float *src = a + r * sM;
    if (sK == 1)
      for (int64_t p = 0; p < kc; ++p) dst[p * mr + r] = src[p];
    else
      for (int64_t p = 0; p < kc; ++p) dst[p * mr + r] = src[p * sK];
  }
}

// dst[r * kc + p] = a[(row + r) * sM + (col + p) * sK]: `rows` plain rows of
// kc columns (a short row tile's, read by gemmTileRowsUpTo).
void packRows(const float *a, int64_t sM, int64_t sK, int64_t rows, int64_t kc, float *dst) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t p = 0; p < kc; ++p) dst[r * kc + p] = a[r * sM + p * sK];
}

// dst[p * nr + j] = b[p * sK + j * sN] for kc rows and nr columns (columns
// past `cols` are zero); bf16 weights (a bf16 artifact on a CPU without the
// bf16 gemm) are widened to f32 here, so the f32 tile computes with exactly
// the bf16-rounded weights.
template <typename T>
void packB(const T *b, int64_t sK, int64_t sN, int64_t kc, int64_t cols, int nr, float *dst) {
  for (int64_t p = 0; p < kc; ++p) {
    float *row = dst + p * nr;
    const T *src = b + p * sK;
    if constexpr (std::is_same_v<T, float>)
      if (sN == 1 && cols == nr) {
        std::memcpy(row, src, sizeof(float) * nr);
        continue;
      }
    for (int64_t j = 0; j < nr; ++j) row[j] = j < cols ? widenToF32(src[j * sN]) : 0.0f;
  }
}

// The bf16 gemm's weight panel: dst[q * nr + j] = the pair (b[2q][j],
// b[2q + 1][j]) for q < ceil(k / 2) (an odd k's last row paired with zero;
// columns past `cols` zero), the layout vdpbf16ps reads.
void packBPairs(const uint16_t *b, int64_t sK, int64_t sN, int64_t k, int64_t cols, int nr, uint32_t *dst) {
  for (int64_t q = 0; q < (k + 1) / 2; ++q) {
    uint32_t *row = dst + q * nr;
    const uint16_t *even = b + 2 * q * sK, *odd = even + sK;
    const bool hasOdd = 2 * q + 1 < k;
    for (int64_t j = 0; j < nr; ++j)
      row[j] = j < cols ? uint32_t(even[j * sN]) | (hasOdd ? uint32_t(odd[j * sN]) << 16 : 0u) : 0u;
  }
}

// Up to the tall tile's rows of a (rows sM apart, k sK apart, `depth` of
// k) as bf16 pairs in the steps bf16GemmTallTileFromRow reads: each step's
// bf16GemmTallMr rows of bf16GemmTallPairStep pairs together, then the
// rows of the pairs past the last whole step; rows past `rows` zero.
void packPairSteps(const IsaKernels &isa, const float *a, int64_t sM, int64_t sK, int64_t rows, int64_t depth,
                   uint32_t *dst) {
  const int mr = isa.bf16GemmTallMr;
  const int64_t step = isa.bf16GemmTallPairStep, steps = (depth + 1) / 2 / step;
  // (An odd depth's last step holds its last element paired with zero.)
  for (int64_t s = 0; s < steps; ++s)
    isa.bf16PackRows(a + 2 * step * s * sK, sM, sK, rows, std::min(2 * step, depth - 2 * step * s), mr,
                     dst + s * mr * step, step);
  if (const int64_t rest = depth - 2 * step * steps; rest > 0)
    isa.bf16PackRows(a + 2 * step * steps * sK, sM, sK, rows, rest, mr, dst + steps * mr * step, (rest + 1) / 2);
}

// The gemv path (useGemv): each thread takes one contiguous run of the
// packed panels and computes all m rows of each from registers, then the
// epilogue of the panel's columns. Rows of a are read in place where they
// are contiguous along k (f32), else copied into scratch; bf16 pair panels
// get a's rows as bf16 pairs (once per thread and batch element) where the
// CPU has the bf16 gemm, and are widened in registers elsewhere.
void gemvF32Packed(const Gemm &op, const KernelContext &context, const PackedMatrix &packed) {
  const IsaKernels &isa = *context.isa;
  const int nr = packed.nr;
  const int64_t m = op.m, k = op.k, pairs = (k + 1) / 2;
  const size_t r = op.batch.size();
  const int64_t aM = op.a.strides[r], aK = op.a.strides[r + 1];
  const float *a = context.data<const float>(op.a);
  const GemmItems items = gemvItems(m, op.n, nr);
  const bool bf16Rows = packed.bf16Pairs && isa.bf16GemmTile;
  forEachGemvRun(context, items.count(op.batch.product()), [&](int64_t begin, int64_t end, int thread) {
    float *acc = context.threadScratch(thread), *rows = acc + kGemvMaxRows * kMaxNr;
    auto *rowPairs = reinterpret_cast<uint32_t *>(rows);
    const float *aRows = nullptr;
    int64_t lda = aM, preparedBatch = -1;
    for (int64_t item = begin; item < end; ++item) {
      const GemmItem it = gemmItem(op, items, item);
      if (const int64_t batchIndex = item / items.nBlocks; batchIndex != preparedBatch) {
        preparedBatch = batchIndex;
        if (bf16Rows) {
          isa.bf16PackRows(a + it.a, aM, aK, m, k, static_cast<int>(m), rowPairs, pairs);
        } else if (aK == 1) {
          aRows = a + it.a;
        } else {
          for (int64_t i = 0; i < m; ++i)
            for (int64_t p = 0; p < k; ++p) rows[i * k + p] = a[it.a + i * aM + p * aK];
          aRows = rows;
          lda = k;
        }
      }
      if (bf16Rows)
        isa.bf16GemvPanel(static_cast<int>(m), pairs, rowPairs, pairs, packed.pairPanel(it.j0), acc, nr, false,
                          nullptr, 0);
      else if (packed.bf16Pairs)
        isa.bf16WidenGemvPanel(static_cast<int>(m), k, aRows, lda, packed.pairPanel(it.j0), acc, nr);
      else
        isa.gemvPanel(static_cast<int>(m), k, aRows, lda, packed.panel(it.j0), acc, nr);
      gemmEpilogueRows(op, context, it, 0, m, acc, nr);
    }
  });
}

// A gemm of one column (n == 1) as deep as one block of k, with a
// contiguous along k or along m: a batch of matrix-vector products (a
// depthwise convolution's, one per channel and window row). Each item, a
// block of rows of one batch element, takes its column of b into scratch,
// then the rows' sums: along k, each row's dot product with the column
// (IsaKernels::rowDots, a vector accumulator a row); along m, the columns
// of a scaled by b's elements and added (IsaKernels::columnSums, the rows
// in vector lanes); then the epilogue along the rows. No packing, where
// the tiled gemm packed a panel of nr columns of which one was used.
bool takesColumnPath(const Gemm &op, bool bIsBf16) {
  const size_t r = op.batch.size();
  return op.n == 1 && !bIsBf16 && op.k > 0 && op.k <= kKc && (op.a.strides[r] == 1 || op.a.strides[r + 1] == 1);
}

void gemmColumnF32(const Gemm &op, const KernelContext &context) {
  const IsaKernels &isa = *context.isa;
  const size_t r = op.batch.size();
  const int64_t k = op.k, aM = op.a.strides[r], aK = op.a.strides[r + 1], bK = op.b.strides[r];
  const float *a = context.data<const float>(op.a), *b = context.data<const float>(op.b);
  const int64_t batchCount = op.batch.product();
  const GemmItems items = planGemmItems(op.m, 1, batchCount, 1, 1, kMaxMc, 1, context.threads());
  // Items are small (a depthwise convolution's are a row of 56 outputs of 7
  // products each): runs of them go to the threads, and the column is taken
  // again only where the batch element has another.
  const int64_t grain = std::max<int64_t>(1, 16384 / (items.mc * k));
  context.parallelChunks(items.count(batchCount), grain, [&](int64_t begin, int64_t end, int thread) {
    float *sums = context.threadScratch(thread), *column = sums + kMaxMc;
    int64_t columnAt = -1;
    for (int64_t item = begin; item < end; ++item) {
      const GemmItem it = gemmItem(op, items, item);
      if (it.b != columnAt)
        for (int64_t p = 0; p < k; ++p) column[p] = b[it.b + p * bK];
      columnAt = it.b;
      const float *rows = a + it.a + it.i0 * aM;
      if (aM == 1) {
        isa.columnSums(rows, aK, k, column, it.rows, sums);
      } else {
        isa.rowDots(rows, aM, it.rows, column, k, 1, k, sums, 1);
      }
      // The column's epilogue as one row of it.rows sums, so that it runs
      // along vectors of them.
      GemmEpilogue e = gemmEpilogueOf(op, context, it, 0, it.rows, sums, 1);
      std::swap(e.rows, e.n);
      std::swap(e.biasRowStride, e.biasStride);
      std::swap(e.residualRowStride, e.residualStride);
      std::swap(e.outRowStride, e.outStride);
      isa.gemmEpilogue(e);
    }
  });
}

// A tile's epilogue in waiting, as a TileSideWork of the next tile:
// runPart(this, part) takes rows [part * kRows, (part + 1) * kRows) into c
// (gemmEpilogueRows). Parts of 8 rows: with a row a part, the calls cost
// more than the steps hide (0.77x on a ViT-S fc1 alone; 8 rows 1.03x, 4 or
// 16 alike).
struct PendingEpilogue {
  static constexpr int64_t kRows = 8;
  const Gemm &op;
  const KernelContext &context;
  GemmItem at;  // the tile's rows and columns of c
  float *tile;  // the epilogue may work in it
  int64_t tileStride, rows;
  bool biasAdded;
  int64_t parts() const { return ceilDiv(rows, kRows); }
  // Rows [i, i + count) of the tile into c.
  void runRows(int64_t i, int64_t count) const {
    gemmEpilogueRows(op, context, at, i, count, tile + i * tileStride, tileStride, biasAdded);
  }
  static void runPart(void *self, int64_t part) {
    const auto &p = *static_cast<const PendingEpilogue *>(self);
    p.runRows(part * kRows, std::min(kRows, p.rows - part * kRows));
  }
};

}  // namespace

size_t gemmF32PackedScratchFloats(const Gemm &op) {
  const size_t tiles = PreparedRows::kScratchFloats + static_cast<size_t>(kAPackFloats + kKc * kMaxNr + kMaxMc * kMaxNc);
  if (op.m > kGemvMaxRows) return tiles;
  // The gemv's sums and rows of a; saturated, so that a hostile k makes the
  // allocation fail instead of wrapping.
  constexpr uint64_t kLimit = SIZE_MAX / 16;
  const uint64_t k = std::min<uint64_t>(static_cast<uint64_t>(op.k), kLimit / kGemvMaxRows);
  return std::max<size_t>(tiles, static_cast<size_t>(std::min<uint64_t>(kLimit, kGemvMaxRows * (kMaxNr + k))));
}

Status gemmF32Packed(const Gemm &op, const KernelContext &context) {
  const int64_t m = op.m, n = op.n, k = op.k;
  const int64_t batchCount = op.batch.product();
  if (m == 0 || n == 0 || batchCount == 0) return Status();
  const IsaKernels &isa = *context.isa;
  const int mr = isa.gemmMr, nr = isa.gemmNr;
  const float *a = context.data<const float>(op.a);
  // b is f32, or bf16 weights of a bf16 artifact (the loader allows no other).
  const bool bIsBf16 = context.dtype(op.b) == DType::BF16;
  const float *b = bIsBf16 ? nullptr : context.data<const float>(op.b);
  const uint16_t *b16 = bIsBf16 ? context.data<const uint16_t>(op.b) : nullptr;
  const PackedMatrix *packed = op.packedB >= 0 ? &(*context.packed)[op.packedB] : nullptr;
  // Packed for another ISA (a test forcing one): pack as we go instead.
  if (packed && packed->nr != nr) packed = nullptr;
  // bf16 arithmetic exactly where the weights are packed as bf16 pairs and
  // the CPU has the bf16 gemm: activations are rounded to bf16 while packed,
  // products and sums are f32. Elsewhere bf16 pairs are widened to f32 in
  // registers by the gemv, panel by panel by the gemm (bf16WidenGemvPanel,
  // bf16WidenPairPanel): the f32 gemm on the bf16 weights.
  const bool bf16 = packed && packed->bf16Pairs && isa.bf16GemmTile;
  const bool widenPairs = packed && packed->bf16Pairs && !isa.bf16GemmTile;
  if (useGemv(m, packed != nullptr)) {
    gemvF32Packed(op, context, *packed);
    return Status();
  }
  if (takesColumnPath(op, bIsBf16)) {
    gemmColumnF32(op, context);
    return Status();
  }
  // The bf16 tile: the table's taller one where it has one (amx), and the
  // row blocks in its rows.
  const bool tall = bf16 && isa.bf16GemmTallTile;
  const int tileMr = tall ? isa.bf16GemmTallMr : mr;
  const auto bf16Tile = tall ? isa.bf16GemmTallTile : isa.bf16GemmTile;

  const size_t r = op.batch.size();
  const int64_t aM = op.a.strides[r], aK = op.a.strides[r + 1], bK = op.b.strides[r], bN = op.b.strides[r + 1];
  // bf16 blocks of k start at even rows, where the weights' pairs start;
  // the tall tile's rows of a as pairs take half the room of f32, so it
  // takes twice as deep a block (one block for a transformer's k <= 1536).
  const int64_t kc = k > 0 ? blockSize(k, tall ? 2 * kKc : kKc, bf16 || widenPairs ? 2 : 1) : 0;
  // The tall tile over one block of k runs the epilogue tile by tile (no
  // accumulator block), so its items may be as wide as the weights.
  const bool tileByTile = tall && isa.bf16GemmTallTileFromRow && k > 0 && kc >= k;
  const int64_t maxNc = tileByTile ? kMaxNcTileByTile : kMaxNc;
  // Tile by tile: a bias per column (alpha 1) goes into the tiles' initial
  // sums; then, with no activation or residual left, whole tiles are
  // stored into c as they are.
  const int64_t cM = op.c.strides[r];
  const bool biasInTiles = tileByTile && op.bias && op.alpha == 1.0f &&
                           op.bias->strides[r] == 0 && op.bias->strides[r + 1] == 1;
  const bool tileIntoC = tileByTile && (!op.bias || biasInTiles) && op.alpha == 1.0f &&
                         op.activation == Activation::None && !op.residual && op.c.strides[r + 1] == 1;
  // Tile by tile, an item is one row tile over as many columns as the
  // threads allow: a row block of several tiles split along n across threads
  // had both pack its rows (items are claimed as threads come free), and one
  // not split left the threads uneven (17 blocks of 96 rows at m = 1576).
  // Where the item's weights outgrow L2, it takes as many row tiles as
  // aPack holds and walks them panel by panel: 197 x 768 x 3072 (ViT-B's
  // fc1 at batch 1) read its 4.7 MB of weights once per row tile before.
  const int64_t pairsOfK = (k + 1) / 2;
  const bool panelsOuter = tileByTile && pairsOfK * std::min(roundUp(n, nr), maxNc) *
                                                 static_cast<int64_t>(sizeof(uint32_t)) >
                                             kTileByTileWeightBytes;
  const int64_t maxMc = !tileByTile ? kMaxMc
                        : panelsOuter
                            ? std::max<int64_t>(tileMr, kAPackFloats / std::max<int64_t>(pairsOfK, 1) / tileMr * tileMr)
                            : tileMr;
  const GemmItems items = planGemmItems(m, n, batchCount, tileMr, nr, maxMc, maxNc, context.threads());
  PreparedRows::forgetAll(context);

  forEachGemmItem(context, items, batchCount, bf16 && !tileByTile, [&](int64_t item, int64_t nextItem, int thread) {
    const GemmItem it = gemmItem(op, items, item);
    const int64_t i0 = it.i0, j0 = it.j0, rows = it.rows, cols = it.cols, aOff = it.a, bOff = it.b;
    const PreparedRows prepared(context.threadScratch(thread));
    float *aPack = context.threadScratch(thread) + PreparedRows::kScratchFloats;
    float *bPack = aPack + kAPackFloats;
    float *acc = bPack + kKc * kMaxNr;
    const int64_t ldc = roundUp(cols, nr);
    if (k == 0) std::memset(acc, 0, sizeof(float) * static_cast<size_t>(roundUp(rows, mr) * ldc));
    for (int64_t p0 = 0; p0 < k; p0 += kc) {
      const int64_t depth = std::min(kc, k - p0);
      if (bf16) {
        // The block's rows of a as rows of bf16 pairs (in aPack's room; kept
        // for the thread's next item where k is one block), then the tile
        // over each weight panel's pairs from row p0 on.
        const int64_t pairs = (depth + 1) / 2;
        auto *aPairs = reinterpret_cast<uint32_t *>(aPack);
        // Where the block's rows over all of k fit in aPack, they are packed
        // once for every block of k (read from pair p0 / 2 on, lda pairs of
        // k apart) and kept for the thread's next item: a few rows' blocks
        // of k packed them again for every block and item (4% of 16
        // sequences' bf16 decode step).
        const bool wholeK = !tileByTile && roundUp(rows, tileMr) * pairsOfK <= kAPackFloats;
        const int64_t packDepth = wholeK ? k : depth, lda = (packDepth + 1) / 2;
        if (const int64_t rowBlock = PreparedRows::rowBlock(items, item);
            (depth < k && !wholeK) || !prepared.hold(rowBlock)) {
          for (int64_t ir = 0; ir < rows; ir += tileMr) {
            const float *from = a + aOff + (i0 + ir) * aM + (wholeK ? 0 : p0) * aK;
            const int64_t tileRows = std::min<int64_t>(tileMr, rows - ir);
            if (tileByTile)
              packPairSteps(isa, from, aM, aK, tileRows, depth, aPairs + ir * pairs);
            else
              isa.bf16PackRows(from, aM, aK, tileRows, packDepth, tileMr, aPairs + ir * lda, lda);
          }
          prepared.set(depth < k && !wholeK ? -1 : rowBlock);
        }
        const uint32_t *aBlock = aPairs + (wholeK ? p0 / 2 : 0);
        if (tileByTile) {
          // Row tile by row tile (its rows of a stay in L1 over every
          // panel of the item; panel by panel where the weights outgrow
          // L2), each tile into L1 and through the epilogue into c:
          // measured 5-20% faster than an accumulator block with one
          // epilogue at the end (BERT and ViT shapes, 1 thread, Sapphire
          // Rapids). The item's panels stay in L2 for its later row tiles;
          // prefetching the next one measured slower. A bias per column
          // starts the tiles' sums, and a whole tile with nothing else to
          // apply is stored straight into c: 4% off a BERT encoder's run (in
          // one process, alternating). Any other tile's epilogue runs beside
          // the next tile's steps (TileSideWork), from the other of two
          // tiles in L1: 1.02-1.06x on ViT-S fc1 (GELU) and projection
          // (residual) shapes alone, ViT-S b8 and BERT (8, 128) 1.01-1.06x.
          const float *biasRow = biasInTiles ? context.data<const float>(*op.bias) + it.bias + j0 : nullptr;
          float *cRows = context.data<float>(op.c) + it.c + i0 * cM + j0;
          float *tiles[2] = {bPack, bPack + tileMr * nr};
          int fill = 0;
          PendingEpilogue pending{op, context, it, nullptr, nr, 0, false};
          TileSideWork side{&PendingEpilogue::runPart, &pending, 0};
          const auto runTile = [&](int64_t ir, int64_t jr) {
            const bool wholePanel = jr + nr <= cols, direct = tileIntoC && wholePanel && ir + tileMr <= rows;
            float *out = direct ? cRows + ir * cM + jr : tiles[fill];
            const float *rowInit = biasRow && wholePanel ? biasRow + jr : nullptr;
            side.parts = pending.parts();
            isa.bf16GemmTallTileFromRow(pairs, aPairs + ir * pairs, packed->pairPanel(j0 + jr), rowInit, out,
                                        direct ? cM : nr, pending.rows > 0 ? &side : nullptr);
            pending.rows = 0;
            if (direct) return;
            pending.at.i0 = it.i0 + ir;
            pending.at.j0 = it.j0 + jr;
            pending.at.cols = std::min<int64_t>(nr, cols - jr);
            pending.tile = out;
            pending.rows = std::min<int64_t>(tileMr, rows - ir);
            pending.biasAdded = rowInit != nullptr;
            fill ^= 1;
          };
          if (panelsOuter)
            for (int64_t jr = 0; jr < cols; jr += nr)
              for (int64_t ir = 0; ir < rows; ir += tileMr) runTile(ir, jr);
          else
            for (int64_t ir = 0; ir < rows; ir += tileMr)
              for (int64_t jr = 0; jr < cols; jr += nr) runTile(ir, jr);
          if (pending.rows > 0) pending.runRows(0, pending.rows);
          return;
        }
        // Whole tiles, then a last short tile's rows (up to kGemvMaxRows)
        // by the gemv instead of padded to a tile (16 rows: 6 + 6 + 4), but
        // for the tall tile's rows of a matrix unit.
        const auto [wholeRows, rest, tiledRows, passes, restByGemv] = TilePasses(rows, tileMr, !tall);
        for (int64_t jr = 0; jr < cols; jr += nr) {
          const uint32_t *panel = packed->pairPanel(j0 + jr) + p0 / 2 * nr;
          // While this panel's pairs are used, each pass over them pulls a
          // slice of the next ones the thread reads into L2: the next
          // panel's, the first panel's of the next block of k, or the next
          // item's first (as the int8 gemm).
          int64_t nextColumn = j0 + jr + nr, nextRow = p0;
          if (jr + nr >= cols) {
            nextColumn = p0 + kc < k ? j0 : nextItem >= 0 ? gemmItem(op, items, nextItem).j0 : -1;
            nextRow = p0 + kc < k ? p0 + kc : 0;
          }
          const char *next = nullptr;
          int64_t slice = 0;
          if (nextColumn >= 0) {
            const int64_t nextPairs = (std::min(kc, k - nextRow) + 1) / 2;
            next = reinterpret_cast<const char *>(packed->pairPanel(nextColumn) + nextRow / 2 * nr);
            slice = roundUp(ceilDiv(nextPairs * nr * static_cast<int64_t>(sizeof(uint32_t)), passes), 64);
          }
          auto sliceOf = [&](int64_t pass) { return next ? next + pass * slice : nullptr; };
          for (int64_t ir = 0; ir < tiledRows; ir += tileMr)
            bf16Tile(pairs, aBlock + ir * lda, lda, panel, acc + ir * ldc + jr, ldc, p0 > 0, sliceOf(ir / tileMr),
                     slice);
          if (restByGemv)
            isa.bf16GemvPanel(static_cast<int>(rest), pairs, aBlock + wholeRows * lda, lda, panel,
                              acc + wholeRows * ldc + jr, ldc, p0 > 0, sliceOf(passes - 1), slice);
        }
        continue;
      }
      // Rows of a that are contiguous along k are read in place by the
      // register tiles; the others are packed, a whole tile's as its panel
      // (gemmTile), a short tile's as plain rows (gemmTileRowsUpTo).
      const bool aInPlace = aK == 1;
      const RowTiles tiles(rows, mr);
      if (!aInPlace)
        for (int64_t t = 0; t < tiles.count; ++t) {
          const int64_t ir = tiles.begin(t), tileRows = tiles.rows(t);
          const float *from = a + aOff + (i0 + ir) * aM + p0 * aK;
          if (tileRows == mr)
            packA(from, aM, aK, tileRows, depth, mr, aPack + ir * depth);
          else
            packRows(from, aM, aK, tileRows, depth, aPack + ir * depth);
        }
      for (int64_t jr = 0; jr < cols; jr += nr) {
        const float *panel;
        if (widenPairs) {
          // Widened once into bPack for every row tile of the item: the f32
          // tile at its own speed (widening in each tile cost 1.2-1.4x).
          isa.bf16WidenPairPanel(depth, packed->pairPanel(j0 + jr) + p0 / 2 * nr, bPack);
          panel = bPack;
        } else if (packed) {
          panel = packed->panel(j0 + jr) + p0 * nr;
        } else {
          const int64_t from = bOff + p0 * bK + (j0 + jr) * bN, width = std::min<int64_t>(nr, cols - jr);
          if (bIsBf16)
            packB(b16 + from, bK, bN, depth, width, nr, bPack);
          else
            packB(b + from, bK, bN, depth, width, nr, bPack);
          panel = bPack;
        }
        // While this panel is used, each row tile pulls a slice of the next
        // weight panel into L2.
        const char *next = nullptr;
        int64_t slice = 0;
        if (packed && jr + nr < cols) {
          const int64_t bytes = widenPairs ? (depth + 1) / 2 * nr * static_cast<int64_t>(sizeof(uint32_t))
                                           : depth * nr * static_cast<int64_t>(sizeof(float));
          next = widenPairs ? reinterpret_cast<const char *>(packed->pairPanel(j0 + jr + nr) + p0 / 2 * nr)
                            : reinterpret_cast<const char *>(packed->panel(j0 + jr + nr) + p0 * nr);
          slice = roundUp(ceilDiv(bytes, tiles.count), 64);
        }
        for (int64_t t = 0; t < tiles.count; ++t) {
          const int64_t ir = tiles.begin(t);
          const int tileRows = static_cast<int>(tiles.rows(t));
          const char *prefetch = next ? next + t * slice : nullptr;
          const float *rowsOfA = aInPlace ? a + aOff + (i0 + ir) * aM + p0 : aPack + ir * depth;
          const int64_t lda = aInPlace ? aM : depth;
          float *out = acc + ir * ldc + jr;
          if (tileRows < mr)
            isa.gemmTileRowsUpTo(tileRows, depth, rowsOfA, lda, panel, out, ldc, p0 > 0, prefetch, slice);
          else if (aInPlace)
            isa.gemmTileRows(depth, rowsOfA, lda, panel, out, ldc, p0 > 0, prefetch, slice);
          else
            isa.gemmTile(depth, aPack + ir * depth, panel, out, ldc, p0 > 0, prefetch, slice);
        }
      }
    }
    gemmEpilogueRows(op, context, it, 0, rows, acc, ldc);
  });
  return Status();
}

void prepackGemmWeights(Program &program, const bool *eligible, const IsaKernels *forIsa) {
  const IsaKernels &isa = forIsa ? *forIsa : bestKernels();
  const int nr = isa.gemmNr;
  for (size_t s = 0; s < program.steps.size(); ++s) {
    auto *op = std::get_if<Gemm>(&program.steps[s].kernel);
    if (!op || op->batch.product() * op->m * op->n * op->k == 0 || (eligible && !eligible[s])) continue;
    const Tensor &tensor = program.tensors[op->b.tensor];
    if (tensor.storage == Storage::Weights && op->bGroupScale) {
      // Verified as i4 or i8, one matrix for the batch, its scales a weight tensor (the loader).
      const Tensor &scales = program.tensors[op->bGroupScale->tensor];
      StatusOr<PackedMatrix> matrix =
          packGroupedWeights(*op, reinterpret_cast<const uint8_t *>(program.weights + tensor.offset),
                        reinterpret_cast<const uint16_t *>(program.weights + scales.offset), isa);
      if (!matrix.ok()) continue;  // the kernel packs as it goes instead
      op->packedB = static_cast<int32_t>(program.packed.size());
      program.packed.push_back(std::move(matrix).value());
      continue;
    }
    if (tensor.storage == Storage::Weights && tensor.dtype == DType::I8 && op->bScale) {
      // Verified as one matrix for the batch (the loader).
      StatusOr<PackedMatrix> matrix =
          packS8Weights(*op, reinterpret_cast<const int8_t *>(program.weights + tensor.offset), isa);
      if (!matrix.ok()) continue;  // the kernel packs as it goes instead
      op->packedB = static_cast<int32_t>(program.packed.size());
      program.packed.push_back(std::move(matrix).value());
      continue;
    }
    if (tensor.storage != Storage::Weights || (tensor.dtype != DType::F32 && tensor.dtype != DType::BF16)) continue;
    const size_t r = op->batch.size();
    bool shared = true;
    for (size_t axis = 0; axis < r; ++axis) shared &= op->b.strides[axis] == 0 || op->batch[axis] == 1;
    // Only matrices that do not repeat elements: packing then costs no more
    // than the weights' own size.
    if (!shared || op->k * op->n > tensor.numElements) continue;
    // bf16 weights stay bf16, as pairs: the bf16 gemm's operand where the
    // CPU has it, widened as they are read elsewhere (gemmF32Packed).
    const bool pairs = tensor.dtype == DType::BF16;
    const int64_t panels = ceilDiv(op->n, nr), rowsPerPanel = pairs ? (op->k + 1) / 2 : op->k;
    StatusOr<AlignedBuffer> buffer =
        AlignedBuffer::allocate(static_cast<size_t>(panels * rowsPerPanel * nr) * sizeof(float), "packed weights",
                                Pages::Huge);
    if (!buffer.ok()) continue;  // the kernel packs as it goes instead
    PackedMatrix matrix{std::move(buffer).value(), nr, op->k, op->n, pairs};
    const int64_t bK = op->b.strides[r], bN = op->b.strides[r + 1];
    const std::byte *base = program.weights + tensor.offset;
    for (int64_t panel = 0; panel < panels; ++panel) {
      const int64_t cols = std::min<int64_t>(nr, op->n - panel * nr), first = op->b.offset + panel * nr * bN;
      if (pairs)
        packBPairs(reinterpret_cast<const uint16_t *>(base) + first, bK, bN, op->k, cols, nr,
                   reinterpret_cast<uint32_t *>(matrix.data.data()) + panel * rowsPerPanel * nr);
      else if (tensor.dtype == DType::BF16)
        packB(reinterpret_cast<const uint16_t *>(base) + first, bK, bN, op->k, cols, nr,
              reinterpret_cast<float *>(matrix.data.data()) + panel * op->k * nr);
      else
        packB(reinterpret_cast<const float *>(base) + first, bK, bN, op->k, cols, nr,
              reinterpret_cast<float *>(matrix.data.data()) + panel * op->k * nr);
    }
    op->packedB = static_cast<int32_t>(program.packed.size());
    program.packed.push_back(std::move(matrix));
  }
}

// A gemm step: int8 and int4 weights (an int8 or int4 artifact's) on their
// kernels, f32 and bf16 ones on the packed one.
Status runStep(const Gemm &op, const KernelContext &context) {
  if (op.bGroupScale) return gemmGroupedDynamic(op, context);
  return op.bScale ? gemmS8Dynamic(op, context) : gemmF32Packed(op, context);
}
size_t stepScratchFloats(const Gemm &op) {
  if (op.bGroupScale) return gemmGroupedDynamicScratchFloats(op);
  return op.bScale ? gemmS8DynamicScratchFloats(op) : gemmF32PackedScratchFloats(op);
}

}  // namespace ein::detail::cpu
