// Talking-heads attention, fast path. The softmax of one head depends on
// the scores of every head (pre-mix) and each output head on the
// probabilities of every head (post-mix), so a work item is one batch index
// and a small tile of queries with all heads together: it computes the
// scores of every head against all keys (per head a gemm through the ISA's
// register tile), mixes them across heads, masks, takes exact softmaxes,
// mixes again and multiplies by the values. Memory per thread is
// O(heads x tile x keys): linear in the sequence length.
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

constexpr int64_t kQueryTile = 16;  // queries per work item (padded to the ISA's mr)
constexpr int64_t kMaxMr = 8, kMaxNr = 64;

// Per-thread scratch, in floats: which batch index is packed, every head's
// packed keys and values (packed once per thread and batch index, as in
// flash attention), the query tile, two [heads][rowsPad][keysPad] score
// tables and an output tile.

struct TalkingScratch {
  int64_t keysPad, valuesPad, rowsPad, table, headKeys, headValues;
  int64_t kt, v, q, a, b, o, total;
  TalkingScratch(const TalkingHeadsAttention &op, int64_t mr, int64_t nr) {
    keysPad = roundUp(op.keys, nr);
    valuesPad = roundUp(op.valueDim, nr);
    rowsPad = roundUp(kQueryTile, mr);
    table = op.heads * rowsPad * keysPad;
    headKeys = keysPad * op.headDim;
    headValues = op.keys * valuesPad;
    kt = kPackedTagFloats;
    v = kt + op.heads * headKeys;
    q = v + op.heads * headValues;
    a = q + rowsPad * op.headDim;
    b = a + table;
    o = b + table;
    total = o + rowsPad * valuesPad;
  }
};

}  // namespace

size_t talkingHeadsAttentionF32FastScratchFloats(const TalkingHeadsAttention &op) {
  using U = unsigned __int128;
  const U keysPad = U(static_cast<uint64_t>(op.keys)) + kMaxNr, valuesPad = U(static_cast<uint64_t>(op.valueDim)) + kMaxNr;
  const U rowsPad = kQueryTile + kMaxMr, heads = static_cast<uint64_t>(op.heads), d = static_cast<uint64_t>(op.headDim);
  const U total = kPackedTagFloats + heads * (keysPad * d + U(static_cast<uint64_t>(op.keys)) * valuesPad) + rowsPad * d +
                  2 * heads * rowsPad * keysPad + rowsPad * valuesPad;
  constexpr size_t kLimit = SIZE_MAX / 16;
  return total > kLimit ? kLimit : static_cast<size_t>(total);
}

