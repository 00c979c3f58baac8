//! Opening a log: cleaning up, replaying hints and segments, handling damage.
//!
//! Steps: take the directory lock; delete temporary files left by an
//! interrupted compaction or hint write, and hints whose segment is gone;
//! replay segments in id order, each from its hint file when a valid one
//! exists, else by scanning it; finally start a fresh active segment, so
//! sealed segments (and their hints) never change.
//!
//! Damage: a record that is incomplete or fails its checksum *and reaches
//! the end of the last segment* is a torn write: it is truncated away and
//! logged. Anything else is corruption: opening fails with
//! [`Error::Corrupt`] naming the file and offset, unless `repair` is set, in
//! which case the damaged segment is cut at the bad record and every later
//! segment is set aside (renamed with a `.dropped` suffix), leaving the
//! longest intact prefix of the log.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

use parking_lot::{Condvar, Mutex, RwLock};

use super::scan::{self, ScanEnd, Scanned};
use super::writer::{self, Tail, Writer};
use super::{SegmentFile, Shared, SyncState, Wake};
use crate::error::{Error, Result};
use crate::hint;
use crate::lock::Lock;
use crate::options::LogOptions;
use crate::record::Kind;
use crate::segment::{
    self, DROPPED_SUFFIX, FileKind, LOCK_NAME, Location, SEGMENT_HEADER_LEN, SegmentId,
};
use crate::vfs::{OpenMode, Vfs, read_all, read_exact_at};

/// One record as replayed at open: everything but the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replayed<'a> {
    /// Put, delete or merge.
    pub kind: Kind,
    /// The key.
    pub key: &'a [u8],
    /// Where the record lives.
    pub location: Location,
    /// The record's version.
    pub version: u64,
    /// The record's expiry in Unix milliseconds, 0 for never.
    pub expires_at: u64,
}

pub(super) fn open(
    dir: &Path,
    options: LogOptions,
    replay: &mut dyn FnMut(&Replayed<'_>),
) -> Result<Shared> {
    let vfs = options.vfs.clone();
    vfs.create_dir_all(dir)?;
    let lock = match vfs.lock(&dir.join(LOCK_NAME)) {
        Ok(lock) => lock,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            return Err(Error::Locked {
                dir: dir.to_path_buf(),
            });
        }
        Err(e) => return Err(e.into()),
    };

    let mut segments = BTreeSet::new();
    let mut hints = BTreeSet::new();
    let mut cleaned = false;
    for name in vfs.list(dir)? {
        match segment::classify(&name) {
            FileKind::Temporary => {
                vfs.remove(&dir.join(&name))?;
                cleaned = true;
            }
            FileKind::Segment(id) => {
                segments.insert(id);
            }
            FileKind::Hint(id) => {
                hints.insert(id);
            }
            FileKind::Other => {}
        }
    }
    for orphan in hints.difference(&segments).copied().collect::<Vec<_>>() {
        vfs.remove(&dir.join(orphan.hint_name()))?;
        hints.remove(&orphan);
        cleaned = true;
    }
    if cleaned {
        vfs.sync_dir(dir)?;
    }

    let last = segments.last().copied();
    let mut missing_hints = Vec::new();
    let mut map = BTreeMap::new();
    let mut total = 0u64;
    let mut dropping = false;
    for id in segments {
        let path = dir.join(id.file_name());
        if dropping {
            set_aside(&*vfs, dir, id)?;
            continue;
        }
        let file = vfs.open(&path, OpenMode::ReadWrite)?;
        let mut len = file.size()?;
        let is_last = Some(id) == last;

        let mut head = [0u8; SEGMENT_HEADER_LEN];
        let have = usize::try_from(len.min(SEGMENT_HEADER_LEN as u64)).unwrap_or(0);
        read_exact_at(&*file, head.get_mut(..have).unwrap_or_default(), 0)?;
        if let Err(reason) = segment::decode_header(head.get(..have).unwrap_or_default()) {
            let all_zero = head.iter().all(|b| *b == 0);
            if is_last && (len < SEGMENT_HEADER_LEN as u64 || all_zero) {
                tracing::warn!(segment = %path.display(), "removing a segment whose creation was interrupted");
                drop(file);
                vfs.remove(&path)?;
                if hints.contains(&id) {
                    vfs.remove(&dir.join(id.hint_name()))?;
                }
                vfs.sync_dir(dir)?;
                continue;
            }
            if options.repair {
                tracing::warn!(segment = %path.display(), %reason, "repair: setting aside a segment with a bad header and all later ones");
                drop(file);
                set_aside(&*vfs, dir, id)?;
                dropping = true;
                continue;
            }
            return Err(Error::Corrupt {
                segment: path,
                offset: 0,
                reason,
            });
        }

        if hints.contains(&id) && replay_hint(&*vfs, dir, id, len, replay) {
            total += len;
            map.insert(id, Arc::new(SegmentFile::new(id, path, file, len)));
            continue;
        }

        // The segment's hint is rebuilt later, in the background.
        if options.write_hints {
            missing_hints.push(id);
        }
        let end = scan::scan::<Infallible>(
            &*file,
            id,
            SEGMENT_HEADER_LEN as u64,
            len,
            &mut |s: Scanned<'_>| {
                let replayed = Replayed {
                    kind: s.record.header.kind,
                    key: s.record.key,
                    location: s.location,
                    version: s.record.header.version,
                    expires_at: s.record.header.expires_at,
                };
                replay(&replayed);
                Ok(())
            },
        )?;
        if let Ok(ScanEnd::Damaged {
            offset,
            reason,
            torn,
            zeros,
        }) = end
        {
            if zeros && is_last {
                tracing::debug!(segment = %path.display(), offset, "trimming the zeros written ahead of the log's records");
            } else if torn && is_last {
                tracing::warn!(segment = %path.display(), offset, %reason, "truncating a torn record at the end of the log");
            } else if options.repair {
                tracing::warn!(segment = %path.display(), offset, %reason, "repair: dropping the log from a damaged record on");
                dropping = true;
            } else {
                return Err(Error::Corrupt {
                    segment: path,
                    offset,
                    reason,
                });
            }
            file.set_len(offset)?;
            file.sync_data()?;
            len = offset;
            if hints.contains(&id) {
                vfs.remove(&dir.join(id.hint_name()))?;
                vfs.sync_dir(dir)?;
            }
        }
        total += len;
        map.insert(id, Arc::new(SegmentFile::new(id, path, file, len)));
    }

    let zero_ahead = options.zero_ahead;
    let active_id = SegmentId::next_active(last);
    let active = writer::create_segment(&*vfs, dir, active_id, &active_id.file_name())?;
    total += SEGMENT_HEADER_LEN as u64;
    map.insert(active_id, active.clone());

    Ok(Shared {
        dir: dir.to_path_buf(),
        writer: Lock::new(Writer::new(active.clone(), options.writeback_step())),
        tail: Lock::new(Tail::new(active)),
        flush: Lock::new(Vec::new()),
        flushed_lsn: AtomicU64::new(0),
        active_id: AtomicU64::new(active_id.0),
        options,
        vfs,
        segments: RwLock::new(map),
        sync: Mutex::new(SyncState::default()),
        synced: Condvar::new(),
        poisoned: AtomicBool::new(false),
        poison_cause: Mutex::new(None),
        closed: AtomicBool::new(false),
        total_bytes: AtomicU64::new(total),
        zero_ahead: AtomicU64::new(zero_ahead),
        pending_hints: Mutex::new(missing_hints),
        wake: Condvar::new(),
        wake_lock: Mutex::new(Wake::default()),
        _lock: lock,
    })
}

