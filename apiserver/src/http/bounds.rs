//! What the server accepts, in bytes and nesting: the bounds that keep one
//! request from exhausting memory or stack, and every stored object
//! readable back at start.
//!
//! # Bounds
//! - A request body is at most [`MAX_BODY`] bytes (the real server's 3 MiB).
//! - A decoded document (after YAML aliases are expanded) is at most
//!   [`MAX_DECODED`] bytes of JSON.
//! - A stored object is at most [`MAX_OBJECT_BYTES`] bytes of JSON (etcd's
//!   1.5 MiB request limit) and at most [`MAX_DEPTH`] containers deep. Every
//!   create, update, patch and apply is checked after it is computed, so
//!   what the database holds always parses again (serde_json stops at 128).

use serde_json::Value;

/// Largest request body accepted, as the real server's limit.
pub const MAX_BODY: usize = 3 << 20;

/// Largest decoded document, once YAML aliases are expanded.
pub const MAX_DECODED: usize = 2 * MAX_BODY;

/// Largest object stored, encoded as JSON.
pub const MAX_OBJECT_BYTES: usize = 1_572_864;

/// Deepest nesting of objects and arrays in a stored object.
pub const MAX_DEPTH: usize = 100;

/// Why an object is out of bounds.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BoundError {
    /// Larger than [`MAX_OBJECT_BYTES`].
    #[error("the object is larger than the limit of {max} bytes")]
    TooLarge {
        /// The limit.
        max: usize,
    },
    /// Deeper than [`MAX_DEPTH`].
    #[error("the object is nested deeper than {max} levels")]
    TooDeep {
        /// The limit.
        max: usize,
    },
}

/// Counts bytes written, failing once past a limit.
struct Counter {
    written: usize,
    limit: usize,
}

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.written += buf.len();
        if self.written > self.limit {
            return Err(std::io::Error::other("limit"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The length of `value` encoded as JSON, if at most `limit`: the cost of
/// finding out is bounded by `limit`, not by the value.
pub fn encoded_len_within(value: &Value, limit: usize) -> Option<usize> {
    let mut counter = Counter { written: 0, limit };
    serde_json::to_writer(&mut counter, value).ok()?;
    Some(counter.written)
}

/// The nesting depth of `value` (a scalar is 0, a container one more than
/// its deepest element), if at most `limit`. Recurses at most `limit + 1`
/// levels whatever the value.
pub fn depth_within(value: &Value, limit: usize) -> Option<usize> {
    let children: Box<dyn Iterator<Item = &Value>> = match value {
        Value::Array(items) => Box::new(items.iter()),
        Value::Object(map) => Box::new(map.values()),
        _ => return Some(0),
    };
    let inner = limit.checked_sub(1)?;
    let mut deepest = 0;
    for child in children {
        deepest = deepest.max(depth_within(child, inner)?);
    }
    Some(deepest + 1)
}

/// Checks that `object` may be stored.
///
/// # Errors
/// [`BoundError`] naming the bound it exceeds.
pub fn check_object(object: &Value) -> Result<(), BoundError> {
    depth_within(object, MAX_DEPTH).ok_or(BoundError::TooDeep { max: MAX_DEPTH })?;
    encoded_len_within(object, MAX_OBJECT_BYTES).ok_or(BoundError::TooLarge {
        max: MAX_OBJECT_BYTES,
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nested(levels: usize) -> Value {
        let mut v = json!("leaf");
        for _ in 0..levels {
            v = json!({ "a": v });
        }
        v
    }

    #[test]
    fn depth_should_count_containers_and_stop_at_the_limit() {
        assert_eq!(depth_within(&json!(1), 0), Some(0));
        assert_eq!(depth_within(&json!({"a": [1, {"b": 2}]}), 10), Some(3));
        assert_eq!(depth_within(&nested(MAX_DEPTH), MAX_DEPTH), Some(MAX_DEPTH));
        assert_eq!(depth_within(&nested(MAX_DEPTH + 1), MAX_DEPTH), None);
    }

    #[test]
    fn objects_past_a_bound_should_be_refused_by_name() {
        assert_eq!(check_object(&nested(MAX_DEPTH)), Ok(()));
        assert_eq!(
            check_object(&nested(MAX_DEPTH + 1)),
            Err(BoundError::TooDeep { max: MAX_DEPTH })
        );
        let big = json!({"data": {"x": "y".repeat(MAX_OBJECT_BYTES)}});
        assert_eq!(
            check_object(&big),
            Err(BoundError::TooLarge {
                max: MAX_OBJECT_BYTES
            })
        );
        assert_eq!(encoded_len_within(&json!({"a": 1}), 100), Some(7));
        assert_eq!(encoded_len_within(&json!({"a": 1}), 6), None);
    }
}
