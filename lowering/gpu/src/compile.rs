//! In-process MLIR -> NVVM -> PTX compilation with melior.

use crate::{gpu_module_mlir, gpu_module_mlir_with, DeviceKernel, LoweringError, TileKernel};
use melior::{
    dialect::DialectRegistry,
    ir::{
        attribute::ArrayAttribute,
        operation::{OperationLike, OperationRef, WalkOrder, WalkResult},
        AttributeLike, Module,
    },
    pass::PassManager,
    utility::{
        parse_pass_pipeline, register_all_dialects, register_all_llvm_translations,
        register_all_passes,
    },
    Context,
};
use std::{
    cell::RefCell,
    rc::Rc,
    sync::{Mutex, MutexGuard, Once},
};

/// NVPTX code generation options (the `nvvm-attach-target` options).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TargetOptions {
    /// SM architecture, e.g. `sm_90`, `sm_90a`, `sm_80`.
    pub chip: String,
    /// LLVM NVPTX features: comma-separated `+ptxNN` (PTX ISA version), e.g.
    /// `+ptx80`. Must be at least the minimum PTX version of `chip`.
    pub features: String,
    /// LLVM optimisation level, 0..=3.
    pub opt_level: u8,
}

impl Default for TargetOptions {
    fn default() -> Self {
        TargetOptions {
            chip: "sm_90".to_string(),
            features: "+ptx80".to_string(),
            opt_level: 3,
        }
    }
}

/// `(chip, minimum PTX ISA version x10)` for every NVPTX processor LLVM 22
/// knows. Measured with `llc-22 -mcpu=<chip> -mattr=+ptxNN` (lowest NN that
/// does not hit LLVM's fatal "PTX version ... does not support target").
const CHIPS: &[(&str, u32)] = &[
    ("sm_20", 32),
    ("sm_21", 32),
    ("sm_30", 32),
    ("sm_32", 40),
    ("sm_35", 32),
    ("sm_37", 41),
    ("sm_50", 40),
    ("sm_52", 41),
    ("sm_53", 42),
    ("sm_60", 50),
    ("sm_61", 50),
    ("sm_62", 50),
    ("sm_70", 60),
    ("sm_72", 61),
    ("sm_75", 63),
    ("sm_80", 70),
    ("sm_86", 71),
    ("sm_87", 74),
    ("sm_88", 90),
    ("sm_89", 78),
    ("sm_90", 78),
    ("sm_90a", 80),
    ("sm_100", 86),
    ("sm_100a", 86),
    ("sm_100f", 88),
    ("sm_101", 86),
    ("sm_101a", 86),
    ("sm_101f", 88),
    ("sm_103", 88),
    ("sm_103a", 88),
    ("sm_103f", 88),
    ("sm_110", 90),
    ("sm_110a", 90),
    ("sm_110f", 90),
    ("sm_120", 87),
    ("sm_120a", 87),
    ("sm_120f", 88),
    ("sm_121", 88),
    ("sm_121a", 88),
    ("sm_121f", 88),
];

/// PTX ISA versions (x10) LLVM 22 accepts as `+ptxNN` features.
const PTX_VERSIONS: &[u32] = &[
    32, 40, 41, 42, 43, 50, 60, 61, 62, 63, 64, 65, 70, 71, 72, 73, 74, 75, 76, 77, 78, 80, 81, 82,
    83, 84, 85, 86, 87, 88, 90,
];

impl TargetOptions {
    /// Options for `chip` with the lowest PTX version it supports (at least
    /// PTX 8.0 for `sm_90`, the default), `O3`.
    pub fn for_chip(chip: &str) -> Result<TargetOptions, LoweringError> {
        let min = chip_min_ptx(chip)?;
        Ok(TargetOptions {
            chip: chip.to_string(),
            features: format!("+ptx{}", min.max(80)),
            opt_level: 3,
        })
    }

