//! ACL users and their selectors, and the rules of ACL SETUSER that change them.
//!
//! A user has flags (`on`/`off`, `nopass`, payload sanitizing), SHA-256 password
//! hashes, and one or more *selectors*. The first selector is the root one (the rules
//! written outside parentheses); each `(...)` rule adds another. A selector holds a
//! bit per command id (subcommands have ids of their own), the first arguments allowed
//! for otherwise denied commands (`+select|0`), key patterns with read/write
//! permissions and channel patterns. A command runs if any one selector allows it.
//!
//! Rules are applied exactly as Redis 7.0's `ACLSetUser` applies them, including its
//! quirks: allowing a container (`+config`) allows all of its subcommands, and a
//! category rule applies to every command and subcommand in the category. Commands
//! are looked up by their original names, so rules still name a command after
//! `rename-command`.
//!
//! Invariants: `selectors` is never empty and only `selectors[0]` is the root; a
//! password is always stored as 64 lowercase hex characters; `allkeys` implies an
//! empty key pattern list, `allchannels` an empty channel list.

use std::collections::BTreeMap;
use std::fmt;

use crate::spec::Acl as Category;
use crate::table::{Command, Registry};

/// The number of command bits a selector holds; the last one is reserved for
/// "commands to come" (set only by `+@all`, so that ACL LIST can tell `+@all -get`
/// from `-@all +...`).
pub const COMMAND_BITS: usize = 1024;
const FUTURE_BIT: usize = COMMAND_BITS - 1;

/// Why a rule could not be applied; the Display text is Redis's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    /// Not a rule, or a pattern with spaces (Redis's EINVAL).
    Syntax,
    /// A command or category that does not exist (ENOENT).
    UnknownCommand,
    /// A key pattern after `~*` or `allkeys` (EEXIST).
    KeyAfterAll,
    /// A channel pattern after `&*` or `allchannels` (EISDIR).
    ChannelAfterAll,
    /// `<pass` or `!hash` of a password the user does not have (ENODEV).
    NoSuchPassword,
    /// `#hash` or `!hash` that is not 64 lowercase hex characters (EBADMSG).
    BadHash,
    /// A user defined twice in the configuration (EALREADY).
    Duplicate,
    /// `+command|sub|arg` (ECHILD).
    FirstArgOfSubcommand,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RuleError::Syntax => "Syntax error",
            RuleError::UnknownCommand => "Unknown command or category name in ACL",
            RuleError::KeyAfterAll => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid \
                 and does not have any effect. Try 'resetkeys' to start with an empty list \
                 of patterns"
            }
            RuleError::ChannelAfterAll => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not \
                 valid and does not have any effect. Try 'resetchannels' to start with an \
                 empty list of channels"
            }
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => {
                "The password hash must be exactly 64 characters and contain only \
                 lowercase hexadecimal characters"
            }
            RuleError::Duplicate => {
                "Duplicate user found. A user can only be defined once in config files"
            }
            RuleError::FirstArgOfSubcommand => {
                "Allowing first-arg of a subcommand is not supported"
            }
        })
    }
}

/// A key pattern and what it allows: `~p` both, `%R~p` reading, `%W~p` writing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    pub read: bool,
    pub write: bool,
}

impl KeyPattern {
    /// The rule that recreates it (`~p`, `%R~p`, `%W~p`).
    pub fn rule(&self) -> Vec<u8> {
        let prefix: &[u8] = match (self.read, self.write) {
            (true, false) => b"%R~",
            (false, true) => b"%W~",
            _ => b"~",
        };
        [prefix, &self.pattern].concat()
    }
}

/// One bit per command id.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CommandBits([u64; COMMAND_BITS / 64]);

impl CommandBits {
    const NONE: CommandBits = CommandBits([0; COMMAND_BITS / 64]);
    const ALL: CommandBits = CommandBits([u64::MAX; COMMAND_BITS / 64]);

    /// Whether bit `id` is set; ids beyond the bitmap read as unset, so such a
    /// command is denied rather than allowed.
    pub fn get(&self, id: usize) -> bool {
        id < FUTURE_BIT && self.0[id / 64] & (1 << (id % 64)) != 0
    }

