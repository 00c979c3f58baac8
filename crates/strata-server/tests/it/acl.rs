//! ACL users, permissions, the ACL log, AUTH/HELLO, the ACL file and rename-command:
//! side by side with a real Redis where replies are deterministic, on strata alone
//! where they are not (random passwords, client details, command orders).

use strata_resp::value::Value;

use crate::support::{Proc, Raw, redis_available, redis_server, strata, strata_with_file};

/// Redis and strata started with the same directives.
struct Both {
    redis: Proc,
    strata: Proc,
}

impl Both {
    fn start(extra: &[&str]) -> Option<Both> {
        if !redis_available() {
            return None;
        }
        Some(Both {
            redis: redis_server(extra),
            strata: strata(extra),
        })
    }

    fn clients(&self) -> (Raw, Raw) {
        (self.redis.client(), self.strata.client())
    }
}

/// Runs a script on a pair of connections; collects every reply that differs.
fn script(pair: &mut (Raw, Raw), commands: &[&[&str]], mismatches: &mut Vec<String>) {
    for args in commands {
        let bytes: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        pair.0.send(&bytes);
        pair.1.send(&bytes);
        let (_, want) = pair.0.read();
        let (_, got) = pair.1.read();
        if want != got {
            mismatches.push(format!(
                "{args:?}\n  redis:  {:?}\n  strata: {:?}",
                String::from_utf8_lossy(&want),
                String::from_utf8_lossy(&got)
            ));
        }
    }
}

