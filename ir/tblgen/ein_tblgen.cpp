// ein-tblgen: generates a kern op's artifact step from its one definition
// beside the op's ODS (`let step = (fields ...)`, ir/kern/kern_steps.td):
//   -gen-step-schema    the FlatBuffers tables and the Kernel union (schemas/kernel_steps.fbs)
//   -gen-step-writers   the artifact writer's serialisation of each op (compiler/artifact)
//   -gen-step-fields    the runtime's decoded structs (runtime/src/program/step_fields.inc)
//   -gen-step-decoders  the loader's decoding and field checks (runtime/src/loader/step_decoders.inc)
// The schema and the runtime's files are kept in the repository (the runtime
// builds without LLVM); the full build regenerates them and fails when they
// differ (ir/CMakeLists.txt).
#include <string>
#include <vector>

#include "llvm/ADT/StringExtras.h"
#include "llvm/TableGen/Error.h"
#include "llvm/TableGen/Record.h"
#include "mlir/TableGen/Format.h"
#include "mlir/TableGen/GenInfo.h"
#include "mlir/TableGen/Operator.h"
#include "mlir/Tools/mlir-tblgen/MlirTblgenMain.h"

namespace {

using llvm::Record;
using llvm::RecordKeeper;
using llvm::StringRef;
using mlir::tblgen::FmtContext;
using mlir::tblgen::Operator;

struct Field {
  std::string name;  // as in the schema (snake_case)
  const Record *kind;
  std::string write;  // the writer's expression, empty: from the op's accessors
};

struct Step {
  const Record *def;
  std::string table;     // the schema table: the op's class without "Op"
  std::string mnemonic;  // the step's name in messages: the op's mnemonic
  std::vector<Field> fields;
};

std::string camel(StringRef snake) { return llvm::convertToCamelFromSnakeCase(snake, /*capitalizeFirst=*/false); }

std::string kindOf(const Field &field) { return field.kind->getValueAsString("kind").str(); }

bool isView(const Field &field) {
  std::string kind = kindOf(field);
  return kind == "view" || kind == "optional_view";
}

std::vector<Step> collectSteps(const RecordKeeper &records) {
  std::vector<Step> steps;
  for (const Record *def : records.getAllDerivedDefinitions("Kern_Op")) {
    const llvm::DagInit *dag = def->getValueAsDag("step");
    if (dag->getNumArgs() == 0) continue;
    Operator op(def);
    if (!op.getCppClassName().ends_with("Op"))
      llvm::PrintFatalError(def->getLoc(), "a kern op with a step is named ...Op");
    Step step{def, op.getCppClassName().drop_back(2).str(), def->getValueAsString("opName").str(), {}};
    for (unsigned i = 0; i < dag->getNumArgs(); ++i) {
      auto *kind = llvm::dyn_cast<llvm::DefInit>(dag->getArg(i));
      if (!kind || !kind->getDef()->isSubClassOf("StepField") || dag->getArgNameStr(i).empty())
        llvm::PrintFatalError(def->getLoc(), "step field " + std::to_string(i) + " is not a named StepField");
      step.fields.push_back({dag->getArgNameStr(i).str(), kind->getDef(), ""});
    }
    const llvm::DagInit *writes = def->getValueAsDag("stepWrites");
    for (unsigned i = 0; i < writes->getNumArgs(); ++i) {
      auto *code = llvm::dyn_cast<llvm::StringInit>(writes->getArg(i));
      auto it = llvm::find_if(step.fields, [&](const Field &f) { return f.name == writes->getArgNameStr(i); });
      if (!code || it == step.fields.end())
        llvm::PrintFatalError(def->getLoc(), "stepWrites names " + writes->getArgNameStr(i).str() +
                                                 ", which is not a field of the step, or gives no code");
      it->write = code->getValue().str();
    }
    steps.push_back(std::move(step));
  }
  // The Kernel union's member numbers are the artifact's format: each step
  // names its own (stepNumber), 1, 2, ... with none reused or skipped.
  llvm::sort(steps, [](const Step &a, const Step &b) {
    return a.def->getValueAsInt("stepNumber") < b.def->getValueAsInt("stepNumber");
  });
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].def->getValueAsInt("stepNumber") != static_cast<int64_t>(i + 1))
      llvm::PrintFatalError(steps[i].def->getLoc(), "the steps' stepNumber must be 1, 2, ... " +
                                                        std::to_string(steps.size()) + ", each once; " +
                                                        steps[i].table + " has " +
                                                        std::to_string(steps[i].def->getValueAsInt("stepNumber")));
  return steps;
}

