//! What stops a real server's reader, in its words.

/// What stops a real server's reader from reading an object into its type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    /// A JSON value of another type than the field's (`Reader::Json`).
    #[error(
        "json: cannot unmarshal {value} into Go struct field {within}.{field} of type {go_type}"
    )]
    Field {
        /// The JSON value's type (`string`, `number 1.5`, `object`…).
        value: String,
        /// The Go struct that holds the field, without its package.
        within: String,
        /// JSON field names from the root, dotted (array indexes and map
        /// keys are not named).
        field: String,
        /// The Go type the field has (`[]v1.Container`, `int32`).
        go_type: String,
    },
    /// A self-decoding type's own `json.Unmarshal` refused a value, with
    /// no field named (`Reader::Unstructured` of an `IntOrString`).
    #[error("json: cannot unmarshal {value} into Go value of type {go_type}")]
    Value {
        /// The JSON value's type.
        value: String,
        /// The Go type it was read into.
        go_type: String,
    },
    /// A `[]byte` field's text is not standard base64 (`Reader::Json`).
    #[error("illegal base64 data at input byte {0}")]
    Base64(usize),
    /// The same, as the unstructured converter words it.
    #[error("error decoding from json: illegal base64 data at input byte {0}")]
    ConvertedBase64(usize),
    /// A quantity's text is not a number and a suffix.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    QuantityFormat,
    /// A quantity's suffix is none of the known ones.
    #[error("unable to parse quantity's suffix")]
    QuantitySuffix,
    /// A time's text is not RFC 3339 (`time.Parse`'s own wording).
    #[error("parsing time {text:?}{why}")]
    Time {
        /// The text.
        text: String,
        /// Go's `ParseError` message after the text.
        why: String,
    },
    /// A list, map or struct field holds something else
    /// (`Reader::Unstructured`; a struct's wording has a colon).
    #[error("cannot restore {what} from{colon} {from}", colon = if *what == "struct" { ":" } else { "" })]
    Restore {
        /// `slice`, `map` or `struct`.
        what: &'static str,
        /// The unstructured value's Go kind (`string`, `int64`, `map`…).
        from: &'static str,
    },
    /// A scalar of a kind Go converts, but JSON does not mean to
    /// (`Reader::Unstructured`: an integer into a string, a fraction into
    /// an integer).
    #[error("cannot convert {from} to {to}")]
    Convert {
        /// The unstructured value's Go kind.
        from: &'static str,
        /// The field's Go type.
        to: String,
    },
    /// A scalar field given a value Go cannot convert
    /// (`Reader::Unstructured`), by the field's Go kind.
    #[error("unrecognized type: {0}")]
    Unrecognized(&'static str),
    /// A value of another shape than its field's (`Reader::Apply`).
    #[error("{path}: expected {expected}, got {got}")]
    Typed {
        /// structured-merge-diff's path (`.metadata.labels.a`,
        /// `.spec.containers[name="c"].image`).
        path: String,
        /// `list`, `map`, `string`, `numeric (int or float)`, `boolean`.
        expected: &'static str,
        /// The value, as structured-merge-diff prints it for that shape.
        got: String,
    },
}
