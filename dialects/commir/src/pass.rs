//! Kernel passes: the pass kind of every CommIR schedule primitive (MLIR's
//! `OperationPass<KernelOp>`). A [`KernelPass`] rewrites one `commir.kernel`, given its checked
//! model; the [`OnKernels`] adapter owns what every such pass shares: the `kernel=` option,
//! the loop over the module's kernels, and the re-check of the model after the rewrite.
//! [`kernel_pass!`](crate::kernel_pass) declares a pass's options once, on its struct, and its
//! registration.

use crate::model::Kernel;
use crate::ops::KernelOp;
use mercury_ir::pass::{Pass, PassOptions};
use mercury_ir::{Diagnostic, Operation, Registry};

/// A rewrite of one `commir.kernel`.
pub trait KernelPass {
    /// Rewrites the kernel `m` names in `module`. `m` is its model before the rewrite; the
    /// kernel op itself is [`kernel_mut`]`(module, &m.name)`.
    fn apply(&self, module: &mut Operation, m: &Kernel) -> Result<(), Diagnostic>;

    /// The primitive as a function: checks kernel `name` of `module`, rewrites it, and checks
    /// the result (what the pass does for one kernel; composite passes and the search call it).
    fn apply_to(&self, module: &mut Operation, name: &str) -> Result<(), Diagnostic> {
        let m = model(module, name)?;
        self.apply(module, &m)?;
        let after = model(module, name)?;
        if self.keeps_output_placements() {
            check_output_contract(&m, &after)?;
        }
        Ok(())
    }

    /// Whether the pass leaves every output's declared placement as it found it (checked
    /// after each rewrite: an output's placement is the operator's contract). Only a pass that
    /// re-expresses placements says no (`join`: two dimensions become one).
    fn keeps_output_placements(&self) -> bool {
        true
    }
}

/// Refuses a rewrite of kernel `before` into `after` that changed the declared placement of an
/// output (what a pass author forgets when a pass re-places buffers: `keep_output_contract` in
/// the transforms checks it before the rewrite, with the pass's own message), located at the
/// output's declaration.
fn check_output_contract(before: &Kernel, after: &Kernel) -> Result<(), Diagnostic> {
    for b in before
        .buffers
        .iter()
        .filter(|b| matches!(b.role, crate::Role::Out | crate::Role::InOut))
    {
        let Some(a) = after.buffer(&b.name) else {
            return Err(Diagnostic::error(
                b.loc.clone(),
                format!("the pass removed the output '@{}'", b.name),
            ));
        };
        if a.placement() != b.placement() {
            return Err(Diagnostic::error(
                a.loc.clone(),
                format!(
                    "the pass changed the declared placement of the output '@{}' (an output's declared placement is the operator's contract: a schedule computes it where its loops put it and delivers it as declared; check it before rewriting, as `keep_output_contract` does)",
                    b.name
                ),
            ));
        }
    }
    Ok(())
}

/// Runs a [`KernelPass`] on every kernel of a module, or on the one `kernel=` names.
pub struct OnKernels<P> {
    pub pass: P,
    /// The kernel to transform (`@` optional); empty: every kernel.
    pub kernel: String,
}

impl<P: KernelPass> Pass for OnKernels<P> {
    fn run(&self, module: &mut Operation, _: &Registry) -> Result<(), Diagnostic> {
        for name in kernel_names(module, &self.kernel)? {
            self.pass.apply_to(module, &name)?;
        }
        Ok(())
    }
}

impl<P> OnKernels<P> {
    /// The adapter around `pass`, with the `kernel` option read from `o`.
    pub fn new(pass: P, o: &PassOptions) -> OnKernels<P> {
        OnKernels {
            pass,
            kernel: o.get("kernel").to_string(),
        }
    }
}

/// The help of the `kernel=` option every kernel pass has.
pub const KERNEL_OPTION_HELP: &str = "the kernel to transform (every kernel when not given)";

fn is_kernel(op: &Operation, name: &str) -> bool {
    KernelOp::cast(op).is_some() && op.symbol_name() == Some(name)
}

