//! Standard Webhooks signatures: `v1,<base64 HMAC-SHA256(secret, "{id}.{timestamp}.{body}")>`,
//! with the secret configured as `whsec_<base64>`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl Secret {
    pub fn parse(configured: &str) -> Result<Secret, String> {
        let encoded = configured
            .strip_prefix("whsec_")
            .ok_or("--webhook-secret must look like whsec_<base64>")?;
        let key = STANDARD
            .decode(encoded)
            .map_err(|_| "--webhook-secret: the part after whsec_ is not base64".to_string())?;
        if key.len() < 16 {
            return Err("--webhook-secret must carry at least 16 bytes of key".into());
        }
        Ok(Secret(key))
    }

    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_standard_webhooks_reference_vector() {
        let secret = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let signature = secret.sign(
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn bad_secrets_are_refused() {
        assert!(Secret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_err());
        assert!(Secret::parse("whsec_***").is_err());
        assert!(Secret::parse("whsec_c2hvcnQ=").is_err());
    }
}
