//! What went wrong, as the tools and the Python package report it.

use mercury_ir::Diagnostic;

/// What went wrong, with the exit status a tool maps it to. The messages of `Input`, `Check`
/// and `NoDevice` have no place in a file and no prefix ([`Error::render`] adds the tool's);
/// `Located` holds a rendered diagnostic (`file:line:col: error: ...`, the source line and a
/// caret), complete as it stands. The Python package raises `Input` and `Located` as
/// `ValueError` (`mercury.CompileError` for a located one), `NoDevice` and `Device` as
/// `RuntimeError`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Bad input or arguments (exit 1), without a source location.
    Input(String),
    /// Bad input at a place in a file (exit 1): a rendered diagnostic ([`diag`]).
    Located(String),
    /// A numerics check failed (exit 1).
    Check(String),
    /// No usable GPU or library (exit 2).
    NoDevice(String),
    /// A run failed on the device (a CUDA error, a fault the executor reported; exit 1).
    Device(String),
}

impl Error {
    /// The message as it stands: a rendered diagnostic, or the words without a prefix.
    pub fn message(&self) -> &str {
        match self {
            Error::Input(m)
            | Error::Located(m)
            | Error::Check(m)
            | Error::NoDevice(m)
            | Error::Device(m) => m,
        }
    }

    /// The exit status: 2 without a usable GPU, 1 otherwise.
    pub fn exit_status(&self) -> u8 {
        match self {
            Error::NoDevice(_) => 2,
            _ => mercury_driver::cli::BAD_INPUT,
        }
    }

    /// The complete text `tool` prints to standard error, ending in a newline: a located
    /// diagnostic as it stands, anything else as `<tool>: error: <message>`.
    pub fn render(&self, tool: &str) -> String {
        let text = match self {
            Error::Located(m) => m.trim_end().to_string(),
            other => format!("{tool}: error: {}", other.message().trim_end()),
        };
        text + "\n"
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message().trim_end())
    }
}

impl std::error::Error for Error {}

/// A diagnostic as an input error: located when it has a place in a file; without one, its
/// message (and notes) as an unlocated input error (`<tool>: error: ...`, not
/// `<unknown>: error: ...`).
pub fn diag(d: Diagnostic) -> Error {
    if d.loc == mercury_ir::Location::Unknown {
        let mut m = d.message;
        for n in &d.notes {
            m.push('\n');
            m.push_str(n.render().trim_end());
        }
        return Error::Input(m);
    }
    Error::Located(d.render())
}
