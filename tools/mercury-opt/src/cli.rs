//! The command line: fixed options (clap derive) plus one `--<pass>` flag per registered pass,
//! added at run time from the pass registry. Pass flags run in the order they are given.

use clap::{Arg, ArgAction, CommandFactory, FromArgMatches, Parser, ValueEnum};
use mercury_driver::cli::{pass_flag, pass_options};
use mercury_ir::pass::PassRegistry;
use mercury_ir::syntax::split::DEFAULT_SPLIT_MARKER;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;

/// What to write for each input chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Emit {
    /// MLIR text: custom assembly where an op has one, the generic form otherwise.
    #[default]
    Mlir,
    /// The per-rank execution plan of the kernel (JSON).
    Plan,
    /// The device kernels the plan needs, in MLIR's gpu/arith/llvm dialects.
    GpuMlir,
    /// Those device kernels compiled to PTX (in-process, through MLIR; `--chip`).
    Ptx,
}

/// The fixed options; pass flags are added by [`command`].
#[derive(Debug, Parser)]
#[command(
    name = "mercury-opt",
    version,
    about = "Parse, verify, transform and print Mercury IR (CommIR and the builtin dialects)",
    after_help = "Pass flags (listed under 'Passes', or with --list-passes) run in command-line order; \
                  give options as --<pass>=\"key=value key2=value2\".\n\
                  Single-dash long options (-canonicalize, -split-input-file) are accepted as in mlir-opt."
)]
pub struct Options {
    /// Input file; `-` or none reads standard input.
    #[arg(value_name = "INPUT", default_value = "-")]
    pub input: PathBuf,

    /// Output file; `-` is standard output.
    #[arg(short = 'o', value_name = "FILE", default_value = "-")]
    pub output: PathBuf,

    /// Split the input at lines of MARKER (default `// -----`) and process each chunk on its
    /// own (line numbers in diagnostics stay those of the whole file); outputs are joined
    /// with `--output-split-marker`. An empty MARKER (`--split-input-file=`) is the default
    /// one, as in mlir-opt.
    #[arg(long, value_name = "MARKER", num_args = 0..=1, require_equals = true,
          default_missing_value = DEFAULT_SPLIT_MARKER)]
    pub split_input_file: Option<String>,

    /// What joins the outputs of split chunks (a line of its own).
    #[arg(long, value_name = "MARKER", default_value = DEFAULT_SPLIT_MARKER)]
    pub output_split_marker: String,

    /// Check the diagnostics against `// expected-error {{...}}` (and -warning, -remark, -note)
    /// annotations in the input instead of printing them.
    #[arg(long)]
    pub verify_diagnostics: bool,

    /// A textual pass pipeline, e.g. 'builtin.module(canonicalize,symbol-dce)'.
    #[arg(long, value_name = "PIPELINE")]
    pub pass_pipeline: Option<String>,

    /// Print the IR to standard error after every pass.
    #[arg(long)]
    pub mlir_print_ir_after_all: bool,

    /// Print every operation in the generic form.
    #[arg(long)]
    pub mlir_print_op_generic: bool,

    /// Print the location of every operation and block argument (`loc(...)`).
    #[arg(long)]
    pub mlir_print_debuginfo: bool,

    /// Accept operations of dialects that are not registered.
    #[arg(long)]
    pub allow_unregistered_dialect: bool,

    /// List the registered passes with their options, then exit.
    #[arg(long)]
    pub list_passes: bool,

    /// Verify the IR after every pass.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value_t = true,
          default_missing_value = "true", action = ArgAction::Set, value_parser = llvm_bool)]
    pub verify_each: bool,

    /// What to emit.
    #[arg(long, value_enum, value_name = "KIND", default_value_t = Emit::Mlir)]
    pub emit: Emit,

    /// A schedule script (one pass per line, `#` comments) run before the other passes.
    #[arg(long, value_name = "FILE")]
    pub schedule: Option<PathBuf>,

    /// The kernel to transform and to emit a plan or device code for, when the module has
    /// several: the passes that can be limited to one kernel, and name none with their own
    /// option, transform this one alone.
    #[arg(long, value_name = "NAME")]
    pub kernel: Option<String>,

    /// Target chip of `--emit=ptx`.
    #[arg(long, value_name = "CHIP", default_value = "sm_90")]
    pub chip: String,

    /// With `--emit=gpu-mlir|ptx`: every device kernel the GPU runtime loads, not only those
    /// the plan uses.
    #[arg(long)]
    pub all_device_kernels: bool,
}

/// A boolean option's value as LLVM's command line reads it (`cl::opt<bool>`): `true`,
/// `TRUE`, `True`, `1`, `false`, `FALSE`, `False` or `0`.
fn llvm_bool(v: &str) -> Result<bool, String> {
    match v {
        "true" | "TRUE" | "True" | "1" => Ok(true),
        "false" | "FALSE" | "False" | "0" => Ok(false),
        _ => Err(format!(
            "'{v}' is invalid value for boolean argument! Try 0 or 1"
        )),
    }
}