// ---- the schema ----------------------------------------------------------

std::string schemaDefault(const Field &field) {
  if (!field.kind->getValue("defaultValue")) return "";
  StringRef value = field.kind->getValueAsString("defaultValue");
  return value.empty() ? "" : " = " + value.str();
}

void emitComment(StringRef text, StringRef prefix, llvm::raw_ostream &os) {
  llvm::SmallVector<StringRef> lines;
  text.ltrim("\n").rtrim().split(lines, '\n');
  // The text is indented like the .td around it: drop the common indent.
  size_t indent = StringRef::npos;
  for (StringRef line : lines)
    if (!line.trim().empty()) indent = std::min(indent, line.size() - line.ltrim().size());
  for (StringRef line : lines) {
    StringRef body = line.trim().empty() ? StringRef() : line.drop_front(std::min(indent, line.size())).rtrim();
    os << prefix << (body.empty() ? "" : " ") << body << "\n";
  }
}

bool genSchema(const RecordKeeper &records, llvm::raw_ostream &os) {
  std::vector<Step> steps = collectSteps(records);
  os << "// Generated by ein-tblgen -gen-step-schema from ir/kern/kern_ops.td: edit the\n"
        "// ops' `step` there. One table per kernel step; its sizes, and the elements\n"
        "// of its shapes, are Size (step_types.fbs).\n\n"
        "include \"step_types.fbs\";\n\n"
        "namespace ein.schema;\n";
  for (const Step &step : steps) {
    os << "\n";
    emitComment(step.def->getValueAsString("stepDoc"), "//", os);
    os << "table " << step.table << " {\n";
    for (const Field &field : step.fields)
      os << "  " << field.name << ": " << field.kind->getValueAsString("schemaType") << schemaDefault(field) << ";\n";
    os << "}\n";
  }
  os << "\nunion Kernel { ";
  llvm::interleaveComma(steps, os, [&](const Step &step) { os << step.table; });
  os << " }\n";
  return false;
}

// ---- the writer ----------------------------------------------------------

bool hasOperand(const Operator &op, StringRef name) {
  for (int i = 0; i < op.getNumOperands(); ++i)
    if (op.getOperand(i).name == name) return true;
  return false;
}

bool hasAttribute(const Operator &op, StringRef name) {
  for (const auto &attribute : op.getAttributes())
    if (attribute.name == name) return true;
  return false;
}

// The writer's expression for a field from the op's accessors of its name.
std::string writerExpression(const Operator &op, const Step &step, const Field &field) {
  if (!field.write.empty()) return field.write;
  std::string kind = kindOf(field), getter = "$_op." + op.getGetterName(field.name) + "()";
  auto unsupported = [&](const std::string &why) {
    llvm::PrintFatalError(step.def->getLoc(), "step field " + field.name + " of " + step.table + ": " + why +
                                                  "; give its expression in stepWrites");
  };
  if (kind == "size" || kind == "sizes" || kind == "float" || kind == "enum" || kind == "bool" || kind == "int" ||
      kind == "uint" || kind == "axis_count") {
    if (!hasAttribute(op, field.name)) unsupported("the op has no attribute of its name");
    if (kind == "size") return "field(kern::sizeOf(" + getter + "))";
    if (kind == "sizes") return "fields(" + getter + ".sizes())";
    if (kind == "float") return getter + ".convertToFloat()";
    if (kind == "bool") return getter;
    if (kind == "int") return "static_cast<int64_t>(" + getter + ")";
    if (kind == "uint" || kind == "axis_count") return "static_cast<uint32_t>(" + getter + ")";
    return "toSchema<fb::" + field.kind->getValueAsString("schemaType").str() + ">(" + getter + ")";
  }
  if (isView(field)) {
    std::string viewName = field.name + "_view";
    if (!hasAttribute(op, viewName)) unsupported("the op has no attribute " + viewName);
    std::string value = hasOperand(op, field.name) ? getter : "$_result";
    std::string viewGetter = "$_op." + op.getGetterName(viewName) + "()";
    return (kind == "view" ? "view(" : "optionalView(") + value + ", " + viewGetter + ")";
  }
  unsupported("a " + kind + " field has no default expression");
  return "";
}

