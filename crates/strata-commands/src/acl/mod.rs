//! Access control: users, their permissions, the ACL log and the ACL file.
//!
//! [`Acl`] is the server's table of users. A connection starts as the `default` user
//! (authenticated at once when that user is `on` and `nopass`, that is when no
//! `requirepass` is set) and changes user with AUTH or HELLO AUTH. Every command is
//! checked against the connection's user after the NOAUTH check (see
//! [`crate::exec`]), and again by EXEC for each queued command, since the rules may
//! have changed in between.
//!
//! A user is immutable once published: ACL SETUSER builds a changed copy and swaps it
//! in, then bumps the table's generation. A connection keeps the `Arc` of its user
//! and the generation it was read at ([`Session`]), so the check costs one atomic load
//! unless the table changed. Deleting a user (ACL DELUSER, ACL LOAD) closes the
//! connections authenticated as that user, as Redis does; a user turned `off` can no
//! longer authenticate, but its open connections go on.

pub mod check;
pub mod describe;
pub mod file;
pub mod log;
pub mod user;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use parking_lot::{Mutex, RwLock};

pub use check::Denied;
pub use log::{AclLog, Context, Entry, Reason};
pub use user::{RuleError, User};

use crate::table::Registry;

/// The default length of the ACL log (`acllog-max-len`).
pub const DEFAULT_LOG_MAX_LEN: usize = 128;

/// A user before and after ACL SETUSER (none before when it is new).
pub type Replaced = (Option<Arc<User>>, Arc<User>);

/// The server's users and ACL log.
#[derive(Debug)]
pub struct Acl {
    users: RwLock<BTreeMap<Vec<u8>, Arc<User>>>,
    /// Bumped after every change to `users`.
    generation: AtomicU64,
    /// Whether a client must authenticate before running commands: the `default` user
    /// is off or has passwords.
    auth_required: AtomicBool,
    /// Whether the `default` user has no password (protected mode applies).
    default_nopass: AtomicBool,
    log: Mutex<AclLog>,
    /// `acllog-max-len`.
    pub log_max_len: AtomicUsize,
    /// `acl-pubsub-default allchannels`: new users get every channel.
    pub pubsub_allchannels: AtomicBool,
    /// `aclfile`, if any.
    file: RwLock<Option<PathBuf>>,
}

