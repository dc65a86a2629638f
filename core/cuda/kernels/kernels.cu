// lmstream's device kernels: the Llama-family forward pass of core/model on
// an NVIDIA GPU. Compiled at run time by NVRTC to a cubin for the device's
// exact architecture, so this file includes no CUDA header (the NVRTC wheels
// on PyPI ship none): half conversions and dp4a are inline PTX.
//
// Conventions, mirrored by core/cuda/kernels/args.go:
//   - Every kernel takes one struct by value. Pointers come first (8 bytes
//     each), then 4-byte fields; Go packs the same layout.
//   - Per-pass sizes live in device memory (Pass), never in the arguments,
//     so a captured graph replays any batch up to its bucket: blocks past
//     the live token count return at once.
//   - Weights are repacked at upload: a block's scales in one array and its
//     quants in another, so quant loads are aligned 4-byte words (layouts
//     at the mat-vec; core/cuda/weights.go writes them).
//   - Activations feeding a quantized matmul are quantized once per pass to
//     int8 blocks of 32 with a half2 (d, d·Σq) per block — the CPU's Q8_1
//     (and, ignoring the sum, its Q8_0), rounded the same way, so the
//     integer dot products of Q4_1, Q5_0 and Q8_0 weights equal the CPU's
//     exactly. The K-quants use the same blocks (their 32- and 16-element
//     sub-blocks each lie in one), where the CPU quantizes to 256-element
//     Q8_K blocks: a finer activation scale, so close to the CPU, not equal.

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// -inf without math.h.
#define NEG_INF __int_as_float(0xff800000)

// Weight types, GGML's numbering.
#define T_F32 0
#define T_Q4_1 3
#define T_Q5_0 6
#define T_Q8_0 8
#define T_Q4_K 12
#define T_Q6_K 14

