// libFuzzer target: the lexer and parser on arbitrary text. Every input must
// give a syntax tree or diagnostics, never a crash, a hang or unbounded
// recursion. A tree that parsed cleanly is dumped (fully parenthesised) and,
// when that text parses too, it must give the same tree.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string_view>

#include "compiler/frontend/ast.hpp"
#include "compiler/frontend/parser.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view source(reinterpret_cast<const char *>(data), size);
  ein::frontend::ParseResult result = ein::frontend::parse(source);
  for (const ein::frontend::Diagnostic &diagnostic : result.diagnostics)
    if (diagnostic.message.empty()) __builtin_trap();
  if (!result.diagnostics.empty()) return 0;
  std::string dumped = ein::frontend::dump(*result.module);
  ein::frontend::ParseResult again = ein::frontend::parse(dumped);
  // The added parentheses can exceed the nesting limit: then no comparison.
  if (!again.diagnostics.empty()) return 0;
  if (ein::frontend::dump(*again.module) != dumped) {
    std::fprintf(stderr, "the dump does not parse back to the same tree:\n%s\n---\n%s\n", dumped.c_str(),
                 ein::frontend::dump(*again.module).c_str());
    __builtin_trap();
  }
  return 0;
}
