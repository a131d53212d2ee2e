#include "compiler/frontend/lexer.hpp"

#include <cctype>
#include <cstdlib>

namespace ein::frontend {
namespace {

bool isIdentifierStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool isIdentifierChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool isDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

class Lexer {
 public:
  explicit Lexer(std::string_view source) : source(source) {
    if (source.substr(0, 3) == "\xEF\xBB\xBF") position = lineStart = 3;  // UTF-8 byte order mark
  }

  std::vector<Token> run() {
    std::vector<Token> tokens;
    int depth = 0;  // open ( and [: newlines inside are not statement ends
    while (true) {
      bool space = skipSpaceAndComments();
      const size_t begin = position;
      Token token = next();
      token.spaceBefore = space;
      token.begin = begin;
      token.end = position;
      if (token.kind == Token::Kind::LParen || token.kind == Token::Kind::LBracket) ++depth;
      if ((token.kind == Token::Kind::RParen || token.kind == Token::Kind::RBracket) && depth > 0) --depth;
      if (token.kind == Token::Kind::Newline && depth > 0) continue;
      bool end = token.kind == Token::Kind::End;
      tokens.push_back(std::move(token));
      if (end) break;
    }
    return tokens;
  }

 private:
  SourceLoc here() const { return {line, static_cast<uint32_t>(position - lineStart + 1)}; }
  char peek(size_t ahead = 0) const { return position + ahead < source.size() ? source[position + ahead] : '\0'; }

  bool skipSpaceAndComments() {
    bool skipped = false;
    while (position < source.size()) {
      char c = source[position];
      if (c == ' ' || c == '\t' || c == '\r') {
        ++position;
      } else if (c == '#') {
        while (position < source.size() && source[position] != '\n') ++position;
      } else {
        break;
      }
      skipped = true;
    }
    return skipped;
  }

  Token make(Token::Kind kind, SourceLoc loc, std::string text = {}) { return Token{kind, std::move(text), loc}; }

  Token next() {
    SourceLoc loc = here();
    if (position >= source.size()) return make(Token::Kind::End, loc);
    char c = source[position];
    if (c == '\n') {
      ++position;
      ++line;
      lineStart = position;
      return make(Token::Kind::Newline, loc);
    }
    if (isIdentifierStart(c)) {
      size_t start = position;
      while (position < source.size() && isIdentifierChar(source[position])) ++position;
      return make(Token::Kind::Identifier, loc, std::string(source.substr(start, position - start)));
    }
    if (isDigit(c)) return number(loc);
    if (c == '"') return string(loc);
    auto punct = [&](Token::Kind kind, size_t length) {
      std::string text(source.substr(position, length));
      position += length;
      return make(kind, loc, text);
    };
    switch (c) {
      case '(': return punct(Token::Kind::LParen, 1);
      case ')': return punct(Token::Kind::RParen, 1);
      case '[': return punct(Token::Kind::LBracket, 1);
      case ']': return punct(Token::Kind::RBracket, 1);
      case '{': return punct(Token::Kind::LBrace, 1);
      case '}': return punct(Token::Kind::RBrace, 1);
      case ',': return punct(Token::Kind::Comma, 1);
      case ':': return punct(Token::Kind::Colon, 1);
      case '+': return punct(Token::Kind::Plus, 1);
      case '-': return punct(Token::Kind::Minus, 1);
      case '~': return punct(Token::Kind::Tilde, 1);
      case '/': return peek(1) == '/' ? punct(Token::Kind::SlashSlash, 2) : punct(Token::Kind::Slash, 1);
      case '%': return punct(Token::Kind::Percent, 1);
      case '@': return punct(Token::Kind::At, 1);
      case '*': return peek(1) == '*' ? punct(Token::Kind::Power, 2) : punct(Token::Kind::Star, 1);
      case '=': return peek(1) == '=' ? punct(Token::Kind::Equal, 2) : punct(Token::Kind::Assign, 1);
      case '<': return peek(1) == '=' ? punct(Token::Kind::LessEqual, 2) : punct(Token::Kind::Less, 1);
      case '>': return peek(1) == '=' ? punct(Token::Kind::GreaterEqual, 2) : punct(Token::Kind::Greater, 1);
      case '!':
        if (peek(1) == '=') return punct(Token::Kind::NotEqual, 2);
        break;
      case '.':
        if (peek(1) == '.' && peek(2) == '.') return punct(Token::Kind::Ellipsis, 3);
        if (peek(1) == '.') return punct(Token::Kind::Range, 2);
        return punct(Token::Kind::Dot, 1);
      default: break;
    }
    ++position;
    unsigned byte = static_cast<unsigned char>(c);
    std::string shown = byte >= 0x20 && byte < 0x7f ? std::string("'") + c + "'" : "byte 0x" + hex(byte);
    return make(Token::Kind::Error, loc, "unexpected character " + shown);
  }

  static std::string hex(unsigned byte) {
    const char *digits = "0123456789abcdef";
    return {digits[byte >> 4], digits[byte & 15]};
  }

  // Integers, `0.125`, `1e-6`. After a '.', only digits belong to the number
  // when another digit follows, so `blocks.0.attn` and `0..12` lex as intended;
  // a dotted-name segment `0` directly after '.' is always an integer.
  Token number(SourceLoc loc) {
    size_t start = position;
    bool isFloat = false;
    while (isDigit(peek())) ++position;
    bool afterDot = start > 0 && source[start - 1] == '.';
    if (!afterDot && peek() == '.' && isDigit(peek(1))) {
      isFloat = true;
      ++position;
      while (isDigit(peek())) ++position;
    }
    if (!afterDot && (peek() == 'e' || peek() == 'E') &&
        (isDigit(peek(1)) || ((peek(1) == '-' || peek(1) == '+') && isDigit(peek(2))))) {
      isFloat = true;
      position += 2;
      while (isDigit(peek())) ++position;
    }
    if (isIdentifierChar(peek())) {
      size_t end = position;
      while (end < source.size() && isIdentifierChar(source[end])) ++end;
      std::string text(source.substr(start, end - start));
      position = end;
      return make(Token::Kind::Error, loc, "invalid number '" + text + "'");
    }
    return make(isFloat ? Token::Kind::Float : Token::Kind::Integer, loc,
                std::string(source.substr(start, position - start)));
  }

  Token string(SourceLoc loc) {
    ++position;  // opening quote
    std::string value;
    while (position < source.size()) {
      char c = source[position];
      if (c == '"') {
        ++position;
        return make(Token::Kind::String, loc, value);
      }
      if (c == '\n') break;
      if (c == '\\' && position + 1 < source.size() && (source[position + 1] == '"' || source[position + 1] == '\\')) {
        value += source[position + 1];
        position += 2;
        continue;
      }
      value += c;
      ++position;
    }
    return make(Token::Kind::Error, loc, "unterminated string");
  }

  std::string_view source;
  size_t position = 0;
  size_t lineStart = 0;
  uint32_t line = 1;
};

}  // namespace

std::string describe(const Token &token) {
  switch (token.kind) {
    case Token::Kind::Identifier: return "'" + token.text + "'";
    case Token::Kind::Integer:
    case Token::Kind::Float: return "number " + token.text;
    case Token::Kind::String: return "string \"" + token.text + "\"";
    case Token::Kind::Newline: return "end of line";
    case Token::Kind::End: return "end of file";
    case Token::Kind::Error: return token.text;
    default: return "'" + token.text + "'";
  }
}

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace ein::frontend
