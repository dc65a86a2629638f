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
  int rows, cols;
  int head;  // n is the pass's nrows (the output head)
  int ld;    // out and res row stride (≥ rows: a slice of a wider row)
};

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
// Each lane takes one 4-byte quant word at a time (Q6_K: a ql and a qh
// word): 4 elements for Q8_0, else 8, as two groups of 4 (low and high
// nibbles) in two words of one activation block (Q4_1, Q5_0) or of two
// (Q4_K, Q6_K), dotted with dp4a against those activation words of every
// token. The K-quants' sub-blocks (32
// or 16 elements) lie inside one activation block of 32, so a K-quant dot
// is, per sub-block, d·sc·dx·Σq·x (− dmin·m·dx·Σx for Q4_K, Σx exact from
// a dp4a against ones), all integer sums exact.

#define MV_ARGS const MatVecArgs &a, int row, int lane, int nt, const i8 *xq, const u16 *xds, float *acc

// The activation word w (of 8) of block b of token t, and its d.
#define XW(t, b, w) (((const int*)(xq + (u64)(t) * a.cols + (b) * 32))[w])
#define XD(t, b) h2f(xds[((u64)(t) * nb + (b)) * 2])

__device__ __forceinline__ void mv_q4_1(MV_ARGS) {
  int nb = a.cols / 32;
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
        int s = dp4a(lo, XW(t, b, part), dp4a(hi, XW(t, b, part + 4), 0));
        float v = dw * XD(t, b) * (float)s;
        if (part == 0) v += mw * h2f(xds[((u64)t * nb + b) * 2 + 1]);
        acc[t] += v;
      }
    }
  }
}

__device__ __forceinline__ void mv_q8_0(MV_ARGS) {
  int nb = a.cols / 32;
  const u32* wq = (const u32*)a.wq + (u64)row * nb * 8;
  const u16* ws = (const u16*)a.ws + (u64)row * nb;
#pragma unroll 4
  for (int i = lane; i < nb * 8; i += 32) {
    int b = i >> 3, part = i & 7;
    int w = (int)wq[i];
    float dw = h2f(ws[b]);
#pragma unroll
    for (int t = 0; t < MV_TOKENS; t++)
      if (t < nt) acc[t] += dw * XD(t, b) * (float)dp4a(w, XW(t, b, part), 0);
  }
}

// Q5_0: the nibbles with their fifth bits, minus 16 (bytewise), are the
// CPU's q − 16, so Σ(q − 16)·x is one pair of dp4a.
__device__ __forceinline__ void mv_q5_0(MV_ARGS) {
  int nb = a.cols / 32;
  const u32* wq = (const u32*)a.wq + (u64)row * nb * 5;
  const u16* ws = (const u16*)a.ws + (u64)row * nb;
#pragma unroll 4
  for (int i = lane; i < nb * 4; i += 32) {
    int b = i >> 2, part = i & 3;
    u32 w = wq[b * 5 + part], qh = wq[b * 5 + 4] >> (4 * part);
    int lo = sub_bytes((w & 0x0F0F0F0Fu) | bits4_to_bytes(qh), 16);
    int hi = sub_bytes(((w >> 4) & 0x0F0F0F0Fu) | bits4_to_bytes(qh >> 16), 16);
    float dw = h2f(ws[b]);
#pragma unroll
    for (int t = 0; t < MV_TOKENS; t++) {
      if (t < nt) {
        int s = dp4a(lo, XW(t, b, part), dp4a(hi, XW(t, b, part + 4), 0));
        acc[t] += dw * XD(t, b) * (float)s;
      }
    }
  }
}

// Q4_K: lane L takes word L of each super-block: elements 4p..4p+3 (p =
// L%8) of sub-blocks 2g and 2g+1 (g = L/8), i.e. of activation blocks
// 8·sb + 2g and 8·sb + 2g + 1.
__device__ __forceinline__ void mv_q4_k(MV_ARGS) {
  int nb = a.cols / 32, nsb = a.cols / 256;
  const u32* wq = (const u32*)a.wq + (u64)row * nsb * 32;
  const u8* ws = (const u8*)a.ws + (u64)row * nsb * 20;
  int g = lane >> 3, p = lane & 7;
#pragma unroll 2
  for (int sb = 0; sb < nsb; sb++) {
    u32 w = wq[sb * 32 + lane];
    int lo = (int)(w & 0x0F0F0F0Fu), hi = (int)((w >> 4) & 0x0F0F0F0Fu);
    const u8* s = ws + sb * 20;
    u32 dd = *(const u32*)s;
    float d = h2f((u16)(dd & 0xffff)), dmin = h2f((u16)(dd >> 16));
    float d0 = d * (float)s[4 + 2 * g], d1 = d * (float)s[5 + 2 * g];
    float m0 = dmin * (float)s[12 + 2 * g], m1 = dmin * (float)s[13 + 2 * g];
    int b0 = sb * 8 + 2 * g;
#pragma unroll
    for (int t = 0; t < MV_TOKENS; t++) {
      if (t < nt) {
        int x0 = XW(t, b0, p), x1 = XW(t, b0 + 1, p);
        float v0 = d0 * (float)dp4a(lo, x0, 0) - m0 * (float)dp4a(0x01010101, x0, 0);
        float v1 = d1 * (float)dp4a(hi, x1, 0) - m1 * (float)dp4a(0x01010101, x1, 0);
        acc[t] += XD(t, b0) * v0 + XD(t, b0 + 1) * v1;
      }
    }
  }
}

