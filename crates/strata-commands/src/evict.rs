//! Enforcing `maxmemory`: eviction before commands run, and the OOM refusal.
//!
//! As in Redis 7.0's `processCommand`, every command first calls
//! [`perform_evictions`] while `maxmemory` is set: if the memory in use is over the
//! limit, keys chosen by the `maxmemory-policy` are deleted until it is under (or
//! nothing evictable is left, or a time budget is spent). When memory stays over the
//! limit, commands flagged `denyoom` — and, inside MULTI, every command queued, and an
//! EXEC whose queue holds a `denyoom` command — answer [`OOM_ERROR`]; reads go on.
//! The cron calls it too, so that lowering `maxmemory` at run time evicts down with
//! no traffic.
//!
//! Scripts (EVAL, FUNCTION) should call [`perform_evictions`] once when they start and
//! keep its answer for their writes, as Redis's `script_oom` does.
//!
//! # Measuring memory cheaply
//!
//! Reading jemalloc's `stats.allocated` means advancing its statistics epoch, which
//! merges every arena's counters: too slow per command. The [`Gauge`] reads it (less
//! what eviction cannot free, [`Server::memory_for_eviction`]) at most once per
//! [`REFRESH_MS`]. In between it follows what the threads running commands allocate
//! and free by their own counters ([`Server::thread_allocated`], two loads from
//! jemalloc's per-thread totals): each command adds its thread's change since its
//! last one, so a sustained write load cannot outrun the limit between readings.
//! Without such counters it subtracts an estimate of what evictions freed (each
//! evicted entry's [`strata_keyspace::Entry::memory_usage`]) and sees what writes
//! allocated only at the next reading. What other threads (lazy freeing, the cron)
//! allocate or free is seen at the next reading. With `maxmemory 0` none of this
//! runs: the cost is one relaxed atomic load per command.
//!
//! # Invariants
//!
//! - Eviction runs before a command takes its shard locks, never inside one, so it
//!   never changes what a transaction sees between its commands; it locks each
//!   victim's shard alone, through [`Keys`], so the deletion is a normal one: watchers
//!   are dirtied, the `evicted` event is published, tracking clients are told, and the
//!   deletion is logged like a DEL.
//! - One thread evicts at a time (the pool's lock); commands on other threads go
//!   ahead meanwhile (`Evict::Running`), as Redis runs commands while an eviction
//!   is still under way. The evicting thread reports its allocator count when it
//!   is done ([`Gauge::report`]), so the others' figures have what it freed.
//! - No key is evicted for a limit CONFIG SET has replaced: the loop checks the
//!   limit before each key, and [`Eviction::configure`] returns once an eviction
//!   under way has stopped.
//! - The OOM refusal when nothing is left to evict rests on a fresh reading of the
//!   allocator (at most once a millisecond unless the call evicted), not on an
//!   estimate frees elsewhere have not reached.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use strata_keyspace::evict::{Candidate, Policy, Pool};
use strata_keyspace::{Keyspace, Shard};

use crate::ctx::Keys;
use crate::effects::LogRule;
use crate::server::Server;
use crate::spec::Flags;
use crate::table::{Command, Registry};

/// Redis's reply to a `denyoom` command while memory stays over the limit.
pub const OOM_ERROR: &[u8] = b"OOM command not allowed when used memory > 'maxmemory'.";

/// How often, at most, the allocator's statistics are read while a limit is set.
/// Reading them advances jemalloc's epoch, merging every arena's counters: once a
/// millisecond, that cost 8% of the CPU of a SET load evicting on every command.
/// What a period's writes allocate is what memory may exceed the limit by until the
/// next reading: 4 ms of a fast pipelined load is a few hundred kilobytes.
pub const REFRESH_MS: u64 = 4;

/// How long one call may spend evicting before letting its command run (Redis's
/// default `maxmemory-eviction-tenacity` allows about 500 µs); the next command, or the
/// cron, goes on.
const TIME_BUDGET: Duration = Duration::from_micros(500);

/// Shards sampled per eviction round; each of their databases gives
/// `maxmemory-samples` keys to the pool. Two rounds' worth of samples per eviction
/// gave a hit ratio above Redis's on bench/eviction's zipfian load for both LRU and
/// LFU (one was enough for LRU, not for LFU); more cost throughput for little gain.
const SHARDS_PER_ROUND: usize = 2;

