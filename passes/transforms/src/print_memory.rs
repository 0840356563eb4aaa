//! `commir-print-memory`: prints the per-rank memory of each kernel's plan (every slot,
//! double buffers and accumulators included) as `//` comment lines on stdout.

use mercury_commir::kernel_pass;
use mercury_commir::pass::KernelPass;
use mercury_commir::Kernel;
use mercury_ir::{Diagnostic, Operation};

kernel_pass! {
    /// `commir-print-memory` takes no options of its own.
    pub struct PrintMemory = "commir-print-memory", "Print the per-rank memory of the lowered plan", {
    }
}

impl KernelPass for PrintMemory {
    fn apply(&self, _: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
        let plan = mercury_conversion::lower_kernel(m)?;
        // Reports go to standard output ahead of the IR; a closed pipe is not an error here.
        use std::io::Write;
        let _ = write!(
            std::io::stdout(),
            "{}",
            mercury_conversion::report::memory(&plan)
        );
        Ok(())
    }
}
