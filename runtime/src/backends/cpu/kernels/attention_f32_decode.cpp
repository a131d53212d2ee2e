// Attention shaped for decoding (flash-decoding): a few queries per batch
// index (a generated token's query heads sharing a key head) against many
// keys (a key/value cache). The flash kernel's query tiles and packed key
// panels would pad a handful of queries to a register tile and copy every key
// and value once more than they are read; here each work item streams its
// keys and values once, where they lie, folding them block by block into
// each query's running max m, sum l and accumulator O (the online softmax,
// attention_tiles.hpp). When the batch indices are too few to keep every
// thread busy, each one's keys are split into ranges whose partial results
// are combined at the end:
//   M = max_s m_s,  L = sum_s l_s exp(m_s - M),  out = sum_s O_s exp(m_s - M) / L.
// Scores, masks, causal visibility and IEEE corner cases follow the flash
// kernel (and so the reference); the arithmetic is f32 also in a bf16
// artifact. A bf16 cache (bf16 and int8 artifacts) is read as it lies, each
// key and value widened to f32 in registers: half the bytes of an f32 cache
// stream past, and no copy of it is made. A paged cache (Attention::kPages)
// is read a block's run of rows at a time into the same block of scores.
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/kernels/attention_tiles.hpp"
#include "backends/cpu/kernels/flush_subnormals.hpp"
#include "backends/cpu/kernels/kernels.hpp"
#include "backends/cpu/kernels/strided_loop.hpp"

