"""Serves a decoder over the OpenAI HTTP API: text in, streamed text out, many users at once.

    python -m ein.serve_llm model.einb --tokenizer tokenizer.json [--chat-template FILE]
    python -m ein.serve_llm model.ein --weights model.safetensors --tokenizer TOKENIZER_FOLDER
    python -m ein.serve_llm CHECKPOINT_FOLDER [--precision int8]    (ein.from_pretrained; its tokenizer)

Endpoints: POST /v1/completions and /v1/chat/completions (max_tokens, temperature, top_p,
seed, stop strings and token ids, n, stream as server-sent events ending in `data: [DONE]`,
usage), GET /v1/models, /health and /metrics (Prometheus). Every request is a sequence of one
ein.Scheduler (continuously batched; prompts that begin alike share their cache); a client that
disconnects cancels its sequences; beyond --max-waiting waiting requests the answer is 429.
Errors are OpenAI error bodies. SIGTERM stops taking requests, lets those in flight finish
(--shutdown-timeout) and exits 0. See docs/serving-llm.md.
"""

import argparse
import asyncio
import concurrent.futures
import json
import pathlib
import time
import uuid
from typing import Any, AsyncIterator, Dict, List, Optional

from ._errors import Error, InputError
from ._llm_text import Detokenizer, TextError, Tokenizer, stop_lists
from ._model import Model
from ._scheduler import Request, Scheduler


