// Mercury attention forward patch (FlashAttention-2 style), compiled at run time by NVRTC.
//
// q [b, hq, sq, 128] bf16, k/v [b, hk, sk, 128] bf16 (hq = hk * group), outputs
// o [b, hq, sq, 128] f32 (normalised) and lse [b, hq, sq] f32 (natural log of the softmax
// denominator of the scaled logits). Causal: key k_offset + c is visible to query
// q_offset + r iff k_offset + c <= q_offset + r. Row bounds (`bounded`: sliding windows,
// packed documents, any mask whose visible keys are one run per row): key k_offset + c is
// visible to query row r only if lo[r] <= k_offset + c < hi[r] (lo, hi: INT32 per query row of
// the launch, global key positions); each CTA streams only the key tiles its rows' runs reach.
// Rows that see no key get o = 0, lse = -inf.
//
// Accumulating entries (`..._acc`): o and lse are an accumulator that the tile's result is
// merged into in the epilogue, with the log-sum-exp merge of kernels::cpu::lse_merge:
//   m = max(la, lt), s = e^(la - m) + e^(lt - m), lse' = m + ln s,
//   o' = o_acc * e^(la - m) / s + o_tile * e^(lt - m) / s.
// A row the tile does not reach (no visible key) leaves the accumulator untouched; an
// accumulator row with lse = -inf contributes nothing (its o is not even read, so it may hold
// anything) and receives the tile's result. One pass, no temporary.
//
// Tiling: one CTA owns 128 query rows of one (batch, head) (two variants: 8 warps x 16 rows,
// 4 warps x 32 rows); key/value tiles of 64 rows stream through shared memory with cp.async
// double buffering. S = Q K^T and
// O += P V use mma.sync m16n8k16 (bf16 in, f32 accumulate) fed by ldmatrix from XOR-swizzled
// shared memory (conflict-free). Online softmax in base 2 (scale * log2 e folded in).
//
// No headers are included: everything is inline PTX or NVRTC built-ins.

typedef unsigned short u16;
typedef unsigned int u32;

// struct AttnArgs: attn_args.cuh, put before this source.

#define BM 128
#define BN 64
#define HD 128
#define ROW_BYTES 256
#define TILE_Q_BYTES (BM * ROW_BYTES)
#define TILE_KV_BYTES (BN * ROW_BYTES)
#define NEG_INF (__int_as_float(0xff800000))
#define LN2 0.6931471805599453f
#define LOG2E 1.4426950408889634f

// Global key position x as a key index of the launch clamped to [0, sk].
static __device__ __forceinline__ int key_index(i64 x, i64 k_offset, int sk) {
    const i64 c = x - k_offset;
    return c < 0 ? 0 : (c > (i64)sk ? sk : (int)c);
}

static __device__ __forceinline__ u32 smem_u32(const void* p) {
    u32 r;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }\n"
                 : "=r"(r)
                 : "l"(p));
    return r;
}

static __device__ __forceinline__ void cp_async16(u32 dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}
static __device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}
static __device__ __forceinline__ void cp_async_wait_all() {
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

static __device__ __forceinline__ void ldsm_x4(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}
static __device__ __forceinline__ void ldsm_x4_t(u32 addr, u32& r0, u32& r1, u32& r2, u32& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(addr));
}

