"""The documentation's Python blocks, and the shell blocks that need NumPy, run as written (issue 41).

tests/docs/run_docs.py finds the marked blocks of README.md, docs/ and examples/README.md; ctest's
docs_commands runs the ones that need only the tools and lists these as skipped. Here, with the
package built, each document that has such blocks runs all of its blocks in order under this
interpreter (later blocks use what earlier ones made: artifacts, .npy files). The tools come from
$EIN_BUILD_DIR/bin (scripts/test.sh sets it), else build/bin; without them this module skips,
except under CI (CI=true), where it fails.
"""
import contextlib
import io
import os
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "docs"))
import run_docs  # noqa: E402

BIN = pathlib.Path(os.environ.get("EIN_BUILD_DIR", REPO / "build")) / "bin"


def documents_with_python_blocks():
    errors = []
    documents = run_docs.collect(run_docs.DEFAULT_DOCS, errors)
    return [str(d.path) for d in documents if any(b.action == "run" and b.needs_python for b in d.blocks)]


DOCUMENTS = documents_with_python_blocks()


def test_some_documents_have_python_blocks():
    assert "README.md" in DOCUMENTS and "docs/python.md" in DOCUMENTS


@pytest.mark.parametrize("document", DOCUMENTS)
def test_document_blocks_run(document):
    if not (BIN / "einc").exists():
        message = f"{BIN}/einc does not exist: build the tools (scripts/build.sh) or set EIN_BUILD_DIR"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        status = run_docs.main(["--bin", str(BIN), "--python", sys.executable, document])
    assert status == 0, output.getvalue()