fn assert_none(mismatches: Vec<String>) {
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[test]
fn acl_setuser_getuser_and_errors_match_redis() {
    let Some(both) = Both::start(&[]) else {
        return;
    };
    let mut admin = both.clients();
    let mut m = Vec::new();
    script(
        &mut admin,
        &[
            &["ACL", "WHOAMI"],
            &["ACL", "LIST"],
            &["ACL", "USERS"],
            &["ACL", "GETUSER", "default"],
            &["ACL", "SETUSER", "bob"],
            &["ACL", "GETUSER", "bob"],
            &[
                "ACL", "SETUSER", "alice", "on", ">pw", "~k*", "%R~r*", "&ch*", "+@all", "-get",
            ],
            &["ACL", "GETUSER", "alice"],
            &[
                "ACL",
                "SETUSER",
                "carol",
                "on",
                "nopass",
                "~*",
                "+@all",
                "-@hash",
                "+hget",
                "(+get ~x*)",
            ],
            &["ACL", "GETUSER", "carol"],
            &[
                "ACL",
                "SETUSER",
                "dave",
                "on",
                "#30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4",
                "+select|0",
            ],
            // Several single commands come in Redis's dictionary order, so one each.
            &["ACL", "SETUSER", "erin", "on", "nopass", "+config|get"],
            &["ACL", "GETUSER", "erin"],
            &["ACL", "GETUSER", "dave"],
            &[
                "ACL",
                "SETUSER",
                "dave",
                "!30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4",
                "%RW~a",
                "%W~b",
                "(+set",
                "~y)",
            ],
            &["ACL", "GETUSER", "dave"],
            &["ACL", "SETUSER", "x", "~a", "allkeys", "~b"],
            &["ACL", "SETUSER", "x", "nosuch"],
            &["ACL", "SETUSER", "x", "+nosuch"],
            &["ACL", "SETUSER", "x", "+@nosuch"],
            &["ACL", "SETUSER", "x", "#abc"],
            &["ACL", "SETUSER", "x", "<nope"],
            &["ACL", "SETUSER", "x", "+config|get|x"],
            &["ACL", "SETUSER", "x", "+select|"],
            &["ACL", "SETUSER", "x", "&a", "allchannels", "&b"],
            &["ACL", "SETUSER", "x", "on", "(+get"],
            &["ACL", "SETUSER", "a b"],
            &["ACL", "SETUSER", "x", "%~a"],
            &["ACL", "SETUSER", "x", "~a b"],
            &["ACL", "GETUSER", "x"],
            &["ACL", "GETUSER", "nosuch"],
            &["ACL", "USERS"],
            &["ACL", "DELUSER", "default"],
            &["ACL", "DELUSER", "bob", "nosuch", "carol"],
            &["ACL", "USERS"],
            &["ACL", "DRYRUN", "alice", "get", "k1"],
            &["ACL", "DRYRUN", "alice", "set", "k1", "v"],
            &["ACL", "DRYRUN", "alice", "set", "r1", "v"],
            &["ACL", "DRYRUN", "alice", "set", "zz", "v"],
            &["ACL", "DRYRUN", "alice", "publish", "zz", "m"],
            &["ACL", "DRYRUN", "alice", "publish", "ch1", "m"],
            &["ACL", "DRYRUN", "dave", "select", "0"],
            &["ACL", "DRYRUN", "dave", "select", "1"],
            &["ACL", "DRYRUN", "erin", "config", "get", "x"],
            &["ACL", "DRYRUN", "erin", "config", "set", "x", "y"],
            &["ACL", "DRYRUN", "nobody", "get", "a"],
            &["ACL", "DRYRUN", "alice", "nosuch", "a"],
            &["ACL", "DRYRUN", "alice", "config"],
            &["ACL", "DRYRUN", "alice", "config", "nosuch"],
            &["ACL", "DRYRUN", "alice", "get"],
            &["ACL", "CAT", "nosuch"],
            &["ACL", "GENPASS", "0"],
            &["ACL", "GENPASS", "4097"],
            &["ACL", "GENPASS", "x"],
            &["ACL", "LOG", "x"],
            &["ACL", "LOG", "RESET"],
            &["ACL", "LOG"],
            &["ACL", "LOG", "-1"],
            &["ACL", "LOAD"],
            &["ACL", "SAVE"],
            &["ACL", "NOSUCH"],
            &["ACL", "HELP"],
            &["ACL", "CAT"],
        ],
        &mut m,
    );
    assert_none(m);
}

#[test]
fn permissions_and_auth_match_redis() {
    let Some(both) = Both::start(&[]) else {
        return;
    };
    let mut admin = both.clients();
    let mut m = Vec::new();
    script(
        &mut admin,
        &[
            &[
                "ACL",
                "SETUSER",
                "alice",
                "on",
                ">pw",
                "~k*",
                "%R~r*",
                "&ch*",
                "+@read",
                "+set",
                "+publish",
                "+subscribe",
                "+psubscribe",
                "+multi",
                "+exec",
                "+client|list",
            ],
            &["ACL", "SETUSER", "off", "off", ">pw", "+@all", "~*"],
            &["SET", "r1", "x"],
        ],
        &mut m,
    );
    let mut alice = both.clients();
    script(
        &mut alice,
        &[
            &["AUTH", "alice", "wrong"],
            &["AUTH", "nobody", "x"],
            &["AUTH", "off", "pw"],
            &["AUTH", "pw"],
            &["AUTH", "a", "b", "c"],
            &["AUTH", "alice", "pw"],
            &["ACL", "WHOAMI"],
            &["GET", "k1"],
            &["GET", "x"],
            &["SET", "w", "1"],
            &["SET", "k1", "1"],
            &["SET", "r1", "1"],
            &["GET", "r1"],
            &["MGET", "k1", "r1", "zz"],
            &["HSET", "k1", "a", "b"],
            &["PUBLISH", "ch1", "x"],
            &["PUBLISH", "zz", "x"],
            &["MULTI"],
            &["GET", "k1"],
            &["HSET", "k1", "a", "b"],
            &["EXEC"],
            &["MULTI"],
            &["GET", "zz"],
            &["EXEC"],
            &["CONFIG", "GET", "port"],
            &["HELLO", "2", "AUTH", "alice", "nope"],
            &["HELLO", "3", "AUTH", "alice", "pw", "SETNAME", "a b"],
            &["ACL", "WHOAMI"],
            &["AUTH", "default", "x"],
            &["ACL", "WHOAMI"],
            &["PSUBSCRIBE", "ch*", "c*"],
            &["SUBSCRIBE", "ch2", "zz"],
        ],
        &mut m,
    );
    assert_none(m);
}

#[test]
fn requirepass_is_the_default_users_password() {
    let Some(both) = Both::start(&["--requirepass", "s3cret"]) else {
        return;
    };
    let mut c = both.clients();
    let mut m = Vec::new();
    script(
        &mut c,
        &[
            &["GET", "a"],
            &["ACL", "WHOAMI"],
            &["AUTH", "wrong"],
            &["AUTH", "default", "wrong"],
            &["AUTH", "s3cret"],
            &["ACL", "LIST"],
            &["ACL", "SETUSER", "default", ">other"],
            &["CONFIG", "SET", "requirepass", "new"],
            &["ACL", "LIST"],
            &["CONFIG", "GET", "requirepass"],
            &["RESET"],
            &["GET", "a"],
            &["AUTH", "default", "new"],
            &["CONFIG", "SET", "requirepass", ""],
            &["ACL", "LIST"],
            &["RESET"],
            &["GET", "a"],
        ],
        &mut m,
    );
    assert_none(m);
}

#[test]
fn acl_command_info_matches_redis() {
    let Some(both) = Both::start(&[]) else {
        return;
    };
    let mut c = both.clients();
    let mut m = Vec::new();
    for sub in [
        "cat", "deluser", "dryrun", "genpass", "getuser", "help", "list", "load", "log", "save",
        "setuser", "users", "whoami",
    ] {
        let name = format!("acl|{sub}");
        script(&mut c, &[&["COMMAND", "INFO", &name]], &mut m);
    }
    script(&mut c, &[&["COMMAND", "COUNT"]], &mut Vec::new());
    assert_none(m);
}

/// An entry of ACL LOG as (field, value) pairs.
fn log_entries(c: &mut Raw, count: &str) -> Vec<Vec<(String, Value)>> {
    let Value::Array(entries) = c.cmd(&["ACL", "LOG", count]) else {
        panic!("ACL LOG answers an array");
    };
    entries
        .into_iter()
        .map(|e| {
            let Value::Array(items) = e else {
                panic!("an entry is a flat map in RESP2");
            };
            items
                .chunks(2)
                .map(|kv| {
                    let key = String::from_utf8_lossy(kv[0].as_bytes().unwrap_or_default());
                    (key.into_owned(), kv[1].clone())
                })
                .collect()
        })
        .collect()
}

fn text(v: &Value) -> String {
    String::from_utf8_lossy(v.as_bytes().unwrap_or_default()).into_owned()
}

#[test]
fn the_acl_log_records_denials_like_redis() {
    let Some(both) = Both::start(&[]) else {
        return;
    };
    let mut admin = both.clients();
    let mut m = Vec::new();
    script(
        &mut admin,
        &[&[
            "ACL", "SETUSER", "alice", "on", ">pw", "~k*", "+get", "+multi", "+publish",
        ]],
        &mut m,
    );
    let mut alice = both.clients();
    script(
        &mut alice,
        &[
            &["AUTH", "alice", "bad"],
            &["AUTH", "alice", "pw"],
            &["GET", "x"],
            &["SET", "k", "v"],
            &["SET", "k", "v"],
            &["PUBLISH", "ch", "m"],
            &["MULTI"],
            &["GET", "y"],
        ],
        &mut m,
    );
    assert_none(m);
    let want = log_entries(&mut admin.0, "10");
    let got = log_entries(&mut admin.1, "10");
    assert_eq!(want.len(), got.len(), "{want:?}\n{got:?}");
    for (w, g) in want.iter().zip(&got) {
        let fields: Vec<&str> = g.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            fields,
            [
                "count",
                "reason",
                "context",
                "object",
                "username",
                "age-seconds",
                "client-info"
            ]
        );
        for ((wk, wv), (_, gv)) in w.iter().zip(g) {
            match wk.as_str() {
                "age-seconds" => {
                    let age: f64 = text(gv).parse().expect("a number");
                    assert!((0.0..10.0).contains(&age));
                }
                "client-info" => {
                    let info = text(gv);
                    assert!(info.contains(" user="), "{info}");
                    let cmd = |s: &str| {
                        s.split(' ')
                            .filter(|f| f.starts_with("cmd=") || f.starts_with("user="))
                            .map(str::to_owned)
                            .collect::<Vec<_>>()
                    };
                    assert_eq!(cmd(&text(wv)), cmd(&info));
                }
                _ => assert_eq!(wv, gv, "{wk}"),
            }
        }
    }
    assert_eq!(
        admin.1.cmd(&["ACL", "LOG", "RESET"]),
        Value::Simple("OK".into())
    );
    assert_eq!(admin.1.cmd(&["ACL", "LOG"]), Value::Array(vec![]));
}

