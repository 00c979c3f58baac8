//! Pub/Sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH,
//! SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH and PUBSUB. The hub they work on is
//! [`crate::pubsub::PubSub`]; RESP2's subscribed mode is enforced by the dispatcher.

use crate::ctx::Ctx;
use crate::error::{CmdError, CmdResult};
use crate::pubsub::{Kind, PubSub};
use crate::spec::{BeginSearch, FindKeys, Group, KeySpec};
use crate::table::Command;
use crate::{acl, flags, kf};

const PUBSUB: Command = Command {
    group: Group::Pubsub,
    since: "2.0.0",
    ..Command::DEFAULT
};

const SUBSCRIBER: Command = Command {
    flags: flags!(PUBSUB, NOSCRIPT, LOADING, STALE),
    ..PUBSUB
};

/// A shard channel: not a key, but named like one for cluster routing.
const SHARD_CHANNELS: &[KeySpec] = &[KeySpec::range(1, -1, 1, kf!(NOT_KEY))];

const SHARD_CHANNEL: &[KeySpec] = &[KeySpec {
    flags: kf!(NOT_KEY),
    begin: BeginSearch::Index(1),
    find: FindKeys::Range {
        last_key: 0,
        step: 1,
        limit: 0,
    },
    notes: "",
}];

const PUBSUB_SUB: Command = Command {
    flags: flags!(PUBSUB, LOADING, STALE),
    since: "2.8.0",
    ..PUBSUB
};

pub const COMMANDS: &[Command] = &[
    Command {
        name: "subscribe",
        arity: -2,
        summary: "Listen for messages published to the given channels",
        complexity: "O(N) where N is the number of channels to subscribe to.",
        handler: Some(subscribe),
        ..SUBSCRIBER
    },
    Command {
        name: "unsubscribe",
        arity: -1,
        summary: "Stop listening for messages posted to the given channels",
        complexity: "O(N) where N is the number of clients already subscribed to a channel.",
        handler: Some(unsubscribe),
        ..SUBSCRIBER
    },
    Command {
        name: "psubscribe",
        arity: -2,
        summary: "Listen for messages published to channels matching the given patterns",
        complexity: "O(N) where N is the number of patterns the client is already subscribed to.",
        handler: Some(psubscribe),
        ..SUBSCRIBER
    },
    Command {
        name: "punsubscribe",
        arity: -1,
        summary: "Stop listening for messages posted to channels matching the given patterns",
        complexity: "O(N+M) where N is the number of patterns the client is already subscribed and M is the number of total patterns subscribed in the system (by any client).",
        handler: Some(punsubscribe),
        ..SUBSCRIBER
    },
    Command {
        name: "publish",
        arity: 3,
        // Redis 7.0 hides `may_replicate` from COMMAND INFO; CLIENT PAUSE WRITE uses it.
        flags: flags!(PUBSUB, LOADING, STALE, FAST, MAY_REPLICATE),
        summary: "Post a message to a channel",
        complexity: "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).",
        handler: Some(publish),
        ..PUBSUB
    },
    Command {
        name: "ssubscribe",
        arity: -2,
        key_specs: SHARD_CHANNELS,
        since: "7.0.0",
        summary: "Listen for messages published to the given shard channels",
        complexity: "O(N) where N is the number of shard channels to subscribe to.",
        handler: Some(ssubscribe),
        ..SUBSCRIBER
    },
    Command {
        name: "sunsubscribe",
        arity: -1,
        key_specs: SHARD_CHANNELS,
        since: "7.0.0",
        summary: "Stop listening for messages posted to the given shard channels",
        complexity: "O(N) where N is the number of clients already subscribed to a shard channel.",
        handler: Some(sunsubscribe),
        ..SUBSCRIBER
    },
    Command {
        name: "spublish",
        arity: 3,
        flags: flags!(PUBSUB, LOADING, STALE, FAST, MAY_REPLICATE),
        key_specs: SHARD_CHANNEL,
        since: "7.0.0",
        summary: "Post a message to a shard channel",
        complexity: "O(N) where N is the number of clients subscribed to the receiving shard channel.",
        handler: Some(spublish),
        ..PUBSUB
    },
    Command {
        name: "pubsub",
        arity: -2,
        since: "2.8.0",
        summary: "A container for Pub/Sub commands",
        complexity: "Depends on subcommand.",
        subcommands: &[
            Command {
                name: "help",
                arity: 2,
                flags: flags!(LOADING, STALE),
                since: "6.2.0",
                summary: "Show helpful text about the different subcommands",
                complexity: "O(1)",
                handler: Some(help),
                ..PUBSUB_SUB
            },
            Command {
                name: "channels",
                arity: -2,
                summary: "List active channels",
                complexity: "O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)",
                handler: Some(channels),
                ..PUBSUB_SUB
            },
            Command {
                name: "numsub",
                arity: -2,
                summary: "Get the count of subscribers for channels",
                complexity: "O(N) for the NUMSUB subcommand, where N is the number of requested channels",
                handler: Some(numsub),
                ..PUBSUB_SUB
            },
            Command {
                name: "shardnumsub",
                arity: -2,
                since: "7.0.0",
                summary: "Get the count of subscribers for shard channels",
                complexity: "O(N) for the SHARDNUMSUB subcommand, where N is the number of requested shard channels",
                handler: Some(shardnumsub),
                ..PUBSUB_SUB
            },
            Command {
                name: "numpat",
                arity: 2,
                summary: "Get the count of unique patterns pattern subscriptions",
                complexity: "O(1)",
                handler: Some(numpat),
                ..PUBSUB_SUB
            },
            Command {
                name: "shardchannels",
                arity: -2,
                since: "7.0.0",
                summary: "List active shard channels",
                complexity: "O(N) where N is the number of active shard channels, and assuming constant time pattern matching (relatively short shard channels).",
                handler: Some(shardchannels),
                ..PUBSUB_SUB
            },
        ],
        acl: acl!(),
        ..PUBSUB
    },
];

