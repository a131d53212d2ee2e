// Flash attention (Dao et al. 2022) on the CPU. A work item is one batch
// index and a tile of queries; it walks the keys in blocks, computing the
// block's scores as a small gemm (queries x keys, through the ISA's register
// tile), masking them, and folding them into each query's running max m,
// running sum l and output accumulator O with the online softmax:
//   m' = max(m, max_j s_j),  O = O * exp(m - m') + sum_j exp(s_j - m') v_j,
//   l = l * exp(m - m') + sum_j exp(s_j - m')
// and finally out = O / l. Memory is O(keys) per thread: the keys (transposed
// into the gemm's column panels) and values of the batch index being worked
// on, packed once per thread and reused by its next items of that index.
//
// IEEE corner cases follow the reference: a row whose scores are all -inf
// has l == 0 and gives NaN; a NaN score makes the max NaN, +inf makes
// exp(inf - inf) NaN, and either way the row is NaN.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/kernels/attention_tiles.hpp"
#include "backends/cpu/kernels/flush_subnormals.hpp"
#include "backends/cpu/kernels/kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"

namespace ein::detail::cpu {
namespace {

constexpr int64_t kQueryTile = 64;    // queries per work item (a multiple of amx's 32-row bf16 tile)
constexpr int64_t kKeyBlock = 256;    // keys per online-softmax step, a multiple of every nr
// The block's scores' row stride: a line past the block, so that the 16 rows
// a tile stores are not 1 KB apart (rows four apart shared L1 sets).
constexpr int64_t kScoreStride = kKeyBlock + 16;
constexpr int64_t kMaxMr = 8, kMaxNr = 64;  // the largest register tile of any ISA
constexpr int64_t kMaxPairStep = 16;        // the largest bf16GemmTallPairStep of any ISA

// Per-thread scratch, in floats (a bf16 pair takes one), for a register tile
// of mr x nr whose bf16 operands are padded to pairStep pairs.
struct FlashScratch {
  int64_t keysPad, valuesPad, rowsPad, dPairs, dPairsPad, jPairsPad;
  int64_t kt, v, q, s, o, m, l, bp, keyRows, total;
  FlashScratch(const Attention &op, int64_t mr, int64_t nr, int64_t pairStep) {
    keysPad = roundUp(op.keys, nr);
    valuesPad = roundUp(op.valueDim, nr);
    rowsPad = roundUp(kQueryTile, mr);
    dPairs = (op.headDim + 1) / 2;
    dPairsPad = roundUp(dPairs, pairStep);
    jPairsPad = roundUp((op.keys + 1) / 2, pairStep);
    kt = kPackedTagFloats;
    v = kt + keysPad * std::max(op.headDim, dPairsPad);
    q = v + std::max(op.keys, jPairsPad) * valuesPad;
    s = q + rowsPad * op.headDim;
    o = s + rowsPad * kScoreStride;
    m = o + rowsPad * valuesPad;
    l = m + rowsPad;
    bp = l + rowsPad;  // the bf16 path's pairs: p [rowsPad][128], then q [rowsPad][dPairsPad]
    keyRows = bp + rowsPad * (kKeyBlock / 2 + dPairsPad);  // a panel of keys as rows of pairs, [nr][dPairs]
    total = keyRows + nr * dPairs;
  }
};

}  // namespace

size_t attentionF32FlashScratchFloats(const Attention &op) {
  // FlashScratch's total for any ISA, bounded above and saturating: a
  // hostile size makes the allocation fail instead of wrapping.
  const unsigned __int128 keysPad = static_cast<unsigned __int128>(op.keys) + kMaxNr;
  const unsigned __int128 valuesPad = static_cast<unsigned __int128>(op.valueDim) + kMaxNr;
  const unsigned __int128 rowsPad = kQueryTile + kMaxMr;
  const unsigned __int128 headDim = static_cast<unsigned __int128>(op.headDim) + kMaxPairStep;
  const unsigned __int128 keys = static_cast<unsigned __int128>(op.keys) + 2 * kMaxPairStep;
  const unsigned __int128 total = kPackedTagFloats + keysPad * headDim + keys * valuesPad + rowsPad * headDim +
                                  rowsPad * kScoreStride + rowsPad * valuesPad + 2 * rowsPad +
                                  rowsPad * (kKeyBlock / 2 + headDim) + kMaxNr * headDim;
  constexpr size_t kLimit = SIZE_MAX / 16;
  return total > kLimit ? kLimit : static_cast<size_t>(total);
}

Status attentionF32Flash(const Attention &op, const KernelContext &context) {
  const IsaKernels &isa = *context.isa;
  const int64_t I = op.queries, J = op.keys, D = op.headDim, E = op.valueDim;
  const int64_t batchCount = op.batch.product();
  if (batchCount * I * E == 0) return Status();
  const auto [q, k, v, out, mask] = attentionData(op, context);
  const auto [qI, qD, kJ, kD, vJ, vE, oI, oE, mI, mJ] = attentionStrides(op);
  // A bf16 artifact on a CPU with the bf16 gemm: keys, values, the scaled
  // queries and the probabilities are rounded to bf16 as they are packed,
  // q . k and p . v run on the bf16 tile (f32 accumulation: the taller
  // bf16GemmTallTile where the table has one, amx's 32 rows); the softmax,
  // its running max and sum, and the output stay f32. A bf16 cache's keys
  // and values are packed from their bf16 bits (widened to f32 on the f32
  // path).
  const bool bf16 = op.bf16 && isa.bf16GemmTile;
  const bool tall = bf16 && isa.bf16GemmTallTile;
  const auto bf16FullTile = tall ? isa.bf16GemmTallTile : isa.bf16GemmTile;
  // A tile whose columns past `columns` are not needed (the last keys' or
  // values' panel): only the tile's first half where the table has one.
  auto bf16Tile = [&, halfTile = tall ? isa.bf16GemmTallHalfTile : nullptr](
                      int64_t columns, int64_t pairs, const uint32_t *a, int64_t lda, const uint32_t *b, float *c,
                      int64_t ldc, bool accumulate) {
    if (halfTile && 2 * columns <= isa.gemmNr) halfTile(pairs, a, lda, b, c, ldc, accumulate);
    else bf16FullTile(pairs, a, lda, b, c, ldc, accumulate, nullptr, 0);
  };
  const int mr = tall ? isa.bf16GemmTallMr : isa.gemmMr, nr = isa.gemmNr;
  // The tall tile's operands padded with zero pairs to its k step (amx: 16
  // pairs), so no tile ends in its slow tail: the scaled queries and keys
  // to dPairsPad, each block's probabilities and the values to `pairStep`.
  const int64_t pairStep = tall ? isa.bf16GemmTallPairStep : 1;
  if (pairStep > kMaxPairStep)
    return Status(StatusCode::Internal, "attention: the bf16 tile's pair step exceeds the scratch bound");
  const FlashScratch layout(op, mr, nr, pairStep);
  // Query tiles of equal size, each a whole number of register tiles.
  const int64_t queryTile = blockSize(I, kQueryTile, mr);
  const int64_t tiles = ceilDiv(I, queryTile);
  const int64_t dPairs = layout.dPairs, dPairsPad = layout.dPairsPad, jPairsPad = layout.jPairsPad;
  for (int thread = 0; thread < context.threads(); ++thread) setPackedIndex(context.threadScratch(thread), -1);

  auto tile = [&](int64_t item, int thread) {
    const int64_t b = item / tiles, i0 = item % tiles * queryTile, rows = std::min(queryTile, I - i0);
    const int64_t rowsPad = roundUp(rows, mr);
    float *scratch = context.threadScratch(thread);
    float *kt = scratch + layout.kt, *vp = scratch + layout.v, *qs = scratch + layout.q, *s = scratch + layout.s,
          *o = scratch + layout.o, *m = scratch + layout.m, *l = scratch + layout.l;
    const int64_t qOff = offsetOfIndex(op.batch, op.q.strides, op.q.offset, b);
    const int64_t oOff = offsetOfIndex(op.batch, op.out.strides, op.out.offset, b);
    const int64_t mOff = op.mask ? offsetOfIndex(op.batch, op.mask->strides, op.mask->offset, b) : 0;
    const int64_t ldo = layout.valuesPad;

    if (J == 0) {  // softmax over nothing: the weighted sum is empty
      for (int64_t t = 0; t < rows; ++t)
        for (int64_t e = 0; e < E; ++e) out[oOff + (i0 + t) * oI + e * oE] = 0.0f;
      return;
    }
    auto *pp = reinterpret_cast<uint32_t *>(scratch + layout.bp), *qp = pp + layout.rowsPad * (kKeyBlock / 2);
    auto *keyRows = reinterpret_cast<uint32_t *>(scratch + layout.keyRows);
    if (packedIndex(scratch) != b) {
      const int64_t kOff = offsetOfIndex(op.batch, op.k.strides, op.k.offset, b);
      const int64_t vOff = offsetOfIndex(op.batch, op.v.strides, op.v.offset, b);
      // Keys and values of type T (f32, or a bf16 cache) into the panels.
      auto pack = [&](const auto *keys, const auto *values) {
        const KeyRows keyRowsOf{keys + kOff, kJ, op.kPages};
        const KeyRows valueRowsOf{values + vOff, vJ, op.vPages};
        if (bf16) {
          packKeyPairs(isa, keyRowsOf, kD, J, D, nr, dPairsPad, reinterpret_cast<uint32_t *>(kt), keyRows);
          packValuePairs(isa, valueRowsOf, vE, J, E, nr, jPairsPad, reinterpret_cast<uint32_t *>(vp));
        } else {
          packKeys(keyRowsOf, kD, J, D, nr, kt);
          packValues(valueRowsOf, vE, J, E, nr, vp);
        }
      };
      if (op.bf16KeyValues)
        pack(static_cast<const uint16_t *>(k), static_cast<const uint16_t *>(v));
      else
        pack(static_cast<const float *>(k), static_cast<const float *>(v));
      setPackedIndex(scratch, b);
    }
    // The query tile, pre-scaled, as plain rows (rows past the tile are 0);
    // for bf16, then as pairs in register-tile panels.
    scaleQueries(isa, q + qOff + i0 * qI, qI, qD, rows, rowsPad, D, op.scale, qs);
    if (bf16)
      for (int64_t ir = 0; ir < rowsPad; ir += mr) {
        isa.bf16PackRows(qs + ir * D, D, 1, mr, D, mr, qp + ir * dPairsPad, dPairsPad);
        for (int64_t r = ir; r < ir + mr; ++r) std::fill(qp + r * dPairsPad + dPairs, qp + (r + 1) * dPairsPad, 0u);
      }
    std::fill(m, m + rowsPad, -std::numeric_limits<float>::infinity());
    std::fill(l, l + rowsPad, 0.0f);

    // Causal: key blocks past what any row of the tile sees are skipped.
    int64_t keyEnd = 0;
    for (int64_t t = 0; t < rows; ++t) keyEnd = std::max(keyEnd, op.visibleKeys(i0 + t));
    // The first block's p . v writes O (no zeros to add to) unless no block runs.
    if (keyEnd == 0) std::fill(o, o + rowsPad * ldo, 0.0f);
    for (int64_t j0 = 0; j0 < keyEnd; j0 += kKeyBlock) {
      const int64_t keys = std::min(kKeyBlock, J - j0);
      // s[t, j] = q_t . k_j for the block (bf16: whole panels, the last one's
      // padded keys scoring 0 past `keys`, which the row ignores).
      if (bf16) {
        const uint32_t *kp = reinterpret_cast<const uint32_t *>(kt) + j0 * dPairsPad;
        for (int64_t jr = 0; jr < keys; jr += nr)
          for (int64_t ir = 0; ir < rowsPad; ir += mr)
            bf16Tile(keys - jr, dPairsPad, qp + ir * dPairsPad, dPairsPad, kp + jr * dPairsPad,
                     s + ir * kScoreStride + jr, kScoreStride, false);
      } else {
        keyScores(isa, qs, rowsPad, D, kt + j0 * D, keys, s, kScoreStride);
      }
      // The row's softmax runs over whole vectors, and in bf16 over the
      // block's pairs padded to pairStep: the columns past the last key
      // (scores of zero-padded keys) become -inf, adding nothing.
      const int64_t pairs = roundUp((keys + 1) / 2, pairStep);
      const int64_t width = std::min(std::max(roundUp(keys, isa.vectorFloats), bf16 ? 2 * pairs : 0), kKeyBlock);
      // bf16: each row's probabilities go straight to its pairs, `pairs` of
      // them over the first 2 * pairs columns (the rest are -inf, 0 after
      // exp); the rows past the tile's are zero.
      if (bf16) std::fill(pp + rows * pairs, pp + rowsPad * pairs, 0u);
      for (int64_t t = 0; t < rows; ++t) {
        float *row = s + t * kScoreStride;
        if (op.softcap > 0.0f) isa.softcapInPlace(row, keys, op.softcap);
        std::fill(row + keys, row + width, -std::numeric_limits<float>::infinity());
        maskKeys(isa, op.maskKind, row, keys, mask, mOff + (i0 + t) * mI + j0 * mJ, mJ, op.maskFill);
        const int64_t hidden = j0 + keys - op.visibleKeys(i0 + t);  // causal: the block's last keys
        if (hidden > 0)
          std::fill(row + std::max<int64_t>(keys - hidden, 0), row + keys, -std::numeric_limits<float>::infinity());
        if (bf16)
          foldScoresIntoRow(isa, row, 2 * pairs, m[t], l[t], o + t * ldo, ldo, pp + t * pairs);
        else
          foldScoresIntoRow(isa, row, width, m[t], l[t], o + t * ldo, ldo);
      }
      // O += p . v for the block (f32: rows past the tile hold finite junk).
      if (bf16) {
        const uint32_t *values = reinterpret_cast<const uint32_t *>(vp) + j0 / 2 * nr;
        for (int64_t e0 = 0; e0 < E; e0 += nr)
          for (int64_t ir = 0; ir < rowsPad; ir += mr)
            bf16Tile(E - e0, pairs, pp + ir * pairs, pairs, values + e0 * jPairsPad, o + ir * ldo + e0, ldo,
                     j0 > 0);
        continue;
      }
      for (int64_t e0 = 0; e0 < E; e0 += nr)
        for (int64_t ir = 0; ir < rowsPad; ir += mr)
          isa.gemmTileRows(keys, s + ir * kScoreStride, kScoreStride, vp + e0 * J + j0 * nr, o + ir * ldo + e0, ldo,
                           j0 > 0, nullptr, 0);
    }
    for (int64_t t = 0; t < rows; ++t) storeAttentionRow(o + t * ldo, E, l[t], out + oOff + (i0 + t) * oI, oE);
  };
  // With enough batch indices (heads) to go round, each thread takes whole
  // indices, so their keys and values are packed once; otherwise the query
  // tiles are spread too.
  // Each work item flushes subnormals (masked keys' tiny weights) to 0.
  if (batchCount >= 2 * context.threads() || tiles == 1)
    context.parallelFor(batchCount, [&](int64_t b, int thread) {
      const FlushSubnormalsScope flush;
      for (int64_t t = 0; t < tiles; ++t) tile(b * tiles + t, thread);
    });
  else
    context.parallelFor(batchCount * tiles, [&](int64_t item, int thread) {
      const FlushSubnormalsScope flush;
      tile(item, thread);
    });
  return Status();
}

// An attention step: a decode step's few queries against a long cache, or
// any other attention, flash. Scratch for either, and for the reference
// kernel's scores in doubles.
Status runStep(const Attention &op, const KernelContext &context) {
  return attentionF32DecodeApplies(op) ? attentionF32Decode(op, context) : attentionF32Flash(op, context);
}
size_t stepScratchFloats(const Attention &op) {
  return std::max({doublesAsFloats(static_cast<uint64_t>(op.keys)), attentionF32FlashScratchFloats(op),
                   attentionF32DecodeScratchFloats(op)});
}

}  // namespace ein::detail::cpu
