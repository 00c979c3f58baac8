//! The command table: one [`Command`] per Redis command, and the [`Registry`] that
//! looks them up by name.
//!
//! The table is data. Arity errors, unknown-command errors, COMMAND INFO / DOCS /
//! COUNT / GETKEYS, key positions for locking, ACL categories and "is this a write"
//! are all derived from it; adding a command is one entry next to its handler in the
//! family module (`crate::families`).

use crate::ctx::Ctx;
use crate::error::CmdResult;
use crate::spec::{Acl, BeginSearch, FindKeys, Flags, Group, KeyFlags, KeySpec};

/// A command handler: runs against the context, writes its reply to `ctx.out` or
/// returns an error before writing anything.
pub type Handler = fn(&mut Ctx<'_, '_>, &[&[u8]]) -> CmdResult;

/// Extracts key positions for commands whose keys the key specs cannot describe
/// fully (movable keys).
pub type GetKeys = fn(&[&[u8]]) -> Vec<usize>;

/// Resolves the flags of the key at a position for a command whose key spec says
/// `VARIABLE_FLAGS` (SET is RW with GET, OW without).
pub type KeyFlagsOf = fn(&[&[u8]], usize) -> KeyFlags;

/// One command (or subcommand) and its metadata.
#[derive(Clone, Copy)]
pub struct Command {
    /// Lower-case name; for a subcommand, the part after the container's name.
    pub name: &'static str,
    /// Redis's arity: N means exactly N arguments (including the name), -N at least N.
    pub arity: i32,
    pub flags: Flags,
    /// ACL categories beyond those the flags imply.
    pub acl: Acl,
    pub key_specs: &'static [KeySpec],
    pub tips: &'static [&'static str],
    pub group: Group,
    pub since: &'static str,
    pub summary: &'static str,
    pub complexity: &'static str,
    /// `None` for containers, whose subcommands carry the handlers.
    pub handler: Option<Handler>,
    pub subcommands: &'static [Command],
    pub getkeys: Option<GetKeys>,
    /// For key specs flagged `VARIABLE_FLAGS`: the flags a given call has.
    pub key_flags: Option<KeyFlagsOf>,
    /// Set by the registry: the container's name for a subcommand.
    pub parent: Option<&'static str>,
    /// Set by the registry: a dense id for per-command statistics.
    pub id: usize,
    /// Whether the command reads or writes keys its key specs do not name (KEYS,
    /// FLUSHALL, INFO...): a transaction containing it locks every shard.
    pub touches_all: bool,
    /// How its changes are best logged (see [`crate::effects`]).
    pub log_rule: crate::effects::LogRule,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Command")
            .field("name", &self.name)
            .field("arity", &self.arity)
            .finish()
    }
}

impl Command {
    /// A template for table entries: `Command { name: "get", ..Command::DEFAULT }`.
    pub const DEFAULT: Command = Command {
        name: "",
        arity: 1,
        flags: Flags::NONE,
        acl: Acl::NONE,
        key_specs: &[],
        tips: &[],
        group: Group::Generic,
        since: "1.0.0",
        summary: "",
        complexity: "",
        handler: None,
        subcommands: &[],
        getkeys: None,
        key_flags: None,
        parent: None,
        id: 0,
        touches_all: false,
        log_rule: crate::effects::LogRule::Value,
    };

    /// `container|sub` for subcommands, else the name.
    pub fn full_name(&self) -> String {
        match self.parent {
            Some(p) => format!("{p}|{}", self.name),
            None => self.name.to_string(),
        }
    }

    pub fn is_write(&self) -> bool {
        self.flags.contains(Flags::WRITE)
    }

    /// The flags as COMMAND INFO shows them, including the derived `movablekeys`.
    pub fn info_flags(&self) -> Flags {
        let movable = self.getkeys.is_some()
            || self.key_specs.iter().any(|k| {
                !matches!(k.begin, BeginSearch::Index(_))
                    || !matches!(k.find, FindKeys::Range { .. })
            })
            || self.legacy_range().1;
        if movable {
            self.flags | Flags::MOVABLEKEYS
        } else {
            self.flags
        }
    }