impl Acl {
    /// A table with only the `default` user, which may do anything.
    pub fn new(registry: &Registry) -> Acl {
        let default = User::default_user(registry);
        let mut users = BTreeMap::new();
        users.insert(default.name.clone(), Arc::new(default));
        Acl {
            users: RwLock::new(users),
            generation: AtomicU64::new(1),
            auth_required: AtomicBool::new(false),
            default_nopass: AtomicBool::new(true),
            log: Mutex::new(AclLog::default()),
            log_max_len: AtomicUsize::new(DEFAULT_LOG_MAX_LEN),
            pubsub_allchannels: AtomicBool::new(false),
            file: RwLock::new(None),
        }
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Whether a new or reset connection needs to authenticate.
    pub fn auth_required(&self) -> bool {
        self.auth_required.load(Ordering::Acquire)
    }

    /// Whether the `default` user has no password (protected mode applies).
    pub fn default_nopass(&self) -> bool {
        self.default_nopass.load(Ordering::Acquire)
    }

    pub fn allchannels_default(&self) -> bool {
        self.pubsub_allchannels.load(Ordering::Relaxed)
    }

    pub fn user(&self, name: &[u8]) -> Option<Arc<User>> {
        self.users.read().get(name).cloned()
    }

    /// Every user, by name.
    pub fn users(&self) -> Vec<Arc<User>> {
        self.users.read().values().cloned().collect()
    }

    pub fn file(&self) -> Option<PathBuf> {
        self.file.read().clone()
    }

    pub fn set_file(&self, path: Option<PathBuf>) {
        *self.file.write() = path;
    }

    /// Publishes a changed table: mirrors the `default` user's state, then bumps the
    /// generation so that connections read their users again.
    fn publish(&self, users: &BTreeMap<Vec<u8>, Arc<User>>) {
        let default = users.get(b"default".as_slice());
        let required = default.is_none_or(|d| !d.enabled || !d.nopass);
        self.auth_required.store(required, Ordering::Release);
        self.default_nopass
            .store(default.is_some_and(|d| d.nopass), Ordering::Release);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Checks credentials; the user on success. A disabled user never authenticates;
    /// a `nopass` user accepts any password.
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> Option<Arc<User>> {
        let user = self.user(name)?;
        (user.enabled && user.password_ok(password)).then_some(user)
    }

    /// `requirepass`: the `default` user's only password, or `nopass` without one.
    pub fn set_default_password(&self, registry: &Registry, password: Option<&[u8]>) {
        let allchannels = self.allchannels_default();
        let mut users = self.users.write();
        let mut default = users
            .get(b"default".as_slice())
            .map_or_else(|| User::default_user(registry), |u| (**u).clone());
        let _ = default.apply(registry, b"resetpass", allchannels);
        match password {
            Some(p) => {
                let _ = default.apply(registry, &[b">", p].concat(), allchannels);
            }
            None => {
                let _ = default.apply(registry, b"nopass", allchannels);
            }
        }
        users.insert(b"default".to_vec(), Arc::new(default));
        self.publish(&users);
    }

    /// ACL SETUSER: applies the rules to a copy of the user (or a new one), all or
    /// nothing. Returns the previous user, if any, and the new one; on error, the rule
    /// that failed and why.
    pub fn set_user(
        &self,
        registry: &Registry,
        name: &[u8],
        rules: &[Vec<u8>],
    ) -> Result<Replaced, (Vec<u8>, RuleError)> {
        let allchannels = self.allchannels_default();
        let mut users = self.users.write();
        let old = users.get(name).cloned();
        let mut user = old
            .as_deref()
            .cloned()
            .unwrap_or_else(|| User::new(name, allchannels));
        for rule in rules {
            user.apply(registry, rule, allchannels)
                .map_err(|e| (rule.clone(), e))?;
        }
        let user = Arc::new(user);
        users.insert(name.to_vec(), user.clone());
        self.publish(&users);
        Ok((old, user))
    }

    /// ACL DELUSER: removes the users that exist, returning their names.
    pub fn delete_users(&self, names: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut users = self.users.write();
        let mut deleted = Vec::new();
        for &name in names {
            if users.remove(name).is_some() {
                deleted.push(name.to_vec());
            }
        }
        if !deleted.is_empty() {
            self.publish(&users);
        }
        deleted
    }

    /// ACL LOAD: replaces every user. Returns the names of the users replaced (every
    /// one but `default`, whose connections stay).
    pub fn replace_all(&self, new: BTreeMap<Vec<u8>, User>) -> Vec<Vec<u8>> {
        let mut users = self.users.write();
        let replaced = users
            .keys()
            .filter(|n| n.as_slice() != b"default")
            .cloned()
            .collect();
        *users = new.into_iter().map(|(n, u)| (n, Arc::new(u))).collect();
        self.publish(&users);
        replaced
    }

    /// Adds an entry to the ACL log.
    pub fn log(&self, entry: Entry) {
        let max = self.log_max_len.load(Ordering::Relaxed);
        self.log.lock().add(entry, max);
    }

    /// Runs `f` on the ACL log.
    pub fn with_log<R>(&self, f: impl FnOnce(&mut AclLog) -> R) -> R {
        f(&mut self.log.lock())
    }
}

/// A connection's user: its name, and the user as last read from the table.
#[derive(Clone, Debug)]
pub struct Session {
    name: Vec<u8>,
    cached: Option<(u64, Arc<User>)>,
}

impl Default for Session {
    fn default() -> Session {
        Session {
            name: b"default".to_vec(),
            cached: None,
        }
    }
}

impl Session {
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// Switches to another user (after a successful AUTH).
    pub fn set(&mut self, acl: &Acl, user: Arc<User>) {
        self.name = user.name.clone();
        self.cached = Some((acl.generation(), user));
    }

    /// Back to the `default` user (RESET).
    pub fn reset(&mut self) {
        *self = Session::default();
    }

    /// The user as it is now, or `None` if it was deleted.
    pub fn current(&mut self, acl: &Acl) -> Option<&User> {
        let generation = acl.generation();
        if self.cached.as_ref().is_none_or(|(g, _)| *g != generation) {
            self.cached = acl.user(&self.name).map(|u| (generation, u));
        }
        self.cached.as_ref().map(|(_, u)| &**u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirepass_maps_to_the_default_user() {
        let registry = crate::registry();
        let acl = Acl::new(&registry);
        assert!(!acl.auth_required());
        assert!(acl.authenticate(b"default", b"anything").is_some());
        acl.set_default_password(&registry, Some(b"secret"));
        assert!(acl.auth_required());
        assert!(acl.authenticate(b"default", b"anything").is_none());
        assert!(acl.authenticate(b"default", b"secret").is_some());
        acl.set_default_password(&registry, None);
        assert!(!acl.auth_required());
    }

    #[test]
    fn sessions_follow_changes() {
        let registry = crate::registry();
        let acl = Acl::new(&registry);
        let rules: Vec<Vec<u8>> = [&b"on"[..], b">pw", b"+get"]
            .iter()
            .map(|r| r.to_vec())
            .collect();
        acl.set_user(&registry, b"alice", &rules)
            .expect("valid rules");
        let mut s = Session::default();
        let alice = acl.authenticate(b"alice", b"pw").expect("credentials");
        s.set(&acl, alice);
        assert!(s.current(&acl).is_some_and(|u| u.enabled));
        acl.set_user(&registry, b"alice", &[b"off".to_vec()])
            .expect("valid rule");
        assert!(s.current(&acl).is_some_and(|u| !u.enabled));
        assert!(acl.authenticate(b"alice", b"pw").is_none());
        assert_eq!(acl.delete_users(&[b"alice", b"bob"]), [b"alice".to_vec()]);
        assert!(s.current(&acl).is_none());
        let bad = acl.set_user(&registry, b"bob", &[b"on".to_vec(), b"+nosuch".to_vec()]);
        assert_eq!(
            bad.err(),
            Some((b"+nosuch".to_vec(), RuleError::UnknownCommand))
        );
        assert!(acl.user(b"bob").is_none());
    }
}
