//! The vocabulary of the command table: flags, ACL categories, key specifications.
//!
//! These mirror Redis 7's command metadata, because clients read it (COMMAND INFO for
//! key positions and routing, COMMAND DOCS for help) and ACL rules are written in its
//! terms. Everything here is plain data; [`crate::table`] holds the entries.

use std::ops::BitOr;

macro_rules! bitset {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $flag:ident = $bit:expr, $text:expr;)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
        pub struct $name(pub u64);

        impl $name {
            pub const NONE: $name = $name(0);
            $($(#[$fdoc])* pub const $flag: $name = $name(1 << $bit);)*
            /// Every flag with its name, in Redis's order of presentation.
            pub const NAMED: &'static [($name, &'static str)] = &[$(($name::$flag, $text)),*];

            #[inline]
            pub const fn contains(self, other: $name) -> bool {
                self.0 & other.0 == other.0
            }

            #[inline]
            pub const fn union(self, other: $name) -> $name {
                $name(self.0 | other.0)
            }

            #[inline]
            pub const fn intersects(self, other: $name) -> bool {
                self.0 & other.0 != 0
            }

            /// The names of the flags set, in Redis's order.
            pub fn names(self) -> impl Iterator<Item = &'static str> {
                Self::NAMED.iter().filter(move |(f, _)| self.contains(*f)).map(|(_, n)| *n)
            }

            pub fn from_name(name: &str) -> Option<$name> {
                Self::NAMED.iter().find(|(_, n)| n.eq_ignore_ascii_case(name)).map(|(f, _)| *f)
            }
        }

        impl BitOr for $name {
            type Output = $name;
            fn bitor(self, rhs: $name) -> $name {
                self.union(rhs)
            }
        }
    };
}

bitset! {
    /// Command flags, as COMMAND INFO names them.
    Flags {
        WRITE = 0, "write";
        READONLY = 1, "readonly";
        DENYOOM = 2, "denyoom";
        MODULE = 3, "module";
        ADMIN = 4, "admin";
        PUBSUB = 5, "pubsub";
        NOSCRIPT = 6, "noscript";
        BLOCKING = 7, "blocking";
        LOADING = 8, "loading";
        STALE = 9, "stale";
        SKIP_MONITOR = 10, "skip_monitor";
        SKIP_SLOWLOG = 11, "skip_slowlog";
        ASKING = 12, "asking";
        FAST = 13, "fast";
        NO_AUTH = 14, "no_auth";
        MAY_REPLICATE = 15, "may_replicate";
        NO_MANDATORY_KEYS = 16, "no_mandatory_keys";
        NO_ASYNC_LOADING = 17, "no_async_loading";
        NO_MULTI = 18, "no_multi";
        MOVABLEKEYS = 19, "movablekeys";
        ALLOW_BUSY = 20, "allow_busy";
    }
}

bitset! {
    /// ACL categories, in Redis's order.
    Acl {
        KEYSPACE = 0, "keyspace";
        READ = 1, "read";
        WRITE = 2, "write";
        SET = 3, "set";
        SORTEDSET = 4, "sortedset";
        LIST = 5, "list";
        HASH = 6, "hash";
        STRING = 7, "string";
        BITMAP = 8, "bitmap";
        HYPERLOGLOG = 9, "hyperloglog";
        GEO = 10, "geo";
        STREAM = 11, "stream";
        PUBSUB = 12, "pubsub";
        ADMIN = 13, "admin";
        FAST = 14, "fast";
        SLOW = 15, "slow";
        BLOCKING = 16, "blocking";
        DANGEROUS = 17, "dangerous";
        CONNECTION = 18, "connection";
        TRANSACTION = 19, "transaction";
        SCRIPTING = 20, "scripting";
    }
}

bitset! {
    /// Flags of a key specification.
    KeyFlags {
        RO = 0, "RO";
        RW = 1, "RW";
        OW = 2, "OW";
        RM = 3, "RM";
        ACCESS = 4, "access";
        UPDATE = 5, "update";
        INSERT = 6, "insert";
        DELETE = 7, "delete";
        NOT_KEY = 8, "not_key";
        INCOMPLETE = 9, "incomplete";
        VARIABLE_FLAGS = 10, "variable_flags";
    }
}

