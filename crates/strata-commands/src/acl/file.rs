//! The ACL file (`aclfile`): reading it for start-up and ACL LOAD, writing it for ACL
//! SAVE.
//!
//! The file holds one `user <name> <rules...>` line per user, the ACL LIST format.
//! Reading is all or nothing: every line is checked and every error collected, and the
//! users replace the current ones only if there was none (the messages are Redis's).
//! A file without a `default` user gets a fresh one. Writing goes to a temporary file
//! in the same directory that is then renamed over the old one, so a crash leaves the
//! old file or the new one, never a mix.

use std::collections::BTreeMap;
use std::path::Path;

use super::describe::user_line;
use super::user::{User, has_spaces, merge_selector_args};
use crate::table::Registry;

/// Parses the text of an ACL file (`filename` is for the messages) into users, or
/// returns the error message of ACL LOAD.
pub fn parse(
    text: &[u8],
    filename: &str,
    registry: &Registry,
    allchannels: bool,
) -> Result<BTreeMap<Vec<u8>, User>, String> {
    let mut users: BTreeMap<Vec<u8>, User> = BTreeMap::new();
    let mut errors = String::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let n = i + 1;
        let line = trim(line, b" \t\r\n");
        if line.is_empty() {
            continue;
        }
        let argv: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        if argv.first() != Some(&&b"user"[..]) || argv.len() < 2 {
            errors.push_str(&format!(
                "{filename}:{n} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = argv[1];
        if has_spaces(name) || name.is_empty() {
            errors.push_str(&format!(
                "'{filename}:{n}: username '{}' contains invalid characters. ",
                String::from_utf8_lossy(name)
            ));
            continue;
        }
        if users.contains_key(name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{}' found on line {n}. ",
                String::from_utf8_lossy(name)
            ));
            continue;
        }
        let mut user = User::new(name, allchannels);
        match merge_selector_args(&argv[2..]) {
            Ok(rules) => {
                for rule in rules {
                    let rule = trim(&rule, b"\t\r\n");
                    if let Err(e) = user.apply(registry, rule, allchannels) {
                        errors.push_str(&format!("{filename}:{n}: {e}. "));
                    }
                }
            }
            Err(_) => errors.push_str(&format!(
                "{filename}:{n}: Unmatched parenthesis in selector definition."
            )),
        }
        users.insert(name.to_vec(), user);
    }
    if !errors.is_empty() {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was \
             performed",
        );
        return Err(errors);
    }
    users
        .entry(b"default".to_vec())
        .or_insert_with(|| User::default_user(registry));
    Ok(users)
}

/// Reads and parses an ACL file.
pub fn load(
    path: &Path,
    registry: &Registry,
    allchannels: bool,
) -> Result<BTreeMap<Vec<u8>, User>, String> {
    let filename = path.display().to_string();
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "Error loading ACLs, opening file '{filename}': {}",
            crate::acl::file::strerror(&e)
        )
    })?;
    parse(&text, &filename, registry, allchannels)
}

/// The text of the ACL file for these users, one line each, in name order.
pub fn render<'a>(users: impl IntoIterator<Item = &'a User>, registry: &Registry) -> Vec<u8> {
    let mut text = Vec::new();
    for user in users {
        text.extend_from_slice(&user_line(user, registry));
        text.push(b'\n');
    }
    text
}

/// Writes the users to `path` through a temporary file renamed over it.
pub fn save<'a>(
    path: &Path,
    users: impl IntoIterator<Item = &'a User>,
    registry: &Registry,
) -> std::io::Result<()> {
    use std::io::Write;
    let text = render(users, registry);
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp-{}-{}", std::process::id(), now_ms()));
    let tmp = std::path::PathBuf::from(tmp);
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&text)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// The text of an I/O error as C's `strerror` gives it.
pub fn strerror(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.find(" (os error ") {
        Some(end) => text[..end].to_owned(),
        None => text,
    }
}

fn trim<'a>(s: &'a [u8], set: &[u8]) -> &'a [u8] {
    let start = s.iter().position(|b| !set.contains(b)).unwrap_or(s.len());
    let end = s
        .iter()
        .rposition(|b| !set.contains(b))
        .map_or(start, |e| e + 1);
    s.get(start..end).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_round_trips() {
        let registry = crate::registry();
        let text = b"user alice on #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 ~k* resetchannels &ch* -@all +get\n\nuser default on nopass ~* &* +@all\r\n";
        let users = parse(text, "users.acl", &registry, false).expect("valid file");
        assert_eq!(users.len(), 2);
        let again = render(users.values(), &registry);
        let users2 = parse(&again, "users.acl", &registry, false).expect("valid file");
        assert_eq!(users, users2);
        assert!(String::from_utf8_lossy(&again).starts_with("user alice on #30c9"));
    }

    #[test]
    fn errors_are_collected_and_nothing_loads() {
        let registry = crate::registry();
        let text = b"# comment\nuser bob on +nosuch\nuser bob on\nuser carol (+get\n";
        let err = parse(text, "f.acl", &registry, false).expect_err("invalid file");
        assert_eq!(
            err,
            "f.acl:1 should start with user keyword followed by the username. \
             f.acl:2: Unknown command or category name in ACL. \
             WARNING: Duplicate user 'bob' found on line 3. \
             f.acl:4: Unmatched parenthesis in selector definition.\
             WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
        );
    }

    #[test]
    fn a_file_without_default_gets_one() {
        let registry = crate::registry();
        let users = parse(b"user a on nopass +@all", "f", &registry, false).expect("valid");
        assert!(
            users
                .get(&b"default"[..])
                .is_some_and(|d| d.nopass && d.enabled)
        );
    }
}
