"""Serves an ein model with Triton Inference Server, with dynamic batching.

    python -m ein.serve model.einb --pad t            # or model.ein --random-weights 1
    python -m ein.serve model.einb --instances 2 --no-dynamic-batching --http-port 8000

The server binary and Triton's Python backend come from PyPI's nvidia-pytriton
wheel (no Debian or PyPI package ships the headers a native backend needs).
ein.serve writes a Triton model repository (config.pbtxt: max_batch_size, -1
for ranged dims, dynamic_batching, instance_group) whose model.py runs the
artifact with ein's runtime, one backend process per instance, and starts
tritonserver on loopback. Requests are checked one by one, merged (padded to
the longest in --pad dims) and each gets its own rows back (ein._batching).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from typing import Optional, Sequence

from ._batching import Signature, signature
from ._errors import Error

# Where scripts/python-env.sh installs the nvidia-pytriton wheel (with
# --target, apart from the venv's packages: it pins numpy<2, and only its
# server files are used).
_VENV_TRITON = pathlib.Path(sys.prefix) / "opt" / "nvidia-pytriton"

_TRITON_DTYPES = {"f32": "TYPE_FP32", "f16": "TYPE_FP16", "i32": "TYPE_INT32", "i64": "TYPE_INT64",
                  "bool": "TYPE_BOOL"}

# The model.py of a served model. The backend's stub embeds the system
# libpython and ignores PYTHONPATH, so the folders where this interpreter
# finds ein and NumPy come first on its path.
_MODEL_PY = """# Written by ein.serve: Triton's Python backend runs an ein model.
import sys
sys.path[:0] = {python_path!r}
from ein._triton_model import TritonPythonModel  # noqa: E402,F401
"""


class ServerError(RuntimeError):
    """The server could not be found or did not start; the message ends with its error lines."""


def triton_dist(explicit: Optional[os.PathLike] = None) -> pathlib.Path:
    """The folder of Triton's files in the nvidia-pytriton wheel
    (bin/tritonserver, backends/, python_backend_stubs/): ``explicit``, else
    $EIN_TRITON_DIR, else an importable pytriton, else the venv's copy."""
    candidates = [explicit, os.environ.get("EIN_TRITON_DIR")]
    spec = importlib.util.find_spec("pytriton")
    if spec and spec.submodule_search_locations:
        candidates.append(pathlib.Path(list(spec.submodule_search_locations)[0]) / "tritonserver")
    candidates.append(_VENV_TRITON / "pytriton" / "tritonserver")
    for candidate in candidates:
        if candidate and (pathlib.Path(candidate) / "bin" / "tritonserver").is_file():
            return pathlib.Path(candidate)
    raise ServerError("Triton Inference Server not found: install the nvidia-pytriton wheel (scripts/python-env.sh "
                      "does, see python/requirements-triton-server.txt) or point EIN_TRITON_DIR at its tritonserver "
                      "folder")


def _dims_text(axes) -> str:
    return ", ".join(str(axis if isinstance(axis, int) else -1) for axis in axes)