Status talkingHeadsAttentionF32Fast(const TalkingHeadsAttention &op, const KernelContext &context) {
  const IsaKernels &isa = *context.isa;
  const int64_t H = op.heads, I = op.queries, J = op.keys, D = op.headDim, E = op.valueDim;
  const int64_t batchCount = op.batch.product();
  if (batchCount * H * I * E == 0) return Status();
  const float *q = context.data<const float>(op.q);
  const float *k = context.data<const float>(op.k);
  const float *v = context.data<const float>(op.v);
  float *out = context.data<float>(op.out);
  const void *mask = op.mask ? static_cast<const void *>(context.bases[op.mask->tensor]) : nullptr;
  const size_t r = op.batch.size();
  const int64_t qH = op.q.strides[r], qI = op.q.strides[r + 1], qD = op.q.strides[r + 2];
  const int64_t kH = op.k.strides[r], kJ = op.k.strides[r + 1], kD = op.k.strides[r + 2];
  const int64_t vH = op.v.strides[r], vJ = op.v.strides[r + 1], vE = op.v.strides[r + 2];
  const int64_t oH = op.out.strides[r], oI = op.out.strides[r + 1], oE = op.out.strides[r + 2];
  const int64_t mH = op.mask ? op.mask->strides[r] : 0, mI = op.mask ? op.mask->strides[r + 1] : 0,
                mJ = op.mask ? op.mask->strides[r + 2] : 0;
  const int mr = isa.gemmMr, nr = isa.gemmNr;
  const TalkingScratch layout(op, mr, nr);
  // Score tables hold whole vectors of keys (197 keys: 208 columns, not the
  // 256 of whole register tiles), so mixing and softmax skip the padding.
  const int64_t ldS = roundUp(J, isa.vectorFloats), headTable = layout.rowsPad * ldS, ldo = layout.valuesPad;
  // Query tiles of equal size, each a whole number of register tiles.
  const int64_t queryTile = blockSize(I, kQueryTile, mr);
  const int64_t tiles = ceilDiv(I, queryTile);

  // to[g] = bias[g] + sum_h matrix[g, h] * from[h] over the first `count`
  // floats ([rowsPad][ldS]) of each head's table.
  auto mix = [&](const View &matrix, const std::optional<View> &bias, const float *from, float *to, int64_t count) {
    const float *w = context.data<const float>(matrix) + matrix.offset;
    const float *bv = bias ? context.data<const float>(*bias) + bias->offset : nullptr;
    for (int64_t g = 0; g < H; ++g)
      isa.weightedSum(to + g * headTable, from, headTable, H, w + g * matrix.strides[0], matrix.strides[1],
                      bv ? bv[g * bias->strides[0]] : 0.0f, count);
  };

  for (int thread = 0; thread < context.threads(); ++thread) setPackedIndex(context.threadScratch(thread), -1);

  context.parallelFor(batchCount * tiles, [&](int64_t item, int thread) {
    const FlushSubnormalsScope flush;  // masked keys' tiny weights become 0, not slow subnormals
    const int64_t b = item / tiles, i0 = item % tiles * queryTile, rows = std::min(queryTile, I - i0);
    const int64_t rowsPad = roundUp(rows, mr);
    float *scratch = context.threadScratch(thread);
    float *kt = scratch + layout.kt, *vp = scratch + layout.v, *qs = scratch + layout.q, *tableA = scratch + layout.a,
          *tableB = scratch + layout.b, *o = scratch + layout.o;
    const int64_t qOff = offsetOfIndex(op.batch, op.q.strides, op.q.offset, b);
    const int64_t kOff = offsetOfIndex(op.batch, op.k.strides, op.k.offset, b);
    const int64_t vOff = offsetOfIndex(op.batch, op.v.strides, op.v.offset, b);
    const int64_t oOff = offsetOfIndex(op.batch, op.out.strides, op.out.offset, b);
    const int64_t mOff = op.mask ? offsetOfIndex(op.batch, op.mask->strides, op.mask->offset, b) : 0;

    if (packedIndex(scratch) != b) {
      // Without keys there is nothing to pack, and k and v may be empty
      // tensors without memory: no pointer into them is formed.
      for (int64_t h = 0; h < H && J > 0; ++h) {
        packKeys(KeyRows{k + kOff + h * kH, kJ}, kD, J, D, nr, kt + h * layout.headKeys);
        packValues(KeyRows{v + vOff + h * vH, vJ}, vE, J, E, nr, vp + h * layout.headValues);
      }
      setPackedIndex(scratch, b);
    }
    // Scores of every head: tableA[h][t][j] = scale * q_t . k_j (0 past the keys and rows).
    for (int64_t h = 0; h < H; ++h) {
      scaleQueries(isa, q + qOff + h * qH + i0 * qI, qI, qD, rows, rowsPad, D, op.scale, qs);
      keyScores(isa, qs, rowsPad, D, kt + h * layout.headKeys, J, tableA + h * headTable, ldS);
    }
    float *logits = tableA;
    if (op.preMix) {
      mix(*op.preMix, op.preBias, tableA, tableB, rowsPad * ldS);
      logits = tableB;
    }
    // Mask and exact softmax over the keys of each head and query, over
    // whole vectors: the columns past the last key become -inf, adding nothing.
    for (int64_t g = 0; g < H; ++g)
      for (int64_t t = 0; t < rows; ++t) {
        float *row = logits + g * headTable + t * ldS;
        std::fill(row + J, row + ldS, -std::numeric_limits<float>::infinity());
        maskKeys(isa, op.maskKind, row, J, mask, mOff + g * mH + (i0 + t) * mI, mJ, op.maskFill);
        const float max = isa.reduceRow(row, ldS, ReduceKind::Max);
        const float sum = isa.expShiftSum(row, ldS, max);
        isa.scaleInPlace(row, ldS, 1.0f / sum);
      }
    float *probs = logits;
    if (op.postMix) {
      probs = logits == tableA ? tableB : tableA;
      mix(*op.postMix, op.postBias, logits, probs, rowsPad * ldS);
    }
    // out[g] = probs[g] . v[g].
    for (int64_t g = 0; g < H; ++g) {
      for (int64_t e0 = 0; e0 < E; e0 += nr)
        for (int64_t ir = 0; ir < rowsPad; ir += mr)
          isa.gemmTileRows(J, probs + g * headTable + ir * ldS, ldS, vp + g * layout.headValues + e0 * J, o + ir * ldo + e0,
                           ldo, false, nullptr, 0);
      for (int64_t t = 0; t < rows; ++t)
        for (int64_t e = 0; e < E; ++e) out[oOff + g * oH + (i0 + t) * oI + e * oE] = o[t * ldo + e];
    }
  });
  return Status();
}

Status runStep(const TalkingHeadsAttention &op, const KernelContext &context) {
  return talkingHeadsAttentionF32Fast(op, context);
}
// With room for the reference kernel's scores and mixed scores in doubles.
size_t stepScratchFloats(const TalkingHeadsAttention &op) {
  return std::max(doublesAsFloats(static_cast<unsigned __int128>(2) * static_cast<uint64_t>(op.heads) *
                                  static_cast<uint64_t>(op.keys)),
                  talkingHeadsAttentionF32FastScratchFloats(op));
}

}  // namespace ein::detail::cpu
