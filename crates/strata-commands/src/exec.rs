//! Running one command: look it up, check it, lock its shards, call its handler.
//!
//! The checks come from the command table and happen in Redis's order (unknown command,
//! arity, authentication, ACL permissions) before the handler runs, so handlers never
//! repeat them.

use std::sync::atomic::Ordering;

use smallvec::SmallVec;
use strata_keyspace::{Detached, Keyspace};
use strata_resp::ReplyWriter;

use crate::conn::ConnState;
use crate::ctx::{Ctx, Held, Keys, log_records};
use crate::error::{CmdError, c_str};
use crate::evict;
use crate::families::transactions::runs_in_multi;
use crate::server::Server;
use crate::spec::{BeginSearch, FindKeys, Flags};
use crate::table::{Command, Registry, key_positions};
use crate::tiered::{self, ColdKey};

/// What happened when a command ran, for the caller's statistics.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The command run, if the name was known.
    pub cmd: Option<&'static Command>,
    /// Whether it was rejected before running (unknown, arity, auth).
    pub rejected: bool,
    /// Whether it replied with an error.
    pub failed: bool,
    /// Keys changed.
    pub dirty: u64,
    /// Keys that may now satisfy blocked clients, as (database, key).
    pub ready: Vec<(usize, Vec<u8>)>,
    /// The log sequence the reply must wait for to be durable, if any.
    pub durable: Option<u64>,
    /// Values out of memory the command needs: it did not run and wrote nothing;
    /// the caller reads them back and runs it again (see [`crate::tiered`]).
    pub fetch: Vec<ColdKey>,
    /// Where its reply begins in the output (set by [`execute_held`]).
    pub reply_at: usize,
}

impl Outcome {
    fn rejected(cmd: Option<&'static Command>) -> Outcome {
        Outcome {
            cmd,
            rejected: true,
            failed: true,
            dirty: 0,
            ready: Vec::new(),
            durable: None,
            fetch: Vec::new(),
            reply_at: 0,
        }
    }
}

/// Finds the command (or subcommand) `argv` names, or the error to reply with.
pub fn resolve(
    registry: &Registry,
    argv: &[&[u8]],
) -> Result<&'static Command, (Option<&'static Command>, CmdError)> {
    let Some(name) = argv.first() else {
        return Err((None, CmdError::err("empty command")));
    };
    let Some(cmd) = registry.get(name) else {
        return Err((None, unknown_command(argv)));
    };
    let cmd = if cmd.subcommands.is_empty() || (argv.len() == 1 && cmd.handler.is_some()) {
        cmd
    } else {
        let Some(sub) = argv.get(1) else {
            return Err((Some(cmd), CmdError::WrongArity(cmd.name.to_string())));
        };
        match Registry::subcommand(cmd, sub) {
            Some(s) => s,
            None => return Err((Some(cmd), CmdError::unknown_subcommand(cmd.name, sub))),
        }
    };
    if !arity_ok(cmd.arity, argv.len()) {
        return Err((Some(cmd), CmdError::WrongArity(cmd.full_name())));
    }
    Ok(cmd)
}

#[inline]
pub fn arity_ok(arity: i32, argc: usize) -> bool {
    let argc = argc as i64;
    let arity = arity as i64;
    if arity >= 0 {
        argc == arity
    } else {
        argc >= -arity
    }
}

/// Redis's text for an unknown command: the name and the first arguments, each
/// quoted as C's `%.*s` does (see [`c_str`]), up to about 128 bytes.
pub fn unknown_command(argv: &[&[u8]]) -> CmdError {
    let mut text = b"ERR unknown command '".to_vec();
    text.extend_from_slice(c_str(argv[0], 128));
    text.extend_from_slice(b"', with args beginning with: ");
    let mut args: Vec<u8> = Vec::new();
    for arg in &argv[1..] {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        args.push(b'\'');
        args.extend_from_slice(c_str(arg, room));
        args.extend_from_slice(b"' ");
    }
    text.extend_from_slice(&args);
    CmdError::Other(text.into())
}

/// Runs `argv` for a connection, appending the reply to `out` (unless CLIENT REPLY
/// says to drop it).
pub fn execute(
    server: &dyn Server,
    ks: &Keyspace,
    conn: &mut ConnState,
    out: &mut Vec<u8>,
    argv: &[&[u8]],
    now_ms: u64,
) -> Outcome {
    let mut held = Held::new(ks);
    let mut outcome = execute_held(server, ks, conn, out, argv, now_ms, &mut held);
    outcome.durable = outcome.durable.max(held.finish(server, out));
    outcome
}

