#!/usr/bin/env python3
"""Prints the constants of tests/test_multihead_attention.cpp: torch.nn.MultiheadAttention's outputs
and attention weights (float64) for small cases whose parameters and inputs are closed-form values,
formula(shape, salt)[i] = 0.5 * sin(0.7 * i + salt) in row-major order, which the C++ test builds
the same way. Run from the repository root with the build's PyTorch:

    build/torch-venv/bin/python3 tests/reference/mha_reference.py

and paste its output between the BEGIN / END markers in the test file."""
import math

import torch

torch.set_default_dtype(torch.float64)
E, HEADS, L, S, N = 8, 2, 3, 4, 2


def formula(shape, salt):
    n = math.prod(shape)
    return torch.tensor([0.5 * math.sin(0.7 * i + salt) for i in range(n)]).reshape(shape)


def module(kdim=None, vdim=None, add_bias_kv=False, add_zero_attn=False, batch_first=False):
    mha = torch.nn.MultiheadAttention(E, HEADS, kdim=kdim, vdim=vdim, add_bias_kv=add_bias_kv,
                                      add_zero_attn=add_zero_attn, batch_first=batch_first)
    # The C++ test loads the same state_dict: parameter i (in name order) gets salt i + 1.
    state = {name: formula(t.shape, salt + 1.0) for salt, (name, t) in enumerate(sorted(mha.state_dict().items()))}
    mha.load_state_dict(state)
    return mha


def emit(name, t):
    values = [repr(x) if not math.isnan(x) else "kNaN" for x in t.detach().reshape(-1).tolist()]
    rows = [", ".join(values[i:i + 4]) for i in range(0, len(values), 4)]
    print(f"const std::vector<double> {name} = {{")
    print(",\n".join("    " + row for row in rows))
    print("};")


query, key, value = formula([L, N, E], 0.1), formula([S, N, E], 0.2), formula([S, N, E], 0.3)
padding = torch.tensor([[False, False, False, False], [False, True, False, True]])
float_mask = formula([L, S], 0.4)
float_mask[0, 3] = -math.inf
bool_mask = torch.tensor([[False, True, False, False], [False, False, True, False], [True, False, False, False]])

mha = module()
out, weights = mha(query, key, value)
emit("kCrossOutput", out)
emit("kCrossWeights", weights)
out, weights = mha(query, key, value, key_padding_mask=padding)
emit("kPaddingOutput", out)
emit("kPaddingWeights", weights)
out, weights = mha(query, key, value, attn_mask=float_mask)
emit("kFloatMaskOutput", out)
emit("kFloatMaskWeights", weights)
out, weights = mha(query, key, value, attn_mask=bool_mask, key_padding_mask=padding, average_attn_weights=False)
emit("kBothMasksOutput", out)
emit("kBothMasksHeadWeights", weights)
causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
out, _ = mha(query, query, query, attn_mask=causal, is_causal=True, need_weights=False)
emit("kSelfCausalOutput", out)
all_padded = torch.tensor([[False, False, False, False], [True, True, True, True]])
out, weights = mha(query, key, value, key_padding_mask=all_padded)
emit("kAllPaddedOutput", out)
out, _ = mha(query, key, value, key_padding_mask=all_padded, need_weights=False)
emit("kAllPaddedFusedOutput", out)

mha = module(kdim=5, vdim=6, add_bias_kv=True, batch_first=True)
out, weights = mha(formula([N, L, E], 0.5), formula([N, S, 5], 0.6), formula([N, S, 6], 0.7),
                   key_padding_mask=padding)
emit("kSeparateOutput", out)
emit("kSeparateWeights", weights)

# add_zero_attn: a zero key and value appended after the projections (and after bias_k / bias_v),
# the masks padded with a column that hides nothing.
mha = module(add_zero_attn=True)
out, weights = mha(query, key, value, attn_mask=float_mask)
emit("kZeroAttnOutput", out)
emit("kZeroAttnWeights", weights)
out, _ = mha(query, key, value, key_padding_mask=all_padded, need_weights=False)
emit("kZeroAttnAllPaddedOutput", out)
out, _ = mha(query, query, query, attn_mask=causal, is_causal=True, need_weights=False)
emit("kZeroAttnSelfCausalOutput", out)
out, _ = mha(query, query, query, attn_mask=causal, is_causal=True)
emit("kZeroAttnSelfCausalMaskedOutput", out)

mha = module(add_bias_kv=True, add_zero_attn=True)
out, weights = mha(query, key, value, attn_mask=bool_mask, key_padding_mask=padding, average_attn_weights=False)
emit("kBiasZeroAttnOutput", out)
emit("kBiasZeroAttnHeadWeights", weights)
