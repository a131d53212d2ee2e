// The `ein` dialect: the model language as tensor operations.
#pragma once

#include <map>
#include <string>

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ein/IR/Equations.h"

#include "ein/IR/EinOpsDialect.h.inc"
#include "ein/IR/EinOpsEnums.h.inc"
#define GET_ATTRDEF_CLASSES
#include "ein/IR/EinOpsAttrs.h.inc"
#define GET_OP_CLASSES
#include "ein/IR/EinOps.h.inc"