/// A `--<pass>[=options]` flag as given on the command line.
#[derive(Debug, Clone, PartialEq)]
pub struct PassFlag {
    pub name: &'static str,
    pub options: Vec<(String, String)>,
}

/// A parsed command line.
#[derive(Debug)]
pub struct Invocation {
    pub options: Options,
    /// Pass flags in command-line order.
    pub pass_flags: Vec<PassFlag>,
}

#[derive(Debug)]
pub enum CliError {
    /// Usage error, `--help` or `--version`: clap prints it and picks the exit status.
    Clap(clap::Error),
    /// Any other usage error.
    Message(String),
}

/// The full command: fixed options plus the pass flags. Returns the names of the passes that
/// got a flag (a pass whose name collides with a fixed option is only reachable through
/// `--pass-pipeline`).
pub fn command(passes: &PassRegistry) -> (clap::Command, Vec<&'static str>) {
    let mut cmd = Options::command();
    let mut taken: Vec<String> = vec!["help".into(), "version".into()];
    for a in cmd.get_arguments() {
        taken.push(a.get_id().to_string());
        taken.extend(a.get_long().map(String::from));
    }
    let mut added = Vec::new();
    for p in passes.all() {
        if taken.iter().any(|t| t == p.name) || p.name.is_empty() || p.name.starts_with('-') {
            continue;
        }
        taken.push(p.name.to_string());
        added.push(p.name);
        cmd = cmd.arg(pass_flag(
            Arg::new(p.name)
                .long(p.name)
                .action(ArgAction::Append)
                .help(p.summary)
                .help_heading("Passes"),
        ));
    }
    (cmd, added)
}

/// Rewrites mlir-opt style single-dash long options (`-canonicalize`, `-pass-pipeline=...`) to
/// their double-dash form. Only names that are known long options are rewritten.
fn normalize_single_dash(args: Vec<OsString>, longs: &[&str]) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut positional_only = false;
    for (i, a) in args.into_iter().enumerate() {
        if i == 0 || positional_only {
            out.push(a);
            continue;
        }
        if a == "--" {
            positional_only = true;
            out.push(a);
            continue;
        }
        let rewritten = a.to_str().and_then(|s| {
            let body = s.strip_prefix('-').filter(|b| !b.starts_with('-'))?;
            let name = body.split('=').next().unwrap_or("");
            (name.len() > 1 && longs.contains(&name)).then(|| OsString::from(format!("-{s}")))
        });
        out.push(rewritten.unwrap_or(a));
    }
    out
}

/// Parses the command line.
pub fn parse(
    args: impl IntoIterator<Item = OsString>,
    passes: &PassRegistry,
) -> Result<Invocation, CliError> {
    let (cmd, pass_names) = command(passes);
    let longs: Vec<&str> = cmd
        .get_arguments()
        .filter_map(|a| a.get_long())
        .chain(["help", "version"])
        .collect();
    let args = normalize_single_dash(args.into_iter().collect(), &longs);
    let matches = cmd.try_get_matches_from(args).map_err(CliError::Clap)?;
    let mut options = Options::from_arg_matches(&matches).map_err(CliError::Clap)?;
    // A chip the NVPTX back end does not know is a command-line error, said before the input
    // is read (not located in it).
    mercury_lowering::TargetOptions::for_chip(&options.chip)
        .map_err(|e| CliError::Message(format!("--chip {}: {e}", options.chip)))?;
    // Flags that only device-code output reads are refused elsewhere, as mercury-run and
    // mercury-tune refuse theirs (they were ignored).
    let given = |id: &str| matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
    if given("chip") && options.emit != Emit::Ptx {
        return Err(CliError::Message(
            "--chip applies to --emit=ptx only (nothing else reads it)".into(),
        ));
    }
    if options.all_device_kernels && !matches!(options.emit, Emit::Ptx | Emit::GpuMlir) {
        return Err(CliError::Message(
            "--all-device-kernels applies to --emit=ptx and --emit=gpu-mlir only".into(),
        ));
    }
    // The generic form is a way of printing CommIR: the output of --emit=mlir, and the dumps
    // of --mlir-print-ir-after-all.
    if options.mlir_print_op_generic
        && options.emit != Emit::Mlir
        && !options.mlir_print_ir_after_all
    {
        return Err(CliError::Message(format!(
            "--mlir-print-op-generic prints CommIR, and --emit={} prints none (nothing reads it; \
             with --mlir-print-ir-after-all it shapes the dumps)",
            options
                .emit
                .to_possible_value()
                .map_or("?".to_string(), |v| v.get_name().to_string())
        )));
    }
    // An empty marker is the flag without a value: mlir-opt's `--split-input-file=` splits at
    // the default marker ("Implicit value: use default marker if flag was used without value").
    if options.split_input_file.as_deref() == Some("") {
        options.split_input_file = Some(DEFAULT_SPLIT_MARKER.to_string());
    }
    // Split outputs are joined by a marker, which is no JSON: one plan per input file.
    if options.split_input_file.is_some()
        && options.emit == Emit::Plan
        && !options.verify_diagnostics
    {
        return Err(CliError::Message(format!(
            "--split-input-file with --emit=plan would join JSON documents by '{}' (not \
             JSON): give each plan its own input file, or add --verify-diagnostics to only check \
             the diagnostics",
            options.output_split_marker
        )));
    }

    let mut flags: Vec<(usize, PassFlag)> = Vec::new();
    for name in pass_names {
        let (Some(indices), Some(values)) =
            (matches.indices_of(name), matches.get_many::<String>(name))
        else {
            continue;
        };
        for (index, value) in indices.zip(values) {
            let options = pass_options(name, value).map_err(CliError::Message)?;
            flags.push((index, PassFlag { name, options }));
        }
    }
    flags.sort_by_key(|(index, _)| *index);
    let pass_flags: Vec<PassFlag> = flags.into_iter().map(|(_, f)| f).collect();
    if let (Some(_), Some(first)) = (&options.pass_pipeline, pass_flags.first()) {
        return Err(CliError::Message(format!(
            "--pass-pipeline cannot be combined with individual pass flags (--{}); put every pass in the pipeline",
            first.name
        )));
    }
    Ok(Invocation {
        options,
        pass_flags,
    })
}

