use super::*;

#[test]
fn presets_parse_and_validate() {
    for (name, _) in PRESETS {
        let t = Topology::preset(name).unwrap().unwrap();
        assert_eq!(&t.name, name, "preset file name and `name` differ");
    }
    let t = Topology::preset("h100-2x4").unwrap().unwrap();
    assert_eq!(t.mesh(), vec![2, 4]);
    assert_eq!(t.num_devices(), 8);
    assert_eq!(
        Topology::preset("h100-2x8").unwrap().unwrap().num_devices(),
        16
    );
    assert_eq!(
        Topology::preset("h200-1x8")
            .unwrap()
            .unwrap()
            .usable_hbm_bytes(),
        137_000_000_000
    );
}

#[test]
fn preset_files_match_embedded() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../topologies");
    for (name, text) in PRESETS {
        let file = std::fs::read_to_string(dir.join(format!("{name}.toml"))).unwrap();
        assert_eq!(&file, text);
    }
}

#[test]
fn tiers_and_ports() {
    let t = Topology::preset("h100-2x4").unwrap().unwrap();
    assert_eq!(t.tier(0, 0), None);
    assert_eq!(t.tier(0, 3), Some(1));
    assert_eq!(t.tier(3, 4), Some(0));
    assert_eq!(t.tier(7, 0), Some(0));
    // One NIC per node: all GPUs of node 1 share port (0, 1, 0).
    for d in 4..8 {
        assert_eq!(
            t.port(0, d),
            Port {
                level: 0,
                unit: 1,
                port: 0
            }
        );
    }
    // NVLink: one egress per GPU.
    assert_eq!(t.port(1, 5).unit, 5);
    assert!((t.bandwidth(0) - 12.5e9 * 0.9).abs() < 1.0);
}

fn base() -> String {
    let (_, text) = PRESETS.iter().find(|(n, _)| *n == "h100-2x4").unwrap();
    text.to_string()
}

#[test]
fn bad_files_give_clear_errors() {
    let cases: Vec<(String, &str)> = vec![
        ("name = 3".into(), "not a valid topology"),
        (
            base().replace("size = 4", "size = 0"),
            "`size` must be at least 1",
        ),
        (
            base().replace("bandwidth_gbs = 450.0", "bandwidth_gbs = -1.0"),
            "bandwidth_gbs` must be a positive",
        ),
        (
            base().replace("ports = 1", "ports = 3"),
            "`ports` = 3 must divide",
        ),
        (
            base().replace("bandwidth_gbs = 12.5", "bandwidth_gbs = 4500.0"),
            "slowest first",
        ),
        (
            base().replace("copy_engines = 3", "copy_engines = 0"),
            "copy_engines",
        ),
        (
            base().replace("hbm_reserved_gb = 4.0", "hbm_reserved_gb = 90.0"),
            "leaves nothing",
        ),
        (
            base().replace("latency_us = 3.0", "latncy_us = 3.0"),
            "unknown field",
        ),
        (
            base().replace("efficiency = 0.82", "efficiency = 1.5"),
            "efficiency",
        ),
        (
            base().replace("name = \"gpu\"", "name = \"node\""),
            "duplicate level name",
        ),
    ];
    for (text, want) in cases {
        let e = Topology::from_toml_str(&text, "test.toml").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(want), "expected '{want}' in: {msg}");
        assert!(msg.starts_with("test.toml"), "origin missing: {msg}");
    }
    let e = Topology::load("/nonexistent/topo.toml").unwrap_err();
    assert!(e.to_string().contains("h100-2x4"), "{e}");
}

/// `line:col` of the value on the first line of `text` that starts with `line_start`.
fn value_at(text: &str, line_start: &str) -> String {
    let (i, l) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.starts_with(line_start))
        .unwrap_or_else(|| panic!("no line '{line_start}'"));
    let col = l.find('=').expect("a key = value line") + 3;
    format!("{}:{col}", i + 1)
}

