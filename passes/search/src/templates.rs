//! Which known schedule (template) a generated candidate is.
//!
//! The CommIR generator names a candidate by its mesh and the role of each level
//! (`mesh 2x4: L0=ring L1=heads`, `mesh 8: L0=ring zigzag`). The templates below are the
//! schedules of `examples/schedules/` and the literature that a role assignment reproduces
//! exactly; the attention identities are checked by the simulation study
//! (`known_schedules_match_search_candidates`: same plan cost as the `.sched` file). Anything
//! else is a new schedule: `template_of` returns `None`.

/// The known schedule a candidate named by the generator is, or `None` for a new schedule.
pub fn template_of(name: &str) -> Option<String> {
    let roles_part = name.split_once(": ")?.1;
    let zigzag = roles_part.ends_with(" zigzag");
    let roles: Vec<&str> = roles_part
        .trim_end_matches(" zigzag")
        .split(' ')
        .filter_map(|r| r.split_once('=').map(|(_, v)| v))
        .collect();
    let t = match (roles.as_slice(), zigzag) {
        // Attention.
        (["ring"], false) => "ring (RingAttention, ring_attention.sched)",
        (["ring"], true) => "zigzag ring (load-balanced context parallel, zigzag_ring.sched)",
        (["ring", "ring"], false) => "loongtrain (two-level ring, loongtrain.sched)",
        (["heads"], false) => "ulysses (ulysses.sched)",
        (["ring", "heads"], false) => "usp (ring across, ulysses within, usp.sched)",
        (["gather"], false) => "context-parallel (all-gather K/V, context_parallel.sched)",
        (["tree"], false) => "tree attention (tree_attention.sched)",
        // GEMM.
        (["n+ring(m)"], false) => "asynctp all-gather GEMM (asynctp_ag_gemm.sched)",
        (["k+shift(m)"], false) => "shift-reduce GEMM reduce-scatter (shift_reduce.sched)",
        (["k"], false) => "megatron row-parallel (megatron_rs.sched)",
        (["n"], false) => "megatron column-parallel",
        _ => return None,
    };
    Some(t.to_string())
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
        assert_eq!(template_of("mesh 8: L0=tree+shift(i)"), None);
        assert_eq!(template_of("plan0"), None);
    }
}
