//! Compaction outputs: new segments written beside the log, then swapped in.
//!
//! Outputs are written under temporary names (`*.seg.tmp`, `*.hint.tmp`),
//! fsynced, and only then renamed into place. Their ids follow the last
//! input's id, so they replay after the inputs and before every later
//! segment. Because an output holds only copies of records that were live in
//! the inputs, replaying the inputs *and* any complete outputs gives the same
//! data as replaying either; that is what makes each step of the switch safe:
//!
//! 1. write and fsync the outputs and their hints under temporary names;
//! 2. rename them into place, fsync the directory;
//! 3. point the index at the outputs;
//! 4. delete the inputs oldest first, fsyncing the directory after each
//!    (oldest first, so a tombstone is never deleted before the value it hides).
//!
//! A crash before step 2 completes leaves temporary files that opening
//! deletes; a crash during step 4 leaves a suffix of the inputs, which the
//! outputs override.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{Entry, SegmentFile, Shared};
use crate::error::{Error, Result};
use crate::record::{self, Kind};
use crate::segment::{self, Location, SEGMENT_HEADER_LEN, SegmentId, TMP_SUFFIX};
use crate::vfs::{OpenMode, VfsFile, write_all_at};

const BUFFER: usize = 1 << 20;

struct OutputFile {
    id: SegmentId,
    tmp: PathBuf,
    file: Arc<dyn VfsFile>,
    /// Bytes written to the file.
    written: u64,
    buf: Vec<u8>,
}

impl OutputFile {
    fn len(&self) -> u64 {
        self.written + self.buf.len() as u64
    }

    fn flush(&mut self) -> std::io::Result<()> {
        write_all_at(&*self.file, &self.buf, self.written)?;
        self.written += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }
}

/// A finished output segment, durable under its temporary name.
struct Finished {
    id: SegmentId,
    tmp: PathBuf,
    file: Arc<dyn VfsFile>,
    len: u64,
    hint_tmp: Option<PathBuf>,
}

/// Writes the output segments of one compaction.
pub struct CompactionOutput {
    shared: Arc<Shared>,
    next: u64,
    limit: SegmentId,
    current: Option<OutputFile>,
    done: Vec<Finished>,
}

impl std::fmt::Debug for CompactionOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionOutput")
            .field("next", &self.next)
            .field("done", &self.done.len())
            .finish_non_exhaustive()
    }
}

/// Output segments ready to be installed with [`Log::install`](super::Log::install).
pub struct OutputSegments {
    shared: Arc<Shared>,
    done: Vec<Finished>,
}

impl std::fmt::Debug for OutputSegments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputSegments")
            .field("segments", &self.done.len())
            .finish_non_exhaustive()
    }
}

impl OutputSegments {
    /// The ids of the output segments.
    pub fn ids(&self) -> Vec<SegmentId> {
        self.done.iter().map(|f| f.id).collect()
    }

    /// Total bytes of the output segments.
    pub fn bytes(&self) -> u64 {
        self.done.iter().map(|f| f.len).sum()
    }
}

impl CompactionOutput {
    pub(super) fn new(
        shared: Arc<Shared>,
        last_input: SegmentId,
        active: SegmentId,
    ) -> Result<CompactionOutput> {
        if last_input >= active {
            return Err(Error::InvalidOptions(
                "compaction inputs must be sealed segments".into(),
            ));
        }
        Ok(CompactionOutput {
            shared,
            next: last_input.0 + 1,
            limit: active,
            current: None,
            done: Vec::new(),
        })
    }

    /// Copies an encoded put, delete or merge record (as met by a scan) into the output.
    pub fn append_raw(&mut self, raw: &[u8]) -> Result<Location> {
        let rec = record::decode(raw).map_err(|reason| Error::BadRecord {
            segment: SegmentId(self.next),
            offset: 0,
            reason,
        })?;
        if rec.header.kind == Kind::Batch {
            return Err(Error::InvalidOptions(
                "batch frames cannot be copied into compaction outputs".into(),
            ));
        }
        let len = raw.len() as u64;
        let out = self.room_for(len)?;
        let offset = out.len();
        out.buf.extend_from_slice(raw);
        let location = Location {
            segment: out.id,
            offset: offset as u32,
            len: len as u32,
        };
        self.flush_if_full()?;
        Ok(location)
    }

    /// Encodes a new record into the output.
    pub fn append(&mut self, entry: &Entry<'_>) -> Result<Location> {
        let mut raw = Vec::new();
        let len = record::encoded_len(entry.key, entry.value, entry.expires_at);
        if len > record::MAX_RECORD_LEN {
            return Err(Error::TooLarge {
                what: "record",
                len,
                max: record::MAX_RECORD_LEN,
            });
        }
        record::encode_into(
            &mut raw,
            entry.kind,
            entry.key,
            entry.value,
            entry.version,
            entry.expires_at,
        );
        self.append_raw(&raw)
    }

