//! The generic patch algorithms: RFC 7386 JSON merge patch and RFC 6902
//! JSON patch (strategic merge is [`crate::mutation::strategic`], server-side apply
//! [`crate::mutation::apply`]).
//!
//! # Bounds
//! A JSON patch is a program, so it is bounded as one:
//! - at most [`MAX_OPERATIONS`] operations (the real server's limit);
//! - the document never grows past [`MAX_PATCHED_BYTES`]: every `add`,
//!   `replace` and `copy` charges the encoded size of what it inserts, and
//!   the size of a value to copy is measured with a bound, so forty `copy`
//!   operations that double the document stop at the bound, not at the
//!   memory's end;
//! - nothing is placed deeper than [`MAX_DEPTH`], so the document can be
//!   stored and read back (and dropped without exhausting the stack);
//! - array insertions and removals charge the elements they shift to a
//!   work budget ([`MAX_SHIFTS`]).

use serde_json::{Map, Value};

use crate::http::bounds::{MAX_BODY, MAX_DEPTH, depth_within, encoded_len_within};

/// Most operations in one JSON patch.
pub const MAX_OPERATIONS: usize = 10_000;

/// Largest a document may grow while a JSON patch runs.
pub const MAX_PATCHED_BYTES: usize = MAX_BODY;

/// Most array elements one JSON patch may shift.
pub const MAX_SHIFTS: usize = 1 << 24;

/// Why a JSON patch was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PatchError {
    /// The patch is not an array of operations.
    #[error("a JSON patch must be an array of operations")]
    NotAnArray,
    /// More than [`MAX_OPERATIONS`] operations.
    #[error("the allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, got {count}")]
    TooManyOperations {
        /// How many it had.
        count: usize,
    },
    /// An operation lacks a field it needs.
    #[error("operation {index}: missing {field}")]
    Missing {
        /// The operation's position.
        index: usize,
        /// The field.
        field: &'static str,
    },
    /// An operation the RFC does not define.
    #[error("operation {index}: unknown op {op}")]
    UnknownOp {
        /// The operation's position.
        index: usize,
        /// Its `op`.
        op: String,
    },
    /// A path that names nothing.
    #[error("operation {index}: path {path} does not exist")]
    NoPath {
        /// The operation's position.
        index: usize,
        /// The path.
        path: String,
    },
    /// An array index that is not a number or is out of range.
    #[error("operation {index}: invalid index in {path}")]
    BadIndex {
        /// The operation's position.
        index: usize,
        /// The path.
        path: String,
    },
    /// A `test` that failed.
    #[error("testing value {path} failed")]
    TestFailed {
        /// The path tested.
        path: String,
    },
    /// The document would grow past [`MAX_PATCHED_BYTES`].
    #[error("operation {index}: the patched object would exceed {MAX_PATCHED_BYTES} bytes")]
    TooLarge {
        /// The operation's position.
        index: usize,
    },
    /// A value would be placed deeper than [`MAX_DEPTH`].
    #[error("operation {index}: the patched object would be nested deeper than {MAX_DEPTH} levels")]
    TooDeep {
        /// The operation's position.
        index: usize,
    },
    /// The patch shifts more than [`MAX_SHIFTS`] array elements.
    #[error("the patch moves too many array elements (limit {MAX_SHIFTS})")]
    TooMuchWork,
}

