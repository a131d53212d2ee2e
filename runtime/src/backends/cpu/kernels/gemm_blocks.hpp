// What the f32/bf16 gemm (gemm_f32_packed.cpp) and the int8 gemm
// (gemm_s8_dynamic.cpp) share around their register tiles: the split of c
// into (batch, row block, column block) items, each item's operand offsets,
// and the epilogue of one row of an item.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels/blocking.hpp"
#include "backends/cpu/kernels/kernels.hpp"

namespace ein::detail::cpu {

struct GemmItems {
  int64_t mc, mBlocks, nc, nBlocks;
  int64_t count(int64_t batchCount) const { return batchCount * mBlocks * nBlocks; }
};

// Row blocks of at most maxMc rows (a multiple of mr); column blocks as wide
// as maxNc allows, but as many as it takes to give every thread the same
// number of items (few items make a small gemm uneven).
inline GemmItems planGemmItems(int64_t m, int64_t n, int64_t batchCount, int mr, int nr, int64_t maxMc,
                               int64_t maxNc, int threads) {
  GemmItems items;
  items.mc = blockSize(m, maxMc, mr);
  items.mBlocks = ceilDiv(m, items.mc);
  const int64_t panels = ceilDiv(n, nr);
  int64_t nBlocks = ceilDiv(n, maxNc);
  for (int64_t more = nBlocks; more <= std::min(panels, 4 * nBlocks); ++more)
    if (batchCount * items.mBlocks * more % threads == 0) {
      nBlocks = more;
      break;
    }
  items.nc = ceilDiv(panels, nBlocks) * nr;
  items.nBlocks = ceilDiv(n, items.nc);
  return items;
}

// Scratch floats for `bytes` of scratch, saturated, so that a hostile size
// makes the allocation fail instead of wrapping.
inline size_t saturatedScratchFloats(unsigned __int128 bytes) {
  constexpr size_t kLimit = SIZE_MAX / 16;
  return bytes / sizeof(float) + 1 > kLimit ? kLimit : static_cast<size_t>(bytes / sizeof(float) + 1);
}

// One item: its block of c and each operand's offset at its batch element.
struct GemmItem {
  int64_t i0, j0, rows, cols;
  int64_t a, b, c, bias, residual;
};

inline GemmItem gemmItem(const Gemm &op, const GemmItems &items, int64_t item) {
  const int64_t batchIndex = item / (items.mBlocks * items.nBlocks), block = item % (items.mBlocks * items.nBlocks);
  GemmItem it{block / items.nBlocks * items.mc, block % items.nBlocks * items.nc, 0, 0, op.a.offset, op.b.offset,
              op.c.offset, op.bias ? op.bias->offset : 0, op.residual ? op.residual->offset : 0};
  it.rows = std::min(items.mc, op.m - it.i0);
  it.cols = std::min(items.nc, op.n - it.j0);
  for (size_t axis = op.batch.size(), rest = static_cast<size_t>(batchIndex); axis-- > 0;) {
    const int64_t index = static_cast<int64_t>(rest % static_cast<size_t>(op.batch[axis]));
    rest /= static_cast<size_t>(op.batch[axis]);
    it.a += index * op.a.strides[axis];
    it.b += index * op.b.strides[axis];
    it.c += index * op.c.strides[axis];
    if (op.bias) it.bias += index * op.bias->strides[axis];
    if (op.residual) it.residual += index * op.residual->strides[axis];
  }
  return it;
}

// body(begin, end, thread) over items [0, count) in one contiguous run per
// thread: the gemv's panels (items of one panel each, as planned by
// gemvItems), which lie one after another in the packed weights, so each
// thread streams its share of them front to back.
template <typename Body>
void forEachGemvRun(const KernelContext &context, int64_t count, Body &&body) {
  const int64_t runs = std::min<int64_t>(context.threads(), count);
  context.parallelFor(runs, [&](int64_t run, int thread) { body(count * run / runs, count * (run + 1) / runs, thread); });
}

// A row block's passes over a weight panel: whole tiles of mr rows, then a
// last short tile's rows by the gemv where they are at most kGemvMaxRows
// (and `gemvRest`), else that tile padded with zero rows.
struct TilePasses {
  int64_t wholeRows, rest, tiledRows, passes;
  bool restByGemv;
  TilePasses(int64_t rows, int64_t mr, bool gemvRest)
      : wholeRows(rows / mr * mr), rest(rows - wholeRows), restByGemv(gemvRest && rest > 0 && rest <= kGemvMaxRows) {
    tiledRows = restByGemv ? wholeRows : (rows + mr - 1) / mr * mr;
    passes = tiledRows / mr + (restByGemv ? 1 : 0);
  }
};

// body(item, nextItem, thread) for every item of a gemm. Where packed weights
// are read once (one row block), each thread takes a contiguous run of the
// items, whose panels lie one after another, and learns the next item it
// will take (-1 after its last) so that it can pull that item's first panel
// in while it works on its last; else the threads take items as they come
// (nextItem -1), which balances row blocks of uneven cost.
template <typename Body>
void forEachGemmItem(const KernelContext &context, const GemmItems &items, int64_t batchCount, bool packedWeights,
                     Body &&body) {
  const int64_t count = items.count(batchCount);
  if (packedWeights && items.mBlocks == 1) {
    forEachGemvRun(context, count, [&](int64_t begin, int64_t end, int thread) {
      for (int64_t item = begin; item < end; ++item) body(item, item + 1 < end ? item + 1 : -1, thread);
    });
    return;
  }
  context.parallelFor(count, [&](int64_t item, int thread) { body(item, -1, thread); });
}

// The gemv's items: all m rows of one panel of nr columns (gemmItem's
// order: batch, then panels).
inline GemmItems gemvItems(int64_t m, int64_t n, int nr) { return GemmItems{m, 1, nr, ceilDiv(n, nr)}; }

// Whether a gemm of m rows takes the gemv path (IsaKernels::gemvPanel and
// its bf16/int8 forms): weights packed at load, and few rows.
inline bool useGemv(int64_t m, bool packedWeights) { return packedWeights && m <= kGemvMaxRows; }

// A thread's note, at the start of its scratch, of which (batch, row block)
// the rows of a prepared there (quantized, or packed as bf16 pairs) belong
// to: the column blocks of one row block are consecutive items, so a thread
// that gets several of them prepares the rows once. Bytes, since scratch is
// only float-aligned; forgotten (-1) on every thread before each call.
class PreparedRows {
 public:
  static constexpr size_t kScratchFloats = 16;  // a cache line, so what follows keeps the scratch's alignment
  explicit PreparedRows(float *scratch) : at_(reinterpret_cast<std::byte *>(scratch)) {}
  static int64_t rowBlock(const GemmItems &items, int64_t item) { return item / items.nBlocks; }
  bool hold(int64_t rowBlock) const {
    int64_t held;
    std::memcpy(&held, at_, sizeof held);
    return held == rowBlock;
  }
  void set(int64_t rowBlock) const { std::memcpy(at_, &rowBlock, sizeof rowBlock); }
  static void forgetAll(const KernelContext &context) {
    for (int thread = 0; thread < context.threads(); ++thread) PreparedRows(context.threadScratch(thread)).set(-1);
  }

