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

/// Where an operation came from: MLIR's location attributes.
#[derive(Debug, Clone, Default)]
pub enum Location {
    /// `loc(unknown)`.
    #[default]
    Unknown,
    /// A position in a buffer this process parsed (diagnostics show its line and a caret);
    /// printed as `loc("name":line:col)`.
    File {
        file: Arc<SourceFile>,
        line: u32,
        col: u32,
    },
    /// `loc("file":line:col)` as written in the IR, with the optional end of a range
    /// (`loc("f":1:2 to 3:4)`, `loc("f":1:2 to :4)`) and a line-only form (`loc("f":1)`).
    FileLineCol {
        filename: String,
        line: u32,
        col: Option<u32>,
        end_line: Option<u32>,
        end_col: Option<u32>,
    },
    /// `loc("name")` or `loc("name"(child))`.
    Name {
        name: String,
        child: Option<Box<Location>>,
    },
    /// `loc(callsite(callee at caller))`.
    CallSite {
        callee: Box<Location>,
        caller: Box<Location>,
    },
    /// `loc(fused[a, b])`, `loc(fused<metadata>[a, b])`; the metadata attribute is kept as its
    /// text.
    Fused {
        metadata: Option<String>,
        locs: Vec<Location>,
    },
    /// A location written in the IR that names no place in a file (`loc(unknown)`,
    /// `loc("name")`), with the place in the parsed buffer it was written at: it prints as
    /// written, diagnostics point at the place.
    Written {
        written: Box<Location>,
        at: Box<Location>,
    },
}

impl PartialEq for Location {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Location::Unknown, Location::Unknown) => true,
            (
                Location::FileLineCol {
                    filename: a,
                    line: l1,
                    col: c1,
                    end_line: e1,
                    end_col: f1,
                },
                Location::FileLineCol {
                    filename: b,
                    line: l2,
                    col: c2,
                    end_line: e2,
                    end_col: f2,
                },
            ) => a == b && l1 == l2 && c1 == c2 && e1 == e2 && f1 == f2,
            (Location::Name { name: a, child: c1 }, Location::Name { name: b, child: c2 }) => {
                a == b && c1 == c2
            }
            (
                Location::CallSite {
                    callee: a,
                    caller: b,
                },
                Location::CallSite {
                    callee: c,
                    caller: d,
                },
            ) => a == c && b == d,
            (
                Location::Fused {
                    metadata: m1,
                    locs: l1,
                },
                Location::Fused {
                    metadata: m2,
                    locs: l2,
                },
            ) => m1 == m2 && l1 == l2,
            (Location::Written { written: a, .. }, Location::Written { written: b, .. }) => a == b,
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
    /// The line a diagnostic at this location is reported on: its own, or that of the
    /// location it names (a name's child, a call site's callee, a fusion's first).
    pub fn line(&self) -> Option<u32> {
        match self.primary() {
            Location::File { line, .. } | Location::FileLineCol { line, .. } => Some(*line),
            _ => None,
        }
    }

    /// The file position a diagnostic points at, as upstream picks it.
    pub fn primary(&self) -> &Location {
        match self {
            Location::Written { at, .. } => at.primary(),
            Location::Name { child: Some(c), .. } => c.primary(),
            Location::CallSite { callee, .. } => callee.primary(),
            Location::Fused { locs, .. } => locs
                .iter()
                .map(Location::primary)
                .find(|l| matches!(l, Location::File { .. } | Location::FileLineCol { .. }))
                .unwrap_or(self),
            _ => self,
        }
    }

    /// The location in MLIR's syntax, inside `loc(...)`.
    pub fn mlir(&self) -> String {
        match self {
            Location::Written { written, .. } => written.mlir(),
            Location::Unknown => "unknown".into(),
            Location::File { file, line, col } => {
                format!("{}:{line}:{col}", crate::attributes::quote(&file.name))
            }
            Location::FileLineCol {
                filename,
                line,
                col,
                end_line,
                end_col,
            } => {
                let mut s = format!("{}:{line}", crate::attributes::quote(filename));
                if let Some(c) = col {
                    s.push_str(&format!(":{c}"));
                }
                match (end_line, end_col) {
                    (Some(l), Some(c)) => s.push_str(&format!(" to {l}:{c}")),
                    (None, Some(c)) => s.push_str(&format!(" to :{c}")),
                    (Some(l), None) => s.push_str(&format!(" to {l}:")),
                    (None, None) => {}
                }
                s
            }
            Location::Name { name, child } => match child {
                Some(c) => format!("{}({})", crate::attributes::quote(name), c.mlir()),
                None => crate::attributes::quote(name),
            },
            Location::CallSite { callee, caller } => {
                format!("callsite({} at {})", callee.mlir(), caller.mlir())
            }
            Location::Fused { metadata, locs } => {
                let inner: Vec<String> = locs.iter().map(Location::mlir).collect();
                match metadata {
                    Some(m) => format!("fused<{m}>[{}]", inner.join(", ")),
                    None => format!("fused[{}]", inner.join(", ")),
                }
            }
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.primary() {
            Location::File { file, line, col } => write!(f, "{}:{line}:{col}", file.name),
            Location::FileLineCol {
                filename,
                line,
                col,
                ..
            } => write!(f, "{filename}:{line}:{}", col.unwrap_or(0)),
            Location::Name { name, .. } => write!(f, "{}", crate::attributes::quote(name)),
            _ => write!(f, "<unknown>"),
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
        if let Location::File { file, line, col } = self.loc.primary() {
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
