//! Which known schedule (template) a generated candidate is.
//!
//! The CommIR generator names a candidate by its mesh and the role of each level
//! (`mesh 2x4: L0=ring L1=heads`, `mesh 8: L0=ring zigzag`). The templates below are the
//! schedules of `examples/schedules/` and the literature that a role assignment reproduces
//! exactly; the attention identities are checked by the simulation study
//! (`known_schedules_match_search_candidates`: same plan cost as the `.sched` file). A plain
//! parallel role (heads, gather, tree, a GEMM's k or n) on adjacent levels counts as one level
//! of that role: the template "over N mesh levels" (the same pieces on the same ranks; only
//! how its collective is carried differs, so its cost may differ; not covered by that check).
//! A `groups` level (the query heads of each key/value group split, the key/value heads
//! replicated over it) next to the `heads` levels is Ulysses with K/V head replication, the
//! usual answer when there are more ranks than key/value heads: named as the template with
//! heads there, "K/V heads replicated".
//! Anything else is a new schedule: `template_of` returns `None`.

/// The known schedule a candidate named by the generator is, or `None` for a new schedule.
pub fn template_of(name: &str) -> Option<String> {
    let roles_part = name.split_once(": ")?.1;
    let zigzag = roles_part.ends_with(" zigzag");
    let levels: Vec<&str> = roles_part
        .trim_end_matches(" zigzag")
        .split(' ')
        .filter_map(|r| r.split_once('=').map(|(_, v)| v))
        .collect();
    // A plain parallel split (heads, a K/V all-gather, a tree reduction, a GEMM axis) over two
    // adjacent levels is the same schedule over the product of the levels: the same pieces end
    // on the same ranks, only how the collective is carried differs. One role. A ring or shift
    // over two levels is not (LoongTrain is two rings).
    // `groups` directly after the heads levels splits the query heads further (K/V heads
    // replicated): heads over the product of the levels.
    let replicated = levels
        .windows(2)
        .any(|w| matches!(w[0], "heads" | "groups") && w[1] == "groups");
    let mut roles: Vec<&str> = Vec::with_capacity(levels.len());
    for r in &levels {
        let r = if *r == "groups" && roles.last() == Some(&"heads") {
            "heads"
        } else {
            *r
        };
        if roles.last() != Some(&r) || !matches!(r, "heads" | "gather" | "tree" | "k" | "n") {
            roles.push(r);
        }
    }
    let t = match (roles.as_slice(), zigzag) {
        // Attention.
        (["ring"], false) => "ring (RingAttention, ring_attention.sched)",
        (["ring"], true) => "zigzag ring (load-balanced context parallel, zigzag_ring.sched)",
        (["ring", "ring"], false) => "loongtrain (two-level ring, loongtrain.sched)",
        // The attention backward's ring with dK/dV accumulators travelling with K/V.
        (["ring+carry"], false) => "ring-flash-attn backward (ring_flash_attn_bwd.sched)",
        (["ring+carry"], true) => {
            "ring-flash-attn zigzag backward (zigzag_ring_flash_attn_bwd.sched)"
        }
        (["heads"], false) => "ulysses (ulysses.sched)",
        (["ring", "heads"], false) => "usp (ring across, ulysses within, usp.sched)",
        (["gather"], false) => "context-parallel (all-gather K/V, context_parallel.sched)",
        (["tree"], false) => "tree attention (tree_attention.sched)",
        // GEMM.
        (["n+ring(m)"], false) => "asynctp all-gather GEMM (asynctp_ag_gemm.sched)",
        (["k+shift(m)"], false) => "shift-reduce GEMM reduce-scatter (shift_reduce.sched)",
        (["k+shift-halves(m)"], false) => "shift-reduce in half blocks (shift_reduce_halves.sched)",
        (["k"], false) => "megatron row-parallel (megatron_rs.sched)",
        (["n"], false) => "megatron column-parallel",
        _ => return None,
    };
    let t = match (replicated, roles.as_slice()) {
        (true, ["heads"]) => {
            "ulysses with K/V heads replicated (ulysses_kv_replicated.sched)".to_string()
        }
        (true, _) => format!("{t}, K/V heads replicated"),
        (false, _) => t.to_string(),
    };
    Some(if roles.len() < levels.len() {
        format!("{t}, over {} mesh levels", levels.len())
    } else {
        t
    })
}

#[cfg(test)]
mod tests {
    use super::template_of;

    #[test]
    fn known_and_new() {
        assert!(template_of("mesh 8: L0=ring").unwrap().starts_with("ring"));
        assert!(template_of("mesh 8: L0=ring zigzag")
            .unwrap()
            .starts_with("zigzag"));
        assert!(template_of("mesh 2x4: L0=ring L1=heads")
            .unwrap()
            .starts_with("usp"));
        assert!(template_of("mesh 4x2: L0=ring L1=ring")
            .unwrap()
            .starts_with("loongtrain"));
        assert_eq!(template_of("mesh 2x4: L0=heads L1=tree"), None);
        // Heads or gathers over adjacent levels are one role; rings are not.
        assert_eq!(
            template_of("mesh 2x2x2: L0=ring L1=heads L2=heads").unwrap(),
            "usp (ring across, ulysses within, usp.sched), over 3 mesh levels"
        );
        assert!(template_of("mesh 2x4: L0=gather L1=gather")
            .unwrap()
            .starts_with("context-parallel"));
        assert!(template_of("mesh 2x2x2: L0=heads L1=heads L2=heads")
            .unwrap()
            .starts_with("ulysses"));
        assert_eq!(template_of("mesh 2x2x2: L0=ring L1=heads L2=ring"), None);
        assert_eq!(template_of("mesh 2x2x2: L0=heads L1=ring L2=heads"), None);
        assert!(template_of("mesh 2x2x2: L0=ring L1=ring L2=heads").is_none());
        assert!(template_of("mesh 4x2: L0=tree L1=tree")
            .unwrap()
            .starts_with("tree attention"));
        assert!(template_of("mesh 2x4: L0=k L1=k")
            .unwrap()
            .starts_with("megatron row-parallel"));
        assert!(template_of("mesh 2x4: L0=n L1=n")
            .unwrap()
            .starts_with("megatron column-parallel"));
        assert_eq!(template_of("mesh 2x4: L0=n+ring(m) L1=n+ring(m)"), None);
        assert_eq!(template_of("mesh 2x2x2: L0=ring L1=ring L2=ring"), None);
        assert_eq!(template_of("mesh 8: L0=tree+shift(i)"), None);
        assert_eq!(
            template_of("mesh 8: L0=ring+carry zigzag").unwrap(),
            "ring-flash-attn zigzag backward (zigzag_ring_flash_attn_bwd.sched)"
        );
        assert_eq!(template_of("mesh 2x4: L0=ring+carry L1=ring+carry"), None);
        assert_eq!(template_of("plan0"), None);
        // K/V head replication: groups after the heads levels.
        assert_eq!(
            template_of("mesh 2x4: L0=heads L1=groups").unwrap(),
            "ulysses with K/V heads replicated (ulysses_kv_replicated.sched), over 2 mesh levels"
        );
        assert!(template_of("mesh 2x2x2: L0=ring L1=heads L2=groups")
            .unwrap()
            .starts_with("usp (ring across, ulysses within, usp.sched), K/V heads replicated"));
        // Groups before the heads, or alone, is not a template.
        assert_eq!(template_of("mesh 2x4: L0=groups L1=heads"), None);
        assert_eq!(template_of("mesh 8: L0=groups"), None);
    }
}
