//! Reading the input, and per chunk: parse, verify, run the pipeline, emit.

use crate::cli::{Emit, Invocation};
use crate::out;
use mercury_ir::expect;
use mercury_ir::pass::{PassManager, PassRegistry};
use mercury_ir::syntax::split::{split_input_at, Chunk};
use mercury_ir::{
    parse_source, print_op, verify, Diagnostic, Operation, PrintOptions, Registry, SourceFile,
};
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

/// The run failed; what went wrong has been printed.
#[derive(Debug)]
pub struct Failed;

/// Every pass the tool knows (the compile path's, `mercury_driver::passes`).
pub fn pass_registry() -> PassRegistry {
    mercury_driver::passes()
}

/// The pass manager of the invocation; `Err` is the complete message to print (a located
/// diagnostic for a schedule file or a pipeline).
fn pass_manager(
    inv: &Invocation,
    passes: &PassRegistry,
    registry: &Registry,
) -> Result<PassManager, String> {
    let plain = |m: String| format!("mercury-opt: error: {m}\n");
    let o = &inv.options;
    let mut pm = PassManager::new();
    pm.verify_each = o.verify_each;
    // --kernel limits every pass that can be limited to one kernel, and names none itself.
    pm.default_target = o.kernel.clone();
    if let Some(path) = &o.schedule {
        let script = std::fs::read_to_string(path)
            .map_err(|e| plain(format!("cannot read schedule '{}': {e}", path.display())))?;
        let file = SourceFile::new(path.display().to_string(), script);
        pm.add_schedule(passes, &file).map_err(|d| d.render())?;
    }
    match &o.pass_pipeline {
        Some(text) => pm
            .add_pipeline_source(passes, &SourceFile::new("<pass-pipeline>", text.as_str()))
            .map_err(|d| d.render())?,
        None => {
            for f in &inv.pass_flags {
                pm.add(passes, f.name, &f.options).map_err(plain)?;
            }
        }
    }
    if o.mlir_print_ir_after_all {
        let registry = registry.clone();
        let opts = PrintOptions {
            generic: o.mlir_print_op_generic,
            debuginfo: o.mlir_print_debuginfo,
            ..Default::default()
        };
        pm.after_pass = Some(Box::new(move |name: &str, module: &Operation| {
            out::stderr(&format!(
                "// -----// IR Dump After {name} //----- //\n{}\n",
                print_op(&registry, module, opts)
            ));
        }));
    }
    Ok(pm)
}

/// The input's name for diagnostics and its text. Invalid UTF-8 is a located error.
fn read_input(path: &Path) -> Result<(String, String), Failed> {
    let (name, bytes) = if path.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .lock()
            .read_to_end(&mut bytes)
            .map_err(|e| {
                out::error(&format!("could not read standard input: {e}"));
                Failed
            })?;
        ("<stdin>".to_string(), bytes)
    } else {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| {
            out::error(&format!("could not open input file '{name}': {e}"));
            Failed
        })?;
        (name, bytes)
    };
    match String::from_utf8(bytes) {
        Ok(text) => Ok((name, text)),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let file = SourceFile::new(name, String::from_utf8_lossy(e.as_bytes()).into_owned());
            out::stderr(
                &Diagnostic::error(file.location(valid), "the input is not valid UTF-8").render(),
            );
            Err(Failed)
        }
    }
}

/// Parse, verify and transform one buffer.
fn process(
    registry: &Registry,
    pm: &mut PassManager,
    file: &Arc<SourceFile>,
    kernel: Option<&str>,
) -> Result<Operation, Diagnostic> {
    let mut module = parse_source(registry, file)?;
    verify(registry, &module)?;
    // --kernel names a kernel of the input, whatever reads it (was ignored without a pass).
    if let Some(k) = kernel {
        mercury_commir::pass::kernel_names(&module, k)?;
    }
    pm.run(&mut module, registry)?;
    Ok(module)
}