/// [`execute`] for one of a run of pipelined commands: a command on the shard
/// `held` keeps locked runs under it, and a plain command on one key leaves its shard
/// and records there for the next (see [`Held`]). Anything else releases it first.
/// The caller ends it with [`Held::finish`] before writing replies or waiting, which
/// gives the log sequence those replies must wait for.
pub fn execute_held<'a>(
    server: &'a dyn Server,
    ks: &'a Keyspace,
    conn: &mut ConnState,
    out: &mut Vec<u8>,
    argv: &[&[u8]],
    now_ms: u64,
    held: &mut Held<'a>,
) -> Outcome {
    let mut start = out.len();
    let silent_before = conn.reply.silent();
    let mut outcome = dispatch(server, ks, conn, out, argv, now_ms, held, &mut start);
    outcome.reply_at = start;
    if !outcome.fetch.is_empty() {
        // Not run yet: it runs again once its values are back.
        return outcome;
    }
    // As in Redis, a reply is dropped if replies were off when the command began and
    // still are (CLIENT REPLY ON answers OK); pub/sub confirmations always go out.
    if silent_before && conn.reply.silent() && !outcome.cmd.is_some_and(is_subscription) {
        out.truncate(start);
    }
    conn.reply.skip = conn.reply.skip_next;
    conn.reply.skip_next = false;
    // CLIENT CACHING applies to the next command (the whole of a transaction).
    if conn.multi.is_none() && outcome.cmd.is_none_or(|c| c.parent != Some("client")) {
        conn.caching = false;
    }
    outcome
}

/// The (un)subscribe commands, whose confirmations Redis sends even with replies off.
fn is_subscription(cmd: &Command) -> bool {
    cmd.parent.is_none()
        && matches!(
            cmd.name,
            "subscribe"
                | "unsubscribe"
                | "psubscribe"
                | "punsubscribe"
                | "ssubscribe"
                | "sunsubscribe"
        )
}

/// The commands RESP2's subscribed mode allows.
fn allowed_when_subscribed(cmd: &Command) -> bool {
    is_subscription(cmd) || (cmd.parent.is_none() && matches!(cmd.name, "ping" | "quit" | "reset"))
}

