//! Reply accounting for one pipelined connection, without I/O.
//!
//! Requests leave in order and Redis answers them in order, so the oldest request in
//! flight owns the next reply. [`Pipeline`] keeps the requests in flight (their
//! command and the instant they were written) in a ring; [`Pipeline::receive`] takes
//! whatever complete replies a read brought, matches each to its request, and records
//! its latency, whether it was an error (and the error's text) or a null.
//!
//! Invariants: every reply is matched to exactly one request, oldest first; a reply
//! split across reads is counted once, when its last byte has arrived; a reply with no
//! request in flight, or bytes that are not RESP, end the connection with an error
//! rather than skewing the counts.

use std::collections::VecDeque;
use std::time::Instant;

use strata_resp::scan;

use crate::Error;
use crate::stats::Stats;

/// Requests in flight on one connection.
#[derive(Debug)]
pub struct Pipeline {
    in_flight: VecDeque<(Instant, usize)>,
}

impl Pipeline {
    /// A pipeline that will hold at most about `depth` requests.
    pub fn new(depth: usize) -> Pipeline {
        Pipeline {
            in_flight: VecDeque::with_capacity(depth),
        }
    }

    /// Notes that a request for command `command` was written at `at`.
    #[inline]
    pub fn sent(&mut self, command: usize, at: Instant) {
        self.in_flight.push_back((at, command));
    }

    /// The number of requests awaiting their reply.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Accounts for the complete replies at the front of `buf`, all received at `at`,
    /// into `stats`; returns how many bytes they took and how many there were. An
    /// incomplete reply at the end is left for the next call.
    pub fn receive(
        &mut self,
        buf: &[u8],
        at: Instant,
        stats: &mut Stats,
    ) -> Result<(usize, usize), Error> {
        let mut pos = 0;
        let mut replies = 0;
        while let Some(rest) = buf.get(pos..).filter(|r| !r.is_empty()) {
            let Some(frame) = scan(rest)? else {
                break;
            };
            let (sent, command) = self.in_flight.pop_front().ok_or(Error::UnexpectedReply)?;
            stats.record(command, at.saturating_duration_since(sent));
            let bytes = rest.get(..frame.len).unwrap_or_default();
            if let Some(c) = stats.commands.get_mut(command) {
                if frame.is_error() {
                    c.error(error_text(bytes));
                } else if frame.is_null(bytes) {
                    c.nulls += 1;
                }
            }
            pos += frame.len;
            replies += 1;
        }
        Ok((pos, replies))
    }
}

/// The text of an error reply: `-TEXT\r\n` or the blob error `!len\r\nTEXT\r\n`.
fn error_text(frame: &[u8]) -> &[u8] {
    let body = match frame.first() {
        Some(b'!') => frame
            .iter()
            .position(|&b| b == b'\n')
            .and_then(|nl| frame.get(nl + 1..))
            .unwrap_or_default(),
        _ => frame.get(1..).unwrap_or_default(),
    };
    body.strip_suffix(b"\r\n").unwrap_or(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn replies() -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(b"+OK\r\n");
        r.extend_from_slice(b"$-1\r\n");
        r.extend_from_slice(b"-WRONGTYPE Operation against a key\r\n");
        r.extend_from_slice(b"*2\r\n$1\r\na\r\n:7\r\n");
        r.extend_from_slice(b"!5\r\nERR x\r\n");
        r
    }

    #[test]
    fn matches_replies_to_requests_in_order() {
        let t0 = Instant::now();
        let mut p = Pipeline::new(8);
        let mut stats = Stats::new(2);
        for (i, command) in [0, 1, 1, 0, 1].into_iter().enumerate() {
            p.sent(command, t0 + Duration::from_micros(i as u64));
        }
        let buf = replies();
        let at = t0 + Duration::from_micros(100);
        assert_eq!(p.receive(&buf, at, &mut stats).unwrap(), (buf.len(), 5));
        assert_eq!(p.in_flight(), 0);
        assert_eq!(
            (stats.commands[0].replies, stats.commands[1].replies),
            (2, 3)
        );
        assert_eq!(stats.commands[1].nulls, 1);
        assert_eq!(stats.commands[1].errors, 2);
        assert_eq!(
            stats.commands[1].error_samples,
            [
                ("WRONGTYPE Operation against a key".to_string(), 1),
                ("ERR x".to_string(), 1)
            ]
        );
        let max = stats.commands[0].latency.max();
        assert!((99_000..=100_100).contains(&max), "{max}");
    }

    #[test]
    fn split_replies_count_once_whatever_the_chunking() {
        let buf = replies();
        for chunk in 1..=buf.len() {
            let t0 = Instant::now();
            let mut p = Pipeline::new(8);
            let mut stats = Stats::new(1);
            for _ in 0..5 {
                p.sent(0, t0);
            }
            // Feed the bytes a chunk at a time, keeping what was not consumed, as the
            // connection does with its read buffer.
            let mut pending = Vec::new();
            let mut total = 0;
            for piece in buf.chunks(chunk) {
                pending.extend_from_slice(piece);
                let (used, n) = p.receive(&pending, t0, &mut stats).unwrap();
                pending.drain(..used);
                total += n;
            }
            assert!(pending.is_empty());
            assert_eq!(total, 5, "chunk {chunk}");
            assert_eq!(stats.commands[0].replies, 5);
            assert_eq!(stats.commands[0].errors, 2);
            assert_eq!(p.in_flight(), 0);
        }
    }

    #[test]
    fn an_unexpected_reply_or_garbage_is_an_error() {
        let mut p = Pipeline::new(1);
        let mut stats = Stats::new(1);
        assert!(matches!(
            p.receive(b"+OK\r\n", Instant::now(), &mut stats),
            Err(Error::UnexpectedReply)
        ));
        p.sent(0, Instant::now());
        assert!(matches!(
            p.receive(b"?\r\n", Instant::now(), &mut stats),
            Err(Error::Protocol(_))
        ));
    }

    #[test]
    fn an_incomplete_reply_waits() {
        let mut p = Pipeline::new(1);
        let mut stats = Stats::new(1);
        p.sent(0, Instant::now());
        assert_eq!(
            p.receive(b"$5\r\nab", Instant::now(), &mut stats).unwrap(),
            (0, 0)
        );
        assert_eq!(p.in_flight(), 1);
        assert_eq!(stats.replies(), 0);
    }

    #[test]
    fn error_texts() {
        assert_eq!(error_text(b"-ERR no\r\n"), b"ERR no");
        assert_eq!(error_text(b"!6\r\nERR no\r\n"), b"ERR no");
    }
}
