//! The exposition formats: which one a scraper gets (`Accept` negotiation), and the
//! OpenMetrics 1.0 text encoder, which the `prometheus` crate lacks.
//!
//! The classic text format is the default: `promtool check metrics` of Prometheus 2.42
//! (Debian 12) rejects OpenMetrics counters, whose `# TYPE` line names the family without
//! `_total`, with "no help text". OpenMetrics is served only to a scraper that prefers it.

use std::fmt::Write;

use prometheus::proto::{Metric, MetricFamily, MetricType};

/// A content type of `/metrics`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Prometheus' text format 0.0.4.
    Classic,
    OpenMetrics,
}

const OPENMETRICS: &str = "application/openmetrics-text";

impl Format {
    /// The format an `Accept` header asks for: OpenMetrics when it is acceptable (quality
    /// above 0) and wanted at least as much as plain text; the classic format otherwise,
    /// and without a header. Media types are compared without their parameters (every
    /// OpenMetrics version a scraper names is answered with 1.0.0).
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Classic;
        };
        let (mut openmetrics, mut text) = (0.0_f64, 0.0_f64);
        for range in accept.split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
            let quality = parts
                .filter_map(|p| p.split_once('='))
                .find(|(key, _)| key.trim().eq_ignore_ascii_case("q"))
                .map_or(1.0, |(_, q)| q.trim().parse::<f64>().unwrap_or(0.0))
                .clamp(0.0, 1.0);
            match media.as_str() {
                OPENMETRICS => openmetrics = openmetrics.max(quality),
                "text/plain" | "text/*" | "*/*" => text = text.max(quality),
                _ => {}
            }
        }
        if openmetrics > 0.0 && openmetrics >= text {
            Format::OpenMetrics
        } else {
            Format::Classic
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Classic => prometheus::TEXT_FORMAT,
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// The families in OpenMetrics text, ending with `# EOF`.
pub fn encode(families: &[MetricFamily]) -> String {
    let mut out = String::new();
    for family in families {
        let name = family.name();
        let (kind, base) = match family.get_field_type() {
            // A counter family is named without the `_total` its samples carry.
            MetricType::COUNTER => ("counter", name.strip_suffix("_total").unwrap_or(name)),
            MetricType::GAUGE => ("gauge", name),
            MetricType::HISTOGRAM => ("histogram", name),
            MetricType::SUMMARY => ("summary", name),
            // lockwarden makes none; the crate's accessors for it are on their way out.
            MetricType::UNTYPED => continue,
        };
        let _ = writeln!(out, "# TYPE {base} {kind}");
        if !family.help().is_empty() {
            let _ = writeln!(out, "# HELP {base} {}", escape(family.help()));
        }
        for metric in family.get_metric() {
            match family.get_field_type() {
                MetricType::COUNTER => {
                    let value = metric.get_counter().get_value();
                    sample(&mut out, &format!("{base}_total"), metric, None, value);
                }
                MetricType::GAUGE => {
                    sample(&mut out, base, metric, None, metric.get_gauge().get_value())
                }
                MetricType::HISTOGRAM => histogram(&mut out, base, metric),
                MetricType::SUMMARY => {
                    let summary = metric.get_summary();
                    sample(
                        &mut out,
                        &format!("{base}_sum"),
                        metric,
                        None,
                        summary.sample_sum(),
                    );
                    let count = summary.sample_count() as f64;
                    sample(&mut out, &format!("{base}_count"), metric, None, count);
                }
                MetricType::UNTYPED => {}
            }
        }
    }
    out.push_str("# EOF\n");
    out
}

fn histogram(out: &mut String, base: &str, metric: &Metric) {
    let histogram = metric.get_histogram();
    let bucket = format!("{base}_bucket");
    let count = histogram.get_sample_count() as f64;
    for b in histogram.get_bucket() {
        let le = number(b.upper_bound());
        sample(out, &bucket, metric, Some(&le), b.cumulative_count() as f64);
    }
    // OpenMetrics requires the +Inf bucket, which the crate leaves to the encoder.
    sample(out, &bucket, metric, Some("+Inf"), count);
    sample(
        out,
        &format!("{base}_sum"),
        metric,
        None,
        histogram.get_sample_sum(),
    );
    sample(out, &format!("{base}_count"), metric, None, count);
}

fn sample(out: &mut String, name: &str, metric: &Metric, le: Option<&str>, value: f64) {
    out.push_str(name);
    let labels = metric
        .get_label()
        .iter()
        .map(|l| (l.name(), escape(l.value())))
        .chain(le.map(|le| ("le", le.to_owned())));
    let mut first = true;
    for (key, value) in labels {
        out.push(if first { '{' } else { ',' });
        first = false;
        let _ = write!(out, "{key}=\"{value}\"");
    }
    if !first {
        out.push('}');
    }
    let _ = writeln!(out, " {}", number(value));
}

/// A number as OpenMetrics writes it: integers without a fraction, `+Inf`, `-Inf`, `NaN`.
fn number(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{value}")
    }
}

