//! Passes, the pass registry, the textual pipeline `builtin.module(p1{k=v k2=w},p2)` and the
//! pass manager.

use crate::diag::{Diagnostic, Location, SourceFile};
use crate::ir::Operation;
use crate::registry::Registry;
use indexmap::IndexMap;
use std::sync::Arc;

/// One option a pass accepts.
#[derive(Debug, Clone, Copy)]
pub struct PassOptionDef {
    pub name: &'static str,
    pub help: &'static str,
    /// Default value; `None` means the option is required.
    pub default: Option<&'static str>,
}

/// Parsed `key=value` options of one pass instance, checked against its definitions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PassOptions {
    values: IndexMap<String, String>,
}

impl PassOptions {
    pub fn from_pairs(info: &PassInfo, pairs: &[(String, String)]) -> Result<PassOptions, String> {
        let mut values = IndexMap::new();
        for (j, (k, v)) in pairs.iter().enumerate() {
            if !info.options.iter().any(|o| o.name == k) {
                let known: Vec<&str> = info.options.iter().map(|o| o.name).collect();
                let hint = did_you_mean(k, known.iter().copied())
                    .map(|m| format!("; did you mean '{m}'?"))
                    .unwrap_or_default();
                return Err(format!(
                    "pass '{}' has no option '{k}'{hint}{}",
                    info.name,
                    if known.is_empty() {
                        String::from(" (it takes none)")
                    } else {
                        format!(" (options: {})", known.join(", "))
                    }
                ));
            }
            if values.contains_key(k) {
                let first = pairs.iter().position(|(q, _)| q == k).unwrap_or(j);
                return Err(repeated_option_message(info.name, pairs, first, j));
            }
            values.insert(k.clone(), v.clone());
        }
        for o in info.options {
            if !values.contains_key(o.name) {
                match o.default {
                    // An empty default is what `get` reads for an option not stored: it stays
                    // out of `render`, so messages name the options given and real defaults.
                    Some("") => {}
                    Some(d) => {
                        values.insert(o.name.to_string(), d.to_string());
                    }
                    None => {
                        return Err(format!(
                            "pass '{}' requires option '{}' ({})",
                            info.name, o.name, o.help
                        ))
                    }
                }
            }
        }
        Ok(PassOptions { values })
    }
    pub fn get(&self, k: &str) -> &str {
        self.values.get(k).map_or("", String::as_str)
    }
    pub fn get_usize(&self, k: &str) -> Result<usize, String> {
        usize::parse_option(k, self.get(k))
    }
    pub fn get_bool(&self, k: &str) -> Result<bool, String> {
        bool::parse_option(k, self.get(k))
    }
    pub fn get_list(&self, k: &str) -> Vec<String> {
        self.get(k)
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    }
    /// `{k=v k2=v2}` as MLIR prints pass options (empty string when there are none): the
    /// options given and the defaults that are not empty.
    pub fn render(&self) -> String {
        if self.values.is_empty() {
            return String::new();
        }
        let items: Vec<String> = self
            .values
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{{{}}}", items.join(" "))
    }
}

/// The first option given twice: the indices in `pairs` of its first and second `key=value`.
fn repeated_option(pairs: &[(String, String)]) -> Option<(usize, usize)> {
    pairs
        .iter()
        .enumerate()
        .skip(1)
        .find_map(|(j, (k, _))| pairs[..j].iter().position(|(q, _)| q == k).map(|i| (i, j)))
}

/// Option `pairs[second]` repeats `pairs[first]`: which one would win is not for the reader of
/// a schedule to guess.
fn repeated_option_message(
    pass: &str,
    pairs: &[(String, String)],
    first: usize,
    second: usize,
) -> String {
    let item = |(k, v): &(String, String)| format!("{k}={v}");
    format!(
        "pass '{pass}': option '{}' given twice ('{}', then '{}'); give each option once",
        pairs[second].0,
        item(&pairs[first]),
        item(&pairs[second])
    )
}