/// RFC 7386 JSON merge patch. Its result is no larger than the document
/// and the patch together, and no deeper than the deeper of them.
pub fn merge_patch(doc: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *doc = patch.clone();
        return;
    };
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    if let Value::Object(map) = doc {
        for (key, value) in patch {
            if value.is_null() {
                map.shift_remove(key);
            } else {
                merge_patch(map.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// What a running JSON patch has spent.
struct Budget {
    bytes: usize,
    shifts: usize,
}

/// One operation being applied: its position, for errors.
struct Op<'a> {
    index: usize,
    budget: &'a mut Budget,
}

impl Op<'_> {
    fn no_path(&self, path: &str) -> PatchError {
        PatchError::NoPath {
            index: self.index,
            path: path.to_owned(),
        }
    }

    fn bad_index(&self, path: &str) -> PatchError {
        PatchError::BadIndex {
            index: self.index,
            path: path.to_owned(),
        }
    }

    /// Charges the insertion of `value` at `path`: its size (unless it
    /// only moves within the document) and its depth.
    fn charge_insert(&mut self, path: &str, value: &Value, grows: bool) -> Result<(), PatchError> {
        if grows {
            let room = MAX_PATCHED_BYTES.saturating_sub(self.budget.bytes);
            let size = encoded_len_within(value, room)
                .ok_or(PatchError::TooLarge { index: self.index })?;
            self.budget.bytes += size;
        }
        let level = path.matches('/').count();
        let room = MAX_DEPTH.saturating_sub(level);
        depth_within(value, room).ok_or(PatchError::TooDeep { index: self.index })?;
        Ok(())
    }

    fn charge_shift(&mut self, elements: usize) -> Result<(), PatchError> {
        self.budget.shifts += elements;
        if self.budget.shifts > MAX_SHIFTS {
            return Err(PatchError::TooMuchWork);
        }
        Ok(())
    }

    /// Inserts `value` at `path`, once charged.
    fn place(&mut self, doc: &mut Value, path: &str, value: Value) -> Result<(), PatchError> {
        if path.is_empty() {
            *doc = value;
            return Ok(());
        }
        let (parent, last) = split_pointer(path).ok_or_else(|| self.no_path(path))?;
        match doc.pointer_mut(parent) {
            Some(Value::Object(map)) => {
                map.insert(last, value);
                Ok(())
            }
            Some(Value::Array(items)) => {
                let at = if last == "-" {
                    items.len()
                } else {
                    last.parse::<usize>()
                        .ok()
                        .filter(|i| *i <= items.len())
                        .ok_or_else(|| self.bad_index(path))?
                };
                self.charge_shift(items.len() - at)?;
                items.insert(at, value);
                Ok(())
            }
            _ => Err(self.no_path(parent)),
        }
    }

    fn remove(&mut self, doc: &mut Value, path: &str) -> Result<Value, PatchError> {
        let (parent, last) = split_pointer(path).ok_or_else(|| self.no_path(path))?;
        match doc.pointer_mut(parent) {
            Some(Value::Object(map)) => map.shift_remove(&last).ok_or_else(|| self.no_path(path)),
            Some(Value::Array(items)) => {
                let at = last
                    .parse::<usize>()
                    .ok()
                    .filter(|i| *i < items.len())
                    .ok_or_else(|| self.no_path(path))?;
                self.charge_shift(items.len() - at)?;
                Ok(items.remove(at))
            }
            _ => Err(self.no_path(path)),
        }
    }
}

/// RFC 6902 JSON patch, with the API server's semantics (`test` of an
/// absent path against `null` succeeds) and the bounds above. On error the
/// document may be half patched: callers patch a copy.
///
/// # Errors
/// [`PatchError`] naming the operation and why.
pub fn json_patch(doc: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let ops = patch.as_array().ok_or(PatchError::NotAnArray)?;
    if ops.len() > MAX_OPERATIONS {
        return Err(PatchError::TooManyOperations { count: ops.len() });
    }
    let mut budget = Budget {
        bytes: encoded_len_within(doc, MAX_PATCHED_BYTES)
            .ok_or(PatchError::TooLarge { index: 0 })?,
        shifts: 0,
    };
    for (index, op) in ops.iter().enumerate() {
        let field = |f: &'static str| {
            op.get(f)
                .and_then(Value::as_str)
                .ok_or(PatchError::Missing { index, field: f })
        };
        let value = || {
            op.get("value").cloned().ok_or(PatchError::Missing {
                index,
                field: "value",
            })
        };
        let path = field("path")?;
        let mut run = Op {
            index,
            budget: &mut budget,
        };
        match field("op")? {
            "add" => {
                let value = value()?;
                run.charge_insert(path, &value, true)?;
                run.place(doc, path, value)?;
            }
            "remove" => {
                run.remove(doc, path)?;
            }
            "replace" => {
                let value = value()?;
                run.charge_insert(path, &value, true)?;
                run.remove(doc, path)?;
                run.place(doc, path, value)?;
            }
            "test" => {
                let expected = op.get("value").unwrap_or(&Value::Null);
                if doc.pointer(path).unwrap_or(&Value::Null) != expected {
                    return Err(PatchError::TestFailed {
                        path: path.to_owned(),
                    });
                }
            }
            "move" => {
                let from = field("from")?;
                let moved = run.remove(doc, from)?;
                run.charge_insert(path, &moved, false)?;
                run.place(doc, path, moved)?;
            }
            "copy" => {
                let from = field("from")?;
                let source = doc.pointer(from).ok_or_else(|| run.no_path(from))?;
                // Measured before it is cloned: a copy past the budget costs
                // a bounded scan, never the clone.
                run.charge_insert(path, source, true)?;
                let copied = source.clone();
                run.place(doc, path, copied)?;
            }
            other => {
                return Err(PatchError::UnknownOp {
                    index,
                    op: other.to_owned(),
                });
            }
        }
    }
    Ok(())
}

/// A JSON pointer's parent and its last segment, unescaped.
fn split_pointer(path: &str) -> Option<(&str, String)> {
    let (parent, last) = path.rsplit_once('/')?;
    Some((parent, last.replace("~1", "/").replace("~0", "~")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_should_follow_rfc_7386() {
        let mut doc = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge_patch(&mut doc, &json!({"a": "z", "c": {"f": null}}));
        assert_eq!(doc, json!({"a": "z", "c": {"d": "e"}}));
    }

    #[test]
    fn json_patch_should_test_absent_paths_against_null() {
        let mut doc = json!({"metadata": {"name": "x"}});
        let patch = json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["a"]},
            {"op": "add", "path": "/metadata/finalizers/-", "value": "b"},
            {"op": "remove", "path": "/metadata/finalizers/0"},
            {"op": "copy", "from": "/metadata/name", "path": "/metadata/alias"},
            {"op": "move", "from": "/metadata/alias", "path": "/metadata/other"}
        ]);
        json_patch(&mut doc, &patch).expect("applies");
        assert_eq!(
            doc,
            json!({"metadata": {"name": "x", "finalizers": ["b"], "other": "x"}})
        );
        let failing = json!([{"op": "test", "path": "/metadata/name", "value": "y"}]);
        assert_eq!(
            json_patch(&mut doc, &failing),
            Err(PatchError::TestFailed {
                path: "/metadata/name".into()
            })
        );
    }

    #[test]
    fn doubling_copies_should_stop_at_the_size_bound() {
        let mut doc = json!({"data": {"a": "x".repeat(1000)}});
        let ops: Vec<Value> = (0..40)
            .map(|i| json!({"op": "copy", "from": "/data", "path": format!("/data/c{i}")}))
            .collect();
        let error = json_patch(&mut doc, &Value::Array(ops)).expect_err("refused");
        assert!(
            matches!(error, PatchError::TooLarge { index } if index < 20),
            "{error}"
        );
    }

    #[test]
    fn nesting_by_copies_should_stop_at_the_depth_bound() {
        let mut doc = json!({"a": {}});
        let ops: Vec<Value> = (0..200)
            .map(|_| json!({"op": "copy", "from": "/a", "path": "/a/a"}))
            .collect();
        let error = json_patch(&mut doc, &Value::Array(ops)).expect_err("refused");
        assert!(matches!(error, PatchError::TooDeep { .. }), "{error}");
        assert!(depth_within(&doc, MAX_DEPTH).is_some());
    }

    #[test]
    fn operation_counts_and_shifts_should_be_bounded() {
        let too_many = Value::Array(vec![json!({"op": "test", "path": ""}); MAX_OPERATIONS + 1]);
        assert_eq!(
            json_patch(&mut json!({}), &too_many),
            Err(PatchError::TooManyOperations {
                count: MAX_OPERATIONS + 1
            })
        );
        let mut doc = json!({"l": vec![0; 100_000]});
        let shifting = Value::Array(vec![
            json!({"op": "add", "path": "/l/0", "value": 1});
            MAX_OPERATIONS
        ]);
        assert_eq!(
            json_patch(&mut doc, &shifting),
            Err(PatchError::TooMuchWork)
        );
    }

    #[test]
    fn bad_paths_and_ops_should_be_named() {
        let mut doc = json!({"l": [1]});
        let cases = [
            (
                json!([{"op": "add", "path": "/l/5", "value": 1}]),
                "invalid index",
            ),
            (json!([{"op": "remove", "path": "/nope"}]), "does not exist"),
            (json!([{"op": "frob", "path": "/l"}]), "unknown op"),
            (json!([{"op": "add", "path": "/l"}]), "missing value"),
            (json!({"op": "add"}), "must be an array"),
        ];
        for (patch, expected) in cases {
            let error = json_patch(&mut doc, &patch).expect_err("refused");
            assert!(error.to_string().contains(expected), "{error}");
        }
    }
}
