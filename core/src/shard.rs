//! Shard selectors (KEP-5866, server-side sharded list and watch): which
//! objects of a list or watch a client asks for, by ranges of a hash of one
//! of their fields.
//!
//! # Grammar
//! ```text
//! selector := term ( "||" term )*
//! term     := "shardRange(" field "," bound "," bound ")"
//! field    := "object.metadata.uid" | "object.metadata.namespace"
//! bound    := quote "0x" HEX{16} quote       (quote: ' or ", as CEL strings)
//! ```
//! A term selects the objects whose field's FNV-1a 64-bit hash `h` has
//! `start <= h < end`; the selector selects what any of its terms selects.
//! Ranges are over `[0, 2^64)`: the last one ends at `0x10000000000000000`,
//! the one bound of 17 digits. The rules and the words of a refusal are
//! kube-apiserver v1.37.2's (`ShardedListAndWatch`), which answers a bad
//! selector with a 500 that names the fault.
//! [`ShardSelector`]'s `Display` is that server's canonical form (bounds as
//! 16 hex digits, `, ` between arguments, ` || ` between terms), which it
//! echoes in `metadata.shardInfo.selector`.

use std::fmt;
use std::str::FromStr;

/// 2^64, the end of the hash space.
pub const HASH_SPACE_END: u128 = 1 << 64;

/// FNV-1a, 64 bits, of `bytes` (what KEP-5866 hashes a field's string with).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(PRIME)
    })
}

/// Where an object whose placing field reads `value` falls in the hash
/// space: FNV-1a 64 of it, an absent field hashing as the empty string (as
/// the server's accessor reads it: a cluster-scoped object has no
/// namespace).
pub fn place(value: Option<&str>) -> u64 {
    fnv1a64(value.unwrap_or_default().as_bytes())
}

/// The field an object is placed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShardField {
    /// `object.metadata.uid`: objects spread evenly, each on its own.
    Uid,
    /// `object.metadata.namespace`: a namespace's objects stay together.
    Namespace,
}

impl ShardField {
    /// Its path in a selector.
    pub fn path(self) -> &'static str {
        match self {
            Self::Uid => "object.metadata.uid",
            Self::Namespace => "object.metadata.namespace",
        }
    }
}

/// A half-open range `[start, end)` of the hash space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardRange {
    /// The first hash in it.
    pub start: u64,
    /// One past its last hash, at most [`HASH_SPACE_END`].
    pub end: u128,
}

impl ShardRange {
    /// The whole hash space.
    pub const ALL: Self = Self {
        start: 0,
        end: HASH_SPACE_END,
    };

    /// Whether `hash` falls in it.
    pub fn contains(&self, hash: u64) -> bool {
        u128::from(hash) < self.end && hash >= self.start
    }

    /// Which of `count` equal ranges ([`Self::nth_of`]) holds `hash`
    /// (`count` at least 1).
    pub fn index_of(hash: u64, count: u32) -> u32 {
        let count = count.max(1);
        let width = HASH_SPACE_END / u128::from(count);
        u32::try_from(u128::from(hash) / width)
            .unwrap_or(u32::MAX)
            .min(count - 1)
    }

    /// The `index`-th of `count` equal ranges of the hash space (the last
    /// takes the remainder); `None` if `index >= count`.
    pub fn nth_of(index: u32, count: u32) -> Option<Self> {
        if index >= count {
            return None;
        }
        let width = HASH_SPACE_END / u128::from(count);
        let start = width * u128::from(index);
        let end = if index + 1 == count {
            HASH_SPACE_END
        } else {
            start + width
        };
        Some(Self {
            start: u64::try_from(start).ok()?,
            end,
        })
    }
}

/// Which bound of a range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The first hash in the range.
    Start,
    /// One past its last.
    End,
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Start => "hexStart",
            Self::End => "hexEnd",
        })
    }
}