/// The Rust type of a pass option: how its `key=value` text is read.
pub trait OptionValue: Sized {
    /// Reads option `name`'s value `v`; `Err` says what is wrong with it.
    fn parse_option(name: &str, v: &str) -> Result<Self, String>;
}

impl OptionValue for usize {
    fn parse_option(k: &str, v: &str) -> Result<usize, String> {
        v.parse().map_err(|e: std::num::ParseIntError| {
            if *e.kind() == std::num::IntErrorKind::PosOverflow {
                format!("option '{k}' is too large: {v} (at most {})", usize::MAX)
            } else {
                format!("option '{k}' must be a non-negative integer, got '{v}'")
            }
        })
    }
}

/// An optional value: empty means absent.
impl<T: OptionValue> OptionValue for Option<T> {
    fn parse_option(k: &str, v: &str) -> Result<Option<T>, String> {
        if v.is_empty() {
            Ok(None)
        } else {
            T::parse_option(k, v).map(Some)
        }
    }
}

/// `true`, `1` or nothing (a bare `{flag}`) is true; `false` or `0` is false.
impl OptionValue for bool {
    fn parse_option(k: &str, v: &str) -> Result<bool, String> {
        match v {
            "true" | "1" | "" => Ok(true),
            "false" | "0" => Ok(false),
            v => Err(format!("option '{k}' must be true or false, got '{v}'")),
        }
    }
}

/// A symbol name, written with or without its `@`.
impl OptionValue for String {
    fn parse_option(_: &str, v: &str) -> Result<String, String> {
        Ok(v.trim().trim_start_matches('@').to_string())
    }
}

/// Declares a pass's options once, on its struct: each field with its type (an
/// [`OptionValue`]), an optional default (a field without one is required) and its help. Gives
/// the struct, its `OPTIONS` table (what the registry, `--list-passes` and the option checks
/// read) and `from_options`, which reads the checked `key=value` pairs into the typed fields.
/// An optional `extra: [...]` lists options that are not fields (an adapter's, read by it).
///
/// ```
/// mercury_ir::pass_options! {
///     /// Options of a pass.
///     pub struct Split {
///         axis: String => "the axis to split",
///         factor: usize => "iterations of the outer axis",
///         outer: String = "" => "name of the outer axis (default <axis>_o)",
///     }
/// }
/// let info = mercury_ir::pass::PassInfo {
///     name: "split",
///     summary: "an example",
///     options: Split::OPTIONS,
///     target: None,
///     create: |_| Err("not run here".into()),
/// };
/// let pairs = [("axis".to_string(), "@i".to_string()), ("factor".into(), "4".into())];
/// let o = mercury_ir::pass::PassOptions::from_pairs(&info, &pairs).unwrap();
/// let s = Split::from_options(&o).unwrap();
/// assert_eq!((s.axis.as_str(), s.factor, s.outer.as_str()), ("i", 4, ""));
/// ```
#[macro_export]
macro_rules! pass_options {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $($field:ident : $ty:ty $(= $default:literal)? => $help:literal),* $(,)?
        }
        $(extra: [$($extra:expr),* $(,)?])?
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $(#[doc = $help] pub $field: $ty,)*
        }

        impl $name {
            /// The options, as the pass registry lists them.
            pub const OPTIONS: &'static [$crate::pass::PassOptionDef] = &[$(
                $crate::pass::PassOptionDef {
                    name: stringify!($field),
                    help: $help,
                    default: $crate::pass_options!(@default $($default)?),
                },
            )* $($($extra,)*)?];

            /// Reads the checked options into their typed fields.
            #[allow(unused_variables)]
            pub fn from_options(o: &$crate::pass::PassOptions) -> Result<Self, String> {
                Ok($name {
                    $($field: <$ty as $crate::pass::OptionValue>::parse_option(
                        stringify!($field),
                        o.get(stringify!($field)),
                    )?,)*
                })
            }
        }
    };
    (@default) => { None };
    (@default $d:literal) => { Some($d) };
}

/// What a pass does when run on a module. Errors are located diagnostics.
pub trait Pass {
    fn run(&self, module: &mut Operation, registry: &Registry) -> Result<(), Diagnostic>;
}

