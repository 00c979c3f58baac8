//! Keyspace notifications: the `notify-keyspace-events` classes and publishing
//! `__keyspace@<db>__:<key>` / `__keyevent@<db>__:<event>` messages.
//!
//! Handlers report every change with Redis's event name (`ctx.keys.changed(key,
//! "lpush")`); [`class_of`] maps the name to its class, and an event is published when
//! its class and at least one of K (keyspace channel) or E (keyevent channel) are on.
//! With notifications off the cost of a change is one relaxed atomic load.

use crate::pubsub::PubSub;

/// `K`: publish on `__keyspace@<db>__:<key>`.
pub const KEYSPACE: u32 = 1 << 0;
/// `E`: publish on `__keyevent@<db>__:<event>`.
pub const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (DEL, EXPIRE, RENAME...).
pub const GENERIC: u32 = 1 << 2;
/// `$`: string commands.
pub const STRING: u32 = 1 << 3;
/// `l`: list commands.
pub const LIST: u32 = 1 << 4;
/// `s`: set commands.
pub const SET: u32 = 1 << 5;
/// `h`: hash commands.
pub const HASH: u32 = 1 << 6;
/// `z`: sorted-set commands.
pub const ZSET: u32 = 1 << 7;
/// `x`: keys removed by expiry.
pub const EXPIRED: u32 = 1 << 8;
/// `e`: keys evicted for `maxmemory`.
pub const EVICTED: u32 = 1 << 9;
/// `t`: stream commands.
pub const STREAM: u32 = 1 << 10;
/// `m`: lookups of keys that do not exist (not part of `A`).
pub const KEY_MISS: u32 = 1 << 11;
/// `d`: module key types.
pub const MODULE: u32 = 1 << 12;
/// `n`: new keys (not part of `A`).
pub const NEW: u32 = 1 << 13;
/// `A`: every class but `m` and `n`.
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The class letters in the order Redis renders them (after `A`, before `K`/`E`/`m`).
const CLASS_LETTERS: &[(u32, char)] = &[
    (GENERIC, 'g'),
    (STRING, '$'),
    (LIST, 'l'),
    (SET, 's'),
    (HASH, 'h'),
    (ZSET, 'z'),
    (EXPIRED, 'x'),
    (EVICTED, 'e'),
    (STREAM, 't'),
    (MODULE, 'd'),
    (NEW, 'n'),
];

