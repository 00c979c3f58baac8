//! The random command generator: the key space, the argument pools, and one drawing
//! function per command.

use std::collections::VecDeque;

use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use strata_commands::Registry;

use super::compare::Cmp;

pub const SEEDS: &[u64] = &[1, 2, 3, 0x5eed, 20_240_607, 0xdead_beef];
pub const STEPS: usize = 1500;

/// The key space: small, so that commands meet the same keys often.
const KEYS: &[&[u8]] = &[
    b"k0", b"k1", b"k2", b"k3", b"k4", b"k5", b"k6", b"k7", b"k8", b"k9", b"k10", b"k11", b"ab",
    b"abc", b"a*c", b"[x]", b"sp ace", b"a\r\nb", b"\0nul\0", b"",
];

/// Values that exercise encodings and number parsing.
const VALUES: &[&[u8]] = &[
    b"",
    b"0",
    b"-0",
    b"01",
    b"1",
    b"-1",
    b"7",
    b"10",
    b"9999",
    b"10000",
    b"-10000",
    b"9223372036854775807",
    b"-9223372036854775808",
    b"9223372036854775808",
    b"12345678901234567890",
    b"1e3",
    b" 1",
    b"1 ",
    b"+1",
    b"3.14",
    b"-2.5",
    b"1.0",
    b"0x10",
    b"inf",
    b"nan",
    b"abc",
    b"hello world",
    b"a\r\nb\0c",
    b"\xff\xfe",
    b"ohmytext",
    b"mynewtext",
    b"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    b"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy",
];

/// Integer arguments, good and bad.
const INTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "10",
    "-10",
    "100",
    "-1000",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "-9223372036854775809",
    "4611686018427387904",
    "01",
    "-0",
    "+1",
    " 1",
    "1 ",
    "1.5",
    "1e3",
    "abc",
    "",
    "0x10",
];

/// Float arguments, good and bad.
const FLOATS: &[&str] = &[
    "0",
    "1",
    "-1",
    "0.1",
    "-0.1",
    "1.5",
    "3.0e2",
    "1e3",
    "1e308",
    "-1e308",
    "1.7976931348623157e308",
    "5e-324",
    "1e-10",
    "123456789.123456789",
    "inf",
    "-inf",
    "+inf",
    "nan",
    "abc",
    "",
    " 1",
    "1 ",
    "+1.5",
    ".5",
    "1.",
    "--1",
    "1e",
    "0x10",
    "10000000000000000000000",
    "-0",
    "00.5",
];

/// String offsets and indexes: small ones, negative ones, and ones past any limit
/// (never a valid offset big enough to allocate much).
const INDEXES: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "5",
    "10",
    "50",
    "-1",
    "-2",
    "-5",
    "-100",
    "100",
    "9223372036854775807",
    "-9223372036854775808",
    "536870912",
    "4294967296",
    "abc",
    "",
    "1.5",
];

/// Database indexes.
const DBS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "0",
    "1",
    "15",
    "16",
    "-1",
    "abc",
    "01",
    "2147483648",
    "-2147483649",
    "",
];

/// KEYS and SCAN MATCH patterns.
const PATTERNS: &[&[u8]] = &[
    b"*", b"?", b"??", b"k?", b"k*", b"k1*", b"k[0-5]", b"k[5-0]", b"k[^1]*", b"[a-c]*", b"[^k]*",
    b"a\\*c", b"*\\**", b"a*c", b"[x]", b"\\[x\\]", b"*\r\n*", b"\0*", b"", b"[", b"k[", b"[^",
    b"a\\", b"**", b"*a*b*", b"?*", b"[]]", b"[\\]x]*", b"sp*ace", b"*e",
];

/// Configuration directives whose values both servers share (the kit starts them
/// with different ports, directories and persistence settings; `appendonly` is on
/// by default in strata).
const DIRECTIVES: &[&str] = &[
    "appendfilename",
    "appendfsync",
    "auto-aof-rewrite-min-size",
    "auto-aof-rewrite-percentage",
    "bind",
    "client-output-buffer-limit",
    "client-query-buffer-limit",
    "databases",
    "dbfilename",
    "dynamic-hz",
    "enable-debug-command",
    "hz",
    "lazyfree-lazy-expire",
    "lazyfree-lazy-server-del",
    "lazyfree-lazy-user-del",
    "lazyfree-lazy-user-flush",
    "lfu-decay-time",
    "lfu-log-factor",
    "logfile",
    "maxmemory",
    "maxmemory-policy",
    "maxmemory-samples",
    "protected-mode",
    "proto-max-bulk-len",
    "requirepass",
    "tcp-backlog",
    "tcp-keepalive",
    "timeout",
    "no-such-directive",
];

