//! The differential fuzzer (`--fuzz N`): sequences made by mutating the
//! generated ones, sent to both servers as every sequence is; a difference
//! is a finding, printed with the sequence that shows it (saved under
//! `tests/difference/sequences/`, it is replayed by every run after).
//!
//! A mutant is its base sequence with one to three changes, each to a
//! request picked at random: a value of its JSON body replaced by one of
//! another type, removed, or joined by an unknown field; a query parameter
//! added (dry run, field manager, force, field validation, limit, version,
//! a broken selector, a propagation policy, a grace period); a patch sent
//! as another patch type; or the request dropped. The same seed makes the
//! same mutants.

use serde_json::{Value, json};

use crate::sequence::{Sequence, Step};

/// A small deterministic generator (xorshift64*).
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number below `n` (0 for 0).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            usize::try_from(self.next() % n as u64).unwrap_or(0)
        }
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.below(items.len()))
    }
}

/// What a value may become.
fn replacements() -> [Value; 10] {
    [
        Value::Null,
        json!(""),
        json!("fuzz"),
        json!(0),
        json!(-1),
        json!(1.5),
        json!(true),
        json!([]),
        json!({}),
        json!("x".repeat(300)),
    ]
}

/// Query parameters a mutant may add.
const PARAMETERS: [&str; 12] = [
    "dryRun=All",
    "fieldManager=fuzz",
    "force=true",
    "fieldValidation=Strict",
    "fieldValidation=Warn",
    "limit=1",
    "resourceVersion=0",
    "labelSelector=a%20in%20(",
    "fieldSelector=metadata.name%3Dx",
    "propagationPolicy=Orphan",
    "gracePeriodSeconds=0",
    "resourceVersionMatch=Exact",
];

/// The patch types a patch may be sent as.
const PATCHES: [&str; 4] = [
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/json-patch+json",
    "application/apply-patch+yaml",
];

/// `count` mutants of `bases`, named `<base>~<n>`.
pub(crate) fn mutants(bases: &[Sequence], count: usize, rng: &mut Rng) -> Vec<Sequence> {
    (0..count)
        .filter_map(|n| {
            let base = rng.pick(bases)?;
            let mut steps = base.steps.clone();
            for _ in 0..=rng.below(3) {
                mutate(&mut steps, rng);
            }
            Some(Sequence {
                name: format!("{}~{n}", base.name),
                steps,
            })
        })
        .collect()
}

fn mutate(steps: &mut Vec<Step>, rng: &mut Rng) {
    let at = rng.below(steps.len());
    let Some(step) = steps.get_mut(at) else {
        return;
    };
    match rng.below(8) {
        0..=3 => {
            if let Ok(mut body) = serde_json::from_slice::<Value>(&step.body) {
                change_value(&mut body, rng);
                step.body = body.to_string().into_bytes();
            }
        }
        4 | 5 => {
            if let Some(parameter) = rng.pick(&PARAMETERS) {
                let joiner = if step.target.contains('?') { '&' } else { '?' };
                step.target = format!("{}{joiner}{parameter}", step.target);
            }
        }
        6 if step.method == "PATCH" => {
            if let Some(patch) = rng.pick(&PATCHES) {
                (*patch).clone_into(&mut step.content_type);
            }
        }
        _ if steps.len() > 1 => {
            steps.remove(at);
        }
        _ => {}
    }
}

/// Walks to a random place of `value` and changes it: replaced, removed
/// from its object, or given an unknown sibling.
fn change_value(value: &mut Value, rng: &mut Rng) {
    let children = match value {
        Value::Object(map) => map.len(),
        Value::Array(items) => items.len(),
        _ => 0,
    };
    // Deeper, or here.
    if children > 0 && rng.below(3) > 0 {
        let index = rng.below(children);
        match value {
            Value::Object(map) => {
                let key = map.keys().nth(index).cloned().unwrap_or_default();
                match rng.below(6) {
                    0 => {
                        map.shift_remove(&key);
                    }
                    1 => {
                        map.insert("fuzzUnknownField".into(), json!(1));
                    }
                    _ => {
                        if let Some(child) = map.get_mut(&key) {
                            change_value(child, rng);
                        }
                    }
                }
            }
            Value::Array(items) => {
                if let Some(child) = items.get_mut(index) {
                    change_value(child, rng);
                }
            }
            _ => {}
        }
        return;
    }
    if let Some(replacement) = rng.pick(&replacements()) {
        *value = replacement.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Sequence {
        Sequence::parse(
            "configmaps/create",
            "POST /api/v1/namespaces/{ns}/configmaps\napplication/json\n{\"metadata\": {\"name\": \"a\"}, \"data\": {\"k\": \"v\"}}\n---\nGET /api/v1/namespaces/{ns}/configmaps/a\n\n",
        )
    }

    #[test]
    fn the_same_seed_should_make_the_same_mutants_and_each_should_differ_from_its_base() {
        let bases = [base()];
        let first = mutants(&bases, 50, &mut Rng::new(7));
        let again = mutants(&bases, 50, &mut Rng::new(7));
        assert_eq!(
            first.iter().map(Sequence::text).collect::<Vec<_>>(),
            again.iter().map(Sequence::text).collect::<Vec<_>>()
        );
        assert_eq!(first.len(), 50);
        assert!(
            first
                .iter()
                .all(|m| m.name.starts_with("configmaps/create~"))
        );
        let changed = first.iter().filter(|m| m.text() != bases[0].text()).count();
        assert!(changed > 40, "{changed} of 50 changed");
        let other = mutants(&bases, 50, &mut Rng::new(8));
        assert_ne!(
            first.iter().map(Sequence::text).collect::<Vec<_>>(),
            other.iter().map(Sequence::text).collect::<Vec<_>>()
        );
    }
}
