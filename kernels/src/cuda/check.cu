// Mercury check and benchmark helper kernels (compiled at run time by NVRTC): random inputs,
// poisoning, non-finite counts, and plain f32 references for GEMM entries and attention rows.
// These are deliberately simple (one thread block per reference row, one warp per GEMM
// entry) so that they share no tiling logic with the patches they check.

typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

#define NEG_INF (__int_as_float(0xff800000))

static __device__ __forceinline__ u32 mix64(u64 x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (u32)x;
}

static __device__ __forceinline__ float bf16_to_f32(u16 x) {
    return __uint_as_float(((u32)x) << 16);
}

static __device__ __forceinline__ u16 f32_to_bf16(float f) {
    u32 x = __float_as_uint(f);
    if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x007fffffu) != 0u) return (u16)0x7fc0;
    x += 0x7fffu + ((x >> 16) & 1u);
    return (u16)(x >> 16);
}

// dst[i] = bf16(lo + (hi - lo) * u_i), u_i uniform in [0, 1) from a hash of (seed, i).
extern "C" __global__ void mercury_check_fill_random_bf16(u16* dst, i64 n, u64 seed, float lo,
                                                          float hi) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        const u32 h = mix64((u64)i * 0x9E3779B97F4A7C15ULL + seed);
        const float u = (float)(h >> 8) * (1.0f / 16777216.0f);
        dst[i] = f32_to_bf16(lo + (hi - lo) * u);
    }
}

extern "C" __global__ void mercury_check_fill_random_f32(float* dst, i64 n, u64 seed, float lo,
                                                         float hi) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        const u32 h = mix64((u64)i * 0x9E3779B97F4A7C15ULL + seed);
        const float u = (float)(h >> 8) * (1.0f / 16777216.0f);
        dst[i] = lo + (hi - lo) * u;
    }
}

// Counts elements that are NaN or +-inf (count must be zeroed first).
extern "C" __global__ void mercury_check_count_nonfinite_f32(const float* x, i64 n,
                                                             unsigned long long* count) {
    unsigned long long c = 0;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        const u32 b = __float_as_uint(x[i]);
        if ((b & 0x7f800000u) == 0x7f800000u) c += 1;
    }
    if (c) atomicAdd(count, c);
}

extern "C" __global__ void mercury_check_count_nonfinite_bf16(const u16* x, i64 n,
                                                              unsigned long long* count) {
    unsigned long long c = 0;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        if ((x[i] & 0x7f80u) == 0x7f80u) c += 1;
    }
    if (c) atomicAdd(count, c);
}

// out[e] = sum_p A[i, p] * B[p, j] in f32 for entries idx[e] = i * n + j; one warp per entry.
// A is [m, k] (leading dim lda), B is [k, n] (leading dim ldb), both bf16 row-major.
extern "C" __global__ void mercury_check_ref_gemm_entries(const u16* a, const u16* b,
                                                          const i64* idx, int count, i64 n,
                                                          i64 k, i64 lda, i64 ldb, float* out) {
    const int w = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    const int lane = threadIdx.x & 31;
    if (w >= count) return;
    const i64 i = idx[w] / n;
    const i64 j = idx[w] % n;
    float s = 0.f;
    for (i64 p = lane; p < k; p += 32) s += bf16_to_f32(a[i * lda + p]) * bf16_to_f32(b[p * ldb + j]);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) out[w] = s;
}

// Gathers GEMM output entries (f32 or bf16 output) into a dense f32 vector.
extern "C" __global__ void mercury_check_gather_entries_f32(const float* c, const i64* idx,
                                                            int count, i64 n, i64 ldc,
                                                            float* out) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= count) return;
    out[e] = c[(idx[e] / n) * ldc + idx[e] % n];
}
extern "C" __global__ void mercury_check_gather_entries_bf16(const u16* c, const i64* idx,
                                                             int count, i64 n, i64 ldc,
                                                             float* out) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= count) return;
    out[e] = bf16_to_f32(c[(idx[e] / n) * ldc + idx[e] % n]);
}

// Must match `SdpaRefArgsDev` in check.rs. Tensors are [b, h, s, d] with element strides of the
// batch, head and row dimensions (the last dimension contiguous); io 0 = bf16, 1 = f16; the
// checked output o is io-typed (o_f32 = 0) or f32 (o_f32 = 1); stats are f32 [b, h, s].
struct SdpaRefArgs {
    u64 q, k, v, o, stats;
    i64 q_s[3], k_s[3], v_s[3], o_s[3], st_s[2];
    i64 delta;  // causal: key c visible to query r when r + delta >= c
    int b, hq, hk, sq, sk, dqk, dv;
    int causal, io, o_f32;
    float scale;
};

static __device__ __forceinline__ float f16_to_f32(u16 x) {
    float f;
    asm("{ .reg .f16 h; mov.b16 h, %1; cvt.f32.f16 %0, h; }" : "=f"(f) : "h"(x));
    return f;
}

static __device__ __forceinline__ float load_io(const u16* p, i64 i, int io) {
    return io == 0 ? bf16_to_f32(p[i]) : f16_to_f32(p[i]);
}

