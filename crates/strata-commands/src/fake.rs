//! Just enough of a server to run commands in unit tests, with a log that keeps
//! the batches it is given (or refuses them).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use strata_keyspace::{Detached, EncodingLimits};

use crate::conn::ClientInfo;
use crate::effects::Record;
use crate::server::{KeyspaceSummary, Server, ShutdownMode};
use crate::table::Registry;

pub(crate) struct Fake {
    pub registry: Registry,
    pub limits: EncodingLimits,
    /// Whether changes are logged (see [`Server::logging_flag`]).
    pub logging: Option<AtomicBool>,
    /// The batches logged, in order.
    pub batches: Mutex<Vec<Vec<Record>>>,
    /// Whether the log refuses batches.
    pub refuse: AtomicBool,
    /// Whether the log leaves the keyspace to list where each put or operation
    /// went (as the store does once its index has switched): record `i` of batch
    /// `n` at segment `n`, offset `i`.
    pub locate: AtomicBool,
}

impl Fake {
    pub fn new() -> Fake {
        Fake {
            registry: crate::registry(),
            limits: EncodingLimits::default(),
            logging: None,
            batches: Mutex::new(Vec::new()),
            refuse: AtomicBool::new(false),
            locate: AtomicBool::new(false),
        }
    }

    /// A server that logs changes.
    pub fn logging() -> Fake {
        Fake {
            logging: Some(AtomicBool::new(true)),
            ..Fake::new()
        }
    }
}

impl Server for Fake {
    fn registry(&self) -> &Registry {
        &self.registry
    }
    fn databases(&self) -> usize {
        16
    }
    fn max_bulk_len(&self) -> usize {
        512 << 20
    }
    fn encoding_limits(&self) -> EncodingLimits {
        self.limits
    }
    fn config_get(&self, _: &[&[u8]]) -> Vec<(String, String)> {
        Vec::new()
    }
    fn config_set(&self, _: &[(&[u8], &[u8])]) -> Result<(), String> {
        Ok(())
    }
    fn reset_stats(&self) {}
    fn config_rewrite(&self) -> Result<(), String> {
        Ok(())
    }
    fn has_blocked_clients(&self) -> bool {
        false
    }
    fn info(&self, _: &[&[u8]], _: &KeyspaceSummary) -> String {
        String::new()
    }
    fn clients(&self) -> Vec<Arc<ClientInfo>> {
        Vec::new()
    }
    fn requirepass(&self) -> Option<String> {
        None
    }
    fn debug_allowed(&self, _: &ClientInfo) -> bool {
        false
    }
    fn shutdown(&self, _: ShutdownMode) -> Result<(), String> {
        Ok(())
    }
    fn free_later(&self, _: Vec<Detached>) {}
    fn set_active_expire(&self, _: bool) {}
    fn add_dirty(&self, _: u64) {}
    fn logging_flag(&self) -> Option<&AtomicBool> {
        self.logging.as_ref()
    }
    fn log(
        &self,
        records: &mut crate::effects::Batch,
        _now_ms: u64,
        located: &mut crate::effects::Located,
    ) -> Result<Option<u64>, String> {
        located.clear();
        if self.refuse.load(Ordering::Relaxed) {
            return Err("MISCONF the log refused the batch".into());
        }
        let mut batches = self.batches.lock();
        batches.push(records.to_records());
        if self.locate.load(Ordering::Relaxed) {
            let segment = batches.len() as u64;
            located.extend(records.iter().enumerate().map(|(i, r)| {
                matches!(
                    r.kind,
                    crate::effects::RecordKind::Put { .. } | crate::effects::RecordKind::Op { .. }
                )
                .then(|| strata_keyspace::logref::LogLoc {
                    segment,
                    offset: i as u32,
                    len: 1,
                })
            }));
        }
        Ok(Some(batches.len() as u64))
    }
}
