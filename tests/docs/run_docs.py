#!/usr/bin/env python3
"""Runs the commands and code that the documentation shows (issue 41: every documented command
works as written).

The documents are README.md, every .md file under docs/ and examples/README.md. A fenced block
of commands or code (info string sh, bash, shell, console, python, py, or none) carries a marker
on the line just before its opening fence, an HTML comment that GitHub does not render:

    <!-- docs-test: run -->                 run this block
    <!-- docs-test: run needs=python -->    run it only where the Python package is available
                                            (python blocks always need it)
    <!-- docs-test: skip REASON -->         not run, for the reason given (e.g. needs a GPU)

or, where no line can precede the fence (the README's first line), after the language in the
info string, which GitHub does not render either: ```sh docs-test: skip REASON

A command block without a marker is an error, so a new block is run unless someone decides,
with a reason, that it is not. Blocks of other languages (text, MLIR) are output samples and
source text, and are not run; an ```ein block marked `<!-- docs-test: compile -->` is a whole
model, compiled with einc (random weights), and a ```text block marked
`<!-- docs-test: output -->` is a sample of output: its '$ COMMAND' lines are run, and each one's
output must be the lines after it ('...' for any number of lines).

Each document's blocks run in order in one temporary working directory, so a block may use what
an earlier block of the same document made (an artifact, .npy outputs). The directory holds
`examples`, `scripts`, `tests` and `bench` (links into the repository), `build` (a link to the
build folder of --bin) and the files listed in SEEDS (weights and inputs a reader would have of
their own). Shell blocks run under `bash -e -o pipefail` with --bin first on PATH (and, with
--python, that interpreter's folder next); python blocks run with --python. A failing block is
reported as FILE:LINE of the command that failed, with its output.

Modes:
  (default)      every block that needs nothing but the tools; blocks that need the Python package
                 are listed as skipped (ctest: docs_commands)
  --python PY    as well as those, the blocks that need the package, under PY (a venv with the
                 package `ein` and NumPy); python/tests/test_docs_snippets.py runs this per document
  --only-python  with --python: only the documents that have such blocks (each still runs all of
                 its blocks in order, since later ones use what earlier ones made)
Exit status: 0 when every block run passed, 1 when any failed or a marker is missing or malformed,
77 when --python names an interpreter without the package (nothing run).
"""

from __future__ import annotations

import argparse
import array
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DOCS = ["README.md", "docs/**/*.md", "examples/README.md"]
COMMAND_LANGUAGES = {"sh", "bash", "shell", "console", "python", "py", ""}
PYTHON_LANGUAGES = {"python", "py"}
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<body>.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
LINKS = ["examples", "scripts", "tests", "bench"]
SKIPPED_NEEDS_PYTHON = 77


@dataclass
class Block:
    path: Path  # relative to the repository
    line: int  # the opening fence's line, from 1
    language: str
    text: str
    action: str = ""  # run, skip
    needs_python: bool = False
    timeout: int = 300
    reason: str = ""

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def is_python(self) -> bool:
        return self.language in PYTHON_LANGUAGES


@dataclass
class Result:
    block: Block
    status: str  # passed, failed, skipped
    detail: str = ""
    seconds: float = 0.0


@dataclass
class Document:
    path: Path
    blocks: list[Block] = field(default_factory=list)


