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

/// Parses a query string.
pub fn parse_query(query: &str) -> HashMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
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