#[test]
fn deleted_users_are_disconnected_and_disabled_users_cannot_log_in() {
    let s = strata(&[]);
    let mut admin = s.client();
    admin.cmd(&["ACL", "SETUSER", "alice", "on", ">pw", "+@all", "~*"]);
    let mut alice = s.client();
    assert_eq!(
        alice.cmd(&["AUTH", "alice", "pw"]),
        Value::Simple("OK".into())
    );
    let info = text(&alice.cmd(&["CLIENT", "INFO"]));
    assert!(info.contains(" user=alice "), "{info}");
    let list = text(&admin.cmd(&["CLIENT", "LIST"]));
    assert!(list.contains("user=alice"), "{list}");
    // Turned off: the open connection goes on, new logins fail.
    admin.cmd(&["ACL", "SETUSER", "alice", "off"]);
    assert_eq!(alice.cmd(&["PING"]), Value::Simple("PONG".into()));
    let mut again = s.client();
    assert!(
        matches!(again.cmd(&["AUTH", "alice", "pw"]), Value::Error(e) if e.starts_with(b"WRONGPASS"))
    );
    admin.cmd(&["ACL", "SETUSER", "hello", "on", ">h", "+@all"]);
    assert!(matches!(
        again.cmd(&["HELLO", "3", "AUTH", "hello", "h"]),
        Value::Map(_)
    ));
    assert_eq!(
        again.cmd(&["ACL", "WHOAMI"]),
        Value::Bulk(b"hello".to_vec())
    );
    // Deleted: the connection is closed.
    assert_eq!(admin.cmd(&["ACL", "DELUSER", "alice"]), Value::Integer(1));
    assert!(alice.read_to_close().is_empty());
    // CLIENT KILL USER.
    admin.cmd(&["ACL", "SETUSER", "bob", "on", "nopass", "+@all"]);
    let mut bob = s.client();
    bob.cmd(&["AUTH", "bob", "x"]);
    assert_eq!(
        admin.cmd(&["CLIENT", "KILL", "USER", "bob"]),
        Value::Integer(1)
    );
    assert!(bob.read_to_close().is_empty());
    assert!(matches!(
        admin.cmd(&["CLIENT", "KILL", "USER", "nosuch"]),
        Value::Error(e) if e == b"ERR No such user 'nosuch'"
    ));
    // A user deleting itself gets its reply, then the connection closes.
    admin.cmd(&["ACL", "SETUSER", "carol", "on", "nopass", "+@all"]);
    let mut carol = s.client();
    carol.cmd(&["AUTH", "carol", "x"]);
    assert_eq!(carol.cmd(&["ACL", "DELUSER", "carol"]), Value::Integer(1));
    assert!(carol.read_to_close().is_empty());
}

