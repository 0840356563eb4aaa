use super::*;

fn small() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/small/llama3_layer.mlir"
    ))
    .unwrap()
}

#[test]
fn name_kernel_adds_the_kernel_to_every_pass() {
    let s = candidates::name_kernel(
        "tile{axis=i factor=8 outer=i0 inner=i_t} # c\n\nparallelize{kernel=k axis=i0 level=0}\nsymbol-dce\n",
        "attention",
    );
    assert_eq!(
        s,
        "tile{kernel=attention axis=i factor=8 outer=i0 inner=i_t}\nparallelize{kernel=k axis=i0 level=0}\nsymbol-dce{kernel=attention}\n"
    );
}

#[test]
fn the_layer_has_candidates_edges_and_weights() {
    let t = Topology::preset("h100-1x8").unwrap().unwrap();
    let s = LayerSearch::new(&small(), "small.mlir", &t).unwrap();
    let names: Vec<&str> = s.kernels().iter().map(|k| k.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "attn_norm",
            "qkv_rope",
            "attention",
            "o_proj",
            "ffn_norm",
            "gate_up",
            "down",
            "residual"
        ]
    );
    let w: Vec<&str> = s.weights.iter().map(String::as_str).collect();
    assert_eq!(w, ["Wd", "Wg", "Wk", "Wn1", "Wn2", "Wo", "Wq", "Wu", "Wv"]);
    // attention: the operator search's candidates beside par(..).
    assert!(s.candidates[2].iter().any(|c| c.name == "mesh 8: L0=ring"));
    assert!(s.candidates[2].iter().any(|c| c.name == "par(hk)"));
    // The residual's output is the module's: it has no out mode but the declared one.
    assert_eq!(s.outs[7].len(), 1);
    assert!(s.outs[1].iter().any(|o| o.name == "by(hk)"));
    // residual reads H from ffn_norm and D from down.
    assert_eq!(
        s.inputs[7],
        vec![("H".to_string(), 4), ("D".to_string(), 6)]
    );
}

#[test]
fn the_frontier_is_exact_against_enumeration_on_a_prefix() {
    // On the first three kernels (a chain), the DP's fastest equals brute force.
    let t = Topology::preset("h100-2x4").unwrap().unwrap();
    let s = LayerSearch::new(&small(), "small.mlir", &t).unwrap();
    let best = s.best().unwrap();
    // Brute force over attn_norm x qkv_rope, the rest fixed to the pick.
    let mut bf = f64::INFINITY;
    for c0 in 0..s.candidates[0].len() {
        for o0 in 0..s.outs[0].len() {
            for c1 in 0..s.candidates[1].len() {
                for o1 in 0..s.outs[1].len() {
                    let mut ch = best.choices.clone();
                    ch[0] = Choice {
                        candidate: c0,
                        out: o0,
                    };
                    ch[1] = Choice {
                        candidate: c1,
                        out: o1,
                    };
                    if let Some(p) = s.evaluate(&ch) {
                        bf = bf.min(p.seconds);
                    }
                }
            }
        }
    }
    assert!(
        (bf - best.seconds).abs() <= 1e-12 * bf,
        "{bf} vs {}",
        best.seconds
    );
    let again = s.evaluate(&best.choices).unwrap();
    assert_eq!(again.seconds, best.seconds);
}

#[test]
fn memory_counts_the_residual_stream_and_the_cap_binds() {
    let t = Topology::preset("h100-1x8").unwrap().unwrap();
    let s = LayerSearch::new(&small(), "small.mlir", &t).unwrap();
    // While attention runs, the layer's input X waits for ffn_norm; while gate_up runs, H waits
    // for the residual.
    assert!(s.live[2].contains(&("X".to_string(), None)));
    assert!(s.live[5].contains(&("H".to_string(), Some(4))));
    // X [1, 128, 128] f32 sequence-sharded over 8: 8 KiB a rank.
    assert!(s.live_bytes(2, &|_| 0) >= 8192);
    let front = s.frontier(u64::MAX);
    assert!(front.len() >= 2, "a frontier of one point: {front:?}");
    for w in front.windows(2) {
        assert!(w[0].seconds <= w[1].seconds && w[0].memory_bytes > w[1].memory_bytes);
    }
    // A cap between the fastest and the smallest point picks a slower, smaller plan.
    let (fast, small) = (&front[0], front.last().unwrap());
    let cap = small.memory_bytes;
    let capped = s.frontier(cap);
    assert!(capped[0].memory_bytes <= cap && capped[0].seconds >= fast.seconds);
    assert!(s.frontier(small.memory_bytes - 1).is_empty());
    // Every point re-prices to itself.
    let again = s.evaluate(&small.choices).unwrap();
    assert_eq!(again.memory_bytes, small.memory_bytes);
}