    /// Checks the options before they reach LLVM, whose NVPTX back end would
    /// otherwise silently ignore an unknown chip or feature, or abort the whole
    /// process for a PTX version that is too old for the chip.
    pub fn validate(&self) -> Result<(), LoweringError> {
        let min = chip_min_ptx(&self.chip)?;
        let mut ptx = None;
        for feature in self.features.split(',').map(str::trim) {
            let version = feature
                .strip_prefix("+ptx")
                .and_then(|v| v.parse::<u32>().ok())
                .filter(|v| PTX_VERSIONS.contains(v))
                .ok_or_else(|| {
                    LoweringError::InvalidTarget(format!(
                        "unsupported NVPTX feature `{feature}` in `{}` (expected `+ptxNN`, \
                         one of {PTX_VERSIONS:?})",
                        self.features
                    ))
                })?;
            ptx = ptx.max(Some(version));
        }
        let ptx = ptx
            .ok_or_else(|| LoweringError::InvalidTarget("no `+ptxNN` feature given".to_string()))?;
        if ptx < min {
            return Err(LoweringError::InvalidTarget(format!(
                "PTX {}.{} does not support {}; it needs at least +ptx{min}",
                ptx / 10,
                ptx % 10,
                self.chip
            )));
        }
        if self.opt_level > 3 {
            return Err(LoweringError::InvalidTarget(format!(
                "opt_level {} is not in 0..=3",
                self.opt_level
            )));
        }
        Ok(())
    }

    fn attach_target_pass(&self) -> String {
        format!(
            "nvvm-attach-target{{chip={} features={} O={}}}",
            self.chip, self.features, self.opt_level
        )
    }
}

fn chip_min_ptx(chip: &str) -> Result<u32, LoweringError> {
    CHIPS
        .iter()
        .find(|(name, _)| *name == chip)
        .map(|&(_, min)| min)
        .ok_or_else(|| {
            LoweringError::InvalidTarget(format!(
                "unknown NVPTX chip `{chip}` (known: {})",
                CHIPS.iter().map(|c| c.0).collect::<Vec<_>>().join(", ")
            ))
        })
}

/// The pass pipeline up to (excluding) serialisation.
fn nvvm_pipeline(opts: &TargetOptions) -> String {
    format!(
        "builtin.module({}, gpu.module(convert-scf-to-cf, convert-gpu-to-nvvm, \
         reconcile-unrealized-casts))",
        opts.attach_target_pass()
    )
}

/// The full pass pipeline that ends with `gpu.binary` holding PTX text.
pub fn ptx_pipeline(opts: &TargetOptions) -> String {
    format!(
        "builtin.module({}, gpu.module(convert-scf-to-cf, convert-gpu-to-nvvm, \
         reconcile-unrealized-casts), gpu-module-to-binary{{format=isa}})",
        opts.attach_target_pass()
    )
}

/// MLIR (its contexts, the LLVM target registry and the command-line option
/// globals that pass parsing touches) is driven from one thread at a time.
static MLIR_LOCK: Mutex<()> = Mutex::new(());

fn lock() -> MutexGuard<'static, ()> {
    // A panic in another test while holding the lock leaves no MLIR state
    // behind that we share (each call has its own context), so poisoning is
    // harmless.
    MLIR_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `f` with a fresh context that has every dialect, pass and LLVM
/// translation registered, collecting error diagnostics into the second
/// argument. The global MLIR lock is held for the whole call.
pub(crate) fn with_context<R>(f: impl FnOnce(&Context, &Diagnostics) -> R) -> R {
    static PASSES: Once = Once::new();
    let _guard = lock();
    PASSES.call_once(register_all_passes);
    let registry = DialectRegistry::new();
    register_all_dialects(&registry);
    let context = Context::new_with_registry(&registry, false);
    context.load_all_available_dialects();
    register_all_llvm_translations(&context);
    let diagnostics = Diagnostics::default();
    let sink = diagnostics.0.clone();
    let id = context.attach_diagnostic_handler(move |diagnostic| {
        let mut text = diagnostic.to_string();
        for i in 0..diagnostic.note_count() {
            if let Ok(note) = diagnostic.note(i) {
                text.push_str("\n  note: ");
                text.push_str(&note.to_string());
            }
        }
        let location = diagnostic.location().to_string();
        sink.borrow_mut().push(format!("{location}: {text}"));
        true
    });
    let result = f(&context, &diagnostics);
    context.detach_diagnostic_handler(id);
    result
}

