//! `commir-print-comm-plan{detail=true}`: lowers each kernel to its per-rank plan and prints
//! the communication the annotations imply (per buffer: ring P2P, all-gather, all-reduce,
//! reduce-scatter, all-to-all, partial transfers of shift-reduce; with `detail`, every transfer
//! with its stage, peers and bytes) as `//` comment lines on stdout. The IR is unchanged.

use crate::util::kernel_names;
use mercury_ir::pass::{Pass, PassInfo, PassOptionDef, PassOptions};
use mercury_ir::{Diagnostic, Operation, Registry};

pub static INFO: PassInfo = PassInfo {
    name: "commir-print-comm-plan",
    summary: "Print the communication plan inferred from the annotations",
    options: &[
        PassOptionDef {
            name: "detail",
            help: "list every transfer",
            default: Some("false"),
        },
        PassOptionDef {
            name: "kernel",
            help: "kernel to print (default: all)",
            default: Some(""),
        },
    ],
    create: |o: &PassOptions| {
        Ok(Box::new(PrintCommPlan {
            detail: o.get_bool("detail")?,
            kernel: o.get("kernel").to_string(),
        }))
    },
};

pub struct PrintCommPlan {
    pub detail: bool,
    pub kernel: String,
}

impl Pass for PrintCommPlan {
    fn run(&self, module: &mut Operation, _: &Registry) -> Result<(), Diagnostic> {
        for name in kernel_names(module, &self.kernel)? {
            let plan = mercury_conversion::lower_module(module, Some(&name))?;
            // Reports go to standard output ahead of the IR; a closed pipe is not an error here.
            use std::io::Write;
            let report = mercury_conversion::report::comm_plan(&plan, self.detail);
            let _ = write!(std::io::stdout(), "{report}");
        }
        Ok(())
    }
}