#[test]
fn narrowed_channels_disconnect_subscribers() {
    let s = strata(&[]);
    let mut admin = s.client();
    admin.cmd(&[
        "ACL", "SETUSER", "sub", "on", "nopass", "+@all", "&news.*", "&other",
    ]);
    let mut keep = s.client();
    keep.cmd(&["AUTH", "sub", "x"]);
    keep.cmd(&["SUBSCRIBE", "news.a"]);
    let mut lose = s.client();
    lose.cmd(&["AUTH", "sub", "x"]);
    lose.cmd(&["SUBSCRIBE", "other"]);
    admin.cmd(&["ACL", "SETUSER", "sub", "resetchannels", "&news.*"]);
    assert!(lose.read_to_close().is_empty());
    assert_eq!(admin.cmd(&["PUBLISH", "news.a", "hi"]), Value::Integer(1));
}

#[test]
fn exec_checks_permissions_again() {
    let s = strata(&[]);
    let mut admin = s.client();
    admin.cmd(&["ACL", "SETUSER", "alice", "on", "nopass", "+@all", "~*"]);
    let mut alice = s.client();
    alice.cmd(&["AUTH", "alice", "x"]);
    alice.cmd(&["MULTI"]);
    assert_eq!(
        alice.cmd(&["SET", "k", "v"]),
        Value::Simple("QUEUED".into())
    );
    assert_eq!(alice.cmd(&["GET", "k"]), Value::Simple("QUEUED".into()));
    admin.cmd(&["ACL", "SETUSER", "alice", "-set"]);
    let Value::Array(replies) = alice.cmd(&["EXEC"]) else {
        panic!("EXEC answers an array");
    };
    assert_eq!(
        replies[0],
        Value::Error(
            b"NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to execute the command or subcommand"
                .to_vec()
        )
    );
    assert_eq!(replies[1], Value::Null);
    let entries = log_entries(&mut admin, "1");
    assert_eq!(text(&entries[0][2].1), "multi");
}

