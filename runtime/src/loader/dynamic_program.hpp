// A model with ranged dims. Loading verifies once what no dim value changes
// (the dims, the size expressions, every reference to them, the checks, the
// inputs that give each dim) and decodes the program at the dims' maxima,
// which must hold its tensors in the planned arena. Each run with new dims
// then binds them from the input shapes (checked against their ranges, each
// other and the checks) and instantiates the program there through the same
// decoder as a static one.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ein/status.hpp"
#include "loader/size_expressions.hpp"
#include "program/program.hpp"

namespace ein::detail {

// The dims of one run and every size expression's value at them.
struct DimBinding {
  std::vector<int64_t> dims, values;
};

// The input shapes of one run: one per input, in the model's order.
using InputShapes = std::span<const std::span<const int64_t>>;

class DynamicProgram {
 public:
  // Loads every model, the one path: verifies `sizes` (decoded from `model`)
  // against the model and fills `base`, which holds the fixed parts, with
  // what the model shows: input and output infos with -1 for dynamic axes,
  // the parameters, the steps and the gemm weights packed at the dims'
  // maxima. `model` and `base` must outlive the result. A model without dims
  // is one whose maxima are its only sizes: `base` becomes the program
  // decoded and verified there, ready to run, and the result is null.
  // Without `prepackWeights` nothing is packed (the GEMMs read b as stored).
  static StatusOr<std::unique_ptr<const DynamicProgram>> load(const schema::Model &model, SizeProgram sizes,
                                                              Program &base, bool prepackWeights = true);

  const SizeProgram &sizes() const { return sizes_; }

  // Reads each dim from its input axis (the position dim: `position`, the
  // session's), without other checks; false when an input's rank differs
  // from the model's (bind() says how).
  bool readDims(InputShapes shapes, int64_t position, std::vector<int64_t> &dims) const;
  // The dims of inputs of these shapes at this session position: each in its
  // range, every input axis equal to its size at them, every check passing.
  // Errors are InvalidArgument and name the input, axis, dim and values.
  StatusOr<DimBinding> bind(InputShapes shapes, int64_t position = 0) const;
  // The program at `binding`: every tensor, view and step verified at these
  // sizes (the arena at the planned offsets), gemm weights pre-packed at load.
  StatusOr<std::unique_ptr<Program>> instantiate(const DimBinding &binding) const;
  // `program` (an instantiation at the same dims but the position) moved to
  // `binding`'s position: only the tensors and steps that depend on the
  // position are decoded and verified again, as instantiate() would. On an
  // error `program` is left part-way and must be discarded.
  Status reposition(Program &program, const DimBinding &binding) const;
  // Whether `program` is an instantiation at `dims` except, perhaps, the position.
  bool sameDimsButPosition(const Program &program, std::span<const int64_t> dims) const;
  // Each output's shape at `binding`.
  std::vector<std::vector<int64_t>> outputShapes(const DimBinding &binding) const;
  // Each input's shape at `dims` (each within its range).
  StatusOr<std::vector<std::vector<int64_t>>> inputShapes(std::span<const int64_t> dims) const;

  // The (size) fields of each input's and output's shape, as written.
  const std::vector<std::vector<int64_t>> &inputFields() const { return inputFields_; }

 private:
  struct AxisOfInput {
    size_t input = 0, axis = 0;
  };
  static constexpr size_t kPositionSource = SIZE_MAX - 1;  // the session's position, not an input

  // The program decoded at the dims' maxima, and the expressions' values there.
  struct MaximaProbe {
    std::unique_ptr<Program> program;
    std::vector<int64_t> values;
  };

  DynamicProgram(const schema::Model &model, SizeProgram sizes, const Program &base)
      : model_(model), sizes_(std::move(sizes)), base_(base) {}
  StatusOr<MaximaProbe> decodeAtMaxima() const;
  StatusOr<MaximaProbe> decodeAtPositionZero() const;
  Status checkWeightsAreFixed(const Program &atMaxima) const;
  Status decodeStepsAtMaxima(MaximaProbe &probe);
  Status findDimSources(const Program &probe);
  void findPositionDependents();
  Status checkInputAxes(InputShapes shapes, std::span<const int64_t> dims, const SizeProgram::Values &values) const;
  StatusOr<std::vector<std::vector<int64_t>>> shapesAt(const std::vector<std::vector<int64_t>> &fields,
                                                       std::span<const int64_t> dims,
                                                       const SizeProgram::Values &values) const;
  std::string axisMismatch(size_t input, size_t axis, int64_t given, int64_t expected,
                           std::span<const int64_t> dims) const;

  const schema::Model &model_;
  SizeProgram sizes_;
  bool prepackWeights_ = true;
  const Program &base_;
  std::vector<std::vector<int64_t>> inputFields_, outputFields_;
  std::vector<AxisOfInput> dimSources_;  // per dim: the first input axis that is exactly it
  std::vector<int32_t> packedByStep_;    // per step: its gemm's entry in base_.packed, or -1
  // The tensors whose shapes depend on the position dim, and the steps that
  // read a (size) field depending on it or view such a tensor.
  std::vector<uint32_t> positionTensors_, positionSteps_;
};

}  // namespace ein::detail
