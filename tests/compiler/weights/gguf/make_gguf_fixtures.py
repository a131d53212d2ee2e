#!/usr/bin/env python3
"""Writes the GGUF files of tests/compiler/weights/gguf_test.cpp, tests/compiler/tools/einc-gguf.ein and
python/tests/test_compile.py with llama.cpp's own writer, the `gguf` package (deterministic: a rerun
writes the same bytes):

  types.gguf          a tensor of each type ein reads (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K) and,
                      beside each but the F32 one, NAME.expected: its values as gguf.quants.dequantize
                      gives them, in F32
  llama_tied.gguf     a one-layer Llama under llama.cpp's names with tied embeddings (no output.weight),
                      q (F16) and k (Q8_0) rows permuted as convert_hf_to_gguf.py does; its values follow
                      formulas the test computes again
  llama_hf_tiny.gguf  tests/conformance/cases/llama_hf_tiny/weights.safetensors (transformers' own
                      LlamaForCausalLM) as convert_hf_to_gguf.py writes it at F32: llama.cpp's names, q/k
                      rows permuted, the model's hyperparameters and a tokenizer in the metadata

Needs numpy, gguf and safetensors (the build and the tests never do), e.g. in .venv-bench:
  .venv-bench/bin/python tests/compiler/weights/gguf/make_gguf_fixtures.py
"""
import os

import gguf
import numpy as np
from safetensors.numpy import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(HERE))))
CONFORMANCE_LLAMA = os.path.join(ROOT, "tests", "conformance", "cases", "llama_hf_tiny")
Q = gguf.GGMLQuantizationType


