//! Writing to standard output and standard error without panicking (`print!` panics when the
//! reader of a pipe has gone away, e.g. `mercury-opt x.mlir | head -1`).

use std::io::Write;

/// Writes `text` to standard output; false if that failed, said on standard error unless the
/// reader has gone away (a closed pipe is how `| head` ends a run, as for any filter).
pub fn stdout(text: &str) -> bool {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => false,
        Err(e) => {
            error(&format!("could not write standard output: {e}"));
            false
        }
    }
}

/// Writes `text` to standard error (failures are ignored: there is nowhere left to report).
pub fn stderr(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// `mercury-opt: error: <msg>` for errors that have no source location.
pub fn error(msg: &str) {
    stderr(&format!("mercury-opt: error: {msg}\n"));
}
