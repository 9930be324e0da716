//! Just enough of PromQL to find the series an expression selects, with their matchers.

/// A selector in a PromQL expression: its metric name and its label matchers (label,
/// operator, value).
#[derive(Debug, PartialEq)]
pub(super) struct Selector {
    pub name: String,
    pub matchers: Vec<(String, String, String)>,
}

/// Keywords of PromQL that may stand where a name could: operators, modifiers and
/// aggregations (whose `by (...)` comes before their parenthesis).
const KEYWORDS: &str = "and or unless bool offset atan2 sum min max avg group stddev stdvar \
                        count count_values bottomk topk quantile inf nan";
/// Keywords followed by a list of label names in parentheses.
const GROUPING: &str = "by without on ignoring group_left group_right";

/// The selectors of a PromQL expression: every name that is not a function, keyword or
/// label, with the matchers in braces after it. Strings, durations and numbers are skipped.
pub(super) fn selectors(expr: &str) -> Vec<Selector> {
    let chars: Vec<char> = expr.chars().collect();
    let mut found: Vec<Selector> = Vec::new();
    let mut last_was_name = false;
    let mut at = 0;
    let name_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let skip_to = |from: usize, open: char, close: char| {
        let mut depth = 0;
        for (i, c) in chars.iter().enumerate().skip(from) {
            if *c == open {
                depth += 1;
            } else if *c == close {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
        }
        panic!("unclosed {open} in {expr}")
    };
    let string_at = |from: usize| -> (String, usize) {
        let quote = chars[from];
        let mut value = String::new();
        let mut i = from + 1;
        while chars[i] != quote {
            if chars[i] == '\\' {
                i += 1;
            }
            value.push(chars[i]);
            i += 1;
        }
        (value, i + 1)
    };
    while at < chars.len() {
        let c = chars[at];
        if c.is_whitespace() {
            at += 1;
            continue;
        }
        if c == '{' {
            let end = skip_to(at, '{', '}');
            let mut matchers = Vec::new();
            let mut i = at + 1;
            while i < end - 1 {
                if chars[i].is_whitespace() || chars[i] == ',' {
                    i += 1;
                    continue;
                }
                let start = i;
                while name_char(chars[i]) {
                    i += 1;
                }
                let label: String = chars[start..i].iter().collect();
                while chars[i].is_whitespace() {
                    i += 1;
                }
                let op_start = i;
                while "=!~".contains(chars[i]) {
                    i += 1;
                }
                let op: String = chars[op_start..i].iter().collect();
                while chars[i].is_whitespace() {
                    i += 1;
                }
                let (value, next) = string_at(i);
                matchers.push((label, op, value));
                i = next;
            }
            assert!(last_was_name, "a selector without a name in {expr}");
            found.last_mut().unwrap().matchers = matchers;
            last_was_name = false;
            at = end;
            continue;
        }
        last_was_name = false;
        if c == '"' || c == '\'' || c == '`' {
            at = string_at(at).1;
        } else if c == '[' {
            at = skip_to(at, '[', ']');
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(at + 1).is_some_and(char::is_ascii_digit))
        {
            while at < chars.len() && (name_char(chars[at]) || chars[at] == '.') {
                at += 1;
            }
        } else if name_char(c) {
            let start = at;
            while at < chars.len() && name_char(chars[at]) {
                at += 1;
            }
            let word: String = chars[start..at].iter().collect();
            let mut next = at;
            while next < chars.len() && chars[next].is_whitespace() {
                next += 1;
            }
            let before_parenthesis = chars.get(next) == Some(&'(');
            if GROUPING.split_whitespace().any(|g| g == word) && before_parenthesis {
                at = skip_to(next, '(', ')');
            } else if !before_parenthesis
                && !KEYWORDS
                    .split_whitespace()
                    .any(|k| k.eq_ignore_ascii_case(&word))
            {
                found.push(Selector {
                    name: word,
                    matchers: Vec::new(),
                });
                last_was_name = true;
            }
        } else {
            at += 1;
        }
    }
    found
}

#[test]
fn selectors_are_read_out_of_promql() {
    let expr = r#"sum by (instance, le) (rate(a_total{x="1", y=~"p|q"}[5m])) / on (job) b:c offset 5m > 0.5
        and absent(up{job="l",route="/v1/{name}"} == 1) or count(count by (v) (d)) > 1"#;
    let matcher = |l: &str, op: &str, v: &str| (l.to_owned(), op.to_owned(), v.to_owned());
    let selector = |name: &str, matchers| Selector {
        name: name.into(),
        matchers,
    };
    assert_eq!(
        selectors(expr),
        [
            selector(
                "a_total",
                vec![matcher("x", "=", "1"), matcher("y", "=~", "p|q")]
            ),
            selector("b:c", vec![]),
            selector(
                "up",
                vec![
                    matcher("job", "=", "l"),
                    matcher("route", "=", "/v1/{name}")
                ]
            ),
            selector("d", vec![]),
        ]
    );
}
