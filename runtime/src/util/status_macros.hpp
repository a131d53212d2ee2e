// Early-return helpers for Status and StatusOr (internal to the runtime).
#pragma once

#include "ein/status.hpp"

#define EIN_CONCAT_INNER_(a, b) a##b
#define EIN_CONCAT_(a, b) EIN_CONCAT_INNER_(a, b)

// Returns the Status of `expr` from the enclosing function if it is an error.
#define EIN_RETURN_IF_ERROR(expr)                       \
  do {                                                  \
    ::ein::Status ein_status_ = (expr);                 \
    if (!ein_status_.ok()) return ein_status_;          \
  } while (false)

// `lhs = value of expr`, or returns its error from the enclosing function.
#define EIN_ASSIGN_OR_RETURN(lhs, expr) EIN_ASSIGN_OR_RETURN_IMPL_(EIN_CONCAT_(ein_status_or_, __LINE__), lhs, expr)
#define EIN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
