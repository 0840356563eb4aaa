// Mercury f32 attention forward, compiled at run time by NVRTC: the patch for attention whose
// q, k and v are f32 (cuDNN's SDPA and the bf16 NVRTC kernel take 16-bit inputs only).
//
// q [b, hq, sq, dqk], k [b, hk, sk, dqk], v [b, hk, sk, dv], all f32 (hq = hk * group),
// dqk and dv each in 1..=256 (multi-head latent attention: dv != dqk); outputs o [b, hq, sq, dv]
// f32 (normalised) and lse [b, hq, sq] f32 (natural log of the softmax denominator of the
// scaled logits). Causal: key k_offset + c is visible to query q_offset + r iff
// k_offset + c <= q_offset + r. Rows that see no key get o = 0, lse = -inf. Semantics are
// those of kernels::cpu::attention_dv, computed in f32 throughout.
//
// Accumulating entry (`..._acc`): o and lse are an accumulator the row's result is merged into
// with the log-sum-exp merge of kernels::cpu::lse_merge (as in attention.cu): a row that sees
// no key leaves the accumulator untouched; an accumulator row with lse = -inf is not read and
// receives the row's result.
//
// Work split: one warp per query row, 4 rows per block. Keys are taken 32 at a time: each lane
// computes one logit (q, pre-scaled, in shared memory; its key row read whole), the warp
// agrees on the chunk's maximum and sum (online softmax, natural base), then the 32
// probabilities are broadcast in turn and each lane accumulates dv / 32 output columns
// (coalesced reads of v). Plain FMA, no tensor cores: this is the exact-precision path, not the
// fast one.


// struct AttnArgs: attn_args.cuh, put before this source.

// Must match `AttnF32ArgsDev` in attention_f32.rs.
struct AttnF32Args {
    AttnArgs a;
    int dqk, dv;
};

#define WARPS 4
#define MAXD 256
#define FULL 0xffffffffu
#define NEG_INF (__int_as_float(0xff800000))

template <bool ACC>
static __device__ __forceinline__ void attn_f32(const AttnF32Args& P) {
    __shared__ float qs[WARPS][MAXD];
    const AttnArgs& p = P.a;
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int h = blockIdx.y;
    const int bi = blockIdx.z;
    const i64 r = (i64)blockIdx.x * WARPS + warp;
    // Warps are independent (no block-wide barrier), so a warp past the last row may leave.
    if (r >= p.sq) return;
    const int kh = h / (p.hq / p.hk);
    const float* q = (const float*)p.q + bi * p.q_sb + h * p.q_sh + r * p.q_sr;
    const float* kg = (const float*)p.k + bi * p.k_sb + kh * p.k_sh;
    const float* vg = (const float*)p.v + bi * p.v_sb + kh * p.v_sh;
    float* o = (float*)p.o + bi * p.o_sb + h * p.o_sh + r * p.o_sr;
    float* lse = (float*)p.lse + bi * p.lse_sb + h * p.lse_sh + r;
    for (int d = lane; d < P.dqk; d += 32) qs[warp][d] = q[d] * p.scale;
    __syncwarp();

    i64 nvis = p.sk;
    if (p.causal) {
        const i64 lim = p.q_offset + r - p.k_offset + 1;  // keys c < lim are visible
        nvis = lim < 0 ? 0 : (lim < p.sk ? lim : p.sk);
    }
    float m = NEG_INF, l = 0.f;
    float acc[MAXD / 32];
#pragma unroll
    for (int i = 0; i < MAXD / 32; ++i) acc[i] = 0.f;
    for (i64 c0 = 0; c0 < nvis; c0 += 32) {
        const i64 c = c0 + lane;
        float s = NEG_INF;
        if (c < nvis) {
            const float* kr = kg + c * p.k_sr;
            float t = 0.f;
            for (int d = 0; d < P.dqk; ++d) t = fmaf(qs[warp][d], kr[d], t);
            s = t;
        }
        float cm = s;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) cm = fmaxf(cm, __shfl_xor_sync(FULL, cm, off));
        // Lane 0's key is visible (c0 < nvis), so cm is its logit or larger.
        const float mn = fmaxf(m, cm);
        const float alpha = expf(m - mn);  // 0 on the first chunk (m = -inf)
        const float pj = (c < nvis) ? expf(s - mn) : 0.f;
        float ps = pj;
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) ps += __shfl_xor_sync(FULL, ps, off);
        l = l * alpha + ps;
#pragma unroll
        for (int i = 0; i < MAXD / 32; ++i) acc[i] *= alpha;
        const int cnt = (nvis - c0) < 32 ? (int)(nvis - c0) : 32;  // the same in every lane
        for (int j = 0; j < cnt; ++j) {
            const float pb = __shfl_sync(FULL, pj, j);
            const float* vr = vg + (c0 + j) * p.v_sr;
#pragma unroll
            for (int i = 0; i < MAXD / 32; ++i) {
                const int d = lane + 32 * i;
                if (d < P.dv) acc[i] = fmaf(pb, vr[d], acc[i]);
            }
        }
        m = mn;
    }

    const float inv = (l > 0.f) ? 1.f / l : 0.f;
    if (!ACC) {
#pragma unroll
        for (int i = 0; i < MAXD / 32; ++i) {
            const int d = lane + 32 * i;
            if (d < P.dv) o[d] = acc[i] * inv;
        }
        if (lane == 0) *lse = (l > 0.f) ? m + logf(l) : NEG_INF;
        return;
    }
    if (!(l > 0.f)) return;  // the row sees no key: the accumulator stays as it is
    const float lt = m + logf(l);
    const float la = *lse;
    __syncwarp();  // every lane has read lse before lane 0 overwrites it
    if (la == NEG_INF) {
#pragma unroll
        for (int i = 0; i < MAXD / 32; ++i) {
            const int d = lane + 32 * i;
            if (d < P.dv) o[d] = acc[i] * inv;
        }
        if (lane == 0) *lse = lt;
        return;
    }
    const float mm = fmaxf(la, lt);
    const float wa = expf(la - mm);
    const float wt = expf(lt - mm);
    const float ssum = wa + wt;  // in [1, 2]
    const float sa = wa / ssum;
    const float sp = wt / ssum * inv;
#pragma unroll
    for (int i = 0; i < MAXD / 32; ++i) {
        const int d = lane + 32 * i;
        if (d < P.dv) o[d] = o[d] * sa + acc[i] * sp;
    }
    if (lane == 0) *lse = mm + logf(ssum);
}

extern "C" __global__ void __launch_bounds__(128) mercury_attn_fwd_f32(const AttnF32Args p) {
    attn_f32<false>(p);
}

// As mercury_attn_fwd_f32, merging into the (o, lse) accumulator.
extern "C" __global__ void __launch_bounds__(128) mercury_attn_fwd_f32_acc(const AttnF32Args p) {
    attn_f32<true>(p);
}
