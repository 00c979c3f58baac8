//! The security directives: ACL (`aclfile`, `acllog-max-len`, `acl-pubsub-default`),
//! TLS (`tls-port`, `tls-cert-file`, `tls-key-file`, `tls-ca-cert-file`,
//! `tls-auth-clients`, `tls-protocols`), and the two file-only statements Redis reads
//! outside its directive table: `rename-command old new` and `user <name> <rules...>`.
//!
//! The TLS directives are immutable in strata (Redis lets CONFIG SET change them and
//! reconfigures its listener); changing them means a restart.

use std::fmt;
use std::path::PathBuf;

use super::Config;
use super::directives::{Directive, Kind, Mutability};

config_enum! {
    /// Whether TLS clients must present a certificate (`tls-auth-clients`).
    TlsAuthClients {
        /// No client certificate is asked for.
        No = "no",
        /// A certificate signed by `tls-ca-cert-file` is required.
        Yes = "yes",
        /// A certificate is asked for, and checked when given.
        Optional = "optional",
    }
}

config_enum! {
    /// Which channels new ACL users may use (`acl-pubsub-default`).
    AclPubsubDefault {
        /// Every channel.
        Allchannels = "allchannels",
        /// None until granted.
        Resetchannels = "resetchannels",
    }
}

/// ACL settings and the file-only statements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Security {
    /// `aclfile`: none.
    pub aclfile: Option<PathBuf>,
    /// `acllog-max-len`: 128.
    pub acllog_max_len: u64,
    /// `acl-pubsub-default`: resetchannels, as in Redis 7.0.
    pub acl_pubsub_default: AclPubsubDefault,
    /// `rename-command` statements, in order: (old name, new name or "" to disable).
    pub renames: Vec<(String, String)>,
    /// `user` statements: the name, then the rules.
    pub users: Vec<Vec<Vec<u8>>>,
}

impl Default for Security {
    fn default() -> Security {
        Security {
            aclfile: None,
            acllog_max_len: strata_commands::acl::DEFAULT_LOG_MAX_LEN as u64,
            acl_pubsub_default: AclPubsubDefault::Resetchannels,
            renames: Vec::new(),
            users: Vec::new(),
        }
    }
}

/// TLS settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tls {
    /// `tls-port`: 0, no TLS listener.
    pub port: u16,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub ca_cert_file: Option<PathBuf>,
    /// `tls-auth-clients`: yes.
    pub auth_clients: TlsAuthClients,
    /// `tls-protocols`: empty means TLSv1.2 and TLSv1.3.
    pub protocols: String,
}

impl Default for Tls {
    fn default() -> Tls {
        Tls {
            port: 0,
            cert_file: None,
            key_file: None,
            ca_cert_file: None,
            auth_clients: TlsAuthClients::Yes,
            protocols: String::new(),
        }
    }
}

/// The protocol versions `tls-protocols` names; strata's TLS library speaks only 1.2
/// and 1.3, so a list of older versions alone is refused.
pub fn parse_protocols(text: &str) -> Result<(bool, bool), String> {
    const INVALID: &str = "Invalid tls-protocols specified. Use a combination of 'TLSv1', \
                           'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'.";
    if text.trim().is_empty() {
        return Ok((true, true));
    }
    let (mut v12, mut v13) = (false, false);
    for word in text.split_whitespace() {
        match word.to_ascii_lowercase().as_str() {
            "tlsv1" | "tlsv1.1" => {}
            "tlsv1.2" => v12 = true,
            "tlsv1.3" => v13 = true,
            _ => return Err(INVALID.to_owned()),
        }
    }
    if !v12 && !v13 {
        return Err("tls-protocols: only TLSv1.2 and TLSv1.3 are supported".to_owned());
    }
    Ok((v12, v13))
}

fn path(value: String) -> Option<PathBuf> {
    (!value.is_empty()).then(|| PathBuf::from(value))
}