/// Every command the generator draws, with its weight. The test checks that this
/// covers every command and subcommand in strata's table.
pub const MENU: &[(&str, u32)] = &[
    ("get", 12),
    ("set", 24),
    ("setnx", 4),
    ("setex", 4),
    ("psetex", 4),
    ("getset", 4),
    ("getdel", 4),
    ("getex", 6),
    ("mget", 4),
    ("mset", 5),
    ("msetnx", 4),
    ("incr", 5),
    ("decr", 4),
    ("incrby", 5),
    ("decrby", 4),
    ("incrbyfloat", 8),
    ("append", 6),
    ("strlen", 3),
    ("getrange", 5),
    ("substr", 2),
    ("setrange", 5),
    ("lcs", 5),
    ("del", 5),
    ("unlink", 2),
    ("exists", 4),
    ("type", 3),
    ("rename", 4),
    ("renamenx", 3),
    ("copy", 5),
    ("move", 3),
    ("keys", 4),
    ("scan", 3),
    ("randomkey", 2),
    ("expire", 6),
    ("pexpire", 5),
    ("expireat", 4),
    ("pexpireat", 4),
    ("ttl", 5),
    ("pttl", 4),
    ("expiretime", 3),
    ("pexpiretime", 3),
    ("persist", 4),
    ("touch", 2),
    ("object|encoding", 6),
    ("object|refcount", 4),
    ("object|idletime", 2),
    ("object|freq", 1),
    ("object|help", 1),
    ("select", 4),
    ("swapdb", 2),
    ("flushdb", 1),
    ("flushall", 1),
    ("dbsize", 3),
    ("echo", 2),
    ("ping", 2),
    ("command|info", 3),
    ("command|getkeys", 4),
    ("command|getkeysandflags", 3),
    ("command|errors", 1),
    ("command|help", 1),
    ("client|setname", 2),
    ("client|getname", 2),
    ("client|id", 1),
    ("client|info", 1),
    ("client|list", 1),
    ("client|kill", 1),
    ("config|get", 2),
    ("config|set", 2),
    ("config|resetstat", 1),
    ("config|rewrite", 1),
    ("config|help", 1),
    ("info", 1),
    ("time", 1),
    ("debug", 1),
    ("shutdown", 1),
    ("auth", 1),
    ("hello", 2),
    ("reset", 1),
    ("memory|usage", 2),
    ("memory|help", 1),
    ("watch", 2),
    ("unwatch", 1),
    ("exec", 1),
    ("discard", 1),
    ("multi", 3),
    ("short-ttl", 2),
    ("pipeline", 3),
    ("eval", 8),
    ("eval_ro", 2),
    ("evalsha", 3),
    ("evalsha_ro", 1),
    ("script|load", 2),
    ("script|exists", 2),
    ("script|flush", 1),
    ("script|kill", 1),
    ("script|help", 1),
    ("fcall", 4),
    ("fcall_ro", 2),
    ("function|load", 2),
    ("function|delete", 1),
    ("function|list", 2),
    ("function|flush", 1),
    ("function|stats", 1),
    ("function|kill", 1),
    ("function|help", 1),
    ("arity", 8),
    ("unknown", 3),
];

/// Scripts EVAL draws: reads, writes, every reply type, errors. None iterates a
/// table with `pairs` or asks for KEYS, whose orders are Redis's hash orders.
const SCRIPTS: &[&str] = &[
    "return redis.call('get', KEYS[1])",
    "return redis.call('incr', KEYS[1])",
    "return {KEYS[1], ARGV[1]}",
    "return redis.pcall('incr', KEYS[1])",
    "redis.call('set', KEYS[1], ARGV[1] or 'x') return redis.call('strlen', KEYS[1])",
    "return {redis.call('exists', KEYS[1]), redis.call('ttl', KEYS[1]), redis.call('type', KEYS[1])}",
    "return redis.call('mget', KEYS[1], KEYS[2] or 'k0')",
    "local v = redis.call('getdel', KEYS[1]) if v then redis.call('append', KEYS[2] or 'k0', v) end return v",
    "return tonumber(ARGV[1])",
    "return #KEYS + #ARGV",
    "return redis.call('expire', KEYS[1], 100)",
    "return {1, 2.9, 'x', true, false, nil, 3}",
    "return redis.error_reply(ARGV[1] or 'E')",
    "return redis.status_reply(ARGV[1] or 'S')",
    "return redis.call('incrbyfloat', KEYS[1], ARGV[1] or '1')",
    "return redis.call('nosuch')",
    "return redis.call('get')",
    "return {err = 'boom'}",
    "return redis.pcall('setrange', KEYS[1], ARGV[1] or '0', 'x')",
    "return cjson.encode({KEYS[1], tonumber(ARGV[1]) or ARGV[1]})",
    "redis.setresp(3) return redis.call('get', KEYS[1])",
    "return redis.call('set', KEYS[1], ARGV[1] or 'v', 'get')",
    "error('failed here')",
    "local n = 0 for i = 1, 100 do n = n + i end return n",
];

/// Libraries FUNCTION LOAD draws, one function each (FUNCTION LIST then compares
/// as an unordered array, Redis listing libraries in hash order).
const LIBRARIES: &[&str] = &[
    "#!lua name=lib1\nredis.register_function('f1', function(keys, args) return redis.call('get', keys[1]) end)",
    "#!lua name=lib2\nredis.register_function{function_name='f2', callback=function(keys, args) return redis.call('incr', keys[1]) end, description='incr'}",
    "#!lua name=lib3\nredis.register_function{function_name='f3', callback=function(keys, args) return #keys end, flags={'no-writes'}}",
    "#!lua name=lib1\nredis.register_function('f2', function() return 1 end)",
    "#!lua name=bad\nreturn 1",
];

/// Commands the stream leaves out, and the commands that cover them instead.
/// Subcommands strata takes from Redis 7.2, which the reference Redis 7.0 answers as
/// unknown; their arity errors are not compared (client_control.rs tests them).
const AFTER_7_0: &[&str] = &["client|no-touch"];

