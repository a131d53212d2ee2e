#!/usr/bin/env python3
"""Writes the conformance cases cases/hf_* from Hugging Face checkpoint folders made by transformers itself.

Each case is a small model of one family of ein's model library (models/huggingface), built with
random weights from a config with uneven sizes (grouped-query ratios other than 1, head_dim not
hidden / heads, biases and tied heads where the family has them), saved with `save_pretrained`
into the case's `checkpoint/` folder exactly as transformers writes it (config.json and
model.safetensors, f32 or bf16). The tests compile it with `einc --hf checkpoint/` and compare
with what transformers computes on the same folder in float64: the prefill logits (or an
encoder's outputs), and for decoders the tokens of greedy `generate` (generation.json).

Needs torch, transformers, numpy and safetensors (the build and the tests never do):
  .venv-bench/bin/pip install torch transformers numpy safetensors
  .venv-bench/bin/python tests/conformance/make_checkpoint_cases.py [NAME ...]
"""
import json
import os
import shutil
import sys

import numpy as np
import torch
import transformers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES = os.path.join(ROOT, "tests", "conformance", "cases")
PROMPT_LENGTH = 9
NEW_TOKENS = 16


def randomize(model, seed):
    """Random weights large enough that every part matters: norms near 1, unit-variance activations."""
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for name, value in model.state_dict().items():
        noise = torch.randn(value.shape, generator=generator, dtype=torch.float64)
        if value.dim() == 1 and name.endswith("bias"):
            value = 0.2 * noise
        elif value.dim() == 1:
            value = 1 + 0.2 * noise
        elif "embed" in name or name.endswith("wte.weight") or name.endswith("wpe.weight"):
            value = noise
        else:
            value = noise / np.sqrt(value.shape[-1])
        state[name] = value.float()
    model.load_state_dict(state)
    return model


# name -> (transformers class name, config class name, config, saved dtype, what it exercises)
DECODERS = {
    "hf_llama3_tiny": (
        "LlamaForCausalLM", "LlamaConfig",
        dict(vocab_size=96, hidden_size=48, intermediate_size=80, num_hidden_layers=2, num_attention_heads=6,
             num_key_value_heads=2, head_dim=12, rms_norm_eps=1e-5, rope_theta=500000.0, attention_bias=True,
             tie_word_embeddings=False, max_position_embeddings=256,
             rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                           "original_max_position_embeddings": 16}),
        torch.float32,
        "LlamaForCausalLM with Llama 3's rope scaling, q/k/v/o biases, 6 query heads sharing 2 key/value heads "
        "of 12 (head_dim is not hidden / heads), an untied head"),
    "hf_mistral_tiny": (
        "MistralForCausalLM", "MistralConfig",
        dict(vocab_size=80, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=8,
             num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6, rope_theta=10000.0, sliding_window=6,
             tie_word_embeddings=True, max_position_embeddings=256),
        torch.bfloat16,
        "MistralForCausalLM with a sliding window of 6 (shorter than the prompt and the generation), 8 query heads "
        "sharing 2 key/value heads, tied embeddings, saved in bf16"),
    "hf_qwen2_tiny": (
        "Qwen2ForCausalLM", "Qwen2Config",
        dict(vocab_size=72, hidden_size=40, intermediate_size=72, num_hidden_layers=3, num_attention_heads=5,
             num_key_value_heads=1, rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
             use_sliding_window=True, sliding_window=5, max_window_layers=1, max_position_embeddings=256),
        torch.float32,
        "Qwen2ForCausalLM: q/k/v biases (none on the output projection), 5 query heads sharing one key/value head, "
        "tied embeddings, a sliding window of 5 from layer 1 on (max_window_layers)"),
    "hf_gemma_tiny": (
        "GemmaForCausalLM", "GemmaConfig",
        dict(vocab_size=88, hidden_size=48, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=1, head_dim=20, rms_norm_eps=1e-6, hidden_act="gelu_pytorch_tanh",
             max_position_embeddings=256),
        torch.float32,
        "GemmaForCausalLM: embeddings scaled by sqrt(hidden), RMSNorm by 1 + weight, a GeGLU MLP (tanh GELU), "
        "multi-query attention with head_dim 20 (not hidden / heads), tied embeddings"),
    "hf_phi3_tiny": (
        "Phi3ForCausalLM", "Phi3Config",
        dict(vocab_size=90, hidden_size=64, intermediate_size=80, num_hidden_layers=2, num_attention_heads=8,
             num_key_value_heads=4, rms_norm_eps=1e-5, partial_rotary_factor=0.75, sliding_window=7,
             max_position_embeddings=256, original_max_position_embeddings=256, pad_token_id=0,
             bos_token_id=1, eos_token_id=2),
        torch.bfloat16,
        "Phi3ForCausalLM: fused qkv_proj and gate_up_proj, a partial rotary factor of 0.75 (as Phi-4-mini), "
        "a sliding window of 7, 8 query heads sharing 4 key/value heads, saved in bf16"),
    "hf_gpt2_tiny": (
        "GPT2LMHeadModel", "GPT2Config",
        dict(vocab_size=84, n_embd=48, n_head=4, n_layer=2, n_positions=64, n_inner=72,
             activation_function="gelu_new", scale_attn_by_inverse_layer_idx=True, layer_norm_epsilon=1e-5),
        torch.float32,
        "GPT2LMHeadModel: learned positions, Conv1D layers ([in, out] weights), fused c_attn, tanh GELU, "
        "scores scaled by the inverse layer index too, the head tied to wte, n_inner not 4 x n_embd"),
}


