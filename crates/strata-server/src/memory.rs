//! The process's memory as the allocator counts it.
//!
//! Reading jemalloc's totals means advancing its statistics epoch (merging every
//! arena's counters), so the hot path never does it: eviction reads it through
//! [`strata_commands::evict::Gauge`], at most once per millisecond and only while
//! `maxmemory` is set; INFO and MEMORY read it on demand.

use std::sync::atomic::Ordering;

/// The allocator INFO names.
pub const ALLOCATOR: &str = "jemalloc-5.3.0";

/// Bytes currently allocated by the application (jemalloc's `stats.allocated`, read
/// after advancing its statistics epoch). Zero if the allocator cannot say.
pub fn allocated() -> u64 {
    let _ = tikv_jemalloc_ctl::epoch::advance();
    tikv_jemalloc_ctl::stats::allocated::read().map_or(0, |n| n as u64)
}

thread_local! {
    /// jemalloc's totals of what this thread allocated and freed (read once per thread).
    static THREAD_COUNTS: Option<(
        tikv_jemalloc_ctl::thread::ThreadLocal<u64>,
        tikv_jemalloc_ctl::thread::ThreadLocal<u64>,
    )> = tikv_jemalloc_ctl::thread::allocatedp::read()
        .ok()
        .zip(tikv_jemalloc_ctl::thread::deallocatedp::read().ok());
}

/// Bytes this thread has allocated less those it has freed (wrapping), from
/// jemalloc's per-thread totals: two loads. `None` if the allocator cannot say.
pub fn thread_allocated() -> Option<u64> {
    THREAD_COUNTS.with(|c| c.map(|(a, d)| a.get().wrapping_sub(d.get())))
}

/// Turns jemalloc's background threads on or off (`jemalloc-bg-thread`): with them,
/// memory freed and left unused is returned to the operating system after jemalloc's
/// decay time even when the server is idle; without them only when a thread of the
/// server next allocates. An allocator that cannot do it is left as it is.
pub fn set_background_purge(on: bool) {
    if let Err(e) = tikv_jemalloc_ctl::background_thread::write(on) {
        tracing::debug!("jemalloc background threads could not be switched: {e}");
    }
}

/// Returns the dirty pages of every jemalloc arena to the operating system now
/// (`arena.<MALLCTL_ARENAS_ALL>.purge`), as Redis's MEMORY PURGE does; false if
/// jemalloc refused.
#[allow(unsafe_code)] // One call into jemalloc's control interface, which has no safe wrapper for it.
pub fn purge() -> bool {
    // SAFETY: the name is NUL-terminated, and this control neither reads nor writes
    // a value: jemalloc requires every pointer null and the length 0.
    let code = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"arena.4096.purge".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    code == 0
}

/// jemalloc's figures after advancing its epoch: (allocated, active, resident,
/// mapped, retained), in bytes; zeros where it cannot say.
pub fn allocator_stats() -> AllocatorStats {
    use tikv_jemalloc_ctl::stats;
    let _ = tikv_jemalloc_ctl::epoch::advance();
    let read = |r: tikv_jemalloc_ctl::Result<usize>| r.map_or(0, |n| n as u64);
    AllocatorStats {
        allocated: read(stats::allocated::read()),
        active: read(stats::active::read()),
        resident: read(stats::resident::read()),
        mapped: read(stats::mapped::read()),
        retained: read(stats::retained::read()),
    }
}

/// See [`allocator_stats`].
#[derive(Clone, Copy, Debug, Default)]
pub struct AllocatorStats {
    pub allocated: u64,
    pub active: u64,
    pub resident: u64,
    pub mapped: u64,
    pub retained: u64,
}

/// The eviction's view of `maxmemory-policy`.
pub fn eviction_policy(
    policy: crate::config::MaxmemoryPolicy,
) -> strata_commands::evict::MaxmemoryPolicy {
    use crate::config::MaxmemoryPolicy as C;
    use strata_commands::evict::MaxmemoryPolicy as E;
    use strata_keyspace::evict::Policy;
    match policy {
        C::Noeviction => E::NoEviction,
        C::AllkeysLru => E::AllKeys(Policy::Lru),
        C::AllkeysLfu => E::AllKeys(Policy::Lfu),
        C::AllkeysRandom => E::AllKeys(Policy::Random),
        C::VolatileLru => E::Volatile(Policy::Lru),
        C::VolatileLfu => E::Volatile(Policy::Lfu),
        C::VolatileRandom => E::Volatile(Policy::Random),
        C::VolatileTtl => E::Volatile(Policy::Ttl),
        C::Tiered => E::Tiered,
    }
}

/// What deleting keys cannot free (Redis's `mem_not_counted_for_evict`, which there
/// is the AOF and replica buffers): with persistence on, the store's index, which
/// holds an entry for every key — and a tombstone for every deleted one until the
/// next compaction — so an eviction does not shrink it, and what a running
/// compaction holds for its work (Redis leaves out its rewrite buffers likewise).
pub fn not_counted_for_evict(state: &crate::state::ServerState) -> u64 {
    state
        .persist
        .load()
        .as_ref()
        .and_then(|p| p.engine())
        .map_or(0, |e| e.bookkeeping_memory())
}

/// The figures of MEMORY STATS / DOCTOR and INFO memory.
pub fn report(state: &crate::state::ServerState) -> strata_commands::MemoryReport {
    let a = allocator_stats();
    let peak = state
        .peak_memory
        .fetch_max(a.allocated, Ordering::Relaxed)
        .max(a.allocated);
    let clients = strata_commands::Server::clients(state);
    let buffers: u64 = clients
        .iter()
        .map(|c| (c.qbuf.load(Ordering::Relaxed) + c.obuf.load(Ordering::Relaxed)) as u64)
        .sum();
    strata_commands::MemoryReport {
        total: a.allocated,
        peak,
        startup: state.startup_memory.load(Ordering::Relaxed),
        clients_normal: buffers,
        clients: clients.len() as u64,
        allocator_active: a.active,
        allocator_resident: a.resident,
        rss: crate::info::rss_bytes(),
        not_counted_for_evict: not_counted_for_evict(state),
    }
}

/// MEMORY MALLOC-STATS: jemalloc's own report (`malloc_stats_print`), as Redis
/// gives it: the options in force, the totals, and per arena its bins, large
/// classes, extents and metadata.
#[allow(unsafe_code)] // jemalloc writes its report through a C callback.
pub fn malloc_stats() -> String {
    use std::ffi::{CStr, c_char, c_void};
    /// jemalloc's write callback: appends one piece of the report.
    unsafe extern "C" fn append(opaque: *mut c_void, text: *const c_char) {
        // SAFETY: `opaque` is the `String` below, borrowed for the call only, and
        // jemalloc passes a NUL-terminated string valid for this call.
        let (out, text) = unsafe { (&mut *opaque.cast::<String>(), CStr::from_ptr(text)) };
        out.push_str(&text.to_string_lossy());
    }
    let mut out = String::new();
    // SAFETY: `append` matches the callback jemalloc expects, `out` outlives the call
    // and nothing else touches it meanwhile; null options select the full report.
    unsafe {
        tikv_jemalloc_sys::malloc_stats_print(
            Some(append),
            (&raw mut out).cast::<c_void>(),
            std::ptr::null(),
        )
    };
    out
}