class ApiError(Exception):
    """An OpenAI error body with its HTTP status."""

    def __init__(self, status: int, message: str, param: Optional[str] = None, code: Optional[str] = None,
                 kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def _number(body: dict, name: str, default, low, high, integer=False):
    value = body.get(name, default)
    if value is None:
        return default
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not low <= value <= high:
        kind = "an integer" if integer else "a number"
        raise ApiError(400, f"'{name}' must be {kind} in [{low}, {high}], got {value!r}", param=name)
    return value


class LlmServer:
    """The HTTP side of one model: requests checked and turned into
    scheduler requests, tokens into text, metrics."""

    def __init__(self, model: Model, tokenizer: Tokenizer, *, model_name: str, max_sequences: int = 16,
                 threads: Optional[int] = None, max_waiting: int = 256, cache_block_rows: int = 16,
                 cache_blocks: int = 0, step_tokens: int = 0):
        self.model, self.tokenizer, self.model_name = model, tokenizer, model_name
        self.scheduler = Scheduler(model, max_sequences=max_sequences, threads=threads, max_waiting=max_waiting,
                                   cache_block_rows=cache_block_rows, cache_blocks=cache_blocks,
                                   step_tokens=step_tokens)
        # Each stream waits for its next token in a thread of its own while
        # the event loop serves the others.
        self._waiters = concurrent.futures.ThreadPoolExecutor(max_workers=max_sequences + max_waiting + 8,
                                                              thread_name_prefix="ein-token")
        self.created = int(time.time())
        self._metrics()

    def _metrics(self):
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
        self.registry = CollectorRegistry()
        self.requests = Counter("ein_requests", "HTTP requests by endpoint and status", ["endpoint", "status"],
                                registry=self.registry)
        self.prompt_tokens = Counter("ein_prompt_tokens", "prompt tokens taken", registry=self.registry)
        self.cached_tokens = Counter("ein_cached_prompt_tokens", "prompt tokens served from a cached prefix",
                                     registry=self.registry)
        self.generated_tokens = Counter("ein_generated_tokens", "tokens generated", registry=self.registry)
        self.preemptions = Counter("ein_preemptions", "times a request gave its cache blocks to others and ran "
                                   "its tokens again", registry=self.registry)
        buckets = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
        self.first_token = Histogram("ein_time_to_first_token_seconds", "from the request to its first token",
                                     buckets=buckets, registry=self.registry)
        self.inter_token = Histogram("ein_inter_token_latency_seconds", "between a sequence's tokens",
                                     buckets=buckets, registry=self.registry)
        Gauge("ein_live_sequences", "sequences generating", registry=self.registry).set_function(
            lambda: self.scheduler.running)
        Gauge("ein_waiting_requests", "requests waiting for a sequence", registry=self.registry).set_function(
            lambda: self.scheduler.waiting)
        Gauge("ein_max_sequences", "sequences the scheduler generates at once", registry=self.registry).set(
            self.scheduler.max_sequences)
        Gauge("ein_cache_blocks_used", "key/value cache blocks the sequences generating hold",
              registry=self.registry).set_function(lambda: self.scheduler.cache_blocks_used)
        Gauge("ein_cache_blocks", "key/value cache blocks in the pool (0: not paged)", registry=self.registry).set(
            self.scheduler.cache_blocks)

    def close(self):
        self.scheduler.shutdown()
        self._waiters.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ requests
    def parse(self, body: Any, chat: bool) -> dict:
        """The generation a request asks for, checked."""
        if not isinstance(body, dict):
            raise ApiError(400, "the request body must be a JSON object")
        if body.get("model") not in (None, self.model_name):
            raise ApiError(404, f"the model '{body.get('model')}' does not exist; this server serves "
                                f"'{self.model_name}'", param="model", code="model_not_found")
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages or not all(
                    isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                    for m in messages):
                raise ApiError(400, "'messages' must be a non-empty list of {\"role\": str, \"content\": str}",
                               param="messages")
            try:
                text = self.tokenizer.apply_chat_template(messages)
            except TextError as error:
                raise ApiError(400, str(error), param="messages") from None
            ids = self.tokenizer.encode(text, special_tokens=False)
        else:
            prompt = body.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
                prompt = prompt[0]
            if isinstance(prompt, str):
                ids = self.tokenizer.encode(prompt)
            elif isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool)
                                                             for t in prompt):
                ids = list(prompt)
            else:
                raise ApiError(400, "'prompt' must be a string or a non-empty list of token ids", param="prompt")
        if not ids:
            raise ApiError(400, "the prompt has no tokens", param="prompt" if not chat else "messages")
        # A sequence holds its prompt and the tokens fed back: the last new
        # token is never fed, so prompt + max_tokens - 1 rows.
        room = self.scheduler.max_sequence_tokens + 1 - len(ids)
        if room < 1:
            raise ApiError(400, f"the prompt has {len(ids)} tokens; this model's context holds "
                                f"{self.scheduler.max_sequence_tokens}", param="messages" if chat else "prompt",
                           code="context_length_exceeded")
        limit_name = "max_completion_tokens" if chat and "max_completion_tokens" in body else "max_tokens"
        max_tokens = _number(body, limit_name, room if chat else min(16, room), 1, 1 << 62, integer=True)
        if max_tokens > room:
            raise ApiError(400, f"{limit_name} is {max_tokens}, but the prompt's {len(ids)} tokens leave room for "
                                f"{room} in this model's context of {self.scheduler.max_sequence_tokens}",
                           param=limit_name, code="context_length_exceeded")
        try:
            strings, stop_ids = stop_lists(body.get("stop"))
        except TextError as error:
            raise ApiError(400, str(error), param="stop") from None
        if self.tokenizer.eos_token_id is not None:
            stop_ids.append(self.tokenizer.eos_token_id)
        stream = body.get("stream", False)
        if not isinstance(stream, bool):
            raise ApiError(400, "'stream' must be true or false", param="stream")
        usage_in_stream = bool((body.get("stream_options") or {}).get("include_usage")) if stream else False
        return {
            "ids": ids, "max_tokens": max_tokens, "stop": strings, "stop_ids": stop_ids,
            "temperature": float(_number(body, "temperature", 1.0, 0, 2)),
            "top_p": float(_number(body, "top_p", 1.0, 1e-9, 1)),
            "seed": _number(body, "seed", 0, -(1 << 63), (1 << 64) - 1, integer=True) % (1 << 64),
            "n": _number(body, "n", 1, 1, 16, integer=True), "stream": stream, "usage_in_stream": usage_in_stream,
        }

    def submit(self, wanted: dict) -> List[Request]:
        """One scheduler request per choice; none when one is refused."""
        requests = []
        try:
            for choice in range(wanted["n"]):
                requests.append(self.scheduler.submit(
                    wanted["ids"], max_new_tokens=wanted["max_tokens"], temperature=wanted["temperature"],
                    top_p=wanted["top_p"], seed=(wanted["seed"] + choice) % (1 << 64), stop_tokens=wanted["stop_ids"]))
        except (Error, ValueError) as error:
            for request in requests:
                request.cancel()
            message = str(error)
            if "wait for a sequence already" in message:
                raise ApiError(429, f"the server is at capacity: {message}", kind="rate_limit_error",
                               code="rate_limit_exceeded") from None
            if isinstance(error, (InputError, ValueError)):
                raise ApiError(400, message, param="prompt") from None
            raise ApiError(500, message, kind="server_error") from None
        self.prompt_tokens.inc(len(wanted["ids"]) * wanted["n"])
        return requests

    async def tokens(self, request: Request) -> AsyncIterator[int]:
        """The request's tokens as they come, timed into the metrics."""
        loop = asyncio.get_running_loop()
        start = last = time.perf_counter()
        first = True
        while True:
            token = await loop.run_in_executor(self._waiters, request._native.next)
            if token is None:
                self.preemptions.inc(request.preemptions)
                return
            now = time.perf_counter()
            if first:
                self.first_token.observe(now - start)
                self.cached_tokens.inc(request.cached_tokens)
                first = False
            else:
                self.inter_token.observe(now - last)
            last = now
            self.generated_tokens.inc()
            yield token

    async def choice_pieces(self, request: Request, wanted: dict) -> AsyncIterator[tuple]:
        """(text piece, finish reason or None) of one choice, the last with its reason."""
        detokenizer = Detokenizer(self.tokenizer, wanted["stop"])
        count = 0
        async for token in self.tokens(request):
            count += 1
            piece = detokenizer.add(token)
            if detokenizer.stopped:
                request.cancel()
                yield piece, "stop", count
                return
            if piece:
                yield piece, None, count
        reason = request.finish_reason
        tail = detokenizer.finish()
        yield tail, "stop" if reason == "stop" else "length", count


