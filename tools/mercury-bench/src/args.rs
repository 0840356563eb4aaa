//! What the clap command lines of `mercury-mgpu`, `mercury-gpu-bench` and `mercury-study`
//! share beyond clap: value parsers that refuse a count of 0 and a number outside its range
//! (never clamped into it), and the `--device-kernels-ptx` file, read before any GPU is looked
//! for. clap itself refuses an option given twice (the rule `mercury-opt` has for pass options,
//! `lit/mercury-opt/repeated-option.mlir`: the last one never wins behind the user's back).
//! Every refusal is a `clap::Error` for `mercury_driver::cli::clap_failure` (exit 1).

use std::path::Path;

/// A value parser (`#[arg(value_parser = at_least_one("..."))]`) of a count that cannot be 0,
/// `what` saying what it counts: 0 is refused, never raised to 1 behind the user's back.
pub fn at_least_one(
    what: &'static str,
) -> impl Fn(&str) -> Result<usize, String> + Clone + Send + Sync + 'static {
    move |raw| match raw.parse::<usize>().map_err(|e| e.to_string())? {
        0 => Err(format!("must be at least 1 ({what})")),
        n => Ok(n),
    }
}

/// A value parser of a finite number in `lo..=hi`, `what` saying what it is (`milliseconds`):
/// one that does not parse or is outside the range (NaN and infinities included) is refused,
/// never clamped into it. The option needs `allow_hyphen_values` for clap to hand it `-5`.
pub fn in_range(
    lo: f64,
    hi: f64,
    what: &'static str,
) -> impl Fn(&str) -> Result<f64, String> + Clone + Send + Sync + 'static {
    move |raw| {
        let v = raw.parse::<f64>().map_err(|e| e.to_string())?;
        if v.is_finite() && (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(format!(
                "must be a finite number of {what} in [{}, {}]",
                short(lo),
                short(hi)
            ))
        }
    }
}

/// `x` as a reader writes it: `1e-6` and `1e6`, but `0`, `20` and `10000`.
fn short(x: f64) -> String {
    if x != 0.0 && !(1e-3..1e5).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// The text of `--device-kernels-ptx FILE`, when given: read while the arguments are checked,
/// so that an unreadable file is a usage error said before any GPU is probed.
///
/// # Errors
/// The file cannot be read (the message names the option and the path).
pub fn read_ptx(path: Option<&Path>) -> Result<Option<String>, clap::Error> {
    path.map(|p| {
        std::fs::read_to_string(p).map_err(|e| {
            clap::Error::raw(
                clap::error::ErrorKind::Io,
                format!("cannot read --device-kernels-ptx '{}': {e}\n", p.display()),
            )
        })
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_of_zero_and_unparsable_counts_are_refused() {
        let reps = at_least_one("timed repetitions");
        assert_eq!(reps("3"), Ok(3));
        assert_eq!(
            reps("0"),
            Err("must be at least 1 (timed repetitions)".into())
        );
        assert!(reps("x").unwrap_err().contains("invalid digit"));
        assert!(reps("-1").unwrap_err().contains("invalid digit"));
    }

    #[test]
    fn numbers_outside_their_range_are_refused_not_clamped() {
        let gap = in_range(0.0, 10.0, "milliseconds");
        assert_eq!(gap("0"), Ok(0.0));
        assert_eq!(gap("10"), Ok(10.0));
        assert_eq!(
            in_range(1e-6, 1e6, "TFLOP/s")("0"),
            Err("must be a finite number of TFLOP/s in [1e-6, 1e6]".into())
        );
        for bad in ["-5", "10.5", "nan", "inf", "-inf"] {
            assert_eq!(
                gap(bad),
                Err("must be a finite number of milliseconds in [0, 10]".into())
            );
        }
        assert_eq!(gap("x"), Err("invalid float literal".into()));
    }

    #[test]
    fn an_unreadable_ptx_is_a_usage_error_naming_the_option() {
        assert!(read_ptx(None).unwrap().is_none());
        let e = read_ptx(Some(Path::new("/nonexistent/k.ptx"))).unwrap_err();
        assert!(e.use_stderr());
        assert!(e
            .to_string()
            .contains("cannot read --device-kernels-ptx '/nonexistent/k.ptx': "));
    }
}
