//! The NVRTC stand-in of the lowering's device kernels, for a bench run without its PTX.

/// BENCH-HARNESS STAND-IN, not the compiler's kernels: CUDA C++ versions of the
/// `mercury-lowering` device kernels (same entry points, parameters and semantics), compiled
/// by NVRTC. Used only when no lowering PTX is supplied (`--device-kernels-ptx`); the report
/// says which one ran.
pub const STANDIN_DEVICE_KERNELS_CU: &str = r#"
// BENCH-HARNESS STAND-IN for mercury_lowering::device_kernels_ptx (see bench.rs).
typedef long long i64;
typedef unsigned short u16;
typedef unsigned int u32;
#define NEG_INF (__int_as_float(0xff800000))
#define GRID_STRIDE(total) \
  for (i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x; e < (total); e += (i64)gridDim.x * blockDim.x)
extern "C" __global__ void mercury_lse_merge_o_f32(float* o_acc, float* lse_acc, float* o_part,
                                                   float* lse_part, i64 rows, i64 d) {
  GRID_STRIDE(rows * d) {
    const i64 r = e / d;
    const float la = lse_acc[r], lp = lse_part[r];
    const float m = fmaxf(la, lp);
    if (m == NEG_INF) continue;
    const float wa = expf(la - m), wp = expf(lp - m);
    const float ca = (la == NEG_INF) ? 0.f : o_acc[e] * wa;
    const float cp = (lp == NEG_INF) ? 0.f : o_part[e] * wp;
    o_acc[e] = (ca + cp) / (wa + wp);
  }
}
extern "C" __global__ void mercury_lse_merge_lse_f32(float* lse_acc, float* lse_part, i64 rows) {
  GRID_STRIDE(rows) {
    const float la = lse_acc[e], lp = lse_part[e];
    const float m = fmaxf(la, lp);
    if (m == NEG_INF) continue;
    lse_acc[e] = m + logf(expf(la - m) + expf(lp - m));
  }
}
extern "C" __global__ void mercury_add_f32(float* acc, float* part, i64 n) {
  GRID_STRIDE(n) { acc[e] += part[e]; }
}
extern "C" __global__ void mercury_add_bf16_f32(float* acc, u16* part, i64 n) {
  GRID_STRIDE(n) { acc[e] += __uint_as_float(((u32)part[e]) << 16); }
}
extern "C" __global__ void mercury_sum_bf16(u16* dst, u16* p0, u16* p1, u16* p2, u16* p3,
    u16* p4, u16* p5, u16* p6, u16* p7, i64 n, i64 nparts) {
  u16* p[8] = {p0, p1, p2, p3, p4, p5, p6, p7};
  GRID_STRIDE(n) {
    float s = __uint_as_float(((u32)p0[e]) << 16);
    for (i64 j = 1; j < nparts; ++j) s += __uint_as_float(((u32)p[j][e]) << 16);
    u32 b = __float_as_uint(s);
    if (s != s) { dst[e] = (u16)((b >> 16) | 64u); continue; }
    b += 0x7fffu + ((b >> 16) & 1u);
    dst[e] = (u16)(b >> 16);
  }
}
extern "C" __global__ void mercury_cast_f32_to_bf16(u16* dst, float* src, i64 n) {
  GRID_STRIDE(n) {
    const float x = src[e];
    u32 b = __float_as_uint(x);
    if (x != x) { dst[e] = (u16)((b >> 16) | 64u); continue; }
    b += 0x7fffu + ((b >> 16) & 1u);
    dst[e] = (u16)(b >> 16);
  }
}
extern "C" __global__ void mercury_cast_bf16_to_f32(float* dst, u16* src, i64 n) {
  GRID_STRIDE(n) { dst[e] = __uint_as_float(((u32)src[e]) << 16); }
}
extern "C" __global__ void mercury_copy_2d_b16(u16* dst, u16* src, i64 rows, i64 cols,
                                               i64 dst_stride, i64 src_stride) {
  GRID_STRIDE(rows * cols) { const i64 r = e / cols, c = e % cols; dst[r * dst_stride + c] = src[r * src_stride + c]; }
}
extern "C" __global__ void mercury_copy_2d_b32(u32* dst, u32* src, i64 rows, i64 cols,
                                               i64 dst_stride, i64 src_stride) {
  GRID_STRIDE(rows * cols) { const i64 r = e / cols, c = e % cols; dst[r * dst_stride + c] = src[r * src_stride + c]; }
}
extern "C" __global__ void mercury_fill_f32(float* dst, float value, i64 n) {
  GRID_STRIDE(n) { dst[e] = value; }
}
extern "C" __global__ void mercury_attn_merge_o_bf16(float* o_acc, float* lse_acc, u16* o_part,
    float* lse_part, i64 rows, i64 d, i64 sq, i64 hq, i64 o_sb, i64 o_sh, i64 o_sr, i64 l_sb,
    i64 l_sh, i64 overwrite, i64 nparts, i64 pos, i64 pls) {
  GRID_STRIDE(rows * d) {
    const i64 r = e / d, c = e % d, s = r % sq, h = (r / sq) % hq, b = r / (sq * hq);
    const float la = overwrite ? NEG_INF : lse_acc[b * l_sb + h * l_sh + s];
    float m = la;
    for (i64 i = 0; i < nparts; ++i) m = fmaxf(m, lse_part[i * pls + r]);
    float* po = o_acc + b * o_sb + h * o_sh + s * o_sr + c;
    if (m == NEG_INF) { if (overwrite) *po = 0.f; continue; }
    const float wa = expf(la - m);
    float num = (la == NEG_INF) ? 0.f : *po * wa, den = wa;
    for (i64 i = 0; i < nparts; ++i) {
      const float lp = lse_part[i * pls + r], wp = expf(lp - m);
      if (lp != NEG_INF) num += __uint_as_float(((u32)o_part[i * pos + r * d + c]) << 16) * wp;
      den += wp;
    }
    *po = num / den;
  }
}
extern "C" __global__ void mercury_attn_merge_lse(float* lse_acc, float* lse_part, i64 rows,
    i64 sq, i64 hq, i64 l_sb, i64 l_sh, i64 overwrite, i64 nparts, i64 pls) {
  GRID_STRIDE(rows) {
    const i64 s = e % sq, h = (e / sq) % hq, b = e / (sq * hq);
    float* pl = lse_acc + b * l_sb + h * l_sh + s;
    const float la = overwrite ? NEG_INF : *pl;
    float m = la;
    for (i64 i = 0; i < nparts; ++i) m = fmaxf(m, lse_part[i * pls + e]);
    if (m == NEG_INF) { if (overwrite) *pl = NEG_INF; continue; }
    float sum = expf(la - m);
    for (i64 i = 0; i < nparts; ++i) sum += expf(lse_part[i * pls + e] - m);
    *pl = m + logf(sum);
  }
}
"#;
