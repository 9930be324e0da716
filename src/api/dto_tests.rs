use super::*;

fn host_of(url: &str) -> Result<String, String> {
    validate_url(url).map_err(|e| e.message)
}

#[test]
fn a_notify_url_host_is_at_most_what_dns_can_carry() {
    let label = "a".repeat(MAX_LABEL_CHARS);
    // 4 labels of 63 and 3 dots: 255 characters; one label of 61 instead makes 253.
    let longest = format!("{label}.{label}.{label}.{}", "b".repeat(61));
    assert_eq!(longest.len(), MAX_HOST_CHARS);
    for ok in [
        format!("http://{longest}/hook"),
        format!("https://{longest}./hook"),
        format!("http://{label}.example/"),
        "http://[2001:db8::1]:8080/x".to_owned(),
        "http://192.0.2.1/x".to_owned(),
    ] {
        assert!(host_of(&ok).is_ok(), "{ok}: {:?}", host_of(&ok));
    }
    for long in [
        format!("http://{longest}b/hook"),
        format!("http://a{label}.example/"),
        // Counted after IDNA: a label of 60 `é` is 66 characters as `xn--…`.
        format!("http://{}.example/", "é".repeat(60)),
    ] {
        let refused = host_of(&long).expect_err(&long);
        assert!(refused.contains("longer than a DNS name"), "{refused}");
    }
}
