//! Pub/Sub, keyspace notifications, MONITOR and CLIENT REPLY against a real Redis:
//! transcripts over several connections, where every reply and every message a
//! connection receives is compared byte for byte.
//!
//! Messages arrive between replies, so each step reads the reply and then whatever
//! follows until the connection is quiet for a moment. Transcripts avoid the one
//! order Redis leaves to its hash tables: a message matching several patterns of one
//! client, and UNSUBSCRIBE without arguments from several channels.

use std::thread::sleep;
use std::time::Duration;

use crate::support::{Proc, Raw, redis_available, redis_server, strata};

/// How long a connection must stay quiet before a step's output is complete.
const QUIET: Duration = Duration::from_millis(40);

/// A real Redis and strata side by side, with the same number of connections to each.
pub(crate) struct Duo {
    _redis: Proc,
    _strata: Proc,
    conns: Vec<(Raw, Raw)>,
    mismatches: Vec<String>,
    /// Masks what differs by nature (addresses, times) before comparing.
    mask: fn(&[u8]) -> Vec<u8>,
}

impl Duo {
    pub(crate) fn start(extra: &[&str], connections: usize) -> Option<Duo> {
        if !redis_available() {
            return None;
        }
        let redis = redis_server(extra);
        let ours = strata(extra);
        let conns = (0..connections)
            .map(|_| (redis.client(), ours.client()))
            .collect();
        Some(Duo {
            _redis: redis,
            _strata: ours,
            conns,
            mismatches: Vec::new(),
            mask: |b| b.to_vec(),
        })
    }

    fn record(&mut self, what: String, want: &[u8], got: &[u8]) {
        let (want, got) = ((self.mask)(want), (self.mask)(got));
        if want != got {
            // Long outputs are shown from a little before the first difference.
            let same = want.iter().zip(&got).take_while(|(a, b)| a == b).count();
            let from = same.saturating_sub(120);
            let clip = |b: &[u8]| {
                let end = b.len().min(from + 400);
                String::from_utf8_lossy(&b[from.min(end)..end]).into_owned()
            };
            self.mismatches.push(format!(
                "{what} (from byte {from})\n  redis:  {:?}\n  strata: {:?}",
                clip(&want),
                clip(&got)
            ));
        }
    }

    /// Sends a command on connection `i` of both servers and compares the reply and
    /// anything that follows it.
    pub(crate) fn run(&mut self, i: usize, cmd: &[&str]) {
        let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
        let (r, s) = &mut self.conns[i];
        r.send(&args);
        s.send(&args);
        let want = r.read_with_rest(QUIET);
        let got = s.read_with_rest(QUIET);
        self.record(format!("#{i} {cmd:?}"), &want, &got);
    }

    /// Sends a command whose reply is not compared (HELLO: it carries the client id).
    fn run_unchecked(&mut self, i: usize, cmd: &[&str]) {
        let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
        let (r, s) = &mut self.conns[i];
        r.send(&args);
        s.send(&args);
        r.read_with_rest(QUIET);
        s.read_with_rest(QUIET);
    }

    /// Sends a command that gets no reply (CLIENT REPLY OFF) and compares whatever
    /// arrives anyway.
    fn run_silent(&mut self, i: usize, cmd: &[&str]) {
        let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
        let (r, s) = &mut self.conns[i];
        r.send(&args);
        s.send(&args);
        let want = r.read_quiet(QUIET * 3);
        let got = s.read_quiet(QUIET * 3);
        self.record(format!("#{i} {cmd:?} (no reply)"), &want, &got);
    }

    /// Sends a command without waiting for its reply (one that blocks).
    fn send_only(&mut self, i: usize, cmd: &[&str]) {
        let args: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
        let (r, s) = &mut self.conns[i];
        r.send(&args);
        s.send(&args);
        sleep(QUIET);
    }

    /// The client ids of connection `i` on Redis and on strata.
    fn ids(&mut self, i: usize) -> (String, String) {
        let (r, s) = &mut self.conns[i];
        let id = |c: &mut Raw| match c.cmd(&["CLIENT", "ID"]) {
            strata_resp::value::Value::Integer(n) => n.to_string(),
            other => panic!("CLIENT ID: {other:?}"),
        };
        (id(r), id(s))
    }