def model_config(name: str, sig: Signature, *, max_batch_size: int, dynamic_batching: bool,
                 max_queue_delay_us: int, instances: int, threads: int, artifact: str,
                 loader: str = "ein:load", max_padding: float = 1.25) -> str:
    """config.pbtxt for a model of this signature: the batch dim is Triton's
    batch axis, ranged dims are -1, the rest constants."""
    def tensors(kind, tensors):
        # Triton's batcher merges only requests of equal shapes unless an
        # input allows ragged batches; ein._batching merges the others itself.
        ragged = " allow_ragged_batch: true" if kind == "input" else ""
        return ",\n".join(f'  {{ name: "{t.name}" data_type: {_TRITON_DTYPES[t.dtype]} dims: [ {_dims_text(t.axes)} ]'
                           f'{ragged if any(isinstance(a, str) for a in t.axes) else ""} }}'
                           for t in tensors).join([f"{kind} [\n", "\n]\n"])

    parameters = {"artifact": artifact, "loader": loader, "threads": str(threads), "pad_dims": ",".join(sig.pad_dims),
                  "max_padding": repr(float(max_padding))}
    text = [f'name: "{name}"\nbackend: "python"\nmax_batch_size: {max_batch_size}\n',
            tensors("input", sig.inputs), tensors("output", sig.outputs),
            f"instance_group [ {{ count: {instances} kind: KIND_CPU }} ]\n"]
    if dynamic_batching:
        text.append(f"dynamic_batching {{ max_queue_delay_microseconds: {max_queue_delay_us} }}\n")
    text += [f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n' for key, value in parameters.items()]
    return "".join(text)


def free_port() -> int:
    """A loopback port free now (the kernel picks it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _stub_python_path(extra: Sequence[str]) -> list:
    """Where the backend's stub processes look for modules first: where this
    interpreter finds ein and NumPy, then ``extra``."""
    folders = [str(pathlib.Path(importlib.util.find_spec(name).origin).parent.parent) for name in ("ein", "numpy")]
    return list(dict.fromkeys([*folders, *map(str, extra)]))


class Server:
    """tritonserver serving one model on loopback; a context manager.

    ``artifact``: the model file (an .einb for ein:load); ``loader``: the
    "module:function" that loads it in each instance as loader(path,
    threads=N), returning an object with an ein.Model's inputs, outputs,
    dims and run (a benchmark serves ONNX Runtime this way); ``files``:
    more files for the model's folder; ``python_path``: folders the loader
    needs. Ports 0 are chosen free at start.
    """

    def __init__(self, artifact: os.PathLike, *, name: str = "model", pad_dims: Sequence[str] = (),
                 max_padding: float = 1.25, max_batch_size: Optional[int] = None, dynamic_batching: bool = True,
                 max_queue_delay_us: int = 1000,
                 instances: int = 1, threads: int = 1, http_port: int = 0, grpc_port: int = 0,
                 loader: str = "ein:load", files: Sequence[os.PathLike] = (), python_path: Sequence[str] = (),
                 exit_timeout_s: int = 30, triton_dir: Optional[os.PathLike] = None):
        self.artifact = pathlib.Path(artifact)
        sys.path[:0] = [folder for folder in python_path if folder not in sys.path]
        model = load_model(loader, self.artifact, threads=1)  # for its signature
        self.signature = signature(model, pad_dims)
        if max_batch_size is None:
            max_batch_size = self.signature.max_batch
        if not 1 <= max_batch_size <= self.signature.max_batch:
            raise ValueError(f"max_batch_size must be within 1..{self.signature.max_batch} (the range of the batch dim "
                             f"{self.signature.batch_dim!r}), got {max_batch_size}")
        if max_padding < 1:
            raise ValueError(f"max_padding is padded over real elements, at least 1, got {max_padding}")
        if instances < 1 or threads < 1:
            raise ValueError(f"instances and threads must be at least 1, got {instances} and {threads}")
        self.name = name
        self.config = model_config(name, self.signature, max_batch_size=max_batch_size,
                                   dynamic_batching=dynamic_batching, max_queue_delay_us=max_queue_delay_us,
                                   instances=instances, threads=threads, artifact=self.artifact.name, loader=loader,
                                   max_padding=max_padding)
        self.http_port, self.grpc_port = http_port, grpc_port
        self._files = [pathlib.Path(f) for f in files]
        self._python_path = list(python_path)
        self._exit_timeout_s = exit_timeout_s
        self._triton = triton_dist(triton_dir)
        self._workdir: Optional[pathlib.Path] = None
        self.process: Optional[subprocess.Popen] = None

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def log_path(self) -> pathlib.Path:
        assert self._workdir is not None, "the server has not started"
        return self._workdir / "tritonserver.log"

    def log(self, tail: int = 4000) -> str:
        """The server's log, its last ``tail`` characters."""
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except (OSError, AssertionError):
            return ""

    def _failure(self, what: str) -> ServerError:
        """What went wrong: the log's error lines (Triton starts them with E),
        which its closing table would push out of a plain tail."""
        errors = [line for line in self.log(1 << 20).splitlines()
                  if line.startswith("E") and "CudaDriverHelper" not in line]  # no GPU: harmless
        return ServerError(f"{what}; tritonserver's errors:\n" + "\n".join(errors[-10:] or [self.log()]))

    def _write_repository(self) -> pathlib.Path:
        repository = self._workdir / "models"
        version = repository / self.name / "1"
        version.mkdir(parents=True)
        (repository / self.name / "config.pbtxt").write_text(self.config)
        (version / "model.py").write_text(_MODEL_PY.format(python_path=_stub_python_path(self._python_path)))
        for path in [self.artifact, *self._files]:
            shutil.copy(path, version / path.name)
        return repository

    def _backends(self) -> pathlib.Path:
        """A copy of the wheel's backends/ with the stub for this Python (as
        PyTriton prepares it: the Python backend looks for the stub beside itself)."""
        backends = self._workdir / "backends"
        shutil.copytree(self._triton / "backends", backends)
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        stub = self._triton / "python_backend_stubs" / version / "triton_python_backend_stub"
        if not stub.is_file():
            raise ServerError(f"nvidia-pytriton has no Python backend stub for Python {version}")
        shutil.copy(stub, backends / "python" / stub.name)
        return backends

    def start(self, timeout_s: float = 120) -> "Server":
        """Starts tritonserver and waits until the model is ready. Ports left
        0 are chosen free; should another process take one first, the start
        is tried again with new ones."""
        chosen = {"http_port": self.http_port, "grpc_port": self.grpc_port}
        attempts = 1 if all(chosen.values()) else 3
        for attempt in range(1, attempts + 1):
            for port, given in chosen.items():
                setattr(self, port, given or free_port())
            try:
                return self._start_once(timeout_s)
            except ServerError as failure:
                if attempt == attempts or "already in use" not in str(failure):
                    raise
        return self

    def _start_once(self, timeout_s: float) -> "Server":
        self._workdir = pathlib.Path(tempfile.mkdtemp(prefix="ein-serve-"))
        libs = self._triton.parent.parent / "nvidia_pytriton.libs"
        env = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(filter(None, [os.environ.get("LD_LIBRARY_PATH"), str(libs)])))
        command = [
            str(self._triton / "bin" / "tritonserver"),
            f"--model-repository={self._write_repository()}", f"--backend-directory={self._backends()}",
            "--http-address=127.0.0.1", f"--http-port={self.http_port}",
            "--grpc-address=127.0.0.1", f"--grpc-port={self.grpc_port}",
            "--allow-metrics=false", "--allow-gpu-metrics=false", "--disable-auto-complete-config",
            f"--exit-timeout-secs={self._exit_timeout_s}",
            # Shared-memory regions are named per server, so servers side by side never meet.
            f"--backend-config=python,shm-region-prefix-name=ein{os.getpid()}_{self.http_port}_",
        ]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True)
        deadline = time.monotonic() + timeout_s
        ready = f"http://{self.http_url}/v2/models/{self.name}/ready"
        loopback = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                failure = self._failure(f"tritonserver exited with status {self.process.returncode}")
                self._cleanup()
                raise failure
            try:
                with loopback.open(ready, timeout=2) as response:
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        failure = self._failure(f"the model was not ready within {timeout_s:.0f} s")
        self.stop()
        raise failure

    def stop(self, timeout_s: Optional[float] = None) -> Optional[int]:
        """Stops the server as Triton does on SIGTERM (new requests are
        refused, those in flight finish, for up to exit_timeout_s), killing
        it if it outlives ``timeout_s`` (default: that and 30 s); returns
        its exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s if timeout_s is not None else self._exit_timeout_s + 30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
        self._cleanup()
        return self.process.returncode

    def _cleanup(self):
        # EIN_SERVE_KEEP=1 keeps the repository and the log, for a look after the fact.
        if self._workdir is not None and not os.environ.get("EIN_SERVE_KEEP"):
            shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> "Server":
        return self.start() if self.process is None else self

    def __exit__(self, *exc) -> None:
        self.stop()


def load_model(loader: str, path: os.PathLike, threads: int):
    """loader(path, threads=threads) for a "module:function" loader (ein:load,
    or a benchmark's stand-in with the same signature)."""
    module, _, function = loader.partition(":")
    return getattr(importlib.import_module(module), function)(path, threads=threads)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ein.serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="an artifact (.einb), or a model (.ein), with --weights or --random-weights "
                                      "where it has parameters")
    parser.add_argument("--weights",
                        help="weights for a .ein model: a .safetensors or .gguf file, or a checkpoint folder")
    parser.add_argument("--random-weights", type=int, metavar="SEED", help="random weights for a .ein model")
    parser.add_argument("--name", help="the model's name on the server (default: the file's stem)")
    parser.add_argument("--pad", action="append", default=[], metavar="DIM",
                        help="a ranged dim in which requests of different sizes are zero-padded to the longest and "
                             "batched together (the model must mask zeros, as a BERT attention mask does); "
                             "without it they batch only with requests of the same size")
    parser.add_argument("--max-padding", type=float, default=1.25, metavar="RATIO",
                        help="requests merge while the padded batch has at most RATIO times their elements "
                             "(default 1.25; 1 merges only equal sizes)")
    parser.add_argument("--max-batch-size", type=int, help="Triton's max_batch_size (default: the batch dim's maximum)")
    parser.add_argument("--no-dynamic-batching", action="store_true", help="run each request alone")
    parser.add_argument("--max-queue-delay-us", type=int, default=1000,
                        help="how long the dynamic batcher waits for more requests (default 1000)")
    parser.add_argument("--instances", type=int, default=1, help="model instances (processes) (default 1)")
    parser.add_argument("--threads", type=int, default=1, help="kernel threads per instance (default 1)")
    parser.add_argument("--exit-timeout", type=int, default=30, metavar="SECONDS",
                        help="on Ctrl-C or SIGTERM, how long requests in flight may take to finish (default 30)")
    parser.add_argument("--http-port", type=int, default=8000)
    parser.add_argument("--grpc-port", type=int, default=8001)
    args = parser.parse_args(argv)

    try:
        return _serve(parser, args)
    except (Error, ServerError, ValueError, OSError) as error:  # a bad model or option: its message, no traceback
        print(f"error: {error}", file=sys.stderr)
        return 1


