// The avx2 kernel table. Built with this ISA's compiler flags (runtime/CMakeLists.txt);
// selected only on CPUs that support it.
#include "backends/cpu/kernels/isa/grouped_gemm.hpp"
#include "backends/cpu/kernels/isa/isa_kernels.hpp"
#include "backends/cpu/kernels/isa/s8_gemm.hpp"
#include "backends/cpu/kernels/isa/simd_avx2.hpp"

namespace ein::detail::cpu {

const IsaKernels &avx2Kernels() {
  static const IsaKernels kernels = [] {
    IsaKernels table = isa::makeKernels<isa::Avx2, 6, 2>("avx2");
    EIN_USE_S8_GEMM(table, Avx2, 4, 16, 0);
    EIN_USE_GROUPED_GEMM(table, Avx2, 8, Avx2);
    return table;
  }();
  return kernels;
}

// s8_gemm_avxvnni.cpp and grouped_gemm_avxvnni.cpp, built with -mavxvnni.
const IsaKernels &avx2VnniKernels() {
  static const IsaKernels kernels = [] {
    IsaKernels table = avx2Kernels();
    table.name = "avx2vnni";
    EIN_USE_S8_GEMM(table, Avxvnni, 6, 16, 128);
    EIN_USE_GROUPED_GEMM(table, Avxvnni, 8, Avx2);
    return table;
  }();
  return kernels;
}

}  // namespace ein::detail::cpu