def parse(path: Path, text: str, errors: list[str]) -> Document:
    """The fenced blocks of one Markdown file with their markers; marker errors go to errors."""
    document = Document(path)
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            if MARKER.match(lines[i]) and not (i + 1 < len(lines) and FENCE.match(lines[i + 1])):
                errors.append(f"{path}:{i + 1}: a docs-test marker must be on the line just before a fence")
            i += 1
            continue
        fence = opening.group("fence")
        indent = len(opening.group("indent"))
        info = opening.group("info").strip()
        language = info.split()[0].lower() if info else ""
        in_info = re.match(r"^\S+\s+docs-test:\s*(?P<body>.*)$", info)
        start = i
        body = []
        i += 1
        while i < len(lines):
            closing = re.match(r"^\s*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$", lines[i])
            if closing:
                break
            line = lines[i]
            body.append(line[indent:] if line[:indent].strip() == "" else line.lstrip())
            i += 1
        i += 1  # the closing fence
        block = Block(path, start + 1, language, "\n".join(body) + "\n")
        marker = in_info or (MARKER.match(lines[start - 1]) if start > 0 else None)
        if marker:
            words = marker.group("body").split()
            action = words[0] if words else ""
            if action == "run":
                block.action = "run"
                for option in words[1:]:
                    if option == "needs=python":
                        block.needs_python = True
                    elif option.startswith("timeout=") and option[8:].isdigit():
                        block.timeout = int(option[8:])
                    else:
                        errors.append(f"{block.where}: unknown docs-test option '{option}'")
                if block.is_python:
                    block.needs_python = True
            elif action == "compile" and language == "ein":
                block.action = "compile"
                document.blocks.append(block)
                continue
            elif action == "output" and language == "text":
                block.action = "output"
                if not block.text.startswith("$ "):
                    errors.append(f"{block.where}: a 'docs-test: output' block starts with '$ COMMAND'")
                document.blocks.append(block)
                continue
            elif action == "skip":
                block.action = "skip"
                block.reason = " ".join(words[1:])
                if not block.reason:
                    errors.append(f"{block.where}: 'docs-test: skip' needs a reason")
            else:
                errors.append(f"{block.where}: a docs-test marker is 'run [needs=python] [timeout=S]', 'skip REASON', "
                              "'compile' on an ```ein block or 'output' on a ```text block")
                continue
            if language not in COMMAND_LANGUAGES:
                errors.append(f"{block.where}: a docs-test marker on a ```{language} block, which is never run")
                continue
            if block.action == "run" and language in ("", "console"):
                errors.append(f"{block.where}: a block to run says its language (```sh or ```python)")
                continue
            document.blocks.append(block)
        elif language in COMMAND_LANGUAGES:
            errors.append(f"{block.where}: a ```{language} block without a marker: put "
                          "'<!-- docs-test: run -->' or '<!-- docs-test: skip REASON -->' on the line before it "
                          "(a sample of output is ```text, a model ```ein)")
    return document


# ---- seeds: what a reader has of their own -------------------------------------------------------

def write_npy(path: Path, dtype: str, shape: tuple[int, ...], values: list) -> None:
    """A .npy file without NumPy: dtype is '<f4', '<i4', '<i8' or '|b1'."""
    codes = {"<f4": "f", "<i4": "i", "<i8": "q", "|b1": "B"}
    data = array.array(codes[dtype], values)
    if sys.byteorder != "little" and dtype != "|b1":
        data.byteswap()
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        dtype, "".join(f"{n}, " for n in shape) if len(shape) != 1 else f"{shape[0]},")
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data.tobytes())