# ---------------------------------------------------------------------- the app
def create_app(server: LlmServer):
    """The FastAPI app of `server` (closed when the app shuts down)."""
    from contextlib import asynccontextmanager

    from fastapi import FastAPI
    from fastapi import Request as HttpRequest
    from fastapi.responses import JSONResponse, PlainTextResponse
    from sse_starlette.sse import EventSourceResponse

    @asynccontextmanager
    async def lifespan(app):
        yield
        server.close()

    app = FastAPI(title="ein", lifespan=lifespan)

    def error_response(endpoint: str, error: ApiError):
        server.requests.labels(endpoint, str(error.status)).inc()
        return JSONResponse(error.body(), status_code=error.status)

    @app.exception_handler(Exception)
    async def unexpected(http_request, error):  # never a bare 500 page
        return error_response(http_request.url.path, ApiError(500, f"internal error: {error!r}",
                                                              kind="server_error"))

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": server.model_name, "object": "model", "created": server.created,
                                            "owned_by": "ein"}]}

    @app.get("/metrics")
    async def metrics():
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
        return PlainTextResponse(generate_latest(server.registry).decode(), media_type=CONTENT_TYPE_LATEST)

    async def generate(http_request: HttpRequest, chat: bool):
        endpoint = "/v1/chat/completions" if chat else "/v1/completions"
        raw = await http_request.body()
        try:
            try:
                body = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise ApiError(400, "the request body is not valid UTF-8") from None
            except json.JSONDecodeError as error:
                raise ApiError(400, f"the request body is not valid JSON: {error}") from None
            wanted = server.parse(body, chat)
            wanted["chat"] = chat
            requests = server.submit(wanted)
        except ApiError as error:
            return error_response(endpoint, error)
        server.requests.labels(endpoint, "200").inc()
        identifier = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        created = int(time.time())
        if wanted["stream"]:
            return EventSourceResponse(stream(http_request, requests, wanted, identifier, created),
                                       ping=15, sep="\n")
        return await complete(http_request, requests, wanted, identifier, created)

    def envelope(wanted, identifier, created, choices, usage=None):
        chat = wanted["chat"]
        body = {"id": identifier, "object": ("chat.completion" if chat else "text_completion")
                + (".chunk" if chat and wanted["stream"] else ""),
                "created": created, "model": server.model_name, "choices": choices}
        if usage is not None:
            body["usage"] = usage
        return body

    def usage_of(wanted, produced):
        prompt = len(wanted["ids"])
        return {"prompt_tokens": prompt, "completion_tokens": produced, "total_tokens": prompt + produced}

    async def complete(http_request, requests, wanted, identifier, created):
        async def one(index, request):
            text, reason, count = [], "length", 0
            async for piece, finish, count in server.choice_pieces(request, wanted):
                text.append(piece)
                reason = finish or reason
            return index, "".join(text), reason, count

        watch = asyncio.ensure_future(asyncio.gather(*(one(i, r) for i, r in enumerate(requests))))
        try:
            while not watch.done():  # a client gone cancels its sequences
                await asyncio.wait([watch], timeout=0.5)
                if not watch.done() and await http_request.is_disconnected():
                    for request in requests:
                        request.cancel()
            results = watch.result()
        finally:
            for request in requests:
                request.cancel()
        choices, produced = [], 0
        for index, text, reason, count in results:
            produced += count
            if wanted["chat"]:
                choices.append({"index": index, "message": {"role": "assistant", "content": text},
                                "finish_reason": reason, "logprobs": None})
            else:
                choices.append({"index": index, "text": text, "finish_reason": reason, "logprobs": None})
        return envelope(wanted, identifier, created, choices, usage_of(wanted, produced))

    async def stream(http_request, requests, wanted, identifier, created):
        chat = wanted["chat"]
        queue: asyncio.Queue = asyncio.Queue()

        async def pump(index, request):
            try:
                async for piece, finish, count in server.choice_pieces(request, wanted):
                    await queue.put((index, piece, finish, count))
            except Exception as error:  # noqa: BLE001  (sent to the client as the stream's end)
                await queue.put((index, None, error, 0))

        def chunk(index, piece, finish):
            if chat:
                delta = {"content": piece} if piece else {}
                return {"index": index, "delta": delta, "finish_reason": finish, "logprobs": None}
            return {"index": index, "text": piece, "finish_reason": finish, "logprobs": None}

        pumps = [asyncio.ensure_future(pump(i, r)) for i, r in enumerate(requests)]
        try:
            if chat:
                for index in range(len(requests)):
                    yield json.dumps(envelope(wanted, identifier, created,
                                              [{"index": index, "delta": {"role": "assistant", "content": ""},
                                                "finish_reason": None, "logprobs": None}]))
            open_choices, produced = len(requests), 0
            while open_choices:
                index, piece, finish, count = await queue.get()
                if isinstance(finish, Exception):
                    yield json.dumps(ApiError(500, f"generation failed: {finish}", kind="server_error").body())
                    open_choices -= 1
                    continue
                if finish is None and not piece:
                    continue
                yield json.dumps(envelope(wanted, identifier, created, [chunk(index, piece, finish)]))
                if finish is not None:
                    open_choices -= 1
                    produced += count
            if wanted["usage_in_stream"]:
                yield json.dumps(envelope(wanted, identifier, created, [], usage_of(wanted, produced)))
            yield "[DONE]"
        finally:  # the end, or the client gone (the generator is cancelled)
            for request in requests:
                request.cancel()
            for task in pumps:
                task.cancel()

    @app.post("/v1/completions")
    async def completions(http_request: HttpRequest):
        return await generate(http_request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(http_request: HttpRequest):
        return await generate(http_request, chat=True)

    return app


def load_model(path: str, weights: Optional[str], threads: Optional[int], precision: str = "fp32") -> Model:
    from ._compile import compile as compile_model
    from ._model import load
    if (pathlib.Path(path) / "config.json").is_file():  # a Hugging Face checkpoint folder
        from ._pretrained import from_pretrained
        return from_pretrained(path, precision=precision, weights=weights, threads=threads)
    if precision != "fp32":
        raise SystemExit("error: --precision applies to a checkpoint folder; compile a .ein with einc --precision")
    if path.endswith(".ein"):
        if not weights:
            raise SystemExit("error: a .ein model needs --weights (a .safetensors or .gguf file, or a checkpoint "
                             "folder)")
        return compile_model(path, weights=weights, threads=threads)
    return load(path, threads=threads)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ein.serve_llm", description=__doc__.split("\n")[0])
    parser.add_argument("model", help="a decoder's artifact (.einb), a .ein with --weights, or a Hugging Face "
                                      "checkpoint folder (config.json, safetensors weights, tokenizer.json)")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "int8", "int4"],
                        help="a checkpoint folder's precision (ein.from_pretrained)")
    parser.add_argument("--weights",
                        help="the weights of a .ein model (.safetensors, llama.cpp's .gguf, or a checkpoint folder)")
    parser.add_argument("--tokenizer",
                        help="tokenizer.json, or a folder with it (and tokenizer_config.json); a checkpoint folder's "
                             "own by default")
    parser.add_argument("--chat-template", help="a Jinja chat template file (else tokenizer_config.json's)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-sequences", type=int, default=16, help="sequences generating at once")
    parser.add_argument("--max-waiting", type=int, default=256, help="requests waiting at most; then 429")
    parser.add_argument("--step-tokens", type=int, default=0,
                        help="tokens a step runs at most, every generating sequence's next one and prompt chunks: "
                             "while a prompt is read, the others' next tokens wait for the whole step, so fewer "
                             "bound the inter-token latency, at some cost in throughput (default 0: 256, or the "
                             "model's most per run)")
    parser.add_argument("--threads", type=int, default=None, help="kernel threads (default: every CPU)")
    parser.add_argument("--cache-block-rows", type=int, default=16,
                        help="the paged key/value cache's rows a block (0: a whole cache per sequence)")
    parser.add_argument("--cache-blocks", type=int, default=0,
                        help="its blocks (default: enough for every sequence's whole cache; fewer bound its memory)")
    parser.add_argument("--model-name", help="the name clients give as 'model' (default: the file's stem)")
    parser.add_argument("--shutdown-timeout", type=float, default=30.0,
                        help="seconds the requests in flight may take to finish after SIGTERM")
    options = parser.parse_args(argv)
    import uvicorn
    template = pathlib.Path(options.chat_template).read_text() if options.chat_template else None
    is_folder = (pathlib.Path(options.model) / "config.json").is_file()
    if not options.tokenizer and not is_folder:
        raise SystemExit("error: --tokenizer is needed unless the model is a checkpoint folder with tokenizer.json")
    tokenizer = Tokenizer(options.tokenizer or options.model, chat_template=template)
    model = load_model(options.model, options.weights, options.threads, options.precision)
    default_name = pathlib.Path(options.model).resolve().name if is_folder else pathlib.Path(options.model).stem
    name = options.model_name or default_name
    server = LlmServer(model, tokenizer, model_name=name, max_sequences=options.max_sequences,
                       threads=options.threads, max_waiting=options.max_waiting,
                       cache_block_rows=options.cache_block_rows, cache_blocks=options.cache_blocks,
                       step_tokens=options.step_tokens)
    print(f"ein.serve_llm: '{name}' on http://{options.host}:{options.port}/v1 "
          f"({options.max_sequences} sequences at once)", flush=True)
    config = uvicorn.Config(create_app(server), host=options.host, port=options.port, log_level="warning",
                            timeout_graceful_shutdown=options.shutdown_timeout)
    _serve_until_signal(config)
    return 0


def _serve_until_signal(config) -> None:
    """Runs uvicorn's server until SIGTERM or SIGINT has shut it down
    gracefully, then returns (uvicorn would raise the signal again once
    stopped, which kills the process with it instead of status 0)."""
    import contextlib
    import signal

    import uvicorn

    class GracefulServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):
            previous = {number: signal.signal(number, self.handle_exit) for number in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for number, handler in previous.items():
                    signal.signal(number, handler)

    GracefulServer(config).run()


if __name__ == "__main__":
    raise SystemExit(main())
