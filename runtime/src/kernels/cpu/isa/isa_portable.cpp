// The portable kernel table. Built with this ISA's compiler flags (runtime/CMakeLists.txt);
// selected only on CPUs that support it.
#include "kernels/cpu/isa/isa_kernels.hpp"
#include "kernels/cpu/isa/simd_portable.hpp"

namespace ein::detail::cpu {

const IsaKernels &portableKernels() {
  static const IsaKernels kernels = isa::makeKernels<isa::Portable, 4, 8>("portable");
  return kernels;
}

}  // namespace ein::detail::cpu
