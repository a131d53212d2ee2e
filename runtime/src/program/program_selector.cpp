#include "program/program_selector.hpp"

#include <algorithm>

namespace ein::detail {

bool ProgramSelector::matches(const Program &program, InputShapes shapes) const {
  if (dims_ != program.dimValues) return false;
  // The same dims give the same expected shapes: the inputs' other axes
  // need only equal the instantiation's.
  for (size_t i = 0; i < shapes.size(); ++i)
    if (!std::equal(shapes[i].begin(), shapes[i].end(), program.inputs[i].shape.begin(),
                    program.inputs[i].shape.end()))
      return false;
  return true;
}

ProgramSelector::Kept *ProgramSelector::find(InputShapes shapes, int64_t position) {
  if (!model_.dynamicProgram()->readDims(shapes, position, dims_)) return nullptr;
  for (Kept &kept : kept_)
    if (matches(*kept.program, shapes)) return &kept;
  return nullptr;
}

StatusOr<const Program *> ProgramSelector::prepare(Kept &kept, Executor &executor) {
  kept.lastUse = ++uses_;
  if (prepared_ == kept.program.get()) return prepared_;
  prepared_ = nullptr;
  if (Status status = executor.prepare(*kept.program); !status.ok()) return status;
  prepared_ = kept.program.get();
  return prepared_;
}

StatusOr<const Program *> ProgramSelector::select(InputShapes shapes, int64_t position, Executor &executor) {
  const DynamicProgram *dynamic = model_.dynamicProgram();
  if (!dynamic) return &model_.program();
  if (Kept *kept = find(shapes, position)) return prepare(*kept, executor);
  StatusOr<DimBinding> binding = dynamic->bind(shapes, position);
  if (!binding.ok()) return binding.status();
  for (auto kept = kept_.begin(); kept != kept_.end(); ++kept) {
    if (!dynamic->sameDimsButPosition(*kept->program, binding->dims)) continue;
    if (prepared_ == kept->program.get()) prepared_ = nullptr;  // its steps change: prepare it again
    if (Status status = dynamic->reposition(*kept->program, binding.value()); !status.ok()) {
      kept_.erase(kept);
      return status;
    }
    ++repositions_;
    return prepare(*kept, executor);
  }
  StatusOr<std::unique_ptr<Program>> instance = dynamic->instantiate(binding.value());
  if (!instance.ok()) return instance.status();
  ++instantiations_;
  if (kept_.size() < kKeptInstantiations) {
    kept_.emplace_back();
  } else {
    // The executor is prepared anew below, so the one it ran may go.
    auto oldest = std::min_element(kept_.begin(), kept_.end(),
                                   [](const Kept &a, const Kept &b) { return a.lastUse < b.lastUse; });
    if (oldest->program.get() == prepared_) prepared_ = nullptr;
    std::rotate(oldest, oldest + 1, kept_.end());
  }
  kept_.back() = Kept{std::move(instance).value(), 0};
  return prepare(kept_.back(), executor);
}

}  // namespace ein::detail
