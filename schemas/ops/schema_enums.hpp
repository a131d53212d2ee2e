// The op table against the artifact schema: every enum of the table is the
// FlatBuffers enum of the same name, value for value (checked here at compile
// time, so a row added to one and not the other does not build), and the
// checked conversion of a value read from an artifact.
#pragma once

#include <optional>

#include "ein/schema/ein_artifact_generated.h"
#include "ops/ops.hpp"

namespace ein::ops {

#define EIN_SCHEMA_MATCHES(Enum, Name) \
  static_assert(static_cast<int>(ein::schema::Enum::Name) == static_cast<int>(Enum::Name), #Enum "::" #Name);
#define EIN_OPCODE(Name, ...) EIN_SCHEMA_MATCHES(Opcode, Name)
#define EIN_ACTIVATION(Name, ...) EIN_SCHEMA_MATCHES(Activation, Name)
#define EIN_REDUCE_KIND(Name, ...) EIN_SCHEMA_MATCHES(ReduceKind, Name)
#define EIN_MASK_KIND(Name, ...) EIN_SCHEMA_MATCHES(MaskKind, Name)
#define EIN_LAYERNORM_VARIANT(Name, ...) EIN_SCHEMA_MATCHES(LayerNormVariant, Name)
#include "ops/op_table.def"
#undef EIN_SCHEMA_MATCHES

// The schema has no values the table lacks.
static_assert(static_cast<int>(ein::schema::Opcode::MAX) + 1 == kValueCount<Opcode>);
static_assert(static_cast<int>(ein::schema::Activation::MAX) + 1 == kValueCount<Activation>);
static_assert(static_cast<int>(ein::schema::ReduceKind::MAX) + 1 == kValueCount<ReduceKind>);
static_assert(static_cast<int>(ein::schema::MaskKind::MAX) + 1 == kValueCount<MaskKind>);
static_assert(static_cast<int>(ein::schema::LayerNormVariant::MAX) + 1 == kValueCount<LayerNormVariant>);

// The table's value of an enum read from an artifact, or none when the
// artifact holds a value the table does not have (written by a newer einc,
// or corrupt): FlatBuffers' verifier does not check enum values.
template <class Enum, class SchemaEnum>
std::optional<Enum> fromSchema(SchemaEnum value) {
  const auto raw = static_cast<int>(value);
  if (raw < 0 || raw >= kValueCount<Enum>) return std::nullopt;
  return static_cast<Enum>(raw);
}

// The schema's value of a table enum, or of another enum whose values were
// checked against the table (the compiler's kern dialect enums).
template <class SchemaEnum, class Enum>
constexpr SchemaEnum toSchema(Enum value) {
  return static_cast<SchemaEnum>(static_cast<int>(value));
}

}  // namespace ein::ops