/// What `--emit` asks for, for one module. (The place for `plan`, `gpu-mlir` and `ptx`.)
fn emit(
    kind: Emit,
    registry: &Registry,
    module: &Operation,
    opts: PrintOptions,
    kernel: Option<&str>,
    chip: &str,
    all_kernels: bool,
) -> Result<String, Diagnostic> {
    let kernels = |module: &Operation| -> Result<Vec<mercury_lowering::DeviceKernel>, Diagnostic> {
        if all_kernels {
            Ok(mercury_lowering::DeviceKernel::ALL.to_vec())
        } else {
            Ok(device_kernels(&plan_of(module, kernel)?))
        }
    };
    // The generated kernels of the plan's tile ops (with --all-device-kernels: those of a
    // module that lowers; one without a plan still gets every fixed kernel).
    let tiles = |module: &Operation| -> Result<Vec<mercury_lowering::TileKernel>, Diagnostic> {
        match plan_of(module, kernel) {
            Ok(plan) => Ok(mercury_plan::tile_kernel::plan_tile_kernels(&plan)),
            Err(_) if all_kernels => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    };
    match kind {
        Emit::Mlir => Ok(print_op(registry, module, opts)),
        Emit::Plan => Ok(plan_of(module, kernel)?.to_json() + "\n"),
        Emit::GpuMlir => Ok(mercury_lowering::gpu_module_mlir_with(
            &kernels(module)?,
            &tiles(module)?,
        )),
        Emit::Ptx => {
            let loc = module.loc.clone();
            // Checked on the command line already (`cli::parse`).
            let opts = mercury_lowering::TargetOptions::for_chip(chip)
                .map_err(|e| Diagnostic::error(loc.clone(), format!("--chip: {e}")))?;
            let text = mercury_lowering::gpu_module_mlir_with(&kernels(module)?, &tiles(module)?);
            mercury_lowering::compile_to_ptx(&text, &opts).map_err(|e| {
                Diagnostic::error(loc, format!("lowering the device kernels to PTX: {e}"))
            })
        }
    }
}

fn plan_of(module: &Operation, kernel: Option<&str>) -> Result<mercury_plan::Plan, Diagnostic> {
    mercury_driver::lower(module, kernel)
}

/// The compiler-generated device kernels a plan needs: the combines and copies it uses, plus
/// the casts and fills every GPU run needs for its inputs, outputs and accumulators.
fn device_kernels(plan: &mercury_plan::Plan) -> Vec<mercury_lowering::DeviceKernel> {
    use mercury_lowering::DeviceKernel as K;
    use mercury_plan::{Collective, CombineKind, CommOp, ComputeOp};
    let mut out = vec![K::CastF32ToBf16, K::CastBf16ToF32, K::FillF32];
    let mut add = |k: K| {
        if !out.contains(&k) {
            out.push(k);
        }
    };
    // An add combines f32 or bf16 parts (the copy transport's one-pass bf16 sum included).
    let combine = |c: CombineKind, add: &mut dyn FnMut(K)| match c {
        CombineKind::Add => {
            add(K::AddF32);
            add(K::AddBf16F32);
            add(K::SumBf16);
        }
        CombineKind::LseMerge => {
            add(K::LseMergeO);
            add(K::LseMergeLse);
        }
    };
    for r in &plan.ranks {
        for st in &r.stages {
            for op in &st.compute {
                match op {
                    ComputeOp::Combine { kind, .. } => combine(*kind, &mut add),
                    ComputeOp::Copy { .. } => {
                        add(K::Copy2dB16);
                        add(K::Copy2dB32);
                    }
                    ComputeOp::Patch { .. } | ComputeOp::Tile { .. } => {}
                }
            }
            for c in &st.comm {
                match c {
                    CommOp::Collective {
                        collective:
                            Collective::AllReduce { kind, .. } | Collective::ReduceScatter { kind, .. },
                        ..
                    } => combine(*kind, &mut add),
                    // A reduce's source is a part of its tile (a strided view when the tile is
                    // cut along a later dimension): packed by copies, then summed.
                    CommOp::Collective {
                        collective: Collective::Reduce { kind, .. },
                        ..
                    } => {
                        combine(*kind, &mut add);
                        add(K::Copy2dB16);
                        add(K::Copy2dB32);
                    }
                    CommOp::Collective { .. } | CommOp::Send { .. } | CommOp::Recv { .. } => {
                        add(K::Copy2dB16);
                        add(K::Copy2dB32);
                    }
                }
            }
        }
    }
    out
}

/// Runs the whole invocation. Diagnostics and errors are printed as they happen.
pub fn run(inv: &Invocation, passes: &PassRegistry) -> Result<(), Failed> {
    let o = &inv.options;
    let registry = mercury_driver::registry(o.allow_unregistered_dialect);
    let mut pm = pass_manager(inv, passes, &registry).map_err(|e| {
        out::stderr(&e);
        Failed
    })?;
    let (name, text) = read_input(&o.input)?;
    let chunks = if let Some(marker) = &o.split_input_file {
        split_input_at(&text, marker)
    } else {
        vec![Chunk {
            text,
            first_line: 1,
        }]
    };
    let print = PrintOptions {
        generic: o.mlir_print_op_generic,
        debuginfo: o.mlir_print_debuginfo,
        ..Default::default()
    };

    let mut ok = true;
    let mut outputs = Vec::new();
    // On standard output each chunk's IR is printed as soon as the chunk is done, and the
    // separator before each chunk but the first, before that chunk runs: the reports a pass
    // prints while it runs (--commir-print-comm-plan) sit between their chunk's separator and
    // its IR (they all came first). A chunk that fails prints nothing, but its separators stay,
    // as mlir-opt writes them: the n-th output is always after the (n-1)-th marker.
    let to_stdout = o.output.as_os_str() == "-";
    for (i, chunk) in chunks.into_iter().enumerate() {
        if to_stdout && i > 0 && !out::stdout(&format!("{}\n", o.output_split_marker)) {
            return Err(Failed);
        }
        let file = SourceFile::with_first_line(name.as_str(), chunk.text, chunk.first_line);
        let result = process(&registry, &mut pm, &file, o.kernel.as_deref()).and_then(|m| {
            emit(
                o.emit,
                &registry,
                &m,
                print,
                o.kernel.as_deref(),
                &o.chip,
                o.all_device_kernels,
            )
        });
        if o.verify_diagnostics {
            let emitted: Vec<Diagnostic> = result.as_ref().err().cloned().into_iter().collect();
            for failure in expect::verify(&file, &emitted) {
                out::stderr(&failure.render());
                ok = false;
            }
        } else if let Err(d) = &result {
            out::stderr(&d.render());
            ok = false;
        }
        if let Ok(text) = result {
            if to_stdout {
                if !out::stdout(&text) {
                    return Err(Failed);
                }
            } else {
                outputs.push(text);
            }
        }
    }

    let text = outputs.join(&format!("{}\n", o.output_split_marker));
    if !to_stdout && ok {
        std::fs::write(&o.output, text).map_err(|e| {
            out::error(&format!(
                "could not write output file '{}': {e}",
                o.output.display()
            ));
            Failed
        })?;
    }
    if ok {
        Ok(())
    } else {
        if !to_stdout {
            remove_stale_output(&o.output, &o.input);
        }
        Err(Failed)
    }
}

/// After a failed run, removes the `-o` file an earlier run left, as mlir-opt does (its
/// output file is kept only on success), so that a build step never takes the old output
/// for this run's. The input itself is never removed (`-o` naming the input file), nor
/// anything that is not a regular file (`-o /dev/null`).
fn remove_stale_output(output: &std::path::Path, input: &std::path::Path) {
    let same = |a: &std::path::Path, b: &std::path::Path| match (a.canonicalize(), b.canonicalize())
    {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if input.as_os_str() != "-" && same(output, input) {
        return;
    }
    if std::fs::symlink_metadata(output).is_ok_and(|m| m.file_type().is_file()) {
        let _ = std::fs::remove_file(output);
    }
}
