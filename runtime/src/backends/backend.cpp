#include "backends/backend.hpp"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "backends/backend_table.hpp"
#include "util/status_macros.hpp"

namespace ein::detail {
namespace {

struct ObjectSearch {
  uintptr_t address = 0;
  std::string path;
  bool found = false;
};

// dl_iterate_phdr's callback: the object whose loaded segments hold `address`.
int findObject(dl_phdr_info *info, size_t, void *data) {
  auto *search = static_cast<ObjectSearch *>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &segment = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + segment.p_vaddr;
    if (segment.p_type == PT_LOAD && search->address >= start && search->address - start < segment.p_memsz) {
      search->path = info->dlpi_name ? info->dlpi_name : "";
      search->found = true;
      return 1;
    }
  }
  return 0;
}

// The folder of the binary that holds the runtime: the executable (whose
// name the loader leaves empty) or the shared object (the Python module).
std::string runtimeFolder() {
  ObjectSearch search;
  search.address = reinterpret_cast<uintptr_t>(&runtimeFolder);
  dl_iterate_phdr(findObject, &search);
  std::string path = search.path;
  if (search.found && path.empty()) {
    char exe[PATH_MAX];
    const ssize_t length = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (length > 0) path.assign(exe, static_cast<size_t>(length));
  }
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// Turns a table call's report into a Status: what the backend said, or that
// it failed without a word, or with a code no Status has.
class ErrorReport {
 public:
  ErrorReport() = default;
  ErrorReport(const ErrorReport &) = delete;
  ErrorReport &operator=(const ErrorReport &) = delete;
  const ein_backend_error *sink() { return &error_; }
  Status status() const {
    if (!reported_) return Status(StatusCode::Internal, "the backend failed without saying why");
    return status_;
  }
  Status of(int32_t result) const { return result == 0 ? Status() : status(); }

 private:
  static void report(void *context, int32_t code, const char *message, size_t length) {
    auto *self = static_cast<ErrorReport *>(context);
    const bool known = code > static_cast<int32_t>(StatusCode::Ok) && code <= static_cast<int32_t>(StatusCode::Busy);
    self->status_ = Status(known ? static_cast<StatusCode>(code) : StatusCode::Internal,
                           message ? std::string(message, length) : std::string());
    self->reported_ = true;
  }
  ein_backend_error error_{this, &ErrorReport::report};
  Status status_;
  bool reported_ = false;
};

Status unavailable(std::string why) {
  return Status(StatusCode::Unimplemented, "device cuda is not available: " + std::move(why));
}

// The backend of the library dlopen gave; `library` names it in messages.
StatusOr<const Backend *> backendOf(void *handle, const std::string &library) {
  // Never closed: the backend's executors live as long as their sessions.
  auto *entry = reinterpret_cast<ein_backend_entry_fn *>(dlsym(handle, EIN_BACKEND_ENTRY_NAME));
  if (!entry) return unavailable(fmt::format("{} is not an ein backend library (no {})", library, EIN_BACKEND_ENTRY_NAME));
  const ein_backend_layout layout = thisBuildLayout();
  const ein_backend_table *table = entry(&layout);
  if (!table || !sameLayout(table->layout, layout))
    return unavailable(fmt::format("{} was built for another version of the runtime; use the {} of the same build",
                                   library, kCudaBackendLibrary));
  if (table->device != static_cast<int32_t>(Device::Cuda) || !table->device_count || !table->create_executor ||
      !table->destroy_executor || !table->prepare || !table->run || !table->copy_state)
    return unavailable(fmt::format("{} does not give a complete CUDA backend table", library));
  static const Backend backend(*table);
  return &backend;
}

// A library that is there but cannot be loaded (a missing libcublasLt.so,
// say) is the answer, not a reason to look further.
StatusOr<const Backend *> openBackend(const std::string &path) {
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return unavailable(fmt::format("the CUDA backend library could not be loaded: {}", dlerror()));
  return backendOf(handle, path);
}

// Where backend.hpp says, in that order.
StatusOr<const Backend *> loadCudaBackend() {
  if (const char *path = std::getenv("EIN_CUDA_BACKEND"); path && *path) {
    if (access(path, F_OK) != 0) return unavailable(fmt::format("EIN_CUDA_BACKEND names {}, which does not exist", path));
    return openBackend(path);
  }
  std::string tried;
  if (const std::string folder = runtimeFolder(); !folder.empty())
    for (const std::string &candidate :
         {folder + "/" + kCudaBackendLibrary, folder + "/../lib/" + kCudaBackendLibrary}) {
      if (access(candidate.c_str(), F_OK) == 0) return openBackend(candidate);
      tried += candidate + ", ";
    }
  void *handle = dlopen(kCudaBackendLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return unavailable(fmt::format(
        "no CUDA backend library {} (tried {}then the dynamic linker: {}); it is built beside the runtime when nvcc "
        "is found (-DEIN_ENABLE_CUDA), and EIN_CUDA_BACKEND may name its path",
        kCudaBackendLibrary, tried, dlerror()));
  return backendOf(handle, kCudaBackendLibrary);
}

}  // namespace

StatusOr<const Backend *> backendFor(Device device) {
  switch (device) {
    case Device::Cpu: {
      static const Backend cpu(cpuBackendTable());
      return &cpu;
    }
    case Device::Cuda: {
      // Loaded once per process, on first use; a failure is remembered too.
      static const StatusOr<const Backend *> cuda = loadCudaBackend();
      return cuda;
    }
  }
  return Status(StatusCode::InvalidArgument, "unknown device");
}

void prepareWeightsForTarget(Program &program, const std::vector<bool> *eligible) {
  if (StatusOr<const Backend *> backend = backendFor(program.target); backend.ok())
    backend.value()->prepareWeights(program, eligible);
}

StatusOr<int> Backend::deviceCount() const {
  ErrorReport error;
  const int32_t count = table_.device_count(error.sink());
  if (count < 0) return error.status();
  return static_cast<int>(count);
}

void Backend::prepareWeights(Program &program, const std::vector<bool> *eligible) const {
  if (!table_.prepare_weights) return;
  std::unique_ptr<bool[]> flags;
  if (eligible) {
    flags = std::make_unique<bool[]>(eligible->size());
    std::copy(eligible->begin(), eligible->end(), flags.get());
  }
  table_.prepare_weights(reinterpret_cast<ein_backend_program *>(&program), flags.get(),
                         eligible ? eligible->size() : program.steps.size());
}

StatusOr<std::unique_ptr<Executor>> Backend::createExecutor(const Program &program, const SessionOptions &options,
                                                            const StateSlots &slots) const {
  ErrorReport error;
  if (slots.blockRows < 0 || slots.blockRows > UINT32_MAX)
    return Status(StatusCode::InvalidArgument, fmt::format("{} rows a block", slots.blockRows));
  const ein_backend_executor_options c{options.threads, options.deviceIndex, slots.sequences,
                                       static_cast<uint32_t>(slots.blockRows), slots.cacheBlocks,
                                       reinterpret_cast<const ein_backend_program *>(slots.probe)};
  ein_backend_executor *handle =
      table_.create_executor(reinterpret_cast<const ein_backend_program *>(&program), &c, error.sink());
  if (!handle) return error.status();
  return std::make_unique<Executor>(table_, handle);
}

Status Executor::prepare(const Program &program) {
  ErrorReport error;
  return error.of(table_.prepare(handle_, reinterpret_cast<const ein_backend_program *>(&program), error.sink()));
}

Status Executor::run(std::span<const std::byte *const> inputs, std::span<std::byte *const> outputs) {
  ErrorReport error;
  return error.of(table_.run(handle_, reinterpret_cast<const void *const *>(inputs.data()), inputs.size(),
                             reinterpret_cast<void *const *>(outputs.data()), outputs.size(), error.sink()));
}

Status Executor::copyStateFrom(Executor &source) {
  if (&source.table_ != &table_) return Status(StatusCode::Internal, "the sessions' states are on different devices");
  ErrorReport error;
  return error.of(table_.copy_state(handle_, source.handle_, error.sink()));
}

Status Executor::copySlot(uint32_t target, uint32_t source) {
  if (!table_.copy_slot) return Status(StatusCode::Unimplemented, "this device runs one sequence per run");
  ErrorReport error;
  return error.of(table_.copy_slot(handle_, target, source, error.sink()));
}

Status Executor::copyBlock(uint32_t target, uint32_t source) {
  if (!table_.copy_block) return Status(StatusCode::Unimplemented, "this device keeps no paged cache");
  ErrorReport error;
  return error.of(table_.copy_block(handle_, target, source, error.sink()));
}

Status Executor::runSequences(const Program &all, std::span<const SequenceSlice> sequences,
                              std::span<const std::byte *const> inputs, std::span<std::byte *const> outputs,
                              const RowsRead *rowsRead) {
  if (!table_.run_sequences) return Status(StatusCode::Unimplemented, "this device runs one sequence per run");
  std::vector<ein_backend_sequence> c(sequences.size());
  for (size_t i = 0; i < sequences.size(); ++i)
    c[i] = {reinterpret_cast<const ein_backend_program *>(sequences[i].program), sequences[i].firstToken,
            sequences[i].slot, sequences[i].keptSlot, sequences[i].blocks.data(),
            static_cast<uint32_t>(sequences[i].blocks.size()),
            reinterpret_cast<const ein_backend_program *>(sequences[i].keptGroup), sequences[i].keptGroupSize};
  ein_backend_rows_read read{};
  if (rowsRead)
    read = {reinterpret_cast<const ein_backend_program *>(rowsRead->program), rowsRead->firstStep,
            rowsRead->carried.data(), rowsRead->carried.size(), rowsRead->rows.data(), rowsRead->rows.size()};
  ErrorReport error;
  return error.of(table_.run_sequences(handle_, reinterpret_cast<const ein_backend_program *>(&all), c.data(),
                                       c.size(), reinterpret_cast<const void *const *>(inputs.data()), inputs.size(),
                                       reinterpret_cast<void *const *>(outputs.data()), outputs.size(),
                                       rowsRead ? &read : nullptr, error.sink()));
}

StatusOr<std::unique_ptr<Executor>> createExecutor(const Program &program, const SessionOptions &options,
                                                   const StateSlots &slots) {
  EIN_ASSIGN_OR_RETURN(const Backend *backend, backendFor(options.device));
  StatusOr<std::unique_ptr<Executor>> executor = backend->createExecutor(program, options, slots);
  if (!executor.ok() || program.dynamicBase) return executor;
  if (Status status = executor.value()->prepare(program); !status.ok()) return status;
  return executor;
}

}  // namespace ein::detail