/// Diagnostics collected while a context was in use.
#[derive(Default)]
pub(crate) struct Diagnostics(Rc<RefCell<Vec<String>>>);

impl Diagnostics {
    /// Takes the messages collected so far, joined by newlines.
    pub(crate) fn take(&self) -> String {
        std::mem::take(&mut *self.0.borrow_mut()).join("\n")
    }
}

/// Parses and verifies `text`.
pub(crate) fn parse_module<'c>(
    context: &'c Context,
    diagnostics: &Diagnostics,
    text: &str,
) -> Result<Module<'c>, LoweringError> {
    let module = Module::parse(context, text)
        .ok_or_else(|| LoweringError::Parse(or_unknown(diagnostics.take())))?;
    if !module.as_operation().verify() {
        return Err(LoweringError::Verify(or_unknown(diagnostics.take())));
    }
    diagnostics.take();
    Ok(module)
}

/// Parses `pipeline` (a full `builtin.module(...)` pipeline) and runs it.
pub(crate) fn run_pipeline(
    context: &Context,
    diagnostics: &Diagnostics,
    module: &mut Module,
    pipeline: &str,
) -> Result<(), LoweringError> {
    let manager = PassManager::new(context);
    parse_pass_pipeline(manager.as_operation_pass_manager(), pipeline).map_err(|e| {
        LoweringError::PassPipeline(format!("{pipeline}: {e} {}", diagnostics.take()))
    })?;
    manager
        .run(module)
        .map_err(|_| LoweringError::Pass(or_unknown(diagnostics.take())))?;
    diagnostics.take();
    Ok(())
}

fn or_unknown(text: String) -> String {
    if text.is_empty() {
        "no diagnostic was emitted".to_string()
    } else {
        text
    }
}

/// Lowers a module holding `gpu.module`s (e.g. [`gpu_module_mlir`]'s output)
/// to the NVVM/LLVM dialect and returns the IR as text (for debugging).
pub fn lower_to_nvvm_mlir(mlir_text: &str, opts: &TargetOptions) -> Result<String, LoweringError> {
    opts.validate()?;
    with_context(|context, diagnostics| {
        let mut module = parse_module(context, diagnostics, mlir_text)?;
        run_pipeline(context, diagnostics, &mut module, &nvvm_pipeline(opts))?;
        Ok(module.as_operation().to_string())
    })
}

/// Compiles an MLIR module holding exactly one `gpu.module` (with kernels in
/// the `gpu`, `arith`, `scf`, `cf`, `llvm`, `nvvm` dialects) to PTX text,
/// in process. Fails (never aborts) on invalid MLIR, invalid target options,
/// a failing pass, or PTX that still calls external functions (e.g. `__nv_*`
/// libdevice functions, which are not linked).
pub fn compile_to_ptx(mlir_text: &str, opts: &TargetOptions) -> Result<String, LoweringError> {
    opts.validate()?;
    let ptx = with_context(|context, diagnostics| {
        let mut module = parse_module(context, diagnostics, mlir_text)?;
        run_pipeline(context, diagnostics, &mut module, &ptx_pipeline(opts))?;
        extract_ptx(&module)
    })?;
    check_ptx(&ptx)?;
    Ok(ptx)
}

/// PTX for every [`DeviceKernel`] (one module, one `.entry` per kernel).
pub fn device_kernels_ptx(opts: &TargetOptions) -> Result<String, LoweringError> {
    compile_to_ptx(&gpu_module_mlir(&DeviceKernel::ALL), opts)
}

