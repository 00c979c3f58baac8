//! Rebuilding the index at open, on several cores.
//!
//! The log replays its records (or hint entries) in log order on one thread.
//! When the index has independent parts ([`Index::partitions`]), the records
//! are dealt out by part: the replaying thread applies one share itself and
//! hands the others, in batches, to worker threads. Each part still sees its
//! records in log order, because one part always goes to the same thread
//! through a first-in, first-out channel, so the result is the index a
//! sequential replay would build.

use std::num::NonZero;
use std::path::Path;
use std::sync::mpsc::{SyncSender, sync_channel};

use crate::error::Result;
use crate::index::{Change, Index};
use crate::log::{Log, Replayed};
use crate::options::LogOptions;
use crate::record::Kind;
use crate::segment::Location;

/// Records handed to a worker at once.
const BATCH: usize = 8192;
/// Batches in flight per worker.
const IN_FLIGHT: usize = 4;
/// Most worker threads used.
const MAX_WORKERS: usize = 7;

/// What replaying the log added up to.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Totals {
    /// Bytes of the records the index names.
    pub live: i64,
    /// The highest version seen.
    pub max_version: u64,
}

impl Totals {
    fn apply(
        &mut self,
        index: &dyn Index,
        key: &[u8],
        kind: Kind,
        location: Location,
        version: u64,
        expires_at: u64,
    ) {
        self.max_version = self.max_version.max(version);
        let change = match kind {
            Kind::Put => Change::Put {
                location,
                version,
                expires_at,
            },
            Kind::Merge => Change::Merge {
                location,
                version,
                expires_at,
            },
            Kind::Delete => Change::Delete,
            Kind::Batch => return,
        };
        let freed = index.apply(key, change).unwrap_or(0);
        if kind != Kind::Delete {
            self.live += i64::from(location.len);
        }
        self.live -= i64::try_from(freed).unwrap_or(i64::MAX);
    }

    fn add(&mut self, other: Totals) {
        self.live += other.live;
        self.max_version = self.max_version.max(other.max_version);
    }
}

struct Item {
    key_end: usize,
    kind: Kind,
    location: Location,
    version: u64,
    expires_at: u64,
}

/// Replayed records for one worker, keys packed in one buffer.
#[derive(Default)]
struct Batch {
    keys: Vec<u8>,
    items: Vec<Item>,
}

impl Batch {
    fn push(&mut self, r: &Replayed<'_>) {
        self.keys.extend_from_slice(r.key);
        self.items.push(Item {
            key_end: self.keys.len(),
            kind: r.kind,
            location: r.location,
            version: r.version,
            expires_at: r.expires_at,
        });
    }

    fn apply(&self, index: &dyn Index, totals: &mut Totals) {
        let mut start = 0;
        for item in &self.items {
            let key = self.keys.get(start..item.key_end).unwrap_or_default();
            start = item.key_end;
            totals.apply(
                index,
                key,
                item.kind,
                item.location,
                item.version,
                item.expires_at,
            );
        }
    }
}

/// Opens the log in `dir`, replaying it into `index`.
pub(crate) fn open(dir: &Path, options: &LogOptions, index: &dyn Index) -> Result<(Log, Totals)> {
    let cores = std::thread::available_parallelism().map_or(1, NonZero::get);
    // One thread per core: the replaying thread and `cores - 1` workers.
    let workers = (cores - 1)
        .min(MAX_WORKERS)
        .min(index.partitions().saturating_sub(1));
    if workers == 0 {
        let mut totals = Totals::default();
        let log = Log::open(dir, options.clone(), &mut |r: &Replayed<'_>| {
            totals.apply(index, r.key, r.kind, r.location, r.version, r.expires_at);
        })?;
        return Ok((log, totals));
    }
    let lanes = workers + 1;
    std::thread::scope(|scope| {
        let mut senders: Vec<SyncSender<Batch>> = Vec::with_capacity(workers);
        let mut handles = Vec::with_capacity(workers);
        for _ in 0..workers {
            let (tx, rx) = sync_channel::<Batch>(IN_FLIGHT);
            senders.push(tx);
            handles.push(scope.spawn(move || {
                let mut totals = Totals::default();
                for batch in rx {
                    batch.apply(index, &mut totals);
                }
                totals
            }));
        }
        let mut batches: Vec<Batch> = (0..workers).map(|_| Batch::default()).collect();
        let mut totals = Totals::default();
        let log = Log::open(dir, options.clone(), &mut |r: &Replayed<'_>| {
            let lane = index.partition(r.key) % lanes;
            let (Some(batch), Some(tx)) = (
                lane.checked_sub(1).and_then(|l| batches.get_mut(l)),
                lane.checked_sub(1).and_then(|l| senders.get(l)),
            ) else {
                totals.apply(index, r.key, r.kind, r.location, r.version, r.expires_at);
                return;
            };
            batch.push(r);
            if batch.items.len() >= BATCH {
                // A worker only stops early by panicking, which the join below reports.
                let _ = tx.send(std::mem::take(batch));
            }
        });
        for (batch, tx) in batches.into_iter().zip(&senders) {
            if !batch.items.is_empty() {
                let _ = tx.send(batch);
            }
        }
        drop(senders);
        for handle in handles {
            match handle.join() {
                Ok(worker) => totals.add(worker),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        Ok((log?, totals))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keydir::Keydir;
    use crate::log::Entry;
    use crate::vfs::SimVfs;
    use std::sync::Arc;

    #[test]
    fn parallel_rebuild_matches_a_sequential_one() {
        let vfs = SimVfs::new();
        let options = LogOptions {
            vfs: Arc::new(vfs),
            segment_size: 64 << 10,
            ..LogOptions::default()
        };
        let dir = Path::new("/db");
        {
            let log = Log::open(dir, options.clone(), &mut |_: &Replayed<'_>| {}).unwrap();
            for i in 0..50_000u32 {
                let key = (i % 7_000).to_le_bytes();
                let kind = match i % 5 {
                    0 => Kind::Delete,
                    1 => Kind::Merge,
                    _ => Kind::Put,
                };
                log.append(&Entry {
                    kind,
                    key: &key,
                    value: if kind == Kind::Delete { b"" } else { b"value" },
                    version: u64::from(i),
                    expires_at: 0,
                })
                .unwrap();
            }
            log.close().unwrap();
        }
        let parallel = Keydir::new();
        let (log, totals) = open(dir, &options, &parallel).unwrap();
        drop(log);
        let sequential = Keydir::new();
        let mut expected = Totals::default();
        let log = Log::open(dir, options, &mut |r: &Replayed<'_>| {
            expected.apply(
                &sequential,
                r.key,
                r.kind,
                r.location,
                r.version,
                r.expires_at,
            );
        })
        .unwrap();
        drop(log);
        assert_eq!(totals.live, expected.live);
        assert_eq!(totals.max_version, 49_999);
        assert_eq!(parallel.len(), sequential.len());
        for i in 0..7_000u32 {
            let key = i.to_le_bytes();
            assert_eq!(parallel.get(&key), sequential.get(&key), "key {i}");
        }
    }
}