// c += a * b for one m16n8k16 tile (a: 4 regs of bf16x2, b: 2 regs, c: 4 f32).
static __device__ __forceinline__ void mma16816(float* c, const u32* a, u32 b0, u32 b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Packs two floats into bf16x2 (round to nearest even): lo in bits 0..15, hi in 16..31.
static __device__ __forceinline__ u32 pack_bf16(float lo, float hi) {
    u32 r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

static __device__ __forceinline__ float ex2(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
    return r;
}
static __device__ __forceinline__ float lg2(float x) {
    float r;
    asm("lg2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
    return r;
}

// Byte offset of 16-byte chunk `ch` (0..15) of row `row` in a swizzled tile of 256-byte rows.
static __device__ __forceinline__ u32 swz(int row, int ch) {
    return (u32)(row * ROW_BYTES + ((ch ^ (row & 7)) << 4));
}

// Issues cp.async for ROWS rows of a [s, 128] bf16 matrix starting at row r0 (NT threads);
// rows at or past `s` are zero-filled.
template <int ROWS, int NT>
static __device__ __forceinline__ void load_tile(u32 sdst, const u16* g, i64 sr, int r0, int s,
                                                 int tid) {
#pragma unroll
    for (int i = 0; i < ROWS * 16 / NT; ++i) {
        const int idx = tid + i * NT;
        const int row = idx >> 4;
        const int ch = idx & 15;
        const int grow = r0 + row;
        const bool ok = grow < s;
        const u16* src = ok ? g + (i64)grow * sr + ch * 8 : g;
        cp_async16(sdst + swz(row, ch), src, ok ? 16 : 0);
    }
}

// One CTA: BM = 128 query rows of one (batch, head). MT = 16-row m-tiles per warp:
// MT = 1: 8 warps, Q fragments kept in registers;
// MT = 2: 4 warps, Q fragments re-read from shared memory, every K/V fragment feeds two
//         m-tiles (half the shared-memory traffic per FLOP).
// ACC: merge into the (o, lse) accumulator instead of overwriting it (see the header).
template <int MT, bool ACC>
static __device__ __forceinline__ void attn_fwd(const AttnArgs& p) {
    constexpr int NWARPS = 8 / MT;
    constexpr int NT = 32 * NWARPS;
    constexpr int WROWS = 16 * MT;
    extern __shared__ __align__(128) unsigned char smem[];
    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int g = lane >> 2;
    const int t = lane & 3;

    // Heaviest (last) query blocks first: helps the tail under the causal mask.
    const int m_block = (int)gridDim.x - 1 - (int)blockIdx.x;
    const int h = blockIdx.y;
    const int bi = blockIdx.z;
    const int group = p.hq / p.hk;
    const int kh = h / group;
    const int q0 = m_block * BM;
    if (q0 >= p.sq) return;

    const u16* qg = (const u16*)p.q + (i64)bi * p.q_sb + (i64)h * p.q_sh;
    const u16* kg = (const u16*)p.k + (i64)bi * p.k_sb + (i64)kh * p.k_sh;
    const u16* vg = (const u16*)p.v + (i64)bi * p.v_sb + (i64)kh * p.v_sh;

    const int rows_here = min(BM, p.sq - q0);
    int n_blocks = (p.sk + BN - 1) / BN;
    // Keys c <= first_row_limit are visible to every row of this tile (under the causal mask).
    const i64 first_row_limit = p.q_offset + (i64)q0 - p.k_offset;
    if (p.causal) {
        const i64 kmax = first_row_limit + (i64)(rows_here - 1);
        if (kmax < 0) {
            n_blocks = 0;
        } else {
            const i64 nb = kmax / BN + 1;
            if (nb < (i64)n_blocks) n_blocks = (int)nb;
        }
    }

    // Row bounds: the union of this tile's rows' key runs (tile-relative, clamped to
    // [0, sk]) bounds the key tiles streamed; each row's own run masks inside them.
    int j_begin = 0;
    __shared__ int s_kmin, s_kmax;
    if (p.bounded) {
        const int* lo = (const int*)p.lo;
        const int* hi = (const int*)p.hi;
        if (tid == 0) {
            s_kmin = p.sk;
            s_kmax = 0;
        }
        __syncthreads();
        for (int r = tid; r < rows_here; r += NT) {
            const int a = key_index(lo[q0 + r], p.k_offset, p.sk);
            const int e = key_index(hi[q0 + r], p.k_offset, p.sk);
            if (a < e) {
                atomicMin(&s_kmin, a);
                atomicMax(&s_kmax, e);
            }
        }
        __syncthreads();
        if (s_kmin >= s_kmax) {
            n_blocks = 0;
        } else {
            j_begin = s_kmin / BN;
            n_blocks = min(n_blocks, (s_kmax + BN - 1) / BN);
        }
    }

    const u32 sbase = smem_u32(smem);
    const u32 sQ = sbase;
    const u32 sK0 = sbase + TILE_Q_BYTES;
    const u32 sV0 = sK0 + 2 * TILE_KV_BYTES;

    load_tile<BM, NT>(sQ, qg, p.q_sr, q0, p.sq, tid);
    if (j_begin < n_blocks) {
        const u32 nb = (u32)(j_begin & 1) * TILE_KV_BYTES;
        load_tile<BN, NT>(sK0 + nb, kg, p.k_sr, j_begin * BN, p.sk, tid);
        load_tile<BN, NT>(sV0 + nb, vg, p.v_sr, j_begin * BN, p.sk, tid);
    }
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();

    // MT == 1: Q fragments of this warp's 16 rows, all of d (8 k-steps of 16), in registers.
    u32 qf[MT == 1 ? 8 : 1][4];
    if (MT == 1) {
#pragma unroll
        for (int kk = 0; kk < (MT == 1 ? 8 : 1); ++kk) {
            const int row = warp * WROWS + (lane & 15);
            const int ch = kk * 2 + (lane >> 4);
            ldsm_x4(sQ + swz(row, ch), qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3]);
        }
    }

    float acc[MT][16][4];
    float row_m[MT][2];
    float row_l[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            acc[mt][i][0] = 0.f;
            acc[mt][i][1] = 0.f;
            acc[mt][i][2] = 0.f;
            acc[mt][i][3] = 0.f;
        }
        row_m[mt][0] = NEG_INF;
        row_m[mt][1] = NEG_INF;
        row_l[mt][0] = 0.f;
        row_l[mt][1] = 0.f;
    }
    const float sl2 = p.scale_log2;

    // This thread's rows' key runs (rows g and g + 8 of each m-tile), tile-relative.
    int rlo[MT][2], rhi[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int row = warp * WROWS + mt * 16 + g + r * 8;
            rlo[mt][r] = 0;
            rhi[mt][r] = p.sk;
            if (p.bounded && row < rows_here) {
                const int* lo = (const int*)p.lo;
                const int* hi = (const int*)p.hi;
                rlo[mt][r] = key_index(lo[q0 + row], p.k_offset, p.sk);
                rhi[mt][r] = key_index(hi[q0 + row], p.k_offset, p.sk);
            }
        }
    }

    for (int j = j_begin; j < n_blocks; ++j) {
        if (j + 1 < n_blocks) {
            const u32 nb = (u32)((j + 1) & 1) * TILE_KV_BYTES;
            load_tile<BN, NT>(sK0 + nb, kg, p.k_sr, (j + 1) * BN, p.sk, tid);
            load_tile<BN, NT>(sV0 + nb, vg, p.v_sr, (j + 1) * BN, p.sk, tid);
        }
        cp_async_commit();
        const u32 cur = (u32)(j & 1) * TILE_KV_BYTES;
        const u32 kb = sK0 + cur;
        const u32 vb = sV0 + cur;

        // S = Q K^T: per m-tile 16 rows x 64 keys (8 n-tiles of 8 keys).
        float s[MT][8][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                s[mt][i][0] = 0.f;
                s[mt][i][1] = 0.f;
                s[mt][i][2] = 0.f;
                s[mt][i][3] = 0.f;
            }
        }
#pragma unroll
        for (int kk = 0; kk < 8; ++kk) {
            u32 a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                if (MT == 1) {
                    a[mt][0] = qf[MT == 1 ? kk : 0][0];
                    a[mt][1] = qf[MT == 1 ? kk : 0][1];
                    a[mt][2] = qf[MT == 1 ? kk : 0][2];
                    a[mt][3] = qf[MT == 1 ? kk : 0][3];
                } else {
                    const int row = warp * WROWS + mt * 16 + (lane & 15);
                    const int ch = kk * 2 + (lane >> 4);
                    ldsm_x4(sQ + swz(row, ch), a[mt][0], a[mt][1], a[mt][2], a[mt][3]);
                }
            }
#pragma unroll
            for (int np = 0; np < 4; ++np) {
                const int key = np * 16 + (lane & 7) + ((lane >> 4) << 3);
                const int ch = kk * 2 + ((lane >> 3) & 1);
                u32 b0, b1, b2, b3;
                ldsm_x4(kb + swz(key, ch), b0, b1, b2, b3);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma16816(s[mt][2 * np], a[mt], b0, b1);
                    mma16816(s[mt][2 * np + 1], a[mt], b2, b3);
                }
            }
        }

        // Scale to base-2 logits, then mask keys past sk and (causal) keys in the future.
        const bool need_mask = ((j + 1) * BN > p.sk) || p.bounded ||
                               (p.causal && (i64)(j * BN + BN - 1) > first_row_limit);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                s[mt][i][0] *= sl2;
                s[mt][i][1] *= sl2;
                s[mt][i][2] *= sl2;
                s[mt][i][3] *= sl2;
            }
            if (need_mask) {
#pragma unroll
                for (int i = 0; i < 8; ++i) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int col = j * BN + i * 8 + 2 * t + (e & 1);
                        const int row = warp * WROWS + mt * 16 + g + ((e >> 1) << 3);
                        const bool masked =
                            col >= p.sk || (p.causal && (i64)col > first_row_limit + (i64)row) ||
                            (p.bounded && (col < rlo[mt][e >> 1] || col >= rhi[mt][e >> 1]));
                        if (masked) s[mt][i][e] = NEG_INF;
                    }
                }
            }

            // Online softmax for rows g (r = 0) and g + 8 (r = 1) of this m-tile.
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                float mx = NEG_INF;
#pragma unroll
                for (int i = 0; i < 8; ++i)
                    mx = fmaxf(mx, fmaxf(s[mt][i][2 * r], s[mt][i][2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                const float m_new = fmaxf(row_m[mt][r], mx);
                const float m_use = (m_new == NEG_INF) ? 0.f : m_new;
                const float alpha = ex2(row_m[mt][r] - m_use);
                row_m[mt][r] = m_new;
                float rs = 0.f;
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    const float p0 = ex2(s[mt][i][2 * r] - m_use);
                    const float p1 = ex2(s[mt][i][2 * r + 1] - m_use);
                    s[mt][i][2 * r] = p0;
                    s[mt][i][2 * r + 1] = p1;
                    rs += p0 + p1;
                }
                row_l[mt][r] = row_l[mt][r] * alpha + rs;
#pragma unroll
                for (int i = 0; i < 16; ++i) {
                    acc[mt][i][2 * r] *= alpha;
                    acc[mt][i][2 * r + 1] *= alpha;
                }
            }
        }

        // O += P V: P (16 x 64 per m-tile) from registers as 4 k-steps of 16 keys; V through
        // ldmatrix.trans, each fragment shared by the MT m-tiles.
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
            u32 a[MT][4];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                a[mt][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                a[mt][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                a[mt][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                a[mt][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
            }
#pragma unroll
            for (int dp = 0; dp < 8; ++dp) {
                const int key = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
                const int ch = dp * 2 + (lane >> 4);
                u32 b0, b1, b2, b3;
                ldsm_x4_t(vb + swz(key, ch), b0, b1, b2, b3);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma16816(acc[mt][2 * dp], a[mt], b0, b1);
                    mma16816(acc[mt][2 * dp + 1], a[mt], b2, b3);
                }
            }
        }

        cp_async_wait_all();
        __syncthreads();
    }

    // Epilogue: full row sums across the quad, normalise, store o (f32) and lse (or merge
    // them into the accumulator).
    float* og = (float*)p.o + (i64)bi * p.o_sb + (i64)h * p.o_sh;
    float* lg = (float*)p.lse + (i64)bi * p.lse_sb + (i64)h * p.lse_sh;
    // Accumulator lse of this thread's rows, read by all four lanes of the quad before lane 0
    // overwrites it (the __syncwarp orders the reads before any write of this warp's rows;
    // no other warp touches them).
    float la_row[MT][2];
    if (ACC) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const int row = q0 + warp * WROWS + mt * 16 + g + r * 8;
                la_row[mt][r] = (row < p.sq) ? lg[row] : NEG_INF;
            }
        }
        __syncwarp();
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float l = row_l[mt][r];
            l += __shfl_xor_sync(0xffffffffu, l, 1);
            l += __shfl_xor_sync(0xffffffffu, l, 2);
            const float inv = (l > 0.f) ? 1.f / l : 0.f;
            const int row = q0 + warp * WROWS + mt * 16 + g + r * 8;
            if (row < p.sq) {
                float* orow = og + (i64)row * p.o_sr;
                if (!ACC) {
#pragma unroll
                    for (int i = 0; i < 16; ++i) {
                        float2 val;
                        val.x = acc[mt][i][2 * r] * inv;
                        val.y = acc[mt][i][2 * r + 1] * inv;
                        *reinterpret_cast<float2*>(orow + i * 8 + 2 * t) = val;
                    }
                    if (t == 0) {
                        lg[row] = (l > 0.f) ? (row_m[mt][r] + lg2(l)) * LN2 : NEG_INF;
                    }
                } else if (l > 0.f) {
                    // The tile reaches this row: lt is its lse (natural log, as stored by the
                    // non-accumulating kernel).
                    const float lt = (row_m[mt][r] + lg2(l)) * LN2;
                    const float la = la_row[mt][r];
                    if (la == NEG_INF) {
                        // Empty accumulator: take the tile's row; o_acc is not read.
#pragma unroll
                        for (int i = 0; i < 16; ++i) {
                            float2 val;
                            val.x = acc[mt][i][2 * r] * inv;
                            val.y = acc[mt][i][2 * r + 1] * inv;
                            *reinterpret_cast<float2*>(orow + i * 8 + 2 * t) = val;
                        }
                        if (t == 0) lg[row] = lt;
                    } else {
                        const float m = fmaxf(la, lt);
                        const float wa = ex2((la - m) * LOG2E);
                        const float wt = ex2((lt - m) * LOG2E);
                        const float ssum = wa + wt;  // in [1, 2]
                        const float is = 1.f / ssum;
                        const float sa = wa * is;
                        const float sp = wt * is * inv;
                        // All loads first (independent, in flight together), then the stores.
                        float2 old[16];
#pragma unroll
                        for (int i = 0; i < 16; ++i)
                            old[i] = *reinterpret_cast<const float2*>(orow + i * 8 + 2 * t);
#pragma unroll
                        for (int i = 0; i < 16; ++i) {
                            float2 val;
                            val.x = old[i].x * sa + acc[mt][i][2 * r] * sp;
                            val.y = old[i].y * sa + acc[mt][i][2 * r + 1] * sp;
                            *reinterpret_cast<float2*>(orow + i * 8 + 2 * t) = val;
                        }
                        if (t == 0) lg[row] = m + lg2(ssum) * LN2;
                    }
                }
            }
        }
    }
}

// 8 warps, 16 query rows each, Q in registers.
extern "C" __global__ void __launch_bounds__(256, 1)
    mercury_attn_fwd_bf16_d128(const AttnArgs p) {
    attn_fwd<1, false>(p);
}

// 4 warps, 32 query rows each (two m-tiles share every K/V fragment).
extern "C" __global__ void __launch_bounds__(128, 2)
    mercury_attn_fwd_bf16_d128_w4(const AttnArgs p) {
    attn_fwd<2, false>(p);
}

// As mercury_attn_fwd_bf16_d128, merging into the (o, lse) accumulator.
extern "C" __global__ void __launch_bounds__(256, 1)
    mercury_attn_fwd_bf16_d128_acc(const AttnArgs p) {
    attn_fwd<1, true>(p);
}

// As mercury_attn_fwd_bf16_d128_w4, merging into the (o, lse) accumulator.
extern "C" __global__ void __launch_bounds__(128, 2)
    mercury_attn_fwd_bf16_d128_w4_acc(const AttnArgs p) {
    attn_fwd<2, true>(p);
}
