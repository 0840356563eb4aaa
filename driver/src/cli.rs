//! The command-line conventions every tool under `tools/` shares, written once: a usage error
//! (an unknown flag, a bad value, a missing argument) is bad input and exits 1, as `mlir-opt`
//! does; `--help` and `--version` print to standard output and exit 0. Errors without a
//! source location read `<tool>: error: <message>`. A pass given as a flag takes its options
//! the same way in every tool (`--shift-shard="balance=false"`: [`pass_flag`],
//! [`pass_options`]).

use mercury_ir::pass::parse_pipeline;
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

/// A pass's flag as every tool takes it (mlir-opt's form): `--NAME` alone, or
/// `--NAME="key=value key2=value2"` with the pass's options (`=` required, so that the next
/// argument is never read as options). `arg` is the flag as the tool declares it (its id, long
/// name, help); the value is the options' text, `""` when the flag is given alone; read it with
/// [`pass_options`]. `mercury-opt` gives every registered pass such a flag, `mercury-run` its
/// `--shift-shard`.
pub fn pass_flag(arg: clap::Arg) -> clap::Arg {
    arg.value_name("OPTIONS")
        .num_args(0..=1)
        .require_equals(true)
        .default_missing_value("")
}

/// The options of `--NAME=VALUE` (a [`pass_flag`]): `key=value` pairs separated by spaces, read
/// with the pass pipeline's grammar (`NAME{VALUE}`); no pairs for an empty value. Whether the
/// pass has those options is checked when it is added to a pass manager.
///
/// # Errors
/// A value that is not such pairs: `bad options for --NAME: ...`.
pub fn pass_options(name: &str, value: &str) -> Result<Vec<(String, String)>, String> {
    if value.trim().is_empty() {
        return Ok(vec![]);
    }
    let entries = parse_pipeline(&format!("{name}{{{value}}}"))
        .map_err(|e| format!("bad options for --{name}: {e}"))?;
    match entries.as_slice() {
        [one] if one.name == name => Ok(one.options.clone()),
        _ => Err(format!(
            "bad options for --{name}: '{value}' (expected key=value pairs separated by spaces)"
        )),
    }
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
    fn pass_flags_read_their_options_with_the_pipeline_grammar() {
        let pairs = |v: &[(&str, &str)]| {
            v.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(pass_options("shift-shard", ""), Ok(vec![]));
        assert_eq!(
            pass_options("shift-shard", "balance=false axis=i"),
            Ok(pairs(&[("balance", "false"), ("axis", "i")]))
        );
        assert!(pass_options("shift-shard", "balance=false}, tile{").is_err());
        let cmd = clap::Command::new("t").arg(pass_flag(clap::Arg::new("p").long("p")));
        let value = |argv: &[&str]| {
            cmd.clone()
                .try_get_matches_from(argv)
                .map(|m| m.get_one::<String>("p").cloned())
        };
        assert_eq!(value(&["t", "--p"]).unwrap(), Some(String::new()));
        assert_eq!(value(&["t", "--p=a=1"]).unwrap(), Some("a=1".into()));
        assert_eq!(value(&["t"]).unwrap(), None);
        // The options need `=`: the next argument is an input, never the pass's options.
        assert!(value(&["t", "--p", "a=1"]).is_err());
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
