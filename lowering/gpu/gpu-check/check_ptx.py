#!/usr/bin/env python3
"""Runs the MLIR-made PTX of mercury-lowering on a real GPU and checks every
kernel against a torch (float64 where it matters) reference.

Make the PTX (on any machine, no GPU needed):
  MERCURY_LOWERING_DUMP_PTX=$PWD/lowering/gpu/gpu-check/mercury_kernels_sm90.ptx \
    CARGO_TARGET_DIR=/work/target-lowering cargo test -p mercury-lowering ptx_has_target
Run (on the GPU machine):
  python3 lowering/gpu/gpu-check/check_ptx.py lowering/gpu/gpu-check/mercury_kernels_sm90.ptx
Needs torch with CUDA and the driver's libcuda.so.1; launches through the
CUDA driver API (ctypes), exactly as the runtime does: by name, with the
contract's parameters, 1-D grids of several shapes.
"""
import ctypes
import math
import sys

import torch

cuda = ctypes.CDLL("libcuda.so.1")
cuda.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
]


def check(rc, what):
    if rc != 0:
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(rc, ctypes.byref(name))
        raise RuntimeError(f"{what}: CUDA error {rc} {name.value}")


torch.zeros(1, device="cuda")  # makes the primary context current
ptx = open(sys.argv[1], "rb").read() + b"\0"
module = ctypes.c_void_p()
check(cuda.cuModuleLoadData(ctypes.byref(module), ptx), "cuModuleLoadData")
FAILS = []


def launch(name, args, n, block=256, grid=None):
    fn = ctypes.c_void_p()
    check(cuda.cuModuleGetFunction(ctypes.byref(fn), module, name.encode()), name)
    holders = []
    for a in args:
        if isinstance(a, torch.Tensor):
            holders.append(ctypes.c_uint64(a.data_ptr()))
        elif isinstance(a, float):
            holders.append(ctypes.c_float(a))
        else:
            holders.append(ctypes.c_int64(a))
    params = (ctypes.c_void_p * len(holders))(
        *[ctypes.cast(ctypes.byref(h), ctypes.c_void_p) for h in holders]
    )
    grid = grid or max(1, (n + block - 1) // block)
    check(cuda.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, None, params, None), name)


def sync():
    check(cuda.cuCtxSynchronize(), "sync")


