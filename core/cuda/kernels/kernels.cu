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
//     quants in another, so quant loads are aligned 4-byte words.
//   - Activations feeding a quantized matmul are quantized once per pass to
//     int8 blocks of 32 with a half2 (d, d·Σq) per block — the CPU's Q8_1
//     (and, ignoring the sum, its Q8_0), rounded the same way, so the
//     integer dot products equal the CPU's exactly.

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
#define T_Q8_0 8

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

extern "C" __global__ void embed(const EmbedArgs a) {
  const Pass* p = (const Pass*)a.pass;
  int i = blockIdx.x;
  if (i >= p->n) return;
  int row = ((const Tok*)a.toks)[i].id;
  float* out = (float*)a.out + (u64)i * a.dim;
  int nb = a.dim / 32;
  for (int e = threadIdx.x; e < a.dim; e += blockDim.x) {
    int b = e >> 5, j = e & 31;
    float v;
    if (a.type == T_Q8_0) {
      const i8* q = (const i8*)a.qs + ((u64)row * nb + b) * 32;
      v = h2f(((const u16*)a.scales)[(u64)row * nb + b]) * (float)q[j];
    } else if (a.type == T_Q4_1) {
      const u8* q = (const u8*)a.qs + ((u64)row * nb + b) * 16;
      const u16* dm = (const u16*)a.scales + ((u64)row * nb + b) * 2;
      int n4 = j < 16 ? (q[j] & 15) : (q[j - 16] >> 4);
      v = h2f(dm[0]) * (float)n4 + h2f(dm[1]);
    } else {
      v = ((const float*)a.qs)[(u64)row * a.dim + e];
    }
    out[e] = v;
  }
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

struct NormArgs {
  u64 x;     // float [n][dim], the residual stream
  u64 w;     // float [dim]
  u64 qs;    // i8 [rows][dim]
  u64 ds;    // half2 [rows][dim/32]
  u64 pass;  // Pass
  u64 rows;  // int [nrows]: gather these tokens (the head), or 0: every token
  int dim;
  float eps;
};

// rmsnorm_quant: y = x / sqrt(mean(x²) + eps) · w, quantized. One block
// per output row with a thread per element (blockDim = dim up to 1024,
// each thread taking every blockDim'th element beyond), so each warp
// quantizes its own 32-element blocks in parallel with the others.
#define NORM_MAX_PER_THREAD 8
extern "C" __global__ void rmsnorm_quant(const NormArgs a) {
  const Pass* p = (const Pass*)a.pass;
  int r = blockIdx.x;
  int n = a.rows ? p->nrows : p->n;
  if (r >= n) return;
  int src = a.rows ? ((const int*)a.rows)[r] : r;
  const float* x = (const float*)a.x + (u64)src * a.dim;
  __shared__ float part[32];
  __shared__ float scale;
  float xs[NORM_MAX_PER_THREAD];
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < NORM_MAX_PER_THREAD; k++) {
    int e = threadIdx.x + k * blockDim.x;
    xs[k] = e < a.dim ? x[e] : 0.0f;
    ss += xs[k] * xs[k];
  }
  ss = warp_sum(ss);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (lane == 0) part[warp] = ss;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.0f;
    for (int w = 0; w < warps; w++) t += part[w];
    scale = (float)(1.0 / sqrt((double)(t / (float)a.dim + a.eps)));
  }
  __syncthreads();
  const float* w = (const float*)a.w;
  int nb = a.dim / 32;
#pragma unroll
  for (int k = 0; k < NORM_MAX_PER_THREAD; k++) {
    int e = threadIdx.x + k * blockDim.x;
    if (e - lane < a.dim) {  // the whole warp's block is inside the row
      int b = e >> 5;
      float y = xs[k] * scale * w[e];
      quant_block(y, (i8*)a.qs + (u64)r * a.dim + b * 32, (u16*)a.ds + ((u64)r * nb + b) * 2, lane);
    }
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
  const Pass* p = (const Pass*)a.pass;
  int r = blockIdx.y;
  if (r >= p->n) return;
  int lane = threadIdx.x & 31;
  int b = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  int nb = a.dim / 32;
  if (b >= nb) return;
  int e = b * 32 + lane;
  float y;
  if (a.swiglu) {
    // g / (1 + e^-g) · up, the CPU's SiLU (its expf is within 2 ulp of e^x).
    const float* row = (const float*)a.x + (u64)r * 2 * a.dim;
    float g = row[e];
    y = g / (1.0f + expf(-g)) * row[a.dim + e];
  } else {
    y = ((const float*)a.x)[(u64)r * a.dim + e];
  }
  quant_block(y, (i8*)a.qs + (u64)r * a.dim + b * 32, (u16*)a.ds + ((u64)r * nb + b) * 2, lane);
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
  int rows, cols, type, head;  // head: n is the pass's nrows (the output head)
  int ld, pad;                 // out and res row stride (≥ rows: a slice of a wider row)
};

