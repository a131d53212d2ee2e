// The int8 gemm of int8 artifacts (the schema's Gemm with I8 weights): each
// row of a is quantized to s8 at run time (quantize_s8.hpp, one scale per
// row), b is s8 with a scale per column (quantized by einc), the ISA's tile
// sums the 8-bit products exactly in int32, and the scales are folded in
// before the f32 epilogue (bias, activation, residual) that the f32 gemm
// uses. Work is split into (batch, row block, column block) items as there;
// each item quantizes its rows over the whole of k (the row's scale needs all
// of them), so k is not blocked: k <= 65536 (the loader), which also keeps
// the int32 sums from overflowing (255 * 127 * 65536 < 2^31).
#include <algorithm>
#include <cstring>

#include "backends/cpu/kernels/gemm_blocks.hpp"
#include "backends/cpu/kernels/quantize_s8.hpp"
#include "util/status_macros.hpp"

namespace ein::detail::cpu {
namespace {

constexpr int64_t kMaxMc = 96, kMaxNc = 256, kMaxNr = 64;

// dst[(q * nr + j) * 4 + t] = b[(4q + t) * sK + j * sN] for 4q + t < k and
// j < cols, else 0; sums[j] = the column's sum (0 past cols).
void packS8Panel(const int8_t *b, int64_t sK, int64_t sN, int64_t k, int64_t cols, int nr, int8_t *dst,
                 int32_t *sums) {
  const int64_t quads = (k + 3) / 4;
  std::memset(dst, 0, static_cast<size_t>(quads * nr * 4));
  for (int64_t j = 0; j < nr; ++j) {
    int32_t sum = 0;
    if (j < cols)
      for (int64_t p = 0; p < k; ++p) {
        const int8_t value = b[p * sK + j * sN];
        dst[(p / 4 * nr + j) * 4 + p % 4] = value;
        sum += value;
      }
    sums[j] = sum;
  }
}

struct S8Scratch {
  uint8_t *aQ;      // kMaxMc rows of kPadded bytes
  float *rowScale;  // kMaxMc
  int32_t *acc;     // kMaxMc x kMaxNc
  int32_t *columnSums;  // kMaxNc
  float *columnScale;  // kMaxNc: the block's column scales, contiguous
  int8_t *bPack;    // a panel packed here when b was not packed at load
  int32_t *bSums;   // kMaxNr
};

size_t paddedBytes(int64_t k) { return static_cast<size_t>((k + 3) / 4 * 4); }

S8Scratch scratchOf(float *base, int64_t k) {
  auto *bytes = reinterpret_cast<std::byte *>(base);
  S8Scratch s;
  s.rowScale = reinterpret_cast<float *>(bytes + PreparedRows::kScratchFloats * sizeof(float));
  s.acc = reinterpret_cast<int32_t *>(s.rowScale + kMaxMc);
  s.columnSums = s.acc + kMaxMc * kMaxNc;
  s.columnScale = reinterpret_cast<float *>(s.columnSums + kMaxNc);
  s.bSums = reinterpret_cast<int32_t *>(s.columnScale + kMaxNc);
  s.aQ = reinterpret_cast<uint8_t *>(s.bSums + kMaxNr);
  s.bPack = reinterpret_cast<int8_t *>(s.aQ + kMaxMc * paddedBytes(k));
  return s;
}

// rows rows of a (from a + aOffset) quantized into s.aQ (kPadded bytes
// apart) and s.rowScale.
void quantizeRows(const KernelContext &context, const Gemm &op, int64_t aOffset, int64_t rows, int64_t kPadded,
                  const S8Scratch &s) {
  const IsaKernels &isa = *context.isa;
  const size_t r = op.batch.size();
  const int64_t aM = op.a.strides[r], aK = op.a.strides[r + 1];
  const float *a = context.data<const float>(op.a) + aOffset;
  for (int64_t i = 0; i < rows; ++i) {
    uint8_t *dst = s.aQ + i * kPadded;
    s.rowScale[i] = aK == 1 ? isa.s8QuantizeRow(a + i * aM, op.k, kPadded, dst)
                            : quantizeRowS8(a + i * aM, aK, op.k, kPadded, isa.s8ActivationOffset, dst);
  }
}

// The block's columns' scales, contiguous (in s.columnScale where b's are not).
const float *columnScales(const Gemm &op, const KernelContext &context, int64_t j0, int64_t cols,
                          const S8Scratch &s) {
  const float *bScale = context.data<const float>(*op.bScale) + op.bScale->offset;
  const int64_t stride = op.bScale->strides[0];
  if (stride == 1) return bScale + j0;
  for (int64_t j = 0; j < cols; ++j) s.columnScale[j] = bScale[(j0 + j) * stride];
  return s.columnScale;
}

// The gemv path (useGemv): as gemvF32Packed (gemm_f32_packed.cpp), over the
// int8 panels, each thread quantizing the rows of a for itself.
void gemvS8Packed(const Gemm &op, const KernelContext &context, const PackedMatrix &packed) {
  const IsaKernels &isa = *context.isa;
  const int nr = packed.nr;
  const int64_t m = op.m, kPadded = static_cast<int64_t>(paddedBytes(op.k));
  const GemmItems items = gemvItems(m, op.n, nr);
  forEachGemvRun(context, items.count(op.batch.product()), [&](int64_t begin, int64_t end, int thread) {
    const S8Scratch s = scratchOf(context.threadScratch(thread), op.k);
    int64_t preparedBatch = -1;
    for (int64_t item = begin; item < end; ++item) {
      const GemmItem it = gemmItem(op, items, item);
      if (const int64_t batchIndex = item / items.nBlocks; batchIndex != preparedBatch) {
        preparedBatch = batchIndex;
        quantizeRows(context, op, it.a, m, kPadded, s);
      }
      isa.s8GemvPanel(static_cast<int>(m), kPadded / 4, s.aQ, kPadded, packed.s8Panel(it.j0), s.acc, nr, nullptr, 0);
      const float *columnScale = columnScales(op, context, it.j0, it.cols, s);
      float *sums = reinterpret_cast<float *>(s.acc);  // each row's sums as f32, where they lie
      for (int64_t i = 0; i < m; ++i)
        isa.s8DequantizeRow(s.acc + i * nr, packed.s8ColumnSums(it.j0), isa.s8ActivationOffset, s.rowScale[i],
                            columnScale, it.cols, sums + i * nr);
      gemmEpilogueRows(op, context, it, 0, m, sums, nr);
    }
  });
}

}  // namespace

size_t gemmS8DynamicScratchFloats(const Gemm &op) {
  return saturatedScratchFloats(
      static_cast<unsigned __int128>(sizeof(float)) *
          (PreparedRows::kScratchFloats + kMaxMc + kMaxMc * kMaxNc + 2 * kMaxNc + kMaxNr) +
      static_cast<unsigned __int128>(kMaxMc + kMaxNr) * (static_cast<uint64_t>(op.k) + 3));
}

Status gemmS8Dynamic(const Gemm &op, const KernelContext &context) {
  const int64_t m = op.m, n = op.n, k = op.k;
  const int64_t batchCount = op.batch.product();
  if (m == 0 || n == 0 || batchCount == 0) return Status();
  const IsaKernels &isa = *context.isa;
  const int mr = isa.s8GemmMr, nr = isa.s8GemmNr;
  const int32_t offset = isa.s8ActivationOffset;
  const int8_t *b = context.data<const int8_t>(op.b);
  const PackedMatrix *packed = op.packedB >= 0 ? &(*context.packed)[op.packedB] : nullptr;
  // Packed for another table (a test forcing one): pack as we go instead.
  if (packed && (!packed->s8Quads || packed->nr != nr)) packed = nullptr;
  if (useGemv(m, packed != nullptr)) {
    gemvS8Packed(op, context, *packed);
    return Status();
  }

  const size_t r = op.batch.size();
  const int64_t aM = op.a.strides[r], bK = op.b.strides[r], bN = op.b.strides[r + 1];
  const int64_t kPadded = static_cast<int64_t>(paddedBytes(k)), quads = kPadded / 4;
  const GemmItems items = planGemmItems(m, n, batchCount, mr, nr, kMaxMc, kMaxNc, context.threads());
  PreparedRows::forgetAll(context);

  forEachGemmItem(context, items, batchCount, packed != nullptr, [&](int64_t item, int64_t nextItem, int thread) {
    const GemmItem it = gemmItem(op, items, item);
    const int64_t i0 = it.i0, j0 = it.j0, rows = it.rows, cols = it.cols, aOff = it.a;
    const S8Scratch s = scratchOf(context.threadScratch(thread), k);
    // Whole tiles of mr rows; a last short tile of up to kGemvMaxRows rows
    // is the gemv's, row for row (AVX2 at 5 rows took the time of 8), and a
    // longer one a tile padded with zero rows.
    const auto [wholeRows, rest, tiledRows, passes, restByGemv] = TilePasses(rows, mr, true);
    // The block's rows of a, quantized (padding rows: zeros, never stored),
    // unless this thread's previous item had the same rows.
    const PreparedRows prepared(context.threadScratch(thread));
    if (const int64_t rowBlock = PreparedRows::rowBlock(items, item); !prepared.hold(rowBlock)) {
      quantizeRows(context, op, aOff + i0 * aM, rows, kPadded, s);
      if (tiledRows > rows)
        std::memset(s.aQ + rows * kPadded, offset, static_cast<size_t>((tiledRows - rows) * kPadded));
      prepared.set(rowBlock);
    }
    const int64_t ldc = roundUp(cols, nr);
    for (int64_t jr = 0; jr < cols; jr += nr) {
      const int8_t *panel;
      const int32_t *sums;
      if (packed) {
        panel = packed->s8Panel(j0 + jr);
        sums = packed->s8ColumnSums(j0 + jr);
      } else {
        packS8Panel(b + op.b.offset + (j0 + jr) * bN, bK, bN, k, std::min<int64_t>(nr, cols - jr), nr, s.bPack,
                    s.bSums);
        panel = s.bPack;
        sums = s.bSums;
      }
      std::memcpy(s.columnSums + jr, sums, sizeof(int32_t) * static_cast<size_t>(nr));
      // While this panel is used, each pass over it (a row tile, the
      // gemv's rows) pulls a slice of the next weight panel (this item's or
      // the next one's the thread takes) into L2: a few rows' tiles read a
      // panel from DRAM in the first pass alone otherwise, the stream and the
      // arithmetic taking turns (16 rows of the 1.1B's gemms on AVX512_VNNI).
      const char *next = nullptr;
      int64_t slice = 0;
      if (const int64_t column = jr + nr < cols ? j0 + jr + nr : nextItem >= 0 ? gemmItem(op, items, nextItem).j0 : -1;
          packed && column >= 0 && passes > 0) {
        next = reinterpret_cast<const char *>(packed->s8Panel(column));
        slice = roundUp(ceilDiv(packed->s8PanelBytes(), passes), 64);
      }
      auto sliceOf = [&](int64_t pass) { return next ? next + pass * slice : nullptr; };
      for (int64_t ir = 0; ir < tiledRows; ir += mr)
        isa.s8GemmTile(quads, s.aQ + ir * kPadded, kPadded, panel, s.acc + ir * ldc + jr, ldc, false,
                       sliceOf(ir / mr), slice);
      if (restByGemv)
        isa.s8GemvPanel(static_cast<int>(rest), quads, s.aQ + wholeRows * kPadded, kPadded, panel,
                        s.acc + wholeRows * ldc + jr, ldc, sliceOf(passes - 1), slice);
    }
    const float *columnScale = columnScales(op, context, j0, cols, s);
    // The offset's share (offset * the column's weights) comes off exactly in
    // int32; then the two scales, each row's sums becoming f32 where they
    // lie; then the f32 gemm's epilogue over the block's rows in one call.
    float *sums = reinterpret_cast<float *>(s.acc);
    for (int64_t i = 0; i < rows; ++i)
      isa.s8DequantizeRow(s.acc + i * ldc, s.columnSums, offset, s.rowScale[i], columnScale, cols, sums + i * ldc);
    gemmEpilogueRows(op, context, it, 0, rows, sums, ldc);
  });
  return Status();
}

// The int8 weights of a gemm packed for `isa`'s tile, with column sums.
StatusOr<PackedMatrix> packS8Weights(const Gemm &op, const int8_t *b, const IsaKernels &isa) {
  const int nr = isa.s8GemmNr;
  const int64_t panels = ceilDiv(op.n, nr), panelBytes = static_cast<int64_t>(paddedBytes(op.k)) * nr;
  EIN_ASSIGN_OR_RETURN(AlignedBuffer buffer,
                       AlignedBuffer::allocate(static_cast<size_t>(panels * (panelBytes + nr * 4)), "packed weights",
                                               Pages::Huge));
  PackedMatrix matrix{std::move(buffer), nr, op.k, op.n, false};
  matrix.s8Quads = true;
  const size_t r = op.batch.size();
  const int64_t bK = op.b.strides[r], bN = op.b.strides[r + 1];
  for (int64_t panel = 0; panel < panels; ++panel) {
    const int64_t cols = std::min<int64_t>(nr, op.n - panel * nr);
    packS8Panel(b + op.b.offset + panel * nr * bN, bK, bN, op.k, cols, nr,
                const_cast<int8_t *>(matrix.s8Panel(panel * nr)), const_cast<int32_t *>(matrix.s8ColumnSums(panel * nr)));
  }
  return matrix;
}

}  // namespace ein::detail::cpu