fn show(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

use Mutability::{Immutable, Mutable};

/// The security directives' entries, appended to the registry's.
pub(crate) static DIRECTIVES: &[Directive] = &[
    Directive {
        name: "aclfile",
        alias: None,
        mutability: Immutable,
        summary: "The ACL file users are loaded from at start-up and by ACL LOAD, and saved \
                  to by ACL SAVE; empty for none.",
        kind: Kind::Str {
            get: |c| show(&c.security.aclfile),
            set: |c, v| {
                c.security.aclfile = path(v);
                Ok(())
            },
        },
    },
    Directive {
        name: "acllog-max-len",
        alias: None,
        mutability: Mutable,
        summary: "The most entries ACL LOG keeps.",
        kind: Kind::Int {
            min: 0,
            max: i64::MAX,
            get: |c| i64::try_from(c.security.acllog_max_len).unwrap_or(i64::MAX),
            set: |c, v| {
                c.security.acllog_max_len = v.unsigned_abs();
                Ok(())
            },
        },
    },
    Directive {
        name: "acl-pubsub-default",
        alias: None,
        mutability: Mutable,
        summary: "Whether new ACL users may use every Pub/Sub channel or none until granted.",
        kind: Kind::Enum {
            names: AclPubsubDefault::NAMES,
            get: |c| c.security.acl_pubsub_default.name(),
            set: |c, v| {
                AclPubsubDefault::from_name(v)
                    .map(|p| c.security.acl_pubsub_default = p)
                    .is_some()
            },
        },
    },
    Directive {
        name: "tls-port",
        alias: None,
        mutability: Immutable,
        summary: "The TCP port to accept TLS clients on; 0 disables TLS.",
        kind: Kind::Int {
            min: 0,
            max: 65535,
            get: |c| i64::from(c.tls.port),
            set: |c, v| {
                c.tls.port = u16::try_from(v).map_err(|_| "argument is out of range")?;
                Ok(())
            },
        },
    },
    Directive {
        name: "tls-cert-file",
        alias: None,
        mutability: Immutable,
        summary: "The server's certificate chain (PEM).",
        kind: Kind::Str {
            get: |c| show(&c.tls.cert_file),
            set: |c, v| {
                c.tls.cert_file = path(v);
                Ok(())
            },
        },
    },
    Directive {
        name: "tls-key-file",
        alias: None,
        mutability: Immutable,
        summary: "The server's private key (PEM).",
        kind: Kind::Str {
            get: |c| show(&c.tls.key_file),
            set: |c, v| {
                c.tls.key_file = path(v);
                Ok(())
            },
        },
    },
    Directive {
        name: "tls-ca-cert-file",
        alias: None,
        mutability: Immutable,
        summary: "The certificate authorities client certificates are checked against (PEM).",
        kind: Kind::Str {
            get: |c| show(&c.tls.ca_cert_file),
            set: |c, v| {
                c.tls.ca_cert_file = path(v);
                Ok(())
            },
        },
    },
    Directive {
        name: "tls-auth-clients",
        alias: None,
        mutability: Immutable,
        summary: "Whether TLS clients must present a certificate: yes, no, or optional \
                  (checked when given).",
        kind: Kind::Enum {
            names: TlsAuthClients::NAMES,
            get: |c| c.tls.auth_clients.name(),
            set: |c, v| {
                TlsAuthClients::from_name(v)
                    .map(|a| c.tls.auth_clients = a)
                    .is_some()
            },
        },
    },
    Directive {
        name: "tls-protocols",
        alias: None,
        mutability: Immutable,
        summary: "The TLS versions accepted, of TLSv1.2 and TLSv1.3; empty for both.",
        kind: Kind::Str {
            get: |c| c.tls.protocols.clone(),
            set: |c, v| {
                parse_protocols(&v)?;
                c.tls.protocols = v;
                Ok(())
            },
        },
    },
];

/// Reads a file-only statement (`rename-command`, `user`) into the configuration;
/// `None` if `name` is not one of them.
pub(crate) fn apply_statement(
    config: &mut Config,
    name: &[u8],
    args: &[&[u8]],
) -> Option<Result<(), String>> {
    if name.eq_ignore_ascii_case(b"rename-command") {
        let result = match args {
            [from, to] => {
                let from = String::from_utf8_lossy(from).into_owned();
                let to = String::from_utf8_lossy(to).into_owned();
                let mut renames = config.security.renames.clone();
                renames.push((from, to));
                crate::access::check_renames(&renames).map(|()| config.security.renames = renames)
            }
            _ => Err("wrong number of arguments".to_owned()),
        };
        return Some(result);
    }
    if name.eq_ignore_ascii_case(b"user") {
        let result = match args {
            [] => Err("wrong number of arguments".to_owned()),
            [user, ..] => {
                if config
                    .security
                    .users
                    .iter()
                    .any(|u| u.first().is_some_and(|n| n.as_slice() == *user))
                {
                    Err(strata_commands::acl::RuleError::Duplicate.to_string())
                } else {
                    config
                        .security
                        .users
                        .push(args.iter().map(|a| a.to_vec()).collect());
                    Ok(())
                }
            }
        };
        return Some(result);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_security_directives() {
        let names: Vec<&str> = DIRECTIVES.iter().map(|d| d.name).collect();
        assert_eq!(
            names,
            [
                "aclfile",
                "acllog-max-len",
                "acl-pubsub-default",
                "tls-port",
                "tls-cert-file",
                "tls-key-file",
                "tls-ca-cert-file",
                "tls-auth-clients",
                "tls-protocols",
            ]
        );
        let all = super::super::directives::all();
        assert!(names.iter().all(|n| all.iter().any(|d| d.name == *n)));
    }

    #[test]
    fn protocols() {
        assert_eq!(parse_protocols(""), Ok((true, true)));
        assert_eq!(parse_protocols("TLSv1.2"), Ok((true, false)));
        assert_eq!(parse_protocols("tlsv1.1 TLSv1.3"), Ok((false, true)));
        assert!(parse_protocols("TLSv1.1").is_err());
        assert!(parse_protocols("SSLv3").is_err());
    }

    #[test]
    fn statements() {
        let mut c = Config::default();
        let args: Vec<&[u8]> = vec![b"flushall", b""];
        assert_eq!(
            apply_statement(&mut c, b"RENAME-COMMAND", &args),
            Some(Ok(()))
        );
        assert_eq!(c.security.renames, [("flushall".to_owned(), String::new())]);
        let args: Vec<&[u8]> = vec![b"alice", b"on", b">pw"];
        assert_eq!(apply_statement(&mut c, b"user", &args), Some(Ok(())));
        assert!(apply_statement(&mut c, b"user", &args).is_some_and(|r| r.is_err()));
        assert!(apply_statement(&mut c, b"port", &args).is_none());
    }
}
