// Parses .ein text into a syntax tree.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/frontend/ast.hpp"

namespace ein::frontend {

struct Diagnostic {
  SourceLoc loc;
  std::string message;
};

struct ParseResult {
  std::unique_ptr<Module> module;  // always present; partial when there are errors
  std::vector<Diagnostic> diagnostics;
};

// Parses a whole model. Reports at most one error per statement and recovers
// at the next statement, so one run shows several independent mistakes.
ParseResult parse(std::string_view source);

}  // namespace ein::frontend
