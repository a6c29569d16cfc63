//! Query parameters: decoded, then parsed with their ranges checked, so
//! that no value a client sends can panic or overflow the server.

use std::collections::HashMap;
use std::time::Duration;

use crate::http::error::ApiError;

/// Decodes `%XX` and `+` in a query component.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses a query string; a parameter given twice is its first value, as a
/// real server reads its options.
pub fn parse_query(query: &str) -> HashMap<String, String> {
    let mut parsed = HashMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        parsed
            .entry(percent_decode(k))
            .or_insert_with(|| percent_decode(v));
    }
    parsed
}

/// The options of a list or a watch a real server refuses (apimachinery's
/// `ValidateListOptions`, v1.37.2): 422, every problem listed.
pub(super) fn list_options(query: &HashMap<String, String>, watch: bool) -> Result<(), ApiError> {
    let given = |name: &str| {
        query
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    };
    let (version, continued) = (given("resourceVersion"), given("continue").is_some());
    let initial_events = query.contains_key("sendInitialEvents");
    let forbidden = |why: &str| format!("resourceVersionMatch: Forbidden: {why}");
    let unsupported = |value: &str, supported: &str| {
        format!("resourceVersionMatch: Unsupported value: {value:?}: supported values: {supported}")
    };
    let mut errors = Vec::new();
    if watch && initial_events && given("resourceVersionMatch") != Some("NotOlderThan") {
        errors.push(forbidden(
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    match given("resourceVersionMatch") {
        Some(matching) if watch => {
            if !initial_events {
                errors.push(forbidden(
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if matching != "NotOlderThan" {
                errors.push(unsupported(matching, "\"NotOlderThan\""));
            }
            if continued {
                errors.push(forbidden(
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
        Some(matching) => {
            if version.is_none() {
                errors.push(forbidden(
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if continued {
                errors.push(forbidden(
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if matching != "Exact" && matching != "NotOlderThan" {
                errors.push(unsupported(matching, "\"Exact\", \"NotOlderThan\", \"\""));
            }
            if matching == "Exact" && version == Some("0") {
                errors.push(forbidden(
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        None => {}
    }
    if !watch && initial_events {
        errors.push("sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list".into());
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::options_invalid("ListOptions", &errors))
    }
}

/// A resourceVersion: a decimal `u64`, or 400.
pub(super) fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {s}")))
}

/// Longest watch a client may ask for with `timeoutSeconds`; longer asks
/// are clamped (an unbounded one would overflow the deadline's clock).
pub const MAX_WATCH_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// `timeoutSeconds`: `default` when absent, clamped to
/// [`MAX_WATCH_TIMEOUT`], 400 when not a non-negative integer.
pub(super) fn timeout(
    query: &HashMap<String, String>,
    default: Duration,
) -> Result<Duration, ApiError> {
    match query.get("timeoutSeconds").filter(|t| !t.is_empty()) {
        None => Ok(default.min(MAX_WATCH_TIMEOUT)),
        Some(t) => t
            .parse::<u64>()
            .map(|s| Duration::from_secs(s).min(MAX_WATCH_TIMEOUT))
            .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds: {t}"))),
    }
}

/// `limit`: none when absent or 0 (everything), 400 when not a
/// non-negative integer.
pub(super) fn limit(query: &HashMap<String, String>) -> Result<Option<usize>, ApiError> {
    match query.get("limit").map(String::as_str) {
        None | Some("" | "0") => Ok(None),
        Some(l) => l
            .parse::<u64>()
            .map(|n| Some(usize::try_from(n).unwrap_or(usize::MAX)))
            .map_err(|_| ApiError::bad_request(format!("invalid limit: {l}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_should_be_percent_decoded() {
        let q = parse_query("labelSelector=app%3Dweb%2Ctier+in+%28a%29&watch=true");
        assert_eq!(q["labelSelector"], "app=web,tier in (a)");
        assert_eq!(q["watch"], "true");
    }

    #[test]
    fn a_parameter_given_twice_should_be_its_first_value() {
        assert_eq!(parse_query("limit=1&limit=2")["limit"], "1");
    }

    #[test]
    fn list_options_should_be_refused_as_a_real_server_refuses_them() {
        let check = |query: &str, watch: bool| list_options(&parse_query(query), watch);
        assert_eq!(
            check("resourceVersion=5&resourceVersionMatch=Exact", false),
            Ok(())
        );
        assert_eq!(
            check(
                "sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
                true
            ),
            Ok(())
        );
        let error = check("resourceVersionMatch=Exact", false).expect_err("no version");
        assert_eq!(
            error.message,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        );
        let error = check(
            "resourceVersion=0&resourceVersionMatch=Soon&continue=x",
            false,
        )
        .expect_err("three");
        assert_eq!(error.code, 422);
        assert_eq!(
            error
                .details
                .as_ref()
                .map(|d| d["causes"].as_array().map(Vec::len)),
            Some(Some(2)),
            "{error:?}"
        );
        assert!(check("resourceVersionMatch=NotOlderThan", true).is_err());
        assert!(check("sendInitialEvents=true", false).is_err());
    }

    #[test]
    fn out_of_range_parameters_should_be_refused_or_clamped() {
        let q = |s: &str| parse_query(s);
        let default = Duration::from_secs(60);
        assert_eq!(timeout(&q(""), default), Ok(default));
        assert_eq!(
            timeout(&q("timeoutSeconds=18446744073709551615"), default),
            Ok(MAX_WATCH_TIMEOUT)
        );
        assert!(timeout(&q("timeoutSeconds=-1"), default).is_err());
        assert!(timeout(&q("timeoutSeconds=1e9"), default).is_err());
        assert_eq!(limit(&q("limit=0")), Ok(None));
        assert_eq!(
            limit(&q("limit=18446744073709551615")),
            Ok(Some(usize::MAX))
        );
        assert!(limit(&q("limit=-1")).is_err());
        assert!(limit(&q("limit=99999999999999999999999")).is_err());
        assert!(parse_rv("-5").is_err());
        assert!(parse_rv("abc").is_err());
    }
}
