//! Source locations and diagnostics printed as `file:line:col: error: message` with the
//! source line and a caret under the column.

use std::fmt;
use std::sync::{Arc, OnceLock};

/// A source buffer: its name (file path or `<stdin>`) and text, shared by locations.
#[derive(Debug)]
pub struct SourceFile {
    pub name: String,
    pub text: String,
    /// Line number (1-based) that line 1 of `text` has in the original file (split inputs).
    pub first_line: u32,
    /// Byte offset of the start of every line, computed on first use: `location` is a binary
    /// search instead of a scan from the start (which made parsing quadratic in file size).
    line_starts: OnceLock<Vec<usize>>,
}

impl SourceFile {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Arc<SourceFile> {
        Arc::new(SourceFile {
            name: name.into(),
            text: text.into(),
            first_line: 1,
            line_starts: OnceLock::new(),
        })
    }
    pub fn with_first_line(
        name: impl Into<String>,
        text: impl Into<String>,
        first_line: u32,
    ) -> Arc<SourceFile> {
        Arc::new(SourceFile {
            name: name.into(),
            text: text.into(),
            first_line,
            line_starts: OnceLock::new(),
        })
    }
    /// Text of a 1-based line of this buffer (original numbering).
    pub fn line_text(&self, line: u32) -> Option<&str> {
        let local = line.checked_sub(self.first_line)? as usize;
        // `split`, not `lines`: the empty line after a final newline is where errors at the end
        // of the input point.
        let text = self.text.split('\n').nth(local)?;
        Some(text.strip_suffix('\r').unwrap_or(text))
    }
    /// Location of a byte offset into `text`.
    pub fn location(self: &Arc<Self>, offset: usize) -> Location {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let starts = self.line_starts.get_or_init(|| {
            std::iter::once(0)
                .chain(self.text.match_indices('\n').map(|(i, _)| i + 1))
                .collect()
        });
        // starts[0] == 0 <= offset, so the line index is at least 0.
        let index = starts.partition_point(|&start| start <= offset) - 1;
        let line = index as u32 + self.first_line;
        let col = self.text[starts[index]..offset].chars().count() as u32 + 1;
        Location::File {
            file: self.clone(),
            line,
            col,
        }
    }
}

/// Where an operation came from.
#[derive(Debug, Clone, Default)]
pub enum Location {
    #[default]
    Unknown,
    File {
        file: Arc<SourceFile>,
        line: u32,
        col: u32,
    },
}

impl PartialEq for Location {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Location::Unknown, Location::Unknown) => true,
            (
                Location::File {
                    file: a,
                    line: l1,
                    col: c1,
                },
                Location::File {
                    file: b,
                    line: l2,
                    col: c2,
                },
            ) => a.name == b.name && l1 == l2 && c1 == c2,
            _ => false,
        }
    }
}

impl Location {
    pub fn line(&self) -> Option<u32> {
        match self {
            Location::File { line, .. } => Some(*line),
            Location::Unknown => None,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Unknown => write!(f, "<unknown>"),
            Location::File { file, line, col } => write!(f, "{}:{line}:{col}", file.name),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
    Note,
    Remark,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
            Severity::Remark => "remark",
        })
    }
}

/// One diagnostic with optional attached notes.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub loc: Location,
    pub message: String,
    pub notes: Vec<Diagnostic>,
}

impl Diagnostic {
    pub fn error(loc: Location, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            loc,
            message: message.into(),
            notes: vec![],
        }
    }
    pub fn warning(loc: Location, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            loc,
            message: message.into(),
            notes: vec![],
        }
    }
    pub fn remark(loc: Location, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Remark,
            loc,
            message: message.into(),
            notes: vec![],
        }
    }
    pub fn with_note(mut self, loc: Location, message: impl Into<String>) -> Diagnostic {
        self.notes.push(Diagnostic {
            severity: Severity::Note,
            loc,
            message: message.into(),
            notes: vec![],
        });
        self
    }

    /// `file:line:col: error: message`, then the source line and a caret.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.render_into(&mut out);
        out
    }

    fn render_into(&self, out: &mut String) {
        use std::fmt::Write;
        // A note with no place in a file is `note: ...` (not `<unknown>: note: ...`).
        if self.loc == Location::Unknown && self.severity == Severity::Note {
            let _ = writeln!(out, "{}: {}", self.severity, self.message);
        } else {
            let _ = writeln!(out, "{}: {}: {}", self.loc, self.severity, self.message);
        }
        if let Location::File { file, line, col } = &self.loc {
            if let Some(text) = file.line_text(*line) {
                let _ = writeln!(out, "{text}");
                let pad: String = text
                    .chars()
                    .take(col.saturating_sub(1) as usize)
                    .map(|c| if c == '\t' { '\t' } else { ' ' })
                    .collect();
                let _ = writeln!(out, "{pad}^");
            }
        }
        for n in &self.notes {
            n.render_into(out);
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.loc, self.severity, self.message)
    }
}

impl std::error::Error for Diagnostic {}
