//! The command-line conventions every tool under `tools/` shares, written once: a usage error
//! (an unknown flag, a bad value, a missing argument) is bad input and exits 1, as `mlir-opt`
//! does; `--help` and `--version` print to standard output and exit 0. Errors without a
//! source location read `<tool>: error: <message>`.

use std::process::ExitCode;

/// The exit status of bad input: a usage error, an invalid file, a located diagnostic.
pub const BAD_INPUT: u8 = 1;

/// Prints a failed parse of the command line (clap's message and usage, or the help or version
/// text asked for) and returns the exit status: 0 for `--help`/`--version`, [`BAD_INPUT`]
/// for a usage error (never clap's own 2).
pub fn clap_failure(e: &clap::Error) -> ExitCode {
    let _ = e.print();
    status(e)
}

/// The exit status of a failed parse of the command line, printing nothing.
fn status(e: &clap::Error) -> ExitCode {
    if e.use_stderr() {
        ExitCode::from(BAD_INPUT)
    } else {
        ExitCode::SUCCESS
    }
}

/// Parses this process's command line into `P`. `Err` carries the exit status after the
/// message was printed ([`clap_failure`]).
pub fn parse<P: clap::Parser>() -> Result<P, ExitCode> {
    P::try_parse().map_err(|e| clap_failure(&e))
}

/// Prints `<tool>: error: <message>` (the format of an error without a source location) and
/// returns [`BAD_INPUT`]: for a usage error found after the parse (`mercury-fuzz --threads 0`,
/// `mercury-mgpu selfcheck --devices` past the visible GPUs).
pub fn usage_error(tool: &str, message: &str) -> ExitCode {
    eprintln!("{tool}: error: {}", message.trim_end());
    ExitCode::from(BAD_INPUT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    #[command(name = "t", version)]
    struct Args {
        #[arg(long)]
        n: Option<usize>,
    }

    #[test]
    fn usage_errors_are_bad_input_and_help_is_not() {
        let status = |argv: &[&str]| Args::try_parse_from(argv).err().map(|e| status(&e));
        assert_eq!(status(&["t", "--n", "x"]), Some(ExitCode::from(BAD_INPUT)));
        assert_eq!(status(&["t", "--bogus"]), Some(ExitCode::from(BAD_INPUT)));
        assert_eq!(status(&["t", "--help"]), Some(ExitCode::SUCCESS));
        assert_eq!(status(&["t", "--version"]), Some(ExitCode::SUCCESS));
        assert_eq!(status(&["t", "--n", "3"]), None);
    }
}
