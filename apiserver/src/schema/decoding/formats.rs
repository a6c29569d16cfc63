//! The texts a self-decoding Go type (or `[]byte`, or an integer) takes,
//! checked as its own parser checks them.

use super::mismatch::Mismatch;

/// Whether a JSON number is an integer of `bits` bits, as Go's
/// `strconv.ParseInt` of its text (no fraction, no exponent) and
/// `OverflowInt` decide.
pub(super) fn fits_int(number: &serde_json::Number, bits: u32) -> bool {
    let Some(n) = number.as_i64() else {
        return false;
    };
    let text = number.to_string();
    if text.contains(['.', 'e', 'E']) {
        return false;
    }
    bits >= 64 || (i64::from(i32::MIN)..=i64::from(i32::MAX)).contains(&n)
}

/// Go's `base64.StdEncoding.Decode`: `Err` is the offset it reports.
pub(super) fn base64_std(src: &[u8]) -> Result<(), usize> {
    let alphabet = |b: u8| b.is_ascii_alphanumeric() || b == b'+' || b == b'/';
    let newline = |b: u8| b == b'\n' || b == b'\r';
    let mut si = 0;
    while si < src.len() {
        // One quantum of four symbols (decodeQuantum).
        let mut j = 0;
        while j < 4 {
            if si == src.len() {
                return match j {
                    0 => Ok(()),
                    _ => Err(si - j),
                };
            }
            let symbol = src[si];
            si += 1;
            if alphabet(symbol) {
                j += 1;
                continue;
            }
            if newline(symbol) {
                continue;
            }
            if symbol != b'=' || j < 2 {
                return Err(si - 1);
            }
            if j == 2 {
                while si < src.len() && newline(src[si]) {
                    si += 1;
                }
                if si == src.len() {
                    return Err(src.len());
                }
                if src[si] != b'=' {
                    return Err(si - 1);
                }
                si += 1;
            }
            while si < src.len() && newline(src[si]) {
                si += 1;
            }
            return if si < src.len() { Err(si) } else { Ok(()) };
        }
    }
    Ok(())
}

/// `resource.ParseQuantity`'s format and suffix checks.
pub(super) fn quantity(text: &str) -> Result<(), Mismatch> {
    let bytes = text.as_bytes();
    let mut at = usize::from(matches!(bytes.first(), Some(b'+' | b'-')));
    let digits_from = at;
    while at < bytes.len() && (bytes[at].is_ascii_digit() || bytes[at] == b'.') {
        at += 1;
    }
    let number = &text[digits_from..at];
    if !number.bytes().any(|b| b.is_ascii_digit()) || number.matches('.').count() > 1 {
        return Err(Mismatch::QuantityFormat);
    }
    let suffix = &text[at..];
    let letters = suffix
        .find(|c: char| !"eEinumkKMGTP".contains(c))
        .unwrap_or(suffix.len());
    let mut rest = &suffix[letters..];
    rest = rest.strip_prefix(['+', '-']).unwrap_or(rest);
    if !rest.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Mismatch::QuantityFormat);
    }
    let known = [
        "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E",
    ];
    let exponent = suffix
        .strip_prefix(['e', 'E'])
        .map(|e| e.strip_prefix(['+', '-']).unwrap_or(e))
        .is_some_and(|e| !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit()));
    if known.contains(&suffix) || exponent {
        Ok(())
    } else {
        Err(Mismatch::QuantitySuffix)
    }
}

/// `time.Parse(time.RFC3339, text)`, which `metav1.Time` decodes with.
pub(super) fn time(text: &str) -> Result<(), Mismatch> {
    let fail = |why: String| {
        Err(Mismatch::Time {
            text: text.to_owned(),
            why,
        })
    };
    let cannot = |rest: &str, element: &str| {
        fail(format!(
            " as \"2006-01-02T15:04:05Z07:00\": cannot parse {rest:?} as {element:?}"
        ))
    };
    let out_of_range = |what: &str| fail(format!(": {what} out of range"));
    // Go's getnum: one or two digits, two when `fixed`.
    let number = |s: &str, fixed: bool| -> Option<(u32, usize)> {
        let digit = |i: usize| s.as_bytes().get(i).filter(|b| b.is_ascii_digit());
        let first = u32::from(*digit(0)? - b'0');
        match digit(1) {
            Some(second) => Some((first * 10 + u32::from(second - b'0'), 2)),
            None if fixed => None,
            None => Some((first, 1)),
        }
    };
    let mut rest = text;
    // "2006": four characters, `atoi` (a sign allowed).
    let year_text = rest.get(..4).unwrap_or("");
    let Ok(year) = year_text.parse::<i32>() else {
        return cannot(rest, "2006");
    };
    rest = &rest[4..];
    let mut fields = [0u32; 5];
    // The day's range depends on the month: checked once both are read.
    let limits = [
        (1..=12, "month"),
        (0..=99, "day"),
        (0..=23, "hour"),
        (0..=59, "minute"),
        (0..=59, "second"),
    ];
    let chunks = [("-", "01", true), ("-", "02", true), ("T", "15", false)];
    let clock = [(":", "04", true), (":", "05", true)];
    for (i, (literal, element, fixed)) in chunks.iter().chain(clock.iter()).enumerate() {
        let Some(after) = rest.strip_prefix(literal) else {
            return cannot(rest, literal);
        };
        rest = after;
        let Some((value, used)) = number(rest, *fixed) else {
            return cannot(rest, element);
        };
        rest = &rest[used..];
        fields[i] = value;
        if !limits[i].0.contains(&value) {
            return out_of_range(limits[i].1);
        }
    }
    if let [b'.' | b',', digit, ..] = rest.as_bytes()
        && digit.is_ascii_digit()
    {
        let end = rest[1..]
            .find(|c: char| !c.is_ascii_digit())
            .map_or(rest.len(), |e| e + 1);
        rest = &rest[end..];
    }
    if let Some(after) = rest.strip_prefix('Z') {
        rest = after;
    } else {
        let zone = rest.as_bytes();
        let two = |at: usize| number(rest.get(at..at + 2).unwrap_or(""), true);
        let (Some((hours, _)), Some((minutes, _)), true, true) = (
            two(1),
            two(4),
            zone.len() >= 6 && zone[3] == b':',
            matches!(zone.first(), Some(b'+' | b'-')),
        ) else {
            return cannot(rest, "Z07:00");
        };
        if hours > 24 {
            return out_of_range("time zone offset hour");
        }
        if minutes > 60 {
            return out_of_range("time zone offset minute");
        }
        rest = &rest[6..];
    }
    if !rest.is_empty() {
        return fail(format!(": extra text: {rest:?}"));
    }
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days = match fields[0] {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if !(1..=days).contains(&fields[1]) {
        return out_of_range("day");
    }
    Ok(())
}
