//! SHA-256 as lowercase hex, the one spelling of a digest herd records (experiment files, prompt
//! hashes, run inputs), of bytes or of a value's canonical JSON.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

/// The SHA-256 of `bytes`, as 64 lowercase hex digits.
#[must_use]
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// JSON with every object's keys sorted, so that equal values hash equally whatever the field order
/// of the type or file they came from.
fn canonical(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            let sorted: BTreeMap<&String, serde_json::Value> = map.iter().map(|(k, v)| (k, canonical(v))).collect();
            serde_json::Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        serde_json::Value::Array(items) => serde_json::Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// The SHA-256 of a value's canonical JSON: a parameter set or a parsed experiment hashes by what it
/// says, so comments, formatting and key order in the file it came from change nothing.
pub fn json_sha256(value: &impl serde::Serialize) -> String {
    let value = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
    sha256_hex(canonical(&value).to_string().as_bytes())
}

#[cfg(test)]
mod tests {
    #[test]
    fn matches_the_published_digest_of_abc() {
        // FIPS 180-2, appendix B.1.
        assert_eq!(super::sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
