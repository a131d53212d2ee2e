// The fast f32 gemm: Goto-style blocking around the ISA's register tile.
// Work is split into (batch, row block, column block) items over the
// threads; each item accumulates its mc x nc block of c in thread scratch over
// k in kc steps (so c, which may alias the residual, is written once, after
// the epilogue), with a packed from any strides and b either pre-packed at
// load (weights) or packed per panel here (any strides).
#include <algorithm>
#include <cstring>

#include "kernels/cpu/blocking.hpp"
#include "kernels/cpu/kernels.hpp"

namespace ein::detail::cpu {
namespace {

// Block sizes: an mc x kc block of a, the mc x nc accumulator block and the
// kc x nr panel of b being used stay in L2 (and the register tile's rows of a
// in L1). kc 768 takes a transformer's K = 384 or 768 in one pass, so c is
// written once; measured on Zen 5: 2.5% faster on ViT-S than 256 (where the
// panel fits L1 but c is reloaded), and 2-3% faster on ViT-B than 384.
constexpr int64_t kKc = 768, kMaxMc = 96, kMaxNc = 256, kMaxNr = 64;

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

// dst[p * nr + j] = b[p * sK + j * sN] for kc rows and nr columns (columns
// past `cols` are zero).
void packB(const float *b, int64_t sK, int64_t sN, int64_t kc, int64_t cols, int nr, float *dst) {
  for (int64_t p = 0; p < kc; ++p) {
    float *row = dst + p * nr;
    const float *src = b + p * sK;
    if (sN == 1 && cols == nr) {
      std::memcpy(row, src, sizeof(float) * nr);
      continue;
    }
    for (int64_t j = 0; j < nr; ++j) row[j] = j < cols ? src[j * sN] : 0.0f;
  }
}

}  // namespace

size_t gemmF32PackedScratchFloats() {
  return static_cast<size_t>(kMaxMc * kKc + kKc * kMaxNr + kMaxMc * kMaxNc);
}

Status gemmF32Packed(const Gemm &op, const KernelContext &context) {
  const int64_t m = op.m, n = op.n, k = op.k;
  const int64_t batchCount = op.batch.product();
  if (m == 0 || n == 0 || batchCount == 0) return Status();
  const IsaKernels &isa = *context.isa;
  const int mr = isa.gemmMr, nr = isa.gemmNr;
  const float *a = context.data<const float>(op.a);
  const float *b = context.data<const float>(op.b);
  float *c = context.data<float>(op.c);
  const float *bias = op.bias ? context.data<const float>(*op.bias) : nullptr;
  const float *residual = op.residual ? context.data<const float>(*op.residual) : nullptr;
  const PackedMatrix *packed = op.packedB >= 0 ? &(*context.packed)[op.packedB] : nullptr;
  if (packed && packed->nr != nr) packed = nullptr;  // packed for another ISA (a test forcing one)

  const size_t r = op.batch.size();
  const int64_t aM = op.a.strides[r], aK = op.a.strides[r + 1], bK = op.b.strides[r], bN = op.b.strides[r + 1];
  const int64_t cM = op.c.strides[r], cN = op.c.strides[r + 1];
  const int64_t mc = blockSize(m, kMaxMc, mr), kc = k > 0 ? blockSize(k, kKc, 1) : 0;
  const int64_t mBlocks = ceilDiv(m, mc);
  // Column blocks: as wide as allowed, but as many as it takes to give every
  // thread the same number of items (few items make a small gemm uneven).
  const int64_t panels = ceilDiv(n, nr);
  int64_t nBlocks = ceilDiv(n, kMaxNc);
  for (int64_t more = nBlocks; more <= std::min(panels, 4 * nBlocks); ++more)
    if (batchCount * mBlocks * more % context.threads() == 0) {
      nBlocks = more;
      break;
    }
  const int64_t nc = ceilDiv(panels, nBlocks) * nr;
  nBlocks = ceilDiv(n, nc);

  context.parallelFor(batchCount * mBlocks * nBlocks, [&](int64_t item, int thread) {
    // Which batch element and block; then each operand's offset there.
    const int64_t batchIndex = item / (mBlocks * nBlocks), block = item % (mBlocks * nBlocks);
    const int64_t i0 = block / nBlocks * mc, j0 = block % nBlocks * nc;
    const int64_t rows = std::min(mc, m - i0), cols = std::min(nc, n - j0);
    int64_t aOff = op.a.offset, bOff = op.b.offset, cOff = op.c.offset;
    int64_t biasOff = op.bias ? op.bias->offset : 0, resOff = op.residual ? op.residual->offset : 0;
    for (size_t axis = r, rest = static_cast<size_t>(batchIndex); axis-- > 0;) {
      const int64_t index = static_cast<int64_t>(rest % static_cast<size_t>(op.batch[axis]));
      rest /= static_cast<size_t>(op.batch[axis]);
      aOff += index * op.a.strides[axis];
      bOff += index * op.b.strides[axis];
      cOff += index * op.c.strides[axis];
      if (bias) biasOff += index * op.bias->strides[axis];
      if (residual) resOff += index * op.residual->strides[axis];
    }
    float *aPack = context.threadScratch(thread);
    float *bPack = aPack + kMaxMc * kKc;
    float *acc = bPack + kKc * kMaxNr;
    const int64_t ldc = roundUp(cols, nr);
    if (k == 0) std::memset(acc, 0, sizeof(float) * static_cast<size_t>(roundUp(rows, mr) * ldc));
    for (int64_t p0 = 0; p0 < k; p0 += kc) {
      const int64_t depth = std::min(kc, k - p0);
      // Rows of a that are contiguous along k are read in place by the
      // register tile; only the rest (and a last partial panel) is packed.
      const bool aInPlace = aK == 1;
      for (int64_t ir = 0; ir < rows; ir += mr)
        if (!aInPlace || ir + mr > rows)
          packA(a + aOff + (i0 + ir) * aM + p0 * aK, aM, aK, std::min<int64_t>(mr, rows - ir), depth, mr,
                aPack + ir * depth);
      for (int64_t jr = 0; jr < cols; jr += nr) {
        const float *panel;
        if (packed) {
          panel = packed->panel(j0 + jr) + p0 * nr;
        } else {
          packB(b + bOff + p0 * bK + (j0 + jr) * bN, bK, bN, depth, std::min<int64_t>(nr, cols - jr), nr, bPack);
          panel = bPack;
        }
        // While this panel is used, each row tile pulls a slice of the next
        // weight panel into L2.
        const char *next = nullptr;
        int64_t slice = 0;
        if (packed && jr + nr < cols) {
          next = reinterpret_cast<const char *>(packed->panel(j0 + jr + nr) + p0 * nr);
          slice = roundUp(ceilDiv(depth * nr * static_cast<int64_t>(sizeof(float)), ceilDiv(rows, mr)), 64);
        }
        for (int64_t ir = 0; ir < rows; ir += mr) {
          const char *prefetch = next ? next + ir / mr * slice : nullptr;
          if (aInPlace && ir + mr <= rows)
            isa.gemmTileRows(depth, a + aOff + (i0 + ir) * aM + p0, aM, panel, acc + ir * ldc + jr, ldc, p0 > 0,
                             prefetch, slice);
          else
            isa.gemmTile(depth, aPack + ir * depth, panel, acc + ir * ldc + jr, ldc, p0 > 0, prefetch, slice);
        }
      }
    }
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t row = i0 + i;
      GemmEpilogueRow e{acc + i * ldc, cols, op.alpha, nullptr, 0, op.activation, nullptr, 0,
                        c + cOff + row * cM + j0 * cN, cN};
      if (bias) {
        e.bias = bias + biasOff + row * op.bias->strides[r] + j0 * op.bias->strides[r + 1];
        e.biasStride = op.bias->strides[r + 1];
      }
      if (residual) {
        e.residual = residual + resOff + row * op.residual->strides[r] + j0 * op.residual->strides[r + 1];
        e.residualStride = op.residual->strides[r + 1];
      }
      isa.gemmEpilogue(e);
    }
  });
  return Status();
}

