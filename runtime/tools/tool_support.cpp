#include "tool_support.hpp"

#include <cstdio>

namespace ein::tools {

int fail(const char *tool, const std::string &message) {
  std::fprintf(stderr, "%s: error: %s\n", tool, message.c_str());
  return 1;
}

}  // namespace ein::tools