bool genWriters(const RecordKeeper &records, llvm::raw_ostream &os) {
  std::vector<Step> steps = collectSteps(records);
  os << "// Generated by ein-tblgen -gen-step-writers from ir/kern/kern_ops.td.\n\n"
        "#ifdef GET_STEP_WRITER_DECLS\n#undef GET_STEP_WRITER_DECLS\n";
  for (const Step &step : steps)
    os << "  FailureOr<flatbuffers::Offset<void>> writeStep(" << Operator(step.def).getQualCppClassName() << " op);\n";
  os << "#endif  // GET_STEP_WRITER_DECLS\n\n#ifdef GET_STEP_WRITERS\n#undef GET_STEP_WRITERS\n";
  for (const Step &step : steps) {
    Operator op(step.def);
    FmtContext context;
    context.addSubst("_op", "op").addSubst("_result", "result");
    os << "\nFailureOr<flatbuffers::Offset<void>> Writer::writeStep(" << op.getQualCppClassName() << " op) {\n"
       << "  [[maybe_unused]] Value result = op->getResult(0);\n";
    if (StringRef prologue = step.def->getValueAsString("stepWritePrologue"); !prologue.trim().empty())
      os << mlir::tblgen::tgfmt(prologue.trim(), &context) << "\n";
    // Size expressions are numbered in the order the writer first meets
    // them: shapes, then views, then scalar sizes (the order the writer had
    // before it was generated, so that artifacts stay byte for byte the same).
    for (int pass = 0; pass < 3; ++pass)
      for (const Field &field : step.fields) {
        std::string kind = kindOf(field);
        int fieldPass = kind == "sizes" ? 0 : isView(field) || kind == "custom" ? 1 : 2;
        if (fieldPass != pass) continue;
        os << "  auto " << camel(field.name) << "Field = "
           << mlir::tblgen::tgfmt(writerExpression(op, step, field), &context) << ";\n";
      }
    os << "  return fb::Create" << step.table << "Direct(builder";
    for (const Field &field : step.fields) {
      // Vectors and structs (Size) are passed to Create...Direct by pointer.
      StringRef schemaType = field.kind->getValueAsString("schemaType");
      bool byPointer = schemaType.starts_with("[") || schemaType == "Size";
      os << ", " << (byPointer ? "&" : "") << camel(field.name) << "Field";
    }
    os << ").Union();\n}\n";
  }
  os << "\n// The step of a kern op that has one of its own; none: the op is written by\n"
        "// hand (kern.append, kern.concat) or has no runtime kernel.\n"
        "FailureOr<std::pair<fb::Kernel, flatbuffers::Offset<void>>> Writer::writeOwnStep(Operation &op) {\n"
        "  using Written = FailureOr<std::pair<fb::Kernel, flatbuffers::Offset<void>>>;\n"
        "  auto with = [](fb::Kernel kind, FailureOr<flatbuffers::Offset<void>> table) -> Written {\n"
        "    if (failed(table)) return failure();\n"
        "    return std::make_pair(kind, *table);\n"
        "  };\n"
        "  return llvm::TypeSwitch<Operation *, Written>(&op)\n";
  for (const Step &step : steps)
    os << "      .Case<" << Operator(step.def).getQualCppClassName() << ">([&](auto op) { return with(fb::Kernel::"
       << step.table << ", writeStep(op)); })\n";
  os << "      .Default([&](Operation *other) -> Written { return other->emitOpError() << \"has no runtime kernel\"; "
        "});\n}\n#endif  // GET_STEP_WRITERS\n";
  return false;
}