/// Why a shard selector was refused, naming the fault in a real server's
/// words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShardSelectorError {
    /// Nothing to select by.
    #[error("the shard selector is empty")]
    Empty,
    /// A term is not `shardRange(FIELD, '0x…', '0x…')`.
    #[error("expected shardRange() call or || operator, got `{0}`")]
    Syntax(String),
    /// A field other than the uid or the namespace.
    #[error(
        "unsupported field path {0:?}; supported: object.metadata.uid, object.metadata.namespace"
    )]
    Field(String),
    /// A bound without its `0x`.
    #[error("{bound} must have '0x' prefix, got {text:?}")]
    Prefix {
        /// Which bound.
        bound: Bound,
        /// The bound, unquoted.
        text: String,
    },
    /// A bound of another length than 16 hex digits.
    #[error(
        "{bound} must be a 0x-prefixed 16-digit hex value, got {text:?}{}",
        padded.as_ref().map(|p| format!(" (did you mean {p:?}?)")).unwrap_or_default()
    )]
    Digits {
        /// Which bound.
        bound: Bound,
        /// The bound, unquoted.
        text: String,
        /// The same value in 16 digits, when it has fewer.
        padded: Option<String>,
    },
    /// A bound with a character that is not a hex digit.
    #[error("{bound}: invalid hex character {character:?} in {text:?}")]
    Hex {
        /// Which bound.
        bound: Bound,
        /// The first character that is not a hex digit.
        character: String,
        /// The bound, unquoted.
        text: String,
    },
    /// A range that selects nothing.
    #[error("shard range start {start} must be less than end {end}")]
    EmptyRange {
        /// Its start, as given.
        start: String,
        /// Its end, as given.
        end: String,
    },
}

/// A parsed shard selector (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShardSelector {
    terms: Vec<(ShardField, ShardRange)>,
}

impl ShardSelector {
    /// The selector of `ranges` of `field`; `None` if there is none.
    pub fn new(field: ShardField, ranges: impl IntoIterator<Item = ShardRange>) -> Option<Self> {
        let terms: Vec<_> = ranges
            .into_iter()
            .filter(|r| u128::from(r.start) < r.end)
            .map(|r| (field, r))
            .collect();
        (!terms.is_empty()).then_some(Self { terms })
    }

    /// Its terms.
    pub fn terms(&self) -> &[(ShardField, ShardRange)] {
        &self.terms
    }

    /// Whether an object whose fields `field` reads is selected (an absent
    /// field hashes as the empty string, as the server's accessor reads it:
    /// a cluster-scoped object has no namespace).
    pub fn matches<'a>(&self, field: impl Fn(ShardField) -> Option<&'a str>) -> bool {
        self.terms
            .iter()
            .any(|(f, range)| range.contains(place(field(*f))))
    }
}

/// A bound: quoted, `0x`, 16 hex digits (17 for the end of the hash
/// space, `0x10000000000000000`).
fn parse_bound(quoted: &str, bound: Bound) -> Result<u128, ShardSelectorError> {
    let text = ["'", "\""]
        .iter()
        .find_map(|q| quoted.strip_prefix(q)?.strip_suffix(q))
        .ok_or_else(|| ShardSelectorError::Syntax(quoted.to_owned()))?;
    let Some(hex) = text.strip_prefix("0x") else {
        return Err(ShardSelectorError::Prefix {
            bound,
            text: text.to_owned(),
        });
    };
    if bound == Bound::End && hex == "10000000000000000" {
        return Ok(HASH_SPACE_END);
    }
    if hex.len() != 16 {
        return Err(ShardSelectorError::Digits {
            bound,
            text: text.to_owned(),
            padded: (hex.len() < 16).then(|| format!("0x{hex:0>16}")),
        });
    }
    if let Some(character) = hex.chars().find(|c| !c.is_ascii_hexdigit()) {
        return Err(ShardSelectorError::Hex {
            bound,
            character: character.to_string(),
            text: text.to_owned(),
        });
    }
    u128::from_str_radix(hex, 16).map_err(|_| ShardSelectorError::Syntax(quoted.to_owned()))
}