namespace ein::detail::cpu {
namespace {

constexpr int64_t kKeyBlock = 128;          // keys per online-softmax step: their scores stay in L1
constexpr int64_t kMinKeysPerSplit = 256;   // a range's keys: enough to outweigh combining its result
constexpr int64_t kPartialSlots = 4;        // partial results per thread's scratch (see splitsFor)

// Per-thread scratch, in floats, for `rows` queries: the thread's working
// rows, then kPartialSlots partial results (m, l, O) that any thread may
// write (a work item's slot is fixed by its index, not by who runs it).
struct DecodeScratch {
  int64_t qs, s, o, m, l, partials, partialFloats, total;
  DecodeScratch(int64_t rows, int64_t D, int64_t E) {
    qs = 0;
    s = qs + rows * D;
    o = s + rows * kKeyBlock;
    m = o + rows * E;
    l = m + rows;
    partials = l + rows;
    partialFloats = rows * (E + 2);
    total = partials + kPartialSlots * partialFloats;
  }
};

// Key ranges per batch index: one when the batch indices alone give every
// thread two items; else enough that they do, each range at least
// kMinKeysPerSplit keys. Then batch * splits < 4 * threads, so item `it`'s
// partial result fits slot it / threads of thread it % threads's scratch.
int64_t splitsFor(int64_t batch, int64_t visible, int threads) {
  if (batch >= 2 * threads) return 1;
  return std::clamp<int64_t>(std::min(ceilDiv(2 * threads, batch), visible / kMinKeysPerSplit), 1,
                             ceilDiv(2 * threads, batch));
}

}  // namespace

bool attentionF32DecodeApplies(const Attention &op) {
  const size_t r = op.batch.size();
  return op.queries <= kDecodeQueries && op.k.strides[r + 1] == 1 && op.v.strides[r + 1] == 1;
}

size_t attentionF32DecodeScratchFloats(const Attention &op) {
  // Saturating: a hostile size makes the allocation fail instead of wrapping.
  const auto rows = static_cast<unsigned __int128>(std::min<int64_t>(op.queries, kDecodeQueries));
  const unsigned __int128 total = rows * (static_cast<uint64_t>(op.headDim) + kKeyBlock + 2) +
                                  rows * static_cast<uint64_t>(op.valueDim) +
                                  kPartialSlots * rows * (static_cast<uint64_t>(op.valueDim) + 2);
  constexpr size_t kLimit = SIZE_MAX / 16;
  return total > kLimit ? kLimit : static_cast<size_t>(total);
}

Status attentionF32Decode(const Attention &op, const KernelContext &context) {
  const IsaKernels &isa = *context.isa;
  const int64_t I = op.queries, J = op.keys, D = op.headDim, E = op.valueDim;
  const int64_t batchCount = op.batch.product();
  if (batchCount * I * E == 0) return Status();
  if (!attentionF32DecodeApplies(op))
    return Status(StatusCode::Internal, "decode attention on more queries or other strides than it handles");
  const auto [q, k, v, out, mask] = attentionData(op, context);
  const auto [qI, qD, kJ, kD, vJ, vE, oI, oE, mI, mJ] = attentionStrides(op);  // kD = vE = 1
  const DecodeScratch layout(I, D, E);
  const int threads = context.threads();

  if (J == 0) {  // softmax over nothing: the weighted sum is empty
    for (int64_t b = 0; b < batchCount; ++b) {
      const int64_t oOff = offsetOfIndex(op.batch, op.out.strides, op.out.offset, b);
      for (int64_t t = 0; t < I; ++t)
        for (int64_t e = 0; e < E; ++e) out[oOff + t * oI + e * oE] = 0.0f;
    }
    return Status();
  }
  // Causal: no query sees past keyEnd.
  int64_t keyEnd = 0;
  for (int64_t t = 0; t < I; ++t) keyEnd = std::max(keyEnd, op.visibleKeys(t));
  const int64_t splits = splitsFor(batchCount, keyEnd, threads);
  const int64_t rangeKeys = ceilDiv(keyEnd, splits);
  auto partialOf = [&](int64_t item) {
    return context.threadScratch(static_cast<int>(item % threads)) + layout.partials +
           item / threads * layout.partialFloats;
  };

  context.parallelFor(batchCount * splits, [&](int64_t item, int thread) {
    const FlushSubnormalsScope flush;
    const int64_t b = item / splits, begin = item % splits * rangeKeys, end = std::min(keyEnd, begin + rangeKeys);
    float *scratch = context.threadScratch(thread);
    float *qs = scratch + layout.qs, *s = scratch + layout.s, *o = scratch + layout.o, *m = scratch + layout.m,
          *l = scratch + layout.l;
    const int64_t kOff = offsetOfIndex(op.batch, op.k.strides, op.k.offset, b);
    const int64_t vOff = offsetOfIndex(op.batch, op.v.strides, op.v.offset, b);
    const int64_t mOff = op.mask ? offsetOfIndex(op.batch, op.mask->strides, op.mask->offset, b) : 0;
    scaleQueries(isa, q + offsetOfIndex(op.batch, op.q.strides, op.q.offset, b), qI, qD, I, I, D, op.scale, qs);
    std::fill(o, o + I * E, 0.0f);
    std::fill(m, m + I, -std::numeric_limits<float>::infinity());
    std::fill(l, l + I, 0.0f);
    for (int64_t j0 = begin; j0 < end; j0 += kKeyBlock) {
      const int64_t count = std::min(kKeyBlock, end - j0);
      // A paged cache's block of keys at a time (one run where the keys lie a stride apart).
      forEachRowRun(op.kPages, kJ, j0, count, [&](int64_t at, int64_t n, int64_t offset) {
        if (op.bf16KeyValues)
          isa.rowDotsBf16(qs, D, I, static_cast<const uint16_t *>(k) + kOff + offset, kJ, n, D, s + at, kKeyBlock);
        else
          isa.rowDots(qs, D, I, static_cast<const float *>(k) + kOff + offset, kJ, n, D, s + at, kKeyBlock);
      });
      // Whole vectors for the row's max and exp: the columns past the block's
      // last key become -inf, adding nothing.
      const int64_t width = std::min(roundUp(count, isa.vectorFloats), kKeyBlock);
      for (int64_t t = 0; t < I; ++t) {
        float *row = s + t * kKeyBlock;
        if (op.softcap > 0.0f) isa.softcapInPlace(row, count, op.softcap);
        std::fill(row + count, row + width, -std::numeric_limits<float>::infinity());
        maskKeys(isa, op.maskKind, row, count, mask, mOff + t * mI + j0 * mJ, mJ, op.maskFill);
        const int64_t hidden = j0 + count - op.visibleKeys(t);  // causal: the block's last keys
        if (hidden > 0)
          std::fill(row + std::max<int64_t>(count - hidden, 0), row + count, -std::numeric_limits<float>::infinity());
        foldScoresIntoRow(isa, row, width, m[t], l[t], o + t * E, E);
      }
      forEachRowRun(op.vPages, vJ, j0, count, [&](int64_t at, int64_t n, int64_t offset) {
        if (op.bf16KeyValues)
          isa.addRowProductsBf16(s + at, kKeyBlock, I, static_cast<const uint16_t *>(v) + vOff + offset, vJ, n, E, o, E);
        else
          isa.addRowProducts(s + at, kKeyBlock, I, static_cast<const float *>(v) + vOff + offset, vJ, n, E, o, E);
      });
    }
    if (splits == 1) {
      const int64_t oOff = offsetOfIndex(op.batch, op.out.strides, op.out.offset, b);
      for (int64_t t = 0; t < I; ++t) storeAttentionRow(o + t * E, E, l[t], out + oOff + t * oI, oE);
      return;
    }
    float *partial = partialOf(item);
    std::copy(m, m + I, partial);
    std::copy(l, l + I, partial + I);
    std::copy(o, o + I * E, partial + 2 * I);
  });
  if (splits == 1) return Status();

  // Each query row: its ranges' results rescaled to their common max.
  context.parallelFor(batchCount * I, [&](int64_t row, int thread) {
    const int64_t b = row / I, t = row % I;
    float maxScore = -std::numeric_limits<float>::infinity();
    for (int64_t split = 0; split < splits; ++split) {
      const float m = partialOf(b * splits + split)[t];
      maxScore = std::isnan(m) || std::isnan(maxScore) ? std::numeric_limits<float>::quiet_NaN()
                                                       : std::max(maxScore, m);
    }
    float *o = context.threadScratch(thread) + layout.o;
    std::fill(o, o + E, 0.0f);
    float sum = 0.0f;
    if (std::isnan(maxScore)) {
      std::fill(o, o + E, std::numeric_limits<float>::quiet_NaN());
      sum = 1.0f;
    } else if (maxScore != -std::numeric_limits<float>::infinity()) {  // else every score is -inf: l = 0
      for (int64_t split = 0; split < splits; ++split) {
        const float *partial = partialOf(b * splits + split);
        if (partial[t] == -std::numeric_limits<float>::infinity()) continue;  // its keys all hidden
        const float weight = std::exp(partial[t] - maxScore);
        sum += partial[I + t] * weight;
        isa.addScaled(o, partial + 2 * I + t * E, E, weight);
      }
    }
    const int64_t oOff = offsetOfIndex(op.batch, op.out.strides, op.out.offset, b);
    storeAttentionRow(o, E, sum, out + oOff + t * oI, oE);
  });
  return Status();
}

}  // namespace ein::detail::cpu
