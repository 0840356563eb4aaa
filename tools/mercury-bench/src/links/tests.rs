use super::report::rate_toml;
use super::*;

/// Samples of exactly `lat + bytes / gbs`.
fn line(lat: f64, gbs: f64, sizes: &[usize]) -> Vec<Sample> {
    sizes
        .iter()
        .map(|&bytes| Sample {
            bytes,
            us: lat + bytes as f64 / (gbs * 1e3),
        })
        .collect()
}

#[test]
fn size_ladder() {
    let s = sizes(64 << 10, 1 << 30);
    assert_eq!(s.len(), 8);
    assert_eq!(s[0], 64 << 10);
    assert_eq!(*s.last().unwrap(), 1 << 30);
    assert_eq!(sizes(64 << 10, 100 << 10), vec![64 << 10]);
    assert!(sizes(2, 1).is_empty());
    assert_eq!(size_label(64 << 10), "64 KiB");
    assert_eq!(size_label(256 << 20), "256 MiB");
    assert_eq!(size_label(1 << 30), "1 GiB");
    assert_eq!(size_label(1000), "1000 B");
}

#[test]
fn fit_recovers_latency_and_bandwidth() {
    let s = line(4.5, 372.0, &sizes(64 << 10, 1 << 30));
    let f = fit(&s).unwrap();
    assert!((f.latency_us - 4.5).abs() < 1e-6, "{f:?}");
    assert!((f.gbs - 372.0).abs() < 1e-6, "{f:?}");
    assert!(f.max_err < 1e-9);
    assert!((f.predict_us(1 << 30) - s[7].us).abs() < 1e-6);
    // Noise of +-5% alternating: the fit stays close and reports an error near 5%.
    let noisy: Vec<Sample> = s
        .iter()
        .enumerate()
        .map(|(i, x)| Sample {
            bytes: x.bytes,
            us: x.us * if i % 2 == 0 { 1.05 } else { 0.95 },
        })
        .collect();
    let f = fit(&noisy).unwrap();
    assert!((f.gbs / 372.0 - 1.0).abs() < 0.1, "{f:?}");
    assert!((0.03..0.08).contains(&f.max_err), "{f:?}");
    // A negative intercept is clamped: bandwidth through the origin.
    let s = vec![
        Sample {
            bytes: 1000,
            us: 1.0,
        },
        Sample {
            bytes: 3000,
            us: 4.0,
        },
    ];
    let f = fit(&s).unwrap();
    assert_eq!(f.latency_us, 0.0);
    assert!(f.gbs > 0.0);
    // Too little data, or nonsense.
    assert!(fit(&s[..1]).is_none());
    assert!(fit(&[]).is_none());
    let flat = vec![Sample { bytes: 10, us: 5.0 }, Sample { bytes: 20, us: 5.0 }];
    assert!(fit(&flat).is_none(), "zero slope has no bandwidth");
}

fn report(n: usize, nccl: bool) -> LinkReport {
    let sz = sizes(64 << 10, 1 << 30);
    let devices = (0..n)
        .map(|i| DeviceInfo {
            ordinal: i,
            name: "NVIDIA H200".into(),
            total_bytes: 150_754_820_096,
            sm_count: 132,
            copy_engines: 3,
        })
        .collect();
    let local = (0..n)
        .map(|i| Sweep::new(Method::LocalCopy, i, i, line(2.0, 2080.0, &sz)))
        .collect();
    let mut pairs = Vec::new();
    let mut both = Vec::new();
    for a in 0..n {
        for b in 0..n {
            if a != b {
                let bw = 370.0 + (a + b) as f64;
                pairs.push(Sweep::new(Method::CopyPull, a, b, line(4.0, bw, &sz)));
                pairs.push(Sweep::new(Method::CopyPush, a, b, line(3.0, bw, &sz)));
                if nccl {
                    pairs.push(Sweep::new(Method::Nccl, a, b, line(9.0, 345.0, &sz)));
                }
                if a < b {
                    both.push(BothWays {
                        a,
                        b,
                        method: Method::CopyPull,
                        bytes: 256 << 20,
                        gbs: 360.0,
                    });
                }
            }
        }
    }
    LinkReport {
        devices,
        local,
        pairs,
        both,
        staged: vec![],
        sizes: sz,
        reps: 10,
        notes: vec![],
        cuda: "13.0".into(),
        driver: Some("580.159.04".into()),
        nccl: nccl.then(|| "2.28.3".into()),
    }
}