impl FromStr for ShardSelector {
    type Err = ShardSelectorError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.trim().is_empty() {
            return Err(ShardSelectorError::Empty);
        }
        let mut terms = Vec::new();
        for term in text.split("||").map(str::trim) {
            let syntax = || ShardSelectorError::Syntax(term.to_owned());
            let args = term
                .strip_prefix("shardRange(")
                .and_then(|rest| rest.strip_suffix(')'))
                .ok_or_else(syntax)?;
            let parts: Vec<&str> = args.split(',').map(str::trim).collect();
            let [field, start, end] = parts[..] else {
                return Err(syntax());
            };
            let field = match field {
                "object.metadata.uid" => ShardField::Uid,
                "object.metadata.namespace" => ShardField::Namespace,
                other => return Err(ShardSelectorError::Field(other.to_owned())),
            };
            let (low, high) = (
                parse_bound(start, Bound::Start)?,
                parse_bound(end, Bound::End)?,
            );
            let start = u64::try_from(low)
                .ok()
                .filter(|s| u128::from(*s) < high)
                .ok_or_else(|| ShardSelectorError::EmptyRange {
                    start: start[1..start.len() - 1].to_owned(),
                    end: end[1..end.len() - 1].to_owned(),
                })?;
            terms.push((field, ShardRange { start, end: high }));
        }
        Ok(Self { terms })
    }
}

