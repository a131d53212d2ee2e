// The rows a run's outputs are read at: a decoder serving many sequences
// reads each sequence's last token's logits only, but its last steps (the
// last layer after its attention, the final norm and the head, a tenth of a
// 1B Llama's work a token) would compute them for every token of every
// prompt in the run. Those steps compute each token's rows from that
// token's rows alone (the steps that mix a sequence's tokens run per
// sequence), so they can run over the rows read only, as llama.cpp computes
// the logits it is asked for: the rows they read from before them gathered
// to the front first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "program/program.hpp"

namespace ein::detail {

struct RowwiseTail {
  size_t firstStep = 0;
  // The per-token arena tensors its steps read that earlier steps wrote:
  // gathered to the rows read before it runs.
  std::vector<uint32_t> carried;
};

// The steps of `program` (the model's program at some tokens and position)
// from the last step run per sequence, at a sequence's first run only or on
// a state on, when they write every output and every output is per token,
// and read no input and no tensor from before them but per-token ones in
// the arena. None otherwise.
std::optional<RowwiseTail> rowwiseTailOf(const Program &program);

}  // namespace ein::detail