__device__ __forceinline__ float h2f(u16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

__device__ __forceinline__ u16 f2h(float f) {
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

__device__ __forceinline__ int dp4a(int a, int b, int c) {
  int r;
  asm("dp4a.s32.s32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}

// sub_bytes(v, k): each byte of v (all < 128) minus k, as signed bytes:
// the high bit set first keeps a byte's borrow from reaching its neighbour.
__device__ __forceinline__ int sub_bytes(u32 v, u32 k) {
  return (int)(((v | 0x80808080u) - k * 0x01010101u) ^ 0x80808080u);
}

// bits4_to_bytes(h): bits 0..3 of h to bit 4 of bytes 0..3 (Q5_0's fifth bits).
__device__ __forceinline__ u32 bits4_to_bytes(u32 h) {
  return ((h << 4) & 0x10u) | ((h << 11) & 0x1000u) | ((h << 18) & 0x100000u) | ((h << 25) & 0x10000000u);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ int warp_sum_i(int v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Programmatic dependent launch (Hopper and newer). The host may launch a
// kernel while the one before it in the stream still runs; then the kernel
// first does what needs nothing that kernel writes (a mat-vec loads its
// weights), waits for it with dep_wait, and lets the next kernel launch
// with dep_release. Launched the ordinary way, both are no-ops.
//
// PASS_EARLY: the pass header, its tokens, rows and extra entries, and the
// committed cache entries may be read before dep_wait. The host copies the
// header before the pass's first kernel (embed), which is launched the
// ordinary way, and every later kernel starts after it has: nothing in the
// pass writes them. Whatever a kernel of the pass writes is read only after
// dep_wait. Every block calls dep_wait, early exits too: a kernel's
// completion then implies the completion of every kernel before it, which
// the next kernel's dep_wait relies on.
__device__ __forceinline__ void dep_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void dep_release() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
#define DEP_ENTER() \
  do {              \
    dep_wait();     \
    dep_release();  \
  } while (0)

// Go's math.Round: halves away from zero (roundf), not to even (rintf).
__device__ __forceinline__ int round_clamp127(float v) {
  int q = (int)roundf(v);
  return q < -127 ? -127 : (q > 127 ? 127 : q);
}

// One token of the pass, written by the host per pass. Its sequence's cache
// is k/v: [layer][kv head][cap][head dim] halves; the token's own K/V go to
// entry len + slot (its scratch index), and it attends to the committed
// entries [0, len), the scratch entries [0, span) and extra[xlo, xhi).
struct Tok {
  u64 k, v;
  int len, cap, slot, span, xlo, xhi, pos, id;
};

// The pass: n tokens; rows of them want logits (row r is token rows[r]).
struct Pass {
  int n, nrows;
};

// ---------------------------------------------------------------- embedding

struct EmbedArgs {
  u64 out;     // float [n][dim]
  u64 pass;    // Pass
  u64 toks;    // Tok [n]
  u64 qs;      // quants of the embedding table
  u64 scales;  // per-block scales
  int type, dim;
};

// dequant is element e of row `row` (of `cols`) of a repacked matrix, as
// core/quant's Dequantize computes it (products rounded, not fused).
__device__ float dequant(int type, const u8* qs, const u8* sc, u64 row, int cols, int e) {
  int nb = cols / 32, b = e >> 5, j = e & 31;
  u64 blk = row * nb + b;
  if (type == T_Q8_0) {
    return __fmul_rn(h2f(((const u16*)sc)[blk]), (float)((const i8*)qs)[blk * 32 + j]);
  } else if (type == T_Q4_1) {
    const u8* q = qs + blk * 16;
    const u16* dm = (const u16*)sc + blk * 2;
    int n4 = j < 16 ? (q[j] & 15) : (q[j - 16] >> 4);
    return __fadd_rn(__fmul_rn(h2f(dm[0]), (float)n4), h2f(dm[1]));
  } else if (type == T_Q5_0) {
    const u8* q = qs + blk * 20;
    u32 qh = *(const u32*)(q + 16);
    int n5 = (j < 16 ? (q[j] & 15) : (q[j - 16] >> 4)) | (int)((qh >> j) & 1) << 4;
    return __fmul_rn(h2f(((const u16*)sc)[blk]), (float)(n5 - 16));
  } else if (type == T_Q4_K) {
    u64 sb = row * (cols / 256) + (e >> 8);
    int k = e & 255, g = k >> 6, l = k & 31, hi = (k >> 5) & 1;
    const u8* s = sc + sb * 20;
    u8 byte = qs[sb * 128 + g * 32 + l];
    int q = hi ? byte >> 4 : byte & 15;
    float d = __fmul_rn(h2f(((const u16*)s)[0]), (float)s[4 + 2 * g + hi]);
    float m = __fmul_rn(h2f(((const u16*)s)[1]), (float)s[12 + 2 * g + hi]);
    return __fsub_rn(__fmul_rn(d, (float)q), m);
  } else if (type == T_Q6_K) {
    u64 sb = row * (cols / 256) + (e >> 8);
    int k = e & 255, h = k >> 7, quarter = (k >> 5) & 3, l = k & 31;
    const u8* ql = qs + sb * 192 + 64 * h + 32 * (quarter & 1);
    int lo = quarter < 2 ? ql[l] & 15 : ql[l] >> 4;
    int q = lo | ((qs[sb * 192 + 128 + 32 * h + l] >> (2 * quarter)) & 3) << 4;
    const u8* s = sc + sb * 20;
    float d = __fmul_rn(h2f(((const u16*)s)[0]), (float)((const i8*)s)[4 + (k >> 4)]);
    return __fmul_rn(d, (float)(q - 32));
  }
  return ((const float*)qs)[row * cols + e];
}

extern "C" __global__ void embed(const EmbedArgs a) {
  DEP_ENTER();
  const Pass* p = (const Pass*)a.pass;
  int i = blockIdx.x;
  if (i >= p->n) return;
  int row = ((const Tok*)a.toks)[i].id;
  float* out = (float*)a.out + (u64)i * a.dim;
  for (int e = threadIdx.x; e < a.dim; e += blockDim.x)
    out[e] = dequant(a.type, (const u8*)a.qs, (const u8*)a.scales, (u64)row, a.dim, e);
}

// ------------------------------------------------- norm and quantization

// quant_block quantizes the 32 values y (one per lane) of block b of row r:
// d = half(amax/127), q = round(y/d), s = half(d·Σq), as the CPU does.
__device__ __forceinline__ void quant_block(float y, i8* qs, u16* ds, int lane) {
  float amax = warp_max(fabsf(y));
  float d = h2f(f2h(amax / 127.0f));
  float id = d != 0.0f ? 1.0f / d : 0.0f;
  int q = round_clamp127(y * id);
  int sum = warp_sum_i(q);
  qs[lane] = (i8)q;
  if (lane == 0) {
    ds[0] = f2h(amax / 127.0f);
    ds[1] = f2h(d * (float)sum);
  }
}

// quant_block4 is quant_block by a group of four consecutive lanes (sub =
// lane % 4, gmask their mask), each holding y = elements 8·sub .. 8·sub+7:
// the same bits, since the maximum and the integer sum are exact in any
// order. (One thread a block, as this was, waited on a chain of 32.)
__device__ __forceinline__ void quant_block4(const float (&y)[8], int sub, u32 gmask, i8* qs, u16* ds) {
  float amax = fabsf(y[0]);
#pragma unroll
  for (int i = 1; i < 8; i++) amax = fmaxf(amax, fabsf(y[i]));
  amax = fmaxf(amax, __shfl_xor_sync(gmask, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(gmask, amax, 2));
  float d = h2f(f2h(amax / 127.0f));
  float id = d != 0.0f ? 1.0f / d : 0.0f;
  int sum = 0;
  u32 w[2];
#pragma unroll
  for (int k = 0; k < 2; k++) {
    u32 word = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      int q = round_clamp127(y[4 * k + i] * id);
      sum += q;
      word |= (u32)(q & 0xff) << (8 * i);
    }
    w[k] = word;
  }
  ((uint2*)qs)[sub] = make_uint2(w[0], w[1]);
  sum += __shfl_xor_sync(gmask, sum, 1);
  sum += __shfl_xor_sync(gmask, sum, 2);
  if (sub == 0) {
    ds[0] = f2h(amax / 127.0f);
    ds[1] = f2h(d * (float)sum);
  }
}

struct NormArgs {
  u64 x;     // float [n][dim], the residual stream
  u64 w;     // float [dim]
  u64 qs;    // i8 [rows][dim]
  u64 ds;    // half2 [rows][dim/32]
  u64 pass;  // Pass
  u64 rows;  // int [nrows]: gather these tokens (the head), or 0: every token
  u64 clear; // u64 [nrows]: zeroed, row r by its block (the head's argmax keys), or 0
  int dim;
  float eps;
};

// Normalising and quantizing a row happens in rmsnorm_quant and quant and
// again in the mat-vec's prologue (below), so every one of them does it
// with these functions, to the same bits:
//   rms_scale   1/sqrt(mean(x²) + eps), one warp: lane keeps eight sums
//               (elements lane + 32k, k mod 8), adds them in order, then
//               the butterfly;
//   norm8       eight elements of x·scale·w, for quant_block4 (any
//               thread, any order: blocks are independent);
//   swiglu_block  block b of silu(gate)·up, quantized.
__device__ __forceinline__ float rms_scale(const float* x, int dim, float eps, int lane) {
  // Eight partial sums, so eight loads are in flight at a time (a loop
  // adding each load as it came waited for every one in turn).
  float part[8];
#pragma unroll
  for (int k = 0; k < 8; k++) part[k] = 0.0f;
  for (int e0 = lane; e0 < dim; e0 += 32 * 8) {
    float v[8];
#pragma unroll
    for (int k = 0; k < 8; k++) v[k] = e0 + 32 * k < dim ? x[e0 + 32 * k] : 0.0f;
#pragma unroll
    for (int k = 0; k < 8; k++) part[k] = __fadd_rn(part[k], __fmul_rn(v[k], v[k]));
  }
  float ss = part[0];
#pragma unroll
  for (int k = 1; k < 8; k++) ss = __fadd_rn(ss, part[k]);
  ss = warp_sum(ss);
  return (float)(1.0 / sqrt((double)(ss / (float)dim + eps)));
}

__device__ __forceinline__ void norm8(const float4* x, float scale, const float4* w, float (&y)[8]) {
#pragma unroll
  for (int k = 0; k < 2; k++) {
    float4 xv = x[k], wv = w[k];
    y[4 * k] = __fmul_rn(__fmul_rn(xv.x, scale), wv.x);
    y[4 * k + 1] = __fmul_rn(__fmul_rn(xv.y, scale), wv.y);
    y[4 * k + 2] = __fmul_rn(__fmul_rn(xv.z, scale), wv.z);
    y[4 * k + 3] = __fmul_rn(__fmul_rn(xv.w, scale), wv.w);
  }
}

// silu(g)·up = g / (1 + e^-g) · up, the CPU's SiLU (its expf is within 2
// ulp of e^x).
__device__ __forceinline__ float silu_mul(float g, float up) {
  return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), up);
}

__device__ __forceinline__ void swiglu_block(const float* gate, const float* up, int b, i8* qs, u16* ds, int lane) {
  int e = b * 32 + lane;
  quant_block(silu_mul(gate[e], up[e]), qs + b * 32, ds + b * 2, lane);
}

// rmsnorm_quant: y = x / sqrt(mean(x²) + eps) · w, quantized. One block
// of 4 warps per output row. The kernel is a chain of waits, so it waits
// on memory once: every thread loads its share of the row into shared
// memory (8 loads in flight) and its first group's weights, then warp 0
// finds the scale there and four lanes a block quantize (norm8 and
// quant_block4: the mat-vec prologue's bits). Dynamic shared memory: dim
// floats (NormSharedBytes). Loading x and w in the rounds rms_scale and a
// warp a block asked for them, 64 rows of 576 took 7.2 µs on an H200
// (ncu, cold caches); staged, 5.0.
extern "C" __global__ void rmsnorm_quant(const NormArgs a) {
  const Pass* p = (const Pass*)a.pass;  // pass buffers: before dep_wait (PASS_EARLY)
  int r = blockIdx.x;
  int n = a.rows ? p->nrows : p->n;
  if (r >= n) {
    DEP_ENTER();
    return;
  }
  int src = a.rows ? ((const int*)a.rows)[r] : r;
  int nb = a.dim / 32;
  int sub = threadIdx.x & 3, g0 = threadIdx.x >> 2, groups = blockDim.x >> 2;
  // The weights of this thread's first group: they are not the previous
  // kernel's output, so they load before dep_wait.
  const float* w = (const float*)a.w;
  float4 w0[2];
  if (g0 < nb) {
    w0[0] = ((const float4*)(w + g0 * 32 + 8 * sub))[0];
    w0[1] = ((const float4*)(w + g0 * 32 + 8 * sub))[1];
  }
  DEP_ENTER();
  if (a.clear && threadIdx.x == 0) ((u64*)a.clear)[r] = 0;
  const float* x = (const float*)a.x + (u64)src * a.dim;
  extern __shared__ __align__(16) float xs[];
  for (int e0 = threadIdx.x; e0 < a.dim; e0 += 8 * blockDim.x) {
    float v[8];
#pragma unroll
    for (int k = 0; k < 8; k++) {
      int e = e0 + k * blockDim.x;
      v[k] = e < a.dim ? x[e] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < 8; k++) {
      int e = e0 + k * blockDim.x;
      if (e < a.dim) xs[e] = v[k];
    }
  }
  __syncthreads();
  __shared__ float scale;
  if (threadIdx.x < 32) {
    float sc = rms_scale(xs, a.dim, a.eps, threadIdx.x);
    if (threadIdx.x == 0) scale = sc;
  }
  __syncthreads();
  float sc = scale;
  i8* qs = (i8*)a.qs + (u64)r * a.dim;
  u16* ds = (u16*)a.ds + (u64)r * nb * 2;
  u32 gmask = 0xfu << ((threadIdx.x & 31) & ~3);
  for (int b = g0; b < nb; b += groups) {
    int e = b * 32 + 8 * sub;
    float4 wv[2] = {w0[0], w0[1]};
    if (b != g0) wv[0] = ((const float4*)(w + e))[0], wv[1] = ((const float4*)(w + e))[1];
    float y[8];
    norm8((const float4*)(xs + e), sc, wv, y);
    quant_block4(y, sub, gmask, qs + b * 32, ds + b * 2);
  }
}

struct QuantArgs {
  u64 x;     // float [n][dim], or [n][2·dim] = [gate | up] rows for SwiGLU
  u64 qs;    // i8 [n][dim]
  u64 ds;    // half2 [n][dim/32]
  u64 pass;  // Pass
  int dim, swiglu;
};

// quant: x quantized, or silu(gate)·up quantized (the FFN's fused gate·up
// product). One warp per block of 32, 8 warps per thread block, grid
// (blocks/8, n).
extern "C" __global__ void quant(const QuantArgs a) {
  const Pass* p = (const Pass*)a.pass;  // before dep_wait (PASS_EARLY)
  int r = blockIdx.y;
  bool live = r < p->n;
  DEP_ENTER();
  if (!live) return;
  int lane = threadIdx.x & 31;
  int b = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  int nb = a.dim / 32;
  if (b >= nb) return;
  i8* qs = (i8*)a.qs + (u64)r * a.dim;
  u16* ds = (u16*)a.ds + (u64)r * nb * 2;
  if (a.swiglu) {
    const float* row = (const float*)a.x + (u64)r * 2 * a.dim;
    swiglu_block(row, row + a.dim, b, qs, ds, lane);
  } else {
    quant_block(((const float*)a.x)[(u64)r * a.dim + b * 32 + lane], qs + b * 32, ds + b * 2, lane);
  }
}

// ------------------------------------------------------------ mat-vec

// Tokens a mat-vec block keeps in registers: each weight word is loaded
// once and used for all of them.
#define MV_TOKENS 8
#define MV_WARPS 4

struct MatVecArgs {
  u64 out;   // float [n][rows]
  u64 res;   // float [n][rows] added to the product (may equal out), or 0
  u64 bias;  // float [rows], or 0
  u64 wq;    // weight quants
  u64 ws;    // weight scales
  u64 xq;    // i8 [n][cols]
  u64 xds;   // half2 [n][cols/32]
  u64 pass;  // Pass
  u64 src;   // pro 1: float [n][cols] rows to normalise; pro 2: [n][2·cols] [gate | up] rows
  u64 nw;    // pro 1: float [cols], the norm's weight
  u64 amax;  // the _argmax kernels (a greedy pass's head): u64 [nrows] argmax keys, zeroed before
  int rows, cols;
  int head;  // n is the pass's nrows (the output head)
  int ld;    // out and res row stride (≥ rows: a slice of a wider row)
  int pro;   // 0: xq/xds hold the activations; 1, 2: the prologue makes them (matvec only)
  float eps;
};

// The head of a greedy pass needs only each logits row's argmax, so its
// product kernel keeps none of the logits: every block folds its rows into
// one key a token (argmax_key) and raises the row's key in memory to it
// (max_key). The maximum of keys does not depend on the order blocks
// finish in, so the argmax is the same whichever kernel or pass made it.
//
// argmax_key orders (logit, index) pairs as the CPU's greedy sampler does:
// the larger logit, and of equal logits the lower index. A float's bits
// with the sign bit flipped (all bits, for negatives) order as unsigned
// integers the way the floats do; -0 is taken as +0 so the two tie; the
// index goes in complemented below them. NaN and -inf have key 0, the
// keys' floor, which a row's key starts at: as on the CPU, NaN never wins
// and a row with nothing above -inf comes out 0 (core/sample's argmax;
// core/cuda's TestArgmaxKeysOrderAsTheSampler checks a Go twin).
__device__ __forceinline__ u64 argmax_key(float v, int i) {
  if (!(v > NEG_INF)) return 0;
  u32 b = v == 0.0f ? 0u : (u32)__float_as_int(v);
  u32 o = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return ((u64)o << 32) | (u64)(0xffffffffu - (u32)i);
}

__device__ __forceinline__ u64 key_max(u64 a, u64 b) { return a > b ? a : b; }

__device__ __forceinline__ u64 shfl_xor_u64(u64 v, int o) {
  u32 lo = __shfl_xor_sync(0xffffffffu, (u32)v, o), hi = __shfl_xor_sync(0xffffffffu, (u32)(v >> 32), o);
  return ((u64)hi << 32) | lo;
}
__device__ __forceinline__ u64 shfl_u64(u64 v, int from) {
  u32 lo = __shfl_sync(0xffffffffu, (u32)v, from), hi = __shfl_sync(0xffffffffu, (u32)(v >> 32), from);
  return ((u64)hi << 32) | lo;
}

// A block reads its tokens' keys as they stand when it starts (seen_key,
// after dep_wait: the final norm has zeroed them) and raises a key only if
// its own is above that (max_key). Keys only rise, so a key at or under
// one already seen has nothing to add: once the first blocks are done most
// blocks skip the atomic, and a pass of many rows does not queue thousands
// of them on each row's key. The read is in flight while the block works.
// On an H200, SmolLM2's head over 256 rows took 203 µs writing logits
// (plus 35 for the argmax kernel this replaces), 289 µs with an atomic
// from every block, 259 reading the key at the block's end, 243 as here.
__device__ __forceinline__ u64 seen_key(const u64* p) { return *(volatile const u64*)p; }

__device__ __forceinline__ void max_key(u64* p, u64 k, u64 seen) {
  if (k > seen) asm volatile("red.global.max.u64 [%0], %1;" ::"l"(p), "l"(k) : "memory");
}

// Repacked weight layouts (weights.go), per row, blocks back to back:
//   Q4_1  qs 16 B a block of 32: byte j holds element j (low nibble) and
//         j+16 (high), as in GGUF; scales (d, m) halves.
//   Q8_0  qs 32 int8s; scales d.
//   Q5_0  qs 20 B: the 16 nibble bytes as Q4_1, then qh (bit j: element
//         j's fifth bit); scales d. Element value d·(q − 16).
//   Q4_K  qs 128 B a super-block of 256: GGUF's, byte 32g+l holding element
//         64g+l (low nibble, sub-block 2g) and 64g+32+l (high, 2g+1);
//         scales 20 B: d, dmin halves, sc[8], m[8] bytes (GGUF's 6-bit
//         fields unpacked). Element value d·sc_j·q − dmin·m_j.
//   Q6_K  qs 192 B: GGUF's ql[128] then qh[64]; scales 20 B: d half, two
//         zero bytes, sc[16] int8s. Element value d·sc_s·(q − 32).
//
// Every product kernel (the mat-vec here, the tensor-core matmul below)
// computes an output as the same float sum of the blocks' terms (four
// interleaved sums in block order, then combined in order: MM_KSPLIT),
// each term made from the block's exact integer sums by the term_*
// functions' rounded, unfused operations. So a token's output is the
// same bits whichever kernel computed it and whatever else shared its pass
// — a speculative verify pass gives exactly the logits a single-token step
// gives, and speculative greedy output equals plain greedy output.
//
// A block's term, from its integer sum s = Σq·x (the K-quants: per
// sub-block) and the scales:
//   Q4_1        dw·dx·s + mw·sx
//   Q8_0, Q5_0  dw·dx·s
//   Q4_K        dx·(d·sc·s − dmin·m·Σx)
//   Q6_K        d·dx·(s_lo·sc_lo + s_hi·sc_hi), the two 16-element halves
__device__ __forceinline__ float term_q4_1(float dw, float mw, float dx, float sx, int s) {
  return __fadd_rn(__fmul_rn(__fmul_rn(dw, dx), (float)s), __fmul_rn(mw, sx));
}
__device__ __forceinline__ float term_d(float dw, float dx, int s) { return __fmul_rn(__fmul_rn(dw, dx), (float)s); }
__device__ __forceinline__ float term_q4_k(float dx, float sc, float mn, int s, int sum) {
  return __fmul_rn(dx, __fsub_rn(__fmul_rn(sc, (float)s), __fmul_rn(mn, (float)sum)));
}

// q5_lo/hi: word c of a Q5_0 block (qw) with its fifth bits, minus 16:
// elements 4c..4c+3 and 16+4c.. as signed bytes.
__device__ __forceinline__ int q5_lo(u32 qw, u32 qh, int c) {
  return sub_bytes((qw & 0x0F0F0F0Fu) | bits4_to_bytes(qh >> (4 * c)), 16);
}
__device__ __forceinline__ int q5_hi(u32 qw, u32 qh, int c) {
  return sub_bytes(((qw >> 4) & 0x0F0F0F0Fu) | bits4_to_bytes(qh >> (16 + 4 * c)), 16);
}

// q6_word: a Q6_K ql word's nibbles for quarter q (low nibbles for 0 and
// 1, high for 2 and 3) with bit pair q of the qh word, minus 32.
__device__ __forceinline__ int q6_word(u32 ql, u32 qh, int q) {
  u32 lo = q >= 2 ? (ql >> 4) & 0x0F0F0F0Fu : ql & 0x0F0F0F0Fu;
  return sub_bytes(lo | (((qh >> (2 * q)) & 0x03030303u) << 4), 32);
}

__device__ __forceinline__ int dot4(uint4 w, uint4 x, int s) {
  return dp4a((int)w.w, (int)x.w, dp4a((int)w.z, (int)x.z, dp4a((int)w.y, (int)x.y, dp4a((int)w.x, (int)x.x, s))));
}
__device__ __forceinline__ uint4 nib4(uint4 w, int sh) {
  return make_uint4((w.x >> sh) & 0x0F0F0F0Fu, (w.y >> sh) & 0x0F0F0F0Fu, (w.z >> sh) & 0x0F0F0F0Fu, (w.w >> sh) & 0x0F0F0F0Fu);
}

// WBlock<T> is one block of 32 weights of a row, loaded once by the lane
// that owns it; term(x, dx, sx) is its product with a token's activation
// block (x: its 32 int8s as two 16-byte words).
template <int T>
struct WBlock;

template <>
struct WBlock<T_Q4_1> {
  uint4 q;
  float d, m;
  __device__ __forceinline__ WBlock() {}
  __device__ __forceinline__ WBlock(const MatVecArgs& a, u64 row, int nb, int b) {
    q = ((const uint4*)a.wq)[row * nb + b];
    const u16* s = (const u16*)a.ws + (row * nb + b) * 2;
    d = h2f(s[0]), m = h2f(s[1]);
  }
  __device__ __forceinline__ float term(uint4 x0, uint4 x1, float dx, float sx) const {
    return term_q4_1(d, m, dx, sx, dot4(nib4(q, 4), x1, dot4(nib4(q, 0), x0, 0)));
  }
};

template <>
struct WBlock<T_Q8_0> {
  uint4 q0, q1;
  float d;
  __device__ __forceinline__ WBlock() {}
  __device__ __forceinline__ WBlock(const MatVecArgs& a, u64 row, int nb, int b) {
    const uint4* q = (const uint4*)a.wq + (row * nb + b) * 2;
    q0 = q[0], q1 = q[1];
    d = h2f(((const u16*)a.ws)[row * nb + b]);
  }
  __device__ __forceinline__ float term(uint4 x0, uint4 x1, float dx, float) const {
    return term_d(d, dx, dot4(q1, x1, dot4(q0, x0, 0)));
  }
};

template <>
struct WBlock<T_Q5_0> {
  uint4 lo, hi;
  float d;
  __device__ __forceinline__ WBlock() {}
  __device__ __forceinline__ WBlock(const MatVecArgs& a, u64 row, int nb, int b) {
    const u32* q = (const u32*)a.wq + (row * nb + b) * 5;
    u32 qh = q[4];
    lo = make_uint4(q5_lo(q[0], qh, 0), q5_lo(q[1], qh, 1), q5_lo(q[2], qh, 2), q5_lo(q[3], qh, 3));
    hi = make_uint4(q5_hi(q[0], qh, 0), q5_hi(q[1], qh, 1), q5_hi(q[2], qh, 2), q5_hi(q[3], qh, 3));
    d = h2f(((const u16*)a.ws)[row * nb + b]);
  }
  __device__ __forceinline__ float term(uint4 x0, uint4 x1, float dx, float) const {
    return term_d(d, dx, dot4(hi, x1, dot4(lo, x0, 0)));
  }
};

// Q4_K: activation block b is sub-block kb = b%8 of super-block b/8: the
// low (kb even) or high nibbles of the super-block's words 8(kb/2) .. +7.
template <>
struct WBlock<T_Q4_K> {
  uint4 q0, q1;
  float sc, mn;
  __device__ __forceinline__ WBlock() {}
  __device__ __forceinline__ WBlock(const MatVecArgs& a, u64 row, int nb, int b) {
    int nsb = nb / 8, sb = b >> 3, kb = b & 7;
    const uint4* q = (const uint4*)a.wq + (row * nsb + sb) * 8 + (kb >> 1) * 2;
    int sh = 4 * (kb & 1);
    q0 = nib4(q[0], sh), q1 = nib4(q[1], sh);
    const u8* s = (const u8*)a.ws + (row * nsb + sb) * 20;
    u32 dd = *(const u32*)s;
    sc = __fmul_rn(h2f((u16)(dd & 0xffff)), (float)s[4 + kb]);
    mn = __fmul_rn(h2f((u16)(dd >> 16)), (float)s[12 + kb]);
  }
  __device__ __forceinline__ float term(uint4 x0, uint4 x1, float dx, float) const {
    const uint4 ones = make_uint4(0x01010101u, 0x01010101u, 0x01010101u, 0x01010101u);
    return term_q4_k(dx, sc, mn, dot4(q1, x1, dot4(q0, x0, 0)), dot4(ones, x1, dot4(ones, x0, 0)));
  }
};

// Q6_K: activation block b is kb = b%8 of super-block b/8, half h = kb/4
// and quarter q = kb%4: quarter q's nibbles of ql words 16h + 8(q&1) ..
// +7 with bit pair q of qh words 32 + 8h .. +7.
template <>
struct WBlock<T_Q6_K> {
  uint4 lo, hi;
  float d;
  int sc0, sc1;
  __device__ __forceinline__ WBlock() {}
  __device__ __forceinline__ WBlock(const MatVecArgs& a, u64 row, int nb, int b) {
    int nsb = nb / 8, sb = b >> 3, kb = b & 7, h = kb >> 2, q = kb & 3;
    const uint4* w = (const uint4*)a.wq + (row * nsb + sb) * 12;
    uint4 l0 = w[4 * h + 2 * (q & 1)], l1 = w[4 * h + 2 * (q & 1) + 1], h0 = w[8 + 2 * h], h1 = w[9 + 2 * h];
    lo = make_uint4(q6_word(l0.x, h0.x, q), q6_word(l0.y, h0.y, q), q6_word(l0.z, h0.z, q), q6_word(l0.w, h0.w, q));
    hi = make_uint4(q6_word(l1.x, h1.x, q), q6_word(l1.y, h1.y, q), q6_word(l1.z, h1.z, q), q6_word(l1.w, h1.w, q));
    const u8* s = (const u8*)a.ws + (row * nsb + sb) * 20;
    d = h2f(*(const u16*)s);
    sc0 = ((const i8*)s)[4 + 2 * kb], sc1 = ((const i8*)s)[5 + 2 * kb];
  }
  __device__ __forceinline__ float term(uint4 x0, uint4 x1, float dx, float) const {
    return term_d(d, dx, dot4(lo, x0, 0) * sc0 + dot4(hi, x1, 0) * sc1);
  }
};

// make_acts is the mat-vec's prologue (MatVecArgs.pro): it makes the
// activations of tokens t0 .. t0+nt-1 in dynamic shared memory (cap tokens
// of int8s, then their half2s) and points xq, xds there. The RMSNorm of src
// rows (pro 1: rms_scale, one warp a token) or silu(gate)·up of them (pro
// 2), four lanes a block of 32 (quant_block4): the bits rmsnorm_quant and
// quant write. Every thread of the block calls it (it has barriers).
__device__ __forceinline__ void make_acts(const MatVecArgs& a, int t0, int nt, int cap, const i8*& xq, const u16*& xds) {
  extern __shared__ __align__(16) u8 pro_smem[];
  i8* sq = (i8*)pro_smem;
  u16* sds = (u16*)(pro_smem + cap * a.cols);
  __shared__ float scale[MV_TOKENS];  // cap ≤ MV_TOKENS
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  int nb = a.cols / 32;
  if (a.pro == 1) {
    for (int t = warp; t < nt; t += warps) {
      float sc = rms_scale((const float*)a.src + (u64)(t0 + t) * a.cols, a.cols, a.eps, lane);
      if (lane == 0) scale[t] = sc;
    }
    __syncthreads();
  }
  // Four lanes a block of 32 (quant_block4), eight elements each.
  int sub = threadIdx.x & 3;
  u32 gmask = 0xfu << (lane & ~3);
  for (int i = threadIdx.x >> 2; i < nt * nb; i += blockDim.x >> 2) {
    int t = i / nb, b = i % nb, e = b * 32 + 8 * sub;
    float y[8];
    if (a.pro == 1) {
      const float4* x = (const float4*)((const float*)a.src + (u64)(t0 + t) * a.cols + e);
      const float4* w = (const float4*)((const float*)a.nw + e);
      norm8(x, scale[t], w, y);
    } else {
      const float* row = (const float*)a.src + (u64)(t0 + t) * 2 * a.cols + e;
      const float4* g = (const float4*)row;
      const float4* u = (const float4*)(row + a.cols);
#pragma unroll
      for (int k = 0; k < 2; k++) {
        float4 gv = g[k], uv = u[k];
        y[4 * k] = silu_mul(gv.x, uv.x);
        y[4 * k + 1] = silu_mul(gv.y, uv.y);
        y[4 * k + 2] = silu_mul(gv.z, uv.z);
        y[4 * k + 3] = silu_mul(gv.w, uv.w);
      }
    }
    quant_block4(y, sub, gmask, sq + t * a.cols + b * 32, sds + (t * nb + b) * 2);
  }
  __syncthreads();
  xq = sq, xds = sds;
}

// matvec_<type>: out[t][r] = W[r] · x[t] (+ bias[r]) (+ res[t][r]) for up
// to MV_TOKENS tokens (blockIdx.y picks which). A warp per row, MV_WARPS
// rows per block. Lane l owns blocks l, l+32, ... of the row: it loads
// each weight block once (16–32 bytes) and makes its term with every
// token; the terms go through shared memory to lane t, which adds token
// t's in the product kernels' one order. One entry point per weight type, so each takes only
// the registers its own block needs.
//
// With a prologue (pro), the block first makes its tokens' activations
// itself, in dynamic shared memory (MV_TOKENS·cols int8s, then the
// half2s): the RMSNorm of src rows (pro 1) or silu(gate)·up of them (pro
// 2), quantized. Every block repeats that small work, and the pass saves
// the kernel that would write them out and the gap before this one.
//
// AMAX (matvec_<type>_argmax, for the head of a greedy pass) writes no
// logits and raises each token's argmax key in a.amax instead (argmax_key,
// above). It is a separate instance, not a branch on a.amax: the branch
// alone made the layers' tensor-core products 6% slower on an H200. The
// plain instances compile to the machine code they had before the argmax
// variants existed (their cubin sections compared byte for byte); MV_ROW
// is a macro because a lambda in its place changed it.
template <int T, bool AMAX>
__device__ __forceinline__ void matvec_t(const MatVecArgs& a) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int nb = a.cols / 32;
  int row = blockIdx.x * MV_WARPS + warp;
  // With AMAX a warp past the matrix (in its last block) sums the last
  // row again and stores nothing: it still reaches the block's barrier.
#define MV_ROW (AMAX ? (u64)min(row, a.rows - 1) : (u64)row)
  // The lane's first weight block, loaded before waiting for the kernel
  // before (see dep_wait): its latency overlaps that kernel's tail.
  WBlock<T> first;
  if ((AMAX || row < a.rows) && lane < nb) first = WBlock<T>(a, MV_ROW, nb, lane);
  const Pass* p = (const Pass*)a.pass;  // before dep_wait (PASS_EARLY)
  int n = a.head ? p->nrows : p->n;
  int t0 = blockIdx.y * MV_TOKENS;
  DEP_ENTER();
  if (t0 >= n) return;
  int nt = min(MV_TOKENS, n - t0);
  u64 seen = 0;  // AMAX: thread t < nt, token t's key (max_key)
  if constexpr (AMAX) {
    if (threadIdx.x < nt) seen = seen_key((const u64*)a.amax + t0 + threadIdx.x);
  }
  const i8* xq = (const i8*)a.xq + (u64)t0 * a.cols;
  const u16* xds = (const u16*)a.xds + (u64)t0 * nb * 2;
  if (a.pro) {
    make_acts(a, t0, nt, MV_TOKENS, xq, xds);
  }
  if constexpr (!AMAX) {
    if (row >= a.rows) return;  // after the prologue's barriers
  }
  __shared__ float terms[MV_WARPS][MV_TOKENS][33];
  // Lane t < nt: token t's four interleaved sums (MM_KSPLIT, below).
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int base = 0; base < nb; base += 32) {
    int b = base + lane;
    if (b < nb) {
      WBlock<T> w = base == 0 ? first : WBlock<T>(a, MV_ROW, nb, b);
#pragma unroll
      for (int t = 0; t < MV_TOKENS; t++) {
        if (t < nt) {
          const uint4* x = (const uint4*)(xq + (u64)t * a.cols + b * 32);
          const u16* ds = xds + ((u64)t * nb + b) * 2;
          terms[warp][t][lane] = w.term(x[0], x[1], h2f(ds[0]), h2f(ds[1]));
        }
      }
    }
    __syncwarp();
    if (lane < nt) {
      int cnt = min(32, nb - base);
      for (int j0 = 0; j0 < cnt; j0 += 8) {
        float v[8];
#pragma unroll
        for (int j = 0; j < 8; j++) v[j] = terms[warp][lane][min(j0 + j, 31)];
#pragma unroll
        for (int j = 0; j < 8; j++)
          if (j0 + j < cnt) acc[j & 3] = __fadd_rn(acc[j & 3], v[j]);
      }
    }
    __syncwarp();
  }
  u64 key = 0;  // AMAX: token lane's key of this row
  if (lane < nt && (!AMAX || row < a.rows)) {
    u64 o = (u64)(t0 + lane) * a.ld + row;
    float v = __fadd_rn(__fadd_rn(__fadd_rn(acc[0], acc[1]), acc[2]), acc[3]);
    if (a.bias) v = __fadd_rn(v, ((const float*)a.bias)[row]);
    if (a.res) v = __fadd_rn(v, ((const float*)a.res)[o]);
    if constexpr (AMAX) {
      key = argmax_key(v, row);
    } else {
      ((float*)a.out)[o] = v;
    }
  }
  if constexpr (AMAX) {
    __shared__ u64 best[MV_WARPS][MV_TOKENS];
    if (lane < MV_TOKENS) best[warp][lane] = key;
    __syncthreads();
    if (threadIdx.x < nt) {
      u64 k = best[0][threadIdx.x];
#pragma unroll
      for (int w = 1; w < MV_WARPS; w++) k = key_max(k, best[w][threadIdx.x]);
      max_key((u64*)a.amax + t0 + threadIdx.x, k, seen);
    }
  }
}

#undef MV_ROW

#define MATVEC(name, T)                                                                          \
  extern "C" __global__ void matvec_##name(const MatVecArgs a) { matvec_t<T, false>(a); }        \
  extern "C" __global__ void matvec_##name##_argmax(const MatVecArgs a) { matvec_t<T, true>(a); }
MATVEC(q4_1, T_Q4_1)
MATVEC(q8_0, T_Q8_0)
MATVEC(q5_0, T_Q5_0)
MATVEC(q4_k, T_Q4_K)
MATVEC(q6_k, T_Q6_K)

// ------------------------------------------------- tensor-core matmul

// Past MV_TOKENS tokens (prefill, large verify trees) the same products run
// on the int8 tensor cores: mma.sync m16n8k32 multiplies a 16-row × 32-
// element tile of weights by 8 tokens' 32 activations — one activation
// block — into exact int32 sums, which get the block's scales in float as
// the mat-vec's dp4a sums do. Both operands come straight from global
// memory (L1/L2) in the fragment layout the instruction wants, because the
// repacked weights already are that layout:
//   A (weights), lane (g = lane/4, c = lane%4): word c of the block of rows
//     g and g+8 gives k = 4c..4c+3 (low nibbles) and 16+4c.. (high nibbles)
//     for Q4_1/Q5_0 (Q8_0: words c and 4+c); the K-quants the same within
//     their sub-blocks.
//   B (activations): word c and 4+c of token g's block.
//   C: rows g and g+8, tokens 2c and 2c+1.
// A block owns 16 rows × 8·NT tokens and splits the row's blocks of 32
// between its MM_KSPLIT warps: warp w takes blocks w, w+4, ..., reusing
// each weight fragment for its NT token tiles. Two sizes: NT = 4
// (mma_<type>) for prefill, NT = 1 (mma1_<type>, four times the blocks)
// for verify passes of a few dozen tokens, too few to fill the GPU else.
//
// So the sum over a row's blocks has the same order in every product
// kernel, it is always four interleaved sums — s_k adds the terms of
// blocks b ≡ k (mod 4) in block order — then ((s_0 + s_1) + s_2) + s_3.
// The mat-vec adds its terms the same way.
#define MM_KSPLIT 4

__device__ __forceinline__ void mma_k32(int (&c)[4], int a0, int a1, int a2, int a3, int b0, int b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(0));
}

__device__ __forceinline__ void mma_k16(int (&c)[4], int a0, int a1, int b0) {
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a0), "r"(a1), "r"(b0), "r"(0));
}

