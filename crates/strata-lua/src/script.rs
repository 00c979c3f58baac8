//! What a script or a library says about itself before it runs: its SHA1 name, the
//! `#!lua` shebang of an EVAL script (its flags), the `#!lua name=...` header of a
//! FUNCTION library, and the names a function or library may have.
//!
//! Everything here is plain text processing with Redis 7.0's error texts.

/// Script flags, as `#!lua flags=...` and `redis.register_function{flags=...}` give
/// them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ScriptFlags(pub u8);

impl ScriptFlags {
    pub const NO_WRITES: ScriptFlags = ScriptFlags(1);
    pub const ALLOW_OOM: ScriptFlags = ScriptFlags(1 << 1);
    pub const ALLOW_STALE: ScriptFlags = ScriptFlags(1 << 2);
    pub const NO_CLUSTER: ScriptFlags = ScriptFlags(1 << 3);
    pub const ALLOW_CROSS_SLOT_KEYS: ScriptFlags = ScriptFlags(1 << 4);

    /// Every flag with its name, in the order FUNCTION LIST shows them.
    pub const NAMED: &'static [(ScriptFlags, &'static str)] = &[
        (ScriptFlags::NO_WRITES, "no-writes"),
        (ScriptFlags::ALLOW_OOM, "allow-oom"),
        (ScriptFlags::ALLOW_STALE, "allow-stale"),
        (ScriptFlags::NO_CLUSTER, "no-cluster"),
        (ScriptFlags::ALLOW_CROSS_SLOT_KEYS, "allow-cross-slot-keys"),
    ];

    pub fn contains(self, other: ScriptFlags) -> bool {
        self.0 & other.0 == other.0
    }

    pub fn insert(&mut self, other: ScriptFlags) {
        self.0 |= other.0;
    }

    /// The flag called `name` (exact case, as a shebang needs).
    pub fn from_name(name: &[u8]) -> Option<ScriptFlags> {
        Self::NAMED
            .iter()
            .find(|(_, n)| n.as_bytes() == name)
            .map(|(f, _)| *f)
    }

    /// The flag called `name`, in any case (as `register_function` accepts them).
    pub fn from_name_nocase(name: &[u8]) -> Option<ScriptFlags> {
        Self::NAMED
            .iter()
            .find(|(_, n)| n.as_bytes().eq_ignore_ascii_case(name))
            .map(|(f, _)| *f)
    }

    /// The names of the flags set, in order.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Self::NAMED
            .iter()
            .filter(move |(f, _)| self.contains(*f))
            .map(|(_, n)| *n)
    }
}

/// The lower-case hexadecimal SHA1 of `bytes` (EVAL's script names, `redis.sha1hex`).
pub fn sha1hex(bytes: &[u8]) -> String {
    sha1_smol::Sha1::from(bytes).digest().to_string()
}

/// An EVAL script's body, split from its shebang.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalScript {
    /// `None` for a script without a shebang (Redis's compatibility mode: no flag
    /// checks at all); otherwise the flags it declares.
    pub flags: Option<ScriptFlags>,
    /// Where the code after the shebang line starts (its newline included, so that
    /// line numbers stay those of the whole body).
    pub code_start: usize,
}

/// Reads an EVAL script's `#!lua flags=a,b` line, as Redis's `luaCreateFunction`
/// does. The error is the reply text without its `ERR ` code.
pub fn parse_shebang(body: &[u8]) -> Result<EvalScript, String> {
    if !body.starts_with(b"#!") {
        return Ok(EvalScript {
            flags: None,
            code_start: 0,
        });
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err("Invalid script shebang".to_string());
    };
    let line = &body[..end];
    let mut parts = line.split(|&b| b == b' ');
    let Some(engine) = parts.next() else {
        return Err("Invalid engine in script shebang".to_string());
    };
    if engine != b"#!lua" {
        return Err(format!(
            "Unexpected engine in script shebang: {}",
            String::from_utf8_lossy(engine)
        ));
    }
    let mut flags = ScriptFlags::default();
    for part in parts {
        let Some(list) = part.strip_prefix(b"flags=") else {
            return Err(format!(
                "Unknown lua shebang option: {}",
                String::from_utf8_lossy(part)
            ));
        };
        if list.is_empty() {
            continue;
        }
        for name in list.split(|&b| b == b',') {
            match ScriptFlags::from_name(name) {
                Some(f) => flags.insert(f),
                None => {
                    return Err(format!(
                        "Unexpected flag in script shebang: {}",
                        String::from_utf8_lossy(name)
                    ));
                }
            }
        }
    }
    Ok(EvalScript {
        flags: Some(flags),
        code_start: end,
    })
}

/// A FUNCTION library's header: `#!<engine> name=<name>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibraryHeader {
    pub engine: Vec<u8>,
    pub name: Vec<u8>,
    /// Where the code after the header line starts (its newline included).
    pub code_start: usize,
}