    fn set(&mut self, id: usize, on: bool) {
        if id >= FUTURE_BIT {
            return;
        }
        if on {
            self.0[id / 64] |= 1 << (id % 64);
        } else {
            self.0[id / 64] &= !(1 << (id % 64));
        }
    }

    fn future(&self) -> bool {
        self.0[FUTURE_BIT / 64] & (1 << (FUTURE_BIT % 64)) != 0
    }
}

impl fmt::Debug for CommandBits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on = (0..FUTURE_BIT).filter(|&i| self.get(i)).count();
        write!(f, "CommandBits({on} commands, future: {})", self.future())
    }
}

/// A set of permissions: commands, keys and channels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    /// The user's own permissions, as opposed to a `(...)` selector.
    pub root: bool,
    pub allkeys: bool,
    pub allchannels: bool,
    /// Every command, without looking at the bits (cleared by any `-` rule).
    pub allcommands: bool,
    pub commands: CommandBits,
    /// First arguments allowed for commands whose bit is unset, by command id.
    pub firstargs: BTreeMap<usize, Vec<Vec<u8>>>,
    pub keys: Vec<KeyPattern>,
    pub channels: Vec<Vec<u8>>,
}

impl Selector {
    /// An empty selector: no commands, keys or channels, unless `allchannels` says
    /// new selectors get every channel (`acl-pubsub-default allchannels`).
    pub fn new(root: bool, allchannels: bool) -> Selector {
        Selector {
            root,
            allkeys: false,
            allchannels,
            allcommands: false,
            commands: CommandBits::NONE,
            firstargs: BTreeMap::new(),
            keys: Vec::new(),
            channels: Vec::new(),
        }
    }

    /// Whether `+@all` (or `allcommands`) was the last word on commands, so that
    /// commands added later are allowed too.
    pub fn future_commands(&self) -> bool {
        self.commands.future()
    }

    /// Allows or denies a command; a container carries its subcommands along.
    fn change(&mut self, cmd: &Command, allow: bool) {
        self.set_bit(cmd.id, allow);
        self.firstargs.remove(&cmd.id);
        for sub in cmd.subcommands {
            self.set_bit(sub.id, allow);
        }
    }

    fn set_bit(&mut self, id: usize, allow: bool) {
        self.commands.set(id, allow);
        if !allow {
            self.allcommands = false;
        }
    }

    /// Applies a category rule to every command and subcommand in it.
    fn change_category(&mut self, registry: &Registry, category: Category, allow: bool) {
        for cmd in all_commands(registry) {
            if cmd.acl_categories().intersects(category) {
                self.change(cmd, allow);
            }
        }
    }

    /// Counts the commands and subcommands of a category whose bit is set and unset.
    pub fn count_category(&self, registry: &Registry, category: Category) -> (usize, usize) {
        let mut on = 0;
        let mut off = 0;
        for cmd in all_commands(registry) {
            if cmd.acl_categories().intersects(category) {
                if self.commands.get(cmd.id) {
                    on += 1;
                } else {
                    off += 1;
                }
            }
        }
        (on, off)
    }

