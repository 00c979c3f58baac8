//! Who may connect and as whom: protected mode, the users configured at start-up
//! (`user` statements or `aclfile`), and `rename-command`.
//!
//! Protected mode is Redis's safety net for a server reachable from the network with
//! no password: while `protected-mode` is on and the `default` user has no password
//! (`nopass`), a client connecting from anywhere but loopback gets the `-DENIED`
//! explanation and is disconnected before it can send a command. With the default
//! `bind 127.0.0.1 -::1` no such client can even connect.

use std::net::{IpAddr, SocketAddr};

use anyhow::{Context, bail};
use strata_commands::acl::user::{has_spaces, merge_selector_args};

use crate::state::ServerState;

/// Redis's protected-mode refusal, sent before closing the connection.
pub const PROTECTED_MODE_DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// Whether an address is the local machine's loopback (IPv4-mapped loopback too).
pub fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// Whether protected mode refuses a client from `peer`.
pub fn refuses(protected_mode: bool, default_nopass: bool, peer: SocketAddr) -> bool {
    protected_mode && default_nopass && !is_loopback(peer.ip())
}

/// Whether the running server refuses a client from `peer` (protected mode).
pub fn protected_refusal(state: &ServerState, peer: SocketAddr) -> bool {
    refuses(
        state.config.read().protected_mode,
        state.acl.default_nopass(),
        peer,
    )
}

/// Loads the users of the `user` statements or of `aclfile` (not both, as in Redis);
/// an error stops start-up.
pub fn load_users(state: &ServerState) -> anyhow::Result<()> {
    let (file, users) = {
        let cfg = state.config.read();
        (cfg.security.aclfile.clone(), cfg.security.users.clone())
    };
    state.acl.set_file(file.clone());
    if file.is_some() && !users.is_empty() {
        bail!(
            "Configuring strata with users defined in the configuration and at the same time \
             an ACL file path is invalid. This setup is very likely to lead to configuration \
             errors and security holes, please define either an ACL file or declare users \
             directly in your configuration, but not both."
        );
    }
    for definition in &users {
        let Some((name, rules)) = definition.split_first() else {
            continue;
        };
        if has_spaces(name) {
            bail!("Spaces not allowed in ACL usernames");
        }
        let shown = String::from_utf8_lossy(name);
        let rules: Vec<&[u8]> = rules.iter().map(Vec::as_slice).collect();
        let mut rules = merge_selector_args(&rules).map_err(|i| {
            anyhow::anyhow!(
                "Unmatched parenthesis in acl selector starting at '{}' for the user named '{shown}'",
                String::from_utf8_lossy(rules[i])
            )
        })?;
        // The configured default user starts over, as Redis resets it.
        if name.as_slice() == b"default" {
            rules.insert(0, b"reset".to_vec());
        }
        state
            .acl
            .set_user(&state.registry, name, &rules)
            .map_err(|(rule, e)| {
                anyhow::anyhow!(
                    "Error loading ACL rule '{}' for the user named '{shown}': {e}",
                    String::from_utf8_lossy(&rule)
                )
            })?;
        if state.acl.user(name).is_some_and(|u| !u.enabled) {
            tracing::info!(
                "The user '{shown}' is disabled (there is no 'on' modifier in the user \
                 description). Make sure this is not a configuration error."
            );
        }
    }
    if let Some(path) = file {
        let users = strata_commands::acl::file::load(
            &path,
            &state.registry,
            state.acl.allchannels_default(),
        )
        .map_err(|e| anyhow::anyhow!("Aborting startup because of ACL errors: {e}"))
        .with_context(|| format!("aclfile {}", path.display()))?;
        state.acl.replace_all(users);
    }
    Ok(())
}

/// Checks the `rename-command` statements against the command table, as Redis does
/// when it reads them; the reason of the first bad one.
pub fn check_renames(renames: &[(String, String)]) -> Result<(), String> {
    let mut names: Vec<String> = strata_commands::families::ALL
        .iter()
        .flat_map(|family| family.iter().map(|c| c.name.to_owned()))
        .collect();
    for (from, to) in renames {
        let Some(at) = names.iter().position(|n| n.eq_ignore_ascii_case(from)) else {
            return Err("No such command in rename-command".to_owned());
        };
        names.remove(at);
        if !to.is_empty() {
            if names.iter().any(|n| n.eq_ignore_ascii_case(to)) {
                return Err("Target command name already exists".to_owned());
            }
            names.push(to.to_ascii_lowercase());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_mode_refuses_only_remote_clients_without_a_password() {
        let remote: SocketAddr = "192.0.2.7:5000".parse().expect("address");
        let local: SocketAddr = "127.0.0.1:5000".parse().expect("address");
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:5000".parse().expect("address");
        let local6: SocketAddr = "[::1]:5000".parse().expect("address");
        assert!(refuses(true, true, remote));
        assert!(!refuses(true, true, local));
        assert!(!refuses(true, true, mapped));
        assert!(!refuses(true, true, local6));
        assert!(!refuses(false, true, remote));
        assert!(!refuses(true, false, remote));
    }

    #[test]
    fn renames_are_checked_like_redis() {
        let r = |pairs: &[(&str, &str)]| {
            let pairs: Vec<(String, String)> = pairs
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect();
            check_renames(&pairs)
        };
        assert_eq!(r(&[("flushall", ""), ("CONFIG", "cfg")]), Ok(()));
        assert_eq!(
            r(&[("nosuch", "x")]),
            Err("No such command in rename-command".to_owned())
        );
        assert_eq!(
            r(&[("get", "set")]),
            Err("Target command name already exists".to_owned())
        );
        assert_eq!(
            r(&[("flushall", ""), ("flushall", "x")]),
            Err("No such command in rename-command".to_owned())
        );
    }
}