#[test]
fn value_errors_are_located_at_the_value() {
    // (text, the line whose value is wrong, the message).
    let cases: Vec<(String, &str, &str)> = vec![
        (
            base().replace("size = 4", "size = 0"),
            "size = 0",
            "levels[1] ('gpu'): `size` must be at least 1",
        ),
        (
            base().replace("bandwidth_gbs = 450.0", "bandwidth_gbs = nan"),
            "bandwidth_gbs = nan",
            "`levels[1] ('gpu').bandwidth_gbs` must be a positive number, got NaN",
        ),
        (
            base().replace("ports = 1", "ports = 3"),
            "ports = 3",
            "levels[0] ('node'): `ports` = 3 must divide the 4 device(s) of one unit",
        ),
        (
            base().replace("efficiency = 0.82", "efficiency = 1.5"),
            "efficiency = 1.5",
            "`efficiency` must be in (0, 1], got 1.5",
        ),
        (
            base().replace("copy_engines = 3", "copy_engines = 0"),
            "copy_engines = 0",
            "`device.copy_engines` must be in [1, 1048576], got 0",
        ),
        (
            base().replace("hbm_reserved_gb = 4.0", "hbm_reserved_gb = 90.0"),
            "hbm_reserved_gb = 90.0",
            "leaves nothing",
        ),
        (
            base().replace("gemm_tflops = 780.0", "gemm_tflops = -1.0"),
            "gemm_tflops = -1.0",
            "`device.rates.gemm_tflops` must be a positive number, got -1",
        ),
        (
            base().replace("name = \"h100-2x4\"", "name = \"\""),
            "name = \"\"",
            "`name` is empty",
        ),
        // Positive but absurd: the model's times came out infinite or 300 digits long
        // (a new-user pass; mercury-tune hung drawing its plot).
        (
            base().replace("gemm_tflops = 780.0", "gemm_tflops = 1e-320"),
            "gemm_tflops = 1e-320",
            "`device.rates.gemm_tflops` = 1e-320 is outside the physical range [1e-6, 1e6] TFLOP/s",
        ),
        (
            base().replace("efficiency = 0.82", "efficiency = 1e-320"),
            "efficiency = 1e-320",
            "`efficiency` = 1e-320 is outside the physical range [1e-3, 1]",
        ),
        (
            base().replace("latency_us = 3.0", "latency_us = 1e300"),
            "latency_us = 1e300",
            "`latency_us` = 1e300 is outside the physical range [0, 1e7] us",
        ),
        (
            base().replace("bandwidth_gbs = 450.0", "bandwidth_gbs = 1e-300"),
            "bandwidth_gbs = 1e-300",
            "bandwidth_gbs` = 1e-300 is outside the physical range [1e-3, 1e6] GB/s",
        ),
        (
            base().replace("sm_count = 132", "sm_count = 99999999999"),
            "sm_count = 99999999999",
            "`device.sm_count` must be in [0, 1048576]",
        ),
    ];
    for (text, line, want) in cases {
        let e = Topology::from_toml_str(&text, "t.toml").unwrap_err();
        let TopologyError::Located(d) = &e else {
            panic!("not located: {e}")
        };
        let r = d.render();
        let head = format!("t.toml:{}: error: ", value_at(&text, line));
        assert!(r.starts_with(&head), "expected '{head}...' in:\n{r}");
        assert!(r.lines().next().unwrap().contains(want), "{r}");
        // The source line and a caret under the value.
        assert!(r.lines().nth(1) == Some(line), "{r}");
    }
}