// Plain f32 attention for selected rows (rows[i] = (bi * hq + h) * sq + r) of any head dims
// up to 256 and either io type: one block of 256 threads per row, two passes over the visible
// keys (max/sum, then the output, 256 keys at a time). o_ref is [nrows, dv], lse_ref [nrows]; the patch's own
// output for the same rows is gathered into o_got / lse_got.
extern "C" __global__ void __launch_bounds__(256)
    mercury_check_ref_sdpa_rows(const SdpaRefArgs p, const i64* rows, int nrows, float* o_ref,
                                float* lse_ref, float* o_got, float* lse_got) {
    __shared__ float qs[256];
    __shared__ float ps[256];
    __shared__ float red_m[8];
    __shared__ float red_l[8];
    const int ridx = blockIdx.x;
    if (ridx >= nrows) return;
    const int tid = threadIdx.x;
    const i64 flat = rows[ridx];
    const int r = (int)(flat % p.sq);
    const int h = (int)((flat / p.sq) % p.hq);
    const int bi = (int)(flat / ((i64)p.sq * p.hq));
    const int kh = h / (p.hq / p.hk);
    const u16* qrow = (const u16*)p.q + bi * p.q_s[0] + h * p.q_s[1] + (i64)r * p.q_s[2];
    const u16* kg = (const u16*)p.k + bi * p.k_s[0] + kh * p.k_s[1];
    const u16* vg = (const u16*)p.v + bi * p.v_s[0] + kh * p.v_s[1];
    const i64 orow = bi * p.o_s[0] + h * p.o_s[1] + (i64)r * p.o_s[2];
    if (tid < p.dv) {
        o_got[(i64)ridx * p.dv + tid] =
            p.o_f32 ? ((const float*)p.o)[orow + tid] : load_io((const u16*)p.o, orow + tid, p.io);
    }
    if (tid == 0) lse_got[ridx] = ((const float*)p.stats)[bi * p.st_s[0] + h * p.st_s[1] + r];
    if (tid < p.dqk) qs[tid] = load_io(qrow, tid, p.io);
    __syncthreads();

    i64 nvis = p.sk;
    if (p.causal) {
        const i64 lim = (i64)r + p.delta;  // last visible key
        nvis = lim + 1 < 0 ? 0 : (lim + 1 < p.sk ? lim + 1 : p.sk);
    }
    float m = NEG_INF, l = 0.f;
    for (i64 c = tid; c < nvis; c += 256) {
        const u16* krow = kg + c * p.k_s[2];
        float s = 0.f;
        for (int d = 0; d < p.dqk; ++d) s += qs[d] * load_io(krow, d, p.io);
        s *= p.scale;
        if (s > m) {
            l = l * expf(m - s) + 1.f;
            m = s;
        } else {
            l += expf(s - m);
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        const float l2 = __shfl_xor_sync(0xffffffffu, l, o);
        const float mm = fmaxf(m, m2);
        l = (mm == NEG_INF) ? 0.f : l * expf(m - mm) + l2 * expf(m2 - mm);
        m = mm;
    }
    if ((tid & 31) == 0) {
        red_m[tid >> 5] = m;
        red_l[tid >> 5] = l;
    }
    __syncthreads();
    float M = NEG_INF;
    for (int w = 0; w < 8; ++w) M = fmaxf(M, red_m[w]);
    float L = 0.f;
    if (M != NEG_INF) {
        for (int w = 0; w < 8; ++w) L += red_l[w] * expf(red_m[w] - M);
    }
    float acc = 0.f;
    for (i64 base = 0; base < nvis; base += 256) {
        const i64 c = base + tid;
        float pc = 0.f;
        if (c < nvis) {
            const u16* krow = kg + c * p.k_s[2];
            float s = 0.f;
            for (int d = 0; d < p.dqk; ++d) s += qs[d] * load_io(krow, d, p.io);
            pc = expf(s * p.scale - M) / L;
        }
        __syncthreads();
        ps[tid] = pc;
        __syncthreads();
        const i64 cnt = nvis - base < 256 ? nvis - base : 256;
        if (tid < p.dv) {
            for (int i = 0; i < cnt; ++i) acc += ps[i] * load_io(vg, (base + i) * p.v_s[2] + tid, p.io);
        }
    }
    if (tid < p.dv) o_ref[(i64)ridx * p.dv + tid] = (nvis > 0) ? acc : 0.f;
    if (tid == 0) lse_ref[ridx] = (nvis > 0) ? M + logf(L) : NEG_INF;
}

// dst[i] = f16(lo + (hi - lo) * u_i), the same hash as mercury_check_fill_random_bf16.
extern "C" __global__ void mercury_check_fill_random_f16(u16* dst, i64 n, u64 seed, float lo,
                                                         float hi) {
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        const u32 h = mix64((u64)i * 0x9E3779B97F4A7C15ULL + seed);
        const float u = (float)(h >> 8) * (1.0f / 16777216.0f);
        const float x = lo + (hi - lo) * u;
        u16 out;
        asm("{ .reg .f16 h; cvt.rn.f16.f32 h, %1; mov.b16 %0, h; }" : "=h"(out) : "f"(x));
        dst[i] = out;
    }
}