/// Parses a `notify-keyspace-events` value; `None` for a character that names no
/// class (Redis's `keyspaceEventsStringToFlags`).
pub fn parse_flags(text: &[u8]) -> Option<u32> {
    let mut flags = 0;
    for &c in text {
        flags |= match c {
            b'A' => ALL,
            b'g' => GENERIC,
            b'$' => STRING,
            b'l' => LIST,
            b's' => SET,
            b'h' => HASH,
            b'z' => ZSET,
            b'x' => EXPIRED,
            b'e' => EVICTED,
            b'K' => KEYSPACE,
            b'E' => KEYEVENT,
            b't' => STREAM,
            b'm' => KEY_MISS,
            b'd' => MODULE,
            b'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// Renders flags as CONFIG GET shows them (Redis's `keyspaceEventsFlagsToString`).
pub fn render_flags(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        // As in Redis 7.0, `n` is not shown next to `A` (though it stays in force).
        s.push('A');
    } else {
        for &(bit, letter) in CLASS_LETTERS {
            if flags & bit != 0 {
                s.push(letter);
            }
        }
    }
    if flags & KEYSPACE != 0 {
        s.push('K');
    }
    if flags & KEYEVENT != 0 {
        s.push('E');
    }
    if flags & KEY_MISS != 0 {
        s.push('m');
    }
    s
}

/// The class of an event, by its Redis name. Names Redis does not have fall in the
/// generic class.
pub fn class_of(event: &str) -> u32 {
    match event {
        "set" | "setrange" | "incrby" | "incrbyfloat" | "append" | "setbit" | "pfadd" => STRING,
        "lpush" | "rpush" | "lpop" | "rpop" | "linsert" | "lset" | "lrem" | "ltrim"
        | "sortstore" => LIST,
        "sadd" | "srem" | "spop" | "sinterstore" | "sunionstore" | "sdiffstore" => SET,
        "hset" | "hincrby" | "hincrbyfloat" | "hdel" => HASH,
        "zadd" | "zincr" | "zrem" | "zremrangebyscore" | "zremrangebyrank" | "zremrangebylex"
        | "zinterstore" | "zunionstore" | "zdiffstore" | "zrangestore" | "zpopmin" | "zpopmax"
        | "georadiusstore" | "geosearchstore" => ZSET,
        "xadd"
        | "xtrim"
        | "xdel"
        | "xsetid"
        | "xgroup-create"
        | "xgroup-createconsumer"
        | "xgroup-delconsumer"
        | "xgroup-destroy"
        | "xgroup-setid" => STREAM,
        "expired" => EXPIRED,
        "evicted" => EVICTED,
        "new" => NEW,
        "keymiss" => KEY_MISS,
        _ => GENERIC,
    }
}

/// Whether events of `class` are published under `flags`.
#[inline]
pub fn wanted(flags: u32, class: u32) -> bool {
    flags & class != 0 && flags & (KEYSPACE | KEYEVENT) != 0
}

/// Publishes one event of database `db` about `key`, if its class is on.
pub fn publish(hub: &PubSub, class: u32, event: &str, key: &[u8], db: usize, now_ms: u64) {
    let flags = hub.notify_flags();
    if !wanted(flags, class) {
        return;
    }
    if flags & KEYSPACE != 0 {
        let mut chan = format!("__keyspace@{db}__:").into_bytes();
        chan.extend_from_slice(key);
        hub.publish(&chan, event.as_bytes(), false, now_ms);
    }
    if flags & KEYEVENT != 0 {
        let chan = format!("__keyevent@{db}__:{event}");
        hub.publish(chan.as_bytes(), key, false, now_ms);
    }
}

/// Publishes events the keyspace logged by itself (expiry, new keys).
pub fn publish_logged(
    hub: &PubSub,
    events: Vec<(strata_keyspace::KeyEvent, Vec<u8>)>,
    db: usize,
    now_ms: u64,
) {
    for (event, key) in events {
        let (class, name) = match event {
            strata_keyspace::KeyEvent::Expired => (EXPIRED, "expired"),
            strata_keyspace::KeyEvent::New => (NEW, "new"),
        };
        publish(hub, class, name, &key, db, now_ms);
    }
}

/// The keyspace events the databases must log for these flags: (expired, new).
pub fn logged_events(flags: u32) -> (bool, bool) {
    (wanted(flags, EXPIRED), wanted(flags, NEW))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_round_trip_like_redis() {
        let cases: &[(&str, &str)] = &[
            ("", ""),
            ("KEA", "AKE"),
            ("g$lshzxetd", "A"),
            ("g$lshzxet", "g$lshzxet"),
            ("KEAm", "AKEm"),
            ("KEAmn", "AKEm"),
            ("Ex", "xE"),
            ("nK", "nK"),
            ("ggKK", "gK"),
        ];
        for (input, shown) in cases {
            let f = parse_flags(input.as_bytes()).expect("valid");
            assert_eq!(render_flags(f), *shown, "{input}");
        }
        assert_eq!(parse_flags(b"Q"), None);
        assert_eq!(parse_flags(b"K E"), None);
    }

    #[test]
    fn classes() {
        assert_eq!(class_of("set"), STRING);
        assert_eq!(class_of("del"), GENERIC);
        assert_eq!(class_of("expire"), GENERIC);
        assert_eq!(class_of("rename_to"), GENERIC);
        assert_eq!(class_of("lpush"), LIST);
        assert_eq!(class_of("expired"), EXPIRED);
        assert!(!wanted(ALL, STRING), "neither K nor E");
        assert!(wanted(ALL | KEYEVENT, STRING));
        assert!(!wanted(ALL | KEYEVENT, NEW));
    }
}