def write_safetensors(path: Path, tensors: dict[str, tuple[list[int], list[float]]]) -> None:
    """An F32 safetensors file without NumPy or the safetensors package."""
    header, chunks, offset = {}, [], 0
    for name, (shape, values) in tensors.items():
        data = array.array("f", values)
        if sys.byteorder != "little":
            data.byteswap()
        chunks.append(data.tobytes())
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(chunks[-1])]}
        offset += len(chunks[-1])
    encoded = json.dumps(header).encode()
    encoded += b" " * ((8 - len(encoded) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + b"".join(chunks))


def model_params(bin_dir: Path, model: Path, scratch: Path) -> list[tuple[str, list[int]]]:
    """The parameters a model declares, as ein-inspect --json lists them."""
    artifact = scratch / (model.stem + ".params.einb")
    subprocess.run([str(bin_dir / "einc"), str(model), "-o", str(artifact), "--random-weights", "1"],
                   check=True, capture_output=True, text=True)
    described = json.loads(subprocess.run([str(bin_dir / "ein-inspect"), "--json", str(artifact)],
                                          check=True, capture_output=True, text=True).stdout)
    return [(p["name"], p["shape"]) for p in described["params"]["tensors"]]


def make_seeds(bin_dir: Path, folder: Path) -> None:
    """Weights and inputs that the documents' readers bring themselves (from PyTorch, a tokenizer):
    mhsa.safetensors and llama.safetensors hold N(0, 0.02) values under the examples' parameter
    names, x.npy is an input of mhsa.ein, ids.npy and mask.npy a batch of 2 x 7 for
    bert_encoder.ein."""
    rng = random.Random(41)
    for model, weights in (("mhsa", "mhsa.safetensors"), ("llama_decoder", "llama.safetensors")):
        params = model_params(bin_dir, REPO / "examples" / "models" / f"{model}.ein", folder)
        tensors = {}
        for name, shape in params:
            count = 1
            for n in shape:
                count *= n
            tensors[name] = (shape, [rng.gauss(0.0, 0.02) for _ in range(count)])
        write_safetensors(folder / weights, tensors)
    write_npy(folder / "x.npy", "<f4", (5, 16), [rng.gauss(0.0, 1.0) for _ in range(80)])
    write_npy(folder / "ids.npy", "<i4", (2, 7), [rng.randrange(1000) for _ in range(14)])
    write_npy(folder / "mask.npy", "<i4", (2, 7), [1] * 7 + [1] * 4 + [0] * 3)
    for leftover in folder.glob("*.params.einb"):
        leftover.unlink()


SEEDS = ["mhsa.safetensors", "llama.safetensors", "x.npy", "ids.npy", "mask.npy"]


# ---- running ------------------------------------------------------------------------------------

SHELL_PRELUDE = ['trap \'echo "docs-test: failed at block line $((LINENO - {skip}))" >&2\' ERR']


def matches(expected: list[str], actual: list[str]) -> bool:
    """Line by line, trailing spaces aside; an expected line '...' stands for any number of lines."""
    if not expected:
        return not actual
    if expected[0].strip() == "...":
        return any(matches(expected[1:], actual[i:]) for i in range(len(actual) + 1))
    return bool(actual) and expected[0].rstrip() == actual[0].rstrip() and matches(expected[1:], actual[1:])


def check_output(block: Block, workdir: Path, env: dict[str, str]) -> Result:
    """A ```text sample that starts with '$ COMMAND': each command's output (stdout and stderr) must be
    the lines that follow it, '...' standing for any lines."""
    started = time.monotonic()
    lines = block.text.rstrip("\n").split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("$ ")] + [len(lines)]
    for start, end in zip(starts, starts[1:]):
        command = lines[start][2:]
        completed = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=workdir, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   text=True, errors="replace", timeout=block.timeout)
        actual = completed.stdout.rstrip("\n").split("\n") if completed.stdout.strip() else []
        where = f"{block.path}:{block.line + 1 + start}"
        if completed.returncode != 0:
            return Result(block, "failed", f"{where}: exit status {completed.returncode}\n{tail(completed.stdout)}",
                          time.monotonic() - started)
        if not matches(lines[start + 1:end], actual):
            return Result(block, "failed", f"{where}: the output differs from the sample below it; it is now:\n"
                          f"{tail(completed.stdout, 200)}", time.monotonic() - started)
    return Result(block, "passed", "", time.monotonic() - started)


def run_block(block: Block, workdir: Path, env: dict[str, str], python: str | None) -> Result:
    if block.action == "output":
        return check_output(block, workdir, env)
    started = time.monotonic()
    script = workdir / ".docs-test-block"
    if block.action == "compile":
        script = script.with_suffix(".ein")
        script.write_text(block.text)
        command = ["einc", str(script), "-o", str(script.with_suffix(".einb")), "--random-weights", "1"]
    elif block.is_python:
        script = script.with_suffix(".py")
        script.write_text(block.text)
        command = [python or sys.executable, str(script)]
    else:
        script = script.with_suffix(".sh")
        prelude = [line.format(skip=len(SHELL_PRELUDE)) for line in SHELL_PRELUDE]
        script.write_text("\n".join(prelude) + "\n" + block.text)
        command = ["bash", "-e", "-o", "pipefail", str(script)]
    try:
        completed = subprocess.run(command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, text=True, errors="replace", timeout=block.timeout)
    except subprocess.TimeoutExpired as timeout:
        output = timeout.stdout if isinstance(timeout.stdout, str) else (timeout.stdout or b"").decode(errors="replace")
        return Result(block, "failed", f"{block.where}: timed out after {block.timeout} s\n{tail(output)}",
                      time.monotonic() - started)
    finally:
        script.unlink(missing_ok=True)
        script.with_suffix(".einb").unlink(missing_ok=True)
    seconds = time.monotonic() - started
    if completed.returncode == 0:
        return Result(block, "passed", completed.stdout, seconds)
    where = block.where
    failed_line = re.search(r"docs-test: failed at block line (\d+)", completed.stdout)
    if failed_line:
        where = f"{block.path}:{block.line + int(failed_line.group(1))}"
    elif block.action == "compile":
        located = re.search(re.escape(str(script)) + r":(\d+):", completed.stdout)
        if located:
            where = f"{block.path}:{block.line + int(located.group(1))}"
    elif block.is_python:
        traceback_line = re.findall(r'File "' + re.escape(str(script)) + r'", line (\d+)', completed.stdout)
        if traceback_line:
            where = f"{block.path}:{block.line + int(traceback_line[-1])}"
    return Result(block, "failed", f"{where}: exit status {completed.returncode}\n{tail(completed.stdout)}", seconds)