// MmTok is where one lane reads its activations: the B word row of token
// 8j+g and the (d, s) halves of tokens 8j+2c and 8j+2c+1, per tile j.
// Tokens past the live count read the last live one (their sums are
// never stored), so no load needs a guard.
template <int NT>
struct MmTok {
  const int* xb[NT];
  const u16* xd[NT][2];
  // B fragment words (k 4c.. and 16+4c..) of block b for tile j, and the
  // d and s of tile j's C token i (0, 1).
  __device__ __forceinline__ int b0(int j, int b, int c) const { return xb[j][b * 8 + c]; }
  __device__ __forceinline__ int b1(int j, int b, int c) const { return xb[j][b * 8 + 4 + c]; }
  __device__ __forceinline__ float d(int j, int i, int b) const { return h2f(xd[j][i][b * 2]); }
  __device__ __forceinline__ float s(int j, int i, int b) const { return h2f(xd[j][i][b * 2 + 1]); }
};

// MFrag<T> is a lane's part of the A fragment of one block of 32 of rows
// rA (g) and rB (g+8) with their scales; step adds the block's terms for
// token tile j to acc (rows × the tile's tokens 2c, 2c+1).
template <int T>
struct MFrag;

#define MFRAG_ARGS const MatVecArgs &a, u64 rA, u64 rB, int nb, int b, int c
#define MSTEP_ARGS const MmTok<NT> &x, int j, int b, int c, float(&acc)[4]

