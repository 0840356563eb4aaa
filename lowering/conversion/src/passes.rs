//! The passes that print what the conversion makes of a kernel, as `//` comment lines on
//! standard output ahead of the IR (the IR is unchanged):
//! - `commir-print-comm-plan{detail=true}`: the communication the annotations imply (per
//!   buffer: ring P2P, all-gather, all-reduce, reduce-scatter, all-to-all, partial transfers of
//!   shift-reduce, permutations into and out of zigzag or striped placements; with `detail`,
//!   every transfer with its stage, peers and bytes), the buffers placed zigzag or striped,
//!   and for causal attention how evenly the ranks share the work;
//! - `commir-print-memory`: the per-rank memory of the plan (every slot, double buffers and
//!   accumulators included).

use mercury_commir::pass::KernelPass;
use mercury_commir::Kernel;
use mercury_ir::pass::{PassInfo, PassRegistry};
use mercury_ir::{Diagnostic, Operation};
use std::io::Write;

/// The passes of this crate.
pub static PASSES: &[&PassInfo] = &[&comm_plan::INFO, &memory::INFO];

/// Registers the passes of this crate.
pub fn register(registry: &mut PassRegistry) {
    for p in PASSES {
        registry.register(p);
    }
}

/// Writes a report to standard output; a closed pipe is not an error here.
fn print(report: &str) {
    let _ = write!(std::io::stdout(), "{report}");
}

pub mod comm_plan {
    //! `commir-print-comm-plan`.
    use super::*;

    mercury_commir::kernel_pass! {
        /// The options of `commir-print-comm-plan`.
        pub struct PrintCommPlan = "commir-print-comm-plan", "Print the communication plan inferred from the annotations", {
            detail: bool = "false" => "list every transfer",
        }
    }

    impl KernelPass for PrintCommPlan {
        fn apply(&self, _: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
            let plan = crate::lower_kernel(m)?;
            let mut report = crate::report::comm_plan(&plan, self.detail);
            report += &crate::report::placements(m);
            report += &crate::report::causal_balance(&plan).unwrap_or_default();
            print(&report);
            Ok(())
        }
    }
}

pub mod memory {
    //! `commir-print-memory`.
    use super::*;

    mercury_commir::kernel_pass! {
        /// `commir-print-memory` takes no options of its own.
        pub struct PrintMemory = "commir-print-memory", "Print the per-rank memory of the lowered plan", {}
    }

    impl KernelPass for PrintMemory {
        fn apply(&self, _: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
            let plan = crate::lower_kernel(m)?;
            print(&crate::report::memory(&plan));
            Ok(())
        }
    }
}
