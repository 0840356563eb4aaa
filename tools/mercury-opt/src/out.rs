//! Writing to standard output and standard error without panicking (`print!` panics when the
//! reader of a pipe has gone away, e.g. `mercury-opt x.mlir | head -1`).

use std::io::Write;

/// Writes `text` to standard output; false if that failed.
pub fn stdout(text: &str) -> bool {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .is_ok()
}

/// Writes `text` to standard error (failures are ignored: there is nowhere left to report).
pub fn stderr(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// `mercury-opt: error: <msg>` for errors that have no source location.
pub fn error(msg: &str) {
    stderr(&format!("mercury-opt: error: {msg}\n"));
}
