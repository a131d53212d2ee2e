// The einc arguments that compile a conformance case: its model.ein with its
// weights.safetensors, or, for a case that holds a Hugging Face checkpoint
// folder (checkpoint/config.json), that folder through ein's model library.
#pragma once

#include <filesystem>
#include <string>

inline std::string caseSource(const std::filesystem::path &caseDir) {
  if (std::filesystem::exists(caseDir / "checkpoint" / "config.json"))
    return "--hf " + (caseDir / "checkpoint").string();
  return (caseDir / "model.ein").string() + " --weights " + (caseDir / "weights.safetensors").string();
}