#[allow(clippy::too_many_arguments)]
fn dispatch<'a>(
    server: &'a dyn Server,
    ks: &'a Keyspace,
    conn: &mut ConnState,
    out: &mut Vec<u8>,
    argv: &[&[u8]],
    now_ms: u64,
    held: &mut Held<'a>,
    start: &mut usize,
) -> Outcome {
    let resolved = resolve(server.registry(), argv);
    // Read once for the checks below and for whether the shard may stay held.
    let evicting = server.eviction().is_some_and(|e| e.enabled());
    let loading = server.loading();
    let shard = match &resolved {
        Ok(cmd) if !evicting && !loading => holdable_shard(ks, conn, cmd, argv),
        _ => None,
    };
    // What follows may lock shards (evictions, a rejected EXEC's UNWATCH, the
    // command itself): only a command on a shard held keeps the hold. A write on
    // a shard not held joins it if it can (see `Held`); a read does not (it has
    // nothing to log, and holding its shard only keeps other clients waiting).
    if !held.is_empty() {
        let writes = resolved.as_ref().is_ok_and(|c| c.is_write());
        let keep =
            held.has_room() && shard.is_some_and(|s| held.holds(s) || (writes && held.try_hold(s)));
        if !keep {
            held.release_at(server, out, start);
        }
    }
    // CLIENT LIST shows the command being run (or the last one run) as Redis records
    // it before any check: the command found, or none for an unknown (sub)command.
    let current = match &resolved {
        Ok(cmd) | Err((Some(cmd), CmdError::WrongArity(_))) => Some(*cmd),
        Err(_) => None,
    };
    conn.info
        .last_cmd
        .store(current.map_or(usize::MAX, |c| c.id), Ordering::Relaxed);
    let cmd = match resolved {
        Ok(cmd) => cmd,
        Err((cmd, e)) => return reject(ks, conn, out, cmd, &e.to_bytes()),
    };
    if !cmd.flags.contains(Flags::NO_AUTH) && crate::families::acl::auth_required(server, conn) {
        return reject(ks, conn, out, Some(cmd), b"NOAUTH Authentication required.");
    }
    if let Err(text) = crate::families::acl::check_command(server, conn, cmd, argv, now_ms) {
        return reject(ks, conn, out, Some(cmd), text.as_bytes());
    }
    // Redis 7.0 evicts (and refuses what needs memory) right after the
    // authentication and ACL checks; nothing is evicted while the dataset loads.
    conn.oom =
        evicting && !loading && evict::perform_evictions(server, ks, now_ms) == evict::Evict::Fail;
    if conn.oom
        && evict::rejects_on_oom(
            cmd,
            conn.multi.as_ref().map(|m| m.queued.as_slice()),
            server.registry(),
        )
    {
        return reject(ks, conn, out, Some(cmd), evict::OOM_ERROR);
    }
    if conn.in_subscribed_mode() && !allowed_when_subscribed(cmd) {
        let text = format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            cmd.full_name()
        );
        return reject(ks, conn, out, Some(cmd), text.as_bytes());
    }
    if conn.info.monitor.load(Ordering::Relaxed)
        && cmd
            .flags
            .intersects(Flags::READONLY | Flags::WRITE | Flags::MAY_REPLICATE)
    {
        return reject(
            ks,
            conn,
            out,
            Some(cmd),
            b"ERR Replica can't interact with the keyspace",
        );
    }
    if !cmd.flags.contains(Flags::ALLOW_BUSY)
        && let Some(busy) = server.scripting().and_then(|s| s.busy_error())
    {
        return reject(ks, conn, out, Some(cmd), busy.as_bytes());
    }
    if conn.multi.is_some() && !runs_in_multi(cmd) {
        if cmd.flags.contains(Flags::NO_MULTI) {
            return reject(
                ks,
                conn,
                out,
                Some(cmd),
                b"ERR Command not allowed inside a transaction",
            );
        }
        if let Some(multi) = conn.multi.as_mut() {
            multi.queued.push(argv.iter().map(|a| a.to_vec()).collect());
            conn.info
                .multi
                .store(multi.queued.len() as i64, Ordering::Relaxed);
        }
        out.extend_from_slice(strata_resp::reply::QUEUED);
        return Outcome {
            cmd: None,
            rejected: false,
            failed: false,
            dirty: 0,
            ready: Vec::new(),
            durable: None,
            fetch: Vec::new(),
            reply_at: 0,
        };
    }
    if loading && !cmd.flags.contains(Flags::LOADING) {
        return reject(
            ks,
            conn,
            out,
            Some(cmd),
            b"LOADING Redis is loading the dataset in memory",
        );
    }
    if (cmd.is_write() || (cmd.name == "ping" && cmd.parent.is_none()))
        && let Some(e) = server.write_error()
    {
        return reject(ks, conn, out, Some(cmd), e.as_bytes());
    }
    run_in(server, ks, conn, out, cmd, argv, now_ms, shard, held, start)
}

/// The shard of a command that may run under a [`Held`] shard and leave its own
/// there: a plain read or write of one key at a fixed position, outside a
/// transaction. (The caller also rules out eviction and loading, and `run_in`
/// values out of memory: nothing may move values between the commands.)
fn holdable_shard(ks: &Keyspace, conn: &ConnState, cmd: &Command, argv: &[&[u8]]) -> Option<usize> {
    if cmd.handler.is_none()
        || !cmd.flags.intersects(Flags::READONLY | Flags::WRITE)
        || cmd.flags.intersects(
            Flags::ADMIN | Flags::BLOCKING | Flags::NO_MULTI | Flags::PUBSUB | Flags::MOVABLEKEYS,
        )
        || cmd.touches_all
        || cmd.getkeys.is_some()
        || conn.multi.is_some()
        || conn.replaying
        || conn.reply.silent()
        || conn.reply.skip_next
    {
        return None;
    }
    let key = argv.get(single_key_at(cmd)?)?;
    Some(ks.shard_of(key))
}

/// The position of a command's one key, for a command whose only key spec names one
/// key at a fixed position.
fn single_key_at(cmd: &Command) -> Option<usize> {
    if let [spec] = cmd.key_specs
        && let (BeginSearch::Index(i), FindKeys::Range { last_key: 0, .. }) =
            (spec.begin, spec.find)
        && cmd.getkeys.is_none()
        && !spec.flags.contains(crate::spec::KeyFlags::NOT_KEY)
    {
        Some(i as usize)
    } else {
        None
    }
}

