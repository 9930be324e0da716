use std::io::Write;

use super::*;

fn digest_of(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

fn hex(digest: &[u8; 32]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The error of loading `text` from a file, with the file's path replaced by `F`.
fn load_error(text: &str, reserved: &[Reserved]) -> String {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(text.as_bytes()).unwrap();
    let error = load(file.path(), reserved).unwrap_err();
    error.replace(&file.path().display().to_string(), "F")
}

#[test]
fn a_file_lists_tokens_with_their_names_and_scopes() {
    let text = format!(
        r#"
# CI may lock its own names, at low priorities.
[[token]]
name = "ci"
secret = "ci-secret"
prefixes = ["ci/", "builds"]
max_priority = 10

[[token]]
sha256 = "{}"
"#,
        hex(&digest_of("ops-secret"))
    );
    let tokens = parse(&text, &[]).unwrap();
    assert_eq!(tokens.len(), 2);
    let ci = &tokens[0];
    assert_eq!(ci.digest, digest_of("ci-secret"));
    assert_eq!(ci.name.as_deref(), Some("ci"));
    assert_eq!(ci.scope.max_priority, Some(10));
    let prefixes = ci.scope.prefixes.as_ref().unwrap();
    assert!(prefixes.covers("ci/x") && prefixes.covers("builds") && !prefixes.covers("ci2"));
    assert_eq!(prefixes.to_string(), "ci/, builds");
    let ops = &tokens[1];
    assert_eq!(ops.digest, digest_of("ops-secret"));
    assert!(ops.name.is_none() && ops.scope.is_unlimited());
    // Upper-case hex is the same digest.
    let upper = format!(
        "[[token]]\nsha256 = \"{}\"\n",
        hex(&digest_of("x")).to_uppercase()
    );
    assert_eq!(parse(&upper, &[]).unwrap()[0].digest, digest_of("x"));
    assert!(
        parse("", &[]).unwrap().is_empty(),
        "an empty file lists no token"
    );
}

#[test]
fn every_error_names_the_file_and_the_line() {
    let cases: &[(&str, &str)] = &[
        (
            "[[token]]\nsecret = \"a\"\nsecrt = \"b\"\n",
            "F, line 3: unknown field `secrt`",
        ),
        ("[[token]]\nsecret = \"a\"\n[[token]\n", "F, line 3:"),
        ("[tokens]\n", "F, line 1: unknown field `tokens`"),
        (
            "\n[[token]]\nname = \"x\"\n",
            "F, line 2: a token needs secret or sha256",
        ),
        (
            "[[token]]\nsecret = \"a\"\nsha256 = \"00\"\n",
            "F, line 1: give secret or sha256, not both",
        ),
        (
            "[[token]]\n\nsha256 = \"abc\"\n",
            "F, line 3: sha256 must be 64 hex digits",
        ),
        (
            "[[token]]\nsecret = \" a\"\n",
            "F, line 2: secret starts or ends with white space",
        ),
        ("[[token]]\nsecret = \"\"\n", "F, line 2: secret is empty"),
        (
            "[[token]]\nsecret = \"é\"\n",
            "F, line 2: secret must be printable ASCII",
        ),
        (
            "[[token]]\nsecret = \"a\"\nprefixes = [\n  \"ok/\",\n  \"bad name\",\n]\n",
            "F, line 5: prefix \"bad name\"",
        ),
        (
            "[[token]]\nsecret = \"a\"\nprefixes = []\n",
            "F, line 3: prefixes is empty",
        ),
        (
            "[[token]]\nsecret = \"a\"\nprefixes = [\"\"]\n",
            "F, line 3: prefix \"\" is empty",
        ),
        (
            "[[token]]\nsecret = \"a\"\nmax_priority = 2147483647\n",
            "F, line 3: max_priority 2147483647 is not between 0 and 2147483646",
        ),
        (
            "[[token]]\nsecret = \"a\"\nmax_priority = -1\n",
            "F, line 3: max_priority -1",
        ),
        (
            "[[token]]\nsecret = \"a\"\nmax_priority = \"5\"\n",
            "F, line 3:",
        ),
        (
            "[[token]]\nsecret = \"a\"\nname = \"a b\"\n",
            "F, line 3: name \"a b\" must be",
        ),
        (
            "[[token]]\nsecret = \"a\"\n[[token]]\nsecret = \"a\"\n",
            "F, line 3: this token is listed twice",
        ),
        (
            "[[token]]\nsecret = \"a\"\nname = \"n\"\n[[token]]\nsecret = \"b\"\nname = \"n\"\n",
            "F, line 4: another token has this name",
        ),
    ];
    for (text, expected) in cases {
        let error = load_error(text, &[]);
        assert!(
            error.starts_with(&format!("token file {expected}")),
            "{text:?}: {error}"
        );
        assert!(!error.contains('\n'), "one line: {error:?}");
    }
}

#[test]
fn the_admin_token_and_the_flags_tokens_cannot_be_in_the_file() {
    let reserved = [
        Reserved {
            digest: digest_of("root"),
            what: "the admin token",
        },
        Reserved {
            digest: digest_of("flag"),
            what: "also given with --api-token",
        },
    ];
    let error = load_error("[[token]]\nsecret = \"root\"\n", &reserved);
    assert_eq!(error, "token file F, line 1: this token is the admin token");
    let by_digest = format!("\n[[token]]\nsha256 = \"{}\"\n", hex(&digest_of("flag")));
    let error = load_error(&by_digest, &reserved);
    assert_eq!(
        error,
        "token file F, line 2: this token is also given with --api-token"
    );
    assert!(parse("[[token]]\nsecret = \"other\"\n", &reserved).is_ok());
}

#[test]
fn a_missing_file_says_so() {
    let error = load(Path::new("/nonexistent/tokens.toml"), &[]).unwrap_err();
    assert!(
        error.starts_with("cannot read the token file /nonexistent/tokens.toml"),
        "{error}"
    );
}
