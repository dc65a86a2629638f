//go:build !noasm

#include "textflag.h"

// func attnScoresTAVX2(q *float32, ng, qs int, kt *float32, ks, nk, hd int, scale float32, out *float32, os int)
//
// Scores with keys on lanes (see scoresT): for the ng (1, 3 or 6) query
// rows q[i·qs : i·qs+hd] and the nk keys (a multiple of 16) of the
// transposed block kt (dimension d of key j at kt[d·ks + j]),
// out[i·os + j] = scale · acc, where acc starts at 0 and takes one
// VFMADD231PS per dimension, d = 0 first, on key j's lane. A key's lane
// never meets another's, so its score is the same bits whatever keys and
// queries share the call (and an AVX-512 kernel giving 16 lanes a register
// gives the same bits too). Keys go 16 at a time (two YMMs) against all ng
// queries, whose broadcasts share each load of the keys: ng = 6 keeps 12
// accumulators, enough to hide the FMA latency; ng = 3 (6) and 1 (2)
// are for the few query rows a group leaves. No R14 or R15 (see
// attention_avx2_amd64.s).
#define LOADK(src, y) VMOVUPS src, y
#define KHALF 32
#define KSHIFT 2
TEXT ·attnScoresTAVX2(SB), NOSPLIT, $0-80
#include "scores_t_amd64.h"

#undef LOADK
#undef KHALF
#undef KSHIFT

// func attnScoresTF16AVX2(q *float32, ng, qs int, kt *uint16, ks, nk, hd int, scale float32, out *float32, os int)
//
// attnScoresTAVX2 with the keys as float16 (a KV page's keys, kv.Cache.KBlock):
// each is widened exactly as it is loaded, so the scores are the bits
// attnScoresTAVX2 gives for the keys widened first.
#define LOADK(src, y) VCVTPH2PS src, y
#define KHALF 16
#define KSHIFT 1
TEXT ·attnScoresTF16AVX2(SB), NOSPLIT, $0-80
#include "scores_t_amd64.h"