def _serve(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    artifact = pathlib.Path(args.model)
    with tempfile.TemporaryDirectory(prefix="ein-serve-model-") as compiled:
        if artifact.suffix == ".ein":
            from ._compile import compile as compile_model
            # A model without parameters needs neither; one with parameters and
            # neither gets ein.compile's message, which names them.
            if args.weights is not None and args.random_weights is not None:
                parser.error("give --weights FILE or --random-weights SEED, not both")
            target = pathlib.Path(compiled) / (artifact.stem + ".einb")
            compile_model(artifact, weights=args.weights, random_weights=args.random_weights).save(target)
            artifact = target
        server = Server(artifact, name=args.name or pathlib.Path(args.model).stem, pad_dims=args.pad,
                        max_padding=args.max_padding,
                        max_batch_size=args.max_batch_size, dynamic_batching=not args.no_dynamic_batching,
                        max_queue_delay_us=args.max_queue_delay_us, instances=args.instances, threads=args.threads,
                        http_port=args.http_port, grpc_port=args.grpc_port, exit_timeout_s=args.exit_timeout)
        stop = []
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.append(True))
        server.start()
        print(f"serving {server.name!r} on HTTP {server.http_url} and gRPC {server.grpc_url} "
              f"(log: {server.log_path}); Ctrl-C stops", flush=True)
        while not stop and server.process.poll() is None:
            time.sleep(0.2)
        status = server.stop()
        print(f"stopped (tritonserver status {status})", flush=True)
        return 0 if status == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
