//! Probe of cuDNN's variable-sequence attention forward on the loaded library
//! (`mercury_kernels::cuda::cudnn::ragged`): for each graph variant (head-major BHSD or
//! token-major THD memory, causal or not, Stats through a ragged offset or padded), whether a
//! plan finalises (the library's status and message when not) and, when it does, the largest
//! error of O and Stats against an f64 reference on fresh random bf16 inputs: documents of 1 to
//! 300 tokens, entries bucketed to a power of two with length-0 padding entries.
//!
//! `cargo run --release -p mercury-kernels --features cuda --example ragged_probe`; one line per
//! variant, `ok` when both errors are within bf16 tolerance.

use half::bf16;
use mercury_kernels::cuda::alloc::alloc_bytes;
use mercury_kernels::cuda::cudnn::{IoType, RaggedCall, RaggedKey};
use mercury_kernels::cuda::CudnnAttention;
use rand::Rng;

fn htod<T: cudarc::driver::DeviceRepr>(ptr: u64, v: &[T]) -> Result<(), String> {
    // SAFETY: `ptr` holds at least `v.len()` elements (allocated for it below).
    unsafe { cudarc::driver::result::memcpy_htod_sync(ptr, v) }
        .map_err(|e| format!("copy to device: {e}"))
}

fn dtoh<T: cudarc::driver::DeviceRepr + Default + Clone>(
    ptr: u64,
    n: usize,
) -> Result<Vec<T>, String> {
    let mut v = vec![T::default(); n];
    // SAFETY: `ptr` holds at least `n` elements.
    unsafe { cudarc::driver::result::memcpy_dtoh_sync(&mut v, ptr) }
        .map_err(|e| format!("copy to host: {e}"))?;
    Ok(v)
}

