// The IR of one module as a graph for Model Explorer (the Python package's
// ein.explorer draws einc --dump-ir files with it): one node per op of its
// functions, edges by SSA value, each node with its attributes, result types
// and the source locations its location keeps through fusion.
#pragma once

#include <string>
#include <variant>

namespace ein {

struct IrGraphError {
  std::string message;  // located, as MLIR's parser reports it
};

// Model Explorer's Graph JSON ({"id", "nodes": [...]}) of the module in
// `text` (a .mlir file of the ein, kern, func, arith and math dialects, as
// einc --dump-ir writes it); `name` stands for the file in messages.
std::variant<std::string, IrGraphError> irGraphJson(const std::string &text, const std::string &name);

}  // namespace ein