void prepackGemmWeights(Program &program) {
  const int nr = bestKernels().gemmNr;
  for (Step &step : program.steps) {
    auto *op = std::get_if<Gemm>(&step.kernel);
    if (!op || op->batch.product() * op->m * op->n * op->k == 0) continue;
    const Tensor &tensor = program.tensors[op->b.tensor];
    if (tensor.storage != Storage::Weights || tensor.dtype != DType::F32) continue;
    const size_t r = op->batch.size();
    bool shared = true;
    for (size_t axis = 0; axis < r; ++axis) shared &= op->b.strides[axis] == 0 || op->batch[axis] == 1;
    // Only matrices that do not repeat elements: packing then costs no more
    // than the weights' own size.
    if (!shared || op->k * op->n > tensor.numElements) continue;
    const int64_t panels = ceilDiv(op->n, nr);
    StatusOr<AlignedBuffer> buffer =
        AlignedBuffer::allocate(static_cast<size_t>(panels * op->k * nr) * sizeof(float), "packed weights");
    if (!buffer.ok()) continue;  // the kernel packs as it goes instead
    PackedMatrix matrix{std::move(buffer).value(), nr, op->k, op->n};
    const float *b = reinterpret_cast<const float *>(program.weights + tensor.offset) + op->b.offset;
    const int64_t bK = op->b.strides[r], bN = op->b.strides[r + 1];
    auto *out = reinterpret_cast<float *>(matrix.data.data());
    for (int64_t panel = 0; panel < panels; ++panel)
      packB(b + panel * nr * bN, bK, bN, op->k, std::min<int64_t>(nr, op->n - panel * nr), nr,
            out + panel * op->k * nr);
    op->packedB = static_cast<int32_t>(program.packed.size());
    program.packed.push_back(std::move(matrix));
  }
}

}  // namespace ein::detail::cpu
