//! Checking a store's files without changing them (the `strata-check` tool).
//!
//! [`check`] takes the directory lock (so a running engine is never checked
//! half-written), reads every segment record by record verifying checksums,
//! and decodes every hint file. It reports what it found and changes nothing;
//! opening with [`Options::with_repair`](crate::Options::with_repair) is the
//! way to repair what it reports.

use std::convert::Infallible;
use std::io;
use std::path::{Path, PathBuf};

use super::scan::{self, ScanEnd, Scanned};
use crate::error::{Error, Result};
use crate::hint;
use crate::record::{DecodeError, Kind};
use crate::segment::{self, FileKind, LOCK_NAME, SEGMENT_HEADER_LEN, SegmentId};
use crate::vfs::{OpenMode, Vfs, read_all, read_exact_at};

/// What [`check`] found in one segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentCheck {
    pub id: SegmentId,
    pub path: PathBuf,
    /// Bytes in the file.
    pub len: u64,
    /// Zeros at the end of the last segment, past its records: room a log that
    /// writes zeros ahead of its records left unused when it stopped (see
    /// [`crate::options::LogOptions::zero_ahead`]). Opening trims them; they are
    /// not damage.
    pub zeros: u64,
    /// Intact records before the damage (or the end), by kind.
    pub puts: u64,
    pub merges: u64,
    pub deletes: u64,
    /// The first damaged record, if any.
    pub damage: Option<Damage>,
    /// The segment's hint file.
    pub hint: HintCheck,
}

/// A damaged record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// Byte offset of the damaged record in the segment.
    pub offset: u64,
    pub reason: DecodeError,
    /// True for damage at the very end of the last segment: a torn write that
    /// opening truncates by itself. Anything else stops opening unless repaired.
    pub torn_tail: bool,
}

/// The state of a segment's hint file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HintCheck {
    /// No hint file: opening scans the segment.
    Missing,
    /// A valid hint with this many entries.
    Valid(u64),
    /// A damaged hint: opening ignores it and scans the segment.
    Damaged(String),
}

/// What [`check`] found in a directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    pub segments: Vec<SegmentCheck>,
    /// Files that are not part of the store (left alone by the engine).
    pub other_files: Vec<String>,
}

impl CheckReport {
    /// The first damage that stops opening (a torn tail does not).
    pub fn first_corruption(&self) -> Option<(&SegmentCheck, &Damage)> {
        self.segments
            .iter()
            .find_map(|s| s.damage.as_ref().filter(|d| !d.torn_tail).map(|d| (s, d)))
    }

    /// Whether every record and hint is intact.
    pub fn is_clean(&self) -> bool {
        self.segments
            .iter()
            .all(|s| s.damage.is_none() && !matches!(s.hint, HintCheck::Damaged(_)))
    }
}