    /// Runs a command naming a client id: `{id}` stands for `ids`' id on each side.
    fn run_with_id(&mut self, i: usize, cmd: &[&str], ids: &(String, String)) {
        let fill = |id: &str| -> Vec<Vec<u8>> {
            cmd.iter()
                .map(|a| a.replace("{id}", id).into_bytes())
                .collect()
        };
        let (ra, sa) = (fill(&ids.0), fill(&ids.1));
        let (r, s) = &mut self.conns[i];
        r.send(&ra.iter().map(Vec::as_slice).collect::<Vec<_>>());
        s.send(&sa.iter().map(Vec::as_slice).collect::<Vec<_>>());
        let want = r.read_with_rest(QUIET);
        let got = s.read_with_rest(QUIET);
        let (want, got) = (want.replace_id(&ids.0), got.replace_id(&ids.1));
        self.record(format!("#{i} {cmd:?}"), &want, &got);
    }

    /// Compares what connection `i` received since its last step.
    pub(crate) fn received(&mut self, i: usize) {
        let (r, s) = &mut self.conns[i];
        let want = r.read_quiet(QUIET * 3);
        let got = s.read_quiet(QUIET * 3);
        self.record(format!("#{i} received"), &want, &got);
    }

    /// [`Duo::received`] where messages name a client id.
    fn received_with_id(&mut self, i: usize, ids: &(String, String)) {
        let (r, s) = &mut self.conns[i];
        let want = r.read_quiet(QUIET * 3).replace_id(&ids.0);
        let got = s.read_quiet(QUIET * 3).replace_id(&ids.1);
        self.record(format!("#{i} received"), &want, &got);
    }

    pub(crate) fn script(&mut self, steps: &[(usize, &[&str])]) {
        for (i, cmd) in steps {
            self.run(*i, cmd);
        }
    }

    pub(crate) fn finish(self) {
        assert!(
            self.mismatches.is_empty(),
            "{} mismatches:\n{}",
            self.mismatches.len(),
            self.mismatches.join("\n")
        );
    }
}

#[test]
fn subscribe_confirmations_and_subscribed_mode_match_redis() {
    let Some(mut d) = Duo::start(&[], 2) else {
        return;
    };
    d.script(&[
        (0, &["SUBSCRIBE"]),
        (0, &["UNSUBSCRIBE"]),
        (0, &["PUNSUBSCRIBE"]),
        (0, &["SUNSUBSCRIBE"]),
        (0, &["SUBSCRIBE", "a", "b", "a"]),
        (0, &["PSUBSCRIBE", "p*"]),
        (0, &["SSUBSCRIBE", "s1"]),
        (0, &["GET", "x"]),
        (0, &["CLIENT", "LIST"]),
        (0, &["PING"]),
        (0, &["PING", "hi"]),
        (0, &["PING", "a", "b"]),
        (0, &["PUBLISH", "a", "m"]),
        (0, &["NOSUCH"]),
        (0, &["GET"]),
        (0, &["MULTI"]),
        (0, &["HELLO", "3"]),
        (0, &["UNSUBSCRIBE", "zz"]),
        (0, &["UNSUBSCRIBE", "a"]),
        (0, &["UNSUBSCRIBE", "b"]),
        (0, &["UNSUBSCRIBE"]),
        (0, &["GET", "x"]),
        (0, &["PUNSUBSCRIBE"]),
        (0, &["GET", "x"]),
        (0, &["SUNSUBSCRIBE"]),
        (0, &["GET", "x"]),
        (0, &["PUNSUBSCRIBE"]),
        (0, &["SSUBSCRIBE", "s1"]),
        (0, &["RESET"]),
        (0, &["GET", "x"]),
        (1, &["PUBSUB", "NUMSUB", "a", "s1"]),
        (1, &["PUBSUB", "SHARDNUMSUB", "s1"]),
        (1, &["PUBSUB", "NUMPAT"]),
    ]);
    // RESP3: confirmations are pushes, and any command may run while subscribed.
    d.run_unchecked(0, &["HELLO", "3"]);
    d.script(&[
        (0, &["SUBSCRIBE", "a"]),
        (0, &["GET", "x"]),
        (0, &["PING"]),
        (0, &["PUBLISH", "a", "self"]),
        (0, &["PSUBSCRIBE", "a*"]),
        (0, &["UNSUBSCRIBE"]),
        (0, &["UNSUBSCRIBE"]),
        (0, &["PUNSUBSCRIBE"]),
        (0, &["SSUBSCRIBE", "x", "y"]),
        (0, &["SUNSUBSCRIBE", "x"]),
        (0, &["SUNSUBSCRIBE", "y"]),
        (0, &["SUNSUBSCRIBE"]),
        (0, &["SPUBLISH", "x", "m"]),
        (0, &["SUBSCRIBE", "c"]),
        (0, &["RESET"]),
        (1, &["PUBSUB", "NUMSUB", "c"]),
    ]);
    d.finish();
}