def expect(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        FAILS.append(what)


dev = "cuda"
g = torch.Generator(device=dev).manual_seed(1)
SHAPES = [(256, None), (1000, None), (64, 3), (1024, 1)]  # (block, grid); None = cover N

# --- lse merge -------------------------------------------------------------
for rows, d in [(4096, 128), (7, 3), (1, 1)]:
    for block, grid in SHAPES:
        lse_acc = torch.rand(rows, device=dev, generator=g) * 40 - 20
        lse_part = torch.rand(rows, device=dev, generator=g) * 40 - 20
        ninf = -math.inf
        specials = [(ninf, 1.5), (2.0, ninf), (ninf, ninf), (3.25, 3.25)]
        for i, (a, p) in enumerate(specials[:rows]):
            lse_acc[i], lse_part[i] = a, p
        o_acc = torch.rand(rows, d, device=dev, generator=g) * 6 - 3
        o_part = torch.rand(rows, d, device=dev, generator=g) * 6 - 3
        o_acc[(lse_acc == ninf) & (lse_part != ninf)] = math.nan  # never read
        o_part[lse_part == ninf] = math.nan
        la, lp = lse_acc.double(), lse_part.double()
        m = torch.maximum(la, lp)
        live = m != ninf
        new = torch.where(live, m + torch.log(torch.exp(la - m) + torch.exp(lp - m)), la)
        wa = torch.where(la == ninf, 0.0, torch.exp(la - new))[:, None]
        wp = torch.where(lp == ninf, 0.0, torch.exp(lp - new))[:, None]
        ca = torch.where(wa == 0, 0.0, o_acc.double() * wa)
        cp = torch.where(wp == 0, 0.0, o_part.double() * wp)
        want_o = torch.where(live[:, None], ca + cp, o_acc.double())
        lse_before = lse_acc.clone()
        launch("mercury_lse_merge_o_f32", [o_acc, lse_acc, o_part, lse_part, rows, d], rows * d, block, grid)
        sync()
        expect(torch.equal(lse_acc, lse_before), f"lse_merge_o leaves lse_acc ({rows}x{d}, {block}/{grid})")
        launch("mercury_lse_merge_lse_f32", [lse_acc, lse_part, rows], rows, block, grid)
        sync()
        err_o = ((o_acc.double() - want_o).abs() / (1 + want_o.abs())).max().item()
        fin = torch.isfinite(new)
        err_l = ((lse_acc.double()[fin] - new[fin]).abs() / (1 + new[fin].abs())).max().item()
        same_inf = torch.equal(lse_acc[~fin], lse_before[~fin])
        expect(err_o < 1e-5 and err_l < 1e-5 and same_inf,
               f"lse merge {rows}x{d} block={block} grid={grid}: max rel err o={err_o:.2e} lse={err_l:.2e}")

# --- add / fill --------------------------------------------------------------
for n in [1, 1000, 1 << 20]:
    for block, grid in SHAPES:
        acc = torch.randn(n + 1, device=dev, generator=g)
        part = torch.randn(n + 1, device=dev, generator=g)
        want = acc.clone()
        want[:n] += part[:n]
        launch("mercury_add_f32", [acc, part, n], n, block, grid)
        sync()
        expect(torch.equal(acc, want), f"add n={n} block={block} grid={grid}")
        dst = torch.full((n + 1,), 7.0, device=dev)
        launch("mercury_fill_f32", [dst, -math.inf, n], n, block, grid)
        sync()
        expect(bool((dst[:n] == -math.inf).all()) and dst[n].item() == 7.0, f"fill n={n} block={block} grid={grid}")

# --- casts -------------------------------------------------------------------
bits = torch.randint(-(2**31), 2**31 - 1, (1 << 20,), device=dev, dtype=torch.int32, generator=g)
src = torch.cat([bits.view(torch.float32), torch.randn(1 << 20, device=dev, generator=g) * 1e3,
                 torch.tensor([0.0, -0.0, math.inf, -math.inf, 3.4028235e38, 1.00390625, 1.01171875],
                              device=dev)])
n = src.numel()
for block, grid in SHAPES:
    dst = torch.full((n + 1,), 0x1234, dtype=torch.int16, device=dev)
    launch("mercury_cast_f32_to_bf16", [dst, src, n], n, block, grid)
    sync()
    want = src.to(torch.bfloat16).view(torch.int16)
    nan = torch.isnan(src)
    got_nan = torch.isnan(dst[:n].view(torch.bfloat16))
    ok = torch.equal(dst[:n][~nan], want[~nan]) and bool(got_nan[nan].all()) and dst[n].item() == 0x1234
    expect(ok, f"cast f32->bf16 (RNE, vs torch) n={n} block={block} grid={grid}")
    allbits = torch.arange(-(2**15), 2**15, device=dev, dtype=torch.int32).to(torch.int16)
    wide = torch.full((allbits.numel() + 1,), 0.5, device=dev)
    launch("mercury_cast_bf16_to_f32", [wide, allbits, allbits.numel()], allbits.numel(), block, grid)
    sync()
    want = allbits.view(torch.bfloat16).float()
    same = torch.equal(wide[:-1].view(torch.int32), want.view(torch.int32))
    expect(same and wide[-1].item() == 0.5, f"cast bf16->f32 all 65536 patterns block={block} grid={grid}")

# --- strided copies ------------------------------------------------------------
for rows, cols, ds, ss in [(4, 3, 3, 7), (4, 3, 9, 3), (333, 128, 128, 1024), (1000, 96, 200, 96)]:
    for block, grid in SHAPES:
        for name, dt in [("mercury_copy_2d_b16", torch.int16), ("mercury_copy_2d_b32", torch.int32)]:
            srcb = torch.randint(-1000, 1000, ((rows - 1) * ss + cols + 1,), device=dev, dtype=dt, generator=g)
            dstb = torch.full(((rows - 1) * ds + cols + 1,), 77, device=dev, dtype=dt)
            want = dstb.clone()
            want.as_strided((rows, cols), (ds, 1)).copy_(srcb.as_strided((rows, cols), (ss, 1)))
            launch(name, [dstb, srcb, rows, cols, ds, ss], rows * cols, block, grid)
            sync()
            expect(torch.equal(dstb, want), f"{name} {rows}x{cols} ds={ds} ss={ss} block={block} grid={grid}")

# --- bandwidth -------------------------------------------------------------------


def timeit(fn, reps=20):
    fn()
    sync()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    times.sort()
    return times[len(times) // 2]


n = 1 << 28
a = torch.zeros(n, device=dev)
b = torch.ones(n, device=dev)
dst16 = torch.empty(n, dtype=torch.int16, device=dev)
rows, d = 32 * 32768, 128
o1 = torch.randn(rows, d, device=dev)
o2 = torch.randn(rows, d, device=dev)
l1 = torch.randn(rows, device=dev)
l2 = torch.randn(rows, device=dev)
x = torch.empty(rows, d // 2, device=dev)
sms = torch.cuda.get_device_properties(0).multi_processor_count
for grid in [None, sms * 8, sms * 32]:
    g_txt = "cover N" if grid is None else f"grid={grid}"
    t = timeit(lambda: launch("mercury_add_f32", [a, b, n], n, 256, grid))
    print(f"perf add_f32 n=2^28 {g_txt}: {t*1e3:.3f} ms, {3 * 4 * n / t / 1e9:.0f} GB/s (read 2 + write 1)")
    t = timeit(lambda: launch("mercury_fill_f32", [a, 0.0, n], n, 256, grid))
    print(f"perf fill_f32 n=2^28 {g_txt}: {t*1e3:.3f} ms, {4 * n / t / 1e9:.0f} GB/s (write)")
    t = timeit(lambda: launch("mercury_cast_f32_to_bf16", [dst16, a, n], n, 256, grid))
    print(f"perf cast_f32_to_bf16 n=2^28 {g_txt}: {t*1e3:.3f} ms, {6 * n / t / 1e9:.0f} GB/s")
    t = timeit(lambda: launch("mercury_lse_merge_o_f32", [o1, l1, o2, l2, rows, d], rows * d, 256, grid))
    print(f"perf lse_merge_o {rows}x{d} {g_txt}: {t*1e3:.3f} ms, {3 * 4 * rows * d / t / 1e9:.0f} GB/s (o: read 2 + write 1)")
    t = timeit(lambda: launch("mercury_copy_2d_b32", [x, o1, rows, d // 2, d // 2, d], rows * d // 2, 256, grid))
    print(f"perf copy_2d_b32 pack {rows}x{d//2} of stride {d} {g_txt}: {t*1e3:.3f} ms, {2 * 4 * rows * d // 2 / t / 1e9:.0f} GB/s")
t = timeit(lambda: torch.add(a, b, out=a))
print(f"perf torch add_ n=2^28 (reference): {t*1e3:.3f} ms, {3 * 4 * n / t / 1e9:.0f} GB/s")
t = timeit(lambda: a.fill_(0.0))
print(f"perf torch fill_ n=2^28 (reference): {t*1e3:.3f} ms, {4 * n / t / 1e9:.0f} GB/s")

print(f"{len(FAILS)} failures")
sys.exit(1 if FAILS else 0)
