// The kern dialect's passes: kernel fusion and the memory plan.
#ifndef EIN_TRANSFORMS_KERN_PASSES_TD
#define EIN_TRANSFORMS_KERN_PASSES_TD

include "mlir/Pass/PassBase.td"

def FuseElementwise : Pass<"kern-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Merge chains of element-wise kernels into one";
  let description = [{
    An element-wise kernel whose only user is another element-wise kernel of
    the same shape, reading it element for element, is inlined into that
    user's body: the intermediate is never stored, and integer intermediates
    (`(1 - keep) * -1e4`) need no integer kernel. A producer read through a
    broadcast, or used elsewhere, stays.
  }];
}

def FuseGemmEpilogue : Pass<"kern-fuse-gemm-epilogue", "mlir::func::FuncOp"> {
  let summary = "Fuse bias, activation and residual adds into the producing GEMM";
  let description = [{
    An element-wise kernel that computes `activation(c * g + bias) + residual`
    (each part optional; c constant; relu, gelu, gelu_tanh or silu) from the only use of
    a GEMM's result `g`, read element for element, becomes that GEMM's
    epilogue: the bias and residual are read through views over the GEMM's
    [batch.., m, n] space, so the product is stored once. Run after
    kern-fuse-elementwise so chains are whole.
  }];
}

def StoreKernWeights : Pass<"kern-store-weights", "mlir::func::FuncOp"> {
  let summary = "Compute every weight the artifact stores, in the type it stores it";
  let description = [{
    Two steps, one weight at a time, so that the compiler holds at most one
    f32 weight it computed:
    - Folding: an f32 element-wise, copy or concat kernel of a static shape
      whose inputs are all bound parameters or constants read through static
      views, that is no model output and no larger than its inputs (a scaled,
      transposed or concatenated weight), becomes an `ein.constant` of its
      result, computed in f32 as the runtime's kernels would. The constant
      names the parameters it holds (`kern.folded_from`); a parameter only
      folds read keeps its declaration without values, a constant only they
      read goes.
    - Storing, at `precision=bf16` (either target) or on the CPU at `int8`
      or `int4`: a parameter or folded weight that only ever is gemms'
      operand b becomes a constant of bf16 (rounded to nearest even), or of i8 with an f32 scale per column that
      the gemms read as `b_scale` (symmetric: scale = max_k |w| / 127, q =
      round_half_even(w / scale); only a [k, n] matrix, either orientation,
      shared by the batch and read through one view). A stored parameter
      keeps its declaration without values and is named by its constant
      (`kern.stored_from`). At `precision=int4` the same weights become
      i4 with an f16 scale per group of 32 along k and column, as
      llama.cpp's q4_0 (d = the group's value of largest magnitude / -8,
      q = min(15, trunc(w / d + 8.5)) - 8). At `int8` with `group-size=32`
      they become i8 with an f16 scale per group of 32 along k and column,
      as llama.cpp's q8_0 (d = the group's largest magnitude / 127, q =
      round_half_away(w / d)), so q8_0 weights are held exactly.
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"fp32\"",
           "the artifact's precision: fp32, bf16, fp16, int8 or int4">,
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"", "the artifact's target: cpu or cuda">,
    Option<"groupSize", "group-size", "int64_t", /*default=*/"0",
           "int8 weights' scales: 0, one per output column; 32, one per group of 32 along k and column">,
  ];
}

def StoreKernState : Pass<"kern-store-state", "mlir::func::FuncOp"> {
  let summary = "Keep a key/value cache as bf16 on the CPU at bf16, int8 and int4";
  let description = [{
    At `precision=bf16`, `int8` or `int4` with `target=cpu`, an f32 session state
    (`ein.state`) that only appends write and only attention reads, as its
    keys or values, becomes bf16, and so do the appends' results (the same
    tensor): each append rounds its rows to nearest even, and attention reads
    half the bytes per step. Any other use (a state returned, or read by
    another kernel) keeps it f32, as fp32 and CUDA artifacts keep every state.
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"fp32\"",
           "the artifact's precision: fp32, bf16, fp16, int8 or int4">,
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"", "the artifact's target: cpu or cuda">,
  ];
}

def PlanSequences : Pass<"kern-plan-sequences", "mlir::func::FuncOp"> {
  let summary = "Decide which kernels of a decoder run over many sequences' tokens at once";
  let description = [{
    A decoder written for one sequence (session state, a position dim, each
    run appending `t` rows: `ein.position_advance`) serves many sequences in
    one run when their tokens are laid end to end as one `t`. A kernel runs
    once over all of them when it reads and writes each token's row alone:
    every tensor it touches is either per token (`[1, .., 1, t, inner..]`,
    walked a row apart along one axis of size `t` and within the row
    otherwise) or the same for every sequence (no size depends on `t` or the
    position, read alike for every token), nothing it reduces over is the
    tokens, and nothing depends on the position: projections, norms,
    element-wise kernels, the MLP, the head. Every other kernel is marked
    `kern.per_sequence` (appends, attention, position-dependent tables,
    heads-before-tokens layouts): it runs once per sequence over its own
    rows, position and state. What a sequence computes for itself and is not
    per token (a rotated `[1, h, t, d]`, scores) is its own: it may only be
    read by per-sequence kernels in the same stretch of them, so such
    kernels are moved down to their first reader, past the kernels over all
    tokens that do not need them. A per-sequence attention that computes
    each token's rows from that token's rows and what a first run kept
    alone (a cross-attention over an encoder's kept keys and values: not
    causal, q and out per token, the keys, values and mask kept and read
    alike by every query, nothing of it depending on the tokens or the
    position) is also marked `kern.rows_over_kept`: sequences that share
    what their first run kept (beams of one search) may run it once for them
    all over their tokens, reading the kept keys and values once. The
    function gets `kern.sequence_tokens` (the tokens' dim) when the plan
    holds, else `kern.one_sequence` saying where and why it does not (with
    `require`, that is an error at the kernel). Functions without a position
    are left alone.
  }];
  let options = [
    Option<"require", "require", "bool", /*default=*/"false",
           "fail at the kernel that keeps the model from serving many sequences at once">,
  ];
}

def PlanFirstRun : Pass<"kern-plan-first-run", "mlir::func::FuncOp"> {
  let summary = "Mark the kernels that run only at a sequence's first run";
  let description = [{
    A state written with `keep()` (a `kern.append` with `first_run`, such as
    an encoder-decoder's cross-attention keys and values) is written at a
    sequence's first run, position 0, and only read after. That append, and
    every kernel whose results only such kernels read (the encoder, the
    cross-attention projections), get `kern.first_run`: the runtime skips
    them at later runs. An input only they read gets `kern.first_run` as an
    argument attribute: it is needed at the first run only.
  }];
}

def PlanMemory : Pass<"kern-plan-memory", "mlir::func::FuncOp"> {
  let summary = "Assign every intermediate buffer an offset in one arena";
  let description = [{
    Buffers whose lifetimes do not overlap share memory. Greedy by size: the
    largest buffers are placed first, each at the lowest offset that clashes
    with no placed buffer alive at the same time. Results returned by the
    function live in the caller's output buffers, not in the arena.
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", "64", "byte alignment of every buffer">
  ];
}

#endif // EIN_TRANSFORMS_KERN_PASSES_TD