template <>
struct MFrag<T_Q4_1> {
  u32 qa, qb;
  float dA, mA, dB, mB;
  __device__ __forceinline__ MFrag(MFRAG_ARGS) {
    qa = ((const u32*)a.wq)[(rA * nb + b) * 4 + c], qb = ((const u32*)a.wq)[(rB * nb + b) * 4 + c];
    const u16* sa = (const u16*)a.ws + (rA * nb + b) * 2;
    const u16* sb = (const u16*)a.ws + (rB * nb + b) * 2;
    dA = h2f(sa[0]), mA = h2f(sa[1]), dB = h2f(sb[0]), mB = h2f(sb[1]);
  }
  template <int NT>
  __device__ __forceinline__ void step(MSTEP_ARGS) const {
    int s[4];
    mma_k32(s, qa & 0x0F0F0F0F, qb & 0x0F0F0F0F, (qa >> 4) & 0x0F0F0F0F, (qb >> 4) & 0x0F0F0F0F, x.b0(j, b, c), x.b1(j, b, c));
    float d0 = x.d(j, 0, b), d1 = x.d(j, 1, b), s0 = x.s(j, 0, b), s1 = x.s(j, 1, b);
    acc[0] = __fadd_rn(acc[0], term_q4_1(dA, mA, d0, s0, s[0]));
    acc[1] = __fadd_rn(acc[1], term_q4_1(dA, mA, d1, s1, s[1]));
    acc[2] = __fadd_rn(acc[2], term_q4_1(dB, mB, d0, s0, s[2]));
    acc[3] = __fadd_rn(acc[3], term_q4_1(dB, mB, d1, s1, s[3]));
  }
};