// matvec: out[t][r] = W[r] · x[t] (+ bias[r]) (+ res[t][r]). A warp per
// row, MV_WARPS rows per block; blockIdx.y picks MV_TOKENS tokens. Each
// lane walks a quarter (Q4_1) or an eighth (Q8_0) of a block at a time:
// one 4-byte weight word, one dp4a per token (two for Q4_1's nibbles).
extern "C" __global__ void matvec(const MatVecArgs a) {
  const Pass* p = (const Pass*)a.pass;
  int n = a.head ? p->nrows : p->n;
  int t0 = blockIdx.y * MV_TOKENS;
  if (t0 >= n) return;
  int nt = min(MV_TOKENS, n - t0);
  int lane = threadIdx.x & 31;
  int row = blockIdx.x * MV_WARPS + (threadIdx.x >> 5);
  if (row >= a.rows) return;
  int nb = a.cols / 32;
  float acc[MV_TOKENS];
#pragma unroll
  for (int t = 0; t < MV_TOKENS; t++) acc[t] = 0.0f;
  const i8* xq = (const i8*)a.xq + (u64)t0 * a.cols;
  const u16* xds = (const u16*)a.xds + (u64)t0 * nb * 2;
  if (a.type == T_Q4_1) {
    const u32* wq = (const u32*)a.wq + (u64)row * nb * 4;
    const u16* ws = (const u16*)a.ws + (u64)row * nb * 2;
#pragma unroll 4
    for (int i = lane; i < nb * 4; i += 32) {
      int b = i >> 2, part = i & 3;
      u32 w = wq[i];
      int lo = (int)(w & 0x0F0F0F0Fu), hi = (int)((w >> 4) & 0x0F0F0F0Fu);
      float dw = h2f(ws[b * 2]), mw = h2f(ws[b * 2 + 1]);
#pragma unroll
      for (int t = 0; t < MV_TOKENS; t++) {
        if (t < nt) {
          const int* x = (const int*)(xq + (u64)t * a.cols + b * 32);
          int s = dp4a(lo, x[part], dp4a(hi, x[part + 4], 0));
          float da = h2f(xds[((u64)t * nb + b) * 2]);
          float v = dw * da * (float)s;
          if (part == 0) v += mw * h2f(xds[((u64)t * nb + b) * 2 + 1]);
          acc[t] += v;
        }
      }
    }
  } else if (a.type == T_Q8_0) {
    const u32* wq = (const u32*)a.wq + (u64)row * nb * 8;
    const u16* ws = (const u16*)a.ws + (u64)row * nb;
#pragma unroll 4
    for (int i = lane; i < nb * 8; i += 32) {
      int b = i >> 3, part = i & 7;
      int w = (int)wq[i];
      float dw = h2f(ws[b]);
#pragma unroll
      for (int t = 0; t < MV_TOKENS; t++) {
        if (t < nt) {
          const int* x = (const int*)(xq + (u64)t * a.cols + b * 32);
          int s = dp4a(w, x[part], 0);
          acc[t] += dw * h2f(xds[((u64)t * nb + b) * 2]) * (float)s;
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < MV_TOKENS; t++) {
    if (t >= nt) break;  // nt is the same for the whole warp
    float v = warp_sum(acc[t]);
    if (lane == 0) {
      u64 o = (u64)(t0 + t) * a.ld + row;
      if (a.bias) v += ((const float*)a.bias)[row];
      if (a.res) v += ((const float*)a.res)[o];
      ((float*)a.out)[o] = v;
    }
  }
}

// ------------------------------------------------------ RoPE and KV store

struct RopeArgs {
  u64 qkv;   // float [n][(heads + 2·kvheads)·hd]: q (rotated in place), k (rotated, stored), v (stored)
  u64 rot;   // float [n][hd/2][2]: cos and sin of each pair's angle, from the host
  u64 pass;  // Pass
  u64 toks;  // Tok [n]
  int heads, kvheads, hd, neox, layer, pad;
};

// rope_store: one block per token, a thread per (head, rotation pair) of
// q and k, each rotating its pair and, for k, storing it; then the values.
// Every thread's loads are independent, so the block waits on memory once
// (a thread looping over heads waited once per head: ~10 µs a token).
// cos and sin are the CPU's (float64 angles rounded to float32), computed
// by the host with the pass: a float64 sincos here would take its slow path.
extern "C" __global__ void rope_store(const RopeArgs a) {
  const Pass* p = (const Pass*)a.pass;
  int t = blockIdx.x;
  if (t >= p->n) return;
  Tok tk = ((const Tok*)a.toks)[t];
  int half = a.hd / 2;
  float* q = (float*)a.qkv + (u64)t * (a.heads + 2 * a.kvheads) * a.hd;
  float* k = q + a.heads * a.hd;
  const float* v = k + a.kvheads * a.hd;
  const float* rot = (const float*)a.rot + (u64)t * half * 2;
  for (int j = threadIdx.x; j < (a.heads + a.kvheads) * half; j += blockDim.x) {
    int h = j / half, i = j % half;
    float c = rot[2 * i], s = rot[2 * i + 1];
    int ia = a.neox ? i : 2 * i, ib = a.neox ? i + half : 2 * i + 1;
    float* x = q + h * a.hd;  // k follows q, so heads ≥ a.heads are k's
    float x0 = x[ia], x1 = x[ib];
    float y0 = x0 * c - x1 * s, y1 = x0 * s + x1 * c;
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
  for (int e = threadIdx.x; e < a.kvheads * a.hd; e += blockDim.x) {
    int g = e / a.hd, d = e % a.hd;
    u64 at = (((u64)a.layer * a.kvheads + g) * tk.cap + tk.len + tk.slot) * a.hd + d;
    ((u16*)tk.v)[at] = f2h(v[e]);
  }
}

// ------------------------------------------------------------- attention

#define ATT_WARPS 4
#define ATT_MAX_HD 128

struct AttnArgs {
  u64 qs;     // i8 [n][heads·hd]: the output, quantized for the output projection
  u64 ds;     // half2 [n][heads·hd/32]
  u64 q;      // float [n][(heads + 2·kvheads)·hd], q rotated
  u64 pass;   // Pass
  u64 toks;   // Tok [n]
  u64 extra;  // int: visible scratch entries outside each token's span
  int heads, kvheads, hd, layer;
  float scale;
  int pad;
};

// attention: one block per (token, query head). Warp w scores keys w·32+lane,
// (w+ATT_WARPS)·32+lane, ... — a lane per key — with an online softmax, and
// accumulates the values with each lane holding hd/32 output dimensions;
// the warps' partial results are merged at the end.
extern "C" __global__ void attention(const AttnArgs a) {
  const Pass* p = (const Pass*)a.pass;
  int t = blockIdx.x, h = blockIdx.y;
  if (t >= p->n) return;
  Tok tk = ((const Tok*)a.toks)[t];
  int hd = a.hd, dpl = hd / 32;  // dimensions per lane
  int g = h / (a.heads / a.kvheads);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __shared__ float qs[ATT_MAX_HD];
  __shared__ float wm[ATT_WARPS], wl[ATT_WARPS];
  __shared__ float wacc[ATT_WARPS][ATT_MAX_HD];
  const float* q = (const float*)a.q + (u64)t * (a.heads + 2 * a.kvheads) * hd + h * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) qs[d] = q[d];
  __syncthreads();
  u64 blk = ((u64)a.layer * a.kvheads + g) * tk.cap * hd;
  const u16* K = (const u16*)tk.k + blk;
  const u16* V = (const u16*)tk.v + blk;
  const int* extra = (const int*)a.extra;
  int run = tk.len + tk.span;
  int nv = run + (tk.xhi - tk.xlo);
  float m = NEG_INF, l = 0.0f;
  float acc[ATT_MAX_HD / 32];
#pragma unroll
  for (int d = 0; d < ATT_MAX_HD / 32; d++) acc[d] = 0.0f;
  for (int base = warp * 32; base < nv; base += ATT_WARPS * 32) {
    int j = base + lane;
    int e = -1;
    float s = NEG_INF;
    if (j < nv) {
      e = j < run ? j : tk.len + extra[tk.xlo + j - run];
      const u32* kr = (const u32*)(K + (u64)e * hd);
      float dot = 0.0f;
#pragma unroll 16
      for (int d = 0; d < hd / 2; d++) {
        u32 two = kr[d];
        dot += qs[2 * d] * h2f((u16)(two & 0xffff)) + qs[2 * d + 1] * h2f((u16)(two >> 16));
      }
      s = dot * a.scale;
    }
    float mn = fmaxf(m, warp_max(s));
    float corr = expf(m - mn);  // m = -inf at first: corr = 0, l and acc are 0
    float pr = j < nv ? expf(s - mn) : 0.0f;
    l = l * corr + warp_sum(pr);
#pragma unroll
    for (int d = 0; d < ATT_MAX_HD / 32; d++) acc[d] *= corr;
    m = mn;
    int cnt = min(32, nv - base);
#pragma unroll 8
    for (int u = 0; u < cnt; u++) {
      float pu = __shfl_sync(0xffffffffu, pr, u);
      int eu = __shfl_sync(0xffffffffu, e, u);
      const u16* vr = V + (u64)eu * hd;
#pragma unroll
      for (int d = 0; d < ATT_MAX_HD / 32; d++)
        if (d < dpl) acc[d] += pu * h2f(vr[d * 32 + lane]);
    }
  }
  if (lane == 0) {
    wm[warp] = m;
    wl[warp] = l;
  }
#pragma unroll
  for (int d = 0; d < ATT_MAX_HD / 32; d++)
    if (d < dpl) wacc[warp][d * 32 + lane] = acc[d];
  __syncthreads();
  float M = NEG_INF;
  for (int w = 0; w < ATT_WARPS; w++) M = fmaxf(M, wm[w]);
  float L = 0.0f;
  for (int w = 0; w < ATT_WARPS; w++)
    if (wm[w] != NEG_INF) L += wl[w] * expf(wm[w] - M);
  // Quantize the head's output (hd/32 blocks, a warp each) for the output
  // projection: the attention output is only ever its input.
  int qdim = a.heads * hd;
  for (int b = warp; b < dpl; b += ATT_WARPS) {
    int d = b * 32 + lane;
    float o = 0.0f;
    for (int w = 0; w < ATT_WARPS; w++)
      if (wm[w] != NEG_INF) o += wacc[w][d] * expf(wm[w] - M);
    quant_block(o / L, (i8*)a.qs + (u64)t * qdim + h * hd + b * 32,
                (u16*)a.ds + ((u64)t * (qdim / 32) + h * dpl + b) * 2, lane);
  }
}

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

// --------------------------------------------------------------- argmax

struct ArgmaxArgs {
  u64 logits;  // float [nrows][vocab]
  u64 out;     // int [nrows]
  u64 pass;    // Pass
  int vocab, pad;
};

// argmax: one block per logits row; the lowest index wins ties, as on the
// CPU's greedy sampler.
extern "C" __global__ void argmax(const ArgmaxArgs a) {
  const Pass* p = (const Pass*)a.pass;
  int r = blockIdx.x;
  if (r >= p->nrows) return;
  const float* x = (const float*)a.logits + (u64)r * a.vocab;
  float best = NEG_INF;
  int bi = 0x7fffffff;
  for (int i = threadIdx.x; i < a.vocab; i += blockDim.x) {
    float v = x[i];
    if (v > best || (v == best && i < bi)) best = v, bi = i;
  }
  __shared__ float sv[32];
  __shared__ int si[32];
  for (int o = 16; o > 0; o >>= 1) {
    float ov = __shfl_xor_sync(0xffffffffu, best, o);
    int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (ov > best || (ov == best && oi < bi)) best = ov, bi = oi;
  }
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sv[warp] = best, si[warp] = bi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (int)(blockDim.x >> 5); w++)
      if (sv[w] > best || (sv[w] == best && si[w] < bi)) best = sv[w], bi = si[w];
    ((int*)a.out)[r] = bi;
  }
}