/// Replies with a rejection; inside MULTI it also dooms the transaction (EXECABORT),
/// and a rejected EXEC ends it at once with the reason, as Redis's
/// `execCommandAbort` does.
fn reject(
    ks: &Keyspace,
    conn: &mut ConnState,
    out: &mut Vec<u8>,
    cmd: Option<&'static Command>,
    text: &[u8],
) -> Outcome {
    let is_exec = cmd.is_some_and(|c| c.parent.is_none() && c.name == "exec");
    if is_exec {
        // Even outside MULTI, as Redis's `execCommandAbort` does.
        conn.set_multi(None);
        let mut keys = Keys::new(ks, conn.db, 0);
        crate::families::transactions::unwatch_all(&mut keys, conn);
        let reason = text.strip_prefix(b"ERR ").unwrap_or(text);
        let mut msg = b"EXECABORT Transaction discarded because of: ".to_vec();
        msg.extend_from_slice(reason);
        ReplyWriter::new(out, conn.proto).error(&msg);
        return Outcome::rejected(cmd);
    }
    if let Some(multi) = conn.multi.as_mut() {
        multi.aborted = true;
    }
    ReplyWriter::new(out, conn.proto).error(text);
    Outcome::rejected(cmd)
}

/// Runs a resolved and checked command. `shard` is the command's shard if it may run
/// under `held` and leave its shard there (see [`holdable_shard`]); `held` holds
/// nothing or that shard. `start` is where its reply begins in `out`.
#[allow(clippy::too_many_arguments)]
fn run_in<'a>(
    server: &'a dyn Server,
    ks: &'a Keyspace,
    conn: &mut ConnState,
    out: &mut Vec<u8>,
    cmd: &'static Command,
    argv: &[&[u8]],
    now_ms: u64,
    shard: Option<usize>,
    held: &mut Held<'a>,
    start: &mut usize,
) -> Outcome {
    debug_assert!(held.is_empty() || shard.is_some_and(|s| held.holds(s)));
    let Some(handler) = cmd.handler else {
        ReplyWriter::new(out, conn.proto).error(&CmdError::WrongArity(cmd.full_name()).to_bytes());
        return Outcome::rejected(Some(cmd));
    };
    let hub = server.pubsub();
    let tiering = strata_keyspace::value::cold_keys() > 0;
    if tiering {
        // Values left memory since the command was found holdable: the commands
        // before it are logged before it may have to wait for values.
        held.release_at(server, out, start);
    }
    let (outcome, freed) = {
        // A command that may leave its shard held runs in the hold's view (see
        // `Held`); any other in a view of its own, which lives in this block and is
        // dropped where it ends, releasing its shards.
        let mut own = None;
        let keys: &mut Keys<'a> = if shard.is_some() {
            held.keys.begin_command(conn.db, now_ms);
            &mut held.keys
        } else {
            own.insert(Keys::new(ks, conn.db, now_ms))
        };
        keys.track_ready = server.has_blocked_clients();
        keys.logging_flag = server.logging_flag();
        keys.lazyfree = server.lazyfree();
        keys.notify = hub;
        keys.client_id = conn.info.id;
        keys.no_touch = conn
            .info
            .no_touch
            .load(std::sync::atomic::Ordering::Relaxed)
            && cmd.name != "touch";
        // A held view that holds its shard already runs the command under it.
        if keys.holds_none()
            && let Err(busy) = lock_for(server, keys, cmd, argv, shard)
        {
            ReplyWriter::new(out, conn.proto).error(busy.as_bytes());
            return Outcome::rejected(Some(cmd));
        }
        if tiering {
            let cold = cold_values(server, ks, keys, conn, cmd, argv, now_ms);
            if !cold.is_empty() {
                // On the way out, its shards are released (a held view made no
                // records since the hold was released above).
                if conn.fetch_cold {
                    keys.release();
                    return Outcome {
                        cmd: Some(cmd),
                        rejected: false,
                        failed: false,
                        dirty: 0,
                        ready: Vec::new(),
                        durable: None,
                        fetch: cold,
                        reply_at: 0,
                    };
                }
                if let Err(e) = tiered::warm_all(server, keys, &cold) {
                    keys.release();
                    ReplyWriter::new(out, conn.proto).error(&e.to_bytes());
                    return Outcome::rejected(Some(cmd));
                }
            }
        }
        let proto = conn.proto;
        // Records made before this command (under a held shard).
        let adopted = keys.records_made();
        let mut ctx = Ctx {
            keys: &mut *keys,
            out: ReplyWriter::new(out, proto),
            conn,
            server,
            cmd,
        };
        let result = handler(&mut ctx, argv);
        ctx.keys.finish_command(cmd.log_rule, argv);
        remember_reads(&mut ctx, cmd, argv);
        ctx.keys.flush_events();
        if let Some(hub) = hub
            && hub.tracking.active() > 0
        {
            let keys = &mut ctx.keys;
            hub.tracking
                .flush_bcast(keys.client_id, &hub.limits, &mut keys.tracking, keys.now_ms);
            ctx.conn
                .after_reply
                .append(&mut ctx.keys.tracking.after_reply);
        }
        ctx.keys.collect_expired_values();
        let freed = std::mem::take(&mut ctx.keys.freed);
        let dirty = ctx.keys.dirty;
        let ready = std::mem::take(&mut ctx.keys.ready);
        let mut failed = match result {
            Ok(()) => out.get(*start) == Some(&b'-'),
            Err(e) => {
                debug_assert_eq!(
                    out.len(),
                    *start,
                    "{} wrote a reply and then failed",
                    cmd.full_name()
                );
                out.truncate(*start);
                ReplyWriter::new(out, proto).error(&e.to_bytes());
                true
            }
        };
        let reply = (keys.records_made() > adopted).then_some(*start..out.len());
        held.run.ran(reply);
        let mut durable = None;
        if shard.is_none() || tiering || !ready.is_empty() || conn.block.is_some() {
            // Logged while the command's shard locks are still held, so that the log's
            // order of changes to a key is the order in which they happened. The
            // replies of the records' commands are needed only should the log
            // refuse them.
            match log_records(server, keys, held.run.replies(), out, start) {
                Ok(n) => durable = n,
                Err(()) => failed = true,
            }
            held.run.clear_replies();
            // Its shards go now, whichever view ran it.
            keys.release();
        }
        // Otherwise its shard and records stay for the next command (see `Held`).
        let outcome = Outcome {
            cmd: Some(cmd),
            rejected: false,
            failed,
            dirty,
            ready,
            durable,
            fetch: Vec::new(),
            reply_at: 0,
        };
        (outcome, freed)
    };
    if !freed.is_empty() {
        server.free_later(freed.into_iter().map(Detached::Value).collect());
    }
    if outcome.dirty > 0 {
        server.add_dirty(outcome.dirty);
    }
    if let Some(hub) = hub
        && !conn.replaying
    {
        crate::monitor::feed(hub, conn, cmd, argv, now_ms);
    }
    outcome
}