/// Reads a library's header as Redis's `functionExtractLibMetaData` does (arguments
/// split like a command line, quotes allowed). The error is the reply text without
/// its `ERR ` code.
pub fn parse_library_header(code: &[u8]) -> Result<LibraryHeader, String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".to_string());
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err("Invalid library metadata".to_string());
    };
    // The header is read as a C string: it stops at a NUL byte.
    let line = &code[..end];
    let line = &line[..line.iter().position(|&b| b == 0).unwrap_or(line.len())];
    let Some(parts) = split_args(line) else {
        return Err("Invalid library metadata".to_string());
    };
    let Some((engine, options)) = parts.split_first() else {
        return Err("Invalid library metadata".to_string());
    };
    let engine = engine.get(2..).unwrap_or_default().to_vec();
    let mut name: Option<Vec<u8>> = None;
    for part in options {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    "Invalid metadata value, name argument was given multiple times".to_string(),
                );
            }
            name = Some(part[5..].to_vec());
            continue;
        }
        return Err(format!(
            "Invalid metadata value given: {}",
            String::from_utf8_lossy(part)
        ));
    }
    let Some(name) = name else {
        return Err("Library name was not given".to_string());
    };
    Ok(LibraryHeader {
        engine,
        name,
        code_start: end,
    })
}

/// Whether `name` is a valid function or library name: letters, digits and
/// underscores, at least one.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The error text for an invalid function or library name.
pub const INVALID_NAME: &str = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// Splits a line into arguments as Redis's `sdssplitargs` does: spaces separate,
/// double quotes allow escapes (`\n`, `\xHH`...), single quotes allow `\'`. `None`
/// for unbalanced quotes or a closing quote not followed by a space.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= line.len() {
            return Some(args);
        }
        let mut current = Vec::new();
        let mut in_double = false;
        let mut in_single = false;
        loop {
            if in_double {
                let c = *line.get(i)?;
                if c == b'\\'
                    && line.get(i + 1) == Some(&b'x')
                    && line.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
                    && line.get(i + 3).is_some_and(u8::is_ascii_hexdigit)
                {
                    let hex = std::str::from_utf8(&line[i + 2..i + 4]).ok()?;
                    current.push(u8::from_str_radix(hex, 16).ok()?);
                    i += 3;
                } else if c == b'\\' && i + 1 < line.len() {
                    i += 1;
                    current.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if line.get(i + 1).is_some_and(|b| !b.is_ascii_whitespace()) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    current.push(c);
                }
            } else if in_single {
                let c = *line.get(i)?;
                if c == b'\\' && line.get(i + 1) == Some(&b'\'') {
                    i += 1;
                    current.push(b'\'');
                } else if c == b'\'' {
                    if line.get(i + 1).is_some_and(|b| !b.is_ascii_whitespace()) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    current.push(c);
                }
            } else {
                match line.get(i) {
                    None => break,
                    Some(c) if c.is_ascii_whitespace() => break,
                    Some(b'"') => in_double = true,
                    Some(b'\'') => in_single = true,
                    Some(&c) => current.push(c),
                }
            }
            i += 1;
        }
        args.push(current);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebangs() {
        assert_eq!(parse_shebang(b"return 1").map(|s| s.flags), Ok(None));
        let s = parse_shebang(b"#!lua flags=no-writes,allow-oom\nreturn 1").expect("valid");
        assert_eq!(
            s.flags,
            Some(ScriptFlags(
                ScriptFlags::NO_WRITES.0 | ScriptFlags::ALLOW_OOM.0
            ))
        );
        assert_eq!(s.code_start, 31);
        assert_eq!(
            parse_shebang(b"#!lua"),
            Err("Invalid script shebang".to_string())
        );
        assert_eq!(
            parse_shebang(b"#!python\n"),
            Err("Unexpected engine in script shebang: #!python".to_string())
        );
        assert_eq!(
            parse_shebang(b"#!lua foo=bar\n"),
            Err("Unknown lua shebang option: foo=bar".to_string())
        );
        assert_eq!(
            parse_shebang(b"#!lua flags=bogus\n"),
            Err("Unexpected flag in script shebang: bogus".to_string())
        );
        assert_eq!(
            parse_shebang(b"#!lua flags=\n").map(|s| s.flags),
            Ok(Some(ScriptFlags::default()))
        );
    }

    #[test]
    fn library_headers() {
        let h = parse_library_header(b"#!lua name=mylib\ncode").expect("valid");
        assert_eq!(
            (h.engine.as_slice(), h.name.as_slice()),
            (&b"lua"[..], &b"mylib"[..])
        );
        assert_eq!(h.code_start, 16);
        let h = parse_library_header(b"#!LUA NAME=\"q\"\n").expect("valid");
        assert_eq!(h.name, b"q");
        assert_eq!(
            parse_library_header(b"no"),
            Err("Missing library metadata".to_string())
        );
        assert_eq!(
            parse_library_header(b"#!lua name=x"),
            Err("Invalid library metadata".to_string())
        );
        assert_eq!(
            parse_library_header(b"#!lua\n"),
            Err("Library name was not given".to_string())
        );
        assert_eq!(
            parse_library_header(b"#!lua name=a name=b\n"),
            Err("Invalid metadata value, name argument was given multiple times".to_string())
        );
        assert_eq!(
            parse_library_header(b"#!lua foo=bar\n"),
            Err("Invalid metadata value given: foo=bar".to_string())
        );
        assert!(valid_name(b"a_B9") && !valid_name(b"") && !valid_name(b"a-b"));
    }

    #[test]
    fn sha1_of_scripts() {
        assert_eq!(sha1hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(
            sha1hex(b"return 1"),
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
    }
}
