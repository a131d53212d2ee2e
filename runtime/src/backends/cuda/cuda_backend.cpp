// libein_cuda.so's entry point: the CUDA backend's table, which the runtime
// loads (backends/backend.cpp) the first time a session runs on CUDA. The
// library exports nothing else (cuda_backend.map).
#include "backends/backend_table.hpp"
#include "backends/cuda/cuda_executor.hpp"

namespace ein::detail {
namespace {

struct CudaBackend {
  static constexpr Device kDevice = Device::Cuda;
  static StatusOr<int> deviceCount() { return cudaDeviceCount(); }
  // Each executor uploads the weights to its device; nothing is shared on the host.
  static void prepareWeights(Program &, const bool *) {}
  static StatusOr<std::unique_ptr<ExecutorImplementation>> createExecutor(const Program &program,
                                                                          const SessionOptions &options,
                                                                          const StateSlots &slots) {
    if (slots.sequences != 1 || slots.cacheBlocks != 0)
      return Status(StatusCode::Unimplemented, "CUDA runs one sequence per session for now");
    return createCudaExecutor(program, options);
  }
};

}  // namespace
}  // namespace ein::detail

extern "C" __attribute__((visibility("default"))) const ein_backend_table *ein_backend_entry(
    const ein_backend_layout *runtime) {
  const ein_backend_table &table = ein::detail::backendTable<ein::detail::CudaBackend>();
  return runtime && ein::detail::sameLayout(*runtime, table.layout) ? &table : nullptr;
}
