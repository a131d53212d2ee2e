// The int4 gemm of int4 artifacts (the schema's Gemm with I4 weights): each
// row of a is quantized at run time per group of 32 along k
// (quantizeGroupsS8), b is packed at load into panels of 8 columns that carry
// their f16 group scales (s4_gemm.hpp), the ISA's tile sums each group
// exactly in int32 and adds the groups in f32, and the f32 gemm's epilogue
// (bias, activation, residual) follows. Work is split as the int8 gemm's
// (gemm_blocks.hpp): decode (a few rows) streams the packed panels once,
// each thread its own run of them.
#include <algorithm>
#include <cstring>

#include "backends/cpu/kernels/gemm_blocks.hpp"
#include "backends/cpu/kernels/isa/s4_gemm.hpp"
#include "backends/cpu/kernels/quantize_s8.hpp"
#include "util/status_macros.hpp"

namespace ein::detail::cpu {
namespace {

constexpr int64_t kMaxMc = 96, kMaxNc = 256;
constexpr int kNr = kS4PanelColumns;

int64_t groupsOf(int64_t k) { return ceilDiv(k, kS4Group); }
int64_t panelBytes(int64_t k) { return groupsOf(k) * kS4GroupBytes; }

// The weight at flat element `index` of an i4 tensor, as u = q + 8.
uint8_t unsignedNibble(const uint8_t *b, int64_t index) {
  return static_cast<uint8_t>(((b[index >> 1] >> ((index & 1) * 4)) & 15) ^ 8);
}

// One panel of `cols` columns (s4_gemm.hpp's layout) from b's elements
// at offset + p * bK + j * bN and their scales' at g * sG + j * sN.
void packS4Panel(const uint8_t *b, int64_t offset, int64_t bK, int64_t bN, const uint16_t *scales, int64_t sG,
                 int64_t sN, int64_t k, int64_t cols, uint8_t *dst) {
  auto weight = [&](int64_t p, int64_t j) -> uint8_t {
    return p < k && j < cols ? unsignedNibble(b, offset + p * bK + j * bN) : 8;
  };
  for (int64_t g = 0; g < groupsOf(k); ++g) {
    uint8_t *group = dst + g * kS4GroupBytes;
    for (int d = 0; d < 4; ++d)
      for (int j = 0; j < kNr; ++j)
        for (int t = 0; t < 4; ++t) {
          const int64_t p = g * kS4Group + 8 * d + t;
          group[d * 32 + j * 4 + t] = static_cast<uint8_t>(weight(p, j) | weight(p + 4, j) << 4);
        }
    for (int j = 0; j < kNr; ++j) {
      const uint16_t bits = j < cols ? scales[g * sG + j * sN] : 0;
      std::memcpy(group + 128 + 2 * j, &bits, 2);
    }
  }
}

struct S4Scratch {
  float *acc;      // kMaxMc x kMaxNc
  float *aScale;   // kMaxMc x groups
  int32_t *aSum;   // kMaxMc x groups
  int8_t *aQ;      // kMaxMc rows of groups * 32 bytes
  uint8_t *bPack;  // a panel packed here when b was not packed at load
};

S4Scratch scratchOf(float *base, int64_t groups) {
  S4Scratch s;
  s.acc = base + PreparedRows::kScratchFloats;
  s.aScale = s.acc + kMaxMc * kMaxNc;
  s.aSum = reinterpret_cast<int32_t *>(s.aScale + kMaxMc * groups);
  s.aQ = reinterpret_cast<int8_t *>(s.aSum + kMaxMc * groups);
  s.bPack = reinterpret_cast<uint8_t *>(s.aQ + kMaxMc * groups * kS4Group);
  return s;
}

// rows rows of a (from a + aOffset) quantized into the scratch.
void quantizeRows(const KernelContext &context, const Gemm &op, int64_t aOffset, int64_t rows, const S4Scratch &s) {
  const size_t r = op.batch.size();
  const int64_t aM = op.a.strides[r], aK = op.a.strides[r + 1], groups = groupsOf(op.k);
  const float *a = context.data<const float>(op.a) + aOffset;
  for (int64_t i = 0; i < rows; ++i) {
    int8_t *q = s.aQ + i * groups * kS4Group;
    if (aK == 1)
      context.isa->s4QuantizeRow(a + i * aM, op.k, groups, q, s.aScale + i * groups, s.aSum + i * groups);
    else
      quantizeGroupsS8(a + i * aM, aK, op.k, groups, q, s.aScale + i * groups, s.aSum + i * groups);
  }
}

// The gemv path (useGemv): every panel read once, each thread quantizing the
// rows of a for itself and taking the epilogue once per run of up to kMaxNc
// columns (a call per 8 columns cost 5% of a decode gemv).
void gemvS4Packed(const Gemm &op, const KernelContext &context, const PackedMatrix &packed) {
  const IsaKernels &isa = *context.isa;
  const int64_t m = op.m, groups = groupsOf(op.k);
  const GemmItems items = gemvItems(m, op.n, kNr);
  forEachGemvRun(context, items.count(op.batch.product()), [&](int64_t begin, int64_t end, int thread) {
    const S4Scratch s = scratchOf(context.threadScratch(thread), groups);
    int64_t preparedBatch = -1;
    for (int64_t item = begin; item < end;) {
      GemmItem it = gemmItem(op, items, item);
      const int64_t batchIndex = item / items.nBlocks;
      if (batchIndex != preparedBatch) {
        preparedBatch = batchIndex;
        quantizeRows(context, op, it.a, m, s);
      }
      // This batch element's panels in the run, side by side in acc.
      const int64_t last = std::min({end, (batchIndex + 1) * items.nBlocks, item + kMaxNc / kNr});
      const int64_t ldc = (last - item) * kNr;
      for (int64_t panel = 0; panel < last - item; ++panel)
        isa.s4GemmTile(static_cast<int>(m), groups, s.aQ, groups * kS4Group, s.aScale, s.aSum, groups,
                       packed.s4Panel(it.j0 + panel * kNr), s.acc + panel * kNr, ldc);
      it.cols = std::min(ldc, op.n - it.j0);
      gemmEpilogueRows(op, context, it, 0, m, s.acc, ldc);
      item = last;
    }
  });
}

}  // namespace

size_t gemmS4DynamicScratchFloats(const Gemm &op) {
  const unsigned __int128 groups = static_cast<uint64_t>(groupsOf(op.k));
  return saturatedScratchFloats(sizeof(float) * (PreparedRows::kScratchFloats + kMaxMc * kMaxNc + 2 * kMaxMc * groups) +
                                (kMaxMc * kS4Group + kS4GroupBytes) * groups);
}

Status gemmS4Dynamic(const Gemm &op, const KernelContext &context) {
  const int64_t m = op.m, n = op.n, k = op.k;
  const int64_t batchCount = op.batch.product();
  if (m == 0 || n == 0 || batchCount == 0) return Status();
  const PackedMatrix *packed = op.packedB >= 0 ? &(*context.packed)[op.packedB] : nullptr;
  if (useGemv(m, packed != nullptr)) {
    gemvS4Packed(op, context, *packed);
    return Status();
  }

  const IsaKernels &isa = *context.isa;
  const size_t r = op.batch.size();
  const int64_t bK = op.b.strides[r], bN = op.b.strides[r + 1], groups = groupsOf(k), lda = groups * kS4Group;
  const auto *b = context.data<const uint8_t>(op.b);
  const View &scale = *op.bGroupScale;
  const uint16_t *scales = context.data<const uint16_t>(scale) + scale.offset;
  const GemmItems items = planGemmItems(m, n, batchCount, static_cast<int>(kGemvMaxRows), kNr, kMaxMc, kMaxNc,
                                        context.threads());
  PreparedRows::forgetAll(context);

  context.parallelFor(items.count(batchCount), [&](int64_t item, int thread) {
    const GemmItem it = gemmItem(op, items, item);
    const S4Scratch s = scratchOf(context.threadScratch(thread), groups);
    // The block's rows of a, quantized, unless this thread's previous item
    // had the same rows.
    const PreparedRows prepared(context.threadScratch(thread));
    if (const int64_t rowBlock = PreparedRows::rowBlock(items, item); !prepared.hold(rowBlock)) {
      quantizeRows(context, op, it.a + it.i0 * op.a.strides[r], it.rows, s);
      prepared.set(rowBlock);
    }
    const int64_t ldc = roundUp(it.cols, kNr);
    for (int64_t jr = 0; jr < it.cols; jr += kNr) {
      const uint8_t *panel = s.bPack;
      if (packed)
        panel = packed->s4Panel(it.j0 + jr);
      else
        packS4Panel(b, it.b + (it.j0 + jr) * bN, bK, bN, scales + (it.j0 + jr) * scale.strides[1], scale.strides[0],
                    scale.strides[1], k, std::min<int64_t>(kNr, it.cols - jr), s.bPack);
      for (int64_t ir = 0; ir < it.rows; ir += kGemvMaxRows)
        isa.s4GemmTile(static_cast<int>(std::min<int64_t>(kGemvMaxRows, it.rows - ir)), groups, s.aQ + ir * lda, lda,
                       s.aScale + ir * groups, s.aSum + ir * groups, groups, panel, s.acc + ir * ldc + jr, ldc);
    }
    gemmEpilogueRows(op, context, it, 0, it.rows, s.acc, ldc);
  });
  return Status();
}

// The int4 weights of a gemm packed into panels with their scales.
StatusOr<PackedMatrix> packS4Weights(const Gemm &op, const uint8_t *b, const uint16_t *scales) {
  const int64_t panels = ceilDiv(op.n, kNr);
  EIN_ASSIGN_OR_RETURN(AlignedBuffer buffer,
                       AlignedBuffer::allocate(static_cast<size_t>(panels * panelBytes(op.k)), "packed weights"));
  PackedMatrix matrix{std::move(buffer), kNr, op.k, op.n, false};
  matrix.s4Groups = true;
  const size_t r = op.batch.size();
  const int64_t bK = op.b.strides[r], bN = op.b.strides[r + 1];
  const View &scale = *op.bGroupScale;
  for (int64_t panel = 0; panel < panels; ++panel) {
    const int64_t cols = std::min<int64_t>(kNr, op.n - panel * kNr);
    packS4Panel(b, op.b.offset + panel * kNr * bN, bK, bN, scales + scale.offset + panel * kNr * scale.strides[1],
                scale.strides[0], scale.strides[1], op.k, cols, const_cast<uint8_t *>(matrix.s4Panel(panel * kNr)));
  }
  return matrix;
}

}  // namespace ein::detail::cpu
