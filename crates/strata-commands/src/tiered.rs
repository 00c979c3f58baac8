//! `maxmemory-policy tiered`: string values out of memory, and bringing them back.
//!
//! Under the tiered policy the eviction ([`crate::evict`]) deletes nothing: it
//! replaces the least recently used string values by a
//! [`Cold`](strata_keyspace::value::Cold) placeholder (length
//! and token), since each is already its key's live record in the log. Handlers
//! never see a placeholder: before a command that looks at values runs, the
//! dispatcher checks its keys. A value out of memory whose record is in the log's
//! buffer or the operating system's cache is read back at once ([`warm_cached`]:
//! such a read never waits for the device). For the others it either
//!
//! - hands the keys back to the connection ([`Outcome::fetch`](crate::exec::Outcome)),
//!   having written nothing: the connection reads them on a blocking-I/O thread,
//!   puts them back, and runs the command again — no event-loop thread waits for
//!   the disk, and the shard locks are not held while it reads; or
//! - reads them at once, under the command's locks, where the command cannot be run
//!   again (inside EXEC, in a script, after a failed fetch): rare, since EXEC's keys
//!   are fetched before EXEC runs and a script's declared keys before it starts.
//!
//! Commands that only delete, overwrite, test or re-time a key ([`needs_values`])
//! run on the placeholder as they would on the value.
//!
//! # Invariants
//!
//! - A placeholder stands for the key's live record in the store; whatever replaces
//!   or deletes the key drops it, so nothing ever reads it back by mistake.
//! - A value read back is put in place only if the entry still holds the same
//!   placeholder ([`Db::warm`](strata_keyspace::Db::warm)): a read that raced with
//!   an overwrite installs nothing, and the command's retry sees the new state.

use std::sync::atomic::{AtomicU64, Ordering};

use strata_keyspace::value::cold_keys;
use strata_keyspace::{Keyspace, Value, ValueRef};

use crate::ctx::Keys;
use crate::error::CmdError;
use crate::server::Server;
use crate::table::{Command, key_positions};

/// A key whose value was found out of memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColdKey {
    pub db: usize,
    pub key: Vec<u8>,
    /// The placeholder's token ([`strata_keyspace::value::Cold::token`]).
    pub token: u32,
    /// Where the value's records are in the store, as the key's database listed
    /// them when the placeholder was seen.
    pub refs: Option<strata_keyspace::logref::LogRefs>,
}

/// What INFO reports of the tiered policy at work.
#[derive(Default)]
pub struct TieredStats {
    /// Keys that commands touched and found in memory, while values were out.
    pub ram_hits: AtomicU64,
    /// Values read back from the store.
    pub disk_reads: AtomicU64,
    /// Values whose read would have waited for the device, handed by an event-loop
    /// thread to the blocking-I/O pool.
    pub deferred_reads: AtomicU64,
    /// Bytes read back.
    pub disk_read_bytes: AtomicU64,
}

/// Whether `cmd` may look at its keys' values; false for the commands that run on
/// a placeholder exactly as on the value: they delete it, overwrite it without
/// reading it, test that the key exists, read its type or expiry, or change the
/// expiry (logged as an expiry change, never as the value).
pub fn needs_values(cmd: &Command, argv: &[&[u8]]) -> bool {
    if cmd.parent.is_some() {
        return true;
    }
    match cmd.name {
        "del" | "unlink" | "exists" | "type" | "ttl" | "pttl" | "expiretime" | "pexpiretime"
        | "expire" | "pexpire" | "expireat" | "pexpireat" | "persist" | "touch" | "mset"
        | "msetnx" | "setex" | "psetex" => false,
        // SET ... GET returns the old value.
        "set" => argv.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get")),
        _ => true,
    }
}

/// The keys of `cmd` (in the selected database) whose values are out of memory, with
/// the shards already held; counts the others as hits in RAM.
pub fn cold_among(
    keys: &mut Keys<'_>,
    stats: Option<&TieredStats>,
    cmd: &Command,
    argv: &[&[u8]],
) -> Vec<ColdKey> {
    let mut cold = Vec::new();
    let now = keys.now_ms;
    let db_index = keys.db;
    let mut hits = 0;
    for i in key_positions(cmd, argv) {
        let Some(key) = argv.get(i) else { continue };
        let (hash, db) = keys.db_for(key);
        match db.peek(hash, key, now).map(|e| e.value()) {
            Some(value) if value.is_cold() => {
                note(&mut cold, db_index, key, value, || db.log_refs(hash, key))
            }
            Some(_) => hits += 1,
            None => {}
        }
    }
    if let Some(stats) = stats
        && hits > 0
    {
        stats.ram_hits.fetch_add(hits, Ordering::Relaxed);
    }
    cold
}

/// The keys among `wanted` (database, key) whose values are out of memory, locking
/// each one's shard for a moment: for EXEC, whose keys are known before it takes
/// its locks.
pub fn cold_unlocked<'k>(
    ks: &Keyspace,
    now_ms: u64,
    wanted: impl Iterator<Item = (usize, &'k [u8])>,
) -> Vec<ColdKey> {
    let mut cold: Vec<ColdKey> = Vec::new();
    for (db, key) in wanted {
        let hash = ks.hash(key);
        let shard = ks.lock(ks.shard_of_hash(hash));
        let data = shard.db_ref(db);
        if let Some(entry) = data.peek(hash, key, now_ms) {
            note(&mut cold, db, key, entry.value(), || {
                data.log_refs(hash, key)
            });
        }
    }
    cold
}