/// `maxmemory-policy`, as the eviction reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxmemoryPolicy {
    NoEviction,
    /// Any key, chosen by this policy.
    AllKeys(Policy),
    /// Keys with a TTL only.
    Volatile(Policy),
    /// No key is deleted: string values move out of memory, least recently used
    /// first (see `perform_tiering`).
    Tiered,
}

impl MaxmemoryPolicy {
    fn encode(self) -> u8 {
        let code = |p| match p {
            Policy::Lru => 1,
            Policy::Lfu => 2,
            Policy::Random => 3,
            Policy::Ttl => 4,
        };
        match self {
            MaxmemoryPolicy::NoEviction => 0,
            MaxmemoryPolicy::Tiered => 0x20,
            MaxmemoryPolicy::AllKeys(p) => code(p),
            MaxmemoryPolicy::Volatile(p) => 0x10 | code(p),
        }
    }

    fn decode(code: u8) -> MaxmemoryPolicy {
        if code == 0x20 {
            return MaxmemoryPolicy::Tiered;
        }
        let policy = match code & 0x0f {
            1 => Policy::Lru,
            2 => Policy::Lfu,
            3 => Policy::Random,
            4 => Policy::Ttl,
            _ => return MaxmemoryPolicy::NoEviction,
        };
        if code & 0x10 != 0 {
            MaxmemoryPolicy::Volatile(policy)
        } else {
            MaxmemoryPolicy::AllKeys(policy)
        }
    }

    /// Whether access fields hold LFU counters under this policy.
    pub fn is_lfu(self) -> bool {
        matches!(
            self,
            MaxmemoryPolicy::AllKeys(Policy::Lfu) | MaxmemoryPolicy::Volatile(Policy::Lfu)
        )
    }
}

/// The memory in use as eviction sees it (see the module docs).
#[derive(Default)]
pub struct Gauge {
    /// The last figure read, and when (Unix milliseconds).
    used: AtomicU64,
    at_ms: AtomicU64,
    /// Bytes evictions freed since, by estimate (when threads are not counted).
    freed: AtomicU64,
    /// Net bytes the threads running commands allocated since the last figure.
    grown: AtomicI64,
    /// Counts figures, so that a thread's count from before the last one is not used.
    generation: AtomicU64,
    /// Whether threads' own counters are followed (then `freed` is not needed).
    counting: AtomicBool,
}

thread_local! {
    /// This thread's allocator count when it last reported, and the figure's
    /// generation then.
    static LAST_COUNT: Cell<(u64, u64)> = const { Cell::new((u64::MAX, 0)) };
}

impl Gauge {
    /// The memory in use: a new figure from `read` if the last one is older than
    /// [`REFRESH_MS`], else the last one plus what the threads running commands
    /// allocated since (`thread_count` is this thread's net count of allocated
    /// bytes, when the allocator keeps one), or less what evictions freed.
    pub fn used(&self, now_ms: u64, read: impl FnOnce() -> u64, thread_count: Option<u64>) -> u64 {
        let at = self.at_ms.load(Ordering::Relaxed);
        if now_ms.wrapping_sub(at) >= REFRESH_MS
            && self
                .at_ms
                .compare_exchange(at, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.set(read());
        }
        self.report(thread_count);
        self.estimate()
    }

    /// Adds what this thread allocated, net, since its last report (`thread_count`
    /// is its count now, when the allocator keeps one). An evicting thread reports
    /// when it is done, so that the others' next figures have what it freed:
    /// left to its next command, another thread's could find memory still over the
    /// limit by as much and evict it all again.
    pub fn report(&self, thread_count: Option<u64>) {
        if let Some(count) = thread_count {
            if !self.counting.load(Ordering::Relaxed) {
                self.counting.store(true, Ordering::Relaxed);
            }
            // Counted from this thread's last report, if it was since the figure.
            let generation = self.generation.load(Ordering::Acquire);
            let (seen_in, seen) = LAST_COUNT.get();
            if seen_in == generation {
                let delta = count.wrapping_sub(seen) as i64;
                if delta != 0 {
                    self.grown.fetch_add(delta, Ordering::Relaxed);
                }
            }
            LAST_COUNT.set((generation, count));
        }
    }

