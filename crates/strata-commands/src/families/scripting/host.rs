//! How a script runs: the shards it holds, and the commands `redis.call` runs for it.
//!
//! A script runs under the shard locks of its command for its whole run, so no other
//! command interleaves with it on those keys. EVAL and FCALL name their keys
//! (`numkeys`); the dispatcher locks those shards before the handler runs. A script
//! that declares no key, or that reached undeclared keys in an earlier run, locks
//! every shard instead. When a script reaches a key outside what it holds, the shard
//! is taken on the spot if that keeps the ascending lock order; otherwise, if the
//! script has changed nothing yet, it is stopped and run again from the start with
//! every shard locked; if it has, the shard is waited for a bounded time, and the
//! command fails if it cannot be had.
//!
//! `redis.call` goes through the same checks as a client's command (unknown command,
//! arity) plus the script's own (no `noscript` commands, no writes in a read-only
//! script, MISCONF), then runs the handler against the held shards, with the
//! script's own selected database and RESP version. Each command's changes become
//! log records right after it, and the whole script is logged as one batch by the
//! dispatcher, like a transaction.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use strata_lua::Host;
use strata_resp::{Protocol, ReplyWriter};

use crate::ctx::Ctx;
use crate::error::CmdError;
use crate::exec::resolve;
use crate::scripting::Run;
use crate::spec::Flags;
use crate::table::key_positions;

/// How long a script waits for a shard below those it holds once it has written.
const LOWER_SHARD_WAIT: Duration = Duration::from_secs(1);

/// Why a run must start over with every shard locked.
pub const RESTART: &[u8] = b"strata: restart the script with every shard locked";

/// The per-run state `redis.call` works with.
pub struct ScriptHost<'c, 'a, 'k> {
    pub ctx: &'c mut Ctx<'a, 'k>,
    pub run: Arc<Run>,
    /// EVAL_RO, FCALL_RO, or a `no-writes` script.
    pub read_only: bool,
    /// A script flagged `allow-oom`.
    pub allow_oom: bool,
    /// The script's selected database (SELECT inside a script does not change the
    /// caller's).
    pub db: usize,
    /// Set when the script must run again with every shard locked.
    pub restart: bool,
    /// The name under which undeclared-key use is remembered.
    pub name: String,
}

impl ScriptHost<'_, '_, '_> {
    /// Makes sure the shards the command needs are held (see the module docs).
    fn hold_shards(
        &mut self,
        cmd: &'static crate::table::Command,
        argv: &[&[u8]],
    ) -> Result<(), Vec<u8>> {
        let keys = &mut self.ctx.keys;
        if keys.holds_all() {
            return Ok(());
        }
        let wrote = self.run.wrote.load(Ordering::Acquire);
        let wait = if wrote {
            LOWER_SHARD_WAIT
        } else {
            Duration::ZERO
        };
        let ok = if cmd.touches_all {
            keys.acquire_all(wait)
        } else {
            let mut ok = true;
            for i in key_positions(cmd, argv) {
                let Some(key) = argv.get(i) else { continue };
                let shard = keys.ks.shard_of(key);
                if !keys.acquire(shard, wait) {
                    ok = false;
                    break;
                }
            }
            ok
        };
        if ok {
            return Ok(());
        }
        if let Some(engine) = self.ctx.server.scripting() {
            engine.mark_needs_all_shards(&self.name);
        }
        if !wrote {
            self.restart = true;
            return Err(RESTART.to_vec());
        }
        Err(b"-ERR strata: the script reached a key it did not declare, held by another client; declare every key the script uses".to_vec())
    }
}

impl Host for ScriptHost<'_, '_, '_> {
    fn call(&mut self, argv: &[&[u8]], resp3: bool, reply: &mut Vec<u8>) -> Result<(), Vec<u8>> {
        if self.restart {
            return Err(RESTART.to_vec());
        }
        let server = self.ctx.server;
        let cmd = match resolve(server.registry(), argv) {
            Ok(cmd) => cmd,
            Err((Some(_), CmdError::WrongArity(_))) => {
                return Err(b"Wrong number of args calling Redis command from script".to_vec());
            }
            Err(_) => return Err(b"Unknown Redis command called from script".to_vec()),
        };
        let Some(handler) = cmd.handler else {
            return Err(b"Wrong number of args calling Redis command from script".to_vec());
        };
        if cmd.flags.contains(Flags::NOSCRIPT) {
            return Err(b"This Redis command is not allowed from script".to_vec());
        }
        let now = self.ctx.keys.now_ms;
        crate::families::acl::check_script_call(server, self.ctx.conn, cmd, argv, now)
            .map_err(|text| text.as_bytes().to_vec())?;
        if cmd.is_write() {
            if self.read_only {
                return Err(b"Write commands are not allowed from read-only scripts.".to_vec());
            }
            if let Some(e) = server.write_error() {
                let mut text = b"-".to_vec();
                text.extend_from_slice(e.as_bytes());
                return Err(text);
            }
        }
        if self.ctx.conn.oom && !self.allow_oom && cmd.flags.contains(Flags::DENYOOM) {
            let mut text = b"-".to_vec();
            text.extend_from_slice(crate::evict::OOM_ERROR);
            return Err(text);
        }
        self.hold_shards(cmd, argv)?;
        if cmd.is_write() {
            self.run.wrote.store(true, Ordering::Release);
        }
        let ctx = &mut *self.ctx;
        let outer_cmd = ctx.cmd;
        let outer_db = ctx.conn.db;
        let outer_proto = ctx.conn.proto;
        let proto = if resp3 {
            Protocol::Resp3
        } else {
            Protocol::Resp2
        };
        ctx.cmd = cmd;
        ctx.conn.db = self.db;
        ctx.keys.db = self.db;
        ctx.conn.proto = proto;
        ctx.out.set_protocol(proto);
        let start = ctx.out.buffer().len();
        let result =
            crate::tiered::warm_held(server, ctx.keys, cmd, argv).and_then(|()| handler(ctx, argv));
        if let Err(e) = result {
            ctx.out.buffer().truncate(start);
            ReplyWriter::new(ctx.out.buffer(), proto).error(&e.to_bytes());
        }
        ctx.keys.finish_command(cmd.log_rule, argv);
        crate::exec::remember_reads(ctx, cmd, argv);
        if let Some(hub) = server.pubsub()
            && hub.has_monitors()
            && crate::monitor::shown(cmd)
        {
            let micros = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros());
            let line = crate::monitor::line(micros, self.db, "lua", argv);
            hub.feed_monitors(bytes::Bytes::from(line), ctx.keys.now_ms);
        }
        // A SELECT in the script changes the script's database only.
        self.db = ctx.conn.db;
        if ctx.conn.db != outer_db {
            ctx.conn.set_db(outer_db);
        }
        ctx.keys.db = outer_db;
        ctx.conn.proto = outer_proto;
        ctx.out.set_protocol(outer_proto);
        ctx.cmd = outer_cmd;
        let buf = ctx.out.buffer();
        reply.extend_from_slice(&buf[start..]);
        buf.truncate(start);
        Ok(())
    }

    fn acl_check(&mut self, argv: &[&[u8]]) -> Option<bool> {
        let server = self.ctx.server;
        let cmd = resolve(server.registry(), argv).ok()?;
        Some(crate::families::acl::may_run(
            server,
            self.ctx.conn,
            cmd,
            argv,
        ))
    }
}
