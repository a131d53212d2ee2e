// The avx512 kernel table. Built with this ISA's compiler flags (runtime/CMakeLists.txt);
// selected only on CPUs that support it.
#include "kernels/cpu/isa/isa_kernels.hpp"
#include "kernels/cpu/isa/simd_avx512.hpp"

namespace ein::detail::cpu {

void useAvx2S8Gemm(IsaKernels &table);  // isa_avx2.cpp: every AVX-512 CPU has AVX2

const IsaKernels &avx512Kernels() {
  static const IsaKernels kernels = [] {
    IsaKernels table = isa::makeKernels<isa::Avx512, 6, 4>("avx512");
    useAvx2S8Gemm(table);
    return table;
  }();
  return kernels;
}

// Built with -mavx512vnni (s8_gemm_avx512vnni.cpp).
void s8GemmTileAvx512vnni(int64_t quads, const uint8_t *a, int64_t lda, const int8_t *b, int32_t *c, int64_t ldc,
                          bool accumulate);
float s8QuantizeRowAvx512vnni(const float *x, int64_t k, int64_t kPadded, uint8_t *q);
void s8DequantizeRowAvx512vnni(const int32_t *acc, const int32_t *columnSums, int32_t offset, float rowScale,
                               const float *columnScale, int64_t n, float *out);

const IsaKernels &avx512VnniKernels() {
  static const IsaKernels kernels = [] {
    IsaKernels table = avx512Kernels();
    table.name = "avx512vnni";
    table.s8GemmMr = 6;
    table.s8GemmNr = 64;
    table.s8ActivationOffset = 128;
    table.s8GemmTile = &s8GemmTileAvx512vnni;
    table.s8QuantizeRow = &s8QuantizeRowAvx512vnni;
    table.s8DequantizeRow = &s8DequantizeRowAvx512vnni;
    return table;
  }();
  return kernels;
}

// Built with -mavx512bf16 (bf16_gemm_avx512bf16.cpp).
void bf16GemmTileAvx512bf16(int64_t pairs, const uint32_t *a, int64_t lda, const uint32_t *b, float *c, int64_t ldc,
                            bool accumulate, const char *prefetch, int64_t prefetchBytes);
void bf16PackRowsAvx512bf16(const float *a, int64_t sM, int64_t sK, int64_t rows, int64_t kc, int mr, uint32_t *dst,
                            int64_t ldd);

const IsaKernels &avx512Bf16Kernels() {
  static const IsaKernels kernels = [] {
    IsaKernels table = avx512VnniKernels();
    table.name = "avx512bf16";
    table.bf16GemmTile = &bf16GemmTileAvx512bf16;
    table.bf16PackRows = &bf16PackRowsAvx512bf16;
    return table;
  }();
  return kernels;
}

}  // namespace ein::detail::cpu
