// The avx2 kernel table. Built with this ISA's compiler flags (runtime/CMakeLists.txt);
// selected only on CPUs that support it.
#include "kernels/cpu/isa/isa_kernels.hpp"
#include "kernels/cpu/isa/simd_avx2.hpp"

namespace ein::detail::cpu {

const IsaKernels &avx2Kernels() {
  static const IsaKernels kernels = isa::makeKernels<isa::Avx2, 6, 2>("avx2");
  return kernels;
}

}  // namespace ein::detail::cpu