/// The registration of a pass: one `PassInfo` per pass file.
pub struct PassInfo {
    /// Command-line name (`--<name>` and inside `--pass-pipeline`).
    pub name: &'static str,
    pub summary: &'static str,
    pub options: &'static [PassOptionDef],
    /// The option naming the one op (a CommIR kernel) the pass transforms, for a pass that
    /// can be limited to one: a pass manager with a [`PassManager::default_target`] gives it
    /// that value when the pass is added without it. `None`: the pass takes the whole module.
    pub target: Option<&'static str>,
    pub create: fn(&PassOptions) -> Result<Box<dyn Pass>, String>,
}

/// Every pass the tools know.
#[derive(Default)]
pub struct PassRegistry {
    passes: Vec<&'static PassInfo>,
}

impl PassRegistry {
    pub fn new() -> PassRegistry {
        let mut r = PassRegistry::default();
        r.register(&crate::transforms::SYMBOL_DCE);
        r.register(&crate::transforms::CANONICALIZE);
        r
    }
    pub fn register(&mut self, p: &'static PassInfo) {
        self.passes.retain(|q| q.name != p.name);
        self.passes.push(p);
    }
    pub fn lookup(&self, name: &str) -> Option<&'static PassInfo> {
        self.passes.iter().copied().find(|p| p.name == name)
    }
    pub fn all(&self) -> impl Iterator<Item = &'static PassInfo> + '_ {
        self.passes.iter().copied()
    }
}

/// One `name{k=v ...}` entry of a pipeline, with where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineEntry {
    pub name: String,
    pub options: Vec<(String, String)>,
    /// Where the pass name starts.
    pub loc: Location,
    /// Where each option (`key=value`) starts, in the order of `options`.
    pub option_locs: Vec<Location>,
}

/// Parses `builtin.module(a{k=v},b)` or a bare `a{k=v},b`: the grammar's `pipeline` rules
/// lex the list, [`parse_pipeline_source`] reads the tokens in order (passes separated by
/// commas). Errors say what is wrong without a location; see [`parse_pipeline_source`].
pub fn parse_pipeline(text: &str) -> Result<Vec<PipelineEntry>, String> {
    parse_pipeline_source(&SourceFile::new("<pipeline>", text)).map_err(|d| d.message)
}

/// Parses the pipeline that is the whole text of `file` (`--pass-pipeline`'s value), with
/// `file:line:col` locations for every error and every entry.
pub fn parse_pipeline_source(file: &Arc<SourceFile>) -> Result<Vec<PipelineEntry>, Diagnostic> {
    let text = file.text.as_str();
    let lead = text.len() - text.trim_start().len();
    let t = text.trim();
    let (start, end) = match ["builtin.module(", "any("]
        .iter()
        .find(|p| t.starts_with(**p))
    {
        Some(p) => {
            let open = lead + p.len() - 1;
            if !t.ends_with(')') {
                return Err(Diagnostic::error(
                    file.location(open),
                    format!("missing ')' to close '{}'", &p[..p.len() - 1]),
                ));
            }
            (open + 1, lead + t.len() - 1)
        }
        None => (lead, lead + t.len()),
    };
    let mut out = Vec::new();
    read_entries(file, start, end, Layout::Pipeline, &mut out)?;
    Ok(out)
}

/// How a text lays out its passes: what an error after a pass asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// A pipeline: passes separated by commas.
    Pipeline,
    /// A line of a schedule script: one primitive (or passes separated by commas).
    ScheduleLine,
}

/// Parses a schedule script: one primitive per line (passes on one line are separated by
/// commas), `#` comments (a `#` inside a quoted value is part of it). A leading UTF-8
/// byte-order mark is skipped. Each line is read on its own, so an unclosed `{` is reported
/// on its line.
pub fn parse_schedule(file: &Arc<SourceFile>) -> Result<Vec<PipelineEntry>, Diagnostic> {
    // Some editors start a UTF-8 file with a byte-order mark: it is not part of the script.
    let unmarked;
    let file = match file.text.strip_prefix('\u{feff}') {
        Some(rest) => {
            unmarked = SourceFile::with_first_line(file.name.as_str(), rest, file.first_line);
            &unmarked
        }
        None => file,
    };
    let mut out = Vec::new();
    let mut at = 0;
    for line in file.text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let end = match schedule_comment_start(body) {
            Some(hash) => {
                comment_outside_options(file, at, body, hash)?;
                hash
            }
            None => body.len(),
        };
        read_entries(file, at, at + end, Layout::ScheduleLine, &mut out)?;
        at += line.len();
    }
    Ok(out)
}