// Q8_0, Q5_0: four int8 words and one scale a row.
template <int T>
struct MFragD {
  int a0, a1, a2, a3;
  float dA, dB;
  template <int NT>
  __device__ __forceinline__ void step(MSTEP_ARGS) const {
    int s[4];
    mma_k32(s, a0, a1, a2, a3, x.b0(j, b, c), x.b1(j, b, c));
    float d0 = x.d(j, 0, b), d1 = x.d(j, 1, b);
    acc[0] = __fadd_rn(acc[0], term_d(dA, d0, s[0]));
    acc[1] = __fadd_rn(acc[1], term_d(dA, d1, s[1]));
    acc[2] = __fadd_rn(acc[2], term_d(dB, d0, s[2]));
    acc[3] = __fadd_rn(acc[3], term_d(dB, d1, s[3]));
  }
};

template <>
struct MFrag<T_Q8_0> : MFragD<T_Q8_0> {
  __device__ __forceinline__ MFrag(MFRAG_ARGS) {
    const u32* wa = (const u32*)a.wq + (rA * nb + b) * 8;
    const u32* wb = (const u32*)a.wq + (rB * nb + b) * 8;
    a0 = (int)wa[c], a1 = (int)wb[c], a2 = (int)wa[4 + c], a3 = (int)wb[4 + c];
    dA = h2f(((const u16*)a.ws)[rA * nb + b]), dB = h2f(((const u16*)a.ws)[rB * nb + b]);
  }
};

