//! Durations on the command line: `500ms`, `30s`, `2m`, `1h`, and sums such as `1m30s`.
//! A bare number is refused, so that `--lease 30` cannot silently mean 30 ms or 30 h. A
//! flag with limits (`within`) refuses a value beyond them in the unit it was written in.

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
            "" => return Err(format!("{text:?} needs a unit: ms, s, m or h")),
            name => match UNITS.iter().find(|(unit, _)| *unit == name) {
                Some((_, size)) => *size,
                None => return Err(format!("{name:?} in {text:?} is not a unit (ms, s, m, h)")),
            },
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

/// The parser of a duration flag with limits: a duration from `min` to `max`. A refusal
/// names the flag and gives the limit in the unit the value was written in (`--lease 48h`:
/// "--lease must be at most 24h"), or, when the limit is not a whole number of that unit,
/// as `written` writes it.
pub fn within(
    flag: &'static str,
    min: Duration,
    max: Duration,
) -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync + 'static {
    move |text| {
        let value = parse(text)?;
        if value < min {
            Err(format!("{flag} must be at least {}", in_unit_of(text, min)))
        } else if value > max {
            Err(format!("{flag} must be at most {}", in_unit_of(text, max)))
        } else {
            Ok(value)
        }
    }
}

/// The units a duration is written in, largest first.
const UNITS: [(&str, Duration); 4] = [
    ("h", Duration::from_secs(3600)),
    ("m", Duration::from_secs(60)),
    ("s", Duration::from_secs(1)),
    ("ms", Duration::from_millis(1)),
];

/// `limit` in the first unit `text` (a valid duration) is written in, if it is a whole
/// number of it; else as [`written`] writes it.
fn in_unit_of(text: &str, limit: Duration) -> String {
    let unit: String = text
        .trim()
        .chars()
        .skip_while(char::is_ascii_digit)
        .take_while(|c| !c.is_ascii_digit())
        .collect();
    match UNITS.iter().find(|(name, _)| *name == unit) {
        Some((name, size)) if limit.as_millis() % size.as_millis() == 0 => {
            format!("{}{name}", limit.as_millis() / size.as_millis())
        }
        _ => written(limit),
    }
}

/// A duration as it would be written on the command line, in whole units: `24h`, `5m`,
/// `1m30s`, `250ms`, `0s`.
fn written(d: Duration) -> String {
    let mut rest = d.as_millis();
    let mut text = String::new();
    for (name, size) in UNITS {
        let size = size.as_millis();
        if rest >= size {
            text.push_str(&format!("{}{name}", rest / size));
            rest %= size;
        }
    }
    if text.is_empty() {
        text.push_str("0s");
    }
    text
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
    fn a_limit_is_told_in_the_unit_the_value_was_written_in() {
        let lease = within(
            "--lease",
            Duration::from_millis(1),
            Duration::from_secs(86_400),
        );
        assert_eq!(lease("48h"), Err("--lease must be at most 24h".into()));
        assert_eq!(lease("2000m"), Err("--lease must be at most 1440m".into()));
        assert_eq!(lease("24h1s"), Err("--lease must be at most 24h".into()));
        assert_eq!(lease("0s"), Err("--lease must be at least 1ms".into()));
        assert_eq!(lease("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(lease("1ms"), Ok(Duration::from_millis(1)));
        let wait = within("--wait", Duration::ZERO, Duration::from_secs(300));
        assert_eq!(wait("1h"), Err("--wait must be at most 5m".into()));
        assert_eq!(wait("301s"), Err("--wait must be at most 300s".into()));
        assert_eq!(wait("0s"), Ok(Duration::ZERO));
        assert!(
            wait("5").is_err_and(|e| e.contains("unit")),
            "still parsed first"
        );
    }

    #[test]
    fn written_uses_whole_units() {
        assert_eq!(written(Duration::from_secs(86_400)), "24h");
        assert_eq!(written(Duration::from_secs(90)), "1m30s");
        assert_eq!(written(Duration::from_millis(1)), "1ms");
        assert_eq!(written(Duration::ZERO), "0s");
    }

    #[test]
    fn show_is_short() {
        assert_eq!(show(Duration::from_millis(250)), "250ms");
        assert_eq!(show(Duration::from_millis(1500)), "1.5s");
        assert_eq!(show(Duration::from_secs(123)), "2m3s");
    }
}