/// Where the `#` comment of a schedule line starts: its first `#` outside a quoted value.
pub fn schedule_comment_start(line: &str) -> Option<usize> {
    unquoted(line).find(|(_, c)| *c == '#').map(|(i, _)| i)
}

/// A `#` comment that starts inside a pass's `{...}` and hides its `}` (`tile{axis=i # why}`):
/// an error at the `#`. A `{` left open with no `}` after the `#` is reported as unclosed.
fn comment_outside_options(
    file: &Arc<SourceFile>,
    line_at: usize,
    line: &str,
    hash: usize,
) -> Result<(), Diagnostic> {
    let before = &line[..hash];
    let mut open = None;
    for (i, c) in unquoted(before) {
        match c {
            '{' if open.is_none() => open = Some(i),
            '}' => open = None,
            _ => {}
        }
    }
    let Some(open) = open.filter(|_| line[hash..].contains('}')) else {
        return Ok(());
    };
    let name = before[..open]
        .trim_end()
        .rsplit(|c: char| !(c.is_alphanumeric() || "-_.".contains(c)))
        .next()
        .unwrap_or("");
    Err(Diagnostic::error(
        file.location(line_at + hash),
        format!(
            "a '#' comment cannot go inside the options of '{name}' (between '{{' and '}}'); \
             put it after the '}}'"
        ),
    ))
}

/// The characters of `text` outside `"..."` quoted values, with their byte offsets (the
/// quotes themselves left out).
fn unquoted(text: &str) -> impl Iterator<Item = (usize, char)> + '_ {
    let mut quoted = false;
    text.char_indices().filter(move |&(_, c)| {
        if c == '"' {
            quoted = !quoted;
            return false;
        }
        !quoted
    })
}

/// `';'`, or the code point of a character that does not show (a control, space or format
/// character): `U+FEFF (a byte-order mark)`.
fn describe_char(c: char) -> String {
    let invisible = c.is_control()
        || c.is_whitespace()
        || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{2064}' | '\u{feff}');
    match c {
        '\u{feff}' => "U+FEFF (a byte-order mark)".to_string(),
        c if invisible => format!("U+{:04X}", u32::from(c)),
        c => format!("'{c}'"),
    }
}