    /// Applies one rule that concerns selectors (commands, keys, channels).
    pub fn apply(&mut self, registry: &Registry, op: &[u8]) -> Result<(), RuleError> {
        let is = |word: &str| op.eq_ignore_ascii_case(word.as_bytes());
        if is("allkeys") || is("~*") {
            self.allkeys = true;
            self.keys.clear();
        } else if is("resetkeys") {
            self.allkeys = false;
            self.keys.clear();
        } else if is("allchannels") || is("&*") {
            self.allchannels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.allchannels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.commands = CommandBits::ALL;
            self.allcommands = true;
            self.firstargs.clear();
        } else if is("nocommands") || is("-@all") {
            self.commands = CommandBits::NONE;
            self.allcommands = false;
            self.firstargs.clear();
        } else if let [b'~' | b'%', ..] = op {
            self.add_key_pattern(op)?;
        } else if let [b'&', pattern @ ..] = op {
            if self.allchannels {
                return Err(RuleError::ChannelAfterAll);
            }
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pattern) {
                self.channels.push(pattern.to_vec());
            }
            self.allchannels = false;
        } else if let [sign @ (b'+' | b'-'), b'@', category @ ..] = op {
            let category = std::str::from_utf8(category)
                .ok()
                .and_then(Category::from_name)
                .ok_or(RuleError::UnknownCommand)?;
            self.change_category(registry, category, *sign == b'+');
        } else if let [b'+', name @ ..] = op {
            self.allow_command(registry, name)?;
        } else if let [b'-', name @ ..] = op {
            let cmd = lookup_original(registry, name).ok_or(RuleError::UnknownCommand)?;
            self.change(cmd, false);
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    fn add_key_pattern(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if self.allkeys {
            return Err(RuleError::KeyAfterAll);
        }
        let (read, write, pattern) = if let [b'%', rest @ ..] = op {
            let (mut read, mut write) = (false, false);
            let mut at = 0;
            loop {
                match rest.get(at) {
                    Some(b'R' | b'r') if !read => read = true,
                    Some(b'W' | b'w') if !write => write = true,
                    Some(b'~') => {
                        at += 1;
                        break;
                    }
                    // Redis accepts `%R` alone as an empty pattern.
                    None => break,
                    Some(_) => return Err(RuleError::Syntax),
                }
                at += 1;
            }
            if !read && !write {
                return Err(RuleError::Syntax);
            }
            (read, write, rest.get(at..).unwrap_or_default())
        } else {
            (true, true, op.get(1..).unwrap_or_default())
        };
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            Some(existing) => {
                existing.read |= read;
                existing.write |= write;
            }
            None => self.keys.push(KeyPattern {
                pattern: pattern.to_vec(),
                read,
                write,
            }),
        }
        self.allkeys = false;
        Ok(())
    }

    /// `+command`, `+container|sub` or `+command|first-arg`.
    fn allow_command(&mut self, registry: &Registry, name: &[u8]) -> Result<(), RuleError> {
        let Some(bar) = name.iter().rposition(|&b| b == b'|') else {
            let cmd = lookup_original(registry, name).ok_or(RuleError::UnknownCommand)?;
            self.change(cmd, true);
            return Ok(());
        };
        let (base, arg) = (&name[..bar], &name[bar + 1..]);
        let cmd = lookup_original(registry, base).ok_or(RuleError::UnknownCommand)?;
        if cmd.parent.is_some() {
            return Err(RuleError::FirstArgOfSubcommand);
        }
        if arg.is_empty() {
            return Err(RuleError::Syntax);
        }
        if !cmd.subcommands.is_empty() {
            let sub = lookup_original(registry, name).ok_or(RuleError::UnknownCommand)?;
            self.change(sub, true);
        } else {
            let args = self.firstargs.entry(cmd.id).or_default();
            if !args.iter().any(|a| a.eq_ignore_ascii_case(arg)) {
                args.push(arg.to_vec());
            }
        }
        Ok(())
    }
}

/// Every command and subcommand of the registry, in id order (a container before its
/// subcommands).
pub fn all_commands(registry: &Registry) -> impl Iterator<Item = &'static Command> + '_ {
    (0..registry.id_count()).filter_map(|id| registry.by_id(id))
}

/// The command `name` (`get`, `config|get`) by its original name, whatever
/// `rename-command` did to the registry's names.
pub fn lookup_original(registry: &Registry, name: &[u8]) -> Option<&'static Command> {
    let mut parts = name.split(|&b| b == b'|');
    let base = parts.next()?;
    let sub = parts.next();
    if parts.next().is_some() {
        return None;
    }
    let cmd = all_commands(registry)
        .find(|c| c.parent.is_none() && c.name.as_bytes().eq_ignore_ascii_case(base))?;
    match sub {
        None => Some(cmd),
        Some(sub) => Registry::subcommand(cmd, sub),
    }
}

/// Whether a name or pattern has a space or NUL, which Redis refuses in rules.
pub fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | 0))
}

/// Payload sanitizing flags (RESTORE's deep checks); kept for ACL LIST's sake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sanitize {
    /// Neither flag was given.
    Unset,
    Skip,
    Sanitize,
}

/// An ACL user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: Vec<u8>,
    pub enabled: bool,
    pub nopass: bool,
    pub sanitize: Sanitize,
    /// SHA-256 hashes of the passwords, as lowercase hex.
    pub passwords: Vec<String>,
    /// The root selector first, then the `(...)` ones.
    pub selectors: Vec<Selector>,
}

