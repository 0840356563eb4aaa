// Mercury check and benchmark helper kernels (compiled at run time by NVRTC): random inputs,
// poisoning, non-finite counts, and plain f32 references for GEMM entries and attention rows.
// These are deliberately simple (one thread block per reference row, one warp per GEMM
// entry) so that they share no tiling logic with the patches they check.

typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

// Must match `AttnArgsDev` in attention.rs (and struct AttnArgs in attention.cu).
struct AttnArgs {
    u64 q, k, v, o, lse;
    i64 q_sb, q_sh, q_sr;
    i64 k_sb, k_sh, k_sr;
    i64 v_sb, v_sh, v_sr;
    i64 o_sb, o_sh, o_sr;
    i64 lse_sb, lse_sh;
    i64 q_offset, k_offset;
    int b, hq, hk, sq, sk;
    int causal;
    float scale_log2;
    float scale;
};

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

// Plain f32 attention for selected query rows: rows[i] = (bi * hq + h) * sq + r. One block of
// 128 threads (= head dim) per row; two passes over the visible keys (max/sum, then output).
// o_ref is [nrows, 128], lse_ref [nrows]. Also gathers the patch's own output for the same
// rows into o_got / lse_got (p.o / p.lse with their strides) so the host compares dense data.
extern "C" __global__ void __launch_bounds__(128)
    mercury_check_ref_attn_rows(const AttnArgs p, const i64* rows, int nrows, float* o_ref,
                                float* lse_ref, float* o_got, float* lse_got) {
    __shared__ float qs[128];
    __shared__ float ps[128];
    __shared__ float red_m[4];
    __shared__ float red_l[4];
    const int ridx = blockIdx.x;
    if (ridx >= nrows) return;
    const int tid = threadIdx.x;
    const i64 flat = rows[ridx];
    const int r = (int)(flat % p.sq);
    const int h = (int)((flat / p.sq) % p.hq);
    const int bi = (int)(flat / ((i64)p.sq * p.hq));
    const int kh = h / (p.hq / p.hk);
    const u16* qrow = (const u16*)p.q + bi * p.q_sb + h * p.q_sh + (i64)r * p.q_sr;
    const u16* kg = (const u16*)p.k + bi * p.k_sb + kh * p.k_sh;
    const u16* vg = (const u16*)p.v + bi * p.v_sb + kh * p.v_sh;

    // Gather what the patch produced for this row.
    {
        const float* og = (const float*)p.o + bi * p.o_sb + h * p.o_sh + (i64)r * p.o_sr;
        o_got[(i64)ridx * 128 + tid] = og[tid];
        if (tid == 0) lse_got[ridx] = ((const float*)p.lse)[bi * p.lse_sb + h * p.lse_sh + r];
    }

    qs[tid] = bf16_to_f32(qrow[tid]);
    __syncthreads();

    i64 nvis = p.sk;
    if (p.causal) {
        const i64 lim = p.q_offset + r - p.k_offset;  // last visible key
        nvis = lim + 1 < 0 ? 0 : (lim + 1 < p.sk ? lim + 1 : p.sk);
    }

    // Pass 1: per-thread online max / sum over keys tid, tid + 128, ...
    float m = NEG_INF, l = 0.f;
    for (i64 c = tid; c < nvis; c += 128) {
        const u16* krow = kg + c * p.k_sr;
        float s = 0.f;
        for (int d = 0; d < 128; ++d) s += qs[d] * bf16_to_f32(krow[d]);
        s *= p.scale;
        if (s > m) {
            l = l * expf(m - s) + 1.f;
            m = s;
        } else {
            l += expf(s - m);
        }
    }
    // Block reduce (m, l): warp shuffles, then 4 warps through shared memory.
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        const float l2 = __shfl_xor_sync(0xffffffffu, l, o);
        const float mm = fmaxf(m, m2);
        if (mm == NEG_INF) {
            l = 0.f;
        } else {
            l = l * expf(m - mm) + l2 * expf(m2 - mm);
        }
        m = mm;
    }
    if ((tid & 31) == 0) {
        red_m[tid >> 5] = m;
        red_l[tid >> 5] = l;
    }
    __syncthreads();
    float M = NEG_INF;
    for (int w = 0; w < 4; ++w) M = fmaxf(M, red_m[w]);
    float L = 0.f;
    if (M != NEG_INF) {
        for (int w = 0; w < 4; ++w) L += red_l[w] * expf(red_m[w] - M);
    }

    // Pass 2: o = sum_c softmax_c * v[c], 128 keys at a time.
    float acc = 0.f;
    for (i64 base = 0; base < nvis; base += 128) {
        const i64 c = base + tid;
        float pc = 0.f;
        if (c < nvis) {
            const u16* krow = kg + c * p.k_sr;
            float s = 0.f;
            for (int d = 0; d < 128; ++d) s += qs[d] * bf16_to_f32(krow[d]);
            pc = expf(s * p.scale - M) / L;
        }
        __syncthreads();
        ps[tid] = pc;
        __syncthreads();
        const i64 cnt = nvis - base < 128 ? nvis - base : 128;
        for (int i = 0; i < cnt; ++i) acc += ps[i] * bf16_to_f32(vg[(base + i) * p.v_sr + tid]);
    }
    o_ref[(i64)ridx * 128 + tid] = (nvis > 0) ? acc : 0.f;
    if (tid == 0) lse_ref[ridx] = (nvis > 0) ? M + logf(L) : NEG_INF;
}
