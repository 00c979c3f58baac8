//! The ACL log: recent denials and failed authentications (ACL LOG).
//!
//! Newest first, at most `acllog-max-len` entries. A denial like one of the ten newest
//! entries (same reason, context, object and user, within a minute) updates that entry
//! — its count, time and client — and moves it to the front, as Redis groups them.

use std::collections::VecDeque;

/// How long apart two similar denials may be and still be grouped, in ms.
const GROUPING_MS: u64 = 60_000;
/// How many of the newest entries are searched for a similar one.
const GROUPING_SCAN: usize = 10;

/// Why an entry was logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Command,
    Key,
    Channel,
    Auth,
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// Where the denied command ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    Toplevel,
    Multi,
    Lua,
}

impl Context {
    pub fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// One entry of the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub count: u64,
    pub reason: Reason,
    pub context: Context,
    /// The command, key or channel denied, or the command that failed to authenticate.
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    /// Unix time of the last occurrence, in ms.
    pub time_ms: u64,
    /// The CLIENT LIST line of the last client it happened to.
    pub client_info: String,
}

/// The log itself.
#[derive(Debug, Default)]
pub struct AclLog {
    entries: VecDeque<Entry>,
}

impl AclLog {
    /// Adds an entry (with a count of 1), grouping it with a similar recent one, and
    /// trims the log to `max_len` entries.
    pub fn add(&mut self, entry: Entry, max_len: usize) {
        let similar = self.entries.iter().take(GROUPING_SCAN).position(|e| {
            e.reason == entry.reason
                && e.context == entry.context
                && e.time_ms.abs_diff(entry.time_ms) <= GROUPING_MS
                && e.object == entry.object
                && e.username == entry.username
        });
        if let Some(at) = similar
            && let Some(mut existing) = self.entries.remove(at)
        {
            existing.count += 1;
            existing.time_ms = entry.time_ms;
            existing.client_info = entry.client_info;
            self.entries.push_front(existing);
            return;
        }
        self.entries.push_front(entry);
        self.entries.truncate(max_len);
    }

    /// The `count` newest entries.
    pub fn newest(&self, count: usize) -> impl Iterator<Item = &Entry> {
        self.entries.iter().take(count)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(object: &str, time_ms: u64) -> Entry {
        Entry {
            count: 1,
            reason: Reason::Command,
            context: Context::Toplevel,
            object: object.as_bytes().to_vec(),
            username: b"alice".to_vec(),
            time_ms,
            client_info: format!("at {time_ms}"),
        }
    }

    #[test]
    fn similar_entries_are_grouped_within_a_minute() {
        let mut log = AclLog::default();
        log.add(entry("get", 0), 128);
        log.add(entry("set", 10), 128);
        log.add(entry("get", 20), 128);
        let got: Vec<(&[u8], u64)> = log.newest(10).map(|e| (&e.object[..], e.count)).collect();
        assert_eq!(got, [(&b"get"[..], 2), (&b"set"[..], 1)]);
        assert_eq!(
            log.newest(1).next().map(|e| e.client_info.as_str()),
            Some("at 20")
        );
        log.add(entry("get", 20 + GROUPING_MS + 1), 128);
        assert_eq!(log.len(), 3);
    }

    #[test]
    fn the_log_keeps_its_newest_entries() {
        let mut log = AclLog::default();
        for i in 0..5 {
            log.add(entry(&format!("c{i}"), i), 3);
        }
        let got: Vec<&[u8]> = log.newest(10).map(|e| &e.object[..]).collect();
        assert_eq!(got, [&b"c4"[..], b"c3", b"c2"]);
    }
}
