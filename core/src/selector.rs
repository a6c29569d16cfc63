//! Kubernetes label selectors: parsing and matching.
//!
//! The grammar is the API server's: a comma-separated list of requirements,
//! each `key=value`, `key==value`, `key!=value`, `key in (a,b)`,
//! `key notin (a,b)`, `key` (exists) or `!key` (does not exist). An empty
//! selector matches everything.

use std::collections::BTreeSet;

use serde_json::Value;

/// Why a selector did not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid label selector `{selector}`: {reason}")]
pub struct SelectorError {
    selector: String,
    reason: String,
}

/// One requirement of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// Parses a selector in the API server's string form.
    ///
    /// # Errors
    /// [`SelectorError`] names the selector and what is wrong with it.
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let fail = |reason: &str| SelectorError {
            selector: selector.to_owned(),
            reason: reason.to_owned(),
        };
        let mut requirements = Vec::new();
        for clause in split_clauses(selector).map_err(fail)? {
            let clause = clause.trim();
            if clause.is_empty() {
                if selector.trim().is_empty() {
                    continue;
                }
                return Err(fail("empty requirement"));
            }
            requirements.push(parse_requirement(clause).map_err(|r| fail(&r))?);
        }
        Ok(Self { requirements })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether an object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        self.matches_labels(|key| labels.and_then(|l| l.get(key)).and_then(Value::as_str))
    }

    /// Whether an object whose label `key` has the value `label(key)`
    /// matches.
    pub fn matches_labels<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|req| match req {
            Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            Requirement::In(k, vs) => label(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => label(k).is_none_or(|l| !vs.contains(l)),
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::DoesNotExist(k) => label(k).is_none(),
        })
    }
}

/// Splits on commas outside parentheses.
fn split_clauses(selector: &str) -> Result<Vec<&str>, &'static str> {
    let mut clauses = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.checked_sub(1).ok_or("unbalanced `)`")?,
            ',' if depth == 0 => {
                clauses.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced `(`");
    }
    clauses.push(&selector[start..]);
    Ok(clauses)
}

fn parse_requirement(clause: &str) -> Result<Requirement, String> {
    if let Some(key) = clause.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(valid_key(key.trim())?));
    }
    if let Some((key, value)) = clause.split_once("!=") {
        return Ok(Requirement::NotEquals(
            valid_key(key.trim())?,
            valid_value(value.trim())?,
        ));
    }
    if let Some((key, value)) = clause.split_once("==").or_else(|| clause.split_once('=')) {
        return Ok(Requirement::Equals(
            valid_key(key.trim())?,
            valid_value(value.trim())?,
        ));
    }
    let mut words = clause.splitn(2, char::is_whitespace);
    let key = valid_key(words.next().unwrap_or_default())?;
    let Some(rest) = words.next().map(str::trim) else {
        return Ok(Requirement::Exists(key));
    };
    let (negated, set) = if let Some(set) = rest.strip_prefix("notin") {
        (true, set)
    } else if let Some(set) = rest.strip_prefix("in") {
        (false, set)
    } else {
        return Err(format!("unknown operator in `{clause}`"));
    };
    let inner = set
        .trim()
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesised set of values in `{clause}`"))?;
    let values = inner
        .split(',')
        .map(|v| valid_value(v.trim()))
        .collect::<Result<BTreeSet<_>, _>>()?;
    Ok(if negated {
        Requirement::NotIn(key, values)
    } else {
        Requirement::In(key, values)
    })
}

/// A label key, by [`crate::validation::label_key`].
fn valid_key(key: &str) -> Result<String, String> {
    crate::validation::label_key(key)
        .map(|()| key.to_owned())
        .map_err(|e| e.to_string())
}

