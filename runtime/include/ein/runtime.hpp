// The ein runtime's C++ API: load an artifact, bind inputs, run, read outputs.
//
//   auto model = ein::Model::load("vit.einb");          // maps and verifies
//   auto session = ein::Session::create(*model);
//   session.value()->setInput("img", ein::DType::F32, shape, data, bytes);
//   session.value()->run();
//   const void *logits = session.value()->outputData(0);
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ein/status.hpp"

namespace ein {

enum class DType : uint8_t { F32 = 0, F16, BF16, I32, I64, Bool };

size_t dtypeSize(DType dtype);
const char *dtypeName(DType dtype);  // "f32", "i32", "bool", ...

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t upperBound = 0;  // integer inputs: valid ids are [0, upperBound); 0 when unknown

  int64_t numElements() const;
  size_t byteSize() const { return static_cast<size_t>(numElements()) * dtypeSize(dtype); }
};

// What one step of the program does, for ein-inspect.
struct StepInfo {
  std::string op;  // "gemm", "elementwise", "softmax", "reduce", "gather", "copy"
  std::string location;
  std::map<std::string, std::vector<int64_t>> sizes;  // the kernel's key sizes
};

namespace detail {
struct Program;
}

class Model {
 public:
  // Maps the artifact at `path` read-only and verifies all of it.
  static StatusOr<std::shared_ptr<const Model>> load(const std::string &path);
  // Verifies an artifact held in memory (tests, embedding).
  static StatusOr<std::shared_ptr<const Model>> fromMemory(std::vector<uint8_t> bytes, std::string name = "<memory>");

  ~Model();

  const std::vector<TensorInfo> &inputs() const;
  const std::vector<TensorInfo> &outputs() const;
  const std::vector<TensorInfo> &params() const;
  const std::vector<StepInfo> &steps() const;
  uint64_t arenaBytes() const;
  uint64_t weightsBytes() const;
  uint32_t formatVersion() const;
  const std::string &target() const;
  const std::string &producer() const;
  const std::string &source() const;

  const detail::Program &program() const { return *program_; }

 private:
  explicit Model(std::unique_ptr<detail::Program> program);
  static StatusOr<std::shared_ptr<const Model>> wrap(StatusOr<std::unique_ptr<detail::Program>> program,
                                                     const std::string &name);
  std::unique_ptr<detail::Program> program_;
};

struct SessionOptions {
  int threads = 1;
  std::string device = "cpu";
};

// One execution context of a model: owns the arena and the input and output
// buffers (inputs are copied in). Not thread-safe; create one per thread.
class Session {
 public:
  static StatusOr<std::unique_ptr<Session>> create(std::shared_ptr<const Model> model, SessionOptions options = {});

  // Copies one input; its dtype and shape must match the model's exactly.
  Status setInput(std::string_view name, DType dtype, const std::vector<int64_t> &shape, const void *data,
                  size_t bytes);
  Status run();

  const Model &model() const { return *model_; }
  // Index of the named output, or -1.
  int outputIndex(std::string_view name) const;
  const void *outputData(size_t index) const { return outputs_.at(index).data(); }

 private:
  Session(std::shared_ptr<const Model> model, SessionOptions options);

  std::shared_ptr<const Model> model_;
  SessionOptions options_;
  std::unique_ptr<std::byte[], void (*)(std::byte *)> arena_;
  std::vector<std::vector<std::byte>> inputs_;
  std::vector<bool> inputSet_;
  std::vector<std::vector<std::byte>> outputs_;
};

}  // namespace ein
