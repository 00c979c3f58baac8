//! The engine's merge operator: applies logged operations to a key's value by
//! replaying them through strata's own command handlers.
//!
//! Each operation is a deterministic single-key command (`strata_commands::effects`).
//! Replaying it on the value the key had when it ran gives the value it left, so a
//! key's full value is its last logged value with its operations replayed in order.
//! The engine calls this when it compacts (folding operations into one value) and at
//! recovery.

use std::sync::{Arc, OnceLock};

use strata_commands::effects::decode_op;
use strata_commands::{ClientInfo, ConnState, KeyspaceSummary, Registry, Server, ShutdownMode};
use strata_keyspace::{Detached, EncodingLimits, Keyspace, Ttl};
use strata_resp::Protocol;

/// Replays logged operations (see the module docs).
pub struct Replay {
    limits: parking_lot::RwLock<EncodingLimits>,
}

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replay").finish()
    }
}

impl Replay {
    pub fn new(limits: EncodingLimits) -> Replay {
        Replay {
            limits: parking_lot::RwLock::new(limits),
        }
    }

    pub fn set_limits(&self, limits: EncodingLimits) {
        *self.limits.write() = limits;
    }

    /// The value after applying `operands` to `existing` (bytes in the
    /// `strata_keyspace::serialize` form; empty for no value).
    pub fn apply(&self, key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Vec<u8> {
        let limits = *self.limits.read();
        // The user key follows the 4-byte namespace of the engine key.
        let user_key = key.get(4..).unwrap_or_default();
        let ks = Keyspace::new(1, 1);
        let hash = ks.hash(user_key);
        if let Some(bytes) = existing.filter(|b| !b.is_empty()) {
            match strata_keyspace::serialize::decode(bytes, &limits) {
                Ok(v) => {
                    ks.lock(0).db(0).set(hash, user_key, v, Ttl::Persist, 0);
                }
                Err(e) => {
                    tracing::warn!("a logged value does not decode ({e}); replaying onto nothing")
                }
            }
        }
        let server = ReplayServer { limits };
        let info = Arc::new(ClientInfo::new(
            0,
            String::new(),
            String::new(),
            -1,
            0,
            Box::new(|| {}),
        ));
        let mut conn = ConnState::new(info, true);
        conn.set_proto(Protocol::Resp2);
        conn.may_block = false;
        let mut out = Vec::new();
        for op in operands {
            match decode_op(op) {
                Ok(None) => {}
                Ok(Some(argv)) => {
                    let args: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
                    out.clear();
                    let _ = strata_commands::execute(&server, &ks, &mut conn, &mut out, &args, 0);
                    if out.first() == Some(&b'-') {
                        tracing::warn!(
                            "replaying a logged operation failed: {}",
                            String::from_utf8_lossy(&out).trim_end()
                        );
                    }
                }
                Err(e) => tracing::warn!("a logged operation does not decode: {e}"),
            }
        }
        let mut shard = ks.lock(0);
        match shard.db(0).peek(hash, user_key, 0) {
            Some(e) => strata_keyspace::serialize::to_vec(e.value()),
            None => Vec::new(),
        }
    }
}

impl strata_engine::MergeOperator for Replay {
    fn full_merge(&self, key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Vec<u8> {
        self.apply(key, existing, operands)
    }
}

/// The command table, built once per process.
fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(strata_commands::registry)
}

/// What a replayed command may ask of "the server": encoding thresholds and the
/// table; nothing else is reachable from the single-key write commands logged.
struct ReplayServer {
    limits: EncodingLimits,
}

impl Server for ReplayServer {
    fn registry(&self) -> &Registry {
        registry()
    }
    fn databases(&self) -> usize {
        1
    }
    fn max_bulk_len(&self) -> usize {
        usize::MAX
    }
    fn encoding_limits(&self) -> EncodingLimits {
        self.limits
    }
    fn config_get(&self, _: &[&[u8]]) -> Vec<(String, String)> {
        Vec::new()
    }
    fn config_set(&self, _: &[(&[u8], &[u8])]) -> Result<(), String> {
        Err("ERR not available while replaying".into())
    }
    fn reset_stats(&self) {}
    fn config_rewrite(&self) -> Result<(), String> {
        Err("ERR not available while replaying".into())
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
        Err("ERR not available while replaying".into())
    }
    fn free_later(&self, data: Vec<Detached>) {
        drop(data);
    }
    fn set_active_expire(&self, _: bool) {}
    fn add_dirty(&self, _: u64) {}
    fn has_blocked_clients(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_commands::effects::encode_op;

    fn key(k: &[u8]) -> Vec<u8> {
        let mut v = 0u32.to_be_bytes().to_vec();
        v.extend_from_slice(k);
        v
    }

    #[test]
    fn replays_string_operations_past_any_client_limit() {
        // What was accepted when it ran is replayed whatever the limits are now.
        let r = Replay::new(EncodingLimits::default());
        let ops = [
            encode_op(&["SETRANGE", "s", "100000", "x"]),
            encode_op(&["APPEND", "s", "yz"]),
        ];
        let refs: Vec<&[u8]> = ops.iter().map(Vec::as_slice).collect();
        let out = r.apply(&key(b"s"), None, &refs);
        let v =
            strata_keyspace::serialize::decode(&out, &EncodingLimits::default()).expect("a value");
        let s = v.as_str().expect("a string").to_vec();
        assert_eq!(s.len(), 100_003);
        assert_eq!(&s[100_000..], b"xyz");
    }

    #[test]
    fn replays_list_operations_on_a_value() {
        let r = Replay::new(EncodingLimits::default());
        let ops = [
            encode_op(&["RPUSH", "l", "a", "b", "c"]),
            encode_op(&["LPOP", "l"]),
            vec![strata_commands::effects::OP_EXPIRY],
            encode_op(&["LPUSH", "l", "z"]),
        ];
        let refs: Vec<&[u8]> = ops.iter().map(Vec::as_slice).collect();
        let out = r.apply(&key(b"l"), None, &refs);
        let v =
            strata_keyspace::serialize::decode(&out, &EncodingLimits::default()).expect("a value");
        let list = v.as_list().expect("a list");
        assert_eq!(list.iter().collect::<Vec<_>>(), [&b"z"[..], b"b", b"c"]);
        // Replaying onto that value continues from it.
        let more = [encode_op(&["RPOP", "l"])];
        let refs: Vec<&[u8]> = more.iter().map(Vec::as_slice).collect();
        let out = r.apply(&key(b"l"), Some(&out), &refs);
        let v =
            strata_keyspace::serialize::decode(&out, &EncodingLimits::default()).expect("a value");
        assert_eq!(v.as_list().expect("a list").len(), 2);
    }
}
