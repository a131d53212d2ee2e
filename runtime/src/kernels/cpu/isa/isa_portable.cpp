// The portable kernel table. Built with this ISA's compiler flags (runtime/CMakeLists.txt);
// selected only on CPUs that support it.
#include "kernels/cpu/isa/isa_kernels.hpp"
#include "kernels/cpu/isa/simd_portable.hpp"

namespace ein::detail::cpu {

// s8_gemm_portable.cpp
void s8GemmTilePortable(int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c, int64_t ldc,
                        bool accumulate);
float s8QuantizeRowPortable(const float *x, int64_t k, int64_t kPadded, uint8_t *q);
void s8DequantizeRowPortable(const int32_t *acc, const int32_t *columnSums, int32_t offset, float rowScale,
                             const float *columnScale, int64_t n, float *out);

const IsaKernels &portableKernels() {
  static const IsaKernels kernels = [] {
    IsaKernels table = isa::makeKernels<isa::Portable, 4, 8>("portable");
    table.s8GemmMr = 4;
    table.s8GemmNr = 16;
    table.s8GemmTile = &s8GemmTilePortable;
    table.s8QuantizeRow = &s8QuantizeRowPortable;
    table.s8DequantizeRow = &s8DequantizeRowPortable;
    return table;
  }();
  return kernels;
}

}  // namespace ein::detail::cpu
