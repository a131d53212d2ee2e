#!/usr/bin/env python3
"""Trains the example's tokenizer: a byte-level BPE of 512 ids (the `tokenizers`
package) on the repository's own documentation, written as tokenizer.json with a
tokenizer_config.json that names its special tokens and a ChatML chat template,
as a Hugging Face checkpoint folder has them. The files are committed; this
remakes them:  python examples/llm-server/make_tokenizer.py
"""
import json
import pathlib

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def main():
    texts = [p.read_text() for p in sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.save(str(HERE / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": None, "eos_token": "<|im_end|>",
              "model_max_length": 256, "chat_template": CHAT_TEMPLATE}
    (HERE / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    print(f"wrote {HERE / 'tokenizer.json'} ({tokenizer.get_vocab_size()} ids)")


if __name__ == "__main__":
    main()