#[test]
fn value_errors_name_the_other_place_in_a_note() {
    // Two levels of one name: the second, with a note at the first.
    let text = base().replace("name = \"gpu\"", "name = \"node\"");
    let r = Topology::from_toml_str(&text, "t.toml")
        .unwrap_err()
        .to_string();
    let lines: Vec<&str> = text.lines().collect();
    let node: Vec<usize> = (0..lines.len())
        .filter(|i| lines[*i] == "name = \"node\"")
        .collect();
    assert!(
        r.starts_with(&format!(
            "t.toml:{}:8: error: levels[1] ('node'): duplicate level name",
            node[1] + 1
        )),
        "{r}"
    );
    assert!(
        r.contains(&format!(
            "t.toml:{}:8: note: levels[0] has the name 'node'",
            node[0] + 1
        )),
        "{r}"
    );
    // Levels out of order: at the faster one's bandwidth, the next one in a note.
    let text = base().replace("bandwidth_gbs = 12.5", "bandwidth_gbs = 4500.0");
    let r = Topology::from_toml_str(&text, "t.toml")
        .unwrap_err()
        .to_string();
    assert!(
        r.starts_with(&format!(
            "t.toml:{}: error: levels must be ordered slowest first",
            value_at(&text, "bandwidth_gbs = 4500.0")
        )),
        "{r}"
    );
    assert!(
        r.contains(&format!(
            "t.toml:{}: note: the next level, 'gpu'",
            value_at(&text, "bandwidth_gbs = 450.0")
        )),
        "{r}"
    );
}

#[test]
fn value_errors_in_inline_tables_and_rate_points_are_located() {
    let text = "name = \"t\"\n\
                    device = { name = \"d\", hbm_gb = 80.0, hbm_bandwidth_gbs = 1.0, copy_engines = 1, rates = { gemm_tflops = 1.0, attention_tflops = 1.0 } }\n\
                    levels = [{ name = \"gpu\", size = 0, bandwidth_gbs = 1.0, latency_us = 1.0 }]\n";
    let r = Topology::from_toml_str(text, "t.toml")
        .unwrap_err()
        .to_string();
    assert!(
        r.starts_with("t.toml:3:34: error: levels[0] ('gpu'): `size` must be at least 1"),
        "{r}"
    );
    // The error of `t` written as TOML, and the 1-based line of the `n`th (from 0) line
    // starting with `key`.
    let refused = |t: &Topology, key: &str, n: usize| {
        let text = toml::to_string(t).unwrap();
        let r = Topology::from_toml_str(&text, "t.toml")
            .unwrap_err()
            .to_string();
        let line = text
            .lines()
            .enumerate()
            .filter(|(_, l)| l.starts_with(key))
            .nth(n)
            .map(|(i, _)| i + 1)
            .unwrap();
        (r, line)
    };
    let mut t = with_points();
    t.device.rates.attention_points[1].sq = 0;
    // The second `sq = ...` line of the file is the second point's.
    let (r, line) = refused(&t, "sq = ", 1);
    assert!(
            r.starts_with(&format!(
                "t.toml:{line}:6: error: `device.rates.attention_points[1].sq` must be a positive number, got 0"
            )),
            "{r}"
        );
    // A shape measured twice: at the second point, naming the first.
    let mut t = with_points();
    let mut twice = t.device.rates.gemm_points[0].clone();
    twice.tflops *= 0.5;
    t.device.rates.gemm_points.push(twice);
    let (r, line) = refused(&t, "m = ", 2);
    assert!(
            r.starts_with(&format!(
                "t.toml:{line}:5: error: `device.rates.gemm_points[2]` repeats the shape of `gemm_points[0]` (m = 512, n = 4096, k = 8192): one measured rate per shape"
            )),
            "{r}"
        );
    let mut t = with_points();
    let twice = t.device.rates.attention_points[1].clone();
    t.device.rates.attention_points.push(twice);
    let r = Topology::from_toml_str(&toml::to_string(&t).unwrap(), "t.toml")
        .unwrap_err()
        .to_string();
    assert!(
        r.contains("`device.rates.attention_points[2]` repeats the shape of `attention_points[1]`"),
        "{r}"
    );
    // No level at all: at the empty array.
    let mut t = plain_measured();
    t.levels.clear();
    let text = toml::to_string(&t).unwrap();
    let r = Topology::from_toml_str(&text, "t.toml")
        .unwrap_err()
        .to_string();
    assert!(
        r.starts_with(&format!(
            "t.toml:{}: error: no `[[levels]]`",
            value_at(&text, "levels = ")
        )),
        "{r}"
    );
}