    /// All ACL categories: the explicit ones plus those the flags imply, as Redis's
    /// `setImplicitACLCategories` does.
    pub fn acl_categories(&self) -> Acl {
        let mut acl = self.acl;
        if self.flags.contains(Flags::WRITE) {
            acl = acl | Acl::WRITE;
        }
        if self.flags.contains(Flags::READONLY) && !self.acl.contains(Acl::SCRIPTING) {
            acl = acl | Acl::READ;
        }
        if self.flags.contains(Flags::ADMIN) {
            acl = acl | Acl::ADMIN | Acl::DANGEROUS;
        }
        if self.flags.contains(Flags::PUBSUB) {
            acl = acl | Acl::PUBSUB;
        }
        if self.flags.contains(Flags::FAST) {
            acl = acl | Acl::FAST;
        }
        if self.flags.contains(Flags::BLOCKING) {
            acl = acl | Acl::BLOCKING;
        }
        if !acl.contains(Acl::FAST) {
            acl = acl | Acl::SLOW;
        }
        acl
    }

    /// The legacy (first, last, step) key range of COMMAND INFO, derived from the key
    /// specs as Redis does, and whether deriving it made the keys movable.
    pub fn legacy_range(&self) -> ((i32, i32, i32), bool) {
        let specs = self.key_specs;
        if specs.is_empty() {
            return ((0, 0, 0), false);
        }
        if let [
            KeySpec {
                begin: BeginSearch::Index(pos),
                find: FindKeys::Range { last_key, step, .. },
                flags,
                ..
            },
        ] = specs
        {
            let last = if *last_key >= 0 {
                last_key + pos
            } else {
                *last_key
            };
            return (
                (*pos, last, *step),
                flags.contains(crate::spec::KeyFlags::INCOMPLETE),
            );
        }
        let mut movable = false;
        let mut first = i32::MAX;
        let mut last: i32 = 0;
        let mut prev_last = 0;
        for spec in specs {
            let (BeginSearch::Index(pos), FindKeys::Range { last_key, step, .. }) =
                (spec.begin, spec.find)
            else {
                movable = true;
                continue;
            };
            if step != 1 || (prev_last != 0 && prev_last != pos - 1) {
                movable = true;
                continue;
            }
            if spec.flags.contains(crate::spec::KeyFlags::INCOMPLETE) {
                movable = true;
            }
            first = first.min(pos);
            let abs = if last_key >= 0 {
                last_key + pos
            } else {
                last_key
            };
            // Unsigned comparison, as in Redis: a negative (relative-to-end) last key
            // wins over any positive one.
            if (abs as u32) > (last as u32) {
                last = abs;
            }
            prev_last = last;
        }
        if first == i32::MAX {
            return ((0, 0, 0), movable);
        }
        ((first, last, 1), movable)
    }
}

/// Every command, looked up case-insensitively by name.
pub struct Registry {
    /// Top-level commands by the name they are found by (lowercase; a renamed
    /// command by its new name), in an open-addressing table keyed by
    /// [`name_hash`], which ignores case: a lookup hashes the name as it came and
    /// compares it ignoring case, where a map of lowercase names needs a lowercased
    /// copy first (that lookup took 167 instructions of a pipelined GET's 3,300). A power of
    /// two at most half full.
    by_name: Box<[Option<Named>]>,
    /// Number of top-level commands.
    count: usize,
    /// Every command and subcommand, by id.
    all: Vec<&'static Command>,
}