pub const NOT_DRAWN: &[(&str, &str)] = &[
    // Closes the connection; each seed ends with it instead.
    ("quit", "the end of every seed"),
    // Write files and report times: persistence.rs checks them against restarts.
    ("save", "persistence"),
    ("bgsave", "persistence"),
    ("bgrewriteaof", "persistence"),
    ("lastsave", "persistence"),
    // COMMAND, COMMAND COUNT, LIST and DOCS describe the whole table, which is smaller
    // in strata by design; their error paths are drawn under "command|errors".
    ("command", "command|errors"),
    ("command|count", "command|errors"),
    ("command|list", "command|errors"),
    ("command|docs", "command|errors"),
    // Compared with Redis's text in client_control.rs.
    ("client|help", "client_control"),
    // Their figures and texts depend on the process's memory: memory.rs checks their
    // shape and errors against Redis.
    ("memory|stats", "memory"),
    ("memory|doctor", "memory"),
    ("memory|malloc-stats", "memory"),
    ("memory|purge", "memory"),
    // Pub/sub changes what a connection may send and receive (subscribed mode,
    // messages between the replies); its transcripts are in diff_pubsub.rs.
    ("subscribe", "diff_pubsub"),
    ("unsubscribe", "diff_pubsub"),
    ("psubscribe", "diff_pubsub"),
    ("punsubscribe", "diff_pubsub"),
    ("ssubscribe", "diff_pubsub"),
    ("sunsubscribe", "diff_pubsub"),
    ("publish", "diff_pubsub"),
    ("spublish", "diff_pubsub"),
    ("pubsub|channels", "diff_pubsub"),
    ("pubsub|numsub", "diff_pubsub"),
    ("pubsub|numpat", "diff_pubsub"),
    ("pubsub|shardchannels", "diff_pubsub"),
    ("pubsub|shardnumsub", "diff_pubsub"),
    ("pubsub|help", "diff_pubsub"),
    ("monitor", "diff_pubsub"),
    // These pause, silence or unblock connections, which a one-connection stream
    // cannot follow; they have transcripts and tests of their own (diff_pubsub.rs,
    // client_control.rs).
    ("client|pause", "client_control"),
    ("client|unpause", "client_control"),
    ("client|reply", "diff_pubsub"),
    ("client|unblock", "client_control"),
    ("client|no-evict", "diff_pubsub"),
    // From Redis 7.2, which the reference server predates: client_control.rs.
    ("client|no-touch", "client_control"),
    // Client-side caching needs several connections: diff_pubsub.rs.
    ("client|tracking", "diff_pubsub"),
    ("client|caching", "diff_pubsub"),
    ("client|getredir", "diff_pubsub"),
    ("client|trackinginfo", "diff_pubsub"),
    // Users change what the connection may run; ACL transcripts are in acl.rs.
    ("acl|cat", "acl"),
    ("acl|deluser", "acl"),
    ("acl|dryrun", "acl"),
    ("acl|genpass", "acl"),
    ("acl|getuser", "acl"),
    ("acl|help", "acl"),
    ("acl|list", "acl"),
    ("acl|load", "acl"),
    ("acl|log", "acl"),
    ("acl|save", "acl"),
    ("acl|setuser", "acl"),
    ("acl|users", "acl"),
    ("acl|whoami", "acl"),
    // FUNCTION DUMP payloads are strata's own format, and SCRIPT DEBUG YES/SYNC
    // starts Redis's debugger; their error paths are compared in scripting.rs.
    ("function|dump", "scripting"),
    ("function|restore", "scripting"),
    ("script|debug", "scripting"),
    // SORT reads lists, sets and sorted sets, which this stream does not build: its
    // stream (with BY/GET patterns over strings and hashes) is diff_sort.rs.
    ("sort", "diff_sort"),
    ("sort_ro", "diff_sort"),
];

/// One step of a stream.
#[derive(Clone, Debug)]
pub enum Step {
    Cmd(Vec<Vec<u8>>, Cmp),
    /// A full SCAN iteration with these arguments after the cursor, starting from
    /// `cursor`; the keys returned are compared as sets.
    Scan {
        cursor: Vec<u8>,
        opts: Vec<Vec<u8>>,
    },
    /// Commands sent in one write, their replies read afterwards, each compared byte
    /// for byte.
    Pipeline(Vec<Vec<Vec<u8>>>),
    /// A pause, for short TTLs to pass.
    Sleep(u64),
}

pub fn cmd<A: AsRef<[u8]>>(args: &[A]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.as_ref().to_vec()).collect()
}

/// The random command generator of one seed.
pub struct Gen {
    rng: StdRng,
    /// Seconds since the epoch when the seed started (absolute expiries use it).
    t0: i64,
    /// Unused expiry slots, in random order.
    slots: Vec<i64>,
    /// Follow-up steps of the last drawn command.
    pending: VecDeque<Step>,
    /// Every command and subcommand of strata's table, with its arity.
    arities: Vec<(Vec<String>, i32)>,
    /// Names COMMAND INFO may be asked about.
    info_names: Vec<String>,
    total_weight: u32,
}

impl Gen {
    pub fn new(seed: u64, t0: i64, registry: &Registry) -> Gen {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut slots: Vec<i64> = (1..=4000).collect();
        slots.shuffle(&mut rng);
        let mut arities = Vec::new();
        let mut info_names = Vec::new();
        let mut tops: Vec<_> = registry.commands().collect();
        tops.sort_by_key(|c| c.name);
        for c in tops {
            arities.push((vec![c.name.to_string()], c.arity));
            // Redis's CLIENT has more subcommands than strata's.
            if c.name != "client" && c.name != "memory" {
                info_names.push(c.name.to_string());
            }
            for s in c.subcommands {
                // The reference Redis (7.0) does not know subcommands added later.
                if AFTER_7_0.contains(&s.full_name().as_str()) {
                    continue;
                }
                arities.push((vec![c.name.to_string(), s.name.to_string()], s.arity));
                info_names.push(s.full_name());
            }
        }
        Gen {
            rng,
            t0,
            slots,
            pending: VecDeque::new(),
            arities,
            info_names,
            total_weight: MENU.iter().map(|(_, w)| w).sum(),
        }
    }

