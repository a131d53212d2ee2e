// Decodes a framed artifact into a Program, checking every tensor, binding,
// parameter and step against its bounds before anything can run.
#pragma once

#include <memory>
#include <string>

#include "ein/status.hpp"
#include "loader/artifact_bytes.hpp"
#include "loader/artifact_framing.hpp"
#include "program.hpp"

namespace ein::detail {

// `bytes` are kept alive by the program; `framing` points into them.
StatusOr<std::unique_ptr<Program>> decodeProgram(const Framing &framing, ArtifactBytes bytes, std::string name);

}  // namespace ein::detail