// ---- the runtime ---------------------------------------------------------

std::string runtimeType(const Field &field) {
  std::string kind = kindOf(field);
  if (kind == "size") return "int64_t";
  if (kind == "sizes") return "Dims";
  if (kind == "view") return "View";
  if (kind == "optional_view") return "std::optional<View>";
  if (kind == "float") return "float";
  if (kind == "bool") return "bool";
  if (kind == "uint" || kind == "axis_count") return "uint32_t";
  if (kind == "int") return "int64_t";
  if (kind == "enum") return field.kind->getValueAsString("schemaType").str();
  return field.kind->getValueAsString("runtimeType").str();
}

std::string runtimeDefault(const Field &field) {
  std::string kind = kindOf(field);
  StringRef value = field.kind->getValue("defaultValue") ? field.kind->getValueAsString("defaultValue") : "";
  if (kind == "size" || kind == "uint" || kind == "axis_count" || kind == "int") return " = 0";
  if (kind == "bool") return " = " + (value.empty() ? std::string("false") : value.str());
  if (kind == "float") {
    if (value.empty()) return " = 0.0f";
    if (value == "inf" || value == "+inf") return " = std::numeric_limits<float>::infinity()";
    if (value == "-inf") return " = -std::numeric_limits<float>::infinity()";
    return " = " + value.str() + (value.contains('.') ? "f" : ".0f");
  }
  if (kind == "enum") return " = " + field.kind->getValueAsString("schemaType").str() + "::" + value.str();
  return "";
}

bool genFields(const RecordKeeper &records, llvm::raw_ostream &os) {
  std::vector<Step> steps = collectSteps(records);
  os << "// Generated by ein-tblgen -gen-step-fields from ir/kern/kern_ops.td: edit the\n"
        "// ops' `step` there. The fields of each step as the loader decodes them,\n"
        "// every size resolved and every view checked (schemas/kernel_steps.fbs says\n"
        "// what each step computes), and the runtime's struct of each step that\n"
        "// adds nothing to them (program.hpp defines the others).\n\n"
        "#ifdef GET_STEP_FIELDS\n#undef GET_STEP_FIELDS\n";
  for (const Step &step : steps) {
    os << "\nstruct " << step.table << "Fields {\n";
    for (const Field &field : step.fields)
      os << "  " << runtimeType(field) << " " << camel(field.name) << runtimeDefault(field) << ";\n";
    os << "};\n";
  }
  os << "\n// The runtime's struct of each step that adds nothing to its fields.\n";
  for (const Step &step : steps)
    if (!step.def->getValueAsBit("hasRuntimeMembers"))
      os << "struct " << step.table << " : " << step.table << "Fields {};\n";
  os << "\n// X(Table) for every step: what each backend declares per step.\n#define EIN_FOR_EACH_STEP(X)";
  for (const Step &step : steps) os << " \\\n  X(" << step.table << ")";
  os << "\n#endif  // GET_STEP_FIELDS\n\n#ifdef GET_STEP_LIST\n#undef GET_STEP_LIST\n";
  llvm::interleave(
      steps, os, [&](const Step &step) { os << step.table; }, ",\n");
  os << "\n#endif  // GET_STEP_LIST\n";
  return false;
}

// `$name` in a space expression is the decoded field `out.<camelName>`.
FmtContext fieldContext(const Step &step) {
  FmtContext context;
  for (const Field &field : step.fields) context.addSubst(field.name, "out." + camel(field.name));
  return context;
}

