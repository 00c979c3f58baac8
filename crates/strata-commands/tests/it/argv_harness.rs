//! The command-argument harness shared by the `command_args` fuzz target and the
//! regression tests: argument vectors run through the dispatcher against a fresh
//! keyspace and a small fake server must not panic, and every reply must be
//! well-formed RESP.
//!
//! The input is text-like: commands are separated by `\n`, arguments by ` `. A first
//! argument of a single non-letter byte picks a command from the table by its index,
//! so every command is reachable by mutating one byte; other first arguments are
//! looked up by name. Handlers that reach for the machine (SHUTDOWN, DEBUG,
//! persistence) see the fake's answers.

use std::sync::{Arc, LazyLock};

use strata_commands::acl::Acl;
use strata_commands::conn::{ClientInfo, ConnState};
use strata_commands::pubsub::PubSub;
use strata_commands::server::{KeyspaceSummary, Server, ShutdownMode};
use strata_commands::table::Registry;
use strata_keyspace::{Detached, EncodingLimits, Keyspace};
use strata_resp::value::decode;

/// Just enough of a server to run every command; small limits keep the fuzzer fast.
struct Fake {
    registry: Registry,
    acl: Acl,
    pubsub: PubSub,
}

impl Server for Fake {
    fn registry(&self) -> &Registry {
        &self.registry
    }
    fn databases(&self) -> usize {
        4
    }
    fn max_bulk_len(&self) -> usize {
        1 << 20
    }
    fn encoding_limits(&self) -> EncodingLimits {
        EncodingLimits::default()
    }
    fn config_get(&self, _: &[&[u8]]) -> Vec<(String, String)> {
        vec![("maxmemory".to_owned(), "0".to_owned())]
    }
    fn config_set(&self, _: &[(&[u8], &[u8])]) -> Result<(), String> {
        Ok(())
    }
    fn reset_stats(&self) {}
    fn config_rewrite(&self) -> Result<(), String> {
        Err("The server is running without a config file".to_owned())
    }
    fn info(&self, _: &[&[u8]], _: &KeyspaceSummary) -> String {
        "# Server\r\n".to_owned()
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
        Err("Errors trying to SHUTDOWN. Check logs.".to_owned())
    }
    fn free_later(&self, _: Vec<Detached>) {}
    fn set_active_expire(&self, _: bool) {}
    fn add_dirty(&self, _: u64) {}
    fn has_blocked_clients(&self) -> bool {
        false
    }
    fn pubsub(&self) -> Option<&PubSub> {
        Some(&self.pubsub)
    }
    fn acl(&self) -> Option<&Acl> {
        Some(&self.acl)
    }
}

static SERVER: LazyLock<Fake> = LazyLock::new(|| {
    let registry = strata_commands::registry();
    let acl = Acl::new(&registry);
    Fake {
        registry,
        acl,
        pubsub: PubSub::new(),
    }
});

/// A fixed clock: expiry paths run, but the same input always does the same.
const NOW_MS: u64 = 1_700_000_000_000;

/// Runs `data`'s commands (see the module documentation) on a fresh keyspace and
/// connection, panicking on a malformed reply.
pub fn run(data: &[u8]) {
    replies(data);
}

/// [`run`], returning each command's reply.
pub fn replies(data: &[u8]) -> Vec<Vec<u8>> {
    let mut all = Vec::new();
    let server = &*SERVER;
    let names: Vec<&str> = server.registry.commands().map(|c| c.name).collect();
    let ks = Keyspace::new(4, 2);
    let info = ClientInfo::new(
        1,
        "127.0.0.1:1".into(),
        "127.0.0.1:2".into(),
        -1,
        NOW_MS,
        Box::new(|| {}),
    );
    let mut conn = ConnState::new(Arc::new(info), true);
    for line in data.split(|&b| b == b'\n').take(64) {
        let mut argv: Vec<&[u8]> = line.split(|&b| b == b' ').take(256).collect();
        if argv
            .first()
            .is_some_and(|a| a.len() == 1 && !a[0].is_ascii_alphabetic())
        {
            let pick = usize::from(argv[0][0]) % names.len();
            argv[0] = names[pick].as_bytes();
        }
        if argv.first().is_none_or(|a| a.is_empty()) {
            continue;
        }
        let mut out = Vec::new();
        strata_commands::execute(server, &ks, &mut conn, &mut out, &argv, NOW_MS);
        // Whatever was written is a sequence of complete RESP values.
        let mut rest = out.as_slice();
        while !rest.is_empty() {
            match decode(rest) {
                Ok(Some((_, used))) if used > 0 => rest = &rest[used..],
                other => panic!("malformed reply to {argv:?}: {other:?} in {out:?}"),
            }
        }
        // Subscribers' mail (the client's own pushes) is dropped, as a closed
        // connection would drop it.
        conn.info.mailbox.clear();
        all.push(out);
    }
    server.pubsub.forget(&mut conn);
    all
}