/// A name a command is found by (lowercase), and the command.
type Named = (Box<[u8]>, &'static Command);

/// FNV-1a over a command name's bytes with bit 5 set, so that an ASCII letter
/// hashes the same in either case.
#[inline]
fn name_hash(name: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in name {
        h = (h ^ u32::from(b | 0x20)).wrapping_mul(0x0100_0193);
    }
    h
}

/// Whether `name` is `key` (a lowercase name) in any case: `eq_ignore_ascii_case`
/// lowercases both sides of every byte (some 25 instructions a byte); a byte of
/// `key` that is a lowercase letter matches either case of it by setting bit 5 of
/// the byte compared, and any other byte matches only itself.
#[inline]
fn name_matches(key: &[u8], name: &[u8]) -> bool {
    key.len() == name.len()
        && key.iter().zip(name).all(|(&k, &n)| {
            let fold = if k.is_ascii_lowercase() { 0x20 } else { 0 };
            n | fold == k
        })
}

impl Registry {
    /// A registry of the given commands. Each entry is copied once, at start-up, into
    /// a `'static` allocation that carries its id (and, for subcommands, its parent).
    pub fn new(commands: &[&'static [Command]]) -> Registry {
        let mut names: Vec<Named> = Vec::new();
        let mut all: Vec<&'static Command> = Vec::new();
        for family in commands {
            for cmd in family.iter() {
                let id = all.len();
                let subs: Vec<Command> = cmd
                    .subcommands
                    .iter()
                    .enumerate()
                    .map(|(i, s)| Command {
                        parent: Some(cmd.name),
                        id: id + 1 + i,
                        ..*s
                    })
                    .collect();
                let subs: &'static [Command] = Box::leak(subs.into_boxed_slice());
                let cmd: &'static Command = Box::leak(Box::new(Command {
                    subcommands: subs,
                    id,
                    ..*cmd
                }));
                names.push((cmd.name.as_bytes().into(), cmd));
                all.push(cmd);
                all.extend(subs.iter());
            }
        }
        let count = names.len();
        Registry {
            by_name: name_table(names),
            count,
            all,
        }
    }

    /// The command called `name` (any case).
    #[inline]
    pub fn get(&self, name: &[u8]) -> Option<&'static Command> {
        let mask = self.by_name.len() - 1;
        let mut i = name_hash(name) as usize & mask;
        while let Some((key, cmd)) = &self.by_name[i] {
            if name_matches(key, name) {
                return Some(cmd);
            }
            i = (i + 1) & mask;
        }
        None
    }

    /// The subcommand `sub` of `container` (any case).
    pub fn subcommand(container: &'static Command, sub: &[u8]) -> Option<&'static Command> {
        container
            .subcommands
            .iter()
            .find(|c| c.name.as_bytes().eq_ignore_ascii_case(sub))
    }

    /// Top-level commands, in no particular order.
    pub fn commands(&self) -> impl Iterator<Item = &'static Command> + '_ {
        self.by_name.iter().flatten().map(|&(_, cmd)| cmd)
    }

    /// Number of top-level commands (COMMAND COUNT).
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Number of ids handed out.
    pub fn id_count(&self) -> usize {
        self.all.len()
    }

    /// The command or subcommand with this id.
    pub fn by_id(&self, id: usize) -> Option<&'static Command> {
        self.all.get(id).copied()
    }

    /// Removes a command (rename-command with an empty name) or renames it.
    pub fn rename(&mut self, from: &str, to: &str) -> bool {
        let Some(cmd) = self.get(from.as_bytes()) else {
            return false;
        };
        let (from, to) = (from.to_ascii_lowercase(), to.to_ascii_lowercase());
        // A command already called `to` gives way, as a map's insert would have it.
        let mut names: Vec<Named> = std::mem::take(&mut self.by_name)
            .into_vec()
            .into_iter()
            .flatten()
            .filter(|(name, _)| **name != *from.as_bytes() && **name != *to.as_bytes())
            .collect();
        if !to.is_empty() {
            names.push((to.as_bytes().into(), cmd));
        }
        self.count = names.len();
        self.by_name = name_table(names);
        true
    }
}

/// [`Registry::by_name`] for these names.
fn name_table(names: Vec<Named>) -> Box<[Option<Named>]> {
    let size = (names.len() * 2).next_power_of_two().max(2);
    let mut table = vec![None; size].into_boxed_slice();
    for (name, cmd) in names {
        let mut i = name_hash(&name) as usize & (size - 1);
        while table[i].is_some() {
            i = (i + 1) & (size - 1);
        }
        table[i] = Some((name, cmd));
    }
    table
}

/// Positions of the keys in `argv` for `cmd`, from its key specs (or its custom
/// extractor), as COMMAND GETKEYS reports them and the dispatcher locks them.
pub fn key_positions(cmd: &Command, argv: &[&[u8]]) -> Vec<usize> {
    key_positions_and_source(cmd, argv).0
}

