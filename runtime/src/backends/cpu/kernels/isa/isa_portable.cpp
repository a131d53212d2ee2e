// The portable kernel table. Built with this ISA's compiler flags (runtime/CMakeLists.txt);
// selected only on CPUs that support it.
#include "backends/cpu/kernels/isa/grouped_gemm.hpp"
#include "backends/cpu/kernels/isa/isa_kernels.hpp"
#include "backends/cpu/kernels/isa/s8_gemm.hpp"
#include "backends/cpu/kernels/isa/simd_portable.hpp"

namespace ein::detail::cpu {

const IsaKernels &portableKernels() {
  static const IsaKernels kernels = [] {
    IsaKernels table = isa::makeKernels<isa::Portable, 4, 8>("portable");
    EIN_USE_S8_GEMM(table, Portable, 4, 16, 0);
    EIN_USE_GROUPED_GEMM(table, Portable, 8, Portable);
    return table;
  }();
  return kernels;
}

}  // namespace ein::detail::cpu