#[test]
fn publish_delivery_matches_redis() {
    let Some(mut d) = Duo::start(&[], 4) else {
        return;
    };
    d.run_unchecked(1, &["HELLO", "3"]);
    d.script(&[
        (0, &["SUBSCRIBE", "news", "sport"]),
        (0, &["PSUBSCRIBE", "n?ws"]),
        (1, &["SUBSCRIBE", "news"]),
        (1, &["PSUBSCRIBE", "sp*"]),
        (1, &["PUBSUB", "NUMSUB", "news", "x"]),
        (1, &["PUBSUB", "SHARDNUMSUB", "news"]),
        (1, &["PUBSUB", "CHANNELS", "ne*"]),
        (1, &["PUBSUB", "NUMPAT"]),
        (2, &["SSUBSCRIBE", "shard"]),
        (3, &["PUBLISH", "news", "hello"]),
    ]);
    d.received(0);
    d.received(1);
    d.script(&[
        (3, &["PUBLISH", "sport", ""]),
        (3, &["PUBLISH", "nothing", "x"]),
        (3, &["PUBLISH", "nows", "binary\r\n\x00"]),
        (3, &["SPUBLISH", "shard", "s"]),
        (3, &["SPUBLISH", "news", "not to channel subscribers"]),
    ]);
    d.received(0);
    d.received(1);
    d.received(2);
    d.script(&[
        // One channel per answer: Redis lists several in its hash table's order.
        (3, &["PUBSUB", "CHANNELS", "n*"]),
        (3, &["PUBSUB", "CHANNELS", "s?o*"]),
        (3, &["PUBSUB", "CHANNELS", "a", "b"]),
        (3, &["PUBSUB", "SHARDCHANNELS", "x*"]),
        (3, &["PUBSUB", "NUMSUB", "news", "zz", "news"]),
        (3, &["PUBSUB", "NUMPAT"]),
        (3, &["PUBSUB", "NUMPAT", "x"]),
        (3, &["PUBSUB", "SHARDNUMSUB", "shard", "news"]),
        (3, &["PUBSUB", "FOO"]),
        (3, &["PUBSUB"]),
        (3, &["PUBSUB", "HELP"]),
        (3, &["PUBSUB", "HELP", "x"]),
        (3, &["PUBLISH", "a"]),
        // PUBLISH inside a transaction.
        (3, &["MULTI"]),
        (3, &["PUBLISH", "news", "in multi"]),
        (3, &["SUBSCRIBE", "q"]),
        (3, &["EXEC"]),
    ]);
    d.received(0);
    d.received(1);
    // Subscribed in RESP2 by its transaction, so HELLO is refused.
    d.run(3, &["HELLO", "3"]);
    d.script(&[
        (3, &["PUBSUB", "NUMSUB", "news", "q"]),
        (3, &["PUBSUB", "SHARDNUMSUB", "shard"]),
        (3, &["PUBLISH", "q", "to myself"]),
    ]);
    d.finish();
}

#[test]
fn pubsub_and_client_command_info_match_redis() {
    let Some(mut d) = Duo::start(&[], 1) else {
        return;
    };
    d.script(&[
        (
            0,
            &[
                "COMMAND",
                "INFO",
                "subscribe",
                "unsubscribe",
                "psubscribe",
                "punsubscribe",
                "publish",
                "ssubscribe",
                "sunsubscribe",
                "spublish",
                "monitor",
            ],
        ),
        // The container is left out: Redis lists its subcommands in hash order.
        (
            0,
            &[
                "COMMAND",
                "INFO",
                "pubsub|channels",
                "pubsub|numsub",
                "pubsub|numpat",
                "pubsub|shardchannels",
                "pubsub|shardnumsub",
                "pubsub|help",
            ],
        ),
        (
            0,
            &[
                "COMMAND",
                "INFO",
                "client|pause",
                "client|unpause",
                "client|reply",
                "client|unblock",
                "client|no-evict",
                "client|help",
            ],
        ),
        (0, &["COMMAND", "GETKEYS", "SPUBLISH", "ch", "msg"]),
        (0, &["COMMAND", "GETKEYSANDFLAGS", "SSUBSCRIBE", "a", "b"]),
        (0, &["COMMAND", "GETKEYS", "PUBLISH", "ch", "msg"]),
    ]);
    d.finish();
}

