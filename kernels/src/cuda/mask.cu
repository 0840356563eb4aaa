// Mercury mask helper kernel (compiled at run time by NVRTC): the rows of a cuDNN attention
// call under per-row key bounds that see no key of the call get lse = -inf, so that the merge
// kernels treat them as empty (cuDNN leaves NaN there: its softmax has nothing to normalise).

typedef long long i64;

#define NEG_INF (__int_as_float(0xff800000))

// lse: dense f32 [bh, rows]; lo, hi: the rows' global key bounds (INT32, hi exclusive); the
// call's keys are the global positions [kbase, kend). Row r is empty when
// max(lo[r], kbase) >= min(hi[r], kend).
extern "C" __global__ void mercury_mask_empty_rows(float* lse, i64 bh, i64 rows, const int* lo,
                                                   const int* hi, i64 kbase, i64 kend) {
    const i64 n = bh * rows;
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        const i64 r = i % rows;
        const i64 a = max((i64)lo[r], kbase);
        const i64 b = min((i64)hi[r], kend);
        if (a >= b) lse[i] = NEG_INF;
    }
}