def save_checkpoint(name, model, saved_dtype):
    """The case's folder, emptied, with checkpoint/ as save_pretrained writes it."""
    case = os.path.join(CASES, name)
    shutil.rmtree(case, ignore_errors=True)
    os.makedirs(os.path.join(case, "expected"))
    model.to(saved_dtype).save_pretrained(os.path.join(case, "checkpoint"))
    return case


def write_case(case, reproduces, saved_dtype, inputs, outputs, generation=None, tolerance=None):
    for input_name, value in inputs.items():
        np.save(os.path.join(case, input_name + ".npy"), value)
    for output_name, value in outputs.items():
        np.save(os.path.join(case, "expected", output_name + ".npy"), value)
    spec = {
        "name": os.path.basename(case),
        "reproduces": "transformers " + reproduces,
        "checkpoint": "checkpoint/ (save_pretrained, " + str(saved_dtype).replace("torch.", "") +
                      "), compiled with einc --hf",
        "inputs": {k: {"dtype": str(v.dtype), "shape": list(v.shape)} for k, v in inputs.items()},
        "outputs": {k: list(v.shape) for k, v in outputs.items()},
        "tolerance": dict({"atol": 1e-4, "rtol": 1e-3,
                           "rule": "|got - expected| <= atol + rtol * |expected| for every element"},
                          **(tolerance or {})),
        "expected_computed_in": "float64 (transformers " + transformers.__version__ + ") on the checkpoint as "
                                "from_pretrained loads it, stored as float32",
    }
    with open(os.path.join(case, "case.json"), "w") as out:
        json.dump(spec, out, indent=2)
        out.write("\n")
    if generation is not None:
        with open(os.path.join(case, "generation.json"), "w") as out:
            json.dump(generation, out, indent=2)
            out.write("\n")


def decoder_case(name, spec):
    class_name, config_name, config, saved_dtype, reproduces = spec
    torch.manual_seed(0)
    config = getattr(transformers, config_name)(**config)
    case = save_checkpoint(name, randomize(getattr(transformers, class_name)(config).eval(), seed=0), saved_dtype)
    # The oracle is transformers on the folder as saved: float64 logits, float32 generation.
    model = getattr(transformers, class_name).from_pretrained(os.path.join(case, "checkpoint"),
                                                              dtype=torch.float32).eval()
    prompt = torch.randint(0, config.vocab_size, (1, PROMPT_LENGTH), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        # Every prompt token attends (generate would mask those equal to the pad token otherwise).
        tokens = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=NEW_TOKENS,
                                do_sample=False, num_beams=1, pad_token_id=0, eos_token_id=None)[0, PROMPT_LENGTH:]
        logits = model.double()(prompt).logits.float()
    write_case(case, reproduces, saved_dtype, {"input_ids": prompt.numpy()}, {"logits": logits.numpy()},
               generation={"prompt": prompt[0].tolist(), "greedy": tokens.tolist(),
                           "computed_by": "transformers " + transformers.__version__ +
                                          " generate(do_sample=False), float32"},
               # bf16 rounds the weights, int8 each activation row to 8 bits: within 1.5% and 8% of the
               # largest logit (Gemma's, whose scaled embeddings and tied head make the largest, 7.4%).
               tolerance={"bf16_atol": round(0.015 * float(logits.abs().max()), 3),
                          "int8_atol": round(0.08 * float(logits.abs().max()), 3)})


def main(names):
    for name, spec in DECODERS.items():
        if not names or name in names:
            decoder_case(name, spec)
            print("wrote", os.path.join(CASES, name))


if __name__ == "__main__":
    main(sys.argv[1:])