/// Reads the passes of `file.text[start..end]` (a comma-separated list) into `out`.
fn read_entries(
    file: &Arc<SourceFile>,
    start: usize,
    end: usize,
    layout: Layout,
    out: &mut Vec<PipelineEntry>,
) -> Result<(), Diagnostic> {
    use crate::syntax::parser::{MlirGrammar, Rule};
    use pest::Parser as _;
    let inner = &file.text[start..end];
    let at = |offset: usize| file.location(start + offset);
    let tokens = MlirGrammar::parse(Rule::pipeline, inner)
        .map_err(|e| {
            let pos = match e.location {
                pest::error::InputLocation::Pos(p) | pest::error::InputLocation::Span((p, _)) => p,
            };
            Diagnostic::error(at(pos), "cannot read the pass pipeline here")
        })?
        .next()
        .map(|p| p.into_inner())
        .into_iter()
        .flatten();
    // The pass before, while no comma has followed it yet.
    let mut open: Option<String> = None;
    let first_char = |s: &str| describe_char(s.chars().next().unwrap_or(' '));
    // What follows pass `prev` without a comma between them.
    let after = |prev: &str, found: String| match layout {
        Layout::Pipeline => format!("expected ',' after pass '{prev}', found {found}"),
        Layout::ScheduleLine => format!(
            "expected the end of the line after pass '{prev}', found {found}: a schedule takes \
             one primitive per line (passes on one line are separated by ',')"
        ),
    };
    // Where the last ',' is while no pass has followed it (a ',' must stand between passes:
    // `tile{..},` and `,tile{..}` were accepted, as mlir-opt does not).
    let mut dangling: Option<usize> = None;
    let mut seen = false;
    for tok in tokens {
        let tok_at = tok.as_span().start();
        if tok.as_rule() == Rule::pipeline_entry {
            dangling = None;
            seen = true;
        }
        match tok.as_rule() {
            Rule::pipeline_sep => {
                if open.is_none() {
                    return Err(Diagnostic::error(
                        at(tok_at),
                        if seen {
                            "expected a pass name between the ','s".to_string()
                        } else {
                            "expected a pass name before ','".to_string()
                        },
                    ));
                }
                open = None;
                dangling = Some(tok_at);
            }
            Rule::pipeline_entry => {
                let mut entry = PipelineEntry {
                    name: String::new(),
                    options: vec![],
                    loc: at(tok_at),
                    option_locs: vec![],
                };
                let parts: Vec<_> = tok.into_inner().collect();
                for part in &parts {
                    if part.as_rule() == Rule::pipeline_name {
                        entry.name = part.as_str().to_string();
                    }
                }
                if let Some(prev) = &open {
                    return Err(Diagnostic::error(
                        at(tok_at),
                        after(prev, format!("pass '{}'", entry.name)),
                    ));
                }
                for part in parts {
                    let part_at = part.as_span().start();
                    match part.as_rule() {
                        Rule::pipeline_name => {}
                        Rule::pipeline_unclosed => {
                            return Err(Diagnostic::error(
                                at(part_at),
                                format!("missing '}}' to close the options of '{}'", entry.name),
                            ))
                        }
                        _ => read_options(part.as_str(), part_at, &at, &mut entry)?,
                    }
                }
                open = Some(entry.name.clone());
                out.push(entry);
            }
            Rule::pipeline_stray => {
                return Err(Diagnostic::error(
                    at(tok_at),
                    match &open {
                        Some(prev) => after(prev, first_char(tok.as_str())),
                        None => format!("expected a pass name, found {}", first_char(tok.as_str())),
                    },
                ));
            }
            _ => {}
        }
    }
    if let Some(comma) = dangling {
        return Err(Diagnostic::error(
            at(comma),
            "expected a pass name after ','",
        ));
    }
    Ok(())
}

/// The space-separated items of an options text, with their byte offsets: spaces inside a
/// quoted value do not separate.
fn option_items(text: &str) -> Vec<(usize, &str)> {
    let mut items = Vec::new();
    let mut start = 0;
    for (i, c) in unquoted(text).filter(|(_, c)| c.is_whitespace()) {
        if i > start {
            items.push((start, &text[start..i]));
        }
        start = i + c.len_utf8();
    }
    if start < text.len() {
        items.push((start, &text[start..]));
    }
    items
}

