// The pieces both fast attention kernels (flash and talking heads) are built
// from (and the decode kernel's): the per-thread scratch tag, packing keys
// and values into the register tile's panels, scaling a query tile, a tile's
// scores against a run of keys, masking a row of scores, the online softmax's
// step and a finished row's store.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ein/half_float.hpp"
#include "backends/cpu/kernels/attention_mask.hpp"
#include "backends/cpu/kernels/blocking.hpp"
#include "backends/cpu/kernels/element_io.hpp"
#include "backends/cpu/kernels/kernels.hpp"

namespace ein::detail::cpu {

// An attention step's operands at run time: the data of q, k, v, out and the
// mask (null without one), and the strides of each one's two inner axes.
// k and v are f32, or bf16 with op.bf16KeyValues (KeyValue<T> reads them).
struct AttentionData {
  const float *q;
  const void *k, *v;
  float *out;
  const void *mask;
};
inline AttentionData attentionData(const Attention &op, const KernelContext &context) {
  return {context.data<const float>(op.q), context.bases[op.k.tensor], context.bases[op.v.tensor],
          context.data<float>(op.out), op.mask ? static_cast<const void *>(context.bases[op.mask->tensor]) : nullptr};
}

struct AttentionStrides {
  int64_t qI, qD, kJ, kD, vJ, vE, oI, oE, mI, mJ;
};
inline AttentionStrides attentionStrides(const Attention &op) {
  const size_t r = op.batch.size();
  return {op.q.strides[r],   op.q.strides[r + 1],   op.k.strides[r],
          op.k.strides[r + 1], op.v.strides[r],     op.v.strides[r + 1],
          op.out.strides[r], op.out.strides[r + 1], op.mask ? op.mask->strides[r] : 0,
          op.mask ? op.mask->strides[r + 1] : 0};
}

// A thread's scratch starts with a tag: the batch index whose keys and values
// are packed there (-1: none), so its next tile of that index reuses them.
inline constexpr int64_t kPackedTagFloats = 16;
inline int64_t packedIndex(const float *scratch) {
  int64_t index;
  std::memcpy(&index, scratch, sizeof index);
  return index;
}
inline void setPackedIndex(float *scratch, int64_t index) { std::memcpy(scratch, &index, sizeof index); }

// Row j of one batch index's keys or values: `stride` elements apart from
// `first`, or, in a paged cache, where its block keeps it (`first` is then
// the batch index's offset within a block).
template <class T>
struct KeyRows {
  const T *first;
  int64_t stride;
  RowPages pages = {};  // without blocks: not paged
  const T *row(int64_t j) const { return first + pages.offsetOf(j, stride); }
  // Whether rows [j, j + n) lie `stride` apart (within one block).
  bool evenlySpaced(int64_t j, int64_t n) const { return pages.rowsInBlockFrom(j) >= n; }
};

// Calls run(at, n, offset) over rows [begin, begin + count) of a view, in
// runs of rows `stride` apart (one unless paged): `at` counts from begin,
// `offset` is row begin + at's element offset.
template <class Run>
void forEachRowRun(const RowPages &pages, int64_t stride, int64_t begin, int64_t count, Run &&run) {
  for (int64_t at = 0; at < count;) {
    const int64_t n = std::min(count - at, pages.rowsInBlockFrom(begin + at));
    run(at, n, pages.offsetOf(begin + at, stride));
    at += n;
  }
}

// kt: keys j < J (element d at k.row(j)[d * kD]) in panels of nr, each
// [d][nr], the last panel's missing keys zero. Loops run along each key.
template <class T>
void packKeys(const KeyRows<T> &k, int64_t kD, int64_t J, int64_t D, int nr, float *kt) {
  std::fill(kt + J / nr * nr * D, kt + roundUp(J, nr) * D, 0.0f);
  for (int64_t j = 0; j < J; ++j) {
    float *column = kt + j / nr * nr * D + j % nr;
    const T *key = k.row(j);
    for (int64_t d = 0; d < D; ++d) column[d * nr] = widenToF32(key[d * kD]);
  }
}

// vp: value columns e < E (element at v.row(j)[e * vE]) in panels of nr
// columns, each [j][nr], columns past E zero.
template <class T>
void packValues(const KeyRows<T> &v, int64_t vE, int64_t J, int64_t E, int nr, float *vp) {
  for (int64_t e0 = 0; e0 < E; e0 += nr) {
    float *panel = vp + e0 * J;
    const int64_t cols = std::min<int64_t>(nr, E - e0);
    for (int64_t j = 0; j < J; ++j) {
      const T *value = v.row(j) + e0 * vE;
      float *row = panel + j * nr;
      if (std::is_same_v<T, float> && vE == 1) std::memcpy(row, value, sizeof(float) * static_cast<size_t>(cols));
      else
        for (int64_t ee = 0; ee < cols; ++ee) row[ee] = widenToF32(value[ee * vE]);
      std::fill(row + cols, row + nr, 0.0f);
    }
  }
}

// The bf16 attention's operands (IsaKernels::bf16GemmTile's layout), each
// element rounded to nearest even (a bf16 cache's taken as it is). kp: keys
// in panels of nr, each [pairsPad][nr] pairs (k[j][2q], k[j][2q + 1]),
// missing keys, an odd D's last partner and the pairs from ceil(D / 2) to
// pairsPad zero. Each panel's keys become rows of pairs in `rows`
// ([nr][ceil(D / 2)]; f32 keys a stride apart converted a vector at a time
// where a key is contiguous), then are transposed.
template <class T>
void packKeyPairs(const IsaKernels &isa, const KeyRows<T> &k, int64_t kD, int64_t J, int64_t D, int nr,
                  int64_t pairsPad, uint32_t *kp, uint32_t *rows) {
  const int64_t pairs = (D + 1) / 2;
  for (int64_t j0 = 0; j0 < J; j0 += nr) {
    const int64_t keys = std::min<int64_t>(nr, J - j0);
    if (std::is_same_v<T, float> && k.evenlySpaced(j0, keys)) {
      if constexpr (std::is_same_v<T, float>) isa.bf16PackRows(k.row(j0), k.stride, kD, keys, D, nr, rows, pairs);
    } else {
      std::fill(rows + keys * pairs, rows + nr * pairs, 0u);
      for (int64_t n = 0; n < keys; ++n) {
        const T *key = k.row(j0 + n);
        for (int64_t q = 0; q < pairs; ++q)
          rows[n * pairs + q] =
              bf16Bits(key[2 * q * kD]) | (2 * q + 1 < D ? bf16Bits(key[(2 * q + 1) * kD]) << 16 : 0u);
      }
    }
    uint32_t *panel = kp + j0 * pairsPad;
    isa.bf16TransposePairs(rows, pairs, nr, pairs, panel, nr);
    std::fill(panel + pairs * nr, panel + pairsPad * nr, 0u);
  }
}

// vp: value columns in panels of nr, each [pairsPad][nr] pairs
// (v[2q][e], v[2q + 1][e]), columns past E, an odd J's last partner and the
// pairs from ceil(J / 2) to pairsPad zero; contiguous rows of f32 values are
// interleaved a vector at a time.
template <class T>
void packValuePairs(const IsaKernels &isa, const KeyRows<T> &v, int64_t vE, int64_t J, int64_t E, int nr,
                    int64_t pairsPad, uint32_t *vp) {
  const int64_t pairs = (J + 1) / 2;
  for (int64_t e0 = 0; e0 < E; e0 += nr) {
    uint32_t *panel = vp + e0 * pairsPad;
    const int64_t cols = std::min<int64_t>(nr, E - e0);
    for (int64_t q = 0; q < pairs; ++q) {
      const T *even = v.row(2 * q) + e0 * vE, *odd = 2 * q + 1 < J ? v.row(2 * q + 1) + e0 * vE : nullptr;
      uint32_t *row = panel + q * nr;
      std::fill(row + cols, row + nr, 0u);
      if constexpr (std::is_same_v<T, float>)
        if (vE == 1) {
          isa.bf16InterleaveRows(even, odd, cols, row);
          continue;
        }
      for (int64_t e = 0; e < cols; ++e)
        row[e] = bf16Bits(even[e * vE]) | (odd ? bf16Bits(odd[e * vE]) << 16 : 0u);
    }
    std::fill(panel + pairs * nr, panel + pairsPad * nr, 0u);
  }
}

// qs[t * D + d] = scale * q[t * qI + d * qD] for t < rows, zero up to rowsPad.
inline void scaleQueries(const IsaKernels &isa, const float *q, int64_t qI, int64_t qD, int64_t rows, int64_t rowsPad,
                         int64_t D, float scale, float *qs) {
  if (D == 0) return;  // nothing to copy (and q may be null)
  for (int64_t t = 0; t < rows; ++t) {
    const float *query = q + t * qI;
    if (qD == 1) {  // the usual layout: a copy, scaled in vectors
      std::memcpy(qs + t * D, query, sizeof(float) * static_cast<size_t>(D));
      isa.scaleInPlace(qs + t * D, D, scale);
    } else {
      for (int64_t d = 0; d < D; ++d) qs[t * D + d] = scale * query[d * qD];
    }
  }
  std::fill(qs + rows * D, qs + rowsPad * D, 0.0f);
}

// s[t * ldS + j] = qs_t . k_j for t < rowsPad and j up to `keys` rounded to a
// vector, with kt packed by packKeys: whole register tiles, then a last,
// partly filled panel one vector at a time (197 keys: 208 columns, not 256).
inline void keyScores(const IsaKernels &isa, const float *qs, int64_t rowsPad, int64_t D, const float *kt, int64_t keys,
                      float *s, int64_t ldS) {
  const int mr = isa.gemmMr, nr = isa.gemmNr;
  for (int64_t jr = 0; jr < keys; jr += nr) {
    const float *panel = kt + jr * D;
    for (int64_t ir = 0; ir < rowsPad; ir += mr) {
      float *scores = s + ir * ldS + jr;
      if (jr + nr <= keys)
        isa.gemmTileRows(D, qs + ir * D, D, panel, scores, ldS, false, nullptr, 0);
      else
        for (int64_t jv = 0; jr + jv < keys; jv += isa.vectorFloats)
          isa.gemmTileRowsVector(D, qs + ir * D, D, panel + jv, nr, scores + jv, ldS, false);
    }
  }
}

// Masks a row of `keys` scores whose mask elements are at mask[at + j * mJ]:
// a vector at a time where the keys are contiguous in the mask.
inline void maskKeys(const IsaKernels &isa, MaskKind kind, float *row, int64_t keys, const void *mask, int64_t at,
                     int64_t mJ, float fill) {
  if (kind == MaskKind::None) return;
  if (kind == MaskKind::Add && mJ == 1)
    isa.addScaled(row, static_cast<const float *>(mask) + at, keys, 1.0f);
  else if (mJ == 1)
    isa.maskRow(row, static_cast<const uint8_t *>(mask) + at, keys, kind == MaskKind::Keep, fill);
  else
    for (int64_t j = 0; j < keys; ++j) row[j] = maskScore(kind, row[j], mask, at + j * mJ, fill);
}

// The online softmax's step for one query row: folds a block of its scores
// row[0..width) (-inf where hidden) into its running max m and sum l,
// rescaling its accumulator o[0..oWidth) to the new max, and leaves the row
// as exp(s - m') (all 0 while every score so far is -inf):
//   m' = max(m, max_j s_j), l = l * exp(m - m') + sum_j exp(s_j - m').
// A NaN score makes m NaN, and with it the row. With `pairs` (the bf16
// path), the exponentials go to pairs[0..width / 2) as bf16 pairs
// (IsaKernels::bf16ExpShiftSumPairs) instead, width even; the row is left
// as it was.
inline void foldScoresIntoRow(const IsaKernels &isa, float *row, int64_t width, float &m, float &l, float *o,
                              int64_t oWidth, uint32_t *pairs = nullptr) {
  const float blockMax = isa.reduceRow(row, width, ReduceKind::Max);
  const float newMax = std::isnan(blockMax) ? blockMax : std::max(m, blockMax);
  if (newMax == -std::numeric_limits<float>::infinity()) {  // nothing to add yet
    if (pairs) std::fill(pairs, pairs + width / 2, 0u);
    else std::fill(row, row + width, 0.0f);
    return;
  }
  const float correction = std::exp(m - newMax);  // 0 when m was -inf
  l = l * correction + (pairs ? isa.bf16ExpShiftSumPairs(row, width, newMax, pairs) : isa.expShiftSum(row, width, newMax));
  // (o is still zero while m is -inf.)
  if (correction != 1.0f && m != -std::numeric_limits<float>::infinity()) isa.scaleInPlace(o, oWidth, correction);
  m = newMax;
}

// dst[e * dE] = o[e] / l for e < E, in one pass (as o times 1 / l); NaN
// where l is 0 (every score -inf), as softmax gives. The contiguous case has
// its own loop so that it vectorizes.
inline void storeAttentionRow(const float *o, int64_t E, float l, float *dst, int64_t dE) {
  const float inverse = l == 0.0f ? std::numeric_limits<float>::quiet_NaN() : 1.0f / l;
  if (dE == 1)
    for (int64_t e = 0; e < E; ++e) dst[e] = o[e] * inverse;
  else
    for (int64_t e = 0; e < E; ++e) dst[e * dE] = o[e] * inverse;
}

}  // namespace ein::detail::cpu