    /// Whether the last figure was read before `now_ms`.
    fn read_before(&self, now_ms: u64) -> bool {
        self.at_ms.load(Ordering::Relaxed) != now_ms
    }

    /// Takes `v`, read at `now_ms`, as the new figure (the next periodic reading
    /// is due [`REFRESH_MS`] after it).
    fn read_now(&self, now_ms: u64, v: u64) {
        self.at_ms.store(now_ms, Ordering::Relaxed);
        self.set(v);
    }

    /// Takes a new figure.
    pub fn set(&self, v: u64) {
        // Generations are unique across gauges, as the threads' reports are shared.
        static GENERATIONS: AtomicU64 = AtomicU64::new(1);
        self.used.store(v, Ordering::Relaxed);
        self.freed.store(0, Ordering::Relaxed);
        self.grown.store(0, Ordering::Relaxed);
        self.generation.store(
            GENERATIONS.fetch_add(1, Ordering::Relaxed),
            Ordering::Release,
        );
    }

    fn estimate(&self) -> u64 {
        let grown = self.grown.load(Ordering::Relaxed);
        self.used
            .load(Ordering::Relaxed)
            .saturating_add_signed(grown)
            .saturating_sub(self.freed.load(Ordering::Relaxed))
    }

    /// Counts what an eviction freed, unless the evicting thread's own counter does.
    fn freed(&self, bytes: u64) {
        if !self.counting.load(Ordering::Relaxed) {
            self.freed.fetch_add(bytes, Ordering::Relaxed);
        }
    }
}

/// The server's eviction state: the limit, the policy, the pool, the counters.
pub struct Eviction {
    maxmemory: AtomicU64,
    policy: AtomicU8,
    samples: AtomicU32,
    pub gauge: Gauge,
    /// The candidates, and the random state of the sampling.
    pool: Mutex<(Pool, u64)>,
    /// Keys evicted (INFO's `evicted_keys`).
    pub evicted_keys: AtomicU64,
    /// Values moved out of memory by `maxmemory-policy tiered`.
    pub tiered_out: AtomicU64,
}

/// What [`perform_evictions`] achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evict {
    /// Memory is under the limit (or there is none).
    Ok,
    /// Over the limit, but evicting goes on (the time budget ran out).
    Running,
    /// Over the limit and nothing (more) can be evicted.
    Fail,
}

impl Default for Eviction {
    fn default() -> Self {
        Eviction::new()
    }
}

impl Eviction {
    pub fn new() -> Eviction {
        Eviction {
            maxmemory: AtomicU64::new(0),
            policy: AtomicU8::new(0),
            samples: AtomicU32::new(5),
            gauge: Gauge::default(),
            pool: Mutex::new((Pool::default(), 0x2545_f491_4f6c_dd1d)),
            evicted_keys: AtomicU64::new(0),
            tiered_out: AtomicU64::new(0),
        }
    }

    /// Applies `maxmemory`, `maxmemory-policy` and `maxmemory-samples`. Returns once
    /// an eviction under the old settings has stopped (it checks the limit before
    /// each key), so that after CONFIG SET maxmemory no key goes for the old limit,
    /// as in Redis, where the command and the eviction share one thread. The wait
    /// is bounded: a caller holding something an eviction needs cannot deadlock.
    pub fn configure(&self, maxmemory: u64, policy: MaxmemoryPolicy, samples: u32) {
        self.policy.store(policy.encode(), Ordering::Relaxed);
        self.samples.store(samples.max(1), Ordering::Relaxed);
        self.maxmemory.store(maxmemory, Ordering::Relaxed);
        drop(self.pool.try_lock_for(Duration::from_millis(100)));
    }

    /// Whether a limit is set.
    #[inline]
    pub fn enabled(&self) -> bool {
        self.maxmemory.load(Ordering::Relaxed) != 0
    }

    pub fn maxmemory(&self) -> u64 {
        self.maxmemory.load(Ordering::Relaxed)
    }

    pub fn policy(&self) -> MaxmemoryPolicy {
        MaxmemoryPolicy::decode(self.policy.load(Ordering::Relaxed))
    }
}