#[test]
fn the_picks_script_prices_as_the_search_priced_it() {
    // Pricing each kernel inside the module (its writers' edges placed, its own schedule) gives
    // what the whole script gives when applied as mercury-run --module applies it.
    for topo in ["h100-2x4", "h200-1x8"] {
        let t = Topology::preset(topo).unwrap().unwrap();
        let s = LayerSearch::new(&small(), "small.mlir", &t).unwrap();
        let pick = s.best().unwrap();
        let whole = s.price_script(&s.script(&pick)).unwrap();
        for (at, (w, p)) in whole.iter().zip(&pick.priced).enumerate() {
            assert_eq!(*w, p.seconds, "{topo}: kernel {at}");
        }
        // The shipped context-parallel schedule prices too, and the pick is no slower.
        let cp = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/schedules/llama3_layer_cp.sched"
        ))
        .unwrap();
        let cp: f64 = s.price_script(&cp).unwrap().iter().sum();
        assert!(
            pick.seconds <= cp,
            "{topo}: pick {} vs cp {cp}",
            pick.seconds
        );
    }
}

#[test]
fn causal_attention_offers_zigzag_rings_that_lower() {
    let t = Topology::preset("h100-1x8").unwrap().unwrap();
    let s = LayerSearch::new(&small(), "small.mlir", &t).unwrap();
    let z = s.candidates[2]
        .iter()
        .position(|c| c.name == "mesh 8: L0=ring zigzag")
        .expect("a zigzag ring candidate");
    assert!(s.candidates[2][z]
        .script
        .contains("balance-causal{kernel=attention}"));
    let arriving = s.arriving(2, &|_| 0);
    assert!(s
        .price(
            2,
            Choice {
                candidate: z,
                out: 0
            },
            &arriving
        )
        .is_some());
}

#[test]
fn the_shipped_tp_schedule_is_the_searchs_tp_sp() {
    // examples/schedules/llama3_layer_tp.sched (Megatron TP+SP, edges placed by heads and by
    // the hidden dim) prices as the search's choice of the same schedules, kernel by kernel.
    let t = Topology::preset("h100-2x4").unwrap().unwrap();
    let s = LayerSearch::new(&small(), "small.mlir", &t).unwrap();
    let tp = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/schedules/llama3_layer_tp.sched"
    ))
    .unwrap();
    let shipped = s.price_script(&tp).unwrap();
    let names = [
        ("par(i)", "declared"),
        ("par(hk)", "by(hk)"),
        ("par(hk)", "by(hk)"),
        ("par(h)", "declared"),
        ("par(i)", "declared"),
        ("par(f)", "by(f)"),
        ("par(f)", "declared"),
        ("par(i)", "declared"),
    ];
    let choices: Vec<Choice> = names
        .iter()
        .enumerate()
        .map(|(at, (c, o))| s.choice(at, c, o).unwrap())
        .collect();
    let searched = s.evaluate(&choices).unwrap();
    for (at, (a, b)) in shipped.iter().zip(&searched.priced).enumerate() {
        assert_eq!(*a, b.seconds, "kernel {at}");
    }
    // The search's TP+SP configuration is no slower than the shipped one.
    let tp_sp = baselines().into_iter().find(|b| b.name == "TP+SP").unwrap();
    let best = s.baseline(&tp_sp, u64::MAX).unwrap();
    assert!(best.seconds <= searched.seconds);
}
