// Decodes a framed artifact into a Program, checking every tensor, binding,
// parameter and step against its bounds before anything can run. The same
// functions decode a static artifact once at load and a dynamic one at each
// new set of dim values: every (size) field is read through a SizeResolver.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "ein/status.hpp"
#include "loader/artifact_bytes.hpp"
#include "loader/artifact_framing.hpp"
#include "loader/size_expressions.hpp"
#include "program/program.hpp"

namespace ein::detail {

// What no dim changes: the name, bytes (kept alive by the program; `framing`
// points into them), weights, target, precision and the arena's size.
StatusOr<std::unique_ptr<Program>> decodeFixedParts(const Framing &framing, ArtifactBytes bytes, std::string name);
// A new program sharing `base`'s fixed parts (and bytes), without tensors or steps.
std::unique_ptr<Program> copyFixedParts(const Program &base);

// Whether the arena's claimed size must be justified by the tensors as
// decoded: at the sizes it is planned for (a static program, a dynamic one
// at the dims' maxima), not at smaller dims, where the tensors need less.
enum class ArenaClaim { JustifiedByTheseSizes, PlannedForOtherSizes };

// The tensors, the input and output bindings and the parameters, appended
// to `program`.
Status decodeTensors(const schema::Model &model, const SizeResolver &sizes, ArenaClaim arena, Program &program);
// The steps, appended to `program` (after decodeTensors).
Status decodeSteps(const schema::Model &model, const SizeResolver &sizes, Program &program);
// Decodes again, in `program` (decoded by decodeTensors and decodeSteps at
// other sizes), the listed tensors and steps at `sizes`, each verified as
// there, with what depends on tensors' shapes (the bound infos, the state's
// claim) and the position's advance: the steps not listed must be the same
// at both sizes. On an error `program` is left part-way, to be discarded.
Status redecode(const schema::Model &model, const SizeResolver &sizes, std::span<const uint32_t> tensors,
                std::span<const uint32_t> steps, Program &program);

}  // namespace ein::detail
