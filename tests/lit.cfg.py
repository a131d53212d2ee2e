# lit configuration for ein's IR tests (ein-opt / einc piped into FileCheck).
import os

import lit.formats

config.name = "ein"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".ein"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.ein_binary_dir, "tests")
# conformance/cases holds models with data, run by the conformance tests, not lit.
config.excludes = ["lit.cfg.py", "lit.site.cfg.py.in", "Inputs", "CMakeLists.txt", "cases"]

config.environment["PATH"] = os.pathsep.join(
    [config.ein_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])
config.substitutions.append(("%conformance", config.ein_conformance_dir))
# Sanitizer builds (EIN_SANITIZE): their allocators and shadow memory change
# what memory measurements see.
if config.ein_sanitize:
  config.available_features.add("sanitizers")
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