/// Where the search for a command's keys begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BeginSearch {
    /// At this argument index.
    Index(i32),
    /// After the first occurrence of `keyword`, searching from `start_from` (negative:
    /// from the end, backwards).
    Keyword {
        keyword: &'static str,
        start_from: i32,
    },
    Unknown,
}

/// How the keys are found from where the search began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FindKeys {
    /// Keys up to `last_key` (relative to the first; -1 is the last argument), every
    /// `step` arguments; `limit` > 1 takes 1/limit of the remaining arguments.
    Range {
        last_key: i32,
        step: i32,
        limit: i32,
    },
    /// The argument at `key_num_idx` (relative) holds the number of keys, which start
    /// at `first_key` (relative), every `step` arguments.
    KeyNum {
        key_num_idx: i32,
        first_key: i32,
        step: i32,
    },
    Unknown,
}

/// One key specification of a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpec {
    pub flags: KeyFlags,
    pub begin: BeginSearch,
    pub find: FindKeys,
    pub notes: &'static str,
}

impl KeySpec {
    /// The common case: one key at argument `index`.
    pub const fn single(index: i32, flags: KeyFlags) -> KeySpec {
        KeySpec {
            flags,
            begin: BeginSearch::Index(index),
            find: FindKeys::Range {
                last_key: 0,
                step: 1,
                limit: 0,
            },
            notes: "",
        }
    }

    /// Keys from argument `index` to `last_key` (relative), every `step`.
    pub const fn range(index: i32, last_key: i32, step: i32, flags: KeyFlags) -> KeySpec {
        KeySpec {
            flags,
            begin: BeginSearch::Index(index),
            find: FindKeys::Range {
                last_key,
                step,
                limit: 0,
            },
            notes: "",
        }
    }

    pub const fn with_notes(self, notes: &'static str) -> KeySpec {
        KeySpec { notes, ..self }
    }
}

/// The group a command belongs to (COMMAND DOCS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    Generic,
    String,
    List,
    Set,
    SortedSet,
    Hash,
    Pubsub,
    Transactions,
    Connection,
    Server,
    Scripting,
    Hyperloglog,
    Cluster,
    Geo,
    Stream,
    Bitmap,
}

impl Group {
    pub fn name(self) -> &'static str {
        match self {
            Group::Generic => "generic",
            Group::String => "string",
            Group::List => "list",
            Group::Set => "set",
            Group::SortedSet => "sorted-set",
            Group::Hash => "hash",
            Group::Pubsub => "pubsub",
            Group::Transactions => "transactions",
            Group::Connection => "connection",
            Group::Server => "server",
            Group::Scripting => "scripting",
            Group::Hyperloglog => "hyperloglog",
            Group::Cluster => "cluster",
            Group::Geo => "geo",
            Group::Stream => "stream",
            Group::Bitmap => "bitmap",
        }
    }
}

/// `flags!(WRITE, DENYOOM)`: a [`Flags`] constant.
#[macro_export]
macro_rules! flags {
    ($($f:ident),* $(,)?) => { $crate::spec::Flags(0 $(| $crate::spec::Flags::$f.0)*) };
}

/// `acl!(STRING)`: an [`Acl`] constant.
#[macro_export]
macro_rules! acl {
    ($($f:ident),* $(,)?) => { $crate::spec::Acl(0 $(| $crate::spec::Acl::$f.0)*) };
}

/// `kf!(RW, ACCESS)`: a [`KeyFlags`] constant.
#[macro_export]
macro_rules! kf {
    ($($f:ident),* $(,)?) => { $crate::spec::KeyFlags(0 $(| $crate::spec::KeyFlags::$f.0)*) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_order() {
        let f = Flags::FAST | Flags::WRITE | Flags::DENYOOM;
        assert_eq!(f.names().collect::<Vec<_>>(), ["write", "denyoom", "fast"]);
        assert_eq!(Acl::from_name("SortedSet"), Some(Acl::SORTEDSET));
        assert!(f.contains(Flags::WRITE) && !f.contains(Flags::ADMIN));
    }
}
