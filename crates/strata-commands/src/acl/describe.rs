//! Rendering users back into rules: ACL LIST, ACL SAVE and ACL GETUSER.
//!
//! The command part of a selector is stored as bits, not as the rules that set them,
//! so it is described as Redis 7.0 describes it: start from `+@all` (if commands to
//! come are allowed) or `-@all`, repeatedly apply the category that best matches the
//! remaining differences, then name single commands until the bits agree. Applying the
//! description to a fresh selector gives back exactly the same bits (tested below).
//! Single commands are named in the registry's order, where Redis uses its command
//! dictionary's order.

use super::user::{Selector, User, all_commands};
use crate::spec::Acl as Category;
use crate::table::{Command, Registry};

/// The command rules of a selector (`-@all +@read -keys`).
pub fn command_rules(selector: &Selector, registry: &Registry) -> String {
    let additive = !selector.future_commands();
    let mut rules = String::from(if additive { "-@all" } else { "+@all" });
    let mut fake = Selector::new(false, false);
    // Always valid rules.
    let _ = fake.apply(registry, rules.as_bytes());
    // The selector's bits with the categories applied so far undone.
    let mut temp = selector.clone();
    let mut applied = vec![false; Category::NAMED.len()];
    loop {
        let mut best = None;
        let (mut min_diff, mut max_same) = (usize::MAX, 0);
        for (j, (category, _)) in Category::NAMED.iter().enumerate() {
            if applied[j] {
                continue;
            }
            let (on, off) = temp.count_category(registry, *category);
            let (diff, same) = if additive { (off, on) } else { (on, off) };
            if same > diff && (diff < min_diff || (diff == min_diff && same > max_same)) {
                best = Some(j);
                min_diff = diff;
                max_same = same;
            }
        }
        let Some(j) = best else { break };
        let name = Category::NAMED[j].1;
        let (op, inverse) = if additive {
            (format!("+@{name}"), format!("-@{name}"))
        } else {
            (format!("-@{name}"), format!("+@{name}"))
        };
        let _ = fake.apply(registry, op.as_bytes());
        let _ = temp.apply(registry, inverse.as_bytes());
        rules.push(' ');
        rules.push_str(&op);
        applied[j] = true;
    }
    for cmd in all_commands(registry).filter(|c| c.parent.is_none()) {
        single_commands(selector, &mut fake, registry, cmd, &mut rules);
    }
    debug_assert_eq!(
        fake.commands, selector.commands,
        "the description must recreate the bits: {rules}"
    );
    rules
}

/// Names the commands (and first arguments) whose bits the categories left wrong.
fn single_commands(
    selector: &Selector,
    fake: &mut Selector,
    registry: &Registry,
    cmd: &'static Command,
    rules: &mut String,
) {
    let bit = selector.commands.get(cmd.id);
    if bit != fake.commands.get(cmd.id) {
        let op = format!("{}{}", if bit { '+' } else { '-' }, cmd.full_name());
        let _ = fake.apply(registry, op.as_bytes());
        rules.push(' ');
        rules.push_str(&op);
    }
    for sub in cmd.subcommands {
        single_commands(selector, fake, registry, sub, rules);
    }
    if !bit && let Some(args) = selector.firstargs.get(&cmd.id) {
        for arg in args {
            rules.push_str(&format!(
                " +{}|{}",
                cmd.full_name(),
                String::from_utf8_lossy(arg)
            ));
        }
    }
}

/// A selector's rules as ACL LIST shows them: keys, channels, commands.
pub fn selector_rules(selector: &Selector, registry: &Registry) -> Vec<u8> {
    let mut out = Vec::new();
    if selector.allkeys {
        out.extend_from_slice(b"~* ");
    } else {
        for k in &selector.keys {
            out.extend_from_slice(&k.rule());
            out.push(b' ');
        }
    }
    if selector.allchannels {
        out.extend_from_slice(b"&* ");
    } else {
        out.extend_from_slice(b"resetchannels ");
        for c in &selector.channels {
            out.push(b'&');
            out.extend_from_slice(c);
            out.push(b' ');
        }
    }
    out.extend_from_slice(command_rules(selector, registry).as_bytes());
    out
}

