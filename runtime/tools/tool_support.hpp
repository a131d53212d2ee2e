// Helpers shared by ein-run, ein-inspect and bench/decode_in_turn.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ein/runtime.hpp"

namespace ein::tools {

// Prints "TOOL: message" to stderr and returns the exit status for errors.
int fail(const char *tool, const std::string &message);

// The candidate nearest `name` by edit distance when it is close (a typo:
// at most a third of the name's length, and never every letter), for "did you
// mean ...?"; "" otherwise.
std::string closestName(const std::string &name, const std::vector<std::string> &candidates);

// Token ids written as "1,15043,29892": non-negative decimal integers, each
// followed by a comma but the last (a trailing comma is allowed; "" gives
// none); nullopt for anything else.
std::optional<std::vector<int64_t>> parseTokenIds(const std::string &text);

// The nearest-rank percentile p (in [0, 1]) of `sorted` (ascending, not empty).
double percentile(const std::vector<double> &sorted, double p);

}  // namespace ein::tools
