//! MONITOR: every command run, as Redis prints it to monitoring clients.
//!
//! A line is `+<seconds>.<micros> [<db> <addr>] "arg" "arg"...`, each argument quoted
//! as Redis's `sdscatrepr` does, built once and shared by every MONITOR client. As in
//! Redis 7.0 a command is shown after it ran (so SELECT shows the new database),
//! commands rejected before running and commands flagged `admin` or `skip_monitor`
//! are not shown, passwords are shown as `(redacted)`, and the commands of a
//! transaction are shown one by one before its EXEC.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use crate::conn::ConnState;
use crate::pubsub::PubSub;
use crate::spec::Flags;
use crate::table::Command;

/// Whether `cmd` is shown to MONITOR clients.
pub fn shown(cmd: &Command) -> bool {
    !cmd.flags.intersects(Flags::ADMIN | Flags::SKIP_MONITOR)
}

/// Sends the line for a command that ran to every MONITOR client.
#[inline]
pub fn feed(hub: &PubSub, conn: &ConnState, cmd: &Command, argv: &[&[u8]], now_ms: u64) {
    if hub.has_monitors() {
        feed_monitors(hub, conn, cmd, argv, now_ms);
    }
}

/// The body of [`feed`], out of the common path (no monitor).
#[inline(never)]
fn feed_monitors(hub: &PubSub, conn: &ConnState, cmd: &Command, argv: &[&[u8]], now_ms: u64) {
    if !shown(cmd) {
        return;
    }
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    let line = line(micros, conn.db, &conn.info.addr, argv);
    hub.feed_monitors(Bytes::from(line), now_ms);
}

/// The line for one command, at `micros` since the epoch.
pub fn line(micros: u128, db: usize, addr: &str, argv: &[&[u8]]) -> Vec<u8> {
    let mut out = format!(
        "+{}.{:06} [{db} {addr}]",
        micros / 1_000_000,
        micros % 1_000_000
    )
    .into_bytes();
    let redacted = redacted_positions(argv);
    for (i, arg) in argv.iter().enumerate() {
        out.push(b' ');
        if redacted.contains(&i) {
            repr(&mut out, b"(redacted)");
        } else {
            repr(&mut out, arg);
        }
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// Arguments Redis hides: AUTH's credentials and those of HELLO ... AUTH.
fn redacted_positions(argv: &[&[u8]]) -> Vec<usize> {
    let Some(name) = argv.first() else {
        return Vec::new();
    };
    if name.eq_ignore_ascii_case(b"auth") {
        return (1..argv.len()).collect();
    }
    if name.eq_ignore_ascii_case(b"hello") {
        let mut hidden = Vec::new();
        let mut i = 2;
        while i < argv.len() {
            if argv[i].eq_ignore_ascii_case(b"auth") && i + 2 < argv.len() {
                hidden.extend([i + 1, i + 2]);
                i += 3;
            } else if argv[i].eq_ignore_ascii_case(b"setname") {
                i += 2;
            } else {
                break;
            }
        }
        return hidden;
    }
    Vec::new()
}

/// Appends `s` quoted as Redis's `sdscatrepr`.
pub fn repr(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(c),
            _ => out.extend_from_slice(format!("\\x{c:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_quote_like_redis() {
        let argv: Vec<&[u8]> = vec![b"SET", b"k", b"v w\"x\n\x01\xc3\xbf"];
        let l = line(1_796_023_619_866_860, 0, "127.0.0.1:48414", &argv);
        assert_eq!(
            String::from_utf8_lossy(&l),
            "+1796023619.866860 [0 127.0.0.1:48414] \"SET\" \"k\" \"v w\\\"x\\n\\x01\\xc3\\xbf\"\r\n"
        );
        let argv: Vec<&[u8]> = vec![b"HELLO", b"3", b"AUTH", b"default", b"x"];
        let l = line(5, 3, "a:1", &argv);
        assert_eq!(
            String::from_utf8_lossy(&l),
            "+0.000005 [3 a:1] \"HELLO\" \"3\" \"AUTH\" \"(redacted)\" \"(redacted)\"\r\n"
        );
        let argv: Vec<&[u8]> = vec![b"auth", b"u", b"p"];
        let l = line(0, 0, "a:1", &argv);
        assert!(l.ends_with(b"\"auth\" \"(redacted)\" \"(redacted)\"\r\n"));
    }
}
