// Verifies one step of the artifact and appends its decoded form to the
// program: known kernel, views inside their tensors, dtypes the kernel
// accepts, consistent sizes, outputs only into the arena or output buffers.
#pragma once

#include <cstddef>

#include "ein/schema/ein_artifact_generated.h"
#include "ein/status.hpp"
#include "loader/size_expressions.hpp"
#include "program/program.hpp"

namespace ein::detail {

// Errors read "step 7 (gemm at model.ein:12:5): view a reaches element 4100
// of tensor 3, which has 4096 elements".
// Every (size) field is read through `sizes`: the one decoder serves a static
// program at load and each instantiation of a dynamic one.
Status decodeStep(const schema::Step &step, size_t index, const SizeResolver &sizes, Program &program);
// The same into `out` and `info`, verified against `program`'s tensors.
// With `again`, `out` and `info` hold this step decoded at other sizes (a
// sequence's program moved to its next position, every decode step): its
// label and the strings of its info, which the step's table alone gives,
// are kept, and the entries of info's maps are overwritten in place (which
// keys a step's info holds depends on its table, never on sizes, so none is
// left from before) instead of built anew.
Status decodeStep(const schema::Step &step, size_t index, const SizeResolver &sizes, const Program &program, Step &out,
                  StepInfo &info, bool again = false);

}  // namespace ein::detail