/// The values out of memory that `cmd` needs (`maxmemory-policy tiered`): those of
/// its keys, with their shards held, and for EXEC those of its queue's keys, which
/// it locks itself (and reads at once, should one still be out then).
fn cold_values(
    server: &dyn Server,
    ks: &Keyspace,
    keys: &mut Keys<'_>,
    conn: &ConnState,
    cmd: &'static Command,
    argv: &[&[u8]],
    now_ms: u64,
) -> Vec<ColdKey> {
    // A command run again after its values were read back was counted already.
    let stats = server.tiered_stats().filter(|_| !conn.refetched);
    // Values in a buffer or the operating system's cache are read back at once:
    // that never waits for the device.
    let mut cold: Vec<ColdKey> = if tiered::needs_values(cmd, argv) {
        let cold = tiered::cold_among(keys, stats, cmd, argv);
        if cold.is_empty() {
            cold
        } else {
            tiered::warm_cached(server, cold, |c, v| tiered::put_back(keys, c, v))
        }
    } else {
        Vec::new()
    };
    if cmd.parent.is_none()
        && cmd.name == "exec"
        && conn.fetch_cold
        && let Some(multi) = &conn.multi
    {
        let registry = server.registry();
        let mut wanted: Vec<(usize, &[u8])> = Vec::new();
        for queued in &multi.queued {
            let args: SmallVec<[&[u8]; 8]> = queued.iter().map(Vec::as_slice).collect();
            if let Ok(c) = resolve(registry, &args)
                && tiered::needs_values(c, &args)
            {
                wanted.extend(
                    key_positions(c, &args)
                        .into_iter()
                        .filter_map(|i| queued.get(i))
                        .map(|k| (conn.db, k.as_slice())),
                );
            }
        }
        let queued = tiered::cold_unlocked(ks, now_ms, wanted.into_iter());
        cold.extend(tiered::warm_cached(server, queued, |c, v| {
            tiered::install(ks, c, v, now_ms);
        }));
    }
    cold
}