/// The user's flags in Redis's order of presentation.
pub fn flags(user: &User) -> Vec<&'static str> {
    let mut flags = vec![if user.enabled { "on" } else { "off" }];
    if user.nopass {
        flags.push("nopass");
    }
    match user.sanitize {
        super::user::Sanitize::Skip => flags.push("skip-sanitize-payload"),
        super::user::Sanitize::Sanitize => flags.push("sanitize-payload"),
        super::user::Sanitize::Unset => {}
    }
    flags
}

/// A user's whole description, as after `user <name> ` in ACL LIST and the ACL file.
pub fn user_rules(user: &User, registry: &Registry) -> Vec<u8> {
    let mut out = Vec::new();
    for f in flags(user) {
        out.extend_from_slice(f.as_bytes());
        out.push(b' ');
    }
    for p in &user.passwords {
        out.push(b'#');
        out.extend_from_slice(p.as_bytes());
        out.push(b' ');
    }
    for selector in &user.selectors {
        if selector.root {
            out.extend_from_slice(&selector_rules(selector, registry));
        } else {
            out.extend_from_slice(b" (");
            out.extend_from_slice(&selector_rules(selector, registry));
            out.push(b')');
        }
    }
    out
}

/// `user <name> <rules>`: one line of ACL LIST and of the ACL file.
pub fn user_line(user: &User, registry: &Registry) -> Vec<u8> {
    let mut line = b"user ".to_vec();
    line.extend_from_slice(&user.name);
    line.push(b' ');
    line.extend_from_slice(&user_rules(user, registry));
    line
}

/// A selector's key patterns as ACL GETUSER shows them (`~a %R~b`).
pub fn keys_text(selector: &Selector) -> Vec<u8> {
    if selector.allkeys {
        return b"~*".to_vec();
    }
    let rules: Vec<Vec<u8>> = selector.keys.iter().map(|k| k.rule()).collect();
    rules.join(&b' ')
}

/// A selector's channel patterns as ACL GETUSER shows them (`&a &b`).
pub fn channels_text(selector: &Selector) -> Vec<u8> {
    if selector.allchannels {
        return b"&*".to_vec();
    }
    let rules: Vec<Vec<u8>> = selector
        .channels
        .iter()
        .map(|c| [b"&".as_slice(), c].concat())
        .collect();
    rules.join(&b' ')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn described(rules: &[&str]) -> String {
        let registry = crate::registry();
        let mut u = User::new(b"u", false);
        for r in rules {
            u.apply(&registry, r.as_bytes(), false).expect("valid rule");
        }
        String::from_utf8(user_line(&u, &registry)).expect("utf-8")
    }

    #[test]
    fn simple_users_read_as_in_redis() {
        assert_eq!(described(&[]), "user u off resetchannels -@all");
        assert_eq!(
            described(&["on", "nopass", "~*", "&*", "+@all"]),
            "user u on nopass ~* &* +@all"
        );
        assert_eq!(
            described(&["on", ">pw", "~k*", "%R~r*", "&ch*", "+@all", "-get"]),
            "user u on #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 \
             ~k* %R~r* resetchannels &ch* +@all -get"
        );
        assert_eq!(
            described(&["~*", "+@all", "-@hash", "+hget", "(+get ~x*)"]),
            "user u off ~* resetchannels +@all -@hash +hget (~x* resetchannels -@all +get)"
        );
        assert_eq!(
            described(&["+select|0", "+select|1"]),
            "user u off resetchannels -@all +select|0 +select|1"
        );
    }

    /// Whatever the bits, the description recreates them.
    #[test]
    fn descriptions_recreate_the_bits() {
        let registry = crate::registry();
        let cases: &[&[&str]] = &[
            &["+@read", "-@dangerous", "+set"],
            &["+@all", "-@write", "+config|get", "-client|kill"],
            &["+@hash", "+@set", "-hset", "+@slow"],
            &["+config", "-config|set", "+@pubsub", "-@fast"],
            &["+@admin", "+@connection", "-@slow"],
        ];
        for rules in cases {
            let mut u = User::new(b"u", false);
            for r in *rules {
                u.apply(&registry, r.as_bytes(), false).expect("valid rule");
            }
            let text = command_rules(u.root(), &registry);
            let mut again = User::new(b"u", false);
            for r in text.split(' ') {
                again
                    .apply(&registry, r.as_bytes(), false)
                    .expect("valid rule");
            }
            assert_eq!(
                again.root().commands,
                u.root().commands,
                "{rules:?} -> {text}"
            );
        }
    }
}
