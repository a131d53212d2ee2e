// ein.compile's native half (compile.cpp).
#pragma once

#include <nanobind/nanobind.h>

#include "model.hpp"

namespace ein::python {

// _ein.compile_model(text, filename, weights_path, weight_arrays, random_seed,
// dims, configs, base_model_prefix, target, precision, dump_ir, threads,
// device) -> (model | None,
// diagnostics, unused weight names); each diagnostic is (severity, file,
// line, column, message, rendered). _ein.declared_dims(text) -> [(name,
// kind)] or None: the dims the text declares, for ein.compile's checks of
// dims= in Python words. _ein.read_checkpoint and _ein.checkpoint_text: a
// Hugging Face checkpoint folder through the model library (ein.from_pretrained,
// ein.export_ein).
void bindCompile(nanobind::module_ &module);

}  // namespace ein::python
