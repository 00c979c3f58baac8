//! The background cron: active expiry, incremental rehashing, eviction down to
//! `maxmemory` and statistics samples,
//! `hz` times a second, on its own thread; once a second, the persistence checks
//! (`save` points, automatic compaction).
//!
//! Each tick visits every shard once, removing keys whose time has come (from the
//! per-database expiry index, oldest first) and advancing any table resize. Work per
//! tick is bounded by a time budget of a quarter of the tick, as Redis bounds its
//! slow expiry cycle, and resumes at the next tick where it stopped.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use strata_keyspace::Detached;

use crate::state::{ServerState, unix_ms};

/// Keys removed per database per visit before checking the time budget.
const EXPIRE_BATCH: usize = 64;
/// Slots of a draining table migrated per database per visit.
const REHASH_SLOTS: usize = 1024;

pub fn spawn(state: Arc<ServerState>) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("strata-cron".into())
        .spawn(move || {
            let mut next_shard = 0;
            let mut last_sample = Instant::now();
            let mut last_persist = Instant::now();
            while !state.is_shutting_down() {
                let hz = state.config.read().hz.clamp(1, 500) as u64;
                let period = Duration::from_micros(1_000_000 / hz);
                let tick = Instant::now();
                next_shard = run_tick(&state, next_shard, period / 4);
                evict(&state);
                if last_sample.elapsed() >= Duration::from_millis(100) {
                    state.stats.sample_ops(unix_ms());
                    last_sample = Instant::now();
                }
                if last_persist.elapsed() >= Duration::from_secs(1) {
                    crate::persist::control::tick(&state);
                    last_persist = Instant::now();
                }
                let spent = tick.elapsed();
                std::thread::sleep(period.saturating_sub(spent).max(Duration::from_millis(1)));
            }
        })
        .expect("spawn cron thread")
}

/// Visits shards from `start` until all are visited or the budget is spent; returns
/// the shard to start from next time.
pub fn run_tick(state: &ServerState, start: usize, budget: Duration) -> usize {
    let ks = &state.keyspace;
    let n = ks.num_shards();
    let deadline = Instant::now() + budget;
    // Keys do not expire while clients are paused, as in Redis.
    let expire = state.active_expire_enabled() && !state.pause.active(unix_ms());
    let hub = &state.pubsub;
    let notify = hub.notify_flags() != 0 || hub.tracking.active() > 0;
    let mut tracking = strata_commands::tracking::Pending::default();
    let lazy_expire = state.lazyfree.switches().expire;
    for k in 0..n {
        let s = (start + k) % n;
        let now = unix_ms();
        {
            let mut shard = ks.lock(s);
            for (i, db) in shard.dbs_mut().iter_mut().enumerate() {
                if expire {
                    loop {
                        let (_, more) = db.expire_cycle(now, EXPIRE_BATCH);
                        if !more || Instant::now() >= deadline {
                            break;
                        }
                    }
                }
                // Big values of expired keys: to the background with
                // lazyfree-lazy-expire, dropped here otherwise.
                let values = db.take_expired_values();
                if lazy_expire && !values.is_empty() {
                    state
                        .lazyfree
                        .free_later(values.into_iter().map(Detached::Value).collect());
                }
                db.rehash_some(REHASH_SLOTS);
                // Keyspace events of keys expired here (or by lookups whose command
                // did not publish them).
                // Clients tracking expired keys are told too.
                if notify && db.has_events() {
                    let events = db.take_events();
                    for (event, key) in &events {
                        if *event == strata_keyspace::KeyEvent::Expired {
                            hub.tracking
                                .invalidate(key, 0, &hub.limits, &mut tracking, now);
                        }
                    }
                    strata_commands::notify::publish_logged(hub, events, i, now);
                }
            }
        }
        hub.tracking.flush_bcast(0, &hub.limits, &mut tracking, now);
        if Instant::now() >= deadline {
            return (s + 1) % n;
        }
    }
    let _ = state
        .peak_memory
        .fetch_max(crate::memory::allocated(), Ordering::Relaxed);
    start
}

/// Evicts down to `maxmemory` with no command to do it (after CONFIG SET lowered the
/// limit, or when commands' own time budgets ran out).
fn evict(state: &ServerState) {
    if state.eviction.enabled() && !state.loading.load(Ordering::Acquire) {
        strata_commands::evict::perform_evictions(state, &state.keyspace, unix_ms());
    }
}