impl User {
    /// A new user as ACL SETUSER creates it: off, no password, no permissions.
    pub fn new(name: &[u8], allchannels: bool) -> User {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            sanitize: Sanitize::Unset,
            passwords: Vec::new(),
            selectors: vec![Selector::new(true, allchannels)],
        }
    }

    /// The `default` user of a fresh server: on, no password, everything allowed.
    pub fn default_user(registry: &Registry) -> User {
        let mut user = User::new(b"default", false);
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            // These rules are always valid.
            let _ = user.apply(registry, op.as_bytes(), false);
        }
        user
    }

    pub fn root(&self) -> &Selector {
        &self.selectors[0]
    }

    fn root_mut(&mut self) -> &mut Selector {
        &mut self.selectors[0]
    }

    /// Whether `password` is one of the user's (always, with `nopass`). The hashes are
    /// compared in constant time.
    pub fn password_ok(&self, password: &[u8]) -> bool {
        if self.nopass {
            return true;
        }
        let hashed = hash_password(password);
        let mut found = false;
        for p in &self.passwords {
            found |= constant_time_eq(p.as_bytes(), hashed.as_bytes());
        }
        found
    }

    /// Applies one rule (Redis's `ACLSetUser`); `allchannels` is whether new
    /// selectors and `reset` get every channel (`acl-pubsub-default`).
    pub fn apply(
        &mut self,
        registry: &Registry,
        op: &[u8],
        allchannels: bool,
    ) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |word: &str| op.eq_ignore_ascii_case(word.as_bytes());
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.sanitize = Sanitize::Skip;
        } else if is("sanitize-payload") {
            self.sanitize = Sanitize::Sanitize;
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if let [kind @ (b'>' | b'#'), rest @ ..] = op {
            let hash = if *kind == b'>' {
                hash_password(rest)
            } else {
                valid_hash(rest)?
            };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.nopass = false;
        } else if let [kind @ (b'<' | b'!'), rest @ ..] = op {
            let hash = if *kind == b'<' {
                hash_password(rest)
            } else {
                valid_hash(rest)?
            };
            let at = self
                .passwords
                .iter()
                .position(|p| *p == hash)
                .ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(at);
        } else if op.first() == Some(&b'(') && op.last() == Some(&b')') {
            let inner = &op[1..op.len() - 1];
            let words = strata_resp::inline::split_args(inner).map_err(|_| RuleError::Syntax)?;
            let mut selector = Selector::new(false, allchannels);
            for word in &words {
                selector.apply(registry, word)?;
            }
            self.selectors.push(selector);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            for op in ["resetpass", "resetkeys", "resetchannels"] {
                self.apply(registry, op.as_bytes(), allchannels)?;
            }
            if allchannels {
                self.apply(registry, b"allchannels", allchannels)?;
            }
            for op in ["off", "sanitize-payload", "clearselectors", "-@all"] {
                self.apply(registry, op.as_bytes(), allchannels)?;
            }
        } else {
            self.root_mut().apply(registry, op)?;
        }
        Ok(())
    }
}

/// Joins the arguments of a `(...)` selector spread over several arguments, as Redis
/// accepts them; on an unmatched `(` returns the index of the argument that opened it.
pub fn merge_selector_args(args: &[&[u8]]) -> Result<Vec<Vec<u8>>, usize> {
    let mut merged = Vec::with_capacity(args.len());
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (i, &arg) in args.iter().enumerate() {
        if let Some((_, selector)) = open.as_mut() {
            selector.push(b' ');
            selector.extend_from_slice(arg);
            if arg.last() == Some(&b')')
                && let Some((_, done)) = open.take()
            {
                merged.push(done);
            }
            continue;
        }
        if arg.first() == Some(&b'(') && arg.last() != Some(&b')') {
            open = Some((i, arg.to_vec()));
            continue;
        }
        merged.push(arg.to_vec());
    }
    match open {
        Some((i, _)) => Err(i),
        None => Ok(merged),
    }
}

