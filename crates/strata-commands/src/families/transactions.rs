//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH.
//!
//! Between MULTI and EXEC the dispatcher queues commands (see `exec::execute`). EXEC
//! locks the shards of every key the queued commands name — or every shard, if one of
//! them touches keys it does not name — in ascending order, checks the WATCHed keys,
//! and runs the queue under those locks, so no other client sees a partial
//! transaction. A queued blocking command does not block: it answers as on timeout.

use std::sync::atomic::Ordering;

use crate::conn::{Multi, Watched};
use crate::ctx::{Ctx, Keys};
use crate::error::{CmdError, CmdResult};
use crate::spec::{Group, KeySpec};
use crate::table::{Command, key_positions};
use crate::{ConnState, acl, flags, kf};

const TX: Command = Command {
    group: Group::Transactions,
    acl: acl!(TRANSACTION),
    since: "1.2.0",
    complexity: "O(1)",
    ..Command::DEFAULT
};

pub const COMMANDS: &[Command] = &[
    Command {
        name: "multi",
        arity: 1,
        flags: flags!(NOSCRIPT, LOADING, STALE, FAST, ALLOW_BUSY),
        summary: "Starts a transaction.",
        handler: Some(multi),
        ..TX
    },
    Command {
        name: "exec",
        arity: 1,
        flags: flags!(NOSCRIPT, LOADING, STALE, SKIP_SLOWLOG),
        summary: "Executes all commands in a transaction.",
        complexity: "Depends on commands in the transaction",
        handler: Some(exec),
        ..TX
    },
    Command {
        name: "discard",
        arity: 1,
        flags: flags!(NOSCRIPT, LOADING, STALE, FAST, ALLOW_BUSY),
        since: "2.0.0",
        summary: "Discards a transaction.",
        complexity: "O(N), when N is the number of queued commands",
        handler: Some(discard),
        ..TX
    },
    Command {
        name: "watch",
        arity: -2,
        flags: flags!(NOSCRIPT, LOADING, STALE, FAST, ALLOW_BUSY),
        key_specs: &[KeySpec::range(1, -1, 1, kf!(RO))],
        since: "2.2.0",
        summary: "Monitors changes to keys to determine the execution of a transaction.",
        complexity: "O(1) for every key.",
        handler: Some(watch),
        ..TX
    },
    Command {
        name: "unwatch",
        arity: 1,
        flags: flags!(NOSCRIPT, LOADING, STALE, FAST, ALLOW_BUSY),
        since: "2.2.0",
        summary: "Forgets about watched keys of a transaction.",
        handler: Some(unwatch),
        ..TX
    },
];

/// Commands that run at once even between MULTI and EXEC.
pub fn runs_in_multi(cmd: &Command) -> bool {
    cmd.parent.is_none()
        && matches!(
            cmd.name,
            "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
        )
}

fn multi(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    if ctx.conn.multi.is_some() {
        return Err(CmdError::err("MULTI calls can not be nested"));
    }
    ctx.conn.set_multi(Some(Multi::default()));
    ctx.out.ok();
    Ok(())
}

fn discard(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    if ctx.conn.multi.is_none() {
        return Err(CmdError::err("DISCARD without MULTI"));
    }
    ctx.conn.set_multi(None);
    unwatch_all(ctx.keys, ctx.conn);
    ctx.out.ok();
    Ok(())
}

fn watch(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    if ctx.conn.multi.is_some() {
        return Err(CmdError::err("WATCH inside MULTI is not allowed"));
    }
    let db_index = ctx.keys.db;
    let now = ctx.keys.now_ms;
    for key in &args[1..] {
        if ctx
            .conn
            .watched
            .iter()
            .any(|w| w.db == db_index && w.key == *key)
        {
            continue;
        }
        let flag = ctx.conn.watch_dirty.clone();
        let (hash, db) = ctx.keys.db_for(key);
        let existed = db.peek(hash, key, now).is_some();
        db.watch(hash, key, &flag, now);
        ctx.conn.watched.push(Watched {
            db: db_index,
            key: key.to_vec(),
            existed,
        });
    }
    ctx.out.ok();
    Ok(())
}

fn unwatch(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    unwatch_all(ctx.keys, ctx.conn);
    ctx.out.ok();
    Ok(())
}