impl fmt::Display for ShardSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (field, range)) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(" || ")?;
            }
            write!(
                f,
                "shardRange({}, '0x{:016x}', '0x{:016x}')",
                field.path(),
                range.start,
                range.end
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_should_match_the_reference_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn selectors_should_parse_print_canonically_and_match_by_hash() {
        let text = "shardRange(object.metadata.uid,'0x0000000000000000','0x8000000000000000') || \
                    shardRange(object.metadata.namespace, \"0xc000000000000000\", '0x10000000000000000')";
        let selector: ShardSelector = text.parse().expect("valid");
        assert_eq!(
            selector.to_string(),
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || \
             shardRange(object.metadata.namespace, '0xc000000000000000', '0x10000000000000000')"
        );
        assert_eq!(
            selector.to_string().parse::<ShardSelector>(),
            Ok(selector.clone())
        );
        // "a" hashes to 0xaf63…: in neither range as a uid, in none as a
        // namespace (below 0xc0…); "foobar" (0x8594…) likewise.
        let by = |uid: &'static str, ns: &'static str| {
            move |f: ShardField| Some(if f == ShardField::Uid { uid } else { ns })
        };
        assert!(!selector.matches(by("a", "foobar")));
        // The empty string (0xcbf2…) is in the namespace range.
        assert!(selector.matches(|f| (f == ShardField::Uid).then_some("a")));
        // Uids vary in their first bytes (FNV-1a's high bits barely move
        // with the last ones).
        let low = (0..100)
            .map(|i| format!("{i:02}c1e4a0-uid"))
            .find(|u| fnv1a64(u.as_bytes()) < 1 << 63)
            .expect("some uid hashes low");
        assert!(selector.matches(|f| (f == ShardField::Uid).then_some(low.as_str())));
    }

    #[test]
    fn malformed_selectors_should_be_refused_in_a_real_servers_words() {
        let uid = |start: &str, end: &str| format!("shardRange(object.metadata.uid,{start},{end})");
        let zero = "'0x0000000000000000'";
        // Each as kube-apiserver v1.37.2 words it after `invalid shard selector: `.
        for (text, said) in [
            ("".to_owned(), "the shard selector is empty"),
            (
                "shardRange(object.metadata.uid,'0x0')".to_owned(),
                "expected shardRange() call or || operator, got `shardRange(object.metadata.uid,'0x0')`",
            ),
            (
                "shardRange(spec.x,'0x0','0x1')".to_owned(),
                r#"unsupported field path "spec.x"; supported: object.metadata.uid, object.metadata.namespace"#,
            ),
            (
                uid("'0x0'", "'0x8000000000000000'"),
                r#"hexStart must be a 0x-prefixed 16-digit hex value, got "0x0" (did you mean "0x0000000000000000"?)"#,
            ),
            (
                uid(zero, "'0x8'"),
                r#"hexEnd must be a 0x-prefixed 16-digit hex value, got "0x8" (did you mean "0x0000000000000008"?)"#,
            ),
            (
                uid(zero, "'0x10000000000000001'"),
                r#"hexEnd must be a 0x-prefixed 16-digit hex value, got "0x10000000000000001""#,
            ),
            (
                uid("'0X0000000000000000'", zero),
                r#"hexStart must have '0x' prefix, got "0X0000000000000000""#,
            ),
            (
                uid("'0x000000000000000G'", zero),
                r#"hexStart: invalid hex character "G" in "0x000000000000000G""#,
            ),
            (
                uid("'0x8000000000000000'", zero),
                "shard range start 0x8000000000000000 must be less than end 0x0000000000000000",
            ),
        ] {
            let refused = text.parse::<ShardSelector>().err().map(|e| e.to_string());
            assert_eq!(refused.as_deref(), Some(said), "{text}");
        }
    }

    #[test]
    fn equal_ranges_should_cover_the_hash_space_without_overlap() {
        for count in [1, 2, 3, 7] {
            let ranges: Vec<ShardRange> = (0..count)
                .filter_map(|i| ShardRange::nth_of(i, count))
                .collect();
            assert_eq!(ranges.first().map(|r| r.start), Some(0));
            assert_eq!(ranges.last().map(|r| r.end), Some(HASH_SPACE_END));
            for pair in ranges.windows(2) {
                assert_eq!(u128::from(pair[1].start), pair[0].end);
            }
        }
        assert_eq!(ShardRange::nth_of(3, 3), None);
        assert!(ShardRange::ALL.contains(u64::MAX));
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        fn range() -> impl Strategy<Value = ShardRange> {
            (any::<u64>(), 1..=HASH_SPACE_END).prop_map(|(a, b)| {
                let (lo, hi) = if u128::from(a) < b {
                    (u128::from(a), b)
                } else {
                    (b - 1, u128::from(a) + 1)
                };
                ShardRange {
                    start: u64::try_from(lo).unwrap_or(u64::MAX),
                    end: hi,
                }
            })
        }

        fn field() -> impl Strategy<Value = ShardField> {
            prop_oneof![Just(ShardField::Uid), Just(ShardField::Namespace)]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn every_hash_should_fall_in_exactly_one_of_equal_ranges(
                hash in prop_oneof![any::<u64>(), Just(0), Just(u64::MAX)],
                count in prop_oneof![1..=64u32, 1..=5_000u32],
            ) {
                let holding: Vec<u32> = (0..count)
                    .filter(|i| ShardRange::nth_of(*i, count).is_some_and(|r| r.contains(hash)))
                    .collect();
                prop_assert_eq!(holding, vec![ShardRange::index_of(hash, count)]);
                prop_assert_eq!(ShardRange::nth_of(count, count), None);
            }

            #[test]
            fn a_selector_should_print_parse_back_and_match_its_ranges(
                terms in proptest::collection::vec((field(), range()), 1..5),
                uid in "[a-f0-9-]{0,36}",
                namespace in "[a-z0-9-]{0,20}",
            ) {
                let selector = ShardSelector { terms: terms.clone() };
                let text = selector.to_string();
                prop_assert_eq!(text.parse::<ShardSelector>(), Ok(selector.clone()));
                let read = |f: ShardField| match f {
                    ShardField::Uid => Some(uid.as_str()),
                    ShardField::Namespace => (!namespace.is_empty()).then_some(namespace.as_str()),
                };
                let expected = terms.iter().any(|(f, r)| r.contains(place(read(*f))));
                prop_assert_eq!(selector.matches(read), expected);
            }

            #[test]
            fn any_text_should_parse_or_be_refused(text in "(shardRange\\(|object\\.metadata\\.(uid|namespace)|'0x[0-9a-fA-F]{0,18}'|[,)| ]){0,12}") {
                if let Ok(selector) = text.parse::<ShardSelector>() {
                    prop_assert_eq!(selector.to_string().parse::<ShardSelector>(), Ok(selector));
                }
            }
        }
    }
}