/// [`key_positions`], and whether they come from the command's own key extractor
/// rather than its key specs. As in Redis, a `numkeys` argument that is not a
/// canonical integer naming keys that are all there makes the specs invalid, and the
/// keys are then found as Redis's older extractors find them (`atoi` of the
/// argument, inputs before the destination); such keys carry no flags.
pub fn key_positions_and_source(cmd: &Command, argv: &[&[u8]]) -> (Vec<usize>, bool) {
    if let Some(getkeys) = cmd.getkeys {
        return (getkeys(argv), false);
    }
    // Every key is an argument: one allocation, however many keys (MSET's ten).
    let mut keys = Vec::with_capacity(argv.len());
    // Shard channels are named by `not_key` specs: they route like keys in a cluster
    // but are not keys.
    for spec in cmd
        .key_specs
        .iter()
        .filter(|s| !s.flags.contains(KeyFlags::NOT_KEY))
    {
        if spec_keys(spec, argv, &mut keys).is_err() {
            return (numkeys_fallback(cmd, argv), true);
        }
    }
    (keys, false)
}

/// A key spec that does not apply to the arguments (Redis's `invalid_spec`).
struct InvalidSpec;

/// Redis's `genericGetKeys`, which every command with a `numkeys` spec falls back
/// to: `numkeys` read with C's `atoi`; no keys at all unless between 1 and the
/// arguments left; the keys, then the destination key of the `*STORE` forms.
fn numkeys_fallback(cmd: &Command, argv: &[&[u8]]) -> Vec<usize> {
    let argc = argv.len() as i64;
    let (mut count, mut store) = (None, None);
    for spec in cmd.key_specs {
        match (spec.begin, spec.find) {
            (
                BeginSearch::Index(at),
                FindKeys::KeyNum {
                    key_num_idx,
                    first_key,
                    step,
                },
            ) => {
                count = Some((
                    i64::from(at) + i64::from(key_num_idx),
                    i64::from(at) + i64::from(first_key),
                    i64::from(step.max(1)),
                ));
            }
            (BeginSearch::Index(at), FindKeys::Range { last_key: 0, .. }) => store = Some(at),
            _ => {}
        }
    }
    let Some((count_at, first, step)) = count else {
        return Vec::new();
    };
    let num = usize::try_from(count_at)
        .ok()
        .and_then(|i| argv.get(i))
        .map_or(0, |a| c_atoi(a));
    let num = i64::from(num);
    if num < 1 || num > (argc - first) / step {
        return Vec::new();
    }
    let mut keys: Vec<usize> = (0..num).map(|i| (first + i * step) as usize).collect();
    keys.extend(store.and_then(|at| usize::try_from(at).ok()));
    keys
}

/// C's `atoi` as glibc has it: `strtol`, truncated to `int`.
fn c_atoi(s: &[u8]) -> i32 {
    crate::parse::c_strtol(s).map_or(0, |(value, _)| value as i32)
}

