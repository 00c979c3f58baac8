//! Whether a user may run a command with given arguments.
//!
//! A selector allows a command when its bit is set (or `allcommands`, or the command
//! needs no authentication, or its first argument is one of those allowed), when every
//! key the command names matches one of its key patterns with the permissions the key
//! spec implies — reading for `access`, writing for `insert`, `update` and `delete`,
//! as Redis 7 derives them — and when every channel it publishes or subscribes to
//! matches one of its channel patterns (a PSUBSCRIBE pattern must be one of them
//! literally). A user may run the command if any selector allows it; otherwise the
//! denial reported is the most specific one, as Redis picks it.

use super::user::{Selector, User};
use crate::spec::{Flags, KeyFlags};
use crate::table::{Command, key_positions};

/// Why a command was denied; keys and channels carry the index of the argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    Command,
    Key(usize),
    Channel(usize),
}

impl Denied {
    /// Redis's order of relevance (`ACL_DENIED_CMD` < `KEY` < `CHANNEL`).
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (1, 0),
            Denied::Key(i) => (2, i),
            Denied::Channel(i) => (4, i),
        }
    }

    /// The error a denied command gets.
    pub fn error(self, cmd: &Command) -> String {
        match self {
            Denied::Command => format!(
                "NOPERM this user has no permissions to run the '{}' command",
                cmd.full_name()
            ),
            Denied::Key(_) => {
                "NOPERM this user has no permissions to access one of the keys used as arguments"
                    .to_string()
            }
            Denied::Channel(_) => {
                "NOPERM this user has no permissions to access one of the channels used as arguments"
                    .to_string()
            }
        }
    }

    /// What EXEC answers for a queued command the rules no longer allow.
    pub fn exec_error(self) -> String {
        let reason = match self {
            Denied::Command => "no permission to execute the command or subcommand",
            Denied::Key(_) => "no permission to touch the specified keys",
            Denied::Channel(_) => "no permission to access one of the channels used as arguments",
        };
        format!(
            "NOPERM ACLs rules changed between the moment the transaction was accumulated \
             and the EXEC call. This command is no longer allowed for the following reason: \
             {reason}"
        )
    }
}

/// Checks `argv` (the command's name first) against every selector of `user`.
pub fn check(user: &User, cmd: &Command, argv: &[&[u8]]) -> Result<(), Denied> {
    let mut keys: Option<Vec<(usize, KeyFlags)>> = None;
    let mut relevant = Denied::Command;
    for selector in &user.selectors {
        match check_selector(selector, cmd, argv, &mut keys) {
            Ok(()) => return Ok(()),
            Err(denied) => {
                if denied.rank() > relevant.rank() {
                    relevant = denied;
                }
            }
        }
    }
    Err(relevant)
}

fn check_selector(
    selector: &Selector,
    cmd: &Command,
    argv: &[&[u8]],
    keys: &mut Option<Vec<(usize, KeyFlags)>>,
) -> Result<(), Denied> {
    if !selector.allcommands
        && !cmd.flags.contains(Flags::NO_AUTH)
        && !selector.commands.get(cmd.id)
    {
        let at = if cmd.parent.is_some() { 2 } else { 1 };
        let allowed = argv.get(at).is_some_and(|arg| {
            selector
                .firstargs
                .get(&cmd.id)
                .is_some_and(|args| args.iter().any(|a| a.eq_ignore_ascii_case(arg)))
        });
        if !allowed {
            return Err(Denied::Command);
        }
    }
    if !selector.allkeys && has_keys(cmd) {
        let keys = keys.get_or_insert_with(|| key_refs(cmd, argv));
        for &(pos, flags) in keys.iter() {
            let Some(key) = argv.get(pos) else { continue };
            if !key_allowed(selector, key, flags) {
                return Err(Denied::Key(pos));
            }
        }
    }
    if !selector.allchannels
        && let Some((first, literal)) = channel_args(cmd, argv.len())
    {
        for (pos, channel) in argv.iter().enumerate().skip(first) {
            if !channel_allowed(&selector.channels, channel, literal) {
                return Err(Denied::Channel(pos));
            }
            if cmd.name.ends_with("publish") {
                break;
            }
        }
    }
    Ok(())
}

/// Whether the command names keys at all (a key spec that is not `not_key`).
fn has_keys(cmd: &Command) -> bool {
    cmd.getkeys.is_some()
        || cmd
            .key_specs
            .iter()
            .any(|s| !s.flags.contains(KeyFlags::NOT_KEY))
}

