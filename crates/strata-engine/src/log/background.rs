//! The log's background thread and the work done at a clean close.
//!
//! Once a second the thread hands buffered records to the operating system
//! (all policies), fsyncs them (`EverySecond`), and writes the hint files of
//! segments sealed since its last round. Under `Never` and `EverySecond` it is
//! also woken to fsync each time the active segment has grown by a writeback
//! step, so that a segment's rotation finds little left to write, and, when
//! [`LogOptions::zero_ahead`](crate::options::LogOptions::zero_ahead) asks for
//! it, to write zeros past the active segment's records. It never holds the
//! writer lock during an fsync, so appends and reads go on meanwhile.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

use super::Shared;
use crate::error::Result;
use crate::options::FsyncPolicy;

const INTERVAL: Duration = Duration::from_secs(1);

pub(super) fn spawn(shared: Arc<Shared>) -> Result<JoinHandle<()>> {
    let handle = std::thread::Builder::new()
        .name("strata-log".into())
        .spawn(move || run(&shared))?;
    Ok(handle)
}

fn run(shared: &Shared) {
    loop {
        let (writeback, zeros) = {
            let mut wake = shared.wake_lock.lock();
            if !wake.stop && !wake.writeback {
                shared.wake.wait_for(&mut wake, INTERVAL);
            }
            if wake.stop {
                return;
            }
            (
                std::mem::take(&mut wake.writeback),
                std::mem::take(&mut wake.zeros),
            )
        };
        if shared.poisoned.load(Ordering::Acquire) {
            continue;
        }
        if zeros && let Err(e) = shared.write_zeros_ahead() {
            tracing::warn!(error = %e, "fsync of the zeros ahead of the log failed");
            continue;
        }
        if writeback || shared.options.fsync == FsyncPolicy::EverySecond {
            if let Err(e) = shared.sync_now() {
                tracing::warn!(error = %e, "background fsync failed");
            }
        } else {
            if let Err(e) = shared.flush_to(u64::MAX) {
                tracing::warn!(error = %e, "background write failed");
            }
        }
        shared.write_pending_hints();
    }
}

/// At a clean close: writes the active segment's hint, or removes it when empty.
pub(super) fn finish_active(shared: &Shared) -> Result<()> {
    let writer = shared.writer.lock();
    let id = writer.active.id;
    if writer.records == 0 {
        shared.segments.write().remove(&id);
        shared.vfs.remove(&writer.active.path)?;
        shared.vfs.sync_dir(&shared.dir)?;
        return Ok(());
    }
    if shared.trim_zeros(&writer.active)? {
        writer.active.file.sync_data()?;
    }
    if shared.options.write_hints {
        shared.write_hint(&writer.active)?;
    }
    Ok(())
}
