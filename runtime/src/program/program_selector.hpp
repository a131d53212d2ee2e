// The program one execution context (a session, a runner's context) runs.
// A static model has one, prepared when the executor was created, and this
// costs nothing. A dynamic model's context keeps the instantiations at the
// dims of its last few distinct input shapes: the same dims as the last run
// cost one read of the dims and a comparison of the shapes; dims seen
// recently re-prepare the executor for their kept instantiation; new dims
// are bound (checked), instantiated and prepared, replacing the least
// recently used instantiation when kKeptInstantiations are kept. A model
// with state keeps one instantiation per dims but its position: each decode
// step moves it to the new position (DynamicProgram::reposition), decoding
// again only the steps the position changes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ein/model.hpp"
#include "backends/executor.hpp"
#include "loader/dynamic_program.hpp"
#include "program/program.hpp"

namespace ein::detail {

class ProgramSelector {
 public:
  // Enough for a server that buckets its shapes into a few sizes; each is a
  // decoded program (steps and tensors, no data).
  static constexpr size_t kKeptInstantiations = 4;

  explicit ProgramSelector(const Model &model) : model_(model) {}

  // The program for inputs of `shapes` (one per input, in order), prepared on
  // `executor`. A static model's shapes were checked by the caller already.
  // `position` is the session's (its states' row count), for a model with state.
  StatusOr<const Program *> select(InputShapes shapes, int64_t position, Executor &executor);
  // The program selected last, or null before the first select() of a
  // dynamic model (and after a failed one).
  const Program *current() const { return model_.dynamicProgram() ? prepared_ : &model_.program(); }
  // How many times the program was instantiated (for tests: the same shapes
  // twice instantiate once).
  size_t instantiations() const { return instantiations_; }
  // How many times a kept instantiation was moved to a new position.
  size_t repositions() const { return repositions_; }

 private:
  struct Kept {
    std::unique_ptr<Program> program;  // this context's own: reposition() changes it
    uint64_t lastUse = 0;
  };

  bool matches(const Program &program, InputShapes shapes) const;
  Kept *find(InputShapes shapes, int64_t position);
  StatusOr<const Program *> prepare(Kept &kept, Executor &executor);

  const Model &model_;
  std::vector<Kept> kept_;
  const Program *prepared_ = nullptr;  // the one the executor runs
  std::vector<int64_t> dims_;          // scratch for reading the dims, kept to avoid allocating
  uint64_t uses_ = 0;
  size_t instantiations_ = 0, repositions_ = 0;
};

}  // namespace ein::detail
