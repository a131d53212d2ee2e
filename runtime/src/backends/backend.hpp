// A backend is everything one kind of device needs to run a verified
// program: its weight preparation (once per model, at load), its executor
// (one per session or run context) and, behind those, its kernels. The CPU
// backend is part of the runtime; the CUDA backend is a shared library,
// libein_cuda.so, that the runtime loads (dlopen) the first time it needs it,
// so a CPU-only runtime neither links nor loads CUDA.
//
// Where the runtime looks for libein_cuda.so, first match wins:
//   1. $EIN_CUDA_BACKEND, the library's path (nothing else is tried then);
//   2. the folder of the binary that holds the runtime (ein-run, a program
//      embedding the runtime, the Python module), then ../lib beside it;
//   3. the dynamic linker's own search: LD_LIBRARY_PATH, the binary's
//      RUNPATH, the system's folders.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ein/session.hpp"
#include "ein/status.hpp"
#include "backends/executor.hpp"
#include "program/program.hpp"

namespace ein::detail {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  // How many devices of this kind a session can use, or why none can
  // (StatusCode::Unimplemented: "no CUDA device: ...").
  virtual StatusOr<int> deviceCount() const = 0;
  // Once per model, after verification, for every session to share: the
  // CPU packs the gemm weights for its kernels; CUDA uploads weights per
  // executor, so it prepares nothing here. `eligible` (one flag per step, or
  // null for every step) limits it to the steps whose weights no dim changes.
  virtual void prepareWeights(Program &program, const std::vector<bool> *eligible) const = 0;
  // An executor for `program` (the model's, which must outlive it) on
  // `options`' device; it allocates the arena and what no size changes.
  virtual StatusOr<std::unique_ptr<Executor>> createExecutor(const Program &program,
                                                             const SessionOptions &options) const = 0;
};

// The backend of `device`: the built-in CPU backend, or the CUDA backend,
// loaded on first use. Fails (StatusCode::Unimplemented) with what was
// tried when the library is missing or was built for another runtime.
StatusOr<const Backend *> backendFor(Device device);

// The CPU backend (backends/cpu), always built in.
const Backend &cpuBackend();

// Once per model at load: the weight preparation of the backend that will
// run it (the artifact's target; only the CPU's packs). A backend that cannot
// be loaded prepares nothing: sessions then fail with the reason.
void prepareWeightsForTarget(Program &program, const std::vector<bool> *eligible);

// What the runtime and a backend library check of each other before the
// library is used: the interface's version (bumped when Backend, Executor or
// the Program structs change) and the sizes of the structs they share, so a
// library from another build is refused rather than misread.
struct BackendAbi {
  uint32_t version = 2;  // 2: the steps come from the kern ops' definitions (Variance added)
  uint32_t program = sizeof(Program), step = sizeof(Step), tensor = sizeof(Tensor), kernel = sizeof(Kernel),
           packed = sizeof(PackedMatrix), options = sizeof(SessionOptions), status = sizeof(Status);
  bool operator==(const BackendAbi &) const = default;
};

// The function a backend library exports (extern "C"): its backend, or null
// when `runtime` differs from the ABI the library was built with.
using BackendEntry = const Backend *(const BackendAbi &runtime);
inline constexpr const char *kCudaBackendEntry = "ein_cuda_backend";
inline constexpr const char *kCudaBackendLibrary = "libein_cuda.so";

}  // namespace ein::detail