/// The text of `--list-passes`.
pub fn list_passes(passes: &PassRegistry) -> String {
    let (_, with_flag) = command(passes);
    let mut all: Vec<_> = passes.all().collect();
    all.sort_by_key(|p| p.name);
    let mut out = String::from("Passes (as --<name>[=\"key=value ...\"], or in --pass-pipeline='builtin.module(name{key=value})'):\n");
    for p in all {
        let flag = if with_flag.contains(&p.name) {
            ""
        } else {
            " (only in --pass-pipeline)"
        };
        let _ = writeln!(out, "  --{}{flag}", p.name);
        let _ = writeln!(out, "      {}", p.summary);
        for o in p.options {
            let default = match o.default {
                Some("") => "optional".to_string(),
                Some(d) => format!("default: {d}"),
                None => "required".to_string(),
            };
            let _ = writeln!(out, "      {}=<value>  {} ({default})", o.name, o.help);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mercury_ir::pass::{Pass, PassInfo, PassOptionDef, PassOptions};

    struct Nop;
    impl Pass for Nop {
        fn run(
            &self,
            _: &mut mercury_ir::Operation,
            _: &mercury_ir::Registry,
        ) -> Result<(), mercury_ir::Diagnostic> {
            Ok(())
        }
    }
    static TILE: PassInfo = PassInfo {
        name: "tile",
        summary: "Tile an axis",
        options: &[
            PassOptionDef {
                name: "axis",
                help: "the axis",
                default: None,
            },
            PassOptionDef {
                name: "factor",
                help: "tile size",
                default: Some("4"),
            },
        ],
        target: None,
        create: |_: &PassOptions| Ok(Box::new(Nop)),
    };
    /// A pass whose name collides with a fixed option.
    static EMIT: PassInfo = PassInfo {
        name: "emit",
        summary: "collides",
        options: &[],
        target: None,
        create: |_: &PassOptions| Ok(Box::new(Nop)),
    };

    fn registry() -> PassRegistry {
        let mut r = PassRegistry::new();
        r.register(&TILE);
        r.register(&EMIT);
        r
    }

    fn parse_args(args: &[&str]) -> Result<Invocation, CliError> {
        parse(
            std::iter::once("mercury-opt")
                .chain(args.iter().copied())
                .map(OsString::from),
            &registry(),
        )
    }

    fn names(inv: &Invocation) -> Vec<&str> {
        inv.pass_flags.iter().map(|f| f.name).collect()
    }

    #[test]
    fn pass_flags_keep_command_line_order() {
        let inv = parse_args(&[
            "--symbol-dce",
            "x.mlir",
            "--tile=axis=i factor=8",
            "--canonicalize",
            "--symbol-dce",
        ])
        .unwrap();
        assert_eq!(
            names(&inv),
            ["symbol-dce", "tile", "canonicalize", "symbol-dce"]
        );
        assert_eq!(
            inv.pass_flags[1].options,
            vec![
                ("axis".to_string(), "i".to_string()),
                ("factor".to_string(), "8".to_string())
            ]
        );
        assert_eq!(inv.options.input, PathBuf::from("x.mlir"));
    }

    #[test]
    fn single_dash_long_options() {
        let inv =
            parse_args(&["-split-input-file", "-canonicalize", "-o", "out.mlir", "-"]).unwrap();
        assert_eq!(inv.options.split_input_file.as_deref(), Some("// -----"));
        let marked = parse_args(&[
            "--split-input-file=;; cut",
            "--output-split-marker=;; joined",
        ])
        .unwrap();
        assert_eq!(marked.options.split_input_file.as_deref(), Some(";; cut"));
        assert_eq!(marked.options.output_split_marker, ";; joined");
        assert_eq!(
            parse_args(&["--split-input-file="])
                .unwrap()
                .options
                .split_input_file
                .as_deref(),
            Some("// -----")
        );
        assert_eq!(names(&inv), ["canonicalize"]);
        assert_eq!(inv.options.output, PathBuf::from("out.mlir"));
        assert_eq!(inv.options.input, PathBuf::from("-"));
    }

    #[test]
    fn verify_each_defaults_on() {
        assert!(parse_args(&[]).unwrap().options.verify_each);
        assert!(
            !parse_args(&["--verify-each=false"])
                .unwrap()
                .options
                .verify_each
        );
        assert!(parse_args(&["--verify-each"]).unwrap().options.verify_each);
        // LLVM's spellings of a boolean, 0 and 1 among them.
        assert!(
            !parse_args(&["--verify-each=0"])
                .unwrap()
                .options
                .verify_each
        );
        assert!(
            parse_args(&["--verify-each=1"])
                .unwrap()
                .options
                .verify_each
        );
        assert!(
            !parse_args(&["--verify-each=False"])
                .unwrap()
                .options
                .verify_each
        );
        assert!(parse_args(&["--verify-each=yes"]).is_err());
    }

    #[test]
    fn usage_errors() {
        assert!(matches!(
            parse_args(&["--no-such-pass"]),
            Err(CliError::Clap(_))
        ));
        assert!(matches!(
            parse_args(&["--emit=llvm"]),
            Err(CliError::Clap(_))
        ));
        match parse_args(&["--chip", "foo"]) {
            Err(CliError::Message(m)) => {
                assert!(m.starts_with("--chip foo: "), "{m}");
                assert!(m.contains("unknown NVPTX chip `foo`"), "{m}");
            }
            other => panic!("{other:?}"),
        }
        assert!(parse_args(&["--chip", "sm_80", "--emit=ptx"]).is_ok());
        // Flags nothing reads without device-code output.
        assert!(matches!(
            parse_args(&["--chip", "sm_80"]),
            Err(CliError::Message(m)) if m.contains("--emit=ptx only")
        ));
        assert!(matches!(
            parse_args(&["--all-device-kernels", "--emit=plan"]),
            Err(CliError::Message(_))
        ));
        assert!(parse_args(&["--all-device-kernels", "--emit=gpu-mlir"]).is_ok());
        assert!(matches!(
            parse_args(&["--mlir-print-op-generic", "--emit=plan"]),
            Err(CliError::Message(m)) if m.contains("--emit=plan prints none")
        ));
        assert!(parse_args(&[
            "--mlir-print-op-generic",
            "--emit=plan",
            "--mlir-print-ir-after-all"
        ])
        .is_ok());
        assert!(matches!(
            parse_args(&["--split-input-file", "--emit=plan"]),
            Err(CliError::Message(m)) if m.contains("not JSON")
        ));
        assert!(parse_args(&["--split-input-file", "--emit=plan", "--verify-diagnostics"]).is_ok());
        assert!(matches!(
            parse_args(&["--tile=axis=i}x{"]),
            Err(CliError::Message(_))
        ));
        match parse_args(&[
            "--pass-pipeline=builtin.module(canonicalize)",
            "--symbol-dce",
        ]) {
            Err(CliError::Message(m)) => assert!(m.contains("cannot be combined"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn colliding_pass_is_pipeline_only() {
        let (_, added) = command(&registry());
        assert!(!added.contains(&"emit"));
        assert!(added.contains(&"tile"));
        assert!(list_passes(&registry()).contains("--emit (only in --pass-pipeline)"));
    }

    #[test]
    fn list_shows_options() {
        let text = list_passes(&registry());
        assert!(text.contains("  --tile\n      Tile an axis\n      axis=<value>  the axis (required)\n      factor=<value>  tile size (default: 4)\n"), "{text}");
        let canon = text.find("--canonicalize").unwrap();
        let tile = text.find("--tile").unwrap();
        assert!(canon < tile, "sorted by name");
    }

    #[test]
    fn the_real_registry_builds_a_valid_command() {
        // clap checks its command for conflicts in debug builds.
        command(&crate::driver::pass_registry()).0.debug_assert();
    }
}
