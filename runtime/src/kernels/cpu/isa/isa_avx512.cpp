// The avx512 kernel table. Built with this ISA's compiler flags (runtime/CMakeLists.txt);
// selected only on CPUs that support it.
#include "kernels/cpu/isa/isa_kernels.hpp"
#include "kernels/cpu/isa/simd_avx512.hpp"

namespace ein::detail::cpu {

const IsaKernels &avx512Kernels() {
  static const IsaKernels kernels = isa::makeKernels<isa::Avx512, 6, 4>("avx512");
  return kernels;
}

}  // namespace ein::detail::cpu