/// CLIENT TRACKING: remembers the keys a read-only command of a tracking client
/// read (not in BCAST mode; with OPTIN only after CLIENT CACHING YES, with OPTOUT
/// unless CLIENT CACHING NO).
#[inline]
pub fn remember_reads(ctx: &mut Ctx, cmd: &Command, argv: &[&[u8]]) {
    if ctx.conn.info.tracking_on.load(Ordering::Relaxed) && cmd.flags.contains(Flags::READONLY) {
        remember_tracked_reads(ctx, cmd, argv);
    }
}

/// The body of [`remember_reads`], out of the common path.
#[inline(never)]
fn remember_tracked_reads(ctx: &mut Ctx, cmd: &Command, argv: &[&[u8]]) {
    let info = &ctx.conn.info;
    let Some(hub) = ctx.server.pubsub() else {
        return;
    };
    {
        let t = info.tracking.lock();
        let caching = ctx.conn.caching;
        if t.bcast || (t.optin && !caching) || (t.optout && caching) {
            return;
        }
    }
    let positions = key_positions(cmd, argv);
    let keys = &mut ctx.keys;
    hub.tracking.remember(
        info.id,
        positions.iter().filter_map(|&i| argv.get(i).copied()),
        &hub.limits,
        &mut keys.tracking,
        keys.now_ms,
    );
}

