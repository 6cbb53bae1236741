//! Where and how the server listens, and the checks made before it does.
//!
//! The default is a free port on 127.0.0.1 with no token. Off loopback, a bearer token is
//! required, and TLS too unless `insecure` says otherwise: [`ServerConfig::validate`] refuses
//! any other combination with one line that names the flag to add.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

/// The environment variable a token may come from (`--rest-token-file` is the other way).
pub const TOKEN_ENV: &str = "SPATE_REST_TOKEN";

/// The longest token file read, in bytes: a token is a line, not a document.
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// How the REST server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// The address to bind (`--rest-bind`); 127.0.0.1 by default.
    pub bind: IpAddr,
    /// The port (`--rest-port`); 0 picks a free one.
    pub port: u16,
    /// The bearer token every request must carry (`--rest-token-file`, or [`TOKEN_ENV`]).
    pub token: Option<String>,
    /// A PEM certificate chain and private key (`--rest-tls-cert`, `--rest-tls-key`).
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Allows a non-loopback bind without TLS (`--insecure`); a token is still required.
    pub insecure: bool,
    /// The first part of every Prometheus family name: `spate`, or `flink` so that dashboards
    /// made for Flink's Prometheus reporter work unchanged.
    pub metrics_prefix: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            token: None,
            tls: None,
            insecure: false,
            metrics_prefix: "spate".to_string(),
        }
    }
}

impl ServerConfig {
    /// Checks the combination of settings; the error is one line that says what to add.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(token) = &self.token {
            validate_token(token)?;
        }
        if !valid_prefix(&self.metrics_prefix) {
            return Err(format!(
                "metrics prefix {:?} must be a Prometheus name ([a-zA-Z_][a-zA-Z0-9_]*)",
                self.metrics_prefix
            ));
        }
        if !self.bind.is_loopback() {
            if self.token.is_none() {
                return Err(format!(
                    "--rest-bind {} needs a token (--rest-token-file or {TOKEN_ENV}): off \
                     loopback anyone who reaches the port could cancel the job",
                    self.bind
                ));
            }
            if self.tls.is_none() && !self.insecure {
                return Err(format!(
                    "--rest-bind {} needs TLS (--rest-tls-cert and --rest-tls-key) or \
                     --insecure: the token would cross the network in clear text",
                    self.bind
                ));
            }
        }
        Ok(())
    }
}

fn valid_prefix(p: &str) -> bool {
    let mut bytes = p.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A token is printable ASCII without spaces, 16 to 512 bytes long.
fn validate_token(token: &str) -> Result<(), String> {
    if token.len() < 16 {
        return Err(format!(
            "the REST token has {} characters; use at least 16 (e.g. `openssl rand -hex 32`)",
            token.len()
        ));
    }
    if token.len() > 512 {
        return Err("the REST token is longer than 512 characters".to_string());
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(
            "the REST token may only contain printable ASCII characters, no spaces".to_string(),
        );
    }
    Ok(())
}

/// Reads a token from a file: its first line, surrounding whitespace removed.
pub fn token_from_file(path: &Path) -> Result<String, String> {
    let shown = path.display();
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read token file {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("token file {shown} is not a regular file"));
    }
    if meta.len() > MAX_TOKEN_FILE_BYTES {
        return Err(format!(
            "token file {shown} is larger than {MAX_TOKEN_FILE_BYTES} bytes"
        ));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read token file {shown}: {e}"))?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.is_empty() {
        return Err(format!("token file {shown} is empty"));
    }
    validate_token(&token).map_err(|e| format!("token file {shown}: {e}"))?;
    Ok(token)
}

/// Reads a token from the environment variable `name` (usually [`TOKEN_ENV`]): `None` when
/// it is unset, an error when it is set but empty or not a valid token.
pub fn token_from_env(name: &str) -> Result<Option<String>, String> {
    match std::env::var(name) {
        Ok(v) => {
            let token = v.trim().to_string();
            if token.is_empty() {
                return Err(format!("{name} is set but empty"));
            }
            validate_token(&token).map_err(|e| format!("{name}: {e}"))?;
            Ok(Some(token))
        }
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!("{name} is not valid UTF-8")),
    }
}

/// The token as the CLI takes it: from `file` when given (`--rest-token-file`), else from
/// [`TOKEN_ENV`], else none.
pub fn token_from(file: Option<&Path>) -> Result<Option<String>, String> {
    match file {
        Some(path) => token_from_file(path).map(Some),
        None => token_from_env(TOKEN_ENV),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "0123456789abcdef0123";

    #[test]
    fn loopback_needs_nothing_and_elsewhere_needs_token_and_tls_or_insecure() {
        let mut c = ServerConfig::default();
        assert_eq!(c.validate(), Ok(()));
        c.bind = "::1".parse().unwrap();
        assert_eq!(c.validate(), Ok(()));
        c.bind = "0.0.0.0".parse().unwrap();
        let e = c.validate().unwrap_err();
        assert!(e.starts_with("--rest-bind 0.0.0.0 needs a token"), "{e}");
        assert!(!e.contains('\n'));
        c.token = Some(TOKEN.into());
        let e = c.validate().unwrap_err();
        assert!(e.contains("needs TLS") && e.contains("--insecure"), "{e}");
        c.insecure = true;
        assert_eq!(c.validate(), Ok(()));
        c.insecure = false;
        c.tls = Some(("c.pem".into(), "k.pem".into()));
        assert_eq!(c.validate(), Ok(()));
        // insecure alone is not enough: the token is what keeps strangers out.
        let c = ServerConfig {
            bind: "10.1.2.3".parse().unwrap(),
            insecure: true,
            ..ServerConfig::default()
        };
        assert!(c.validate().unwrap_err().contains("needs a token"));
    }

    #[test]
    fn bad_tokens_and_prefixes_are_refused() {
        for bad in ["short", "has space in the middle!", &"x".repeat(600)] {
            let c = ServerConfig {
                token: Some(bad.to_string()),
                ..ServerConfig::default()
            };
            assert!(c.validate().is_err(), "{bad:?}");
        }
        for bad in ["", "1abc", "a-b", "a.b"] {
            let c = ServerConfig {
                metrics_prefix: bad.to_string(),
                ..ServerConfig::default()
            };
            assert!(c.validate().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tokens_come_from_files_and_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("token");
        std::fs::write(&p, format!("  {TOKEN}\n# comment\n")).unwrap();
        assert_eq!(token_from_file(&p).unwrap(), TOKEN);
        std::fs::write(&p, "\n").unwrap();
        assert!(token_from_file(&p).unwrap_err().contains("empty"));
        std::fs::write(&p, "x".repeat(5000)).unwrap();
        assert!(token_from_file(&p).unwrap_err().contains("larger"));
        assert!(token_from_file(dir.path()).is_err());
        assert!(token_from_file(&dir.path().join("missing")).is_err());
        std::fs::write(&p, TOKEN).unwrap();
        assert_eq!(token_from(Some(&p)), Ok(Some(TOKEN.to_string())));

        let var = "SPATE_WEB_TEST_TOKEN_ENV";
        assert_eq!(token_from_env(var), Ok(None));
        std::env::set_var(var, TOKEN);
        assert_eq!(token_from_env(var), Ok(Some(TOKEN.to_string())));
        std::env::set_var(var, "");
        assert!(token_from_env(var).is_err());
        std::env::remove_var(var);
    }
}
