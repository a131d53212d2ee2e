#include "program/rowwise_tail.hpp"

namespace ein::detail {

std::optional<RowwiseTail> rowwiseTailOf(const Program &program) {
  const size_t steps = program.steps.size();
  if (program.stepInfos.size() != steps || steps == 0) return std::nullopt;
  for (const StepInfo &info : program.stepInfos)
    for (const StepOperand &operand : info.operands)
      if (operand.tensor >= program.tensors.size()) return std::nullopt;
  auto touchesState = [&](size_t s) {
    for (const StepOperand &operand : program.stepInfos[s].operands)
      if (program.tensors[operand.tensor].storage == Storage::State) return true;
    return false;
  };
  RowwiseTail tail;
  for (size_t s = 0; s < steps; ++s)
    if (program.steps[s].perSequence || program.steps[s].firstRun || touchesState(s)) tail.firstStep = s + 1;
  if (tail.firstStep >= steps) return std::nullopt;
  // What the steps before the tail wrote (every input, given before any
  // step) is what the tail must see at the rows read: a tensor it reads, or
  // writes in part (a slice of a concatenation), holding rows from before.
  std::vector<bool> before(program.tensors.size(), false), carried(program.tensors.size(), false),
      writtenInTail(program.tensors.size(), false);
  for (uint32_t input : program.inputTensors)
    if (input < before.size()) before[input] = true;
  for (size_t s = 0; s < tail.firstStep; ++s)
    for (const StepOperand &operand : program.stepInfos[s].operands)
      if (operand.written) before[operand.tensor] = true;
  for (size_t s = tail.firstStep; s < steps; ++s)
    for (const StepOperand &operand : program.stepInfos[s].operands) {
      if (operand.written) writtenInTail[operand.tensor] = true;
      const Tensor &tensor = program.tensors[operand.tensor];
      if (!before[operand.tensor] || carried[operand.tensor] || tensor.storage == Storage::Weights) continue;
      if (tensor.storage != Storage::Arena || !tensor.perToken) return std::nullopt;
      carried[operand.tensor] = true;
      tail.carried.push_back(operand.tensor);
    }
  for (uint32_t output : program.outputTensors)
    if (output >= program.tensors.size() || before[output] || !writtenInTail[output] ||
        !program.tensors[output].perToken)
      return std::nullopt;
  return tail;
}

}  // namespace ein::detail