    /// Whether steps queued by an earlier one are still to come.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    pub fn next(&mut self) -> Step {
        if let Some(step) = self.pending.pop_front() {
            return step;
        }
        let mut pick = self.rng.random_range(0..self.total_weight);
        for (name, weight) in MENU {
            if pick < *weight {
                return self.draw(name);
            }
            pick -= weight;
        }
        unreachable!("weights add up")
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn pick<'a, T: ?Sized>(&mut self, from: &'a [&'a T]) -> &'a T {
        from.choose(&mut self.rng).expect("non-empty")
    }

    /// A name or option in random letter case.
    fn word(&mut self, s: &str) -> Vec<u8> {
        match self.rng.random_range(0..4) {
            0 => s.to_ascii_uppercase().into_bytes(),
            1 => s
                .bytes()
                .enumerate()
                .map(|(i, c)| {
                    if i % 2 == 0 {
                        c.to_ascii_uppercase()
                    } else {
                        c
                    }
                })
                .collect(),
            _ => s.as_bytes().to_vec(),
        }
    }

    fn key(&mut self) -> Vec<u8> {
        self.pick(KEYS).to_vec()
    }

    fn keys(&mut self, max: usize) -> Vec<Vec<u8>> {
        let n = self.rng.random_range(1..=max);
        (0..n).map(|_| self.key()).collect()
    }

    fn value(&mut self) -> Vec<u8> {
        if self.chance(0.005) {
            // Big enough for the server's large-argument path, and too big for LCS
            // against another such value.
            let len = self.rng.random_range(33_000..34_000);
            return vec![*b"xyz".choose(&mut self.rng).expect("non-empty"); len];
        }
        if self.chance(0.15) {
            // Small integers: Redis shares them between keys.
            return self.rng.random_range(0..20).to_string().into_bytes();
        }
        if self.chance(0.65) {
            return self.pick(VALUES).to_vec();
        }
        let len = if self.chance(0.1) {
            self.rng.random_range(40..80)
        } else {
            self.rng.random_range(0..12)
        };
        const ALPHABET: &[u8] = b"abcmnotxy0123\r\n\0 \xff";
        (0..len)
            .map(|_| *ALPHABET.choose(&mut self.rng).expect("non-empty"))
            .collect()
    }

    fn int(&mut self) -> Vec<u8> {
        if self.chance(0.3) {
            return self.rng.random_range(-50i64..50).to_string().into_bytes();
        }
        self.pick(INTS).as_bytes().to_vec()
    }

    fn float(&mut self) -> Vec<u8> {
        self.pick(FLOATS).as_bytes().to_vec()
    }

    fn index(&mut self) -> Vec<u8> {
        self.pick(INDEXES).as_bytes().to_vec()
    }

    fn db(&mut self) -> Vec<u8> {
        self.pick(DBS).as_bytes().to_vec()
    }

    fn slot(&mut self) -> i64 {
        self.slots.pop().expect("enough expiry slots for a seed")
    }

    /// An expiry argument in seconds or milliseconds, relative or absolute. Valid
    /// ones land on a fresh slot; the rest are zero, negative, in the past, huge,
    /// overflowing or not numbers. Returns whether the time may lie in the past.
    fn expiry(&mut self, millis: bool, absolute: bool) -> (Vec<u8>, bool) {
        let scale = if millis { 1000 } else { 1 };
        let roll = self.rng.random_range(0..100);
        let (text, past): (String, bool) = if roll < 70 {
            let slot = self.slot();
            let secs = if absolute {
                self.t0 + slot * 1000 + 500
            } else {
                slot * 1000
            };
            ((secs * scale).to_string(), false)
        } else if roll < 75 {
            // Far in the future, but within range once added to the clock.
            let slot = self.slot();
            let v = if millis {
                9_000_000_000_000_000_000 + slot * 1_000_000
            } else {
                900_000_000_000_000 + slot * 1000
            };
            (v.to_string(), false)
        } else {
            // Never a small positive relative time: that would expire mid-stream.
            let mut bad = vec![
                "0",
                "-1",
                "-100",
                "abc",
                "",
                "1.5",
                " 10",
                "9223372036854775807",
                "-9223372036854775808",
                "9223372036854775808",
            ];
            // Overflowing once scaled to milliseconds, or once added to the clock; as
            // a relative time in milliseconds they would be valid and could tie.
            if !millis || absolute {
                bad.extend(["9223372036854775", "9223372036854776"]);
            }
            if absolute {
                bad.extend(["1", "1000"]);
            }
            (
                bad.choose(&mut self.rng).expect("non-empty").to_string(),
                true,
            )
        };
        (text.into_bytes(), past)
    }

    /// Queues an access to `key` that makes both servers drop it if it expired.
    fn settle(&mut self, key: &[u8]) {
        self.pending
            .push_back(Step::Cmd(cmd(&[b"EXISTS".as_slice(), key]), Cmp::Exact));
    }

    /// Options of SET or GETEX: a few drawn from the valid ones, sometimes junk, in
    /// any combination (valid or not). Returns whether an expiry may be in the past.
    fn expiry_options(&mut self, set: bool, args: &mut Vec<Vec<u8>>) -> bool {
        let n = *[0, 0, 1, 1, 1, 2, 2, 3, 4]
            .choose(&mut self.rng)
            .expect("non-empty");
        let mut past = false;
        for _ in 0..n {
            let opts: &[&str] = if set {
                &[
                    "NX", "XX", "GET", "KEEPTTL", "EX", "PX", "EXAT", "PXAT", "FOO",
                ]
            } else {
                &["PERSIST", "EX", "PX", "EXAT", "PXAT", "FOO"]
            };
            let opt = self.pick(opts);
            args.push(self.word(opt));
            let (millis, absolute) = match opt {
                "EX" => (false, false),
                "PX" => (true, false),
                "EXAT" => (false, true),
                "PXAT" => (true, true),
                _ => continue,
            };
            // Sometimes the option's value is missing.
            if self.chance(0.05) {
                continue;
            }
            let (v, p) = self.expiry(millis, absolute);
            past |= p;
            args.push(v);
        }
        past
    }

    fn draw(&mut self, name: &str) -> Step {
        let exact = |args: Vec<Vec<u8>>| Step::Cmd(args, Cmp::Exact);
        let w = self.word(name.split('|').next().unwrap_or(name));
        match name {
            "memory|usage" => {
                let mut args = vec![w, self.word("usage"), self.key()];
                if self.chance(0.3) {
                    args.push(self.word("samples"));
                    let n = self.pick(&["0", "5", "-1", "x", "99999999999999999999"]);
                    args.push(n.as_bytes().to_vec());
                }
                if self.chance(0.05) {
                    args.push(b"extra".to_vec());
                }
                Step::Cmd(args, Cmp::Size)
            }
            "watch" => {
                let n = self.rng.random_range(1..=3);
                let mut args = vec![w];
                for _ in 0..n {
                    args.push(self.key());
                }
                exact(args)
            }
            "unwatch" | "exec" | "discard" => exact(vec![w]),
            "multi" => {
                // A whole transaction in one pipeline: MULTI, a few commands (now and
                // then an invalid one, which dooms it), then EXEC or DISCARD.
                let mut batch = vec![vec![w]];
                let n = self.rng.random_range(0..5);
                for _ in 0..n {
                    let inner = self.pick(&[
                        "set", "get", "incr", "del", "append", "expire", "mget", "mset", "getdel",
                        "exists", "renamenx", "watch", "multi", "arity", "unknown", "eval",
                    ]);
                    if let Step::Cmd(args, Cmp::Exact) = self.draw(inner) {
                        batch.push(args);
                    }
                }
                let end = if self.chance(0.8) { "exec" } else { "discard" };
                batch.push(vec![self.word(end)]);
                Step::Pipeline(batch)
            }
            "get" | "getdel" | "incr" | "decr" | "strlen" | "type" | "persist" => {
                let k = self.key();
                exact(vec![w, k])
            }
            "ttl" | "expiretime" => {
                let k = self.key();
                Step::Cmd(vec![w, k], Cmp::Near(1))
            }
            "pttl" | "pexpiretime" => {
                let k = self.key();
                Step::Cmd(vec![w, k], Cmp::Near(1000))
            }
            "set" => {
                let (k, v) = (self.key(), self.value());
                let mut args = vec![w, k.clone(), v];
                if self.expiry_options(true, &mut args) {
                    self.settle(&k);
                }
                exact(args)
            }
            "getex" => {
                let k = self.key();
                let mut args = vec![w, k.clone()];
                if self.expiry_options(false, &mut args) {
                    self.settle(&k);
                }
                exact(args)
            }
            "setnx" | "getset" | "append" => {
                let (k, v) = (self.key(), self.value());
                exact(vec![w, k, v])
            }
            "setex" | "psetex" => {
                let (k, v) = (self.key(), self.value());
                let (t, _) = self.expiry(name == "psetex", false);
                exact(vec![w, k, t, v])
            }
            "mget" | "del" | "unlink" | "exists" | "touch" => {
                let mut args = vec![w];
                args.extend(self.keys(5));
                exact(args)
            }
            "mset" | "msetnx" => {
                let mut args = vec![w];
                for _ in 0..self.rng.random_range(1..4) {
                    args.push(self.key());
                    args.push(self.value());
                }
                if self.chance(0.1) {
                    args.pop();
                }
                exact(args)
            }
            "incrby" | "decrby" => {
                let (k, n) = (self.key(), self.int());
                exact(vec![w, k, n])
            }
            "incrbyfloat" => {
                let (k, f) = (self.key(), self.float());
                exact(vec![w, k, f])
            }
            "getrange" | "substr" => {
                let (k, a, b) = (self.key(), self.index(), self.index());
                exact(vec![w, k, a, b])
            }
            "setrange" => {
                let (k, off) = (self.key(), self.index());
                let v = self.value();
                exact(vec![w, k, off, v])
            }
            "lcs" => {
                let mut args = vec![w, self.key(), self.key()];
                for _ in 0..self.rng.random_range(0..4) {
                    let opt = self.pick(&["IDX", "LEN", "WITHMATCHLEN", "MINMATCHLEN", "FOO"]);
                    args.push(self.word(opt));
                    if opt == "MINMATCHLEN" && self.chance(0.95) {
                        let n = self.pick(&["0", "1", "2", "3", "-1", "abc", "10"]);
                        args.push(n.as_bytes().to_vec());
                    }
                }
                exact(args)
            }
            "rename" | "renamenx" => {
                let (a, b) = (self.key(), self.key());
                exact(vec![w, a, b])
            }
            "copy" => {
                let mut args = vec![w, self.key(), self.key()];
                for _ in 0..self.rng.random_range(0..3) {
                    match self.rng.random_range(0..5) {
                        0 | 1 => {
                            args.push(self.word("DB"));
                            args.push(self.db());
                        }
                        2 | 3 => args.push(self.word("REPLACE")),
                        _ => args.push(b"FOO".to_vec()),
                    }
                }
                exact(args)
            }
            "move" => {
                let (k, db) = (self.key(), self.db());
                exact(vec![w, k, db])
            }
            "keys" => {
                let p = self.pattern();
                Step::Cmd(vec![w, p], Cmp::Unordered)
            }
            "scan" => self.scan(),
            "randomkey" => Step::Cmd(vec![w], Cmp::RandomKey),
            "expire" | "pexpire" | "expireat" | "pexpireat" => {
                let k = self.key();
                let millis = name.starts_with('p');
                let (t, _) = self.expiry(millis, name.ends_with("at"));
                let mut args = vec![w, k, t];
                for _ in 0..*[0, 0, 1, 1, 2].choose(&mut self.rng).expect("non-empty") {
                    let opt = self.pick(&["NX", "XX", "GT", "LT", "FOO"]);
                    args.push(self.word(opt));
                }
                exact(args)
            }
            "object|encoding" | "object|refcount" | "object|idletime" | "object|freq" => {
                let sub = self.word(&name[7..]);
                let k = self.key();
                let cmp = if name == "object|idletime" {
                    // Redis shares the objects of the integers 0..9999 between keys, so
                    // their idle time is the shared object's: any key holding the same
                    // number refreshes it. strata keeps each key's own access time.
                    Cmp::Idle
                } else {
                    Cmp::Exact
                };
                Step::Cmd(vec![w, sub, k], cmp)
            }
            "eval" | "eval_ro" | "evalsha" | "evalsha_ro" | "fcall" | "fcall_ro" => {
                let body: Vec<u8> = if name.starts_with("evalsha") {
                    let sha = self.pick(&[
                        "4e6d8fc8bb01276962cce5371fa795a7763657ae",
                        "2bab3b661081db58bd2341920e0ba7cf5dc77b25",
                        "d006f1a90249474274c76f5be725b8f5804a346b",
                        "ffffffffffffffffffffffffffffffffffffffff",
                        "short",
                    ]);
                    sha.as_bytes().to_vec()
                } else if name.starts_with("fcall") {
                    let f = self.pick(&["f1", "f2", "f3", "F1", "nosuch"]);
                    f.as_bytes().to_vec()
                } else {
                    self.pick(SCRIPTS).as_bytes().to_vec()
                };
                let n = *[0usize, 1, 1, 1, 2]
                    .choose(&mut self.rng)
                    .expect("non-empty");
                let mut args = vec![w, body];
                if self.chance(0.05) {
                    args.push(self.pick(INTS).as_bytes().to_vec());
                } else {
                    args.push(n.to_string().into_bytes());
                }
                for _ in 0..n {
                    args.push(self.key());
                }
                for _ in 0..self.rng.random_range(0..3) {
                    args.push(self.value());
                }
                exact(args)
            }
            "script|load" => {
                let script = self.pick(SCRIPTS).as_bytes().to_vec();
                exact(vec![w, self.word("load"), script])
            }
            "script|exists" => {
                let mut args = vec![w, self.word("exists")];
                for _ in 0..self.rng.random_range(1..4) {
                    let sha = self.pick(&[
                        "4e6d8fc8bb01276962cce5371fa795a7763657ae",
                        "2BAB3B661081DB58BD2341920E0BA7CF5DC77B25",
                        "d006f1a90249474274c76f5be725b8f5804a346b",
                        "nonsense",
                    ]);
                    args.push(sha.as_bytes().to_vec());
                }
                exact(args)
            }
            "script|flush" | "function|flush" => {
                let mut args = vec![w, self.word("flush")];
                if self.chance(0.5) {
                    let mode = self.pick(&["ASYNC", "SYNC", "FOO"]);
                    args.push(self.word(mode));
                }
                exact(args)
            }
            "script|kill" | "function|kill" => exact(vec![w, self.word("kill")]),
            "script|help" | "function|help" => exact(vec![w, self.word("help")]),
            "function|stats" => exact(vec![w, self.word("stats")]),
            "function|load" => {
                let mut args = vec![w, self.word("load")];
                if self.chance(0.5) {
                    args.push(self.word("replace"));
                }
                args.push(self.pick(LIBRARIES).as_bytes().to_vec());
                exact(args)
            }
            "function|delete" => {
                let lib = self.pick(&["lib1", "lib2", "lib3", "nosuch"]);
                exact(vec![w, self.word("delete"), lib.as_bytes().to_vec()])
            }
            "function|list" => {
                let mut args = vec![w, self.word("list")];
                if self.chance(0.3) {
                    args.push(self.word("withcode"));
                }
                if self.chance(0.3) {
                    args.push(self.word("libraryname"));
                    let p = self.pick(&["lib*", "lib1", "*2", "x*"]);
                    args.push(p.as_bytes().to_vec());
                }
                Step::Cmd(args, Cmp::Unordered)
            }
            "object|help" | "command|help" | "config|help" | "memory|help" => {
                let sub = self.word("help");
                exact(vec![w, sub])
            }
            "select" => {
                let db = self.db();
                exact(vec![w, db])
            }
            "swapdb" => {
                let (a, b) = (self.db(), self.db());
                exact(vec![w, a, b])
            }
            "flushdb" | "flushall" => {
                let mut args = vec![w];
                if self.chance(0.4) {
                    let mode = self.pick(&["ASYNC", "SYNC", "FOO"]);
                    args.push(self.word(mode));
                }
                exact(args)
            }
            "dbsize" | "reset" => exact(vec![w]),
            "echo" => {
                let v = self.value();
                exact(vec![w, v])
            }
            "ping" => {
                let mut args = vec![w];
                for _ in 0..*[0, 0, 1, 1, 2].choose(&mut self.rng).expect("non-empty") {
                    args.push(self.value());
                }
                exact(args)
            }
            "command|info" => {
                let mut args = vec![w, self.word("info")];
                for _ in 0..self.rng.random_range(1..4) {
                    let name = if self.chance(0.1) {
                        "nosuch".to_string()
                    } else {
                        self.info_names
                            .choose(&mut self.rng)
                            .expect("non-empty")
                            .clone()
                    };
                    args.push(self.word(&name));
                }
                Step::Cmd(args, Cmp::CommandInfo)
            }
            "command|getkeys" | "command|getkeysandflags" => {
                let mut args = vec![w, self.word(&name[8..])];
                if self.chance(0.05) {
                    args.push(b"nosuch".to_vec());
                    args.push(self.key());
                } else {
                    args.extend(self.nested());
                }
                exact(args)
            }
            "command|errors" => {
                let forms: &[&[&str]] = &[
                    &["COMMAND", "COUNT", "x"],
                    &["COMMAND", "LIST", "FILTERBY"],
                    &["COMMAND", "LIST", "FILTERBY", "foo", "bar"],
                    &["COMMAND", "LIST", "x"],
                    &["COMMAND", "GETKEYS"],
                    &["COMMAND", "GETKEYS", "GET"],
                    &["COMMAND", "GETKEYSANDFLAGS", "SET", "k"],
                    &["COMMAND", "HELP", "x"],
                    &["COMMAND", "INFO", "nosuch"],
                    &["COMMAND", "DOCS", "nosuch"],
                    &["COMMAND", "NOSUCH"],
                ];
                let form = self.pick(forms);
                exact(cmd(form))
            }
            "client|setname" => {
                let names: &[&[u8]] = &[b"conn1", b"ok-name", b"", b"bad name", b"a\nb", b"x\xff"];
                let n = self.pick(names).to_vec();
                exact(vec![w, self.word("setname"), n])
            }
            "client|getname" => exact(vec![w, self.word("getname")]),
            "client|id" => Step::Cmd(vec![w, self.word("id")], Cmp::ClientId),
            "client|info" => Step::Cmd(vec![w, self.word("info")], Cmp::ClientInfo),
            "client|list" => {
                let forms: &[(&[&str], Cmp)] = &[
                    (&["LIST"], Cmp::ClientList),
                    (&["LIST", "TYPE", "normal"], Cmp::ClientList),
                    (&["LIST", "TYPE", "pubsub"], Cmp::Exact),
                    (&["LIST", "TYPE", "bogus"], Cmp::Exact),
                    (&["LIST", "ID", "abc"], Cmp::Exact),
                    (&["LIST", "ID", "999999"], Cmp::Exact),
                    (&["LIST", "foo"], Cmp::Exact),
                ];
                let (form, cmp) = *forms.choose(&mut self.rng).expect("non-empty");
                let mut args = vec![w];
                args.extend(cmd(form));
                Step::Cmd(args, cmp)
            }
            "client|kill" => {
                let forms: &[&[&str]] = &[
                    &["KILL", "1.2.3.4:5"],
                    &["KILL", "ID", "999999"],
                    &["KILL", "ID", "abc"],
                    &["KILL", "ADDR", "1.2.3.4:5"],
                    &["KILL", "TYPE", "pubsub"],
                    &["KILL", "TYPE", "bogus"],
                    &["KILL", "SKIPME", "maybe"],
                    &["KILL", "ID"],
                    &["KILL", "FOO", "bar"],
                ];
                let form = self.pick(forms);
                let mut args = vec![w];
                args.extend(cmd(form));
                exact(args)
            }
            "config|get" => {
                let mut args = vec![w, self.word("get")];
                for _ in 0..self.rng.random_range(1..4) {
                    let d = self.pick(DIRECTIVES);
                    args.push(self.word(d));
                }
                Step::Cmd(args, Cmp::Pairs)
            }
            "config|set" => {
                let forms: &[&[&str]] = &[
                    &["SET", "no-such-directive", "1"],
                    &["SET", "maxmemory", "abc"],
                    // A valid policy: the error for a bad one lists strata's own
                    // `tiered` too.
                    &["SET", "maxmemory-policy", "allkeys-lru"],
                    &["SET", "hz", "abc"],
                    &["SET", "hz"],
                    &["SET", "timeout", "-1"],
                    &["SET", "timeout", "0"],
                    &["SET", "maxmemory-samples", "5"],
                    &["SET", "hz", "10", "timeout", "0"],
                    &["SET", "hz", "10", "hz", "11"],
                    &["SET", "hz", "10", "timeout"],
                    &["SET", "databases", "4"],
                    &["SET", "appendfsync", "sometimes"],
                ];
                let form = self.pick(forms);
                let mut args = vec![w];
                args.extend(cmd(form));
                exact(args)
            }
            "config|resetstat" => exact(vec![w, self.word("resetstat")]),
            "config|rewrite" => exact(vec![w, self.word("rewrite")]),
            "info" => {
                let mut args = vec![w];
                if self.chance(0.7) {
                    let s = self.pick(&[
                        "keyspace",
                        "server",
                        "default",
                        "all",
                        "everything",
                        "bogus",
                    ]);
                    args.push(self.word(s));
                }
                Step::Cmd(args, Cmp::Info)
            }
            "time" => Step::Cmd(vec![w], Cmp::Time),
            "debug" => {
                let sub = self.pick(&["HELP", "SLEEP", "PROTOCOL", "FOO"]);
                exact(vec![w, self.word(sub)])
            }
            "shutdown" => {
                // Only forms that are refused, never one that stops a server.
                let forms: &[&[&str]] = &[
                    &["SHUTDOWN", "ABORT"],
                    &["SHUTDOWN", "FOO"],
                    &["SHUTDOWN", "NOSAVE", "SAVE"],
                    &["SHUTDOWN", "ABORT", "NOW"],
                ];
                let form = self.pick(forms);
                exact(cmd(form))
            }
            "auth" => {
                let forms: &[&[&str]] = &[
                    &["AUTH", "pass"],
                    &["AUTH", "default", "pass"],
                    &["AUTH", "someone", "pass"],
                    &["AUTH", "a", "b", "c"],
                ];
                let form = self.pick(forms);
                exact(cmd(form))
            }
            "hello" => {
                let mut args = vec![w];
                if self.chance(0.9) {
                    let v = self.pick(&["2", "3", "3", "2", "1", "4", "abc", ""]);
                    args.push(v.as_bytes().to_vec());
                    for _ in 0..self.rng.random_range(0..3) {
                        match self.rng.random_range(0..5) {
                            0 | 1 => args.extend(cmd(&["AUTH", "default", "x"])),
                            2 => args.extend(cmd(&["AUTH", "nobody", "x"])),
                            3 => args.extend(cmd(&["SETNAME", "via-hello"])),
                            _ => args.push(b"FOO".to_vec()),
                        }
                    }
                }
                Step::Cmd(args, Cmp::Hello)
            }
            "short-ttl" => self.short_ttl(),
            "pipeline" => self.pipeline(),
            "arity" => self.wrong_arity(),
            "unknown" => self.unknown(),
            other => unreachable!("no generator for {other}"),
        }
    }

    /// A full SCAN iteration, or a SCAN that fails on its first call.
    fn scan(&mut self) -> Step {
        const BAD_CURSORS: &[&[u8]] = &[b"abc", b" 1", b"1x", b"-", b"18446744073709551616"];
        let cursor: &[u8] = if self.chance(0.85) {
            b"0"
        } else {
            self.pick(BAD_CURSORS)
        };
        let mut opts = Vec::new();
        for _ in 0..self.rng.random_range(0..4) {
            match self.rng.random_range(0..8) {
                0 | 1 => {
                    opts.push(self.word("MATCH"));
                    opts.push(self.pattern());
                }
                2 | 3 => {
                    opts.push(self.word("COUNT"));
                    let c = self.pick(&["1", "2", "3", "5", "10", "100", "1000", "0", "-1", "abc"]);
                    opts.push(c.as_bytes().to_vec());
                }
                4 | 5 => {
                    opts.push(self.word("TYPE"));
                    let t = self.pick(&["string", "STRING", "list", "hash", "bogus"]);
                    opts.push(t.as_bytes().to_vec());
                }
                6 => opts.push(self.word("COUNT")),
                _ => opts.push(b"FOO".to_vec()),
            }
        }
        Step::Scan {
            cursor: cursor.to_vec(),
            opts,
        }
    }

    /// A key given a TTL of a few milliseconds, a pause, then a read that finds it
    /// gone on both servers.
    fn short_ttl(&mut self) -> Step {
        let k = self.key();
        let ms = self.rng.random_range(1..4).to_string();
        let first = match self.rng.random_range(0..4) {
            0 => cmd(&[&b"PSETEX"[..], &k, ms.as_bytes(), b"v"]),
            1 => cmd(&[&b"SET"[..], &k, b"v", b"PX", ms.as_bytes()]),
            2 => cmd(&[&b"GETEX"[..], &k, b"PX", ms.as_bytes()]),
            _ => cmd(&[&b"PEXPIRE"[..], &k, ms.as_bytes()]),
        };
        let read = self.pick(&["GET", "EXISTS", "TTL", "PTTL", "TYPE", "STRLEN", "GETDEL"]);
        self.pending.push_back(Step::Sleep(10));
        self.pending
            .push_back(Step::Cmd(cmd(&[read.as_bytes(), &k]), Cmp::Exact));
        Step::Cmd(first, Cmp::Exact)
    }

    /// A command or subcommand from strata's table with one argument too few or
    /// too many.
    fn wrong_arity(&mut self) -> Step {
        let (names, arity) = self
            .arities
            .choose(&mut self.rng)
            .cloned()
            .expect("non-empty");
        let mut args: Vec<Vec<u8>> = names.iter().map(|n| self.word(n)).collect();
        let target = if arity >= 0 {
            let a = arity as usize;
            if a > names.len() && self.chance(0.5) {
                a - 1
            } else {
                a + 1
            }
        } else {
            (-arity) as usize - 1
        };
        if target < names.len() {
            // No wrong count exists (QUIT, PING): a valid-looking unknown instead.
            return self.unknown();
        }
        while args.len() < target {
            args.push(self.key());
        }
        Step::Cmd(args, Cmp::Exact)
    }

    /// An unknown command or subcommand, with arguments long and short.
    fn unknown(&mut self) -> Step {
        let mut args: Vec<Vec<u8>> = match self.rng.random_range(0..6) {
            0 => vec![b"NOSUCH".to_vec()],
            1 => vec![b"gett".to_vec()],
            2 => vec![Vec::new()],
            3 => vec![b"OBJECT".to_vec(), b"FOO".to_vec()],
            4 => vec![b"CONFIG".to_vec(), self.value()],
            _ => vec![b"CLIENT".to_vec(), b"nosuch".to_vec()],
        };
        for _ in 0..self.rng.random_range(0..4) {
            let arg = if self.chance(0.2) {
                vec![b'z'; self.rng.random_range(60..200)]
            } else {
                self.value()
            };
            args.push(arg);
        }
        Step::Cmd(args, Cmp::Exact)
    }

    /// A glob pattern: a known one, or pieces put together at random.
    fn pattern(&mut self) -> Vec<u8> {
        if self.chance(0.5) {
            return self.pick(PATTERNS).to_vec();
        }
        const PIECES: &[&[u8]] = &[
            b"*", b"?", b"k", b"1", b"a", b"b", b"c", b"[a-c]", b"[^k]", b"[k-a]", b"\\*", b"\\",
            b"[", b"]", b"^", b"-", b"\r\n", b"\0", b" ",
        ];
        let n = self.rng.random_range(1..6);
        (0..n).flat_map(|_| self.pick(PIECES).to_vec()).collect()
    }

    /// A few commands to send in one write. Commands that are compared other than
    /// byte for byte, or that need a pause after them, are left out, together with
    /// their follow-ups.
    fn pipeline(&mut self) -> Step {
        let n = self.rng.random_range(2..7);
        let mut batch = Vec::new();
        while batch.len() < n {
            let first = self.next();
            let group: Option<Vec<Vec<Vec<u8>>>> = std::iter::once(first)
                .chain(self.pending.drain(..))
                .map(|step| match step {
                    Step::Cmd(args, Cmp::Exact) => Some(args),
                    _ => None,
                })
                .collect();
            batch.extend(group.into_iter().flatten());
        }
        Step::Pipeline(batch)
    }

    /// The arguments of a random command, for COMMAND GETKEYS.
    fn nested(&mut self) -> Vec<Vec<u8>> {
        let pending = self.pending.len();
        let step = loop {
            let step = self.next();
            if !matches!(step, Step::Sleep(_)) {
                break step;
            }
        };
        self.pending.truncate(pending);
        match step {
            Step::Cmd(args, _) => args,
            Step::Scan { cursor, mut opts } => {
                opts.insert(0, cursor);
                opts.insert(0, b"SCAN".to_vec());
                opts
            }
            Step::Pipeline(mut cmds) => cmds.swap_remove(0),
            Step::Sleep(_) => unreachable!("skipped above"),
        }
    }
}