fn main() -> std::process::ExitCode {
    match probe() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ragged_probe: error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn probe() -> Result<(), String> {
    let ctx = cudarc::driver::CudaContext::new(0).map_err(|e| format!("CUDA device 0: {e}"))?;
    let stream = ctx.default_stream();
    let cudnn = CudnnAttention::new(&ctx).map_err(|e| format!("cuDNN: {e}"))?;
    println!(
        "cuDNN {}",
        mercury_kernels::cuda::cudnn::version_string(cudnn.library().version)
    );
    let mut rng = rand::thread_rng();
    let (h, d) = (2usize, 128usize);
    // Documents: lengths 1..300, total T.
    let mut lens = vec![1usize, 300, 7, 64, 129, 1, 33];
    lens.push(rng.gen_range(1..300));
    let t: usize = lens.iter().sum();
    let starts: Vec<usize> = lens
        .iter()
        .scan(0, |s, l| {
            let x = *s;
            *s += l;
            Some(x)
        })
        .collect();
    let n = lens.len();
    let entries = n.next_power_of_two() + 1; // padding entries of length 0
    let entries = entries.next_power_of_two();
    let max_s = 512i64;
    let scale = 1.0 / (d as f32).sqrt();
    let rnd = |rng: &mut rand::rngs::ThreadRng| -> Vec<bf16> {
        (0..h * t * d)
            .map(|_| bf16::from_f32(rng.gen_range(-1.0f32..1.0)))
            .collect()
    };
    let (q, k, v) = (rnd(&mut rng), rnd(&mut rng), rnd(&mut rng));
    let buf = |bytes: usize| {
        // SAFETY: written before read (inputs copied, outputs poisoned).
        unsafe { alloc_bytes(&stream, bytes, "probe") }.map_err(|e| e.to_string())
    };
    let (dq, dk, dv, dout, dstats, darr) = (
        buf(h * t * d * 2)?,
        buf(h * t * d * 2)?,
        buf(h * t * d * 2)?,
        buf(h * t * d * 2)?,
        buf(entries * h * max_s as usize * 4 + h * t * 4)?,
        buf(4 * (7 * entries + 5))?,
    );
    let ws = buf(64 << 20)?;
    stream.synchronize().map_err(|e| e.to_string())?;
    for layout in ["bhsd", "thd"] {
        // Element index of (head, token, dim).
        let at = |hh: usize, tok: usize, dd: usize| match layout {
            "bhsd" => (hh * t + tok) * d + dd,
            _ => (tok * h + hh) * d + dd,
        };
        let (sh, sr) = match layout {
            "bhsd" => ((t * d) as i64, d as i64),
            _ => (d as i64, (h * d) as i64),
        };
        let lay = |x: &[bf16]| {
            let mut y = vec![0u16; x.len()];
            for hh in 0..h {
                for tok in 0..t {
                    for dd in 0..d {
                        y[at(hh, tok, dd)] = x[(hh * t + tok) * d + dd].to_bits();
                    }
                }
            }
            y
        };
        htod(dq.ptr(), &lay(&q))?;
        htod(dk.ptr(), &lay(&k))?;
        htod(dv.ptr(), &lay(&v))?;
        for causal in [false, true] {
            for stats_ragged in [true, false] {
                let key = RaggedKey {
                    io: IoType::Bf16,
                    entries: entries as i64,
                    hq: h as i64,
                    hk: h as i64,
                    max_sq: max_s,
                    max_sk: max_s,
                    dqk: d as i64,
                    dv: d as i64,
                    q: [sh, sr],
                    k: [sh, sr],
                    v: [sh, sr],
                    o: [sh, sr],
                    stats_h: if stats_ragged { t as i64 } else { max_s },
                    causal,
                    stats_ragged,
                };
                let name = format!(
                    "{layout} {} stats={}",
                    if causal { "causal" } else { "full" },
                    if stats_ragged { "ragged" } else { "padded" }
                );
                if let Err(e) = cudnn.prepare_ragged(&key) {
                    println!("{name}: REFUSED: {e}");
                    continue;
                }
                // Arrays: seq_q, seq_kv, offsets of Q, K, V, O, Stats.
                let mut arr: Vec<i32> = Vec::new();
                let len = |i: usize| if i < n { lens[i] as i32 } else { 0 };
                let start = |i: usize| if i < n { starts[i] } else { t };
                arr.extend((0..entries).map(len));
                arr.extend((0..entries).map(len));
                for _ in 0..4 {
                    arr.extend((0..=entries).map(|i| (start(i) as i64 * sr) as i32));
                }
                arr.extend((0..=entries).map(|i| start(i) as i32));
                htod(darr.ptr(), &arr)?;
                htod(dout.ptr(), &vec![bf16::NAN.to_bits(); h * t * d])?;
                htod(
                    dstats.ptr(),
                    &vec![f32::NAN; entries * h * max_s as usize + h * t],
                )?;
                let a = |i: usize| darr.ptr() + 4 * i as u64;
                let e = entries;
                let call = RaggedCall {
                    key,
                    q: dq.ptr(),
                    k: dk.ptr(),
                    v: dv.ptr(),
                    o: dout.ptr(),
                    stats: dstats.ptr(),
                    seq_q: a(0),
                    seq_kv: a(e),
                    offsets: [0, 1, 2, 3, 4].map(|x| a(2 * e + x * (e + 1))),
                    scale,
                };
                // SAFETY: every buffer above is sized for the call's entries.
                if let Err(e) = unsafe { cudnn.forward_ragged(&stream, &call, ws.ptr(), 64 << 20) }
                {
                    println!("{name}: EXECUTE FAILED: {e}");
                    continue;
                }
                stream.synchronize().map_err(|e| e.to_string())?;
                let o: Vec<bf16> = dtoh::<u16>(dout.ptr(), h * t * d)?
                    .into_iter()
                    .map(bf16::from_bits)
                    .collect();
                let st: Vec<f32> = dtoh(dstats.ptr(), entries * h * max_s as usize + h * t)?;
                let (mut eo, mut el) = (0f64, 0f64);
                for (doc, (&s0, &l)) in starts.iter().zip(&lens).enumerate() {
                    for hh in 0..h {
                        for i in 0..l {
                            let keys = if causal { i + 1 } else { l };
                            let f = |x: &[bf16], tok: usize, dd: usize| {
                                x[(hh * t + tok) * d + dd].to_f64()
                            };
                            let s: Vec<f64> = (0..keys)
                                .map(|j| {
                                    (0..d)
                                        .map(|dd| f(&q, s0 + i, dd) * f(&k, s0 + j, dd))
                                        .sum::<f64>()
                                        * scale as f64
                                })
                                .collect();
                            let m = s.iter().cloned().fold(f64::MIN, f64::max);
                            let z: f64 = s.iter().map(|x| (x - m).exp()).sum();
                            let lse = m + z.ln();
                            let got_lse = if stats_ragged {
                                st[hh * t + s0 + i]
                            } else {
                                st[(doc * h + hh) * max_s as usize + i]
                            };
                            el = el.max((got_lse as f64 - lse).abs());
                            for dd in 0..d {
                                let want: f64 = s
                                    .iter()
                                    .enumerate()
                                    .map(|(j, x)| (x - lse).exp() * f(&v, s0 + j, dd))
                                    .sum();
                                let got = o[at(hh, s0 + i, dd)].to_f64();
                                eo = eo.max((got - want).abs());
                            }
                        }
                    }
                }
                let ok = eo < 2e-2 && el < 1e-3;
                println!(
                    "{name}: plan ok; max |O err| {eo:.2e}, max |LSE err| {el:.2e}: {}",
                    if ok { "ok" } else { "WRONG" }
                );
            }
        }
    }
    Ok(())
}