/// Replays a segment's hint file; false (and nothing replayed) if it is unusable.
fn replay_hint(
    vfs: &dyn Vfs,
    dir: &Path,
    id: SegmentId,
    segment_len: u64,
    replay: &mut dyn FnMut(&Replayed<'_>),
) -> bool {
    let path = dir.join(id.hint_name());
    let bytes = match vfs.open(&path, OpenMode::Read).and_then(|f| read_all(&*f)) {
        Ok(bytes) => bytes,
        Err(e) => {
            tracing::warn!(hint = %path.display(), error = %e, "cannot read hint file; scanning the segment");
            return false;
        }
    };
    let entries = match hint::decode(&bytes) {
        Ok(entries) => entries,
        Err(e) => {
            tracing::warn!(hint = %path.display(), error = %e, "damaged hint file; scanning the segment");
            return false;
        }
    };
    // Check every entry before replaying any, so a bad hint replays nothing.
    for entry in entries.clone() {
        let ok = entry.is_ok_and(|e| {
            u64::from(e.offset) >= SEGMENT_HEADER_LEN as u64
                && u64::from(e.offset) + u64::from(e.len) <= segment_len
        });
        if !ok {
            tracing::warn!(hint = %path.display(), "hint file does not match its segment; scanning the segment");
            return false;
        }
    }
    for entry in entries.flatten() {
        replay(&Replayed {
            kind: entry.kind,
            key: entry.key,
            location: Location {
                segment: id,
                offset: entry.offset,
                len: entry.len,
            },
            version: entry.version,
            expires_at: entry.expires_at,
        });
    }
    true
}

/// Renames a segment out of the way (repair), dropping its hint.
fn set_aside(vfs: &dyn Vfs, dir: &Path, id: SegmentId) -> Result<()> {
    let from = dir.join(id.file_name());
    let to = dir.join(format!("{}{DROPPED_SUFFIX}", id.file_name()));
    tracing::warn!(segment = %from.display(), "repair: setting the segment aside");
    vfs.rename(&from, &to)?;
    let hint = dir.join(id.hint_name());
    if let Err(e) = vfs.remove(&hint)
        && e.kind() != io::ErrorKind::NotFound
    {
        return Err(e.into());
    }
    vfs.sync_dir(dir)?;
    Ok(())
}