/// Whether a command that finds memory over the limit must be refused (Redis 7.0's
/// `reject_cmd_on_oom`): `denyoom` commands, an EXEC queueing one, and inside MULTI
/// everything but EXEC, DISCARD, QUIT and RESET (queueing takes memory too).
pub fn rejects_on_oom(cmd: &Command, queued: Option<&[Vec<Vec<u8>>]>, registry: &Registry) -> bool {
    if cmd.flags.contains(Flags::DENYOOM) {
        return true;
    }
    let top = cmd.parent.is_none();
    if top && cmd.name == "exec" {
        return queued.is_some_and(|q| {
            q.iter().any(|argv| {
                let args: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
                crate::exec::resolve(registry, &args)
                    .is_ok_and(|c| c.flags.contains(Flags::DENYOOM))
            })
        });
    }
    queued.is_some() && !(top && matches!(cmd.name, "discard" | "quit" | "reset"))
}

/// Evicts keys until memory is under `maxmemory` (see the module docs). Must be
/// called with no shard held.
pub fn perform_evictions(server: &dyn Server, ks: &Keyspace, now_ms: u64) -> Evict {
    let Some(ev) = server.eviction() else {
        return Evict::Ok;
    };
    let max = ev.maxmemory();
    if max == 0 {
        return Evict::Ok;
    }
    let read = || server.memory_for_eviction();
    if ev.gauge.used(now_ms, read, server.thread_allocated()) <= max {
        return Evict::Ok;
    }
    let setting = ev.policy();
    let (policy, volatile) = match setting {
        MaxmemoryPolicy::NoEviction => return Evict::Fail,
        MaxmemoryPolicy::Tiered => return perform_tiering(server, ks, ev, max, now_ms),
        MaxmemoryPolicy::AllKeys(p) => (p, false),
        MaxmemoryPolicy::Volatile(p) => (p, true),
    };
    // One thread evicts at a time. A command arriving meanwhile goes ahead rather
    // than wait, as Redis lets commands run while an eviction is under way
    // (`EVICT_RUNNING`): the evicting thread frees what it found over the limit
    // and the next command's call frees what came since.
    let Some(mut guard) = ev.pool.try_lock() else {
        return Evict::Running;
    };
    let used = ev.gauge.estimate();
    if used <= max {
        return Evict::Ok;
    }
    let result = evict_until(
        server,
        ks,
        ev,
        &mut guard,
        (policy, volatile),
        max,
        used,
        now_ms,
    );
    ev.gauge.report(server.thread_allocated());
    result
}

/// [`perform_evictions`]' loop, with the pool held: evicts until `used - max`
/// bytes are freed, the time budget is spent or the limit changes.
#[allow(clippy::too_many_arguments)]
fn evict_until(
    server: &dyn Server,
    ks: &Keyspace,
    ev: &Eviction,
    guard: &mut (Pool, u64),
    (policy, volatile): (Policy, bool),
    max: u64,
    used: u64,
    now_ms: u64,
) -> Evict {
    let (pool, seed) = guard;
    pool.use_policy(policy, volatile);
    let mut rng = move || xorshift(seed);
    let samples = ev.samples.load(Ordering::Relaxed) as usize;
    let to_free = used - max;
    let mut freed = 0u64;
    let start = Instant::now();
    let mut evicted = 0u64;
    let mut stale_retries = 0;
    while freed < to_free {
        if ev.maxmemory() != max {
            // CONFIG SET changed the limit: the next call evicts for the new one.
            return Evict::Running;
        }
        let candidate = if policy == Policy::Random {
            random_candidate(ks, volatile, now_ms, &mut rng)
        } else {
            fill_pool(ks, pool, policy, volatile, samples, now_ms, &mut rng);
            pool.pop_best()
        };
        let Some(candidate) = candidate else {
            // Nothing left to evict. The figure may be an estimate that frees
            // elsewhere have not reached yet: after evicting, or once a
            // millisecond, the refusal rests on a fresh reading.
            if evicted > 0 || ev.gauge.read_before(now_ms) {
                ev.gauge.report(server.thread_allocated());
                ev.gauge.read_now(now_ms, server.memory_for_eviction());
            }
            return if ev.gauge.estimate() <= max {
                Evict::Ok
            } else {
                Evict::Fail
            };
        };
        // A candidate used since it was sampled goes back with its new score, unless
        // it is still the best (a few times at most, so stale pools cannot loop).
        let recheck = policy != Policy::Random && stale_retries < 16;
        match evict_key(
            server,
            ks,
            &candidate,
            policy,
            volatile,
            recheck.then_some(&mut *pool),
            now_ms,
        ) {
            Victim::Evicted(bytes) => {
                freed += bytes;
                evicted += 1;
                ev.gauge.freed(bytes);
                ev.evicted_keys.fetch_add(1, Ordering::Relaxed);
                stale_retries = 0;
            }
            Victim::Stale => stale_retries += 1,
            Victim::Gone => {}
        }
        if evicted.is_multiple_of(16) && start.elapsed() > TIME_BUDGET {
            return if freed >= to_free {
                Evict::Ok
            } else {
                Evict::Running
            };
        }
    }
    Evict::Ok
}