def permute(rows, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute: each head's two rotary halves interleaved as pairs."""
    return rows.reshape(n_head, 2, rows.shape[0] // n_head // 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)


def add(writer, name, values, qtype=Q.F32):
    values = np.ascontiguousarray(values, dtype=np.float32)
    if qtype == Q.F32:
        writer.add_tensor(name, values)
    elif qtype == Q.F16:
        writer.add_tensor(name, values.astype(np.float16))
    else:
        writer.add_tensor(name, gguf.quants.quantize(values, qtype), raw_dtype=qtype)


def finish(writer):
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_types():
    rng = np.random.default_rng(38)
    writer = gguf.GGUFWriter(os.path.join(HERE, "types.gguf"), "llama")
    add(writer, "f32", np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 11.5)
    # Half floats with the edge cases: subnormal, signed zero, the largest, infinity, NaN.
    half = rng.standard_normal((3, 40)).astype(np.float32)
    half[0, :6] = [6e-8, -0.0, 65504.0, np.inf, -np.inf, np.nan]
    # Blocks of different scales and offsets, so that every sub-block scale and min differs.
    def blocks(shape, group):
        x = rng.standard_normal(shape).astype(np.float32).reshape(-1, group)
        x = x * rng.uniform(0.01, 4.0, (x.shape[0], 1)) + rng.uniform(-2.0, 2.0, (x.shape[0], 1))
        return x.reshape(shape).astype(np.float32)
    # gguf-py cannot quantize to the K types: their blocks are random bytes (every bit pattern of the
    # packed scales and quants) with a random positive f16 scale (and min) in each.
    def k_blocks(shape, qtype, scale_offsets):
        block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, (shape[0], shape[1] // block_size, type_size), dtype=np.uint8)
        for offset in scale_offsets:
            scale = rng.uniform(0.001, 0.1, raw.shape[:2]).astype(np.float16)
            raw[:, :, offset:offset + 2] = scale.view(np.uint8).reshape(*raw.shape[:2], 2)
        return raw.reshape(shape[0], -1)
    tensors = {
        "f16": (half.astype(np.float16), None),
        "bf16": (gguf.quants.quantize(rng.standard_normal((3, 40)).astype(np.float32) * 100, Q.BF16), Q.BF16),
        "q8_0": (gguf.quants.quantize(blocks((4, 64), 32), Q.Q8_0), Q.Q8_0),
        "q4_0": (gguf.quants.quantize(blocks((4, 64), 32), Q.Q4_0), Q.Q4_0),
        "q4_k": (k_blocks((3, 512), Q.Q4_K, [0, 2]), Q.Q4_K),    # d, dmin
        "q6_k": (k_blocks((3, 512), Q.Q6_K, [208]), Q.Q6_K),     # d
    }
    for name, (stored, qtype) in tensors.items():
        if qtype is None:
            writer.add_tensor(name, stored)
            expected = gguf.quants.dequantize(stored.view(np.uint8), Q.F16).reshape(stored.shape)
        else:
            writer.add_tensor(name, stored, raw_dtype=qtype)
            expected = gguf.quants.dequantize(stored, qtype)
        add(writer, name + ".expected", expected)
    finish(writer)


def write_tied_llama():
    """hidden 32, 2 query heads and 1 key/value head of 16, one layer, vocabulary 4."""
    writer = gguf.GGUFWriter(os.path.join(HERE, "llama_tied.gguf"), "llama")
    writer.add_block_count(1)
    writer.add_embedding_length(32)
    writer.add_head_count(2)
    writer.add_head_count_kv(1)
    square = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    add(writer, "token_embd.weight", np.arange(4 * 32).reshape(4, 32))
    add(writer, "output_norm.weight", np.arange(32) * 0.5)
    add(writer, "rope_freqs.weight", np.ones(8))
    add(writer, "blk.0.attn_norm.weight", np.arange(32) + 1000)
    add(writer, "blk.0.ffn_norm.weight", np.arange(32) + 2000)
    # q[r, c] = 32 r + c, exact in F16.
    add(writer, "blk.0.attn_q.weight", permute(square, 2), Q.F16)
    # k[r, c] = r - c with 127 in column 0: each Q8_0 block's scale is 1, so the quants are the values.
    rows, columns = np.meshgrid(np.arange(16), np.arange(32), indexing="ij")
    key = np.where(columns == 0, 127, rows - columns).astype(np.float32)
    add(writer, "blk.0.attn_k.weight", permute(key, 1), Q.Q8_0)
    add(writer, "blk.0.attn_v.weight", square[:16] + 3000)
    add(writer, "blk.0.attn_output.weight", square + 4000)
    add(writer, "blk.0.ffn_gate.weight", square + 5000)
    add(writer, "blk.0.ffn_up.weight", square + 6000)
    add(writer, "blk.0.ffn_down.weight", square + 7000)
    finish(writer)


def write_conformance_llama():
    """As convert_hf_to_gguf.py writes transformers' LlamaForCausalLM (llama_hf_tiny's configuration)."""
    state = load_file(os.path.join(CONFORMANCE_LLAMA, "weights.safetensors"))
    vocab, hidden = state["model.embed_tokens.weight"].shape
    layers, heads, kv_heads, head_dim, inter = 2, 4, 2, 16, 128
    writer = gguf.GGUFWriter(os.path.join(HERE, "llama_hf_tiny.gguf"), "llama")
    writer.add_name("llama_hf_tiny")
    writer.add_context_length(256)
    writer.add_embedding_length(hidden)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(inter)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_vocab_size(vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    # A byte-level SPM vocabulary's shape: arrays of strings, floats and integers in the metadata.
    tokens = [b"<unk>", b"<s>", b"</s>"] + [f"\u2581t{i}".encode() for i in range(vocab - 3)]
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * vocab)
    writer.add_token_types([2, 3, 3] + [1] * (vocab - 3))
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    add(writer, "token_embd.weight", state["model.embed_tokens.weight"])
    add(writer, "output_norm.weight", state["model.norm.weight"])
    add(writer, "output.weight", state["lm_head.weight"])
    for i in range(layers):
        hf = f"model.layers.{i}."
        add(writer, f"blk.{i}.attn_norm.weight", state[hf + "input_layernorm.weight"])
        add(writer, f"blk.{i}.ffn_norm.weight", state[hf + "post_attention_layernorm.weight"])
        add(writer, f"blk.{i}.attn_q.weight", permute(state[hf + "self_attn.q_proj.weight"], heads))
        add(writer, f"blk.{i}.attn_k.weight", permute(state[hf + "self_attn.k_proj.weight"], kv_heads))
        add(writer, f"blk.{i}.attn_v.weight", state[hf + "self_attn.v_proj.weight"])
        add(writer, f"blk.{i}.attn_output.weight", state[hf + "self_attn.o_proj.weight"])
        add(writer, f"blk.{i}.ffn_gate.weight", state[hf + "mlp.gate_proj.weight"])
        add(writer, f"blk.{i}.ffn_up.weight", state[hf + "mlp.up_proj.weight"])
        add(writer, f"blk.{i}.ffn_down.weight", state[hf + "mlp.down_proj.weight"])
    finish(writer)


if __name__ == "__main__":
    write_types()
    write_tied_llama()
    write_conformance_llama()
