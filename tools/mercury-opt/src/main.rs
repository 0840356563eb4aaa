//! `mercury-opt`: the Mercury-rs `-opt` driver, modelled on `mlir-opt`.
//!
//! It reads one `.mlir` buffer (a file or standard input), optionally splits it at `// -----`
//! lines, and for every chunk parses, verifies, runs a pass pipeline and prints the result.
//! Diagnostics go to standard error as `file:line:col: error: message` with a caret line; with
//! `--verify-diagnostics` they are instead matched against `// expected-error {{...}}`
//! annotations in the input.
//!
//! Exit status: 0 on success (and for `--help`, `--version`, `--list-passes`), 1 when the
//! input, the pipeline or the command line is bad (a usage error too, as in mlir-opt), or a
//! diagnostic expectation failed.

mod cli;
mod driver;
mod out;

use std::process::ExitCode;

/// Stack for the driver thread. Input nesting is bounded by the parser (`MAX_NESTING`); this
/// leaves passes that recurse over the IR a wide margin even in unoptimized builds.
const STACK_BYTES: usize = 64 << 20;

fn main() -> ExitCode {
    match std::thread::Builder::new()
        .name("mercury-opt".into())
        .stack_size(STACK_BYTES)
        .spawn(real_main)
    {
        Ok(handle) => handle.join().unwrap_or(ExitCode::from(101)),
        Err(_) => real_main(),
    }
}

fn real_main() -> ExitCode {
    let passes = driver::pass_registry();
    let invocation = match cli::parse(std::env::args_os(), &passes) {
        Ok(inv) => inv,
        // Prints usage or help; exits 0 for --help/--version and 1 for usage errors.
        Err(cli::CliError::Clap(e)) => return mercury_driver::cli::clap_failure(&e),
        Err(cli::CliError::Message(m)) => {
            out::error(&m);
            return ExitCode::from(mercury_driver::cli::BAD_INPUT);
        }
    };
    if invocation.options.list_passes {
        out::stdout(&cli::list_passes(&passes));
        return ExitCode::SUCCESS;
    }
    match driver::run(&invocation, &passes) {
        Ok(()) => ExitCode::SUCCESS,
        Err(driver::Failed) => ExitCode::FAILURE,
    }
}