template <>
struct MFrag<T_Q5_0> : MFragD<T_Q5_0> {
  __device__ __forceinline__ MFrag(MFRAG_ARGS) {
    const u32* wa = (const u32*)a.wq + (rA * nb + b) * 5;
    const u32* wb = (const u32*)a.wq + (rB * nb + b) * 5;
    u32 qa = wa[c], ha = wa[4], qb = wb[c], hb = wb[4];
    a0 = q5_lo(qa, ha, c), a1 = q5_lo(qb, hb, c), a2 = q5_hi(qa, ha, c), a3 = q5_hi(qb, hb, c);
    dA = h2f(((const u16*)a.ws)[rA * nb + b]), dB = h2f(((const u16*)a.ws)[rB * nb + b]);
  }
};

// Q4_K: block b is sub-block kb = b%8 of super-block b/8: the low (kb
// even) or high nibbles of the super-block's quant words 8(kb/2)+c and
// 8(kb/2)+4+c. The min term needs each token's exact Σx of the block: one
// more mma, with all-ones weights.
template <>
struct MFrag<T_Q4_K> {
  int a0, a1, a2, a3;
  float scA, mnA, scB, mnB;
  __device__ __forceinline__ MFrag(MFRAG_ARGS) {
    int nsb = nb / 8, sb = b >> 3, kb = b & 7, sh = 4 * (kb & 1);
    const u32* wa = (const u32*)a.wq + (rA * nsb + sb) * 32 + 8 * (kb >> 1);
    const u32* wb = (const u32*)a.wq + (rB * nsb + sb) * 32 + 8 * (kb >> 1);
    a0 = (wa[c] >> sh) & 0x0F0F0F0F, a1 = (wb[c] >> sh) & 0x0F0F0F0F;
    a2 = (wa[4 + c] >> sh) & 0x0F0F0F0F, a3 = (wb[4 + c] >> sh) & 0x0F0F0F0F;
    const u8* pa = (const u8*)a.ws + (rA * nsb + sb) * 20;
    const u8* pb = (const u8*)a.ws + (rB * nsb + sb) * 20;
    u32 da = *(const u32*)pa, db = *(const u32*)pb;
    scA = __fmul_rn(h2f((u16)(da & 0xffff)), (float)pa[4 + kb]), mnA = __fmul_rn(h2f((u16)(da >> 16)), (float)pa[12 + kb]);
    scB = __fmul_rn(h2f((u16)(db & 0xffff)), (float)pb[4 + kb]), mnB = __fmul_rn(h2f((u16)(db >> 16)), (float)pb[12 + kb]);
  }
  template <int NT>
  __device__ __forceinline__ void step(MSTEP_ARGS) const {
    int s[4], sum[4];
    int x0 = x.b0(j, b, c), x1 = x.b1(j, b, c);
    mma_k32(s, a0, a1, a2, a3, x0, x1);
    mma_k32(sum, 0x01010101, 0x01010101, 0x01010101, 0x01010101, x0, x1);
    float d0 = x.d(j, 0, b), d1 = x.d(j, 1, b);
    acc[0] = __fadd_rn(acc[0], term_q4_k(d0, scA, mnA, s[0], sum[0]));
    acc[1] = __fadd_rn(acc[1], term_q4_k(d1, scA, mnA, s[1], sum[1]));
    acc[2] = __fadd_rn(acc[2], term_q4_k(d0, scB, mnB, s[2], sum[0]));
    acc[3] = __fadd_rn(acc[3], term_q4_k(d1, scB, mnB, s[3], sum[1]));
  }
};

// Q6_K: block b is kb = b%8 of super-block b/8 (half h = kb/4, quarter q =
// kb%4): quarter q's nibbles of ql words 16h + 8(q&1) + c (+4) with bit
// pair q of qh words 32 + 8h + c (+4). Its two 16-element sub-blocks have
// their own int8 scales, so each is an m16n8k16 product, combined exactly
// in int32.
template <>
struct MFrag<T_Q6_K> {
  int a0, a1, a2, a3, scA0, scA1, scB0, scB1;
  float dA, dB;
  __device__ __forceinline__ MFrag(MFRAG_ARGS) {
    int nsb = nb / 8, sb = b >> 3, kb = b & 7, h = kb >> 2, q = kb & 3;
    const u32* qa = (const u32*)a.wq + (rA * nsb + sb) * 48;
    const u32* qb = (const u32*)a.wq + (rB * nsb + sb) * 48;
    int lw = 16 * h + 8 * (q & 1) + c, hw = 32 + 8 * h + c;
    a0 = q6_word(qa[lw], qa[hw], q), a1 = q6_word(qb[lw], qb[hw], q);
    a2 = q6_word(qa[lw + 4], qa[hw + 4], q), a3 = q6_word(qb[lw + 4], qb[hw + 4], q);
    const u8* pa = (const u8*)a.ws + (rA * nsb + sb) * 20;
    const u8* pb = (const u8*)a.ws + (rB * nsb + sb) * 20;
    dA = h2f(*(const u16*)pa), dB = h2f(*(const u16*)pb);
    scA0 = ((const i8*)pa)[4 + 2 * kb], scA1 = ((const i8*)pa)[5 + 2 * kb];
    scB0 = ((const i8*)pb)[4 + 2 * kb], scB1 = ((const i8*)pb)[5 + 2 * kb];
  }
  template <int NT>
  __device__ __forceinline__ void step(MSTEP_ARGS) const {
    int lo[4], hi[4];
    mma_k16(lo, a0, a1, x.b0(j, b, c));
    mma_k16(hi, a2, a3, x.b1(j, b, c));
    float d0 = x.d(j, 0, b), d1 = x.d(j, 1, b);
    acc[0] = __fadd_rn(acc[0], term_d(dA, d0, lo[0] * scA0 + hi[0] * scA1));
    acc[1] = __fadd_rn(acc[1], term_d(dA, d1, lo[1] * scA0 + hi[1] * scA1));
    acc[2] = __fadd_rn(acc[2], term_d(dB, d0, lo[2] * scB0 + hi[2] * scB1));
    acc[3] = __fadd_rn(acc[3], term_d(dB, d1, lo[3] * scB0 + hi[3] * scB1));
  }
};

// mma_<type>: matvec_<type>'s product, arguments and epilogue for any
// number of tokens, on the tensor cores, to the same bits (the block terms
// and their order are the mat-vec's). Grid (rows/16, tokens/(8·NT)),
// MM_KSPLIT warps a block. AMAX as in matvec_t (mma_<type>_argmax,
// mma1_<type>_argmax).
template <int T, int NT, bool AMAX>
__device__ __forceinline__ void mma_t(const MatVecArgs& a) {
  const Pass* p = (const Pass*)a.pass;  // before dep_wait (PASS_EARLY)
  int n = a.head ? p->nrows : p->n;
  int t0 = blockIdx.y * 8 * NT;
  int r0 = blockIdx.x * 16;
  DEP_ENTER();
  if (t0 >= n || r0 >= a.rows) return;  // the whole block
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
  u64 seen = 0;  // AMAX: lane l of warp 0, token t0 + l's key (max_key)
  if (AMAX && warp == 0 && lane < 8 * NT && t0 + lane < n) seen = seen_key((const u64*)a.amax + t0 + lane);
  u64 rA = min(r0 + g, a.rows - 1), rB = min(r0 + g + 8, a.rows - 1);
  int nb = a.cols / 32;
  MmTok<NT> x;
#pragma unroll
  for (int j = 0; j < NT; j++) {
    int tb = min(t0 + 8 * j + g, n - 1);
    x.xb[j] = (const int*)((const i8*)a.xq + (u64)tb * a.cols);
#pragma unroll
    for (int i = 0; i < 2; i++) {
      int tc = min(t0 + 8 * j + 2 * c + i, n - 1);
      x.xd[j][i] = (const u16*)a.xds + (u64)tc * nb * 2;
    }
  }
  float acc[NT][4];
#pragma unroll
  for (int j = 0; j < NT; j++)
#pragma unroll
    for (int i = 0; i < 4; i++) acc[j][i] = 0.0f;
  // A warp's blocks are a chain of loads and adds; unrolled, the loads of
  // the next blocks are in flight while it adds. An 8-token tile of a
  // type with one word a row (Q4_1, Q8_0, Q5_0) keeps few registers a
  // block, so four of those (ncu on an H200: the 64-token pass's down
  // product stalled 79% of its time on loads, at two); the K-quants' four
  // took 168 registers, against 96 at two.
#pragma unroll((NT == 1 && T != T_Q4_K && T != T_Q6_K) ? 4 : 2)
  for (int b = warp; b < nb; b += MM_KSPLIT) {
    MFrag<T> f(a, rA, rB, nb, b, c);
#pragma unroll
    for (int j = 0; j < NT; j++) f.template step<NT>(x, j, b, c, acc[j]);
  }
  // ((s_0 + s_1) + s_2) + s_3, in warp 0.
  __shared__ float part[MM_KSPLIT - 1][NT * 4][32];
  if (warp > 0) {
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
      for (int i = 0; i < 4; i++) part[warp - 1][j * 4 + i][lane] = acc[j][i];
  }
  __syncthreads();
  if (warp > 0) return;
#pragma unroll
  for (int j = 0; j < NT; j++) {
    u64 key[2] = {0, 0};  // AMAX: the best (logit, row) of tokens 2c, 2c+1 in rows g, g+8
#pragma unroll
    for (int i = 0; i < 4; i++) {
      float v = acc[j][i];
#pragma unroll
      for (int w = 0; w < MM_KSPLIT - 1; w++) v = __fadd_rn(v, part[w][j * 4 + i][lane]);
      int row = r0 + g + (i >> 1) * 8, t = t0 + 8 * j + 2 * c + (i & 1);
      if (row < a.rows && t < n) {
        u64 o = (u64)t * a.ld + row;
        if (a.bias) v = __fadd_rn(v, ((const float*)a.bias)[row]);
        if (a.res) v = __fadd_rn(v, ((const float*)a.res)[o]);
        if (AMAX) {
          key[i & 1] = key_max(key[i & 1], argmax_key(v, row));
        } else {
          ((float*)a.out)[o] = v;
        }
      }
    }
    if (AMAX) {
      // The block's 16 rows of each token are in the lanes of one c.
#pragma unroll
      for (int h = 0; h < 2; h++) {
        int tt = 8 * j + 2 * c + h;
        u64 k = key[h], sk = shfl_u64(seen, tt);
#pragma unroll
        for (int o = 4; o < 32; o <<= 1) k = key_max(k, shfl_xor_u64(k, o));
        if (g == 0) max_key((u64*)a.amax + t0 + tt, k, sk);  // a token past n: k = 0, no atomic
      }
    }
  }
}

