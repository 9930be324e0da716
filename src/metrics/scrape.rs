//! Reading `/metrics` back, for the bench and the tests: the value of a series, given as
//! `name` or `name{label="value",...}`, summed over every series of that name whose labels
//! include the ones given (so `lockwarden_grants_total` is the instance's total over every
//! `kind`, and `lockwarden_grants_total{kind="lock"}` the locks' alone).

/// The sum of the series `series` matches in the classic text `text`; `None` when none does.
pub fn series_sum(text: &str, series: &str) -> Option<f64> {
    let (name, wanted) = split(series);
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (n, labels) = split(series);
        if n != name || !wanted.iter().all(|w| labels.contains(w)) {
            continue;
        }
        if let Ok(value) = value.parse::<f64>() {
            *found.get_or_insert(0.0) += value;
        }
    }
    found
}

/// A series' name and its `label="value"` pairs.
fn split(series: &str) -> (&str, Vec<&str>) {
    match series.split_once('{') {
        Some((name, labels)) => {
            let labels = labels.strip_suffix('}').unwrap_or(labels);
            (name, labels.split(',').filter(|l| !l.is_empty()).collect())
        }
        None => (series, Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::series_sum;

    const TEXT: &str = "# TYPE lockwarden_grants_total counter
lockwarden_grants_total{resource=\"lock\"} 3
lockwarden_grants_total{resource=\"semaphore\"} 2
lockwarden_grants_totally 9
lockwarden_http_request_duration_seconds_count{method=\"get\",outcome=\"ok\",route=\"/v1/locks/{name}\"} 4
";

    #[test]
    fn a_series_is_summed_over_the_labels_it_leaves_out() {
        assert_eq!(series_sum(TEXT, "lockwarden_grants_total"), Some(5.0));
        assert_eq!(
            series_sum(TEXT, "lockwarden_grants_total{resource=\"semaphore\"}"),
            Some(2.0)
        );
        assert_eq!(
            series_sum(
                TEXT,
                "lockwarden_http_request_duration_seconds_count{route=\"/v1/locks/{name}\"}"
            ),
            Some(4.0)
        );
        assert_eq!(series_sum(TEXT, "lockwarden_grants"), None);
        assert_eq!(
            series_sum(TEXT, "lockwarden_grants_total{resource=\"election\"}"),
            None
        );
    }
}