// Q6_K: lane L takes ql word L of each super-block (half h = L/16, w =
// L%16, hs = w/8, p = w%8) and the qh word 8h + p, whose bit pairs 2hs
// and 2hs + 4 complete its low and high nibbles: elements 128h + 32hs +
// 4p..+3 (activation block 4h + hs, sub-block 8h + 2hs + p/4) and those
// 64 further (block + 2, sub-block + 4).
__device__ __forceinline__ void mv_q6_k(MV_ARGS) {
  int nb = a.cols / 32, nsb = a.cols / 256;
  const u32* wq = (const u32*)a.wq + (u64)row * nsb * 48;
  const u8* ws = (const u8*)a.ws + (u64)row * nsb * 20;
  int h = lane >> 4, hs = (lane >> 3) & 1, p = lane & 7;
  int sub = 8 * h + 2 * hs + (p >> 2);
#pragma unroll 2
  for (int sb = 0; sb < nsb; sb++) {
    u32 ql = wq[sb * 48 + lane], qh = wq[sb * 48 + 32 + 8 * h + p] >> (2 * hs);
    int lo = sub_bytes((ql & 0x0F0F0F0Fu) | ((qh << 4) & 0x30303030u), 32);
    int hi = sub_bytes(((ql >> 4) & 0x0F0F0F0Fu) | (qh & 0x30303030u), 32);
    const u8* s = ws + sb * 20;
    float d = h2f(*(const u16*)s);
    float d0 = d * (float)((const i8*)s)[4 + sub], d1 = d * (float)((const i8*)s)[8 + sub];
    int b0 = sb * 8 + 4 * h + hs;
#pragma unroll
    for (int t = 0; t < MV_TOKENS; t++) {
      if (t < nt) {
        float v0 = d0 * (float)dp4a(lo, XW(t, b0, p), 0);
        float v1 = d1 * (float)dp4a(hi, XW(t, b0 + 2, p), 0);
        acc[t] += XD(t, b0) * v0 + XD(t, b0 + 2) * v1;
      }
    }
  }
}

// matvec_<type>: out[t][r] = W[r] · x[t] (+ bias[r]) (+ res[t][r]). A warp
// per row, MV_WARPS rows per block; blockIdx.y picks MV_TOKENS tokens. Each
// lane walks the row a quant word at a time (see the layouts above). One
// entry point per weight type: a kernel holding every type's loop takes the
// registers of the greediest (93 against 80 on sm_90).
template <int T>
__device__ __forceinline__ void matvec_t(const MatVecArgs& a) {
  const Pass* p = (const Pass*)a.pass;
  int n = a.head ? p->nrows : p->n;
  int t0 = blockIdx.y * MV_TOKENS;
  if (t0 >= n) return;
  int nt = min(MV_TOKENS, n - t0);
  int lane = threadIdx.x & 31;
  int row = blockIdx.x * MV_WARPS + (threadIdx.x >> 5);
  if (row >= a.rows) return;
  float acc[MV_TOKENS];
#pragma unroll
  for (int t = 0; t < MV_TOKENS; t++) acc[t] = 0.0f;
  const i8* xq = (const i8*)a.xq + (u64)t0 * a.cols;
  const u16* xds = (const u16*)a.xds + (u64)t0 * (a.cols / 32) * 2;
  if constexpr (T == T_Q4_1) mv_q4_1(a, row, lane, nt, xq, xds, acc);
  if constexpr (T == T_Q8_0) mv_q8_0(a, row, lane, nt, xq, xds, acc);
  if constexpr (T == T_Q5_0) mv_q5_0(a, row, lane, nt, xq, xds, acc);
  if constexpr (T == T_Q4_K) mv_q4_k(a, row, lane, nt, xq, xds, acc);
  if constexpr (T == T_Q6_K) mv_q6_k(a, row, lane, nt, xq, xds, acc);
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

extern "C" __global__ void matvec_q4_1(const MatVecArgs a) { matvec_t<T_Q4_1>(a); }
extern "C" __global__ void matvec_q8_0(const MatVecArgs a) { matvec_t<T_Q8_0>(a); }
extern "C" __global__ void matvec_q5_0(const MatVecArgs a) { matvec_t<T_Q5_0>(a); }
extern "C" __global__ void matvec_q4_k(const MatVecArgs a) { matvec_t<T_Q4_K>(a); }
extern "C" __global__ void matvec_q6_k(const MatVecArgs a) { matvec_t<T_Q6_K>(a); }

#undef XW
#undef XD
#undef MV_ARGS

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