#[test]
fn client_control_errors_match_redis() {
    let Some(mut d) = Duo::start(&[], 1) else {
        return;
    };
    d.script(&[
        (0, &["CLIENT", "PAUSE"]),
        (0, &["CLIENT", "PAUSE", "abc"]),
        (0, &["CLIENT", "PAUSE", "-1"]),
        (0, &["CLIENT", "PAUSE", "1.5"]),
        (0, &["CLIENT", "PAUSE", "99999999999999999999"]),
        (0, &["CLIENT", "PAUSE", "100", "FOO"]),
        (0, &["CLIENT", "PAUSE", "100", "write", "x"]),
        (0, &["CLIENT", "UNPAUSE", "x"]),
        (0, &["CLIENT", "UNPAUSE"]),
        (0, &["CLIENT", "NO-EVICT"]),
        (0, &["CLIENT", "NO-EVICT", "maybe"]),
        (0, &["CLIENT", "NO-EVICT", "on"]),
        (0, &["CLIENT", "NO-EVICT", "OFF"]),
        (0, &["CLIENT", "UNBLOCK"]),
        (0, &["CLIENT", "UNBLOCK", "abc"]),
        (0, &["CLIENT", "UNBLOCK", "999"]),
        (0, &["CLIENT", "UNBLOCK", "999", "foo"]),
        (0, &["CLIENT", "UNBLOCK", "abc", "foo"]),
        (0, &["CLIENT", "UNBLOCK", "999", "error"]),
        (0, &["CLIENT", "UNBLOCK", "1", "2", "3"]),
        (0, &["CLIENT", "REPLY"]),
        (0, &["CLIENT", "REPLY", "foo"]),
        (0, &["CLIENT", "REPLY", "on"]),
        (0, &["CLIENT", "LIST", "TYPE", "pubsub"]),
        (0, &["MULTI"]),
        (0, &["MONITOR"]),
        (0, &["EXEC"]),
    ]);
    d.finish();
}

#[test]
fn client_reply_matches_redis() {
    let Some(mut d) = Duo::start(&[], 2) else {
        return;
    };
    d.run_silent(0, &["CLIENT", "REPLY", "SKIP"]);
    d.run_silent(0, &["SET", "a", "1"]);
    d.run(0, &["GET", "a"]);
    d.run_silent(0, &["CLIENT", "REPLY", "OFF"]);
    d.run_silent(0, &["GET", "a"]);
    d.run_silent(0, &["GET"]);
    d.run_silent(0, &["CLIENT", "REPLY", "SKIP"]);
    d.run_silent(0, &["GET", "a"]);
    d.run(0, &["CLIENT", "REPLY", "ON"]);
    d.run(0, &["GET", "a"]);
    // Subscription confirmations and messages are sent even with replies off.
    d.run_silent(0, &["CLIENT", "REPLY", "OFF"]);
    d.run(0, &["SUBSCRIBE", "ch"]);
    d.run(1, &["PUBLISH", "ch", "msg"]);
    d.received(0);
    d.run_silent(0, &["PING"]);
    d.run(0, &["UNSUBSCRIBE", "ch"]);
    d.run_silent(0, &["CLIENT", "REPLY", "ON"]);
    d.run(0, &["CLIENT", "REPLY", "ON"]);
    // Turned off inside a transaction: the rest of EXEC's reply is dropped.
    d.run(0, &["MULTI"]);
    d.run(0, &["CLIENT", "REPLY", "OFF"]);
    d.run(0, &["GET", "a"]);
    d.run_silent(0, &["EXEC"]);
    d.run_silent(0, &["PING"]);
    d.run(0, &["CLIENT", "REPLY", "ON"]);
    d.finish();
}

/// Writes a client id as `{id}`, so that replies naming it compare equal.
trait ReplaceId {
    fn replace_id(&self, id: &str) -> Vec<u8>;
}

impl ReplaceId for Vec<u8> {
    fn replace_id(&self, id: &str) -> Vec<u8> {
        String::from_utf8_lossy(self)
            .replace(&format!(":{id}\r\n"), ":{id}\r\n")
            .replace(&format!("redir={id} "), "redir={id} ")
            .into_bytes()
    }
}