/// The SHA-256 of a password as 64 lowercase hex characters.
pub fn hash_password(password: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(password);
    let mut hex = String::with_capacity(64);
    for b in digest.iter() {
        hex.push(char::from(HEX[usize::from(b >> 4)]));
        hex.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    hex
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn valid_hash(hash: &[u8]) -> Result<String, RuleError> {
    if hash.len() != 64 || !hash.iter().all(|b| HEX.contains(b)) {
        return Err(RuleError::BadHash);
    }
    Ok(String::from_utf8_lossy(hash).into_owned())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Registry {
        crate::registry()
    }

    fn user(rules: &[&str]) -> Result<User, RuleError> {
        let registry = registry();
        let mut u = User::new(b"u", false);
        for r in rules {
            u.apply(&registry, r.as_bytes(), false)?;
        }
        Ok(u)
    }

    #[test]
    fn passwords_are_hashed_and_removed() {
        let u = user(&[">secret", ">other", "<other"]).expect("valid");
        assert_eq!(u.passwords, [hash_password(b"secret")]);
        assert_eq!(
            hash_password(b"pw"),
            "30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4"
        );
        assert!(u.password_ok(b"secret") && !u.password_ok(b"other"));
        assert_eq!(user(&["<nope"]), Err(RuleError::NoSuchPassword));
        assert_eq!(user(&["#abc"]), Err(RuleError::BadHash));
        let u = user(&[">x", "nopass"]).expect("valid");
        assert!(u.nopass && u.passwords.is_empty() && u.password_ok(b"anything"));
    }

    #[test]
    fn rule_errors_are_redis_texts() {
        assert_eq!(user(&["~a", "allkeys", "~b"]), Err(RuleError::KeyAfterAll));
        assert_eq!(user(&["&*", "&b"]), Err(RuleError::ChannelAfterAll));
        assert_eq!(user(&["nosuch"]), Err(RuleError::Syntax));
        assert_eq!(user(&["+nosuch"]), Err(RuleError::UnknownCommand));
        assert_eq!(user(&["+@nosuch"]), Err(RuleError::UnknownCommand));
        assert_eq!(
            user(&["+config|get|x"]),
            Err(RuleError::FirstArgOfSubcommand)
        );
        assert_eq!(user(&["+select|"]), Err(RuleError::Syntax));
        assert_eq!(user(&["%Q~a"]), Err(RuleError::Syntax));
        assert_eq!(user(&["~a b"]), Err(RuleError::Syntax));
        assert_eq!(
            RuleError::UnknownCommand.to_string(),
            "Unknown command or category name in ACL"
        );
    }

    #[test]
    fn containers_carry_their_subcommands() {
        let registry = registry();
        let u = user(&["+config"]).expect("valid");
        let get = lookup_original(&registry, b"config|get").expect("config|get");
        assert!(u.root().commands.get(get.id));
        let u = user(&["+@all", "-config|set"]).expect("valid");
        let set = lookup_original(&registry, b"CONFIG|SET").expect("config|set");
        assert!(!u.root().commands.get(set.id) && u.root().commands.get(get.id));
        assert!(!u.root().allcommands && u.root().future_commands());
    }

    #[test]
    fn key_patterns_merge_permissions() {
        let u = user(&["%R~a*", "%W~a*", "%RW~b", "~c"]).expect("valid");
        let rules: Vec<Vec<u8>> = u.root().keys.iter().map(KeyPattern::rule).collect();
        assert_eq!(rules, [b"~a*".to_vec(), b"~b".to_vec(), b"~c".to_vec()]);
    }

    #[test]
    fn selectors_merge_across_arguments() {
        let args: Vec<&[u8]> = vec![b"on", b"(+get", b"~x*)", b"(+set ~y)"];
        assert_eq!(
            merge_selector_args(&args),
            Ok(vec![
                b"on".to_vec(),
                b"(+get ~x*)".to_vec(),
                b"(+set ~y)".to_vec()
            ])
        );
        let args: Vec<&[u8]> = vec![b"on", b"(+get"];
        assert_eq!(merge_selector_args(&args), Err(1));
        let u = user(&["(+get ~x*)", "(+set)", "clearselectors"]).expect("valid");
        assert_eq!(u.selectors.len(), 1);
    }

    #[test]
    fn reset_returns_to_a_new_user() {
        let u = user(&["on", ">p", "+@all", "~*", "&*", "(+get)", "reset"]).expect("valid");
        let mut fresh = User::new(b"u", false);
        fresh.sanitize = Sanitize::Sanitize;
        assert_eq!(u, fresh);
    }
}
