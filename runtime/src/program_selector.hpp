// The program one execution context (a session, a runner's context) runs.
// A static model has one, prepared when the executor was created, and this
// costs nothing. A dynamic model's context keeps the instantiation at the
// dims of its last inputs: the same dims again cost one read of the dims and
// a comparison of the shapes; new dims are bound (checked), instantiated and
// prepared on the executor, and replace the old instantiation.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "ein/model.hpp"
#include "executor/executor.hpp"
#include "loader/dynamic_program.hpp"
#include "program.hpp"

namespace ein::detail {

class ProgramSelector {
 public:
  explicit ProgramSelector(const Model &model) : model_(model) {}

  // The program for inputs of `shapes` (one per input, in order), prepared on
  // `executor`. A static model's shapes were checked by the caller already.
  StatusOr<const Program *> select(InputShapes shapes, Executor &executor);
  // The program selected last, or null before the first select() of a
  // dynamic model (and after a failed one).
  const Program *current() const { return model_.dynamicProgram() ? instance_.get() : &model_.program(); }
  // How many times the program was instantiated (for tests: the same shapes
  // twice instantiate once).
  size_t instantiations() const { return instantiations_; }

 private:
  bool sameAsCurrent(InputShapes shapes);

  const Model &model_;
  std::unique_ptr<const Program> instance_;
  std::vector<int64_t> dims_;  // scratch for reading the dims, kept to avoid allocating
  size_t instantiations_ = 0;
};

}  // namespace ein::detail