def tail(text: str, lines: int = 40) -> str:
    kept = text.rstrip("\n").split("\n")
    return "\n".join(("    " + line) for line in kept[-lines:])


def python_has_package(python: str) -> str | None:
    """None when python imports ein and numpy, else why not."""
    try:
        probe = subprocess.run([python, "-c", "import ein, numpy"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    return None if probe.returncode == 0 else (probe.stderr.strip().split("\n") or ["?"])[-1]


def collect(patterns: list[str], errors: list[str]) -> list[Document]:
    paths: list[Path] = []
    for pattern in patterns:
        found = sorted(REPO.glob(pattern)) if any(c in pattern for c in "*?[") else [REPO / pattern]
        for path in found:
            if path.is_file() and path not in paths:
                paths.append(path)
            elif not path.exists():
                errors.append(f"{pattern}: no such document")
    return [parse(p.relative_to(REPO) if p.is_relative_to(REPO) else p, p.read_text(encoding="utf-8"), errors)
            for p in paths]


def self_test(bin_dir: Path) -> int:
    """The test can fail: a failing command is reported at its line, and an unmarked block is an error."""
    import contextlib
    import io

    def check(text: str, expected_status: int, expected: str) -> bool:
        with tempfile.TemporaryDirectory() as folder:
            document = Path(folder) / "sample.md"
            document.write_text(text)
            output = io.StringIO()
            with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
                status = main(["--bin", str(bin_dir), str(document)])
            printed = output.getvalue().replace(str(document), "sample.md")
        ok = status == expected_status and expected in printed
        print(f"{'ok' if ok else 'WRONG'}: status {status} (expected {expected_status}), "
              f"{'found' if expected in printed else 'missing'} {expected!r}")
        if not ok:
            print(tail(printed))
        return ok

    results = [
        check("# sample\n<!-- docs-test: run -->\n```sh\nein-inspect --help\ntrue\n```\n", 0,
              "docs-test: 1 blocks run, 1 passed, 0 failed"),
        check("# sample\n\n<!-- docs-test: run -->\n```sh\ntrue\nein-run no-such.einb --random-inputs 1\n"
              "true\n```\n", 1, "FAILED sample.md:6: exit status 1"),
        check("<!-- docs-test: output -->\n```text\n$ printf 'a\\nb\\nc\\n'\na\n...\nc\n```\n", 0,
              "1 blocks run, 1 passed"),
        check("<!-- docs-test: output -->\n```text\n$ echo hello\nbye\n```\n", 1,
              "FAILED sample.md:3: the output differs"),
        check("text\n```sh\neinc --help\n```\n", 1, "sample.md:2: a ```sh block without a marker"),
        check("<!-- docs-test: skip -->\n```sh\ntrue\n```\n", 1, "needs a reason"),
        check("<!-- docs-test: skip needs a GPU -->\n```sh\nfalse\n```\n```text\nout\n```\n", 0,
              "0 blocks run, 0 passed, 0 failed, 1 skipped"),
        check("<!-- docs-test: run -->\n```python\nprint(1)\n```\n", 0, "needs the Python package"),
    ]
    return 0 if all(results) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", type=Path, default=REPO / "build" / "bin", help="the tools' folder (default build/bin)")
    parser.add_argument("--python", help="an interpreter with the package ein and NumPy: run the blocks that need it")
    parser.add_argument("--only-python", action="store_true", help="with --python: only documents with such blocks")
    parser.add_argument("--list", action="store_true", help="list the blocks and their markers, run nothing")
    parser.add_argument("--keep", action="store_true", help="keep the working directories (printed)")
    parser.add_argument("--self-test", action="store_true", help="check that the test fails where it should")
    parser.add_argument("docs", nargs="*", help=f"documents or globs, relative to the repository (default {DEFAULT_DOCS})")
    args = parser.parse_args(argv)

    if args.self_test:
        return self_test(args.bin.resolve())
    errors: list[str] = []
    documents = collect(args.docs or DEFAULT_DOCS, errors)
    if args.list:
        for document in documents:
            for block in document.blocks:
                what = block.action + (" needs=python" if block.needs_python and block.action == "run" else "")
                print(f"{block.where}: {block.language or '-'} {what}{' (' + block.reason + ')' if block.reason else ''}")
        for error in errors:
            print(f"error: {error}")
        return 1 if errors else 0
    for error in errors:  # reported again at the end; the blocks still run
        print(f"error: {error}", flush=True)
    if args.only_python and not args.python:
        parser.error("--only-python needs --python")
    if args.python:
        args.python = os.path.abspath(args.python)  # not resolved: a venv's python is a link out of it
        why = python_has_package(args.python)
        if why:
            print(f"skipped: {args.python} cannot import ein and numpy ({why}); scripts/python-env.sh builds it")
            return SKIPPED_NEEDS_PYTHON
        if args.only_python:
            documents = [d for d in documents if any(b.action == "run" and b.needs_python for b in d.blocks)]
    bin_dir = args.bin.resolve()
    for tool in ("einc", "ein-run", "ein-inspect", "ein-opt"):
        if not (bin_dir / tool).exists():
            print(f"error: {bin_dir / tool} does not exist (--bin names the build's bin folder)", file=sys.stderr)
            return 1

    root = Path(tempfile.mkdtemp(prefix="ein-docs-test-"))
    results: list[Result] = []
    try:
        seeds = root / "seeds"
        seeds.mkdir()
        if any(b.action in ("run", "compile", "output") and (args.python or not b.needs_python) for d in documents for b in d.blocks):
            make_seeds(bin_dir, seeds)
        env = dict(os.environ)
        path = [str(bin_dir)]
        if args.python:
            path.append(str(Path(args.python).parent))
        env["PATH"] = os.pathsep.join(path + [env.get("PATH", "")])
        env["EIN_BUILD_DIR"] = str(bin_dir.parent)
        for number, document in enumerate(documents):
            workdir = root / f"{number:02d}-{document.path.as_posix().replace('/', '_')}"
            workdir.mkdir()
            for link in LINKS:
                (workdir / link).symlink_to(REPO / link)
            (workdir / "build").symlink_to(bin_dir.parent)
            for seed in SEEDS:
                if (seeds / seed).exists():
                    shutil.copy(seeds / seed, workdir / seed)
            for block in document.blocks:
                if block.action == "skip":
                    results.append(Result(block, "skipped", block.reason))
                elif block.needs_python and not args.python:
                    results.append(Result(block, "skipped", "needs the Python package (run with --python; "
                                                            "python/tests/test_docs_snippets.py does)"))
                else:
                    result = run_block(block, workdir, env, args.python)
                    results.append(result)
                    print(f"{result.status:7} {block.where} ({result.seconds:.1f} s)", flush=True)
                    if result.status == "failed":
                        print(result.detail, flush=True)
    finally:
        if args.keep:
            print(f"working directories kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)

    for result in results:
        if result.status == "skipped":
            print(f"skipped {result.block.where}: {result.detail}")
    failed = [r for r in results if r.status == "failed"]
    passed = [r for r in results if r.status == "passed"]
    skipped = [r for r in results if r.status == "skipped"]
    print(f"docs-test: {len(passed) + len(failed)} blocks run, {len(passed)} passed, {len(failed)} failed, "
          f"{len(skipped)} skipped ({sum(r.seconds for r in results):.0f} s)")
    for result in failed:
        print(f"FAILED {result.detail.split(chr(10))[0]}")
    for error in errors:
        print(f"FAILED {error}")
    return 1 if failed or errors else 0


if __name__ == "__main__":
    sys.exit(main())
