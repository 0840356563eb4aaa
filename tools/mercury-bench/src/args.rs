//! The hand-written command lines of `mercury-mgpu`, `mercury-gpu-bench` and `mercury-study`:
//! flags and their values read one by one, and an option given twice refused (the rule
//! `mercury-opt` has for pass options, `lit/mercury-opt/repeated-option.mlir`): the last one
//! never wins behind the user's back. Errors are messages for
//! `mercury_driver::cli::usage_error` (exit 1), written before any GPU is looked for.

use std::str::FromStr;

/// The arguments after the command, read flag by flag, remembering every option given.
pub struct Flags<I: Iterator<Item = String>> {
    it: I,
    /// Appended to "needs a value".
    usage: &'static str,
    /// Each option given so far (its name), as it was first written (`--devices 2`).
    seen: Vec<(String, String)>,
}

impl<I: Iterator<Item = String>> Flags<I> {
    /// Reads `it`; `usage` follows the message of a flag without its value.
    pub fn new(it: I, usage: &'static str) -> Self {
        Flags {
            it,
            usage,
            seen: Vec::new(),
        }
    }

    /// The next argument (a flag, for the caller to match), or `None` at the end.
    pub fn next_flag(&mut self) -> Option<String> {
        self.it.next()
    }

    /// Marks option `name` as given, written `given`.
    ///
    /// # Errors
    /// `name` was given before.
    fn once(&mut self, name: &str, given: String) -> Result<(), String> {
        if let Some((_, first)) = self.seen.iter().find(|(n, _)| n == name) {
            return Err(format!(
                "{name} given twice ('{first}', then '{given}'); give each option once"
            ));
        }
        self.seen.push((name.to_string(), given));
        Ok(())
    }

    /// A flag without a value, `flag` as written, counted as option `name` (a flag and its
    /// negation, `--check` and `--no-check`, are one option).
    ///
    /// # Errors
    /// The option was given before.
    pub fn switch_as(&mut self, flag: &str, name: &str) -> Result<(), String> {
        self.once(name, flag.to_string())
    }

    /// A flag without a value.
    ///
    /// # Errors
    /// It was given before.
    pub fn switch(&mut self, flag: &str) -> Result<(), String> {
        self.switch_as(flag, flag)
    }

    /// The value of `flag` (the next argument), counted as option `name` (an older spelling,
    /// `--mib` for `--max-mib`, is the same option).
    ///
    /// # Errors
    /// No value follows, or the option was given before.
    pub fn value_as(&mut self, flag: &str, name: &str) -> Result<String, String> {
        let v = self
            .it
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{}", self.usage))?;
        self.once(name, format!("{flag} {v}"))?;
        Ok(v)
    }

    /// The value of `flag`.
    ///
    /// # Errors
    /// No value follows, or `flag` was given before.
    pub fn value(&mut self, flag: &str) -> Result<String, String> {
        self.value_as(flag, flag)
    }

    /// The value of `flag` as a `T`.
    ///
    /// # Errors
    /// As [`Flags::value`], or the value does not parse (`--reps x: invalid digit ...`).
    pub fn parse<T: FromStr>(&mut self, flag: &str) -> Result<T, String>
    where
        T::Err: std::fmt::Display,
    {
        self.parse_as(flag, flag)
    }

    /// [`Flags::parse`] of option `name` written `flag`.
    ///
    /// # Errors
    /// As [`Flags::value_as`], or the value does not parse.
    pub fn parse_as<T: FromStr>(&mut self, flag: &str, name: &str) -> Result<T, String>
    where
        T::Err: std::fmt::Display,
    {
        let v = self.value_as(flag, name)?;
        v.parse::<T>().map_err(|e| format!("{flag} {v}: {e}"))
    }

    /// The value of `flag`: a number in `lo..=hi` ([`in_range`]).
    ///
    /// # Errors
    /// As [`Flags::value`], or as [`in_range`].
    pub fn number_in(&mut self, flag: &str, lo: f64, hi: f64, what: &str) -> Result<f64, String> {
        let raw = self.value(flag)?;
        in_range(flag, &raw, lo, hi, what)
    }
}

/// `raw`, the value of `flag`, as a finite number in `lo..=hi`, `what` saying what it is
/// (`milliseconds`).
///
/// # Errors
/// It does not parse, or it is outside the range (NaN and infinities included): refused,
/// never clamped into it.
pub fn in_range(flag: &str, raw: &str, lo: f64, hi: f64, what: &str) -> Result<f64, String> {
    let v: f64 = raw.parse().map_err(|e| format!("{flag} {raw}: {e}"))?;
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{flag} {raw}: must be a finite number of {what} in [{}, {}]",
            short(lo),
            short(hi)
        ))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(args: &[&str]) -> Flags<std::vec::IntoIter<String>> {
        let v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        Flags::new(v.into_iter(), "usage: t")
    }

    #[test]
    fn an_option_given_twice_is_refused_with_both_forms() {
        let mut f = flags(&["2", "3"]);
        assert_eq!(f.parse::<usize>("--devices"), Ok(2));
        assert_eq!(
            f.parse::<usize>("--devices"),
            Err(
                "--devices given twice ('--devices 2', then '--devices 3'); give each option once"
                    .into()
            )
        );
        // Two spellings of one option, and a flag with its negation.
        let mut f = flags(&["5", "6"]);
        assert!(f.value_as("--mib", "--max-mib").is_ok());
        assert_eq!(
            f.value_as("--max-mib", "--max-mib"),
            Err(
                "--max-mib given twice ('--mib 5', then '--max-mib 6'); give each option once"
                    .into()
            )
        );
        let mut f = flags(&[]);
        assert!(f.switch_as("--no-check", "--check").is_ok());
        assert_eq!(
            f.switch_as("--check", "--check"),
            Err("--check given twice ('--no-check', then '--check'); give each option once".into())
        );
        // Other options do not count.
        let mut f = flags(&["1", "2"]);
        assert!(f.value("--seed").is_ok() && f.value("--reps").is_ok() && f.switch("--x").is_ok());
    }

    #[test]
    fn values_missing_unparsable_or_out_of_range_are_refused() {
        assert_eq!(
            flags(&[]).value("--out"),
            Err("--out needs a value\nusage: t".into())
        );
        assert!(flags(&["x"])
            .parse::<usize>("--reps")
            .unwrap_err()
            .starts_with("--reps x: "));
        let range = |v: &str| flags(&[v]).number_in("--gap", 0.0, 10.0, "milliseconds");
        assert_eq!(range("0"), Ok(0.0));
        assert_eq!(range("10"), Ok(10.0));
        assert_eq!(
            flags(&["0"]).number_in("--tflops", 1e-6, 1e6, "TFLOP/s"),
            Err("--tflops 0: must be a finite number of TFLOP/s in [1e-6, 1e6]".into())
        );
        for bad in ["-5", "10.5", "nan", "inf", "-inf"] {
            assert_eq!(
                range(bad),
                Err(format!(
                    "--gap {bad}: must be a finite number of milliseconds in [0, 10]"
                ))
            );
        }
    }
}
