//! Integer fields of request bodies, read the way JSON Schema reads `type: integer`.
//!
//! JSON has one number type, and JSON Schema counts any number with a zero fractional part
//! as an integer: `73339.0` is the integer 73339. Clients whose JSON encoder writes every
//! number as a float (JavaScript after arithmetic, some Python code) must not be refused
//! for it, so the body's integer fields accept integral floats, and refuse every other
//! number (`73339.5`, `1e300`) and every non-number with a clear message.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};

struct IntegerVisitor;

/// Anything whose magnitude is this or more cannot be an `i64` (2^63, exactly a float).
const I64_LIMIT: f64 = 9_223_372_036_854_775_808.0;

impl Visitor<'_> for IntegerVisitor {
    type Value = i64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an integer")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
        Ok(v)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
        i64::try_from(v).map_err(|_| E::custom(format!("integer {v} is out of range")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
        if !v.is_finite() || v.fract() != 0.0 {
            return Err(E::invalid_type(de::Unexpected::Float(v), &self));
        }
        if !(-I64_LIMIT..I64_LIMIT).contains(&v) {
            return Err(E::custom(format!("integer {v} is out of range")));
        }
        // Integral and within i64's range, so the conversion is exact.
        Ok(v as i64)
    }
}

/// `#[serde(deserialize_with = "integer")]` for an `i64` field.
pub fn integer<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    deserializer.deserialize_any(IntegerVisitor)
}

/// `#[serde(default, deserialize_with = "optional_integer")]` for an `Option<i64>` field
/// (JSON `null` is `None`).
pub fn optional_integer<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<i64>, D::Error> {
    struct OptionVisitor;

    impl<'de> Visitor<'de> for OptionVisitor {
        type Value = Option<i64>;

        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an integer or null")
        }

        fn visit_none<E: de::Error>(self) -> Result<Option<i64>, E> {
            Ok(None)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Option<i64>, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<i64>, D::Error> {
            integer(d).map(Some)
        }
    }

    deserializer.deserialize_option(OptionVisitor)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    struct Body {
        #[serde(deserialize_with = "super::integer")]
        n: i64,
        #[serde(default, deserialize_with = "super::optional_integer")]
        m: Option<i64>,
    }

    fn parse(json: &str) -> Result<Body, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn integral_numbers_are_integers_whatever_their_spelling() {
        assert_eq!(parse(r#"{"n": 73339}"#).unwrap().n, 73339);
        assert_eq!(parse(r#"{"n": 73339.0}"#).unwrap().n, 73339);
        assert_eq!(parse(r#"{"n": 7.3339e4}"#).unwrap().n, 73339);
        assert_eq!(parse(r#"{"n": -0.0}"#).unwrap().n, 0);
        assert_eq!(parse(r#"{"n": -5}"#).unwrap().n, -5);
        assert_eq!(parse(r#"{"n": 1, "m": 2.0}"#).unwrap().m, Some(2));
        assert_eq!(parse(r#"{"n": 1, "m": null}"#).unwrap().m, None);
        assert_eq!(parse(r#"{"n": 1}"#).unwrap().m, None);
    }

    #[test]
    fn fractions_huge_numbers_and_non_numbers_are_refused() {
        for bad in [
            r#"{"n": 73339.5}"#,
            r#"{"n": 1e300}"#,
            r#"{"n": -1e19}"#,
            r#"{"n": 9223372036854775808}"#,
            r#"{"n": 18446744073709551616}"#,
            r#"{"n": "5"}"#,
            r#"{"n": true}"#,
            r#"{"n": null}"#,
            r#"{"n": 1, "m": 0.5}"#,
            r#"{"n": 1, "m": "x"}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let message = parse(r#"{"n": 73339.5}"#).unwrap_err();
        assert!(message.contains("expected an integer"), "{message}");
    }
}