/// The written files load and validate with the search's own topology parser, and carry
/// the fitted figures of the chosen method.
#[test]
fn written_topologies_validate() {
    for n in [1, 2, 8] {
        for source in [LinkSource::Copy, LinkSource::Nccl] {
            let text = topology_toml(
                &report(n, true),
                &format!("measured-{n}"),
                &Rates::default(),
                source,
            );
            let t = mercury_search::topology::Topology::from_toml_str(&text, "measured")
                .unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(t.levels.len(), 1);
            assert_eq!(t.levels[0].size, n);
            assert_eq!(t.device.copy_engines, 3);
            assert!((t.device.hbm_bandwidth_gbs - 4160.0).abs() < 0.1, "{text}");
            assert_eq!(t.environment.nccl.as_deref(), Some("2.28.3"));
            if n > 1 {
                let (bw, lat) = match source {
                    LinkSource::Copy => (370.0 + n as f64, 4.0),
                    LinkSource::Nccl => (345.0, 9.0),
                };
                assert!(
                    (t.levels[0].bandwidth_gbs - bw).abs() < n as f64 + 1.0,
                    "{text}"
                );
                assert!((t.levels[0].latency_us - lat).abs() < 0.01, "{text}");
                assert!(text.contains("GPU 0 -> 1 NCCL send/recv"));
                assert!(text.contains("both ways at once"));
            } else {
                assert!(text.contains("only the local copy"));
            }
        }
    }
    // As a file, through the loader `mercury-tune --topology FILE` uses.
    let path = std::env::temp_dir().join(format!("mercury-links-{}.toml", std::process::id()));
    let text = topology_toml(
        &report(2, true),
        "file",
        &Rates::default(),
        LinkSource::Copy,
    );
    std::fs::write(&path, &text).unwrap();
    let t = mercury_search::topology::Topology::load(path.to_str().unwrap());
    let _ = std::fs::remove_file(&path);
    assert_eq!(t.unwrap_or_else(|e| panic!("{e}\n{text}")).name, "file");
    // Without NCCL figures, an NCCL file falls back to the pulled copies.
    let text = topology_toml(&report(2, false), "x", &Rates::default(), LinkSource::Nccl);
    assert!(text.contains("link = \"peer copy pulled"), "{text}");
    // Uneven and staged pairs are flagged.
    let mut r = report(2, false);
    r.pairs[0] = Sweep::new(Method::CopyPull, 0, 1, line(20.0, 25.0, &r.sizes));
    r.staged = vec![(0, 1)];
    let text = topology_toml(&r, "uneven", &Rates::default(), LinkSource::Copy);
    assert!(text.contains("WARNING") && text.contains("without peer access"));
    assert!(mercury_search::topology::Topology::from_toml_str(&text, "u").is_ok());
}

#[test]
fn given_rates_are_written_as_given() {
    // The ends of the range a topology file accepts (mercury-mgpu checks given rates
    // against it): each reads back as written, none as `0.0`.
    for (g, a, c) in [(1e-6, 0.01, 1e6), (0.5, 612.0, 0.04), (803.0, 1.0, 0.99)] {
        let rates = Rates {
            gemm_tflops: g,
            attention_tflops: a,
            attention_causal_tflops: c,
            ..Rates::default()
        };
        let text = topology_toml(&report(2, true), "given", &rates, LinkSource::Copy);
        let t = mercury_search::topology::Topology::from_toml_str(&text, "given")
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        let r = &t.device.rates;
        assert_eq!(
            (r.gemm_tflops, r.attention_tflops, r.attention_causal_tflops),
            (g, a, Some(c)),
            "{text}"
        );
    }
    // One decimal from 1 up, as before.
    assert_eq!(rate_toml(803.0), "803.0");
    assert_eq!(rate_toml(612.345), "612.3");
    assert_eq!(rate_toml(0.01), "1e-2");
}