/// The next number of a xorshift64 sequence (the sampling's randomness).
fn xorshift(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// Samples random shards into the pool; if they hold nothing evictable, every shard.
fn fill_pool(
    ks: &Keyspace,
    pool: &mut Pool,
    policy: Policy,
    volatile: bool,
    samples: usize,
    now_ms: u64,
    rng: &mut impl FnMut() -> u64,
) {
    fill_from_shards(ks, pool, samples, rng, |shard, pool, rng| {
        sample_shard(shard, pool, policy, volatile, samples, now_ms, rng)
    });
}

/// Calls `sample` on [`SHARDS_PER_ROUND`] random shards; if the pool is still
/// empty, on every shard from a random one until it holds `samples` candidates
/// (what may go can be rare among many keys).
fn fill_from_shards<R: FnMut() -> u64>(
    ks: &Keyspace,
    pool: &mut Pool,
    samples: usize,
    rng: &mut R,
    mut sample: impl FnMut(&Shard, &mut Pool, &mut R),
) {
    let n = ks.num_shards();
    for _ in 0..SHARDS_PER_ROUND.min(n) {
        let s = rng() as usize % n;
        sample(&ks.lock(s), pool, rng);
    }
    if pool.is_empty() {
        let first = rng() as usize % n;
        for k in 0..n {
            sample(&ks.lock((first + k) % n), pool, rng);
            if pool.len() >= samples {
                break;
            }
        }
    }
}

/// Offers `samples` keys of each database of `shard` to the pool.
fn sample_shard(
    shard: &Shard,
    pool: &mut Pool,
    policy: Policy,
    volatile: bool,
    samples: usize,
    now_ms: u64,
    rng: &mut impl FnMut() -> u64,
) {
    for (i, db) in shard.dbs().iter().enumerate() {
        if db.is_empty() || (volatile && db.expires_len() == 0) {
            continue;
        }
        db.eviction_sample(policy, volatile, samples, now_ms, rng, |score, key| {
            pool.offer(score, i, key)
        });
    }
}

/// A random key (with a TTL when `volatile`) from a random shard, looking further
/// when that shard has none.
fn random_candidate(
    ks: &Keyspace,
    volatile: bool,
    now_ms: u64,
    rng: &mut impl FnMut() -> u64,
) -> Option<Candidate> {
    let n = ks.num_shards();
    let first = rng() as usize % n;
    for k in 0..n {
        let shard = ks.lock((first + k) % n);
        let dbs = shard.dbs();
        let start = rng() as usize % dbs.len().max(1);
        for j in 0..dbs.len() {
            let i = (start + j) % dbs.len();
            let db = &dbs[i];
            if db.is_empty() || (volatile && db.expires_len() == 0) {
                continue;
            }
            let mut found = None;
            db.eviction_sample(Policy::Random, volatile, 1, now_ms, rng, |_, key| {
                found = Some(key.to_vec())
            });
            if let Some(key) = found {
                return Some(Candidate {
                    score: 0,
                    db: i,
                    key,
                });
            }
        }
    }
    None
}

/// `maxmemory-policy tiered`: moves the least recently used string values out of
/// memory until it is under the limit. Nothing is deleted and nothing is logged —
/// each value moved is already its key's live record in the store — so when no value
/// in memory can go (collections, short strings, or everything already out), memory
/// stays over and commands that need more get the OOM error, as under
/// `noeviction`.
fn perform_tiering(
    server: &dyn Server,
    ks: &Keyspace,
    ev: &Eviction,
    max: u64,
    now_ms: u64,
) -> Evict {
    // As in `perform_evictions`: one thread at a time, the others go ahead.
    let Some(mut guard) = ev.pool.try_lock() else {
        return Evict::Running;
    };
    let used = ev.gauge.estimate();
    if used <= max {
        return Evict::Ok;
    }
    // The values about to leave memory must be readable from the store: their
    // records (appended before the replies that acknowledged them) go to the
    // operating system first, and nothing leaves while the log cannot be written.
    if !server.prepare_tiering() {
        return Evict::Fail;
    }
    let (pool, seed) = &mut *guard;
    pool.use_policy(Policy::Lru, false);
    let mut rng = move || xorshift(seed);
    let samples = ev.samples.load(Ordering::Relaxed) as usize;
    let to_free = used - max;
    let (mut freed, mut moved) = (0u64, 0u64);
    let start = Instant::now();
    while freed < to_free {
        fill_tier_pool(ks, pool, samples, now_ms, &mut rng);
        let Some(c) = pool.pop_best() else {
            return Evict::Fail;
        };
        let hash = ks.hash(&c.key);
        let bytes = ks
            .lock(ks.shard_of_hash(hash))
            .db(c.db)
            .make_cold(hash, &c.key, now_ms);
        if let Some(bytes) = bytes {
            freed += bytes as u64;
            moved += 1;
            ev.gauge.freed(bytes as u64);
            ev.tiered_out.fetch_add(1, Ordering::Relaxed);
        }
        if moved.is_multiple_of(16) && start.elapsed() > TIME_BUDGET {
            return if freed >= to_free {
                Evict::Ok
            } else {
                Evict::Running
            };
        }
    }
    Evict::Ok
}

/// [`fill_pool`] for `tiered`: samples values that may leave memory.
fn fill_tier_pool(
    ks: &Keyspace,
    pool: &mut Pool,
    samples: usize,
    now_ms: u64,
    rng: &mut impl FnMut() -> u64,
) {
    fill_from_shards(ks, pool, samples, rng, |shard, pool, rng| {
        for (i, db) in shard.dbs().iter().enumerate() {
            if !db.is_empty() {
                db.tier_sample(samples, now_ms, rng, |score, key| pool.offer(score, i, key));
            }
        }
    });
}

enum Victim {
    /// Deleted; the bytes it held, by estimate.
    Evicted(u64),
    /// Used since it was sampled: put back in the pool with its new score.
    Stale,
    /// No longer there (or no longer has a TTL, under a volatile policy).
    Gone,
}

/// Deletes one candidate through the normal paths, its shard locked alone.
fn evict_key(
    server: &dyn Server,
    ks: &Keyspace,
    c: &Candidate,
    policy: Policy,
    volatile: bool,
    recheck: Option<&mut Pool>,
    now_ms: u64,
) -> Victim {
    let mut keys = Keys::new(ks, c.db, now_ms);
    keys.logging_flag = server.logging_flag();
    keys.notify = server.pubsub();
    keys.lock_keys(std::iter::once(c.key.as_slice()));
    let (hash, db) = keys.other_db_for(c.db, &c.key);
    // A key whose time has come is removed as expired (the lookup does it), so that
    // samples stop finding it.
    if !db.contains(hash, &c.key, now_ms) {
        keys.flush_events();
        return Victim::Gone;
    }
    let (hash, db) = keys.other_db_for(c.db, &c.key);
    let Some(entry) = db.peek(hash, &c.key, now_ms) else {
        return Victim::Gone;
    };
    if volatile && !entry.has_ttl() {
        return Victim::Gone;
    }
    if let Some(pool) = recheck {
        let score = db.eviction_score(entry, policy, now_ms);
        if score < c.score && pool.best_score().is_some_and(|best| best > score) {
            pool.offer(score, c.db, &c.key);
            return Victim::Stale;
        }
    }
    let slot_share = db.table_bytes().checked_div(db.len()).unwrap_or(0);
    let bytes = (entry.memory_usage() + slot_share) as u64;
    let value = db.remove(hash, &c.key, now_ms);
    keys.changed_in(c.db, &c.key, "evicted");
    keys.finish_command(LogRule::Value, &[]);
    keys.flush_events();
    if let Some(hub) = keys.notify
        && hub.tracking.active() > 0
    {
        hub.tracking
            .flush_bcast(0, &hub.limits, &mut keys.tracking, now_ms);
    }
    let mut records = keys.take_records();
    if !records.is_empty() {
        // A failed append leaves the store refusing writes until its reconcile,
        // which rewrites whatever differs from memory, this deletion included.
        // A deletion has no records for the keyspace to list.
        let _ = server.log(&mut records, now_ms, &mut crate::effects::Located::new());
    }
    drop(keys);
    // `lazyfree-lazy-eviction`: a value whose freeing is real work goes to the
    // background, as Redis's `dbAsyncDelete` does.
    if let Some(e) = value
        && e.value().free_lazily()
        && server.lazyfree().eviction
    {
        server.free_later(vec![strata_keyspace::Detached::Value(e.into_value())]);
    }
    Victim::Evicted(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_round_trip() {
        for p in [
            MaxmemoryPolicy::NoEviction,
            MaxmemoryPolicy::AllKeys(Policy::Lru),
            MaxmemoryPolicy::AllKeys(Policy::Lfu),
            MaxmemoryPolicy::AllKeys(Policy::Random),
            MaxmemoryPolicy::Volatile(Policy::Lru),
            MaxmemoryPolicy::Volatile(Policy::Lfu),
            MaxmemoryPolicy::Volatile(Policy::Random),
            MaxmemoryPolicy::Volatile(Policy::Ttl),
            MaxmemoryPolicy::Tiered,
        ] {
            assert_eq!(MaxmemoryPolicy::decode(p.encode()), p);
        }
    }

    #[test]
    fn gauge_reads_the_allocator_at_most_once_per_period() {
        static READS: AtomicU64 = AtomicU64::new(0);
        fn read() -> u64 {
            READS.fetch_add(1, Ordering::Relaxed);
            1000
        }
        let g = Gauge::default();
        assert_eq!(g.used(10_000, read, None), 1000);
        g.freed(300);
        assert_eq!(g.used(10_000, read, None), 700);
        assert_eq!(READS.load(Ordering::Relaxed), 1);
        assert_eq!(g.used(10_000 + REFRESH_MS, read, None), 1000);
        assert_eq!(READS.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn gauge_follows_the_threads_counts_between_readings() {
        let g = Gauge::default();
        let read = || 1000;
        // The first report of a thread after a reading sets its baseline.
        assert_eq!(g.used(10_000, read, Some(50_000)), 1000);
        assert_eq!(g.used(10_000, read, Some(50_400)), 1400);
        // Frees count down; an eviction's own estimate is then not subtracted too.
        g.freed(300);
        assert_eq!(g.used(10_001, read, Some(50_100)), 1100);
        // Another thread's counts add up with this one's.
        let other = std::thread::scope(|s| {
            s.spawn(|| {
                g.used(10_001, read, Some(7));
                g.used(10_002, read, Some(207))
            })
            .join()
            .unwrap()
        });
        assert_eq!(other, 1300);
        // A new reading starts over: earlier counts are in it.
        assert_eq!(g.used(10_000 + REFRESH_MS, || 5000, Some(50_100)), 5000);
        assert_eq!(g.used(10_000 + REFRESH_MS, read, Some(50_150)), 5050);
    }

    /// What an eviction freed is in the figure other threads see as soon as it
    /// reports, not at its thread's next command: until then another thread found
    /// memory still over the limit by as much, and evicted it again.
    #[test]
    fn an_eviction_s_frees_reach_the_other_threads_when_it_reports() {
        let g = Gauge::default();
        let read = || 1000;
        let on_other_thread = |now_ms, count| {
            std::thread::scope(|s| {
                s.spawn(|| g.used(now_ms, read, Some(count)))
                    .join()
                    .unwrap()
            })
        };
        assert_eq!(g.used(10_000, read, Some(8_000)), 1000);
        assert_eq!(on_other_thread(10_000, 70), 1000);
        // This thread evicts 400 bytes: its count falls, and it reports.
        g.report(Some(7_600));
        assert_eq!(on_other_thread(10_001, 70), 600);
        assert_eq!(g.used(10_001, read, Some(7_600)), 600);
    }
}
