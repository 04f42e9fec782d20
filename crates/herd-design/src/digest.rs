//! SHA-256 as lowercase hex, the one spelling of a digest herd records (experiment files, prompt
//! hashes, run inputs).

use sha2::{Digest, Sha256};

/// The SHA-256 of `bytes`, as 64 lowercase hex digits.
#[must_use]
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    #[test]
    fn matches_the_published_digest_of_abc() {
        // FIPS 180-2, appendix B.1.
        assert_eq!(super::sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
