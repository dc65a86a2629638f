#!/usr/bin/env python3
"""Generate the golden dequantization files of package quant.

Run by hand (never from CI): pip install gguf numpy; python3 gen_golden.py
It writes, per type, <name>.bin (raw blocks) and <name>.f32 (the expected
little-endian float32 values computed by the gguf package's independent
reference dequantizer, gguf.quants.dequantize). model_*.bin are the first
blocks of real tensors of the default model, when it is present.
"""
import os
import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

here = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(20250611)

# (type, block bytes, offsets of f16 scale fields)
types = {
    "q4_0": (T.Q4_0, 18, [0]),
    "q4_1": (T.Q4_1, 20, [0, 2]),
    "q5_0": (T.Q5_0, 22, [0]),
    "q5_1": (T.Q5_1, 24, [0, 2]),
    "q8_0": (T.Q8_0, 34, [0]),
    "q4_k": (T.Q4_K, 144, [0, 2]),
    "q5_k": (T.Q5_K, 176, [0, 2]),
    "q6_k": (T.Q6_K, 210, [208]),
}


def write(name, raw, qt):
    vals = dequantize(np.frombuffer(raw, dtype=np.uint8), qt).astype("<f4").ravel()
    with open(os.path.join(here, name + ".bin"), "wb") as f:
        f.write(raw)
    with open(os.path.join(here, name + ".f32"), "wb") as f:
        f.write(vals.tobytes())
    print(name, len(raw), "bytes", vals.size, "values")


for name, (qt, bb, fields) in types.items():
    nb = 12
    blocks = rng.integers(0, 256, size=(nb, bb), dtype=np.uint8)
    for i in range(nb):
        for off in fields:
            if i == 0:
                v = 0.0  # d = 0 (and m = 0)
            elif i == 1:
                v = 30000.0 if off == fields[0] else -30000.0  # large scales
            else:
                v = float(rng.normal(0, 0.05))
            blocks[i, off:off + 2] = np.frombuffer(np.float16(v).tobytes(), dtype=np.uint8)
    if name in ("q4_0", "q4_1"):  # all-0 and all-15 nibbles
        qs = fields[-1] + 2
        blocks[2, qs:qs + 16] = 0x00
        blocks[3, qs:qs + 16] = 0xFF
    write(name, blocks.tobytes(), qt)

# f16 / bf16: random bit patterns without NaNs (Inf, subnormals and zeros kept).
def no_nan(bits, expmask, manmask):
    return bits[~(((bits & expmask) == expmask) & ((bits & manmask) != 0))]

h = rng.integers(0, 1 << 16, size=4096, dtype=np.uint16)
h = np.concatenate([np.array([0, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0xFC00, 0x3C00], dtype=np.uint16),
                    no_nan(h, 0x7C00, 0x03FF)])
write("f16", h.astype("<u2").tobytes(), T.F16)
b = no_nan(rng.integers(0, 1 << 16, size=4096, dtype=np.uint16), 0x7F80, 0x007F)
write("bf16", b.astype("<u2").tobytes(), T.BF16)

model = os.path.join(here, "..", "..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
if os.path.exists(model):
    r = gguf.GGUFReader(model)
    want = {"blk.0.attn_q.weight": "model_q4_1", "token_embd.weight": "model_q8_0"}
    for t in r.tensors:
        if t.name in want:
            bb = {T.Q4_1: 20, T.Q8_0: 34}[t.tensor_type]
            raw = np.asarray(t.data).view(np.uint8).ravel()[: 64 * bb].tobytes()
            write(want[t.name], raw, t.tensor_type)

# The low-bit types (Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4), from a generator
# of their own so that the files above do not change.
rng2 = np.random.default_rng(20260510)
lowbit = {
    "q2_k": (T.Q2_K, 84, [80, 82]),
    "q3_k": (T.Q3_K, 110, [108]),
    "iq4_nl": (T.IQ4_NL, 18, [0]),
    "iq4_xs": (T.IQ4_XS, 136, [0]),
}
for name, (qt, bb, fields) in lowbit.items():
    nb = 12
    blocks = rng2.integers(0, 256, size=(nb, bb), dtype=np.uint8)
    for i in range(nb):
        for off in fields:
            if i == 0:
                v = 0.0
            elif i == 1:
                v = 30000.0 if off == fields[0] else -30000.0
            else:
                v = float(rng2.normal(0, 0.05))
            blocks[i, off:off + 2] = np.frombuffer(np.float16(v).tobytes(), dtype=np.uint8)
    write(name, blocks.tobytes(), qt)

# MXFP4: the exponent byte takes its extremes (0, 1: subnormal scales;
# 252, the largest whose values all stay finite) and values around 127;
# 255 (NaN) is refused by the reader and not here.
blocks = rng2.integers(0, 256, size=(16, 17), dtype=np.uint8)
blocks[:, 0] = rng2.integers(110, 140, size=16)
blocks[0, 0], blocks[1, 0], blocks[2, 0], blocks[3, 0] = 0, 1, 252, 127
write("mxfp4", blocks.tobytes(), T.MXFP4)

# The grid i-quants, from a generator of their own (every other byte
# random: any pattern of grid indices, signs and scales is a valid block).
rng3 = np.random.default_rng(20261129)
iquants = {
    "iq3_s": (T.IQ3_S, 110),
    "iq3_xxs": (T.IQ3_XXS, 98),
    "iq2_xxs": (T.IQ2_XXS, 66),
    "iq2_xs": (T.IQ2_XS, 74),
    "iq2_s": (T.IQ2_S, 82),
}
for name, (qt, bb) in iquants.items():
    nb = 12
    blocks = rng3.integers(0, 256, size=(nb, bb), dtype=np.uint8)
    for i in range(nb):
        v = 0.0 if i == 0 else 30000.0 if i == 1 else float(rng3.normal(0, 0.05))
        blocks[i, 0:2] = np.frombuffer(np.float16(v).tobytes(), dtype=np.uint8)
    write(name, blocks.tobytes(), qt)
