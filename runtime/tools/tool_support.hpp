// Helpers shared by ein-run and ein-inspect.
#pragma once

#include <cstdint>
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

}  // namespace ein::tools