#[test]
fn acl_save_and_load_use_the_acl_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("users.acl");
    std::fs::write(
        &file,
        "user alice on #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 ~k* resetchannels -@all +get\n",
    )
    .expect("write the ACL file");
    let path = file.to_string_lossy().into_owned();
    let s = strata(&["--aclfile", &path]);
    let mut admin = s.client();
    assert_eq!(
        admin.cmd(&["ACL", "LIST"]),
        Value::Array(vec![
            Value::Bulk(b"user alice on #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 ~k* resetchannels -@all +get".to_vec()),
            Value::Bulk(b"user default on nopass ~* &* +@all".to_vec()),
        ])
    );
    let mut alice = s.client();
    assert_eq!(
        alice.cmd(&["AUTH", "alice", "pw"]),
        Value::Simple("OK".into())
    );
    admin.cmd(&["ACL", "SETUSER", "bob", "on", "nopass", "+@all"]);
    assert_eq!(admin.cmd(&["ACL", "SAVE"]), Value::Simple("OK".into()));
    let saved = std::fs::read_to_string(&file).expect("read the ACL file");
    assert_eq!(saved.lines().count(), 3, "{saved}");
    assert!(
        saved.contains("user bob on nopass resetchannels +@all"),
        "{saved}"
    );
    // A broken file changes nothing.
    std::fs::write(&file, "user eve on +nosuch\n").expect("write");
    let Value::Error(e) = admin.cmd(&["ACL", "LOAD"]) else {
        panic!("a broken file is refused");
    };
    assert!(
        String::from_utf8_lossy(&e).ends_with(
            ":1: Unknown command or category name in ACL. WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
        ),
        "{}",
        String::from_utf8_lossy(&e)
    );
    assert_eq!(alice.cmd(&["GET", "k1"]), Value::Null);
    // A good one replaces the users and disconnects their clients.
    std::fs::write(&file, "user eve on nopass +@all\n").expect("write");
    assert_eq!(admin.cmd(&["ACL", "LOAD"]), Value::Simple("OK".into()));
    assert!(alice.read_to_close().is_empty());
    assert_eq!(
        admin.cmd(&["ACL", "USERS"]),
        Value::Array(vec![
            Value::Bulk(b"default".to_vec()),
            Value::Bulk(b"eve".to_vec())
        ])
    );
    drop(s);
    // A start-up with a broken file fails.
    std::fs::write(&file, "user eve on +nosuch\n").expect("write");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_strata-server"))
        .args(["--port", &crate::support::free_port().to_string()])
        .args(["--appendonly", "no", "--aclfile", &path])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run strata-server");
    assert!(!status.success());
}