/// The checked model of kernel `name` of `module`.
pub fn model(module: &Operation, name: &str) -> Result<Kernel, Diagnostic> {
    let k = module
        .body(0)
        .iter()
        .find(|o| is_kernel(o, name))
        .ok_or_else(|| no_such_kernel(module, name))?;
    Kernel::from_op(module, k)
}

/// "No kernel `name`", located at the module's first kernel and naming every kernel it has
/// (at the module when it has none: an implicit module's location is its first line).
fn no_such_kernel(module: &Operation, name: &str) -> Diagnostic {
    let kernels: Vec<&Operation> = module
        .body(0)
        .iter()
        .filter(|o| KernelOp::cast(*o).is_some())
        .collect();
    let names: Vec<String> = kernels
        .iter()
        .filter_map(|o| o.symbol_name())
        .map(|n| format!("'@{n}'"))
        .collect();
    match kernels.first() {
        None => Diagnostic::error(
            module.loc.clone(),
            format!("no commir.kernel named '@{name}': the module has no commir.kernel"),
        ),
        Some(first) => Diagnostic::error(
            first.loc.clone(),
            format!(
                "no commir.kernel named '@{name}': the module's kernels are {}",
                names.join(", ")
            ),
        ),
    }
}

/// Names of the kernels a pass applies to: all, or the one `kernel` names (`@` optional).
pub fn kernel_names(module: &Operation, kernel: &str) -> Result<Vec<String>, Diagnostic> {
    let names: Vec<String> = module
        .body(0)
        .iter()
        .filter_map(KernelOp::cast)
        .filter_map(|o| o.sym_name())
        .filter(|n| kernel.is_empty() || n == kernel.trim_start_matches('@'))
        .collect();
    if names.is_empty() {
        return Err(if kernel.is_empty() {
            Diagnostic::error(module.loc.clone(), "no commir.kernel in the module")
        } else {
            no_such_kernel(module, kernel.trim_start_matches('@'))
        });
    }
    Ok(names)
}

/// The `commir.kernel` op named `name`, to rewrite. Panics if there is none: call it with the
/// name of a model built from the same module.
pub fn kernel_mut<'a>(module: &'a mut Operation, name: &str) -> &'a mut Operation {
    module
        .body_mut(0)
        .iter_mut()
        .find(|o| is_kernel(o, name))
        .expect("kernel exists")
}

/// Declares a kernel pass: its options once, on its struct (as
/// [`pass_options!`](mercury_ir::pass_options): type, optional default, help), and its
/// `pub static INFO` registration, whose options end with the adapter's `kernel=`. The struct
/// implements [`KernelPass`] by hand.
///
/// ```ignore
/// kernel_pass! {
///     /// `shift{axis=j by=i}`: ...
///     pub struct Shift = "shift", "Stagger a sequential loop by a parallel loop", {
///         axis: String => "the sequential loop's axis",
///         by: String => "the enclosing parallel loop's axis",
///     }
/// }
/// ```
#[macro_export]
macro_rules! kernel_pass {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident = $pass:literal, $summary:expr, {
            $($field:ident : $ty:ty $(= $default:literal)? => $help:literal),* $(,)?
        }
    ) => {
        mercury_ir::pass_options! {
            $(#[$meta])*
            $vis struct $name {
                $($field: $ty $(= $default)? => $help,)*
            }
            extra: [mercury_ir::pass::PassOptionDef {
                name: "kernel",
                help: $crate::pass::KERNEL_OPTION_HELP,
                default: Some(""),
            }]
        }

        /// The pass's registration.
        pub static INFO: mercury_ir::pass::PassInfo = mercury_ir::pass::PassInfo {
            name: $pass,
            summary: $summary,
            options: $name::OPTIONS,
            target: Some("kernel"),
            create: |o: &mercury_ir::pass::PassOptions| {
                Ok(Box::new($crate::pass::OnKernels::new($name::from_options(o)?, o)))
            },
        };
    };
}
