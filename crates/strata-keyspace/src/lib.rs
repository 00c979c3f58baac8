//! strata's data model: a sharded keyspace of Redis values.
//!
//! The keyspace holds every logical database's entries, split into shards by key hash,
//! each shard behind its own lock. It does no I/O and reads no clock: callers pass the
//! current time (`now_ms`, Unix milliseconds) to every operation that may expire keys,
//! so behaviour is deterministic under test.
//!
//! - [`dict`]: the incremental-rehash hash table with SCAN cursors.
//! - [`db`]: one database of one shard; lazy and active expiry.
//! - [`entry`]: a key's entry, key and value in one allocation.
//! - [`expires`]: the expiry times of keys with a TTL, kept out of their entries.
//! - [`keyspace`]: the shards and their locks.
//! - [`value`]: values and their Redis encodings.
//! - [`list`]: lists, as quicklists of packs.
//! - [`glob`]: Redis's pattern matching.
//! - [`zset`]: sorted sets.
//! - [`hash`], [`set`]: the hash and set values and their encodings.

pub mod access;
pub mod compact;
pub mod db;
pub mod dict;
pub mod entry;
pub mod evict;
pub mod expires;
pub mod glob;
pub mod hash;
pub mod keyspace;
pub mod list;
pub mod lock;
pub mod logref;
mod marks;
pub mod pack;
mod pair;
pub mod serialize;
pub mod set;
pub mod value;
pub mod zset;

pub use compact::CompactBytes;
pub use db::{Db, Detached, EventFlags, KeyEvent, Ttl};
pub use entry::{Entry, HashMut};
pub use hash::{Hash, HashRef};
pub use keyspace::{Keyspace, Shard, ShardStats};
pub use list::List;
pub use set::Set;
pub use value::{Str, StrRef, Value, ValueRef, ValueType};
pub use zset::ZSet;

/// The in-memory hasher: fast, seeded at random per process, never persisted.
pub type KeyHasher = foldhash::fast::RandomState;

/// The size class jemalloc (the server's allocator) serves a request of `n` bytes
/// from, in its default configuration: multiples of 16 up to 128, then four classes
/// per doubling.
pub(crate) fn size_class(n: usize) -> usize {
    if n <= 8 {
        return 8;
    }
    if n <= 128 {
        return n.next_multiple_of(16);
    }
    let lg = usize::BITS - (n - 1).leading_zeros();
    n.next_multiple_of(1 << (lg - 3))
}

/// The thresholds at which collections change encoding (Redis's
/// `*-max-listpack-*` / `set-max-intset-entries` / `list-max-listpack-size`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodingLimits {
    pub hash_max_listpack_entries: u64,
    pub hash_max_listpack_value: u64,
    pub set_max_intset_entries: u64,
    pub zset_max_listpack_entries: u64,
    pub zset_max_listpack_value: u64,
    pub list_max_listpack_size: i64,
}

impl Default for EncodingLimits {
    fn default() -> Self {
        EncodingLimits {
            hash_max_listpack_entries: 512,
            hash_max_listpack_value: 64,
            set_max_intset_entries: 512,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            list_max_listpack_size: -2,
        }
    }
}
