//! Redis's glob-style pattern matching (`KEYS`, `SCAN MATCH`, `CONFIG GET`, Pub/Sub).
//!
//! `*` any sequence, `?` any byte, `[abc]`, `[^abc]`, `[a-z]` (ends may be reversed),
//! `\x` a literal `x`. The semantics, including the odd corners of unterminated
//! brackets, follow Redis's `stringmatchlen` so that a pattern selects exactly the keys
//! it selects in Redis. Backtracking on `*` is bounded: once the rest of a pattern
//! fails against every suffix, longer matches are not retried, and nesting is limited.

/// Whether `string` matches `pattern`. As in Redis, nothing matches an empty string.
pub fn matches(pattern: &[u8], string: &[u8]) -> bool {
    let mut skip_longer = false;
    match_impl(pattern, string, false, &mut skip_longer, 0)
}

/// Whether `string` matches `pattern`, ignoring ASCII case.
pub fn matches_nocase(pattern: &[u8], string: &[u8]) -> bool {
    let mut skip_longer = false;
    match_impl(pattern, string, true, &mut skip_longer, 0)
}

const MAX_NESTING: usize = 1000;

fn match_impl(pat: &[u8], s: &[u8], nocase: bool, skip_longer: &mut bool, nesting: usize) -> bool {
    if nesting > MAX_NESTING {
        return false;
    }
    // `p` and `i` index into `pat` and `s`; bytes past the end of the pattern read as
    // 0, as the C version reads the terminator.
    let at = |k: usize| pat.get(k).copied().unwrap_or(0);
    let lower = |c: u8| if nocase { c.to_ascii_lowercase() } else { c };
    let (mut p, mut i) = (0usize, 0usize);
    while p < pat.len() && i < s.len() {
        match pat[p] {
            b'*' => {
                while p + 1 < pat.len() && pat[p + 1] == b'*' {
                    p += 1;
                }
                if p + 1 == pat.len() {
                    return true;
                }
                while i < s.len() {
                    if match_impl(&pat[p + 1..], &s[i..], nocase, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    i += 1;
                }
                *skip_longer = true;
                return false;
            }
            b'?' => i += 1,
            b'[' => {
                p += 1;
                let not = at(p) == b'^';
                if not {
                    p += 1;
                }
                let mut matched = false;
                let c = s[i];
                loop {
                    let remaining = pat.len().saturating_sub(p);
                    if at(p) == b'\\' && remaining >= 2 {
                        p += 1;
                        if at(p) == c {
                            matched = true;
                        }
                    } else if at(p) == b']' {
                        break;
                    } else if remaining == 0 {
                        // An unterminated class ends with the pattern.
                        p -= 1;
                        break;
                    } else if remaining >= 3 && at(p + 1) == b'-' {
                        let (mut start, mut end) = (lower(at(p)), lower(at(p + 2)));
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        let c = lower(c);
                        if c >= start && c <= end {
                            matched = true;
                        }
                        p += 2;
                    } else if lower(at(p)) == lower(c) {
                        matched = true;
                    }
                    p += 1;
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                i += 1;
            }
            _ => {
                if pat[p] == b'\\' && pat.len() - p >= 2 {
                    p += 1;
                }
                if lower(pat[p]) != lower(s[i]) {
                    return false;
                }
                i += 1;
            }
        }
        p += 1;
        if i == s.len() {
            while p < pat.len() && pat[p] == b'*' {
                p += 1;
            }
            break;
        }
    }
    p >= pat.len() && i == s.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        matches(p.as_bytes(), s.as_bytes())
    }

    #[test]
    fn basics() {
        // As in Redis, a pattern never matches the empty string; KEYS and SCAN treat a
        // lone "*" as "everything" before matching.
        assert!(!m("*", ""));
        assert!(!m("**", ""));
        assert!(m("*", "abc"));
        assert!(m("a*", "abc"));
        assert!(!m("a*", "bac"));
        assert!(m("h?llo", "hello"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("h*llo", "hllo"));
        assert!(m("h*llo", "heeeello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-b]llo", "hbllo"));
        assert!(m("h[b-a]llo", "hallo"));
        assert!(!m("h[a-b]llo", "hcllo"));
        assert!(m("h\\*llo", "h*llo"));
        assert!(!m("h\\*llo", "hello"));
        assert!(m("a**b", "ab"));
        assert!(m("[\\]]", "]"));
        assert!(!m("", "a"));
        assert!(m("", ""));
        assert!(!m("abc", "ab"));
        assert!(m("ab*", "ab"));
        assert!(m("ab**", "ab"));
    }

    #[test]
    fn odd_corners() {
        // Unterminated classes: the class ends with the pattern.
        assert!(m("[abc", "a"));
        assert!(!m("[abc", "d"));
        assert!(!m("a[", "a"));
        // A trailing backslash is a literal backslash.
        assert!(m("a\\", "a\\"));
        assert!(matches_nocase(b"HeLLo*", b"hello world"));
        assert!(matches_nocase(b"[A-C]x", b"bX"));
    }

    #[test]
    fn pathological_patterns_are_fast() {
        let s = "a".repeat(50_000);
        let p = "*a".repeat(1000) + "b";
        let t = std::time::Instant::now();
        assert!(!m(&p, &s));
        assert!(t.elapsed().as_secs() < 5);
    }
}
