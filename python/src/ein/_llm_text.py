"""Text around a model's ids (ein.serve_llm, Model.generate and Model.encode
of ein.from_pretrained's models): a Hugging Face tokenizer (tokenizer.json,
with tokenizer_config.json's special tokens and chat template when a folder
is given), batches of texts padded for encoders, chat templates rendered as
transformers renders them, and a detokenizer that streams text without a
broken UTF-8 character or the start of a stop string."""
from __future__ import annotations

import json
import os
import pathlib
from typing import List, Optional, Sequence, Tuple


class TextError(ValueError):
    """A request's text or messages cannot be made into ids."""


class Tokenizer:
    """tokenizer.json (HF `tokenizers`), its special tokens and chat template."""

    def __init__(self, path: os.PathLike, chat_template: Optional[str] = None):
        from tokenizers import Tokenizer as HfTokenizer
        path = pathlib.Path(path)
        folder = path if path.is_dir() else path.parent
        file = path / "tokenizer.json" if path.is_dir() else path
        if not file.is_file():
            raise FileNotFoundError(f"no tokenizer.json at {path}")
        self._tokenizer = HfTokenizer.from_file(str(file))
        config = {}
        if (folder / "tokenizer_config.json").is_file():
            config = json.loads((folder / "tokenizer_config.json").read_text())
        self.bos_token = _token_text(config.get("bos_token"))
        self.eos_token = _token_text(config.get("eos_token"))
        self.chat_template = chat_template or config.get("chat_template")
        if isinstance(self.chat_template, list):  # [{"name": "default", "template": ...}, ...]
            named = {t.get("name"): t.get("template") for t in self.chat_template}
            self.chat_template = named.get("default") or next(iter(named.values()), None)
        self.eos_token_id = self._tokenizer.token_to_id(self.eos_token) if self.eos_token else None

    @property
    def vocab_size(self) -> int:
        return self._tokenizer.get_vocab_size()

    def encode(self, text: str, special_tokens: bool = True) -> List[int]:
        return self._tokenizer.encode(text, add_special_tokens=special_tokens).ids

    def encode_batch(self, texts: Sequence[str], max_length: int):
        """(input_ids, attention_mask, token_type_ids), int64 [len(texts), t]:
        the texts' tokens, truncated to ``max_length``, padded with the
        tokenizer's padding token (else 0) to the longest."""
        import numpy as np
        encodings = self._tokenizer.encode_batch(list(texts))
        # The tokens, not the padding tokenizer.json may add (to a fixed length).
        length = max(1, min(max_length, max(sum(e.attention_mask) for e in encodings)))
        padding = self._tokenizer.padding or {}
        pad_id = padding.get("pad_id", 0)
        ids = np.full((len(texts), length), pad_id, dtype=np.int64)
        mask = np.zeros((len(texts), length), dtype=np.int64)
        types = np.zeros((len(texts), length), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            kept = [i for i, m in zip(encoding.ids, encoding.attention_mask) if m][:length]
            ids[row, :len(kept)] = kept
            mask[row, :len(kept)] = 1
            types[row, :len(kept)] = encoding.type_ids[:len(kept)]
        return ids, mask, types

    def decode(self, ids: Sequence[int]) -> str:
        return self._tokenizer.decode(list(ids), skip_special_tokens=True)

    def apply_chat_template(self, messages: list) -> str:
        """The prompt text for `messages` ([{"role", "content"}]) with the
        generation prompt added, as transformers' apply_chat_template."""
        if not self.chat_template:
            raise TextError("the server has no chat template (give --chat-template, or a tokenizer folder whose "
                            "tokenizer_config.json has one)")
        import jinja2
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message):
            raise TextError(f"the chat template refused the messages: {message}")

        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        environment.globals["raise_exception"] = raise_exception
        try:
            template = environment.from_string(self.chat_template)
            return template.render(messages=messages, add_generation_prompt=True, bos_token=self.bos_token or "",
                                   eos_token=self.eos_token or "")
        except jinja2.TemplateError as error:
            raise TextError(f"the chat template failed: {error}") from None


def _token_text(token) -> Optional[str]:
    if isinstance(token, dict):  # {"content": "</s>", ...}
        return token.get("content")
    return token


class Detokenizer:
    """The text of a stream of ids, given out as it becomes final: a piece
    that ends inside a UTF-8 character (decoded as U+FFFD) waits for the
    next id, and so does text that might begin a stop string. A stop string
    ends the text before it."""

    def __init__(self, tokenizer: Tokenizer, stop: Sequence[str] = ()):
        self._tokenizer = tokenizer
        self._ids: List[int] = []
        self._stop = [s for s in stop if s]
        self._given = 0  # characters of the text given out
        self.text = ""
        self.stopped = False

    def add(self, token: int) -> str:
        """Takes the next id; returns the new text that is final."""
        if self.stopped:
            return ""
        self._ids.append(token)
        self.text = self._tokenizer.decode(self._ids)
        for stop in self._stop:
            at = self.text.find(stop, max(0, self._given - len(stop)))
            if at >= 0:
                self.stopped = True
                self.text = self.text[:at]
                return self._take(len(self.text))
        end = len(self.text)
        if self.text.endswith("\ufffd"):  # an unfinished character
            end = len(self.text.rstrip("\ufffd"))
        for stop in self._stop:  # hold back what could begin a stop string
            for length in range(min(len(stop) - 1, end - self._given), 0, -1):
                if self.text[end - length:end] == stop[:length]:
                    end -= length
                    break
        return self._take(end)

    def finish(self) -> str:
        """The text held back, once no id follows."""
        return "" if self.stopped else self._take(len(self.text))

    def _take(self, end: int) -> str:
        if end <= self._given:
            return ""
        piece, self._given = self.text[self._given:end], end
        return piece


def stop_lists(stop) -> Tuple[List[str], List[int]]:
    """OpenAI's `stop`: a string, or a list of strings (and, here, token ids)."""
    if stop is None:
        return [], []
    if isinstance(stop, str):
        return [stop], []
    if not isinstance(stop, list) or len(stop) > 16:
        raise TextError("stop must be a string or a list of at most 16 strings or token ids")
    strings = [s for s in stop if isinstance(s, str)]
    ids = [s for s in stop if isinstance(s, int) and not isinstance(s, bool)]
    if len(strings) + len(ids) != len(stop):
        raise TextError("stop must be a string or a list of at most 16 strings or token ids")
    return strings, ids