 private:
  std::byte *at_;
};

// Rows [i, i + rows) of the item through the fused epilogue into c, from
// acc (row i's cols sums at acc, the next row's accRowStride further on;
// f32, may be overwritten); biasAdded: the sums include the bias already.
inline GemmEpilogue gemmEpilogueOf(const Gemm &op, const KernelContext &context, const GemmItem &it, int64_t i,
                                   int64_t rows, float *acc, int64_t accRowStride, bool biasAdded = false) {
  const size_t r = op.batch.size();
  const int64_t row = it.i0 + i;
  GemmEpilogue e{acc, accRowStride, rows, it.cols, op.alpha, nullptr, 0, 0, op.activation, nullptr, 0, 0,
                 context.data<float>(op.c) + it.c + row * op.c.strides[r] + it.j0 * op.c.strides[r + 1],
                 op.c.strides[r], op.c.strides[r + 1]};
  if (op.bias && !biasAdded) {
    e.bias = context.data<const float>(*op.bias) + it.bias + row * op.bias->strides[r] +
             it.j0 * op.bias->strides[r + 1];
    e.biasRowStride = op.bias->strides[r];
    e.biasStride = op.bias->strides[r + 1];
  }
  if (op.residual) {
    e.residual = context.data<const float>(*op.residual) + it.residual + row * op.residual->strides[r] +
                 it.j0 * op.residual->strides[r + 1];
    e.residualRowStride = op.residual->strides[r];
    e.residualStride = op.residual->strides[r + 1];
  }
  return e;
}

inline void gemmEpilogueRows(const Gemm &op, const KernelContext &context, const GemmItem &it, int64_t i,
                             int64_t rows, float *acc, int64_t accRowStride, bool biasAdded = false) {
  context.isa->gemmEpilogue(gemmEpilogueOf(op, context, it, i, rows, acc, accRowStride, biasAdded));
}

}  // namespace ein::detail::cpu