/// Forgets every key the connection watches (after EXEC or DISCARD, on UNWATCH, and
/// when the connection closes).
pub fn unwatch_all(keys: &mut Keys<'_>, conn: &mut ConnState) {
    for w in std::mem::take(&mut conn.watched) {
        let hash = keys.ks.hash(&w.key);
        let shard = keys.ks.shard_of_hash(hash);
        keys.with_shard(shard, |s| s.db(w.db).unwatch(&w.key, &conn.watch_dirty));
    }
    conn.watch_dirty.store(false, Ordering::Release);
}

fn exec(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let Some(multi) = ctx.conn.multi.take() else {
        return Err(CmdError::err("EXEC without MULTI"));
    };
    ctx.conn.set_multi(None);
    if multi.aborted {
        unwatch_all(ctx.keys, ctx.conn);
        return Err(CmdError::coded(
            "EXECABORT Transaction discarded because of previous errors.",
        ));
    }
    let registry = ctx.server.registry();
    let queued: Vec<(&'static Command, Vec<&[u8]>)> = multi
        .queued
        .iter()
        .filter_map(|argv| {
            let args: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
            crate::exec::resolve(registry, &args)
                .ok()
                .map(|cmd| (cmd, args))
        })
        .collect();
    lock_transaction(ctx, &queued);
    if watched_changed(ctx) {
        unwatch_all(ctx.keys, ctx.conn);
        ctx.out.null_array();
        return Ok(());
    }
    unwatch_all(ctx.keys, ctx.conn);
    let outer = ctx.cmd;
    ctx.conn.may_block = false;
    ctx.out.array(queued.len());
    for (cmd, args) in &queued {
        ctx.cmd = cmd;
        let Some(handler) = cmd.handler else { continue };
        let start = ctx.out.buffer().len();
        let silent = ctx.conn.reply.silent();
        // The rules may have changed since the command was queued.
        let result = crate::families::acl::check_queued(ctx, cmd, args)
            .and_then(|()| crate::tiered::warm_held(ctx.server, ctx.keys, cmd, args))
            .and_then(|()| handler(ctx, args));
        if let Err(e) = result {
            ctx.out.buffer().truncate(start);
            ctx.out.error(e.to_string().as_bytes());
        }
        // CLIENT REPLY OFF run earlier in the transaction drops the later replies.
        if silent && ctx.conn.reply.silent() {
            ctx.out.buffer().truncate(start);
        }
        ctx.keys.finish_command(cmd.log_rule, args);
        // A queued command's SELECT applies to the commands after it.
        ctx.keys.db = ctx.conn.db;
        crate::exec::remember_reads(ctx, cmd, args);
        if let Some(hub) = ctx.server.pubsub() {
            crate::monitor::feed(hub, ctx.conn, cmd, args, ctx.keys.now_ms);
        }
    }
    ctx.conn.may_block = true;
    ctx.cmd = outer;
    Ok(())
}

/// Locks what the queued commands (and the WATCHed keys) need, in ascending order.
fn lock_transaction(ctx: &mut Ctx, queued: &[(&'static Command, Vec<&[u8]>)]) {
    if queued.iter().any(|(cmd, _)| cmd.touches_all) {
        ctx.keys.lock_all();
        return;
    }
    let mut keys: Vec<&[u8]> = ctx.conn.watched.iter().map(|w| w.key.as_slice()).collect();
    for (cmd, args) in queued {
        keys.extend(
            key_positions(cmd, args)
                .into_iter()
                .filter_map(|i| args.get(i).copied()),
        );
    }
    ctx.keys.lock_keys(keys.into_iter());
}

/// Whether a WATCHed key changed since WATCH: a flagged change, or a key that existed
/// then and has expired since (without having been removed yet).
fn watched_changed(ctx: &mut Ctx) -> bool {
    if ctx.conn.watch_dirty.load(Ordering::Acquire) {
        return true;
    }
    let now = ctx.keys.now_ms;
    let watched = ctx.conn.watched.clone();
    watched.iter().any(|w| {
        let (hash, db) = ctx.keys.other_db_for(w.db, &w.key);
        w.existed && db.peek(hash, &w.key, now).is_none()
    })
}
