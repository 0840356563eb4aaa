// The parameter block of the attention forward kernels (attention.cu, attention_f32.cu), put
// before each of those sources when they are compiled: must match `AttnArgsDev` in
// attention.rs field for field.

typedef long long i64;
typedef unsigned long long u64;

struct AttnArgs {
    u64 q, k, v, o, lse;
    u64 lo, hi;
    i64 q_sb, q_sh, q_sr;
    i64 k_sb, k_sh, k_sr;
    i64 v_sb, v_sh, v_sr;
    i64 o_sb, o_sh, o_sr;
    i64 lse_sb, lse_sh;
    i64 q_offset, k_offset;
    int b, hq, hk, sq, sk;
    int causal;
    int bounded, pad;
    float scale_log2;
    float scale;
};