#[test]
fn measured_rate_tables_round_trip() {
    use mercury_search::topology::{AttentionPoint, GemmPoint};
    let gemm = vec![
        GemmPoint {
            m: 512,
            n: 4096,
            k: 8192,
            tflops: 690.5,
        },
        GemmPoint {
            m: 8192,
            n: 8192,
            k: 8192,
            tflops: 790.0,
        },
    ];
    let att = |sq: usize, causal: bool, tflops: f64| AttentionPoint {
        heads: 32,
        sq,
        sk: sq,
        d: 128,
        causal,
        tflops,
    };
    let attention = vec![
        att(16384, false, 668.0),
        att(32768, false, 640.0),
        att(32768, true, 600.0),
    ];
    let rates = Rates::measured(gemm.clone(), attention.clone(), "measured here".into());
    // The single figures are the points at the anchor shapes.
    assert_eq!(
        (
            rates.gemm_tflops,
            rates.attention_tflops,
            rates.attention_causal_tflops
        ),
        (790.0, 640.0, 600.0)
    );
    let text = topology_toml(&report(2, true), "rates", &rates, LinkSource::Copy);
    let t = mercury_search::topology::Topology::from_toml_str(&text, "rates")
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(t.device.rates.gemm_points, gemm);
    assert_eq!(t.device.rates.attention_points, attention);
    assert_eq!(t.device.rates.gemm_tflops, 790.0);
    assert!(text.contains("# measured here"));
    // Without the anchor shapes: the medians.
    let r = Rates::measured(gemm[..1].to_vec(), attention[..1].to_vec(), String::new());
    assert_eq!((r.gemm_tflops, r.attention_tflops), (690.5, 668.0));
    assert_eq!(
        r.attention_causal_tflops,
        Rates::default().attention_causal_tflops
    );
}

#[test]
fn table_lists_every_sweep() {
    let mut r = report(2, true);
    r.staged = vec![(1, 0)];
    r.notes = vec!["something to know".into()];
    let t = table(&r);
    assert!(t.contains("| link (GB/s) | 64 KiB |"), "{t}");
    assert!(t.contains("| GPU 0 local copy |"), "{t}");
    assert!(t.contains("| GPU 1 -> 0 copy, pulled |"), "{t}");
    assert!(t.contains("| GPU 0 -> 1 NCCL send/recv |"), "{t}");
    assert!(t.contains("4.00 us + bytes / 371.0 GB/s | 0% |"), "{t}");
    assert!(t.contains("2.00 us + bytes / 4160.0 GB/s"), "{t}");
    assert!(t.contains("both ways at once, GPU 0 <-> 1"), "{t}");
    assert!(t.contains("WARNING: GPU 1 cannot access GPU 0"), "{t}");
    assert!(t.contains("note: something to know"), "{t}");
    // 3 methods per ordered pair + 2 local sweeps, one row each.
    assert_eq!(t.lines().filter(|l| l.starts_with("| GPU")).count(), 2 + 6);
}

#[test]
fn driver_version_line() {
    let t = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct  2 2025\nGCC version: gcc 12";
    assert_eq!(parse_driver_version(t).as_deref(), Some("580.159.04"));
    assert_eq!(parse_driver_version(""), None);
}

/// On a machine with a GPU, a small measurement makes a valid file; skips otherwise.
#[test]
fn gpu_measure_or_skip() {
    if let Err(e) = mercury_kernels::cuda::probe(mercury_kernels::cuda::Library::Driver) {
        eprintln!("skipping GPU test: {e}");
        return;
    }
    let opts = MeasureOptions {
        sizes: sizes(64 << 10, 4 << 20),
        reps: 3,
        max_devices: Some(2),
        nccl: false,
    };
    let r = match measure(&opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("skipping GPU test: {e}");
            return;
        }
    };
    assert!(r.local.iter().all(|x| x.bandwidth() > 0.0));
    let text = topology_toml(&r, "probe", &Rates::default(), LinkSource::Copy);
    mercury_search::topology::Topology::from_toml_str(&text, "probe")
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
}