bool genDecoders(const RecordKeeper &records, llvm::raw_ostream &os) {
  std::vector<Step> steps = collectSteps(records);
  os << "// Generated by ein-tblgen -gen-step-decoders from ir/kern/kern_ops.td: edit the\n"
        "// ops' `step` there. Included by step_decoder.cpp, where StepChecker is.\n\n"
        "#ifdef GET_STEP_DECODERS\n#undef GET_STEP_DECODERS\n";
  for (const Step &step : steps) {
    FmtContext context = fieldContext(step);
    auto expression = [&](StringRef space) { return mlir::tblgen::tgfmt(space, &context).str(); };
    os << "\n// The fields of a " << step.mnemonic << " step, each checked on its own.\n"
       << "Status decode" << step.table << "Fields(const fb::" << step.table << " &in, const StepChecker &check, "
       << step.table << "Fields &out, StepInfo &info) {\n";
    // Sizes first: the views' spaces are made of them.
    for (const Field &field : step.fields) {
      std::string kind = kindOf(field), member = "out." + camel(field.name);
      if (kind == "sizes") {
        os << "  EIN_ASSIGN_OR_RETURN(" << member << ", check.space(in." << field.name << "(), \"" << field.name
           << "\", " << field.kind->getValueAsInt("extraAxes") << "));\n";
        if (int64_t minRank = field.kind->getValueAsInt("minRank"); minRank > 0)
          os << "  if (" << member << ".size() < " << minRank << ") return invalid(\"" << step.mnemonic
             << " needs a " << field.name << " of rank " << minRank << " or more\");\n";
        os << "  info.shapes[\"" << field.name << "\"] = " << member << ".vector();\n";
      } else if (kind == "size") {
        os << "  EIN_ASSIGN_OR_RETURN(" << member << ", check.size(in." << field.name << "(), \"" << field.name
           << "\"));\n";
        if (field.kind->getValueAsBit("shown"))
          os << "  info.sizes[\"" << field.name << "\"] = " << member << ";\n";
      }
    }
    for (const Field &field : step.fields) {
      if (kindOf(field) != "axis_count") continue;
      std::string member = "out." + camel(field.name);
      std::string sizes = "out." + camel(field.kind->getValueAsString("sizes"));
      os << "  " << member << " = in." << field.name << "();\n"
         << "  if (" << member << " > " << sizes << ".size())\n"
         << "    return invalid(fmt::format(\"{} is {}, more than the {} axes of " << field.kind->getValueAsString("sizes")
         << "\", \"" << field.name << "\", " << member << ", " << sizes << ".size()));\n"
         << "  info.sizes[\"" << field.name << "\"] = " << member << ";\n";
    }
    for (const Record *spaceCheck : step.def->getValueAsListOfDefs("stepSpaceChecks"))
      os << "  EIN_RETURN_IF_ERROR(check.checkSizes(" << expression(spaceCheck->getValueAsString("space")) << ", \""
         << spaceCheck->getValueAsString("name") << "\"));\n";
    std::vector<const Field *> views;
    for (const Field &field : step.fields)
      if (isView(field) && !field.kind->getValueAsString("space").empty()) views.push_back(&field);
    for (const Field *field : views)
      os << "  EIN_ASSIGN_OR_RETURN(out." << camel(field->name) << ", check."
         << (kindOf(*field) == "view" ? "view" : "optionalView") << "(in." << field->name << "(), "
         << expression(field->kind->getValueAsString("space")) << ", \"" << field->name << "\"));\n";
    for (const Field *field : views) {
      std::vector<StringRef> dtypes = field->kind->getValueAsListOfStrings("dtypes");
      if (dtypes.empty()) continue;
      bool optional = kindOf(*field) == "optional_view";
      std::string member = "out." + camel(field->name);
      os << "  " << (optional ? "if (" + member + ") " : "") << "EIN_RETURN_IF_ERROR(check.dtypeIn("
         << (optional ? "*" : "") << member << ", \"" << field->name << "\", {";
      llvm::interleaveComma(dtypes, os, [&](StringRef dtype) { os << "DType::" << dtype; });
      os << "}));\n";
    }
    for (const Field *field : views)
      if (field->kind->getValueAsBit("writes"))
        os << "  EIN_RETURN_IF_ERROR(check.writable(out." << camel(field->name) << ", "
           << expression(field->kind->getValueAsString("space")) << ", \"" << field->name << "\"));\n";
    for (const Record *bound : step.def->getValueAsListOfDefs("stepReadBounds"))
      os << "  if (" << expression(bound->getValueAsString("when")) << ")\n    EIN_RETURN_IF_ERROR(check.readsAtMostItsTensor(out."
         << camel(bound->getValueAsString("view")) << ", " << expression(bound->getValueAsString("count")) << ", \""
         << bound->getValueAsString("view") << "\"));\n";
    for (const Field &field : step.fields) {
      std::string kind = kindOf(field), member = "out." + camel(field.name);
      if (kind == "float" || kind == "bool" || kind == "uint" || kind == "int") {
        os << "  " << member << " = in." << field.name << "();\n";
        if ((kind == "bool" || kind == "int") && field.kind->getValueAsBit("shown"))
          os << "  info.attributes[\"" << field.name << "\"] = "
             << (kind == "bool" ? member + " ? \"yes\" : \"no\"" : "std::to_string(" + member + ")") << ";\n";
      } else if (kind == "enum") {
        std::string type = field.kind->getValueAsString("schemaType").str();
        os << "  if (std::optional<" << type << "> known = ops::fromSchema<" << type << ">(in." << field.name
           << "()))\n    " << member << " = *known;\n  else\n    return invalid(fmt::format(\"unknown " << step.mnemonic << " "
           << llvm::join(llvm::split(field.name, '_'), " ") << " {}\", static_cast<int>(in." << field.name
           << "())));\n";
        if (field.kind->getValueAsBit("shown"))
          os << "  info.attributes[\"" << field.name << "\"] = fb::EnumName" << type << "(in." << field.name << "());\n";
      }
    }
    os << "  return Status();\n}\n";
  }
  os << "\nconst char *kernelName(fb::Kernel kernel) {\n  switch (kernel) {\n";
  for (const Step &step : steps)
    os << "    case fb::Kernel::" << step.table << ": return \"" << step.mnemonic << "\";\n";
  os << "    default: return \"unknown kernel\";\n  }\n}\n\n"
        "// The step's kernel: its fields, then (hasStepChecks) the hand-written\n"
        "// decode<Table> with the checks across fields and the rest of the step's\n"
        "// description (StepInfo).\n"
        "StatusOr<Kernel> decodeKernel(const fb::Step &step, StepChecker &check, StepInfo &info) {\n"
        "  switch (step.kernel_type()) {\n";
  for (const Step &step : steps)
    os << "    case fb::Kernel::" << step.table << ": {\n      " << step.table << " decoded;\n"
       << "      const fb::" << step.table << " &in = *step.kernel_as_" << step.table << "();\n"
       << "      EIN_RETURN_IF_ERROR(decode" << step.table << "Fields(in, check, decoded, info));\n"
       << (step.def->getValueAsBit("hasStepChecks")
               ? "      EIN_RETURN_IF_ERROR(decode" + step.table + "(in, check, decoded, info));\n"
               : "      (void)in;\n")
       << "      return Kernel(std::move(decoded));\n    }\n";
  os << "    default: break;  // kernel_as_* is null for these\n  }\n"
        "  return Status(StatusCode::Unimplemented,\n"
        "                fmt::format(\"unsupported kernel type {}: this runtime runs ";
  for (size_t i = 0; i < steps.size(); ++i)
    os << (i == 0 ? "" : i + 1 == steps.size() ? " and " : ", ") << steps[i].mnemonic;
  os << " (was the artifact written for a newer runtime?)\",\n"
        "                            static_cast<int>(step.kernel_type())));\n}\n#endif  // GET_STEP_DECODERS\n";
  return false;
}

mlir::GenRegistration schema("gen-step-schema", "the kernel steps' FlatBuffers tables", genSchema);
mlir::GenRegistration writers("gen-step-writers", "the artifact writer's step serialisation", genWriters);
mlir::GenRegistration stepFields("gen-step-fields", "the runtime's decoded step structs", genFields);
mlir::GenRegistration decoders("gen-step-decoders", "the loader's step field decoding", genDecoders);

}  // namespace

int main(int argc, char **argv) { return mlir::MlirTblgenMain(argc, argv); }