/// Replaces MONITOR timestamps and client addresses, which differ by nature.
fn mask_monitor(raw: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(raw);
    let mut out = String::new();
    for line in text.split_inclusive("\r\n") {
        if let Some(rest) = line.strip_prefix('+')
            && let Some((stamp, rest)) = rest.split_once(" [")
            && stamp.contains('.')
            && let Some((db_addr, rest)) = rest.split_once("] ")
        {
            let db = db_addr.split(' ').next().unwrap_or_default();
            out.push_str(&format!("+TIME [{db} ADDR] {rest}"));
        } else {
            out.push_str(line);
        }
    }
    out.into_bytes()
}

#[test]
fn monitor_lines_match_redis() {
    let Some(mut d) = Duo::start(&[], 3) else {
        return;
    };
    d.mask = mask_monitor;
    d.script(&[
        (0, &["MONITOR"]),
        (1, &["SET", "k", "v w\"x\n\x01\u{ff}"]),
        (1, &["AUTH", "pw"]),
        (1, &["AUTH", "u", "pw"]),
        (1, &["NOSUCH"]),
        (1, &["GET"]),
        (1, &["MULTI"]),
        (1, &["SET", "a", "1"]),
        (1, &["INCR", "a"]),
        (1, &["EXEC"]),
        (1, &["CONFIG", "GET", "hz"]),
        (1, &["CLIENT", "GETNAME"]),
        (1, &["SELECT", "3"]),
        (1, &["PING"]),
        (1, &["EXEC"]),
        (1, &["SELECT", "0"]),
    ]);
    // A blocked command is shown when it blocks, not again when served.
    d.send_only(2, &["BLPOP", "bl", "0"]);
    d.run(1, &["RPUSH", "bl", "x"]);
    d.received(2);
    d.received(0);
    d.run(0, &["GET", "k"]);
    // MONITOR again gets no reply.
    d.run_silent(0, &["MONITOR"]);
    d.script(&[
        (0, &["ECHO", "hi"]),
        (0, &["RESET"]),
        (1, &["PING"]),
        (0, &["PING"]),
    ]);
    d.finish();
}