#define MMA(name, T)                                                                                 \
  extern "C" __global__ void mma_##name(const MatVecArgs a) { mma_t<T, 4, false>(a); }               \
  extern "C" __global__ void mma1_##name(const MatVecArgs a) { mma_t<T, 1, false>(a); }              \
  extern "C" __global__ void mma_##name##_argmax(const MatVecArgs a) { mma_t<T, 4, true>(a); }       \
  extern "C" __global__ void mma1_##name##_argmax(const MatVecArgs a) { mma_t<T, 1, true>(a); }
MMA(q4_1, T_Q4_1)
MMA(q8_0, T_Q8_0)
MMA(q5_0, T_Q5_0)
MMA(q4_k, T_Q4_K)
MMA(q6_k, T_Q6_K)

#undef MFRAG_ARGS
#undef MSTEP_ARGS

// ------------------------------------------------------ RoPE and KV store

struct RopeArgs {
  u64 qkv;   // float [n][(heads + 2·kvheads)·hd]: q (rotated in place), k (rotated, stored), v (stored)
  u64 rot;   // float [n][hd/2][2]: cos and sin of each pair's angle, from the host
  u64 pass;  // Pass
  u64 toks;  // Tok [n]
  int heads, kvheads, hd, neox, layer, pad;
};

// rotate turns the pair (x0, x1) by the angle whose cosine and sine are c
// and s, rounded the same way wherever it happens (rope_store, or the
// attention kernel of a one-token pass).
__device__ __forceinline__ void rotate(float x0, float x1, float c, float s, float& y0, float& y1) {
  y0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  y1 = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

// rope_store: a thread per pair of a token's q|k|v row, grid (n,
// pairs/blockDim): a pair of q or k is a rotation pair, which it turns
// (and stores, for k); a pair of v is two neighbours, which it stores.
// Every thread loads once, so the kernel waits on memory once: a block a
// token looping over its pairs took 5.6 µs for 64 tokens on an H200 (ncu,
// cold caches), a wait for each round of the loop; a thread a pair, 3.7.
// cos and sin are the CPU's (float64 angles rounded to float32), computed
// by the host with the pass: a float64 sincos here would take its slow path.
extern "C" __global__ void rope_store(const RopeArgs a) {
  const Pass* p = (const Pass*)a.pass;  // pass buffers: before dep_wait (PASS_EARLY)
  int t = blockIdx.x;
  int half = a.hd / 2, turned = (a.heads + a.kvheads) * half;
  int j = blockIdx.y * blockDim.x + threadIdx.x;
  if (t >= p->n || j >= turned + a.kvheads * half) {
    DEP_ENTER();
    return;
  }
  Tok tk = ((const Tok*)a.toks)[t];
  DEP_ENTER();
  float* q = (float*)a.qkv + (u64)t * (a.heads + 2 * a.kvheads) * a.hd;
  float* k = q + a.heads * a.hd;
  const float* v = k + a.kvheads * a.hd;
  if (j >= turned) {
    int e = 2 * (j - turned), g = e / a.hd, d = e % a.hd;
    u64 at = (((u64)a.layer * a.kvheads + g) * tk.cap + tk.len + tk.slot) * a.hd + d;
    float2 x = *(const float2*)(v + e);
    ((u16*)tk.v)[at] = f2h(x.x);
    ((u16*)tk.v)[at + 1] = f2h(x.y);
    return;
  }
  int h = j / half, i = j % half;
  const float* rot = (const float*)a.rot + ((u64)t * half + i) * 2;
  float c = rot[0], s = rot[1];
  int ia = a.neox ? i : 2 * i, ib = a.neox ? i + half : 2 * i + 1;
  float* x = q + h * a.hd;  // k follows q, so heads ≥ a.heads are k's
  float y0, y1;
  rotate(x[ia], x[ib], c, s, y0, y1);
  if (h < a.heads) {
    x[ia] = y0;
    x[ib] = y1;
  } else {
    int g = h - a.heads;
    u64 at = (((u64)a.layer * a.kvheads + g) * tk.cap + tk.len + tk.slot) * a.hd;
    ((u16*)tk.k)[at + ia] = f2h(y0);
    ((u16*)tk.k)[at + ib] = f2h(y1);
  }
}

// ------------------------------------------------------------- attention

#define ATT_WARPS 8  // the warps of a block (kernels.AttentionWarps)
#define ATT_MAX_HD 128

struct AttnArgs {
  u64 qs;     // i8 [n][heads·hd]: the output, quantized for the output projection
  u64 ds;     // half2 [n][heads·hd/32]
  u64 q;      // float [n][(heads + 2·kvheads)·hd], q rotated
  u64 pass;   // Pass
  u64 toks;   // Tok [n]
  u64 extra;  // int: visible scratch entries outside each token's span
  u64 rot;    // with rope: float [n][hd/2][2], each pair's cos and sin
  int heads, kvheads, hd, layer;
  float scale;
  int rope;   // 1: q and k are not rotated yet, nor k and v stored (a one-token pass)
  int neox, pad;
};

// cp.async: a 16-byte copy from global to shared memory that needs no
// register and does not stall the thread; cp_async_wait makes this
// thread's copies visible to it (a __syncwarp then to its warp).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  u32 s = (u32)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

// attention_t<R, HD>: one block per (token, R query heads of one kv head),
// for head dimensions up to HD. Warp w scores keys w·32+lane,
// (w+ATT_WARPS)·32+lane, ... — a lane per key — with an online softmax per
// head, and accumulates the values with each lane holding hd/32 output
// dimensions of each head; the warps' partial results are merged at the end.
//
// A head's output is the same bits whatever R is, and whatever else is in
// the pass (TestPassesAreBatchInvariant): every step of a head's arithmetic
// is an explicitly rounded operation, in an order that depends only on its
// own keys — a q·k product is four interleaved sums (elements ≡ c mod 4)
// added ((s0 + s1) + s2) + s3; the keys split between the warps by index.
// R > 1 shares each key's and value's loads and conversions between the
// heads of a kv head (a verify pass: many tokens, blocks to spare); R = 1
// has three times the blocks for a one-token pass, which is short of them.
//
// Loads are pipelined: a warp's next key rows are in flight while it works
// on the current chunk, and the value rows go straight to shared memory
// (cp.async) while it scores the keys. The first chunk's committed keys
// (entries below len, final before the pass began) load before dep_wait,
// while the kernel before this one finishes.
template <int R, int HD>
__device__ __forceinline__ void attention_t(const AttnArgs& a) {
  constexpr int W8 = HD / 8, DPL = HD / 32;
  // The pass header and the committed cache entries may be read before
  // dep_wait (PASS_EARLY); the K/V of this pass's own tokens may not.
  const Pass* p = (const Pass*)a.pass;
  int t = blockIdx.x, h0 = blockIdx.y * R;
  if (t >= p->n) {
    DEP_ENTER();
    return;
  }
  Tok tk = ((const Tok*)a.toks)[t];
  const int hd = a.hd, dpl = hd / 32;
  int g = h0 / (a.heads / a.kvheads);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __shared__ __align__(16) float qs[R][HD];
  __shared__ float wm[ATT_WARPS][R], wl[ATT_WARPS][R];
  // Each warp's chunk of value rows; after the keys, its partial outputs.
  // Dynamic (kernels.AttentionSharedBytes): 64 KiB at HD 128.
  extern __shared__ __align__(16) u16 att_smem[];
  u16(*vs)[32][HD] = reinterpret_cast<u16(*)[32][HD]>(att_smem);
  __shared__ float ps[ATT_WARPS][R][32];  // the chunk's weights, per head
  u64 blk = ((u64)a.layer * a.kvheads + g) * tk.cap * hd;
  const u16* K = (const u16*)tk.k + blk;
  const u16* V = (const u16*)tk.v + blk;
  const int* extra = (const int*)a.extra;
  const int run = tk.len + tk.span, nv = run + (tk.xhi - tk.xlo);
  // load(j, kw): key j's row into kw, its value row on its way to vs.
  auto load = [&](int j, uint4(&kw)[W8]) {
    int e = j < run ? j : tk.len + extra[tk.xlo + j - run];
    const uint4* kr = (const uint4*)(K + (u64)e * hd);
    const uint4* vr = (const uint4*)(V + (u64)e * hd);
#pragma unroll
    for (int d = 0; d < W8; d++)
      if (d < hd / 8) kw[d] = kr[d];
#pragma unroll
    for (int d = 0; d < W8; d++)
      if (d < hd / 8) cp_async16(&vs[warp][lane][8 * d], vr + d);
    cp_async_commit();
  };
  uint4 kw[W8];
  const int j0 = warp * 32 + lane;
  if (j0 < tk.len) load(j0, kw);
  DEP_ENTER();
  const float* qrow = (const float*)a.q + (u64)t * (a.heads + 2 * a.kvheads) * hd;
  if (a.rope) {
    // rope_store's work for these heads, fused: the pass has this one
    // token, so no other block needs its K and V before this one. Each
    // block of the kv head's group stores the same K and V (identical bits).
    const float* k = qrow + (a.heads + g) * hd;
    const float* v = k + a.kvheads * hd;
    const float* rot = (const float*)a.rot + (u64)t * hd;
    u64 at = (u64)(tk.len + tk.slot) * hd;
    int half = hd / 2;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
      float c = rot[2 * i], sn = rot[2 * i + 1];
      int ia = a.neox ? i : 2 * i, ib = a.neox ? i + half : 2 * i + 1;
#pragma unroll
      for (int r = 0; r < R; r++) {
        const float* q = qrow + (h0 + r) * hd;
        rotate(q[ia], q[ib], c, sn, qs[r][ia], qs[r][ib]);
      }
      float k0, k1;
      rotate(k[ia], k[ib], c, sn, k0, k1);
      ((u16*)K)[at + ia] = f2h(k0);
      ((u16*)K)[at + ib] = f2h(k1);
    }
    for (int d = threadIdx.x; d < hd; d += blockDim.x) ((u16*)V)[at + d] = f2h(v[d]);
  } else {
    for (int i = threadIdx.x; i < R * hd; i += blockDim.x) qs[i / hd][i % hd] = qrow[h0 * hd + i];
  }
  __syncthreads();
  if (j0 >= tk.len && j0 < nv) load(j0, kw);
  float m[R], l[R], acc[R][DPL];
#pragma unroll
  for (int r = 0; r < R; r++) {
    m[r] = NEG_INF;
    l[r] = 0.0f;
#pragma unroll
    for (int d = 0; d < DPL; d++) acc[r][d] = 0.0f;
  }
  for (int base = warp * 32; base < nv; base += ATT_WARPS * 32) {
    const int j = base + lane, jn = j + ATT_WARPS * 32;
    uint4 kn[W8];
    if (jn < nv) {  // the next chunk's key row, in flight meanwhile
      int e = jn < run ? jn : tk.len + extra[tk.xlo + jn - run];
      const uint4* kr = (const uint4*)(K + (u64)e * hd);
#pragma unroll
      for (int d = 0; d < W8; d++)
        if (d < hd / 8) kn[d] = kr[d];
    }
    float s[R];
    {
      float s4[R][4];
#pragma unroll
      for (int r = 0; r < R; r++)
#pragma unroll
        for (int c = 0; c < 4; c++) s4[r][c] = 0.0f;
      if (j < nv) {
#pragma unroll
        for (int d = 0; d < W8; d++) {
          if (d < hd / 8) {
            const u32 w[4] = {kw[d].x, kw[d].y, kw[d].z, kw[d].w};
#pragma unroll
            for (int i = 0; i < 4; i++) {
              float k0 = h2f((u16)(w[i] & 0xffff)), k1 = h2f((u16)(w[i] >> 16));
              // elements 8d+2i (≡ 2i mod 4) and 8d+2i+1
              int c0 = (2 * i) & 3;
#pragma unroll
              for (int r = 0; r < R; r++) {
                s4[r][c0] = __fmaf_rn(qs[r][8 * d + 2 * i], k0, s4[r][c0]);
                s4[r][c0 + 1] = __fmaf_rn(qs[r][8 * d + 2 * i + 1], k1, s4[r][c0 + 1]);
              }
            }
          }
        }
      }
#pragma unroll
      for (int r = 0; r < R; r++) {
        float dot = __fadd_rn(__fadd_rn(__fadd_rn(s4[r][0], s4[r][1]), s4[r][2]), s4[r][3]);
        s[r] = j < nv ? __fmul_rn(dot, a.scale) : NEG_INF;
      }
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
      float mn = fmaxf(m[r], warp_max(s[r]));
      float corr = expf(__fsub_rn(m[r], mn));  // m = -inf at first: corr = 0, l and acc are 0
      float pr = j < nv ? expf(__fsub_rn(s[r], mn)) : 0.0f;
      l[r] = __fmaf_rn(l[r], corr, warp_sum(pr));
#pragma unroll
      for (int d = 0; d < DPL; d++) acc[r][d] = __fmul_rn(acc[r][d], corr);
      m[r] = mn;
      ps[warp][r][lane] = pr;
    }
    // The chunk's value rows, copied in while the keys were scored: every
    // lane adds its dimensions of the rows in key order.
    cp_async_wait();
    __syncwarp();
    const int cnt = min(32, nv - base);
#pragma unroll 4
    for (int u = 0; u < cnt; u++) {
#pragma unroll
      for (int d = 0; d < DPL; d++) {
        if (d < dpl) {
          float v = h2f(vs[warp][u][d * 32 + lane]);
#pragma unroll
          for (int r = 0; r < R; r++) acc[r][d] = __fmaf_rn(ps[warp][r][u], v, acc[r][d]);
        }
      }
    }
    __syncwarp();
    if (jn < nv) {
      int e = jn < run ? jn : tk.len + extra[tk.xlo + jn - run];
      const uint4* vr = (const uint4*)(V + (u64)e * hd);
#pragma unroll
      for (int d = 0; d < W8; d++)
        if (d < hd / 8) cp_async16(&vs[warp][lane][8 * d], vr + d);
      cp_async_commit();
#pragma unroll
      for (int d = 0; d < W8; d++) kw[d] = kn[d];
    }
  }
  // The warp's partial outputs go where its value rows were.
  float* wacc = (float*)&vs[warp][0][0];  // [R][HD]: R·HD floats fit in 32·HD halves
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < R; r++) {
      wm[warp][r] = m[r];
      wl[warp][r] = l[r];
    }
  }
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int d = 0; d < DPL; d++)
      if (d < dpl) wacc[r * HD + d * 32 + lane] = acc[r][d];
  __syncthreads();
  // Merge the warps in order and quantize each head's output (hd/32
  // blocks, a warp each) for the output projection: the attention output
  // is only ever its input.
  int qdim = a.heads * hd;
  for (int i = warp; i < R * dpl; i += ATT_WARPS) {
    int r = i / dpl, b = i % dpl, d = b * 32 + lane;
    float M = NEG_INF;
    for (int w = 0; w < ATT_WARPS; w++) M = fmaxf(M, wm[w][r]);
    float L = 0.0f, o = 0.0f;
    for (int w = 0; w < ATT_WARPS; w++) {
      if (wm[w][r] != NEG_INF) {
        float f = expf(__fsub_rn(wm[w][r], M));
        L = __fmaf_rn(wl[w][r], f, L);
        o = __fmaf_rn(((const float*)&vs[w][0][0])[r * HD + d], f, o);
      }
    }
    int h = h0 + r;
    quant_block(__fdiv_rn(o, L), (i8*)a.qs + (u64)t * qdim + h * hd + b * 32,
                (u16*)a.ds + ((u64)t * (qdim / 32) + h * dpl + b) * 2, lane);
  }
}

