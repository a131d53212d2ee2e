// The group-scaled gemm (the schema's Gemm with b_group_scale: I4 weights of
// int4 artifacts, I8 weights with a scale per group of int8 ones): each row
// of a is quantized at run time per group of 32 along k (quantizeGroupsS8),
// b is packed at load into panels of the table's groupedNr columns that carry
// their f16 group scales (grouped_gemm.hpp), the ISA's tile sums each group exactly in int32
// and adds the groups in f32, and the f32 gemm's epilogue (bias, activation,
// residual) follows. Work is split as the int8 gemm's
// (gemm_blocks.hpp): decode (a few rows) streams the packed panels once,
// each thread its own run of them.
#include <algorithm>
#include <cstring>

#include "backends/cpu/kernels/gemm_blocks.hpp"
#include "backends/cpu/kernels/isa/grouped_gemm.hpp"
#include "backends/cpu/kernels/quantize_s8.hpp"
#include "util/status_macros.hpp"

namespace ein::detail::cpu {
namespace {

constexpr int64_t kMaxMc = 96, kMaxNc = 256;  // kMaxNc: a multiple of every groupedNr
constexpr int kMaxNr = 16;

int64_t groupsOf(int64_t k) { return ceilDiv(k, kWeightGroup); }

// The weight at flat element `index` of an i4 tensor, as u = q + 8.
uint8_t unsignedNibble(const uint8_t *b, int64_t index) {
  return static_cast<uint8_t>(((b[index >> 1] >> ((index & 1) * 4)) & 15) ^ 8);
}

// The ISA's tile for `bits`-bit weights.
auto tileFor(const IsaKernels &isa, int bits) { return bits == 4 ? isa.s4GemmTile : isa.s8GroupedGemmTile; }

struct GroupedScratch {
  float *acc;      // kMaxMc x kMaxNc
  float *aScale;   // kMaxMc x groups
  int32_t *aSum;   // kMaxMc x groups
  int8_t *aQ;      // kMaxMc rows of groups * 32 bytes
  uint8_t *bPack;  // a panel packed here when b was not packed at load
};

GroupedScratch scratchOf(float *base, int64_t groups) {
  GroupedScratch s;
  s.acc = base + PreparedRows::kScratchFloats;
  s.aScale = s.acc + kMaxMc * kMaxNc;
  s.aSum = reinterpret_cast<int32_t *>(s.aScale + kMaxMc * groups);
  s.aQ = reinterpret_cast<int8_t *>(s.aSum + kMaxMc * groups);
  s.bPack = reinterpret_cast<uint8_t *>(s.aQ + kMaxMc * groups * kWeightGroup);
  return s;
}

// rows rows of a (from a + aOffset) quantized into the scratch.
void quantizeRows(const KernelContext &context, const Gemm &op, int64_t aOffset, int64_t rows, const GroupedScratch &s) {
  const size_t r = op.batch.size();
  const int64_t aM = op.a.strides[r], aK = op.a.strides[r + 1], groups = groupsOf(op.k);
  const float *a = context.data<const float>(op.a) + aOffset;
  for (int64_t i = 0; i < rows; ++i) {
    int8_t *q = s.aQ + i * groups * kWeightGroup;
    if (aK == 1)
      context.isa->s8QuantizeGroups(a + i * aM, op.k, groups, q, s.aScale + i * groups, s.aSum + i * groups);
    else
      quantizeGroupsS8(a + i * aM, aK, op.k, groups, q, s.aScale + i * groups, s.aSum + i * groups);
  }
}

// The gemv path (useGemv): every panel read once, each thread quantizing the
// rows of a for itself and taking the epilogue once per run of up to kMaxNc
// columns (a call per 8 columns cost 5% of a decode gemv).
void gemvGroupedPacked(const Gemm &op, const KernelContext &context, const PackedMatrix &packed) {
  const auto tile = tileFor(*context.isa, op.groupBits);
  const int nr = context.isa->groupedNr;
  const int64_t m = op.m, groups = groupsOf(op.k);
  const GemmItems items = gemvItems(m, op.n, nr);
  forEachGemvRun(context, items.count(op.batch.product()), [&](int64_t begin, int64_t end, int thread) {
    const GroupedScratch s = scratchOf(context.threadScratch(thread), groups);
    int64_t preparedBatch = -1;
    for (int64_t item = begin; item < end;) {
      GemmItem it = gemmItem(op, items, item);
      const int64_t batchIndex = item / items.nBlocks;
      if (batchIndex != preparedBatch) {
        preparedBatch = batchIndex;
        quantizeRows(context, op, it.a, m, s);
      }
      // This batch element's panels in the run, side by side in acc.
      const int64_t last = std::min({end, (batchIndex + 1) * items.nBlocks, item + kMaxNc / nr});
      const int64_t ldc = (last - item) * nr;
      for (int64_t panel = 0; panel < last - item; ++panel)
        tile(static_cast<int>(m), groups, s.aQ, groups * kWeightGroup, s.aScale, s.aSum, groups,
             packed.groupPanel(it.j0 + panel * nr), s.acc + panel * nr, ldc);
      it.cols = std::min(ldc, op.n - it.j0);
      gemmEpilogueRows(op, context, it, 0, m, s.acc, ldc);
      item = last;
    }
  });
}

}  // namespace

// (see grouped_gemm.hpp)
void packGroupedPanel(int bits, int nr, const uint8_t *b, int64_t offset, int64_t bK, int64_t bN,
                      const uint16_t *scales, int64_t sG, int64_t sN, int64_t k, int64_t cols, uint8_t *dst) {
  auto at = [&](int64_t p, int64_t j) { return offset + p * bK + j * bN; };
  const int64_t groupBytes = groupedGroupBytes(bits, nr), weightBytes = groupBytes - 2 * nr;
  for (int64_t g = 0; g < groupsOf(k); ++g) {
    uint8_t *group = dst + g * groupBytes;
    if (bits == 4) {
      auto weight = [&](int64_t p, int64_t j) -> uint8_t { return p < k && j < cols ? unsignedNibble(b, at(p, j)) : 8; };
      for (int d = 0; d < 4; ++d)
        for (int j = 0; j < nr; ++j)
          for (int t = 0; t < 4; ++t) {
            const int64_t p = g * kWeightGroup + 8 * d + t;
            group[d * 4 * nr + j * 4 + t] = static_cast<uint8_t>(weight(p, j) | weight(p + 4, j) << 4);
          }
    } else {
      for (int d = 0; d < 8; ++d)
        for (int j = 0; j < nr; ++j)
          for (int t = 0; t < 4; ++t) {
            const int64_t p = g * kWeightGroup + 4 * d + t;
            group[d * 4 * nr + j * 4 + t] = p < k && j < cols ? b[at(p, j)] : 0;
          }
    }
    for (int j = 0; j < nr; ++j) {
      const uint16_t scaleBits = j < cols ? scales[g * sG + j * sN] : 0;
      std::memcpy(group + weightBytes + 2 * j, &scaleBits, 2);
    }
  }
}

size_t gemmGroupedDynamicScratchFloats(const Gemm &op) {
  const unsigned __int128 groups = static_cast<uint64_t>(groupsOf(op.k));
  return saturatedScratchFloats(sizeof(float) * (PreparedRows::kScratchFloats + kMaxMc * kMaxNc + 2 * kMaxMc * groups) +
                                (kMaxMc * kWeightGroup + groupedGroupBytes(8, kMaxNr)) * groups);
}

Status gemmGroupedDynamic(const Gemm &op, const KernelContext &context) {
  const int64_t m = op.m, n = op.n, k = op.k;
  const int64_t batchCount = op.batch.product();
  if (m == 0 || n == 0 || batchCount == 0) return Status();
  const PackedMatrix *packed = op.packedB >= 0 ? &(*context.packed)[op.packedB] : nullptr;
  // Packed for another table's panels (a test's forced table): pack as it goes.
  if (packed && (packed->groupBits != op.groupBits || packed->nr != context.isa->groupedNr)) packed = nullptr;
  if (useGemv(m, packed != nullptr)) {
    gemvGroupedPacked(op, context, *packed);
    return Status();
  }

  const auto tile = tileFor(*context.isa, op.groupBits);
  const int nr = context.isa->groupedNr;
  const size_t r = op.batch.size();
  const int64_t bK = op.b.strides[r], bN = op.b.strides[r + 1], groups = groupsOf(k), lda = groups * kWeightGroup;
  const auto *b = context.data<const uint8_t>(op.b);
  const View &scale = *op.bGroupScale;
  const uint16_t *scales = context.data<const uint16_t>(scale) + scale.offset;
  const GemmItems items = planGemmItems(m, n, batchCount, static_cast<int>(kGemvMaxRows), nr, kMaxMc, kMaxNc,
                                        context.threads());
  PreparedRows::forgetAll(context);

  context.parallelFor(items.count(batchCount), [&](int64_t item, int thread) {
    const GemmItem it = gemmItem(op, items, item);
    const GroupedScratch s = scratchOf(context.threadScratch(thread), groups);
    // The block's rows of a, quantized, unless this thread's previous item
    // had the same rows.
    const PreparedRows prepared(context.threadScratch(thread));
    if (const int64_t rowBlock = PreparedRows::rowBlock(items, item); !prepared.hold(rowBlock)) {
      quantizeRows(context, op, it.a + it.i0 * op.a.strides[r], it.rows, s);
      prepared.set(rowBlock);
    }
    const int64_t ldc = roundUp(it.cols, nr);
    for (int64_t jr = 0; jr < it.cols; jr += nr) {
      const uint8_t *panel = s.bPack;
      if (packed)
        panel = packed->groupPanel(it.j0 + jr);
      else
        packGroupedPanel(op.groupBits, nr, b, it.b + (it.j0 + jr) * bN, bK, bN, scales + (it.j0 + jr) * scale.strides[1],
                         scale.strides[0], scale.strides[1], k, std::min<int64_t>(nr, it.cols - jr), s.bPack);
      for (int64_t ir = 0; ir < it.rows; ir += kGemvMaxRows)
        tile(static_cast<int>(std::min<int64_t>(kGemvMaxRows, it.rows - ir)), groups, s.aQ + ir * lda, lda,
             s.aScale + ir * groups, s.aSum + ir * groups, groups, panel, s.acc + ir * ldc + jr, ldc);
    }
    gemmEpilogueRows(op, context, it, 0, it.rows, s.acc, ldc);
  });
  return Status();
}

// The group-scaled weights of a gemm packed into `isa`'s panels with their scales.
StatusOr<PackedMatrix> packGroupedWeights(const Gemm &op, const uint8_t *b, const uint16_t *scales,
                                          const IsaKernels &isa) {
  const int nr = isa.groupedNr;
  const int64_t panels = ceilDiv(op.n, nr);
  EIN_ASSIGN_OR_RETURN(AlignedBuffer buffer, AlignedBuffer::allocate(static_cast<size_t>(panels * groupsOf(op.k) *
                                                                                         groupedGroupBytes(op.groupBits, nr)),
                                                                     "packed weights", Pages::Huge));
  PackedMatrix matrix{std::move(buffer), nr, op.k, op.n, false};
  matrix.groupBits = op.groupBits;
  const size_t r = op.batch.size();
  const int64_t bK = op.b.strides[r], bN = op.b.strides[r + 1];
  const View &scale = *op.bGroupScale;
  for (int64_t panel = 0; panel < panels; ++panel) {
    const int64_t cols = std::min<int64_t>(nr, op.n - panel * nr);
    packGroupedPanel(op.groupBits, nr, b, op.b.offset + panel * nr * bN, bK, bN,
                     scales + scale.offset + panel * nr * scale.strides[1], scale.strides[0], scale.strides[1], op.k,
                     cols, const_cast<uint8_t *>(matrix.groupPanel(panel * nr)));
  }
  return matrix;
}

}  // namespace ein::detail::cpu