/// Escapes a label value or help text: backslash, double quote and line feed.
fn escape(text: &str) -> String {
    text.replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::{HistogramOpts, HistogramVec, IntCounter, IntGauge, Registry};

    #[test]
    fn prometheus_scrapers_get_openmetrics_and_everyone_else_classic_text() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(
            Format::negotiate(Some("application/openmetrics-text")),
            Format::OpenMetrics
        );
        for classic in [
            None,
            Some(""),
            Some("*/*"),
            Some("text/plain"),
            Some("text/plain;version=0.0.4"),
            Some("application/json"),
            Some("text/plain, application/openmetrics-text;q=0.5"),
            Some("application/openmetrics-text;q=0"),
            Some("application/openmetrics-text;q=nonsense"),
        ] {
            assert_eq!(Format::negotiate(classic), Format::Classic, "{classic:?}");
        }
    }

    #[test]
    fn families_are_written_as_openmetrics() {
        let registry = Registry::new();
        let grants = IntCounter::new("lw_grants_total", "Grants \"so far\".\nMore.").unwrap();
        let streams = IntGauge::new("lw_streams", "Streams.").unwrap();
        let opts = HistogramOpts::new("lw_seconds", "Time.").buckets(vec![0.5, 1.0]);
        let seconds = HistogramVec::new(opts, &["route"]).unwrap();
        registry.register(Box::new(grants.clone())).unwrap();
        registry.register(Box::new(streams.clone())).unwrap();
        registry.register(Box::new(seconds.clone())).unwrap();
        grants.inc_by(3);
        streams.set(2);
        seconds.with_label_values(&["/a\\\"b"]).observe(0.75);
        let text = encode(&registry.gather());
        let expected = "\
# TYPE lw_grants counter
# HELP lw_grants Grants \\\"so far\\\".\\nMore.
lw_grants_total 3
# TYPE lw_seconds histogram
# HELP lw_seconds Time.
lw_seconds_bucket{route=\"/a\\\\\\\"b\",le=\"0.5\"} 0
lw_seconds_bucket{route=\"/a\\\\\\\"b\",le=\"1\"} 1
lw_seconds_bucket{route=\"/a\\\\\\\"b\",le=\"+Inf\"} 1
lw_seconds_sum{route=\"/a\\\\\\\"b\"} 0.75
lw_seconds_count{route=\"/a\\\\\\\"b\"} 1
# TYPE lw_streams gauge
# HELP lw_streams Streams.
lw_streams 2
# EOF
";
        assert_eq!(text, expected);
    }

    #[test]
    fn special_numbers_are_spelt_as_openmetrics_wants() {
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(f64::NEG_INFINITY), "-Inf");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(2.0), "2");
        assert_eq!(number(0.0005), "0.0005");
    }
}