// attention_d<HD>_r<R>: the instances; the host picks HD (64 or 128) from
// the head dimension and R from the pass (kernels.Attention).
#define ATTENTION(HD, R) \
  extern "C" __global__ void attention_d##HD##_r##R(const AttnArgs a) { attention_t<R, HD>(a); }
ATTENTION(64, 1)
ATTENTION(64, 2)
ATTENTION(64, 3)
ATTENTION(64, 4)
ATTENTION(64, 5)
ATTENTION(64, 6)
ATTENTION(64, 7)
ATTENTION(64, 8)
ATTENTION(128, 1)
ATTENTION(128, 2)
ATTENTION(128, 3)
ATTENTION(128, 4)
ATTENTION(128, 5)
ATTENTION(128, 6)
ATTENTION(128, 7)
ATTENTION(128, 8)

// ------------------------------------------------------------- KV commit

#define COMMIT_MOVES 64

struct CommitArgs {
  u64 k, v;  // the sequence's cache
  int cap, hd, blocks, len, moves, pad;
  int src[COMMIT_MOVES], dst[COMMIT_MOVES];  // entry offsets from len
};

// kv_commit moves scratch entries len+src[j] to len+dst[j], in order. A
// thread owns one (layer·kv head, dimension) column and does every move of
// it, so an entry another move still has to read is never overwritten
// early (dst[j] < src[j], both increasing).
extern "C" __global__ void kv_commit(const CommitArgs a) {
  DEP_ENTER();
  u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (u64)a.blocks * a.hd) return;
  u64 blk = i / a.hd, d = i % a.hd;
  u16* K = (u16*)a.k + blk * a.cap * a.hd + d;
  u16* V = (u16*)a.v + blk * a.cap * a.hd + d;
  for (int j = 0; j < a.moves; j++) {
    u64 s = (u64)(a.len + a.src[j]) * a.hd, t = (u64)(a.len + a.dst[j]) * a.hd;
    K[t] = K[s];
    V[t] = V[s];
  }
}