/// Reads `{k=v k2="w x"}` (the text of `body`, starting at `body_at`) into `entry`. A value is
/// written bare or quoted whole (`"..."`, which may hold spaces); a bare `k` is `k=true`.
fn read_options(
    body: &str,
    body_at: usize,
    at: &dyn Fn(usize) -> Location,
    entry: &mut PipelineEntry,
) -> Result<(), Diagnostic> {
    let text = &body[1..body.len() - 1];
    let fail = |offset: usize, m: String| Err(Diagnostic::error(at(body_at + 1 + offset), m));
    if let Some((brace, _)) = unquoted(text).find(|(_, c)| *c == '{') {
        // `a{x=1, b{y=2}`: the first '}' closed the options of `b`, not of `a`.
        return Err(Diagnostic::error(
            at(body_at),
            format!(
                "missing '}}' to close the options of '{}' (a '{{' follows at column {})",
                entry.name,
                match at(body_at + 1 + brace) {
                    Location::File { col, .. } => col,
                    _ => 0,
                }
            ),
        ));
    }
    let items = option_items(text);
    for (n, &(off, item)) in items.iter().enumerate() {
        let next = items.get(n + 1).map(|&(_, t)| t);
        // `{axis=i, factor=4}`: a comma ending an item, or one before another `key=`.
        let bad_comma = unquoted(item)
            .filter(|(_, c)| *c == ',')
            .map(|(i, _)| i)
            .find(|i| *i + 1 == item.len() || item[i + 1..].contains('='));
        if let Some(comma) = bad_comma {
            return fail(
                off + comma,
                format!(
                    "options of '{}' are separated by spaces, not commas: {{k1=v1 k2=v2}}",
                    entry.name
                ),
            );
        }
        let (k, v) = item.split_once('=').unwrap_or((item, "true"));
        if k.is_empty() {
            // `factor =8`, `factor = 8`: the key is the item before.
            let key = n
                .checked_sub(1)
                .map(|p| items[p].1)
                .filter(|p| !p.contains('='));
            return fail(
                off,
                match key {
                    Some(key) => format!(
                        "spaces around '=' are not allowed in the options of '{}': write '{key}={}'",
                        entry.name,
                        if v.is_empty() { next.unwrap_or("") } else { v }
                    ),
                    None => format!("empty option name in '{}'", entry.name),
                },
            );
        }
        if let Some(q) = k.find('"') {
            return fail(
                off + q,
                format!(
                    "a quote can only enclose the value of an option (key=\"value\"), in the \
                     options of '{}'",
                    entry.name
                ),
            );
        }
        // A symbol may be quoted as in the IR: `axis=@"a b"`.
        let (sigil, v) = match v.strip_prefix('@') {
            Some(rest) if rest.starts_with('"') => ("@", rest),
            _ => ("", v),
        };
        let v_off = off + k.len() + 1 + sigil.len();
        let value = match v.find('"') {
            // `factor= 8`: the value is the next item.
            None if v.is_empty() && next.is_some_and(|t| !t.contains('=')) => {
                return fail(
                    off,
                    format!(
                        "option '{k}' has an empty value: spaces around '=' are not allowed \
                         (write '{k}={}')",
                        next.unwrap_or("")
                    ),
                )
            }
            None => v,
            Some(0) => match v[1..].find('"') {
                Some(close) if close + 2 == v.len() => &v[1..=close],
                Some(close) => {
                    return fail(
                        v_off + close + 2,
                        format!(
                            "the value of option '{k}' goes on after its closing quote; quote \
                             the whole value ({k}=\"...\")"
                        ),
                    )
                }
                None => {
                    return fail(
                        v_off,
                        format!("missing '\"' to close the value of option '{k}'"),
                    )
                }
            },
            Some(q) => {
                return fail(
                    v_off + q,
                    format!(
                        "a quote inside the value of option '{k}'; quote the whole value \
                         ({k}=\"...\")"
                    ),
                )
            }
        };
        let value = format!("{sigil}{value}");
        entry.options.push((k.to_string(), value));
        entry.option_locs.push(at(body_at + 1 + off));
    }
    Ok(())
}

/// The candidate closest to `word` by edit distance, if it is close enough to be a typo.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(2);
    candidates
        .into_iter()
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for j in 0..b.len() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != b[j]))
                .min(row[j] + 1)
                .min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// Called with (pass display name, module) after each pass (`--mlir-print-ir-after-all`).
pub type AfterPassHook = Box<dyn FnMut(&str, &Operation)>;

/// A pass the manager runs: its display name (`tile{axis=i ...}`), the pass, and where it was
/// written (a schedule line or a pipeline), if known.
type Scheduled = (String, Box<dyn Pass>, Option<Location>);

/// Runs passes in order, verifying after each and optionally printing the IR.
pub struct PassManager {
    passes: Vec<Scheduled>,
    pub verify_each: bool,
    /// Called with (pass display name, module) after each pass (`--mlir-print-ir-after-all`).
    pub after_pass: Option<AfterPassHook>,
    /// The op the passes added from now on transform when they do not name one (a tool's
    /// `--kernel`): given to every pass with a [`PassInfo::target`] option not written.
    pub default_target: Option<String>,
}

