//! `--split-input-file`: chunks separated by `// -----` (anywhere in a line, as mlir-opt
//! splits), each keeping its original line numbers for diagnostics.

/// One chunk of a split buffer: its text and the 1-based line it starts on.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub text: String,
    pub first_line: u32,
}

/// mlir-opt's split marker, `--split-input-file` without a value (and its
/// `--output-split-marker`'s default).
pub const DEFAULT_SPLIT_MARKER: &str = "// -----";

/// Splits at `// -----` ([`DEFAULT_SPLIT_MARKER`]), as [`split_input_at`].
pub fn split_input(text: &str) -> Vec<Chunk> {
    split_input_at(text, DEFAULT_SPLIT_MARKER)
}

/// Splits where mlir-opt's `--split-input-file=MARKER` splits: at every occurrence of the
/// marker, anywhere in a line (`  // -----  x` leaves `x` to the next chunk). As upstream, the
/// text is cut at the marker without its last two characters, and a piece that does not go on
/// with them (and a third character that is not `0`) is a near miss that stays in its chunk.
pub fn split_input_at(text: &str, marker: &str) -> Vec<Chunk> {
    let marker = marker.trim();
    if marker.len() < 3 {
        return vec![Chunk {
            text: text.to_string(),
            first_line: 1,
        }];
    }
    let head = &marker[..marker.len() - 2];
    let tail = &marker[marker.len() - 2..];
    // Raw pieces: (offset, text) between occurrences of `head`.
    let mut raw = Vec::new();
    let mut pos = 0;
    while let Some(i) = text[pos..].find(head) {
        raw.push((pos, &text[pos..pos + i]));
        pos += i + head.len();
    }
    raw.push((pos, &text[pos..]));
    let mut chunks: Vec<(usize, String)> = Vec::new();
    let mut prev: Option<(usize, String)> = None;
    for (off, piece) in raw {
        let Some((p_off, p_text)) = prev.take() else {
            prev = Some((off, piece.to_string()));
            continue;
        };
        let whole = piece.starts_with(tail)
            && piece.len() > tail.len()
            && !piece[tail.len()..].starts_with('0');
        if whole {
            chunks.push((p_off, p_text));
            prev = Some((off + tail.len(), piece[tail.len()..].to_string()));
        } else {
            prev = Some((p_off, p_text + head + piece));
        }
    }
    chunks.extend(prev);
    chunks
        .into_iter()
        .map(|(off, chunk)| Chunk {
            first_line: text[..off].matches('\n').count() as u32 + 1,
            text: chunk,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    /// Chunks keep their place: a chunk starts right after its marker (on the marker's line),
    /// and a marker inside a line splits there.
    #[test]
    fn splits_where_mlir_opt_splits() {
        let c = super::split_input("a\n// -----\nb\nc\n  // -----  x\nd");
        assert_eq!(c.len(), 3);
        assert_eq!((c[0].text.as_str(), c[0].first_line), ("a\n", 1));
        assert_eq!((c[1].text.as_str(), c[1].first_line), ("\nb\nc\n  ", 2));
        assert_eq!((c[2].text.as_str(), c[2].first_line), ("  x\nd", 5));
        let c = super::split_input_at("a\n// -----\nb\n;; x\nd", ";; x");
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].text.as_str(), c[1].text.as_str()),
            ("a\n// -----\nb\n", "\nd")
        );
        assert_eq!(c[1].first_line, 4);
        // A near miss (`// ----` and one dash less) is not a marker.
        assert_eq!(super::split_input("a\n// ----\nb").len(), 1);
    }
}
