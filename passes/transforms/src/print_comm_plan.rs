//! `commir-print-comm-plan{detail=true}`: lowers each kernel to its per-rank plan and prints
//! the communication the annotations imply (per buffer: ring P2P, all-gather, all-reduce,
//! reduce-scatter, all-to-all, partial transfers of shift-reduce; with `detail`, every transfer
//! with its stage, peers and bytes) as `//` comment lines on stdout. The IR is unchanged.

use mercury_commir::kernel_pass;
use mercury_commir::pass::KernelPass;
use mercury_commir::Kernel;
use mercury_ir::{Diagnostic, Operation};

kernel_pass! {
    /// The options of `commir-print-comm-plan`.
    pub struct PrintCommPlan = "commir-print-comm-plan", "Print the communication plan inferred from the annotations", {
        detail: bool = "false" => "list every transfer",
    }
}

impl KernelPass for PrintCommPlan {
    fn apply(&self, _: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
        let plan = mercury_conversion::lower_kernel(m)?;
        // Reports go to standard output ahead of the IR; a closed pipe is not an error here.
        use std::io::Write;
        let report = mercury_conversion::report::comm_plan(&plan, self.detail);
        let _ = write!(std::io::stdout(), "{report}");
        Ok(())
    }
}
