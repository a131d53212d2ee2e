// What one run computes with: the executor (the arena, the kernels' scratch,
// the state), the program at the dims of the context's last run
// (ProgramSelector), a host buffer per input and output, and the buffers the
// next run reads and writes. A Session owns one; a Runner pools them, one per
// call in flight. A Session copies each input into the context's buffer and
// keeps its outputs there; a Runner call binds the caller's memory where it is
// aligned to the element size and goes through the context's buffers
// otherwise. Created once, so that a run allocates nothing but what a dynamic
// model's larger dims need (the buffers grow to the largest run seen).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ein/model.hpp"
#include "ein/session.hpp"
#include "ein/status.hpp"
#include "backends/executor.hpp"
#include "program/program.hpp"
#include "program/program_selector.hpp"
#include "util/aligned_buffer.hpp"

namespace ein::detail {

class ExecutionContext {
 public:
  // An executor for `options`' device and a buffer per input and output: of
  // its one size for a static model, empty for a dynamic one. Each buffer is
  // bound as its input's or output's. `model` must outlive the context.
  static StatusOr<std::unique_ptr<ExecutionContext>> create(const Model &model, const SessionOptions &options);

  // The program for inputs of the shapes set with setInputShape, with the
  // states at `position` rows (a model with state; 0 starts a new sequence),
  // prepared on the executor. A static model's shapes were checked already.
  StatusOr<const Program *> select(int64_t position);
  // The program selected last (ProgramSelector::current).
  const Program *current() const { return selector_.current(); }
  size_t instantiations() const { return selector_.instantiations(); }

  // Input `index`'s shape for the next select(); `shape` must stay valid until then.
  void setInputShape(size_t index, std::span<const int64_t> shape) { inputShapes_[index] = shape; }

  // The context's buffer of input (output) `index`, grown to hold `bytes`
  // and bound for the next run; its memory, or ResourceExhausted naming the
  // tensor. Growing drops the contents.
  StatusOr<std::byte *> stageInput(size_t index, size_t bytes);
  StatusOr<std::byte *> stageOutput(size_t index, size_t bytes);
  // Binds the caller's memory instead, for the next run.
  void bindInput(size_t index, const std::byte *data) { inputPointers_[index] = data; }
  void bindOutput(size_t index, std::byte *data) { outputPointers_[index] = data; }
  // What the next run writes output `index` to.
  std::byte *boundOutput(size_t index) const { return outputPointers_[index]; }
  // The context's own buffer of input `index` (what a Session's input() gives).
  const AlignedBuffer &inputBuffer(size_t index) const { return inputs_[index]; }
  // The context's own buffer of output `index` (what a Session's output() gives).
  const AlignedBuffer &outputBuffer(size_t index) const { return outputs_[index]; }

  // Runs the selected program on the bound buffers.
  Status run() { return executor_->run(inputPointers_, outputPointers_); }
  // Overwrites the states with those of `other`, a context of the same model.
  Status copyStateFrom(ExecutionContext &other) { return executor_->copyStateFrom(*other.executor_); }

 private:
  explicit ExecutionContext(const Model &model) : model_(model), selector_(model) {}

  const Model &model_;
  std::unique_ptr<Executor> executor_;
  ProgramSelector selector_;
  std::vector<AlignedBuffer> inputs_, outputs_;  // 64-byte aligned, like the arena
  std::vector<std::span<const int64_t>> inputShapes_;
  std::vector<const std::byte *> inputPointers_;
  std::vector<std::byte *> outputPointers_;
};

}  // namespace ein::detail