impl Default for PassManager {
    fn default() -> Self {
        PassManager {
            passes: vec![],
            verify_each: true,
            after_pass: None,
            default_target: None,
        }
    }
}

impl PassManager {
    pub fn new() -> PassManager {
        PassManager::default()
    }
    /// Adds the passes of a textual pipeline (errors without a location, and passes that
    /// fail later do not point into the text: see [`PassManager::add_pipeline_source`]).
    pub fn add_pipeline(&mut self, registry: &PassRegistry, text: &str) -> Result<(), String> {
        let first = self.passes.len();
        self.add_pipeline_source(registry, &SourceFile::new("<pipeline>", text))
            .map_err(|d| d.message)?;
        for p in &mut self.passes[first..] {
            p.2 = None;
        }
        Ok(())
    }
    /// Adds the passes of the pipeline that is `file`'s text; errors are located in it.
    pub fn add_pipeline_source(
        &mut self,
        registry: &PassRegistry,
        file: &Arc<SourceFile>,
    ) -> Result<(), Diagnostic> {
        self.add_entries(registry, &parse_pipeline_source(file)?)
    }
    /// Adds the passes of a schedule script (see [`parse_schedule`]); errors are located in
    /// it, and a pass that fails later names its line in a note.
    pub fn add_schedule(
        &mut self,
        registry: &PassRegistry,
        file: &Arc<SourceFile>,
    ) -> Result<(), Diagnostic> {
        self.add_entries(registry, &parse_schedule(file)?)
    }
    /// Adds parsed pipeline entries; errors point at the pass or option at fault.
    pub fn add_entries(
        &mut self,
        registry: &PassRegistry,
        entries: &[PipelineEntry],
    ) -> Result<(), Diagnostic> {
        for e in entries {
            let at = |i: usize| e.option_locs.get(i).unwrap_or(&e.loc).clone();
            let located = |m: String| {
                // An option given twice: at the repetition, with the first one in a note.
                if let Some((first, second)) = repeated_option(&e.options) {
                    if m == repeated_option_message(&e.name, &e.options, first, second) {
                        return Diagnostic::error(at(second), m).with_note(
                            at(first),
                            format!("'{}' is first given here", e.options[first].0),
                        );
                    }
                }
                // An error about one option points at it.
                let loc = e
                    .options
                    .iter()
                    .zip(&e.option_locs)
                    .find(|((k, _), _)| m.contains(&format!("option '{k}'")))
                    .map_or(&e.loc, |(_, l)| l);
                Diagnostic::error(loc.clone(), m)
            };
            self.add(registry, &e.name, &e.options).map_err(located)?;
            if let Some(last) = self.passes.last_mut() {
                last.2 = Some(e.loc.clone());
            }
        }
        Ok(())
    }
    /// Adds the registered pass `name` with `options` (the [`PassManager::default_target`]
    /// added for its [`PassInfo::target`] option when that is not among them).
    pub fn add(
        &mut self,
        registry: &PassRegistry,
        name: &str,
        options: &[(String, String)],
    ) -> Result<(), String> {
        let info = registry.lookup(name).ok_or_else(|| {
            let hint = did_you_mean(name, registry.all().map(|p| p.name))
                .map(|m| format!("; did you mean '{m}'?"))
                .unwrap_or_default();
            format!("'{name}' does not refer to a registered pass{hint} (see --list-passes)")
        })?;
        let mut options = options.to_vec();
        if let (Some(opt), Some(target)) = (info.target, &self.default_target) {
            if !options.iter().any(|(k, _)| k == opt) {
                options.push((opt.to_string(), target.clone()));
            }
        }
        let opts = PassOptions::from_pairs(info, &options)?;
        let pass = (info.create)(&opts).map_err(|e| format!("pass '{name}': {e}"))?;
        let display = format!(
            "{}{}",
            info.name,
            if opts.render().is_empty() {
                String::new()
            } else {
                opts.render()
            }
        );
        self.passes.push((display, pass, None));
        Ok(())
    }
    pub fn is_empty(&self) -> bool {
        self.passes.is_empty()
    }
    pub fn run(&mut self, module: &mut Operation, registry: &Registry) -> Result<(), Diagnostic> {
        for (name, pass, origin) in &self.passes {
            // A failing pass written in a schedule or pipeline names where.
            let noted = |d: Diagnostic| match origin {
                Some(at) => d.with_note(at.clone(), format!("in pass '{name}'")),
                None => d,
            };
            pass.run(module, registry).map_err(noted)?;
            if self.verify_each {
                crate::verify::verify(registry, module)
                    .map_err(|d| {
                        Diagnostic::error(
                            d.loc.clone(),
                            format!("{} (IR invalid after pass '{name}')", d.message),
                        )
                    })
                    .map_err(noted)?;
            }
            if let Some(cb) = self.after_pass.as_mut() {
                cb(name, module);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipeline_grammar() {
        let p = parse_pipeline(
            "builtin.module(tile{axis=i factor=4},parallelize{axis=i.o level=0}, symbol-dce)",
        )
        .unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].name, "tile");
        assert_eq!(
            p[0].options,
            vec![("axis".into(), "i".into()), ("factor".into(), "4".into())]
        );
        assert_eq!(p[2].name, "symbol-dce");
        assert!(parse_pipeline("builtin.module(tile{axis=i").is_err());
        assert!(parse_pipeline("a b").is_err());
    }

    #[test]
    fn schedule_lines_quotes_and_byte_order_mark() {
        let file = SourceFile::new(
            "s.sched",
            "\u{feff}tile{axis=i outer=\"a b\" inner=@\"c#d\"}  # note\nx, y{f}\n",
        );
        let e = parse_schedule(&file).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!(
            e[0].options,
            vec![
                ("axis".into(), "i".into()),
                ("outer".into(), "a b".into()),
                ("inner".into(), "@c#d".into())
            ]
        );
        assert_eq!(e[0].loc.to_string(), "s.sched:1:1");
        assert_eq!(e[2].options, vec![("f".into(), "true".into())]);
        let err = |text: &str| parse_schedule(&SourceFile::new("s", text)).unwrap_err();
        assert!(err("a{k=\"v}").message.contains("missing '\"'"));
        assert!(err("a{k= v}").message.contains("empty value"));
        assert!(err("a b").message.contains("one primitive per line"));
        assert!(parse_pipeline("a b").unwrap_err().contains("expected ','"));
    }

    /// A `tile` pass with options (name, default), for the option checks.
    fn tile_info(options: &[(&'static str, Option<&'static str>)]) -> PassInfo {
        let defs: Vec<PassOptionDef> = options
            .iter()
            .map(|&(name, default)| PassOptionDef {
                name,
                help: "",
                default,
            })
            .collect();
        PassInfo {
            name: "tile",
            summary: "",
            options: Vec::leak(defs),
            target: None,
            create: |_| Err("not run here".into()),
        }
    }

    #[test]
    fn empty_defaults_stay_out_of_the_display() {
        let info = tile_info(&[("axis", None), ("outer", Some("")), ("shard", Some("true"))]);
        let o = PassOptions::from_pairs(&info, &[("axis".into(), "i".into())]).unwrap();
        assert_eq!(o.render(), "{axis=i shard=true}");
        assert_eq!(o.get("outer"), "");
    }

    #[test]
    fn an_option_given_twice_is_refused() {
        let info = tile_info(&[("axis", None), ("factor", Some("4"))]);
        let pairs = |p: &[(&str, &str)]| -> Vec<(String, String)> {
            p.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let twice = pairs(&[("axis", "m"), ("factor", "4"), ("axis", "n")]);
        assert_eq!(
            PassOptions::from_pairs(&info, &twice).unwrap_err(),
            "pass 'tile': option 'axis' given twice ('axis=m', then 'axis=n'); give each option once"
        );
        let once = pairs(&[("axis", "m"), ("factor", "2")]);
        assert_eq!(
            PassOptions::from_pairs(&info, &once).unwrap().get("factor"),
            "2"
        );
    }
}
