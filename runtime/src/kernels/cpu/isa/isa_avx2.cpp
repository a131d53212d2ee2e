// The avx2 kernel table. Built with this ISA's compiler flags (runtime/CMakeLists.txt);
// selected only on CPUs that support it.
#include "kernels/cpu/isa/isa_kernels.hpp"
#include "kernels/cpu/isa/simd_avx2.hpp"

namespace ein::detail::cpu {

// s8_gemm_avx2.cpp (built with -mavx2)
void s8GemmTileAvx2(int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c, int64_t ldc,
                    bool accumulate);
float s8QuantizeRowAvx2(const float *x, int64_t k, int64_t kPadded, uint8_t *q);
void s8DequantizeRowAvx2(const int32_t *acc, const int32_t *columnSums, int32_t offset, float rowScale,
                         const float *columnScale, int64_t n, float *out);

void useAvx2S8Gemm(IsaKernels &table) {
  table.s8GemmMr = 4;
  table.s8GemmNr = 16;
  table.s8ActivationOffset = 0;
  table.s8GemmTile = &s8GemmTileAvx2;
  table.s8QuantizeRow = &s8QuantizeRowAvx2;
  table.s8DequantizeRow = &s8DequantizeRowAvx2;
}

const IsaKernels &avx2Kernels() {
  static const IsaKernels kernels = [] {
    IsaKernels table = isa::makeKernels<isa::Avx2, 6, 2>("avx2");
    useAvx2S8Gemm(table);
    return table;
  }();
  return kernels;
}

}  // namespace ein::detail::cpu
