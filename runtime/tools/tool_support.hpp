// Helpers shared by ein-run and ein-inspect.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ein/runtime.hpp"

namespace ein::tools {

// Prints "TOOL: message" to stderr and returns the exit status for errors.
int fail(const char *tool, const std::string &message);

}  // namespace ein::tools