/// PTX for every [`DeviceKernel`] plus the generated kernels of `tiles` (one module): what a
/// plan with tile ops needs on the GPU.
pub fn plan_kernels_ptx(
    tiles: &[TileKernel],
    opts: &TargetOptions,
) -> Result<String, LoweringError> {
    compile_to_ptx(&gpu_module_mlir_with(&DeviceKernel::ALL, tiles), opts)
}

/// Finds the `gpu.binary` ops and returns the assembly of their single object.
fn extract_ptx(module: &Module) -> Result<String, LoweringError> {
    let mut found: Vec<Result<String, String>> = Vec::new();
    module.as_operation().walk(WalkOrder::PreOrder, |op| {
        if op.name().as_string_ref().as_str() == Ok("gpu.binary") {
            found.push(binary_assembly(&op));
            WalkResult::Skip
        } else {
            WalkResult::Advance
        }
    });
    match found.len() {
        0 => Err(LoweringError::Ptx(
            "no gpu.binary after gpu-module-to-binary (the module had no gpu.module)".to_string(),
        )),
        1 => found
            .pop()
            .expect("one element")
            .map_err(LoweringError::Ptx),
        n => Err(LoweringError::Ptx(format!(
            "{n} gpu.binary ops; expected exactly one gpu.module"
        ))),
    }
}

fn binary_assembly(op: &OperationRef) -> Result<String, String> {
    let objects = op
        .attribute("objects")
        .map_err(|e| format!("gpu.binary without objects: {e}"))?;
    let objects = ArrayAttribute::try_from(objects)
        .map_err(|e| format!("gpu.binary objects is not an array: {e}"))?;
    if objects.len() != 1 {
        return Err(format!(
            "gpu.binary has {} objects; expected one target",
            objects.len()
        ));
    }
    let object = objects
        .element(0)
        .map_err(|e| format!("gpu.binary object: {e}"))?;
    let raw = object.to_raw();
    // SAFETY: `raw` is a live attribute owned by the context that `op` belongs
    // to, which outlives this call; the C API only inspects its type.
    if !unsafe { mlir_sys::mlirAttributeIsAGPUObjectAttr(raw) } {
        return Err(format!("not a #gpu.object: {object}"));
    }
    // SAFETY: `raw` was just checked to be a `#gpu.object`; the returned string
    // reference points into the attribute's storage, which lives as long as
    // the context, and is copied out below before the context can go away.
    let bytes = unsafe {
        let s = mlir_sys::mlirGPUObjectAttrGetObject(raw);
        if s.data.is_null() || s.length == 0 {
            &[][..]
        } else {
            std::slice::from_raw_parts(s.data.cast::<u8>(), s.length)
        }
    };
    if bytes.is_empty() {
        return Err("empty #gpu.object".to_string());
    }
    String::from_utf8(bytes.to_vec()).map_err(|_| "the #gpu.object is not PTX text".to_string())
}

/// Rejects PTX with unresolved external functions (e.g. libdevice `__nv_*`).
fn check_ptx(ptx: &str) -> Result<(), LoweringError> {
    if !ptx.contains(".version") || !ptx.contains(".target") {
        return Err(LoweringError::Ptx(
            "the object is not PTX text (no .version/.target)".to_string(),
        ));
    }
    // `.extern .func (.param .b32 func_retval0) __nv_expf` + `(` on the next line.
    let mut unresolved: Vec<String> = ptx
        .lines()
        .filter(|l| l.trim_start().starts_with(".extern .func"))
        .filter_map(|l| l.split_whitespace().last())
        .map(|name| name.trim_end_matches('(').to_string())
        .collect();
    if unresolved.is_empty() && ptx.contains("__nv_") {
        unresolved.push("__nv_* (libdevice)".to_string());
    }
    unresolved.sort();
    unresolved.dedup();
    if unresolved.is_empty() {
        Ok(())
    } else {
        Err(LoweringError::UnresolvedSymbols(unresolved))
    }
}