fn spec_keys(spec: &KeySpec, argv: &[&[u8]], keys: &mut Vec<usize>) -> Result<(), InvalidSpec> {
    let argc = argv.len() as i64;
    let first = match spec.begin {
        BeginSearch::Index(i) => i as i64,
        BeginSearch::Keyword {
            keyword,
            start_from,
        } => {
            let (start, end, step) = if start_from >= 0 {
                (start_from as i64, argc - 1, 1i64)
            } else {
                (argc + start_from as i64, 0, -1i64)
            };
            let mut i = start;
            let mut found = None;
            while (step > 0 && i <= end) || (step < 0 && i >= end) {
                if i < 0 || i >= argc {
                    break;
                }
                if argv[i as usize].eq_ignore_ascii_case(keyword.as_bytes()) {
                    found = Some(i + 1);
                    break;
                }
                i += step;
            }
            match found {
                Some(i) => i,
                None => return Ok(()),
            }
        }
        BeginSearch::Unknown => return Ok(()),
    };
    match spec.find {
        FindKeys::Range {
            last_key,
            step,
            limit,
        } => {
            let last = if last_key >= 0 {
                first + last_key as i64
            } else if limit <= 1 {
                argc + last_key as i64
            } else {
                first + (argc - first) / limit as i64 + last_key as i64
            };
            let mut i = first;
            while i <= last && i < argc {
                keys.push(i as usize);
                i += step.max(1) as i64;
            }
        }
        FindKeys::KeyNum {
            key_num_idx,
            first_key,
            step,
        } => {
            // Redis's `getKeysUsingKeySpecs`: a canonical, non-negative count
            // (truncated to `int`) of keys that are all there.
            let idx = first + key_num_idx as i64;
            let n = usize::try_from(idx)
                .ok()
                .and_then(|i| argv.get(i))
                .and_then(|a| strata_keyspace::value::parse_canonical_i64(a))
                .filter(|n| *n >= 0)
                .ok_or(InvalidSpec)?;
            let start = first + first_key as i64;
            let last = start + i64::from(n as i32) - 1;
            if last >= argc || last < start || start >= argc {
                return Err(InvalidSpec);
            }
            let mut i = start;
            while i <= last {
                keys.push(i as usize);
                i += step.max(1) as i64;
            }
        }
        FindKeys::Unknown => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSET_LIKE: Command = Command {
        name: "mset",
        arity: -3,
        key_specs: &[KeySpec::range(1, -1, 2, KeyFlags::OW)],
        ..Command::DEFAULT
    };

    #[test]
    fn commands_are_found_by_name_in_any_case_and_only_by_name() {
        let mut registry = Registry::new(crate::families::ALL);
        let names: Vec<&str> = registry.commands().map(|c| c.name).collect();
        assert!(names.len() > 150, "{}", names.len());
        for name in &names {
            let upper = name.to_ascii_uppercase();
            let mixed: String = name
                .chars()
                .enumerate()
                .map(|(i, c)| {
                    if i % 2 == 0 {
                        c.to_ascii_uppercase()
                    } else {
                        c
                    }
                })
                .collect();
            for variant in [name.to_string(), upper, mixed] {
                let found = registry.get(variant.as_bytes()).map(|c| c.name);
                assert_eq!(found, Some(*name), "{variant}");
            }
            // Every byte value at every position: only the same letter in either
            // case (or the same byte) finds the command.
            for i in 0..name.len() {
                for b in 0..=255u8 {
                    let mut variant = name.as_bytes().to_vec();
                    variant[i] = b;
                    let same = registry.get(&variant).is_some_and(|c| c.name == *name);
                    assert_eq!(
                        same,
                        b.eq_ignore_ascii_case(&name.as_bytes()[i]),
                        "{variant:?}"
                    );
                }
            }
            let mut longer = name.as_bytes().to_vec();
            longer.push(b'_');
            assert!(registry.get(&longer).is_none());
            // A suffix is found only if it is a command's name itself (SETEX in
            // PSETEX).
            let suffix = &name[1..];
            if let Some(c) = registry.get(suffix.as_bytes()) {
                assert_eq!(c.name, suffix);
            }
        }
        assert!(registry.get(b"").is_none());
        assert!(registry.get(b"G\x05T").is_none());
        assert!(registry.rename("get", "fetch"));
        assert!(registry.get(b"get").is_none());
        assert_eq!(registry.get(b"FETCH").map(|c| c.name), Some("get"));
        assert!(registry.rename("set", ""));
        assert!(registry.get(b"set").is_none());
    }

    #[test]
    fn key_positions_from_specs() {
        let argv: Vec<&[u8]> = vec![b"mset", b"a", b"1", b"b", b"2"];
        assert_eq!(key_positions(&MSET_LIKE, &argv), vec![1, 3]);
        assert_eq!(MSET_LIKE.legacy_range(), ((1, -1, 2), false));
        let keynum = Command {
            key_specs: &[KeySpec {
                flags: KeyFlags::RO,
                begin: BeginSearch::Index(2),
                find: FindKeys::KeyNum {
                    key_num_idx: 0,
                    first_key: 1,
                    step: 1,
                },
                notes: "",
            }],
            ..Command::DEFAULT
        };
        let argv: Vec<&[u8]> = vec![b"zunion", b"2", b"a", b"b", b"WEIGHTS"];
        let argv2: Vec<&[u8]> = vec![b"x", b"dst", b"2", b"a", b"b"];
        assert_eq!(key_positions(&keynum, &argv2), vec![3, 4]);
        assert!(keynum.info_flags().contains(Flags::MOVABLEKEYS));
        let _ = argv;
    }

    #[test]
    fn implied_acl_categories() {
        let c = Command {
            flags: Flags::WRITE | Flags::FAST,
            acl: Acl::STRING,
            ..Command::DEFAULT
        };
        assert_eq!(
            c.acl_categories().names().collect::<Vec<_>>(),
            ["write", "string", "fast"]
        );
        let c = Command {
            flags: Flags::ADMIN,
            ..Command::DEFAULT
        };
        assert_eq!(
            c.acl_categories().names().collect::<Vec<_>>(),
            ["admin", "slow", "dangerous"]
        );
    }
}