/// Locks the shards of the command's keys before it runs. A script may hold those
/// shards for long: the wait then gives up with the BUSY error once the script passes
/// `busy-reply-threshold` (unless the command may run then), as Redis answers BUSY
/// to the commands that arrive while a script is past it. (A script may have taken
/// the shards just before registering as running, so the wait is always one that
/// can give up.)
/// `shard` is the shard of its one key, if known already.
fn lock_for(
    server: &dyn Server,
    keys: &mut Keys<'_>,
    cmd: &Command,
    argv: &[&[u8]],
    shard: Option<usize>,
) -> Result<(), &'static str> {
    let scripting = server
        .scripting()
        .filter(|_| !cmd.flags.contains(Flags::ALLOW_BUSY));
    let give_up = || scripting.is_some_and(|s| s.busy_error().is_some());
    // The common case, one key at a fixed position, without building a list.
    let locked = if let Some(s) = shard {
        keys.lock_shards_unless(&[s], &give_up)
    } else if let Some(i) = single_key_at(cmd) {
        match argv.get(i) {
            Some(key) => keys.lock_keys_unless(std::iter::once(*key), &give_up),
            None => true,
        }
    } else if cmd.key_specs.is_empty() && cmd.getkeys.is_none() {
        true
    } else {
        let positions: SmallVec<[usize; 8]> = key_positions(cmd, argv).into_iter().collect();
        let locked = keys.lock_keys_unless(
            positions.iter().filter_map(|&i| argv.get(i).copied()),
            &give_up,
        );
        if locked && cmd.flags.contains(Flags::WRITE) {
            keys.expect_changes(positions.len());
        }
        locked
    };
    match locked {
        true => Ok(()),
        false => Err(scripting
            .and_then(|s| s.busy_error())
            .unwrap_or(crate::scripting::BUSY_EVAL)),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use strata_keyspace::Keyspace;

    use super::*;
    use crate::conn::ClientInfo;
    use crate::fake::Fake;

    struct Pipeline<'a> {
        server: &'a Fake,
        ks: &'a Keyspace,
        conn: ConnState,
        out: Vec<u8>,
        held: Held<'a>,
        /// What the last [`Held::finish`] said the replies wait for.
        durable: Option<u64>,
    }

    impl<'a> Pipeline<'a> {
        fn new(server: &'a Fake, ks: &'a Keyspace) -> Pipeline<'a> {
            let info = ClientInfo::new(1, String::new(), String::new(), -1, 0, Box::new(|| {}));
            Pipeline {
                server,
                ks,
                conn: ConnState::new(Arc::new(info), true),
                out: Vec::new(),
                held: Held::new(ks),
                durable: None,
            }
        }

        /// Runs one command of the pipeline; returns where its reply begins.
        fn run(&mut self, args: &[&str]) -> usize {
            let argv: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            let outcome = execute_held(
                self.server,
                self.ks,
                &mut self.conn,
                &mut self.out,
                &argv,
                1_000,
                &mut self.held,
            );
            outcome.reply_at
        }

        fn release(&mut self) -> String {
            let mut held = std::mem::replace(&mut self.held, Held::new(self.ks));
            self.durable = held.finish(self.server, &mut self.out);
            String::from_utf8_lossy(&std::mem::take(&mut self.out)).into_owned()
        }
    }

    /// A key in a shard other than `key`'s.
    fn elsewhere(ks: &Keyspace, key: &str) -> String {
        (0..)
            .map(|i| format!("other{i}"))
            .find(|k| ks.shard_of(k.as_bytes()) != ks.shard_of(key.as_bytes()))
            .expect("a key in another shard")
    }

    /// The records in each batch logged, in order.
    fn batch_sizes(server: &Fake) -> Vec<usize> {
        server.batches.lock().iter().map(Vec::len).collect()
    }

    fn batch_keys(server: &Fake) -> Vec<Vec<String>> {
        server
            .batches
            .lock()
            .iter()
            .map(|b| {
                b.iter()
                    .map(|r| String::from_utf8_lossy(&r.key).into_owned())
                    .collect()
            })
            .collect()
    }

    /// Where the store put each record of a held run's batch is listed for its
    /// own key, whichever of the held shards it is in and in whatever order they
    /// were taken.
    #[test]
    fn a_held_batch_lists_each_record_where_it_went() {
        let server = Fake::logging();
        server.locate.store(true, Ordering::Relaxed);
        let ks = Keyspace::new(16, 64);
        // Keys in shards of their own, taken in no order of the shards.
        let mut keys: Vec<String> = Vec::new();
        let mut shards = std::collections::HashSet::new();
        for i in 0.. {
            let key = format!("key:{i}");
            if shards.insert(ks.shard_of(key.as_bytes())) {
                keys.push(key);
            }
            if keys.len() == 12 {
                break;
            }
        }
        let mut p = Pipeline::new(&server, &ks);
        for key in &keys {
            p.run(&["SET", key, "v"]);
        }
        assert_eq!(p.held.shards().count(), keys.len());
        p.release();
        assert_eq!(batch_sizes(&server), vec![keys.len()]);
        for (i, key) in keys.iter().enumerate() {
            let hash = ks.hash(key.as_bytes());
            let mut shard = ks.lock(ks.shard_of(key.as_bytes()));
            let listed: Vec<_> = shard
                .db(0)
                .log_refs(hash, key.as_bytes())
                .map(|r| r.locations().map(|l| (l.segment, l.offset)).collect())
                .unwrap_or_default();
            assert_eq!(listed, vec![(1, i as u32)], "{key}");
        }
    }

    #[test]
    fn pipelined_commands_on_one_shard_keep_it_and_log_one_batch() {
        let server = Fake::logging();
        let ks = Keyspace::new(16, 8);
        let other = elsewhere(&ks, "k");
        let mut p = Pipeline::new(&server, &ks);
        p.run(&["LPUSH", "k", "a"]);
        p.run(&["LPUSH", "k", "b"]);
        p.run(&["GET", "k"]);
        p.run(&["RPUSH", "k", "c"]);
        let shard = ks.shard_of(b"k");
        assert_eq!(p.held.shards().collect::<Vec<_>>(), vec![shard]);
        assert!(server.batches.lock().is_empty(), "logged while held");
        assert!(
            ks.try_lock_for(shard, Duration::from_millis(1)).is_none(),
            "the shard is free between the commands"
        );
        // A write on another shard, free, joins the hold.
        p.run(&["SET", &other, "1"]);
        let other_shard = ks.shard_of(other.as_bytes());
        let mut both = vec![shard, other_shard];
        both.sort_unstable();
        assert_eq!(p.held.shards().collect::<Vec<_>>(), both);
        assert!(server.batches.lock().is_empty(), "logged while held");
        // A command that is not on one key releases them, before it runs.
        p.run(&["DEL", "k", &other]);
        let batches = batch_keys(&server);
        assert_eq!(batches.len(), 2);
        assert!(batches[0].len() >= 4 && batches[0].iter().take(3).all(|k| k == "k"));
        assert_eq!(batches[0].last(), Some(&other));
        assert!(p.held.is_empty());
        let out = p.release();
        assert_eq!(
            out,
            ":1\r\n:2\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n:3\r\n+OK\r\n:2\r\n"
        );
        assert_eq!(server.batches.lock().len(), 2);
        // The batch released along the way; DEL's own is its outcome's.
        assert_eq!(p.durable, Some(1));
    }

    #[test]
    fn a_read_on_another_shard_releases_the_hold() {
        let server = Fake::logging();
        let ks = Keyspace::new(16, 8);
        let other = elsewhere(&ks, "k");
        let mut p = Pipeline::new(&server, &ks);
        p.run(&["SET", "k", "1"]);
        p.run(&["GET", &other]);
        assert_eq!(batch_keys(&server), vec![vec!["k".to_string()]]);
        assert_eq!(
            p.held.shards().collect::<Vec<_>>(),
            vec![ks.shard_of(other.as_bytes())]
        );
        assert_eq!(p.release(), "+OK\r\n$-1\r\n");
    }

    #[test]
    fn a_write_whose_shard_is_busy_releases_the_hold_and_waits() {
        let server = Fake::logging();
        let ks = Keyspace::new(16, 8);
        let other = elsewhere(&ks, "k");
        let other_shard = ks.shard_of(other.as_bytes());
        let mut p = Pipeline::new(&server, &ks);
        p.run(&["SET", "k", "1"]);
        let (taken, release) = (
            std::sync::Barrier::new(2),
            std::sync::atomic::AtomicBool::new(false),
        );
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let _guard = ks.lock(other_shard);
                taken.wait();
                while !release.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
            taken.wait();
            scope.spawn(|| {
                // The shard of "k" is free once the pipeline gave up its hold.
                let k = ks.try_lock_for(ks.shard_of(b"k"), Duration::from_secs(10));
                release.store(true, Ordering::Release);
                assert!(k.is_some(), "the hold was kept during the wait");
            });
            p.run(&["SET", &other, "2"]);
        });
        assert_eq!(
            batch_keys(&server),
            vec![vec!["k".to_string()]],
            "logged before the wait"
        );
        assert_eq!(p.held.shards().collect::<Vec<_>>(), vec![other_shard]);
        assert_eq!(p.release(), "+OK\r\n+OK\r\n");
        assert_eq!(batch_keys(&server)[1], vec![other.clone()]);
    }

    #[test]
    fn a_hold_ends_after_its_shard_limit() {
        let server = Fake::logging();
        let ks = Keyspace::new(16, 64);
        let mut shards_seen = std::collections::HashSet::new();
        let keys: Vec<String> = (0..)
            .map(|i| format!("key{i}"))
            .filter(|k| shards_seen.insert(ks.shard_of(k.as_bytes())))
            .take(Held::MAX_SHARDS + 3)
            .collect();
        let mut p = Pipeline::new(&server, &ks);
        for k in &keys {
            p.run(&["SET", k, "v"]);
        }
        p.release();
        assert_eq!(batch_sizes(&server), vec![Held::MAX_SHARDS, 3]);
    }

    #[test]
    fn without_the_log_a_hold_keeps_one_shard() {
        let server = Fake::new();
        let ks = Keyspace::new(16, 8);
        let other = elsewhere(&ks, "k");
        let mut p = Pipeline::new(&server, &ks);
        p.run(&["SET", "k", "1"]);
        p.run(&["SET", &other, "1"]);
        assert_eq!(
            p.held.shards().collect::<Vec<_>>(),
            vec![ks.shard_of(other.as_bytes())]
        );
        assert_eq!(p.release(), "+OK\r\n+OK\r\n");
    }

    #[test]
    fn a_hold_ends_after_its_command_limit() {
        let server = Fake::logging();
        let ks = Keyspace::new(16, 8);
        let mut p = Pipeline::new(&server, &ks);
        let n = Held::MAX_COMMANDS + 44;
        for _ in 0..n {
            p.run(&["INCR", "n"]);
        }
        p.release();
        assert_eq!(batch_sizes(&server), vec![Held::MAX_COMMANDS, 44]);
    }

    #[test]
    fn a_refused_batch_turns_each_of_its_replies_into_the_error() {
        let server = Fake::logging();
        let ks = Keyspace::new(16, 8);
        let other = elsewhere(&ks, "k");
        let mut p = Pipeline::new(&server, &ks);
        p.run(&["SET", "k", "1"]);
        p.run(&["GET", "k"]);
        p.run(&["INCR", "k"]);
        server.refuse.store(true, Ordering::Relaxed);
        // A read elsewhere releases the hold before it runs.
        let at = p.run(&["GET", &other]);
        let error = "-MISCONF the log refused the batch\r\n";
        // The reads' replies stay; the writes' become the error, and the running
        // command's reply is found where it now begins.
        assert_eq!(
            String::from_utf8_lossy(&p.out),
            format!("{error}$1\r\n1\r\n{error}$-1\r\n")
        );
        assert_eq!(&p.out[at..], b"$-1\r\n");
        p.run(&["SET", &other, "x"]);
        assert_eq!(
            p.release(),
            format!("{error}$1\r\n1\r\n{error}$-1\r\n{error}")
        );
        assert!(server.batches.lock().is_empty());
    }
}
