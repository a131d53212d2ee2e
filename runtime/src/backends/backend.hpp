// A backend is everything one kind of device needs to run a verified
// program: its weight preparation (once per model, at load), its executor
// (one per session or run context) and, behind those, its kernels. The CPU
// backend is part of the runtime; the CUDA backend is a shared library,
// libein_cuda.so, that the runtime loads (dlopen) the first time it needs it,
// so a CPU-only runtime neither links nor loads CUDA. Both answer through one
// plain C table (backend_interface.h; written in C++ with backend_table.hpp).
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
#include "backends/backend_interface.h"
#include "backends/executor.hpp"
#include "program/program.hpp"

namespace ein::detail {

// A backend as the runtime uses it: its C table (backend_interface.h), with
// each call's report turned into a Status.
class Backend {
 public:
  explicit Backend(const ein_backend_table &table) : table_(table) {}
  Device device() const { return static_cast<Device>(table_.device); }
  // How many devices of this kind a session can use, or why none can
  // (StatusCode::Unimplemented: "no CUDA device: ...").
  StatusOr<int> deviceCount() const;
  // Once per model, after verification, for every session to share: the
  // CPU packs the gemm weights for its kernels; CUDA uploads weights per
  // executor, so it prepares nothing here. `eligible` (one flag per step, or
  // null for every step) limits it to the steps whose weights no dim changes.
  void prepareWeights(Program &program, const std::vector<bool> *eligible) const;
  // An executor for `program` (the model's, which must outlive it) on
  // `options`' device; it allocates the arena and what no size changes.
  StatusOr<std::unique_ptr<Executor>> createExecutor(const Program &program, const SessionOptions &options,
                                                     const StateSlots &slots = {}) const;

 private:
  const ein_backend_table &table_;
};

// The backend of `device`: the built-in CPU backend, or the CUDA backend,
// loaded on first use. Fails (StatusCode::Unimplemented) with what was
// tried when the library is missing or was built for another runtime.
StatusOr<const Backend *> backendFor(Device device);

// The CPU backend's table (backends/cpu), always built in.
const ein_backend_table &cpuBackendTable();

// Once per model at load: the weight preparation of the backend that will
// run it (the artifact's target; only the CPU's packs). A backend that cannot
// be loaded prepares nothing: sessions then fail with the reason.
void prepareWeightsForTarget(Program &program, const std::vector<bool> *eligible);

inline constexpr const char *kCudaBackendLibrary = "libein_cuda.so";

}  // namespace ein::detail
