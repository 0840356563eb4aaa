//! Memory model: the bytes a plan needs on each device, checked against HBM capacity.
//!
//! A [`Plan`] states every local allocation explicitly (its slots, allocated for the whole
//! run), so the per-rank footprint is the sum of the rank's slot sizes. The topology's
//! `hbm_reserved_gb` stands for what lives outside the plan (CUDA context, NCCL buffers,
//! library workspaces). Candidates whose largest rank exceeds the rest are pruned before
//! anything is simulated or profiled.

use crate::topology::Topology;
use mercury_plan::Plan;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryReport {
    /// Bytes of the slots of each rank.
    pub per_rank: Vec<u64>,
    /// The largest per-rank footprint and the rank that has it.
    pub peak_bytes: u64,
    pub peak_rank: usize,
    /// Usable bytes per device (capacity minus the reserve).
    pub usable_bytes: u64,
    pub fits: bool,
    /// The biggest slots of the peak rank (name, bytes), largest first, at most 8.
    pub largest_slots: Vec<(String, u64)>,
}

impl MemoryReport {
    /// Peak footprint as a fraction of the usable memory.
    pub fn utilisation(&self) -> f64 {
        self.peak_bytes as f64 / self.usable_bytes.max(1) as f64
    }
}

/// Per-rank footprint of `plan` and whether it fits on `topo`'s devices.
pub fn memory_report(plan: &Plan, topo: &Topology) -> MemoryReport {
    let per_rank: Vec<u64> = plan
        .ranks
        .iter()
        .map(|r| {
            r.slots
                .iter()
                .map(|s| {
                    s.shape.iter().fold(s.dtype.size_bytes() as u64, |a, &d| {
                        a.saturating_mul(d as u64)
                    })
                })
                .fold(0u64, u64::saturating_add)
        })
        .collect();
    let (peak_rank, peak_bytes) = per_rank
        .iter()
        .copied()
        .enumerate()
        .max_by_key(|(_, b)| *b)
        .unwrap_or((0, 0));
    let mut largest_slots: Vec<(String, u64)> = plan
        .ranks
        .get(peak_rank)
        .map(|r| {
            r.slots
                .iter()
                .map(|s| {
                    let b = s.shape.iter().fold(s.dtype.size_bytes() as u64, |a, &d| {
                        a.saturating_mul(d as u64)
                    });
                    (s.name.clone(), b)
                })
                .collect()
        })
        .unwrap_or_default();
    largest_slots.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    largest_slots.truncate(8);
    let usable_bytes = topo.usable_hbm_bytes();
    MemoryReport {
        fits: peak_bytes <= usable_bytes,
        per_rank,
        peak_bytes,
        peak_rank,
        usable_bytes,
        largest_slots,
    }
}

/// Formats bytes as GB (1e9) with two decimals.
pub fn gb(bytes: u64) -> String {
    format!("{:.2} GB", bytes as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mercury_plan::{DType, RankProgram, Slot, SlotInit};

    fn plan_with(slots_per_rank: Vec<Vec<(usize, DType)>>) -> Plan {
        Plan {
            name: "m".into(),
            mesh: vec![slots_per_rank.len()],
            buffers: vec![],
            documents: vec![],
            ranks: slots_per_rank
                .into_iter()
                .enumerate()
                .map(|(i, slots)| RankProgram {
                    rank: i,
                    coords: vec![i],
                    slots: slots
                        .into_iter()
                        .enumerate()
                        .map(|(j, (n, dtype))| Slot {
                            name: format!("s{j}"),
                            dtype,
                            shape: vec![n, 1000],
                            init: SlotInit::Uninit,
                        })
                        .collect(),
                    stages: vec![],
                    outputs: vec![],
                })
                .collect(),
        }
    }

    #[test]
    fn sums_slots_and_prunes_over_capacity() {
        let topo = Topology::preset("h100-2x4").unwrap().unwrap();
        // 76 GB usable on an 80 GB H100 with a 4 GB reserve.
        let p = plan_with(vec![
            vec![(1_000_000, DType::BF16), (500_000, DType::F32)],
            vec![(30_000_000, DType::BF16)],
        ]);
        let m = memory_report(&p, &topo);
        assert_eq!(m.per_rank, vec![4_000_000_000, 60_000_000_000]);
        assert_eq!(m.peak_rank, 1);
        assert!(m.fits);
        let p = plan_with(vec![vec![(38_000_001, DType::BF16)]]);
        let m = memory_report(&p, &topo);
        assert!(!m.fits, "76.000002 GB must not fit in 76 GB");
        let p = plan_with(vec![vec![(38_000_000, DType::BF16)]]);
        assert!(memory_report(&p, &topo).fits, "exactly 76 GB fits");
    }
}