/// The keys of a call with the flags of the key spec that found each, resolved from
/// the arguments where the spec says they vary.
pub fn key_refs(cmd: &Command, argv: &[&[u8]]) -> Vec<(usize, KeyFlags)> {
    if cmd.getkeys.is_some() {
        // Positions from the command's own extractor; the flags of all its specs.
        let all = cmd
            .key_specs
            .iter()
            .fold(KeyFlags::NONE, |acc, s| acc.union(s.flags));
        return key_positions(cmd, argv)
            .into_iter()
            .map(|p| (p, all))
            .collect();
    }
    let mut refs = Vec::new();
    for spec in cmd
        .key_specs
        .iter()
        .filter(|s| !s.flags.contains(KeyFlags::NOT_KEY))
    {
        let one = Command {
            key_specs: std::slice::from_ref(spec),
            getkeys: None,
            ..*cmd
        };
        for pos in key_positions(&one, argv) {
            let flags = match cmd.key_flags {
                Some(resolve) if spec.flags.contains(KeyFlags::VARIABLE_FLAGS) => {
                    resolve(argv, pos)
                }
                _ => spec.flags,
            };
            refs.push((pos, flags));
        }
    }
    refs
}

/// Whether a key pattern with the permissions the flags need matches the key.
pub fn key_allowed(selector: &Selector, key: &[u8], flags: KeyFlags) -> bool {
    if selector.allkeys {
        return true;
    }
    let read = flags.contains(KeyFlags::ACCESS);
    let write = flags.intersects(KeyFlags::INSERT | KeyFlags::DELETE | KeyFlags::UPDATE);
    selector.keys.iter().any(|p| {
        (!read || p.read) && (!write || p.write) && strata_keyspace::glob::matches(&p.pattern, key)
    })
}

/// Where a command's channels start, and whether they are patterns to be compared
/// literally (PSUBSCRIBE); `None` for commands without channels (the unsubscribe
/// commands count as having none).
fn channel_args(cmd: &Command, argc: usize) -> Option<(usize, bool)> {
    if cmd.parent.is_some() || argc < 2 {
        return None;
    }
    match cmd.name {
        "publish" | "spublish" | "subscribe" | "ssubscribe" => Some((1, false)),
        "psubscribe" => Some((1, true)),
        _ => None,
    }
}

/// Whether a channel (or, `literal`, a pattern) is allowed by the list.
pub fn channel_allowed(allowed: &[Vec<u8>], channel: &[u8], literal: bool) -> bool {
    allowed.iter().any(|p| {
        if literal {
            p == channel
        } else {
            strata_keyspace::glob::matches(p, channel)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_as(rules: &[&str], argv: &[&str]) -> Result<(), Denied> {
        let registry = crate::registry();
        let mut u = User::new(b"u", false);
        for r in rules {
            u.apply(&registry, r.as_bytes(), false).expect("valid rule");
        }
        let args: Vec<&[u8]> = argv.iter().map(|a| a.as_bytes()).collect();
        let cmd = crate::exec::resolve(&registry, &args).expect("a known command");
        check(&u, cmd, &args)
    }

    #[test]
    fn commands_keys_and_channels() {
        let alice = ["on", "~k*", "%R~r*", "&ch*", "+@read", "+set", "+publish"];
        assert_eq!(check_as(&alice, &["get", "k1"]), Ok(()));
        assert_eq!(check_as(&alice, &["get", "x"]), Err(Denied::Key(1)));
        assert_eq!(check_as(&alice, &["get", "r1"]), Ok(()));
        assert_eq!(check_as(&alice, &["set", "r1", "v"]), Err(Denied::Key(1)));
        assert_eq!(
            check_as(&alice, &["hset", "k", "f", "v"]),
            Err(Denied::Command)
        );
        assert_eq!(check_as(&alice, &["mget", "k1", "zz"]), Err(Denied::Key(2)));
        assert_eq!(check_as(&alice, &["publish", "ch1", "m"]), Ok(()));
        assert_eq!(
            check_as(&alice, &["publish", "other", "m"]),
            Err(Denied::Channel(1))
        );
        // Commands without authentication always pass the command check.
        assert_eq!(check_as(&alice, &["auth", "a", "b"]), Ok(()));
    }

    #[test]
    fn psubscribe_patterns_match_literally() {
        let u = ["+@all", "&news.*"];
        assert_eq!(check_as(&u, &["psubscribe", "news.*"]), Ok(()));
        assert_eq!(
            check_as(&u, &["psubscribe", "news.a*"]),
            Err(Denied::Channel(1))
        );
        assert_eq!(check_as(&u, &["subscribe", "news.a"]), Ok(()));
        assert_eq!(
            check_as(&u, &["subscribe", "news.a", "x"]),
            Err(Denied::Channel(2))
        );
    }

    #[test]
    fn first_args_and_selectors() {
        let u = ["-@all", "+select|0", "(+get ~x*)"];
        assert_eq!(check_as(&u, &["select", "0"]), Ok(()));
        assert_eq!(check_as(&u, &["select", "1"]), Err(Denied::Command));
        assert_eq!(check_as(&u, &["get", "x1"]), Ok(()));
        // The key denial of the selector is more relevant than the root's command one.
        assert_eq!(check_as(&u, &["get", "y"]), Err(Denied::Key(1)));
    }

    #[test]
    fn set_with_get_needs_read_permission() {
        let w = ["+@all", "%W~*"];
        assert_eq!(check_as(&w, &["set", "k", "v"]), Ok(()));
        assert_eq!(check_as(&w, &["set", "k", "v", "GET"]), Err(Denied::Key(1)));
    }
}