    fn room_for(&mut self, len: u64) -> Result<&mut OutputFile> {
        let size = self.shared.options.segment_size;
        let full = self
            .current
            .as_ref()
            .is_some_and(|c| c.len() > SEGMENT_HEADER_LEN as u64 && c.len() + len > size);
        if full {
            self.seal_current()?;
        }
        if self.current.is_none() {
            let id = SegmentId(self.next);
            if id >= self.limit {
                return Err(Error::InvalidOptions(
                    "compaction produced more segments than ids are reserved for".into(),
                ));
            }
            self.next += 1;
            let tmp = self
                .shared
                .dir
                .join(format!("{}{TMP_SUFFIX}", id.file_name()));
            let file = self.shared.vfs.open(&tmp, OpenMode::CreateNew)?;
            let mut buf = Vec::with_capacity(BUFFER);
            buf.extend_from_slice(&segment::encode_header());
            self.current = Some(OutputFile {
                id,
                tmp,
                file,
                written: 0,
                buf,
            });
        }
        self.current
            .as_mut()
            .ok_or_else(|| Error::InvalidOptions("no output segment".into()))
    }

    fn flush_if_full(&mut self) -> Result<()> {
        if let Some(out) = &mut self.current
            && out.buf.len() >= BUFFER
        {
            out.flush()?;
        }
        Ok(())
    }

    fn seal_current(&mut self) -> Result<()> {
        let Some(mut out) = self.current.take() else {
            return Ok(());
        };
        let tmp = out.tmp.clone();
        self.done.push(Finished {
            id: out.id,
            tmp,
            file: out.file.clone(),
            len: out.len(),
            hint_tmp: None,
        });
        out.flush()?;
        out.file.sync_data()?;
        if self.shared.options.write_hints {
            let hint_tmp = self
                .shared
                .dir
                .join(format!("{}{TMP_SUFFIX}", out.id.hint_name()));
            if let Some(last) = self.done.last_mut() {
                last.hint_tmp = Some(hint_tmp.clone());
            }
            super::build_hint(
                &*self.shared.vfs,
                &*out.file,
                out.id,
                out.written,
                &hint_tmp,
            )?;
        }
        Ok(())
    }

    /// Finishes the last output; every output is then durable under its temporary name.
    pub fn finish(mut self) -> Result<OutputSegments> {
        self.seal_current()?;
        self.shared.vfs.sync_dir(&self.shared.dir)?;
        Ok(OutputSegments {
            shared: self.shared.clone(),
            done: std::mem::take(&mut self.done),
        })
    }
}

fn remove_temporaries(shared: &Shared, done: &[Finished]) {
    for f in done {
        let _ = shared.vfs.remove(&f.tmp);
        if let Some(hint) = &f.hint_tmp {
            let _ = shared.vfs.remove(hint);
        }
    }
}

impl Drop for CompactionOutput {
    fn drop(&mut self) {
        if let Some(out) = self.current.take() {
            let _ = self.shared.vfs.remove(&out.tmp);
        }
        remove_temporaries(&self.shared, &self.done);
    }
}

impl Drop for OutputSegments {
    fn drop(&mut self) {
        remove_temporaries(&self.shared, &self.done);
    }
}

pub(super) fn install(
    shared: &Shared,
    mut outputs: OutputSegments,
    inputs: &[SegmentId],
    swap: impl FnOnce(),
) -> Result<()> {
    shared.check_writable()?;
    let done = std::mem::take(&mut outputs.done);
    let dir = &shared.dir;
    let vfs = &*shared.vfs;
    for (i, f) in done.iter().enumerate() {
        let renamed = vfs
            .rename(&f.tmp, &dir.join(f.id.file_name()))
            .and_then(|()| match &f.hint_tmp {
                Some(hint) => vfs.rename(hint, &dir.join(f.id.hint_name())),
                None => Ok(()),
            });
        if let Err(e) = renamed {
            if i == 0 {
                remove_temporaries(shared, &done);
                return Err(e.into());
            }
            remove_temporaries(shared, done.get(i..).unwrap_or_default());
            return Err(shared.poison(e, "installing compaction outputs"));
        }
    }
    if let Err(e) = vfs.sync_dir(dir) {
        return Err(shared.poison(e, "installing compaction outputs"));
    }
    {
        let mut segments = shared.segments.write();
        for f in &done {
            segments.insert(
                f.id,
                Arc::new(SegmentFile::new(
                    f.id,
                    dir.join(f.id.file_name()),
                    f.file.clone(),
                    f.len,
                )),
            );
            shared.total_bytes.fetch_add(f.len, Ordering::Relaxed);
        }
    }
    swap();
    let mut removed = Vec::new();
    {
        let mut segments = shared.segments.write();
        for id in inputs {
            if let Some(seg) = segments.remove(id) {
                shared
                    .total_bytes
                    .fetch_sub(seg.flushed.load(Ordering::Acquire), Ordering::Relaxed);
                removed.push(seg);
            }
        }
    }
    for seg in removed {
        let gone =
            vfs.remove(&seg.path)
                .and_then(|()| match vfs.remove(&dir.join(seg.id.hint_name())) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                    _ => Ok(()),
                });
        if let Err(e) = gone.and_then(|()| vfs.sync_dir(dir)) {
            return Err(shared.poison(e, "deleting compacted segments"));
        }
    }
    Ok(())
}
