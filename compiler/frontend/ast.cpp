#include "compiler/frontend/ast.hpp"

namespace ein::frontend {

std::string Name::str() const {
  std::string text;
  for (size_t i = 0; i < segments.size(); ++i) {
    if (i) text += ".";
    const NameSegment &segment = segments[i];
    text += segment.kind == NameSegment::Kind::Interpolation ? "{" + segment.text + "}" : segment.text;
  }
  return text;
}

const char *spelling(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "+";
    case BinaryOp::Sub: return "-";
    case BinaryOp::Mul: return "*";
    case BinaryOp::Div: return "/";
    case BinaryOp::MatMul: return "@";
    case BinaryOp::Pow: return "**";
    case BinaryOp::Lt: return "<";
    case BinaryOp::Le: return "<=";
    case BinaryOp::Gt: return ">";
    case BinaryOp::Ge: return ">=";
    case BinaryOp::Eq: return "==";
    case BinaryOp::Ne: return "!=";
    case BinaryOp::And: return "and";
    case BinaryOp::Or: return "or";
    case BinaryOp::FloorDiv: return "//";
    case BinaryOp::Mod: return "%";
  }
  return "?";
}

std::string dump(const Expr &expr) {
  switch (expr.kind) {
    case Expr::Kind::Number: return static_cast<const NumberExpr &>(expr).text;
    case Expr::Kind::Bool: return static_cast<const BoolExpr &>(expr).value ? "true" : "false";
    case Expr::Kind::String: return "\"" + static_cast<const StringExpr &>(expr).value + "\"";
    case Expr::Kind::Name: return static_cast<const NameExpr &>(expr).name.str();
    case Expr::Kind::Unary: {
      const auto &unary = static_cast<const UnaryExpr &>(expr);
      return std::string("(") + unary.op + dump(*unary.operand) + ")";
    }
    case Expr::Kind::Binary: {
      const auto &binary = static_cast<const BinaryExpr &>(expr);
      return "(" + dump(*binary.lhs) + " " + spelling(binary.op) + " " + dump(*binary.rhs) + ")";
    }
    case Expr::Kind::Call: {
      const auto &call = static_cast<const Call &>(expr);
      std::string text = call.callee + "(";
      bool first = true;
      for (const auto &arg : call.positional) {
        text += (first ? "" : ", ") + dump(*arg);
        first = false;
      }
      for (const auto &keyword : call.keywords) {
        text += (first ? "" : ", ") + keyword.name + "=" + dump(*keyword.value);
        first = false;
      }
      return text + ")";
    }
    case Expr::Kind::Index: {
      const auto &index = static_cast<const IndexExpr &>(expr);
      std::string text = dump(*index.base) + "[";
      for (size_t i = 0; i < index.items.size(); ++i) {
        const IndexItem &item = index.items[i];
        text += i ? ", " : "";
        if (item.kind == IndexItem::Kind::Ellipsis) text += "...";
        else if (item.kind == IndexItem::Kind::Index) text += dump(*item.index);
        else text += (item.start ? dump(*item.start) : "") + ":" + (item.stop ? dump(*item.stop) : "") +
                     (item.step ? ":" + dump(*item.step) : "");
      }
      return text + "]";
    }
    case Expr::Kind::List: {
      std::string text = "[";
      const auto &list = static_cast<const ListExpr &>(expr);
      for (size_t i = 0; i < list.items.size(); ++i) text += (i ? ", " : "") + dump(*list.items[i]);
      return text + "]";
    }
  }
  return "?";
}

namespace {

std::string dumpType(const TypeExpr &type) {
  std::string text = type.dtype + "[";
  for (size_t i = 0; i < type.dims.size(); ++i) text += (i ? ", " : "") + dump(*type.dims[i]);
  return text + "]";
}

void dumpStatements(const std::vector<StmtPtr> &statements, const std::string &indent, std::string &out);

void dumpStatement(const Stmt &statement, const std::string &indent, std::string &out) {
  out += indent;
  switch (statement.kind) {
    case Stmt::Kind::Dim: {
      const auto &decl = static_cast<const DimDecl &>(statement);
      out += "dim ";
      for (size_t i = 0; i < decl.entries.size(); ++i) {
        out += (i ? ", " : "") + decl.entries[i].name + " = " + dump(*decl.entries[i].value);
        if (decl.entries[i].max) out += " .. " + dump(*decl.entries[i].max);
      }
      break;
    }
    case Stmt::Kind::Config: {
      const auto &decl = static_cast<const ConfigDecl &>(statement);
      out += "config ";
      for (size_t i = 0; i < decl.entries.size(); ++i) {
        out += (i ? ", " : "") + decl.entries[i].name.str() + " = " + dump(*decl.entries[i].value);
        if (decl.entries[i].allowed) out += " in " + dump(*decl.entries[i].allowed);
      }
      break;
    }
    case Stmt::Kind::Input: {
      const auto &decl = static_cast<const InputDecl &>(statement);
      out += "input " + decl.name.str() + ": " + dumpType(decl.type);
      break;
    }
    case Stmt::Kind::Param: {
      const auto &decl = static_cast<const ParamDecl &>(statement);
      out += "param " + decl.name.str() + ": " + dumpType(decl.type);
      break;
    }
    case Stmt::Kind::Output: {
      const auto &decl = static_cast<const OutputDecl &>(statement);
      out += "output " + decl.name.str() + (decl.value ? " = " + dump(*decl.value) : "");
      break;
    }
    case Stmt::Kind::Assign: {
      const auto &assign = static_cast<const Assign &>(statement);
      for (size_t i = 0; i < assign.targets.size(); ++i) out += (i ? ", " : "") + assign.targets[i].name;
      out += " = " + dump(*assign.value);
      break;
    }
    case Stmt::Kind::Def: {
      const auto &def = static_cast<const Def &>(statement);
      out += "def " + def.name + "(";
      for (size_t i = 0; i < def.params.size(); ++i) out += (i ? ", " : "") + def.params[i].name;
      out += ") {\n";
      dumpStatements(def.body, indent + "  ", out);
      out += indent + "}";
      break;
    }
    case Stmt::Kind::For: {
      const auto &loop = static_cast<const For &>(statement);
      out += "for " + loop.variable + " in " + dump(*loop.start) + ".." + dump(*loop.end) + " {\n";
      dumpStatements(loop.body, indent + "  ", out);
      out += indent + "}";
      break;
    }
    case Stmt::Kind::If: {
      const auto &branching = static_cast<const If &>(statement);
      for (size_t i = 0; i < branching.branches.size(); ++i) {
        const If::Branch &branch = branching.branches[i];
        out += i == 0 ? "if " : " else ";
        if (i > 0 && branch.condition) out += "if ";
        if (branch.condition) out += dump(*branch.condition) + " ";
        out += "{\n";
        dumpStatements(branch.body, indent + "  ", out);
        out += indent + "}";
      }
      break;
    }
    case Stmt::Kind::Return: {
      const auto &ret = static_cast<const Return &>(statement);
      out += "return ";
      for (size_t i = 0; i < ret.values.size(); ++i) out += (i ? ", " : "") + dump(*ret.values[i]);
      break;
    }
  }
  out += "\n";
}

void dumpStatements(const std::vector<StmtPtr> &statements, const std::string &indent, std::string &out) {
  for (const auto &statement : statements) dumpStatement(*statement, indent, out);
}

}  // namespace

std::string dump(const Module &module) {
  std::string out;
  dumpStatements(module.statements, "", out);
  return out;
}

}  // namespace ein::frontend
