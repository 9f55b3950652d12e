//! The duration grammar of the attribute's arguments: `"<integer><unit>"`, unit `ms`, `s`, `m`,
//! `h` or `d`, no space, in microseconds; and, for what is not one, the duration that was meant
//! (a fraction in a smaller unit, a unit's usual spellings).

/// The units of a duration string, with their length in microseconds.
pub(crate) const UNITS: [(&str, u128); 5] = [
    ("d", 86_400_000_000),
    ("h", 3_600_000_000),
    ("m", 60_000_000),
    ("s", 1_000_000),
    ("ms", 1_000),
];

/// A duration string, `<integer><unit>` with no space, in microseconds (not range-checked).
pub(crate) fn parse(text: &str) -> Result<u128, String> {
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, rest) = text.split_at(digits_end);
    if digits.is_empty() {
        return Err(
            "expected an integer followed by a unit (`ms`, `s`, `m`, `h` or `d`), e.g. \"1500ms\""
                .to_owned(),
        );
    }
    if rest.starts_with('.') {
        let unit_start = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (fraction, unit) = rest.split_at(unit_start);
        let suggestion = unit_us(unit)
            .and_then(|per| decimal_us(&format!("{digits}{fraction}"), per))
            .and_then(suggest);
        return Err(match suggestion {
            Some(text) => format!("fractions are not supported; write \"{text}\""),
            None => "fractions are not supported; use a smaller unit, e.g. \"1500ms\"".to_owned(),
        });
    }
    let unit = rest.trim();
    let spaced = unit.len() != rest.len();
    if unit.is_empty() {
        return Err(format!(
            "missing unit; write \"{digits}s\" (units: `ms`, `s`, `m`, `h`, `d`)"
        ));
    }
    let Some(per_unit) = unit_us(unit) else {
        let hint = unit_synonym(unit).map_or_else(String::new, |known| {
            format!(" (did you mean \"{digits}{known}\"?)")
        });
        return Err(format!(
            "unknown unit `{unit}`; expected `ms`, `s`, `m`, `h` or `d` right after the number{hint}"
        ));
    };
    if spaced {
        return Err(format!(
            "no space is allowed in a duration; write \"{digits}{unit}\""
        ));
    }
    // Digits beyond u128 are far beyond 100 years: saturate, then the range check reports it.
    let count = digits.parse::<u128>().unwrap_or(u128::MAX);
    Ok(count.saturating_mul(per_unit))
}

fn unit_us(unit: &str) -> Option<u128> {
    UNITS
        .iter()
        .find(|(known, _)| *known == unit)
        .map(|(_, us)| *us)
}

fn unit_synonym(unit: &str) -> Option<&'static str> {
    match unit.to_lowercase().as_str() {
        "msec" | "msecs" | "millis" | "millisecond" | "milliseconds" => Some("ms"),
        "sec" | "secs" | "second" | "seconds" => Some("s"),
        "min" | "mins" | "minute" | "minutes" => Some("m"),
        "hr" | "hrs" | "hour" | "hours" => Some("h"),
        "day" | "days" => Some("d"),
        "ms" => Some("ms"),
        "s" => Some("s"),
        "m" => Some("m"),
        "h" => Some("h"),
        "d" => Some("d"),
        _ => None,
    }
}

/// An exact decimal number (`1.5`, no exponent) times `per` microseconds, when whole.
pub(crate) fn decimal_us(decimal: &str, per: u128) -> Option<u128> {
    let (whole, fraction) = decimal.split_once('.').unwrap_or((decimal, ""));
    if !whole
        .bytes()
        .chain(fraction.bytes())
        .all(|b| b.is_ascii_digit())
        || fraction.len() > 30
    {
        return None;
    }
    let scale = 10u128.checked_pow(u32::try_from(fraction.len()).ok()?)?;
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let fraction: u128 = if fraction.is_empty() {
        0
    } else {
        fraction.parse().ok()?
    };
    let total = whole
        .checked_mul(scale)?
        .checked_add(fraction)?
        .checked_mul(per)?;
    total.is_multiple_of(scale).then(|| total / scale)
}

/// The duration string for `us` microseconds in the largest unit that divides it, when it is
/// a whole number of milliseconds (the smallest unit).
pub(crate) fn suggest(us: u128) -> Option<String> {
    UNITS
        .iter()
        .find(|(_, per)| us.is_multiple_of(*per))
        .filter(|_| us > 0)
        .map(|(unit, per)| format!("{}{unit}", us / per))
}