/// Adds `key` to `cold` if `value` is a placeholder and the key is not listed yet.
fn note(
    cold: &mut Vec<ColdKey>,
    db: usize,
    key: &[u8],
    value: ValueRef<'_>,
    refs: impl FnOnce() -> Option<strata_keyspace::logref::LogRefs>,
) {
    if let ValueRef::Cold(c) = value
        && !cold.iter().any(|k| k.db == db && k.key == key)
    {
        cold.push(ColdKey {
            db,
            key: key.to_vec(),
            token: c.token(),
            refs: refs(),
        });
    }
}

/// Reads the values of `cmd`'s keys that are out of memory back at once, with the
/// command's shards held (see the module docs for when).
pub fn warm_held(
    server: &dyn Server,
    keys: &mut Keys<'_>,
    cmd: &Command,
    argv: &[&[u8]],
) -> Result<(), CmdError> {
    if cold_keys() == 0 || !needs_values(cmd, argv) {
        return Ok(());
    }
    let cold = cold_among(keys, server.tiered_stats(), cmd, argv);
    warm_all(server, keys, &cold)
}

/// Reads every value of `cold` back at once (waiting for the device if need be)
/// and puts it in place, with the shards of `keys` held.
pub fn warm_all(
    server: &dyn Server,
    keys: &mut Keys<'_>,
    cold: &[ColdKey],
) -> Result<(), CmdError> {
    let stats = server.tiered_stats();
    for c in cold {
        let value = read(server, stats, c)?;
        put_back(keys, c, value);
    }
    Ok(())
}

/// Puts a value read back in place of its placeholder (if still there), through
/// the shards `keys` holds.
pub fn put_back(keys: &mut Keys<'_>, c: &ColdKey, value: Value) {
    let now = keys.now_ms;
    let (hash, db) = keys.other_db_for(c.db, &c.key);
    db.warm(hash, &c.key, c.token, value, now);
}

/// Counts a value read back.
fn count(stats: Option<&TieredStats>, value: &Value) {
    if let Some(stats) = stats {
        stats.disk_reads.fetch_add(1, Ordering::Relaxed);
        let len = value.as_str().map_or(0, |s| s.len());
        stats
            .disk_read_bytes
            .fetch_add(len as u64, Ordering::Relaxed);
    }
}

/// Reads one value back from the store for `c` — from a buffer or the operating
/// system's cache if it is there, else waiting for the device — counting it.
pub fn read(
    server: &dyn Server,
    stats: Option<&TieredStats>,
    c: &ColdKey,
) -> Result<Value, CmdError> {
    if let Some(value) = server.read_cold_cached(c) {
        count(stats, &value);
        return Ok(value);
    }
    match server.read_cold(c) {
        Ok(Some(value)) => {
            count(stats, &value);
            Ok(value)
        }
        Ok(None) => Err(CmdError::err(
            "the value of this key is out of memory and could not be found in the log",
        )),
        Err(e) => Err(CmdError::coded(e)),
    }
}

/// Reads back the values among `cold` that need no wait for the device and hands
/// each to `put`; returns the others.
pub fn warm_cached(
    server: &dyn Server,
    cold: Vec<ColdKey>,
    mut put: impl FnMut(&ColdKey, Value),
) -> Vec<ColdKey> {
    let stats = server.tiered_stats();
    let mut rest = Vec::new();
    for c in cold {
        match server.read_cold_cached(&c) {
            Some(value) => {
                count(stats, &value);
                put(&c, value);
            }
            None => rest.push(c),
        }
    }
    rest
}

/// Puts values read back (elsewhere) in place, each only if its entry still holds
/// the placeholder it was read for.
pub fn install(ks: &Keyspace, key: &ColdKey, value: Value, now_ms: u64) -> bool {
    let hash = ks.hash(&key.key);
    ks.lock(ks.shard_of_hash(hash))
        .db(key.db)
        .warm(hash, &key.key, key.token, value, now_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(name: &str) -> &'static Command {
        crate::registry()
            .get(name.as_bytes())
            .expect("known command")
    }

    #[test]
    fn only_value_blind_commands_skip_the_fetch() {
        let get: Vec<&[u8]> = vec![b"get", b"k"];
        assert!(needs_values(cmd("get"), &get));
        let del: Vec<&[u8]> = vec![b"del", b"k"];
        assert!(!needs_values(cmd("del"), &del));
        let set: Vec<&[u8]> = vec![b"set", b"k", b"v", b"EX", b"10"];
        assert!(!needs_values(cmd("set"), &set));
        let set_get: Vec<&[u8]> = vec![b"set", b"k", b"v", b"Get"];
        assert!(needs_values(cmd("set"), &set_get));
        let rename: Vec<&[u8]> = vec![b"rename", b"k", b"j"];
        assert!(needs_values(cmd("rename"), &rename));
    }
}
