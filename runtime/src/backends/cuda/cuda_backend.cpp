// libein_cuda.so's entry point: the CUDA backend, which the runtime loads
// (backends/backend.cpp) the first time a session runs on CUDA. The library
// exports nothing else (cuda_backend.map).
#include "backends/cuda/cuda_executor.hpp"
#include "backends/backend.hpp"

namespace ein::detail {
namespace {

class CudaBackend final : public Backend {
 public:
  Device device() const override { return Device::Cuda; }
  StatusOr<int> deviceCount() const override { return cudaDeviceCount(); }
  // Each executor uploads the weights to its device; nothing is shared on the host.
  void prepareWeights(Program &, const std::vector<bool> *) const override {}
  StatusOr<std::unique_ptr<Executor>> createExecutor(const Program &program,
                                                     const SessionOptions &options) const override {
    return createCudaExecutor(program, options);
  }
};

}  // namespace
}  // namespace ein::detail

extern "C" __attribute__((visibility("default"))) const ein::detail::Backend *ein_cuda_backend(
    const ein::detail::BackendAbi &runtime) {
  static const ein::detail::CudaBackend backend;
  return runtime == ein::detail::BackendAbi{} ? &backend : nullptr;
}
