//! `commir-print-memory`: prints the per-rank memory of each kernel's plan (every slot,
//! double buffers and accumulators included) as `//` comment lines on stdout.

use crate::util::kernel_names;
use mercury_ir::pass::{Pass, PassInfo, PassOptionDef, PassOptions};
use mercury_ir::{Diagnostic, Operation, Registry};

pub static INFO: PassInfo = PassInfo {
    name: "commir-print-memory",
    summary: "Print the per-rank memory of the lowered plan",
    options: &[PassOptionDef {
        name: "kernel",
        help: "kernel to print (default: all)",
        default: Some(""),
    }],
    create: |o: &PassOptions| {
        Ok(Box::new(PrintMemory {
            kernel: o.get("kernel").to_string(),
        }))
    },
};

pub struct PrintMemory {
    pub kernel: String,
}

impl Pass for PrintMemory {
    fn run(&self, module: &mut Operation, _: &Registry) -> Result<(), Diagnostic> {
        for name in kernel_names(module, &self.kernel)? {
            let plan = mercury_conversion::lower_module(module, Some(&name))?;
            // Reports go to standard output ahead of the IR; a closed pipe is not an error here.
            use std::io::Write;
            let _ = write!(
                std::io::stdout(),
                "{}",
                mercury_conversion::report::memory(&plan)
            );
        }
        Ok(())
    }
}
