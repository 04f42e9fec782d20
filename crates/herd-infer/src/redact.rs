//! Secrets out of every text herd keeps or prints: an OpenAI-compatible server may echo the request's
//! `Authorization` header in an error body (LiteLLM-style gateways: "Received API Key = Bearer sk-…"),
//! and an endpoint URL may carry credentials (`http://user:pass@host`). [`redact_secrets`] is the one
//! function that removes them; the openai backend applies it to its errors, its recorded options and
//! its device string, and herd-cli to the notes and status it writes into a run's manifest.

/// What replaces a secret.
pub const REDACTED: &str = "***";

/// Shortest configured secret replaced verbatim: a shorter one would be found inside ordinary words
/// (the patterns below still catch the usual token shapes).
const MIN_SECRET_LEN: usize = 4;

/// Shortest run of token characters after `sk-` or `hf_` taken for a token: "sk-learn" stays.
const MIN_TOKEN_TAIL: usize = 16;

/// Shortest token after `Bearer` taken for a credential: "bearer of bad news" stays.
const MIN_BEARER_TOKEN: usize = 8;

/// `text` with every secret removed, in linear time:
/// - each of `secrets` (the configured API key) wherever it appears, as `***`;
/// - `Bearer <token>` (any case, a token of 8 or more characters) as `Bearer ***`;
/// - tokens that look like API keys, `sk-…` and `hf_…` (16 or more token characters after the prefix), as `sk-***`, `hf_***`;
/// - the userinfo of a URL, `scheme://user:pass@host` as `scheme://***@host`.
pub fn redact_secrets(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_owned();
    for secret in secrets.iter().map(|s| s.trim()).filter(|s| s.len() >= MIN_SECRET_LEN) {
        if out.contains(secret) {
            out = out.replace(secret, REDACTED);
        }
    }
    let out = redact_bearer_and_keys(&out);
    redact_userinfo(&out)
}

/// Characters a token is made of (base64, base64url, JWT dots).
fn token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'+' | b'/' | b'=')
}

fn token_end(bytes: &[u8], from: usize) -> usize {
    let mut end = from;
    while end < bytes.len() && token_byte(bytes[end]) {
        end += 1;
    }
    end
}

fn redact_bearer_and_keys(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    // Bytes before `copied` are in `out`; every cut is at an ASCII byte, so at a char boundary.
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        let word_start = i == 0 || !token_byte(bytes[i - 1]);
        if word_start && bytes.len() - i > 6 && bytes[i..i + 6].eq_ignore_ascii_case(b"bearer") {
            // `Bearer`, spaces (or `=`/`:`), then the token.
            let mut j = i + 6;
            while j < bytes.len() && matches!(bytes[j], b' ' | b'\t' | b'=' | b':') {
                j += 1;
            }
            let end = token_end(bytes, j);
            if j > i + 6 && end - j >= MIN_BEARER_TOKEN && !bytes[j..end].starts_with(REDACTED.as_bytes()) {
                out.push_str(&text[copied..j]);
                out.push_str(REDACTED);
                copied = end;
                i = end;
                continue;
            }
        }
        if word_start && bytes.len() - i > 3 && (bytes[i..].starts_with(b"sk-") || bytes[i..].starts_with(b"hf_")) {
            let end = token_end(bytes, i + 3);
            if end - (i + 3) >= MIN_TOKEN_TAIL {
                out.push_str(&text[copied..i + 3]);
                out.push_str(REDACTED);
                copied = end;
                i = end;
                continue;
            }
        }
        i += 1;
    }
    out.push_str(&text[copied..]);
    out
}

fn redact_userinfo(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut search = 0;
    while let Some(at) = text[search..].find("://") {
        let authority_start = search + at + 3;
        // The authority runs to the first '/', '?', '#', whitespace, quote or bracket.
        let mut end = authority_start;
        while end < bytes.len()
            && !matches!(bytes[end], b'/' | b'?' | b'#' | b'"' | b'\'' | b'<' | b'>' | b'`' | b'\\')
            && !bytes[end].is_ascii_whitespace()
        {
            end += 1;
        }
        if let Some(userinfo_end) = text[authority_start..end].rfind('@') {
            let userinfo = &text[authority_start..authority_start + userinfo_end];
            if userinfo != REDACTED {
                out.push_str(&text[copied..authority_start]);
                out.push_str(REDACTED);
                copied = authority_start + userinfo_end;
            }
        }
        search = end.max(authority_start);
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_bearer_tokens_and_url_credentials_are_removed() {
        let key = "my-secret-key-42";
        let text = format!(
            "HTTP 401: Received API Key = Bearer {key}, Key Hash (Token)=abc; also sk-proj-ABCDEFGHIJKLMNOPQRSTUV and hf_abcdefghijklmnopqrstu at http://alice:pa55@127.0.0.1:8000/v1 and https://bob@host"
        );
        let r = redact_secrets(&text, &[key]);
        assert!(!r.contains(key) && !r.contains("ABCDEFGHIJ") && !r.contains("abcdefghij"), "{r}");
        assert!(!r.contains("alice") && !r.contains("pa55") && !r.contains("bob@"), "{r}");
        assert!(r.contains("http://***@127.0.0.1:8000/v1") && r.contains("https://***@host"), "{r}");
        assert!(r.contains("Received API Key = Bearer ***,"), "{r}");
        // An unknown key after Bearer goes too, and the result is stable.
        let r = redact_secrets("authorization: bearer eyJhbGciOi.J9x\"}", &[]);
        assert_eq!(r, "authorization: bearer ***\"}");
        assert_eq!(redact_secrets(&r, &[]), r);
        // Ordinary text is left alone.
        for plain in ["sk-learn", "http://127.0.0.1:8000/v1: HTTP 500: boom", "bearer of bad news", "Ünïcode @ ://"] {
            assert_eq!(redact_secrets(plain, &[]), plain);
        }
    }

    #[test]
    fn a_long_text_is_redacted_in_linear_time() {
        let text = "Bearer sk-".repeat(200_000) + &"://a@".repeat(200_000);
        let started = std::time::Instant::now();
        let r = redact_secrets(&text, &["sk-"]);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        assert!(r.len() <= text.len() * 2);
    }
}