/// Checks the store in `dir` (see the module docs). Fails with
/// [`Error::Locked`] while an engine has the directory open.
pub fn check(vfs: &dyn Vfs, dir: &Path) -> Result<CheckReport> {
    let _lock = match vfs.lock(&dir.join(LOCK_NAME)) {
        Ok(lock) => lock,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            return Err(Error::Locked {
                dir: dir.to_path_buf(),
            });
        }
        Err(e) => return Err(e.into()),
    };
    let mut report = CheckReport::default();
    let mut segments = Vec::new();
    let mut hints = std::collections::BTreeSet::new();
    for name in vfs.list(dir)? {
        match segment::classify(&name) {
            FileKind::Segment(id) => segments.push(id),
            FileKind::Hint(id) => {
                hints.insert(id);
            }
            FileKind::Temporary => {}
            FileKind::Other if name == LOCK_NAME => {}
            FileKind::Other => report.other_files.push(name),
        }
    }
    segments.sort_unstable();
    let last = segments.last().copied();
    for id in segments {
        let path = dir.join(id.file_name());
        let file = vfs.open(&path, OpenMode::Read)?;
        let len = file.size()?;
        let mut check = SegmentCheck {
            id,
            path,
            len,
            zeros: 0,
            puts: 0,
            merges: 0,
            deletes: 0,
            damage: None,
            hint: HintCheck::Missing,
        };
        let is_last = Some(id) == last;
        let mut head = [0u8; SEGMENT_HEADER_LEN];
        let have = usize::try_from(len.min(SEGMENT_HEADER_LEN as u64)).unwrap_or(0);
        read_exact_at(&*file, head.get_mut(..have).unwrap_or_default(), 0)?;
        if let Err(reason) = segment::decode_header(head.get(..have).unwrap_or_default()) {
            check.damage = Some(Damage {
                offset: 0,
                reason,
                torn_tail: is_last
                    && (len < SEGMENT_HEADER_LEN as u64 || head.iter().all(|b| *b == 0)),
            });
            report.segments.push(check);
            continue;
        }
        let end = scan::scan::<Infallible>(
            &*file,
            id,
            SEGMENT_HEADER_LEN as u64,
            len,
            &mut |s: Scanned<'_>| {
                match s.record.header.kind {
                    Kind::Put => check.puts += 1,
                    Kind::Merge => check.merges += 1,
                    Kind::Delete => check.deletes += 1,
                    // The scanner hands out the records inside batch frames.
                    Kind::Batch => {}
                }
                Ok(())
            },
        )?;
        match end {
            Ok(ScanEnd::Damaged { offset, zeros, .. }) if zeros && is_last => {
                check.zeros = len - offset;
            }
            Ok(ScanEnd::Damaged {
                offset,
                reason,
                torn,
                ..
            }) => {
                check.damage = Some(Damage {
                    offset,
                    reason,
                    torn_tail: torn && is_last,
                });
            }
            Ok(ScanEnd::Clean) | Err(_) => {}
        }
        if hints.contains(&id) {
            let hint_path = dir.join(id.hint_name());
            check.hint = match vfs
                .open(&hint_path, OpenMode::Read)
                .and_then(|f| read_all(&*f))
            {
                Err(e) => HintCheck::Damaged(e.to_string()),
                Ok(bytes) => match hint::decode(&bytes) {
                    Err(e) => HintCheck::Damaged(e.to_string()),
                    Ok(entries) => {
                        let mut n = 0u64;
                        let mut bad = None;
                        for entry in entries {
                            match entry {
                                Ok(e) if u64::from(e.offset) + u64::from(e.len) <= len => n += 1,
                                Ok(_) => {
                                    bad =
                                        Some("an entry points past the end of its segment".into());
                                    break;
                                }
                                Err(e) => {
                                    bad = Some(e.to_string());
                                    break;
                                }
                            }
                        }
                        bad.map_or(HintCheck::Valid(n), HintCheck::Damaged)
                    }
                },
            };
        }
        report.segments.push(check);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Engine, Options};

    #[test]
    fn a_clean_store_checks_clean_and_damage_is_located() {
        let dir = tempfile::tempdir().expect("temp dir");
        {
            let engine = Engine::open(dir.path(), Options::default()).expect("open");
            for i in 0..100u32 {
                engine
                    .put(format!("k{i}").as_bytes(), &[7u8; 100])
                    .expect("put");
            }
            engine.close().expect("close");
        }
        let vfs = crate::OsVfs;
        let report = check(&vfs, dir.path()).expect("check");
        assert!(report.is_clean(), "{report:?}");
        let puts: u64 = report.segments.iter().map(|s| s.puts).sum();
        assert_eq!(puts, 100);

        // Flip a byte in the middle of the (only non-empty) segment.
        let seg = report
            .segments
            .iter()
            .find(|s| s.puts > 0)
            .expect("a segment with records");
        let mut bytes = std::fs::read(&seg.path).expect("read");
        let at = bytes.len() / 2;
        bytes[at] ^= 0xff;
        std::fs::write(&seg.path, &bytes).expect("write");
        let report = check(&vfs, dir.path()).expect("check");
        assert!(!report.is_clean());
        let (damaged, damage) = report.first_corruption().expect("corruption found");
        assert_eq!(damaged.path, seg.path);
        assert!(damage.offset <= at as u64);
        assert!(damaged.puts < 100);

        // A running engine's directory is refused.
        std::fs::write(&seg.path, {
            bytes[at] ^= 0xff;
            &bytes
        })
        .expect("restore");
        let _engine = Engine::open(dir.path(), Options::default()).expect("open");
        assert!(matches!(check(&vfs, dir.path()), Err(Error::Locked { .. })));
    }
}