#[test]
fn keyspace_notifications_match_redis() {
    let Some(mut d) = Duo::start(&["--enable-debug-command", "yes"], 2) else {
        return;
    };
    d.script(&[
        (1, &["CONFIG", "GET", "notify-keyspace-events"]),
        (1, &["CONFIG", "SET", "notify-keyspace-events", "Q"]),
        (
            1,
            &["CONFIG", "SET", "notify-keyspace-events", "g$lshzxetd"],
        ),
        (1, &["CONFIG", "GET", "notify-keyspace-events"]),
        (1, &["CONFIG", "SET", "notify-keyspace-events", "KEAmn"]),
        (1, &["CONFIG", "GET", "notify-keyspace-events"]),
        (1, &["CONFIG", "SET", "notify-keyspace-events", "xEK$g"]),
        (1, &["CONFIG", "GET", "notify-keyspace-events"]),
        (1, &["CONFIG", "SET", "notify-keyspace-events", "KEAmn"]),
        (1, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]),
        (0, &["PSUBSCRIBE", "__key*__:*"]),
    ]);
    let commands: &[&[&str]] = &[
        // Strings.
        &["SET", "k", "v"],
        &["SET", "k", "v2", "EX", "100"],
        &["SET", "k", "v3", "KEEPTTL"],
        &["SETEX", "e", "100", "v"],
        &["PSETEX", "e", "100", "v"],
        &["SETNX", "k", "x"],
        &["SETNX", "n", "x"],
        &["MSET", "m1", "1", "m2", "2"],
        &["MSETNX", "m3", "1", "m1", "2"],
        &["APPEND", "k", "more"],
        &["SETRANGE", "k", "1", "xy"],
        &["INCR", "i"],
        &["DECRBY", "i", "5"],
        &["INCRBYFLOAT", "i", "1.5"],
        &["GETSET", "k", "g"],
        &["GETDEL", "k"],
        &["GETEX", "m1", "EX", "100"],
        &["GETEX", "m1", "PERSIST"],
        &["GET", "nokey"],
        &["MGET", "m1", "nokey2"],
        &["STRLEN", "nokey3"],
        // Keys.
        &["EXPIRE", "m1", "100"],
        &["PEXPIREAT", "m1", "99999999999999"],
        &["PERSIST", "m1"],
        &["EXPIRE", "m2", "-1"],
        &["RENAME", "m1", "r1"],
        &["SET", "r2", "x"],
        &["RENAME", "r1", "r2"],
        &["RENAMENX", "r2", "r3"],
        &["COPY", "r3", "c1"],
        &["COPY", "r3", "c1", "REPLACE"],
        &["MOVE", "c1", "2"],
        &["DEL", "r3", "nokey", "i"],
        &["UNLINK", "n"],
        &["EXISTS", "nokey4"],
        // Lists.
        &["RPUSH", "l", "a", "b", "c"],
        &["LPUSH", "l", "z"],
        &["LPUSHX", "l", "y"],
        &["LINSERT", "l", "BEFORE", "a", "q"],
        &["LSET", "l", "0", "w"],
        &["LREM", "l", "1", "q"],
        &["LTRIM", "l", "0", "2"],
        &["LPOP", "l"],
        &["RPOPLPUSH", "l", "l2"],
        &["LMOVE", "l", "l2", "LEFT", "RIGHT"],
        &["LMPOP", "1", "l2", "LEFT", "COUNT", "5"],
        &["RPUSH", "l3", "a"],
        &["BLPOP", "l3", "0"],
        // Lazy expiry: the key is found expired by the next lookup.
        &["SET", "t", "v", "PX", "1"],
    ];
    for cmd in commands {
        d.run(1, cmd);
    }
    sleep(Duration::from_millis(20));
    d.run(1, &["SET", "t", "fresh"]);
    d.run(1, &["SET", "t2", "v", "PX", "1"]);
    sleep(Duration::from_millis(20));
    d.run(1, &["GET", "t2"]);
    d.run(1, &["FLUSHALL"]);
    d.received(0);
    // Only keyspace or only keyevent channels.
    d.run(1, &["CONFIG", "SET", "notify-keyspace-events", "K$"]);
    d.run(1, &["SET", "a", "1"]);
    d.run(1, &["DEL", "a"]);
    d.run(1, &["CONFIG", "SET", "notify-keyspace-events", "Eg"]);
    d.run(1, &["SET", "a", "1"]);
    d.run(1, &["DEL", "a"]);
    d.run(1, &["CONFIG", "SET", "notify-keyspace-events", ""]);
    d.run(1, &["SET", "a", "1"]);
    d.received(0);
    d.finish();
}