/// A label value, by [`crate::validation::label_value`].
fn valid_value(value: &str) -> Result<String, String> {
    crate::validation::label_value(value)
        .map(|()| value.to_owned())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labelled(labels: Value) -> Value {
        json!({"metadata": {"labels": labels}})
    }

    #[test]
    fn selector_should_support_every_operator() {
        let obj = labelled(json!({"app": "web", "tier": "front", "canary": "true"}));
        for (selector, expected) in [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app!=db", true),
            ("tier in (front, back)", true),
            ("tier notin (front)", false),
            ("missing notin (x)", true),
            ("canary", true),
            ("!canary", false),
            ("!legacy", true),
            ("app=web,tier in (back)", false),
            ("app=web,tier in (back,front),!legacy", true),
        ] {
            let parsed = Selector::parse(selector).expect(selector);
            assert_eq!(parsed.matches(&obj), expected, "{selector}");
        }
    }

    #[test]
    fn selector_should_match_objects_without_labels() {
        let obj = json!({"metadata": {"name": "x"}});
        assert!(Selector::parse("!a").expect("parses").matches(&obj));
        assert!(!Selector::parse("a").expect("parses").matches(&obj));
    }

    #[test]
    fn selector_should_reject_malformed_input_with_its_text() {
        for bad in [
            "a in (b",
            "a)",
            "a,,b",
            "a foo (b)",
            "a in b",
            "-a=b",
            "a=b c",
        ] {
            let err = Selector::parse(bad).expect_err(bad);
            assert!(err.to_string().contains(bad), "{err}");
        }
    }

    /// Selectors written every way the grammar allows, parsed, against the
    /// requirements' meaning evaluated directly.
    mod properties {
        use std::collections::BTreeMap;

        use proptest::prelude::*;

        use super::*;

        const KEYS: [&str; 4] = ["app", "tier", "example.com/role", "a-b.c_d"];
        const VALUES: [&str; 4] = ["", "web", "v-1.2", "X_y"];

        #[derive(Clone, Debug)]
        enum Op {
            Equals(bool),
            NotEquals,
            In(Vec<usize>),
            NotIn(Vec<usize>),
            Exists,
            DoesNotExist,
        }

        fn op() -> impl Strategy<Value = Op> {
            let values = proptest::collection::vec(0..VALUES.len(), 1..4);
            prop_oneof![
                any::<bool>().prop_map(Op::Equals),
                Just(Op::NotEquals),
                values.clone().prop_map(Op::In),
                values.prop_map(Op::NotIn),
                Just(Op::Exists),
                Just(Op::DoesNotExist),
            ]
        }

        /// One requirement: its key, operator, value and the spaces around.
        type Written = (usize, Op, usize, (bool, bool));

        fn render((key, op, value, (before, after)): &Written) -> String {
            let (k, v) = (KEYS[*key], VALUES[*value]);
            let pad = |on: bool| if on { " " } else { "" };
            let set = |vs: &[usize]| {
                vs.iter()
                    .map(|i| VALUES[*i])
                    .collect::<Vec<_>>()
                    .join(&format!(",{}", pad(*after)))
            };
            let text = match op {
                Op::Equals(double) => {
                    let eq = if *double { "==" } else { "=" };
                    format!("{k}{}{eq}{}{v}", pad(*before), pad(*after))
                }
                Op::NotEquals => format!("{k}{}!={}{v}", pad(*before), pad(*after)),
                Op::In(vs) => format!("{k} in {}({})", pad(*before), set(vs)),
                Op::NotIn(vs) => format!("{k} notin {}({})", pad(*before), set(vs)),
                Op::Exists => k.to_owned(),
                Op::DoesNotExist => format!("!{}{k}", pad(*before)),
            };
            format!("{}{text}{}", pad(*before), pad(*after))
        }

        fn holds((key, op, value, _): &Written, labels: &BTreeMap<&str, &str>) -> bool {
            let label = labels.get(KEYS[*key]).copied();
            let v = VALUES[*value];
            let among = |vs: &[usize], l: &str| vs.iter().any(|i| VALUES[*i] == l);
            match op {
                Op::Equals(_) => label == Some(v),
                Op::NotEquals => label != Some(v),
                Op::In(vs) => label.is_some_and(|l| among(vs, l)),
                Op::NotIn(vs) => label.is_none_or(|l| !among(vs, l)),
                Op::Exists => label.is_some(),
                Op::DoesNotExist => label.is_none(),
            }
        }

        fn labels() -> impl Strategy<Value = BTreeMap<&'static str, &'static str>> {
            proptest::collection::btree_map(
                proptest::sample::select(KEYS.to_vec()),
                proptest::sample::select(VALUES.to_vec()),
                0..KEYS.len(),
            )
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1024))]

            #[test]
            fn a_written_selector_should_match_what_its_requirements_mean(
                written in proptest::collection::vec(
                    (0..KEYS.len(), op(), 0..VALUES.len(), any::<(bool, bool)>()), 0..5),
                labels in labels(),
            ) {
                let text = written.iter().map(render).collect::<Vec<_>>().join(",");
                let selector = Selector::parse(&text)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let object = json!({"metadata": {"labels": labels}});
                prop_assert_eq!(
                    selector.matches(&object),
                    written.iter().all(|w| holds(w, &labels)),
                    "{} on {:?}", text, labels
                );
            }

            #[test]
            fn any_text_should_parse_or_be_refused_naming_it(text in "[a-z!=(), ]{0,24}") {
                if let Err(e) = Selector::parse(&text) {
                    prop_assert!(e.to_string().contains(&text));
                }
            }
        }
    }
}