/// The hub, or an error for a server without one.
fn hub<'a>(ctx: &Ctx<'a, '_>) -> Result<&'a PubSub, CmdError> {
    ctx.server
        .pubsub()
        .ok_or_else(|| CmdError::err("pub/sub is not available in this server"))
}

fn subscribe_kind(ctx: &mut Ctx, args: &[&[u8]], kind: Kind) -> CmdResult {
    // Inside MULTI/EXEC a client expects one reply per command; Redis lets
    // subscriptions run there all the same.
    let hub = hub(ctx)?;
    hub.subscribe(ctx.conn, kind, &args[1..], &mut ctx.out)
}

fn unsubscribe_kind(ctx: &mut Ctx, args: &[&[u8]], kind: Kind) -> CmdResult {
    let hub = hub(ctx)?;
    hub.unsubscribe(ctx.conn, kind, &args[1..], &mut ctx.out);
    Ok(())
}

fn subscribe(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    subscribe_kind(ctx, args, Kind::Channel)
}

fn psubscribe(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    subscribe_kind(ctx, args, Kind::Pattern)
}

fn ssubscribe(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    subscribe_kind(ctx, args, Kind::Shard)
}

fn unsubscribe(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    unsubscribe_kind(ctx, args, Kind::Channel)
}

fn punsubscribe(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    unsubscribe_kind(ctx, args, Kind::Pattern)
}

fn sunsubscribe(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    unsubscribe_kind(ctx, args, Kind::Shard)
}

fn publish(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let n = hub(ctx)?.publish(args[1], args[2], false, ctx.keys.now_ms);
    ctx.out.integer(n as i64);
    Ok(())
}

fn spublish(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    let n = hub(ctx)?.publish(args[1], args[2], true, ctx.keys.now_ms);
    ctx.out.integer(n as i64);
    Ok(())
}

/// The error Redis gives a PUBSUB subcommand called with too many arguments.
fn wrong_args(sub: &[u8]) -> CmdError {
    CmdError::quoting(
        "unknown subcommand or wrong number of arguments for '",
        crate::error::c_str(sub, 128),
        "'. Try PUBSUB HELP.",
    )
}

fn list_channels(ctx: &mut Ctx, args: &[&[u8]], kind: Kind) -> CmdResult {
    if args.len() > 3 {
        return Err(wrong_args(args[1]));
    }
    let names = hub(ctx)?.channels(kind, args.get(2).copied());
    ctx.out.array(names.len());
    for n in &names {
        ctx.out.bulk(n);
    }
    Ok(())
}

fn count_subscribers(ctx: &mut Ctx, args: &[&[u8]], kind: Kind) -> CmdResult {
    let hub = hub(ctx)?;
    let names = &args[2..];
    // A flat array even in RESP3, as in Redis 7.0.
    ctx.out.array(names.len() * 2);
    for n in names {
        ctx.out.bulk(n);
        ctx.out.integer(hub.numsub(kind, n) as i64);
    }
    Ok(())
}

fn channels(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    list_channels(ctx, args, Kind::Channel)
}

fn shardchannels(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    list_channels(ctx, args, Kind::Shard)
}

fn numsub(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    count_subscribers(ctx, args, Kind::Channel)
}

fn shardnumsub(ctx: &mut Ctx, args: &[&[u8]]) -> CmdResult {
    count_subscribers(ctx, args, Kind::Shard)
}

fn numpat(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    let n = hub(ctx)?.numpat();
    ctx.out.integer(n as i64);
    Ok(())
}

fn help(ctx: &mut Ctx, _args: &[&[u8]]) -> CmdResult {
    crate::families::help(
        ctx,
        "PUBSUB",
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    );
    Ok(())
}