#[test]
fn client_tracking_matches_redis() {
    let Some(mut d) = Duo::start(&[], 4) else {
        return;
    };
    d.script(&[
        (0, &["CLIENT", "TRACKING"]),
        (0, &["CLIENT", "TRACKING", "maybe"]),
        (0, &["CLIENT", "TRACKING", "on", "foo"]),
        (0, &["CLIENT", "TRACKING", "on", "PREFIX", "a"]),
        (0, &["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"]),
        (0, &["CLIENT", "TRACKING", "on", "BCAST", "OPTIN"]),
        (0, &["CLIENT", "TRACKING", "on", "REDIRECT", "99999"]),
        (0, &["CLIENT", "TRACKING", "on", "REDIRECT", "abc"]),
        (
            0,
            &[
                "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "ab", "PREFIX", "a",
            ],
        ),
        (
            0,
            &[
                "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "b", "PREFIX", "a",
            ],
        ),
        (0, &["CLIENT", "GETREDIR"]),
        (0, &["CLIENT", "TRACKINGINFO"]),
        (0, &["CLIENT", "CACHING", "yes"]),
        (0, &["CLIENT", "TRACKING", "off"]),
        (0, &["CLIENT", "TRACKING", "on"]),
        (0, &["CLIENT", "GETREDIR"]),
        (0, &["CLIENT", "TRACKINGINFO"]),
        (0, &["CLIENT", "CACHING", "yes"]),
        (0, &["CLIENT", "CACHING", "maybe"]),
        (0, &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "x"]),
        (0, &["CLIENT", "TRACKING", "on", "OPTOUT"]),
        (0, &["CLIENT", "TRACKINGINFO"]),
        (0, &["CLIENT", "CACHING", "no"]),
        (0, &["CLIENT", "TRACKINGINFO"]),
        (0, &["CLIENT", "TRACKING", "on", "OPTIN"]),
        (0, &["CLIENT", "TRACKING", "off"]),
    ]);
    // Default mode, RESP3: reads are remembered, the first change is announced.
    d.run_unchecked(0, &["HELLO", "3"]);
    d.script(&[
        (0, &["CLIENT", "TRACKING", "on"]),
        (0, &["CLIENT", "TRACKINGINFO"]),
        (0, &["GET", "k"]),
        (0, &["MGET", "k", "k2"]),
        (1, &["SET", "k", "1"]),
        (1, &["SET", "k", "2"]),
        (1, &["SET", "k2", "2"]),
    ]);
    d.received(0);
    d.script(&[
        (0, &["GET", "k"]),
        // Its own change: the invalidation follows the reply.
        (0, &["SET", "k", "3"]),
        (0, &["GET", "k"]),
        (0, &["STRLEN", "k"]),
        (1, &["DEL", "k"]),
        (0, &["GET", "e"]),
        (1, &["SET", "e", "v", "PX", "1"]),
    ]);
    d.received(0);
    d.script(&[(0, &["GET", "f"]), (1, &["FLUSHALL"])]);
    d.received(0);
    // MULTI/EXEC: the reads inside are remembered.
    d.script(&[
        (0, &["MULTI"]),
        (0, &["GET", "m1"]),
        (0, &["SET", "m2", "x"]),
        (0, &["EXEC"]),
        (1, &["SET", "m1", "1"]),
    ]);
    d.received(0);
    // NOLOOP: no invalidation for its own changes.
    d.script(&[
        (0, &["CLIENT", "TRACKING", "off"]),
        (0, &["CLIENT", "TRACKING", "on", "NOLOOP"]),
        (0, &["GET", "n"]),
        (0, &["SET", "n", "1"]),
        (1, &["SET", "n", "2"]),
    ]);
    d.received(0);
    // BCAST with prefixes.
    d.script(&[
        (0, &["CLIENT", "TRACKING", "off"]),
        (
            0,
            &[
                "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "p", "PREFIX", "q",
            ],
        ),
        (0, &["CLIENT", "TRACKINGINFO"]),
        (0, &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "pq"]),
        (0, &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "r"]),
        (0, &["CLIENT", "TRACKINGINFO"]),
        (1, &["MSET", "p1", "1", "q1", "2", "z", "3", "p2", "4"]),
    ]);
    d.received(0);
    d.script(&[
        (0, &["SET", "p3", "x"]),
        (0, &["CLIENT", "TRACKING", "off"]),
        (0, &["CLIENT", "TRACKING", "on", "BCAST"]),
        (1, &["INCR", "anything"]),
    ]);
    d.received(0);
    d.run(0, &["CLIENT", "TRACKING", "off"]);
    // REDIRECT to a RESP2 subscriber, OPTIN.
    let sub = d.ids(2);
    d.run(2, &["SUBSCRIBE", "__redis__:invalidate"]);
    d.run_unchecked(3, &["HELLO", "3"]);
    d.run_with_id(
        3,
        &["CLIENT", "TRACKING", "on", "REDIRECT", "{id}", "OPTIN"],
        &sub,
    );
    d.run_with_id(3, &["CLIENT", "GETREDIR"], &sub);
    d.run_with_id(3, &["CLIENT", "TRACKINGINFO"], &sub);
    d.script(&[
        (3, &["GET", "o1"]),
        (3, &["CLIENT", "CACHING", "yes"]),
        (3, &["GET", "o2"]),
        (3, &["GET", "o3"]),
        (1, &["MSET", "o1", "1", "o2", "2", "o3", "3"]),
        (1, &["FLUSHDB"]),
    ]);
    d.received(2);
    d.received(3);
    // The redirection goes away: the tracking client is told once.
    d.run(2, &["QUIT"]);
    sleep(QUIET);
    d.script(&[
        (3, &["CLIENT", "CACHING", "yes"]),
        (3, &["GET", "o4"]),
        (1, &["SET", "o4", "x"]),
    ]);
    d.received_with_id(3, &sub);
    d.run_with_id(3, &["CLIENT", "TRACKINGINFO"], &sub);
    d.script(&[
        (3, &["CLIENT", "CACHING", "yes"]),
        (3, &["GET", "o5"]),
        (1, &["SET", "o5", "x"]),
    ]);
    d.received_with_id(3, &sub);
    d.finish();
}
