// Package testkernel is a small header-free CUDA kernel shared by the NVRTC
// compile test and the driver's GPU test: it exercises what lmstream's real
// kernels rely on without CUDA headers (the __dp4a builtin, f16 conversion
// by inline PTX, one argument struct passed by value).
package testkernel

// Source defines
//
//	struct Args {             // offset
//	    const int* a;         //  0  four int8 lanes per int
//	    const int* b;         //  8
//	    int* dot;             // 16  dot[i] = dp4a(a[i], b[i], bias)
//	    unsigned short* half; // 24  half[i] = f16 bits of x[i]*scale (round to nearest even)
//	    const float* x;       // 32
//	    int n;                // 40
//	    float scale;          // 44
//	    int bias;             // 48
//	};                        // sizeof 56
//
// and the kernel k(const Args), one thread per element.
const Source = `
struct Args {
    const int* a;
    const int* b;
    int* dot;
    unsigned short* half;
    const float* x;
    int n;
    float scale;
    int bias;
};

static __device__ __forceinline__ unsigned short f32_to_f16(float v) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h;
}

extern "C" __global__ void k(const Args args) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= args.n) return;
    args.dot[i] = __dp4a(args.a[i], args.b[i], args.bias);
    args.half[i] = f32_to_f16(args.x[i] * args.scale);
}
`

// Name is the kernel's name in the module.
const Name = "k"

// ArgsSize is sizeof(Args).
const ArgsSize = 56
