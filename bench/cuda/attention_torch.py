#!/usr/bin/env python3
"""torch.nn.functional.scaled_dot_product_attention (flash backend) on the shapes
of attention_bench.cu: h=16, d=64 and 128, n=1k/4k/16k, batch*n = 16k tokens,
bf16 (or --dtype fp16), causal (is_causal=True, FLOPs halved) and not. Prints one
JSON line per shape, like attention_bench."""
import argparse
import json

import torch
import torch.nn.functional as F


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--causal", default="both", choices=["0", "1", "both"])
    parser.add_argument("--n", type=int, default=0, help="only this sequence length")
    args = parser.parse_args()
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    heads, tokens = 16, 16384
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backend = lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)
    except ImportError:  # older PyTorch
        backend = lambda: torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False, enable_mem_efficient=False)
    for causal in (False, True):
        if args.causal != "both" and causal != (args.causal == "1"):
            continue
        for d in (64, 128):
            for n in (1024, 4096, 16384):
                if args.n and n != args.n:
                    continue
                batch = max(1, tokens // n)
                q, k, v = (torch.randn(batch, heads, n, d, device="cuda", dtype=dtype) for _ in range(3))
                with torch.inference_mode(), backend():
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    torch.cuda.synchronize()
                    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    for _ in range(args.iterations):
                        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    stop.record()
                    torch.cuda.synchronize()
                ms = start.elapsed_time(stop) / args.iterations
                flops = 4.0 * batch * heads * n * n * d / (2 if causal else 1)
                print(json.dumps({"impl": f"torch_sdpa_flash_{args.dtype}", "n": n, "heads": heads, "head_dim": d,
                                  "batch": batch, "causal": causal, "ms": round(ms, 4),
                                  "tflops": round(flops / (ms * 1e-3) / 1e12, 2)}), flush=True)


if __name__ == "__main__":
    main()
