#ifndef KERN_STEPS_TD
#define KERN_STEPS_TD

// A kern op's step in the artifact, defined once beside the op's ODS:
//
//   let step = (fields StepSizes<3>:$batch, StepSize:$m, ...,
//                      StepView<"$batch.concat({$m, $k})", ["F32"]>:$a, ...);
//
// ein-tblgen (ir/tblgen) generates from it the step's FlatBuffers table
// (schemas/kernel_steps.fbs), the writer's serialisation of the op
// (-gen-step-writers), the runtime's decoded struct (-gen-step-fields) and
// the loader's decoding of every size, view, scalar and enum field with the
// checks written here (-gen-step-decoders). What is left to write by hand is
// what the fields cannot say: the loader's checks across fields and the
// runtime's extra members (runtime/src/program/program.hpp).
//
// The table is named after the op's class (Kern_GemmOp: Gemm), the step after
// the op's mnemonic ("gemm"). Fields keep their order in the table: append
// new ones at the end, as the schema's rules require. A writer reads field
// `x` from the op's accessors of the same name (getX(), getXView(); a view
// whose op has no operand `x` views the op's result); `stepWrites` gives the
// C++ expression for a field that has no such accessor.

// The marker of a step's field list, as `ins` is of an op's arguments.
def fields;
// The marker of a step's writer expressions, `(writes [{expr}]:$field, ...)`.
def writes;

// Kinds a field can take; `schemaType` is its type in the FlatBuffers table.
class StepField<string schemaType_, string kind_> {
  string schemaType = schemaType_;
  string kind = kind_;
}

// A size (the schema's Size: a constant, or the index of a size expression
// over the dims). The writer takes it from an #ein.sizes
// attribute holding one size; the loader resolves it and checks that it is
// not negative, and ein-inspect shows it among the step's sizes.
class StepSizeField<bit shown_> : StepField<"Size", "size"> {
  bit shown = shown_;
}
def StepSize : StepSizeField<1>;
// A size that only some steps use (their other fields say which): the
// loader resolves it, the hand-written decoder checks and shows it.
def StepConditionalSize : StepSizeField<0>;

// An iteration space: one size per axis. Its rank plus `extraAxes` (the
// scalar sizes that join it in the step's spaces) is within the runtime's
// rank limit, the element count is bounded, and the rank is at least minRank.
class StepSizes<int extraAxes_ = 0, int minRank_ = 0> : StepField<"[Size]", "sizes"> {
  int extraAxes = extraAxes_;
  int minRank = minRank_;
}

// A strided view (the schema's View) of a tensor over `space`, a C++
// expression of the decoded fields (`$name`) giving its Dims: the loader
// checks that it stays within its tensor, that the tensor's dtype is one of
// `dtypes` (none: checked by hand) and, when `writes`, that the step may
// write it (arena, output or state) with no more elements than it holds.
// An empty space: the view is decoded by hand (its space needs a field the
// hand-written checks must validate first).
class StepView<string space_, list<string> dtypes_ = [], bit writes_ = 0> : StepField<"View", "view"> {
  string space = space_;
  list<string> dtypes = dtypes_;
  bit writes = writes_;
}
class StepOptionalView<string space_, list<string> dtypes_ = []> : StepField<"View", "optional_view"> {
  string space = space_;
  list<string> dtypes = dtypes_;
  bit writes = 0;
}

// Scalars with the schema's default. Without stepWrites, a writer reads a
// scalar from the op's attribute of the field's name.
class StepFloat<string defaultValue_ = ""> : StepField<"float", "float"> {
  string defaultValue = defaultValue_;
}
// `shown`: ein-inspect lists the value among the step's attributes.
class StepBool<string defaultValue_ = "false", bit shown_ = 0> : StepField<"bool", "bool"> {
  string defaultValue = defaultValue_;
  bit shown = shown_;
}
def StepUInt : StepField<"uint", "uint">;
class StepInt<bit shown_ = 0> : StepField<"long", "int"> {
  bit shown = shown_;
}
// A count of trailing axes of the iteration space `sizes` (a field of kind
// StepSizes): the loader checks that it is at most that space's rank before
// it decodes the views, whose spaces may then drop those axes.
class StepAxisCount<string sizes_> : StepField<"uint", "axis_count"> {
  string sizes = sizes_;
}
// One of the schema's enums (hand-written in schemas/step_types.fbs, and in
// the op table schemas/ops/op_table.def), read back with ops::fromSchema.
class StepEnum<string enumName_, string defaultValue_, bit shown_ = 0> : StepField<enumName_, "enum"> {
  string defaultValue = defaultValue_;
  bit shown = shown_;
}

// A field the hand-written code writes and decodes: its schema type and the
// runtime struct's member type.
class StepCustom<string schemaType_, string runtimeType_> : StepField<schemaType_, "custom"> {
  string runtimeType = runtimeType_;
}

// A bound on a step's work: where `when` holds (it writes anything), each
// item it writes reads `count` elements through view `view` without
// repeating them in a sound artifact (a reduction's length), so `count` may
// not exceed that view's tensor. With the written view's bound this bounds
// every step's work by the sizes of real tensors.
class StepReadBound<string view_, string count_, string when_ = "true"> {
  string view = view_;
  string count = count_;
  string when = when_;
}

// A product of sizes the loader bounds like an iteration space's element
// count (so that no loop count over it can overflow): `space` as in StepView,
// `name` for messages.
class StepSpaceCheck<string space_, string name_> {
  string space = space_;
  string name = name_;
}

#endif // KERN_STEPS_TD
