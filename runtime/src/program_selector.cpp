#include "program_selector.hpp"

#include <algorithm>

namespace ein::detail {

bool ProgramSelector::sameAsCurrent(InputShapes shapes) {
  if (!instance_ || !model_.dynamicProgram()->readDims(shapes, dims_) || dims_ != instance_->dimValues) return false;
  // The same dims give the same expected shapes: the inputs' other axes
  // need only equal the instantiation's.
  for (size_t i = 0; i < shapes.size(); ++i)
    if (!std::equal(shapes[i].begin(), shapes[i].end(), instance_->inputs[i].shape.begin(),
                    instance_->inputs[i].shape.end()))
      return false;
  return true;
}

StatusOr<const Program *> ProgramSelector::select(InputShapes shapes, Executor &executor) {
  const DynamicProgram *dynamic = model_.dynamicProgram();
  if (!dynamic) return &model_.program();
  if (sameAsCurrent(shapes)) return instance_.get();
  StatusOr<DimBinding> binding = dynamic->bind(shapes);
  if (!binding.ok()) return binding.status();
  StatusOr<std::unique_ptr<const Program>> instance = dynamic->instantiate(binding.value());
  if (!instance.ok()) return instance.status();
  // The executor drops its old plan before it reads the new program, so the
  // old instantiation may go only after prepare() (which may fail: then
  // nothing is current).
  Status prepared = executor.prepare(*instance.value());
  instance_ = prepared.ok() ? std::move(instance).value() : nullptr;
  ++instantiations_;
  if (!prepared.ok()) return prepared;
  return instance_.get();
}

}  // namespace ein::detail
