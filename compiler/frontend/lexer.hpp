// Splits .ein text into tokens.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "compiler/frontend/ast.hpp"

namespace ein::frontend {

struct Token {
  enum class Kind {
    Identifier, Integer, Float, String, Newline, End, Error,
    // punctuation
    LParen, RParen, LBracket, RBracket, LBrace, RBrace, Comma, Colon, Assign, Dot, Range, Ellipsis,
    Plus, Minus, Star, Slash, SlashSlash, Percent, Power, At, Less, LessEqual, Greater, GreaterEqual, Equal, NotEqual,
    Tilde,
  };
  Kind kind;
  std::string text;  // identifier/number spelling, unescaped string, or error message
  SourceLoc loc;
  bool spaceBefore = false;  // whitespace separates it from the previous token
  size_t begin = 0, end = 0;  // its bytes in the source: [begin, end)
};

std::string describe(const Token &token);

// The whole token stream. Newlines inside ( ) and [ ] are dropped; errors
// become Error tokens (the parser reports them).
std::vector<Token> tokenize(std::string_view source);

}  // namespace ein::frontend