#[test]
fn normalized_hash_ignores_names_but_not_links() {
    let a = Topology::preset("h100-2x4").unwrap().unwrap();
    let mut b = a.clone();
    b.name = "renamed".into();
    b.description.clear();
    b.levels[0].link = "other text".into();
    assert_eq!(a.normalized_hash(), b.normalized_hash());
    b.levels[0].bandwidth_gbs = 25.0;
    assert_ne!(a.normalized_hash(), b.normalized_hash());
    let mut c = a.clone();
    c.levels[0].ports = Some(4);
    assert_ne!(a.normalized_hash(), c.normalized_hash());
}

/// `h200-1x2-measured.toml` without its rate tables.
fn plain_measured() -> Topology {
    let mut t = Topology::from_file(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../topologies/h200-1x2-measured.toml"
    )))
    .unwrap();
    t.device.rates.gemm_points.clear();
    t.device.rates.attention_points.clear();
    t
}

fn with_points() -> Topology {
    let base = toml::to_string(&plain_measured()).unwrap();
    let text = base.replace(
        "[environment]",
        "[[device.rates.gemm_points]]\nm = 512\nn = 4096\nk = 8192\ntflops = 700.0\n\n\
             [[device.rates.gemm_points]]\nm = 8192\nn = 8192\nk = 8192\ntflops = 760.0\n\n\
             [[device.rates.attention_points]]\nheads = 32\nsq = 16384\nsk = 16384\nd = 128\n\
             causal = false\ntflops = 668.0\n\n\
             [[device.rates.attention_points]]\nheads = 32\nsq = 65536\nsk = 65536\nd = 128\n\
             causal = false\ntflops = 614.0\n\n[environment]",
    );
    Topology::from_toml_str(&text, "test").unwrap()
}

#[test]
fn rate_points_price_the_nearest_measured_shape() {
    let t = with_points();
    // Exact shapes get their own point; others the nearest in octaves.
    assert_eq!(t.gemm_rate_for(512, 4096, 8192).0, 700e12);
    assert_eq!(t.gemm_rate_for(1024, 4096, 8192).0, 700e12);
    assert_eq!(t.gemm_rate_for(16384, 8192, 8192).0, 760e12);
    assert_eq!(t.attention_rate_for(32, 16384, 16384, 128, false).0, 668e12);
    assert_eq!(
        t.attention_rate_for(32, 131072, 131072, 128, false).0,
        614e12
    );
    // No point of that head dim or mask: the single figures.
    let (r, p) = t.attention_rate_for(32, 16384, 16384, 64, false);
    assert!(p.is_none());
    assert_eq!(r, t.attention_rate(false));
    assert!(t
        .attention_rate_for(32, 16384, 16384, 128, true)
        .1
        .is_none());
    // Without points: the single figures, and the hash of the file without them.
    let plain = plain_measured();
    assert_eq!(plain.gemm_rate_for(512, 4096, 8192).0, plain.gemm_rate());
    assert_ne!(plain.normalized_hash(), t.normalized_hash());
    let mut u = t.clone();
    u.device.rates.attention_points[0].tflops = 600.0;
    assert_ne!(u.normalized_hash(), t.normalized_hash());
    u.device.rates.gemm_points.clear();
    u.device.rates.attention_points.clear();
    assert_eq!(u.normalized_hash(), plain.normalized_hash());
}

#[test]
fn rate_points_are_validated() {
    let mut t = with_points();
    t.device.rates.gemm_points[1].tflops = -1.0;
    let e = t.validate().unwrap_err();
    assert!(e.contains("device.rates.gemm_points[1].tflops"), "{e}");
    let mut t = with_points();
    t.device.rates.attention_points[0].sq = 0;
    let e = t.validate().unwrap_err();
    assert!(e.contains("device.rates.attention_points[0].sq"), "{e}");
}
