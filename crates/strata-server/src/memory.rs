//! The process's memory as the allocator counts it.

/// The allocator INFO names.
pub const ALLOCATOR: &str = "jemalloc-5.3.0";

/// Bytes currently allocated by the application (jemalloc's `stats.allocated`, read
/// after advancing its statistics epoch). Zero if the allocator cannot say.
pub fn allocated() -> u64 {
    let _ = tikv_jemalloc_ctl::epoch::advance();
    tikv_jemalloc_ctl::stats::allocated::read().map_or(0, |n| n as u64)
}
