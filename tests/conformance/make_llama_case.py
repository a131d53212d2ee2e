#!/usr/bin/env python3
"""Writes the conformance case cases/llama_hf_tiny from Hugging Face's own LlamaForCausalLM.

A small Llama (vocab 128, hidden 64, 2 layers, 4 query heads sharing 2 key/value
heads of 16, SwiGLU 128, RMSNorm eps 1e-6, rope theta 10000) with random weights
under transformers' state_dict names. Expected: the prefill logits of a prompt,
computed in float64 on the float32-rounded weights, and the tokens transformers'
greedy `generate` produces after it (generation.json), which the generation test
compares token for token. The model is examples/models/llama_decoder.ein.

Needs torch, transformers, numpy and safetensors (the build and the tests never do):
  python3 -m venv .venv-bench && .venv-bench/bin/pip install torch transformers numpy safetensors
  .venv-bench/bin/python tests/conformance/make_llama_case.py
"""
import json
import os
import shutil

import numpy as np
import torch
import transformers
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "models", "llama_decoder.ein")
CASE = os.path.join(ROOT, "tests", "conformance", "cases", "llama_hf_tiny")
CONFIG = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, max_position_embeddings=256, rms_norm_eps=1e-6,
              rope_theta=10000.0, tie_word_embeddings=False, attention_bias=False, mlp_bias=False)
PROMPT_LENGTH = 12
NEW_TOKENS = 20


def model(seed=0):
    """LlamaForCausalLM with random float32 weights large enough that every part matters."""
    torch.manual_seed(seed)
    llama = LlamaForCausalLM(LlamaConfig(**CONFIG)).eval()
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name, value in llama.state_dict().items():
        noise = torch.randn(value.shape, generator=generator, dtype=torch.float64)
        if value.dim() == 1:
            value = 1 + 0.2 * noise  # RMSNorm weights
        elif name.endswith("embed_tokens.weight"):
            value = noise
        else:
            value = noise / np.sqrt(value.shape[1])  # unit-variance activations
        state[name] = value.float()
    llama.load_state_dict(state)
    return llama, state


def main():
    llama, state = model()
    prompt = torch.randint(0, CONFIG["vocab_size"], (1, PROMPT_LENGTH), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = llama.double()(prompt).logits.float()
        tokens = llama.generate(prompt, max_new_tokens=NEW_TOKENS, do_sample=False, num_beams=1,
                                pad_token_id=0, eos_token_id=None)[0, PROMPT_LENGTH:]
    os.makedirs(os.path.join(CASE, "expected"), exist_ok=True)
    save_file({k: v.contiguous() for k, v in state.items()}, os.path.join(CASE, "weights.safetensors"),
              metadata={"format": "pt"})
    np.save(os.path.join(CASE, "ids.npy"), prompt.numpy())
    np.save(os.path.join(CASE, "expected", "logits.npy"), logits.numpy())
    shutil.copyfile(EXAMPLE, os.path.join(CASE, "model.ein"))
    spec = {
        "name": "llama_hf_tiny",
        "reproduces": "transformers LlamaForCausalLM (vocab 128, hidden 64, 2 layers, 4 query and 2 key/value heads "
                      "of 16, SwiGLU 128): RMSNorm, rotary embeddings, grouped-query causal attention over a key/value "
                      "cache in the session, Hugging Face's state_dict names",
        "inputs": {"ids": {"dtype": "int64", "shape": list(prompt.shape)}},
        "outputs": {"logits": list(logits.shape)},
        "tolerance": {"atol": 1e-4, "rtol": 1e-3,
                      "rule": "|got - expected| <= atol + rtol * |expected| for every element",
                      # int8 rounds each activation row to 8 bits: up to ~2.5% of the largest logit (3.8).
                      "int8_atol": 0.1},
        "expected_computed_in": "float64 (transformers " + transformers.__version__ + "), stored as float32",
    }
    with open(os.path.join(CASE, "case.json"), "w") as out:
        json.dump(spec, out, indent=2)
        out.write("\n")
    with open(os.path.join(CASE, "generation.json"), "w") as out:
        json.dump({"prompt": prompt[0].tolist(), "greedy": tokens.tolist(),
                   "computed_by": "transformers " + transformers.__version__ + " generate(do_sample=False), float32"},
                  out, indent=2)
        out.write("\n")


if __name__ == "__main__":
    main()
