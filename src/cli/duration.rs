//! Durations on the command line: `500ms`, `30s`, `2m`, `1h`, and sums such as `1m30s`.
//! A bare number is refused, so that `--lease 30` cannot silently mean 30 ms or 30 h.

use std::time::Duration;

pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("a duration is needed, such as 30s, 500ms or 2m".into());
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!(
                "{text:?} is not a duration (such as 30s, 500ms or 2m)"
            ));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("{text:?} is too long"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(1),
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            "" => return Err(format!("{text:?} needs a unit: ms, s, m or h")),
            other => return Err(format!("{other:?} in {text:?} is not a unit (ms, s, m, h)")),
        };
        rest = &rest[unit_len..];
        let part = unit
            .checked_mul(u32::try_from(number).map_err(|_| format!("{text:?} is too long"))?)
            .ok_or_else(|| format!("{text:?} is too long"))?;
        total = total
            .checked_add(part)
            .ok_or_else(|| format!("{text:?} is too long"))?;
    }
    Ok(total)
}

/// `1.5s`, `250ms`, `2m3s`: for showing a remaining time.
pub fn show(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}m{}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_sums() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn bare_numbers_unknown_units_and_junk_are_refused() {
        for bad in ["", "30", "s", "3x", "1.5s", "-1s", "99999999999s"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn show_is_short() {
        assert_eq!(show(Duration::from_millis(250)), "250ms");
        assert_eq!(show(Duration::from_millis(1500)), "1.5s");
        assert_eq!(show(Duration::from_secs(123)), "2m3s");
    }
}
