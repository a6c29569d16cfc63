//! A structural schema's `pattern`: a regular expression as Go's `regexp`
//! (RE2) reads it, which the API server matches a string against
//! (unanchored: `\d{3}` matches `x123`).
//!
//! Rust's `regex` reads RE2's syntax but for a few points, which are
//! written out before compiling: `\d`, `\w`, `\s` and `\b` (and their
//! negations) are ASCII in RE2 and Unicode in Rust; `&&`, `--` and `~~`
//! in a class are set operations in Rust and characters in RE2.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

use regex::Regex;

/// Patterns compiled so far (`None`: one RE2 would not compile, which a
/// real server refuses in the CRD itself). Cleared when it reaches
/// [`CACHED`] patterns.
static COMPILED: LazyLock<Mutex<HashMap<String, Option<Regex>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The most patterns kept compiled.
const CACHED: usize = 1024;

/// Whether `text` matches `pattern`; `None` if the pattern does not
/// compile.
pub(crate) fn matches(pattern: &str, text: &str) -> Option<bool> {
    let mut compiled = COMPILED.lock().unwrap_or_else(PoisonError::into_inner);
    if !compiled.contains_key(pattern) {
        if compiled.len() >= CACHED {
            compiled.clear();
        }
        compiled.insert(pattern.to_owned(), Regex::new(&as_rust(pattern)).ok());
    }
    compiled
        .get(pattern)
        .and_then(Option::as_ref)
        .map(|regex| regex.is_match(text))
}

/// RE2's ASCII class of an escape (`d`: digits), and whether it is the
/// negation (`D`).
fn ascii_class(escape: char) -> Option<(&'static str, bool)> {
    match escape {
        'd' => Some(("0-9", false)),
        'D' => Some(("0-9", true)),
        'w' => Some(("0-9A-Za-z_", false)),
        'W' => Some(("0-9A-Za-z_", true)),
        's' => Some(("\\t\\n\\x0C\\r ", false)),
        'S' => Some(("\\t\\n\\x0C\\r ", true)),
        _ => None,
    }
}

/// `pattern` (RE2) written so that Rust's `regex` reads it alike.
fn as_rust(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(escaped) = chars.next() else {
                    out.push('\\');
                    break;
                };
                match (ascii_class(escaped), in_class) {
                    (Some((set, false)), false) => out.push_str(&format!("[{set}]")),
                    (Some((set, false)), true) => out.push_str(set),
                    (Some((set, true)), _) => out.push_str(&format!("[^{set}]")),
                    (None, false) if matches!(escaped, 'b' | 'B') => {
                        out.push_str(&format!("(?-u:\\{escaped})"));
                    }
                    (None, _) => {
                        out.push('\\');
                        out.push(escaped);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    chars.next();
                    out.push('^');
                }
                // A `]` first in a class is itself.
                if chars.peek() == Some(&']') {
                    chars.next();
                    out.push_str("\\]");
                }
            }
            // `[:alpha:]` in a class; any other `[` is itself.
            '[' if chars.peek() == Some(&':') => out.push('['),
            '[' => out.push_str("\\["),
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '&' | '~' if in_class => {
                out.push('\\');
                out.push(c);
            }
            '-' if in_class && chars.peek() == Some(&'-') => out.push_str("\\-"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each pattern, a text, and whether RE2 matches it (`None`: RE2 does
    /// not compile the pattern).
    #[test]
    fn patterns_should_match_as_re2_matches_them() {
        for (pattern, text, matched) in [
            // Unanchored unless anchored.
            (r"\d{3}", "x123", Some(true)),
            (r"^\d{3}$", "x123", Some(false)),
            (r"^[a-z]+(-[a-z]+)*$", "Bad_Name", Some(false)),
            (r"^[a-z]+(-[a-z]+)*$", "good-name", Some(true)),
            // ASCII classes: an Arabic-Indic digit is a digit to Rust's
            // Unicode `\d`, not to RE2's.
            (r"^\d$", "\u{0663}", Some(false)),
            (r"^\w+$", "café", Some(false)),
            (r"^[\w.]+$", "a.b_c", Some(true)),
            (r"^[^\d]+$", "abc", Some(true)),
            (r"^[\D]+$", "ab1", Some(false)),
            (r"\bé", "xé", Some(true)),
            (r"^\pL+$", "café", Some(true)),
            (r"^[[:alpha:]]+$", "abc", Some(true)),
            // Set operators are characters.
            (r"^[a&&b]+$", "a&b", Some(true)),
            (r"^[]a]+$", "]a", Some(true)),
            (r"^[a~~b]+$", "~", Some(true)),
            (r"(", "x", None),
        ] {
            assert_eq!(matches(pattern, text), matched, "{pattern} on {text:?}");
        }
    }
}