#[test]
fn users_from_the_configuration_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let conf = dir.path().join("strata.conf");
    std::fs::write(
        &conf,
        "user default on >adminpw ~* &* +@all\nuser reader on >r ~* -@all +@read\nrename-command FLUSHALL \"\"\nrename-command CONFIG cfg\n",
    )
    .expect("write the configuration");
    let s = strata_with_file(Some(&conf), &["--requirepass", "adminpw"]);
    let mut c = s.client();
    assert_eq!(c.cmd(&["AUTH", "reader", "r"]), Value::Simple("OK".into()));
    assert_eq!(c.cmd(&["GET", "a"]), Value::Null);
    assert!(matches!(c.cmd(&["SET", "a", "1"]), Value::Error(e) if e.starts_with(b"NOPERM")));
    assert_eq!(c.cmd(&["AUTH", "adminpw"]), Value::Simple("OK".into()));
    assert!(matches!(
        c.cmd(&["FLUSHALL"]),
        Value::Error(e) if e.starts_with(b"ERR unknown command 'FLUSHALL'")
    ));
    assert!(matches!(c.cmd(&["CONFIG", "GET", "port"]), Value::Error(_)));
    assert!(matches!(c.cmd(&["CFG", "GET", "port"]), Value::Array(_)));
    // ACL rules still name commands by their original names.
    assert_eq!(
        c.cmd(&["ACL", "SETUSER", "ops", "+config|get", "+flushall"]),
        Value::Simple("OK".into())
    );
    // Unknown commands in rename-command stop start-up.
    std::fs::write(&conf, "rename-command NOSUCH x\n").expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_strata-server"))
        .arg(&conf)
        .args(["--port", &crate::support::free_port().to_string()])
        .output()
        .expect("run strata-server");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("No such command in rename-command"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn acl_genpass_and_cat() {
    let s = strata(&[]);
    let mut c = s.client();
    let pass = text(&c.cmd(&["ACL", "GENPASS"]));
    assert_eq!(pass.len(), 64);
    assert!(pass.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_ne!(pass, text(&c.cmd(&["ACL", "GENPASS"])));
    assert_eq!(text(&c.cmd(&["ACL", "GENPASS", "5"])).len(), 2);
    let Value::Array(read) = c.cmd(&["ACL", "CAT", "read"]) else {
        panic!("ACL CAT answers an array");
    };
    let names: Vec<String> = read.iter().map(text).collect();
    assert!(names.contains(&"get".to_owned()));
    assert!(!names.contains(&"set".to_owned()));
    if redis_available() {
        // Every command strata lists in a category is in Redis's list too.
        let r = redis_server(&[]);
        let mut rc = r.client();
        for category in [
            "read",
            "write",
            "admin",
            "dangerous",
            "fast",
            "pubsub",
            "keyspace",
        ] {
            let theirs: Vec<String> = match rc.cmd(&["ACL", "CAT", category]) {
                Value::Array(v) => v.iter().map(text).collect(),
                other => panic!("{other:?}"),
            };
            let ours: Vec<String> = match c.cmd(&["ACL", "CAT", category]) {
                Value::Array(v) => v.iter().map(text).collect(),
                other => panic!("{other:?}"),
            };
            for name in &ours {
                assert!(theirs.contains(name), "{name} in @{category}");
            }
        }
    }
}

#[test]
fn scripts_run_with_the_callers_permissions() {
    let Some(both) = Both::start(&[]) else {
        return;
    };
    let mut pair = both.clients();
    let mut mismatches = Vec::new();
    script(
        &mut pair,
        &[
            &[
                "ACL", "SETUSER", "lua", "on", ">pw", "+eval", "+get", "~k*", "&news",
            ],
            &["SET", "other", "1"],
            &["AUTH", "lua", "pw"],
            &["EVAL", "return redis.call('get', KEYS[1])", "1", "k1"],
            &["EVAL", "return redis.call('set', 'k1', 'v')", "0"],
            &["EVAL", "return redis.pcall('set', 'k1', 'v')", "0"],
            &["EVAL", "return redis.call('get', 'other')", "0"],
            &["EVAL", "return redis.call('publish', 'sports', 'x')", "0"],
            &["EVAL", "return redis.acl_check_cmd('get', 'k1')", "0"],
            &["EVAL", "return redis.acl_check_cmd('set', 'k1', 'v')", "0"],
            &["EVAL", "return redis.acl_check_cmd('get', 'other')", "0"],
            &["EVAL", "return redis.acl_check_cmd('nosuchcommand')", "0"],
            &["AUTH", "default", ""],
        ],
        &mut mismatches,
    );
    assert_none(mismatches);
    // The denials are logged in the `lua` context.
    let entries = log_entries(&mut pair.1, "10");
    assert!(!entries.is_empty());
    for entry in &entries {
        let context = entry
            .iter()
            .find(|(k, _)| k == "context")
            .map(|(_, v)| text(v));
        assert_eq!(context.as_deref(), Some("lua"), "{entry:?}");
    }
}
