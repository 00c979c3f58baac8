//! x87 80-bit `long double` arithmetic for INCRBYFLOAT and HINCRBYFLOAT.
//!
//! Redis computes these increments in C's `long double` (64-bit mantissa on x86-64)
//! and stores the result printed with `%.17Lf`, trailing zeros removed. An `f64`
//! gives different digits (10.5 + 0.1 prints "10.6" in Redis but "10.59999999999999964"
//! in double precision), so the arithmetic is done in software with the x87 format:
//! parsing with correct rounding and addition come from `rustc_apfloat`, and the exact
//! decimal expansion for printing is done here with a small big-integer routine.

use rustc_apfloat::ieee::X87DoubleExtended;
use rustc_apfloat::{Float, Round, Status};

/// An x87 extended-precision number.
#[derive(Clone, Copy, Debug)]
pub struct LongDouble(X87DoubleExtended);

impl std::ops::Add for LongDouble {
    type Output = LongDouble;

    /// The sum, rounded to nearest as the FPU does.
    fn add(self, other: LongDouble) -> LongDouble {
        LongDouble(self.0.add_r(other.0, Round::NearestTiesToEven).value)
    }
}

impl LongDouble {
    /// Parses as Redis's `string2ld`: the whole argument, no leading space, not NaN,
    /// and not a decimal that overflows or underflows to zero.
    pub fn parse(bytes: &[u8]) -> Option<LongDouble> {
        let s = std::str::from_utf8(bytes).ok()?;
        if s.is_empty() || s.starts_with(|c: char| c.is_ascii_whitespace()) || s.len() >= 5 * 1024 {
            return None;
        }
        let lower = s.to_ascii_lowercase();
        let (neg, body) = match lower.as_bytes()[0] {
            b'-' => (true, &lower[1..]),
            b'+' => (false, &lower[1..]),
            _ => (false, &lower[..]),
        };
        if body == "inf" || body == "infinity" {
            let inf = X87DoubleExtended::INFINITY;
            return Some(LongDouble(if neg { -inf } else { inf }));
        }
        if !full_syntax(body.as_bytes()) {
            return None;
        }
        // The parser wants a binary exponent on hexadecimal floats; strtold does not.
        let text = if body.starts_with("0x") && !body.contains('p') {
            format!("{body}p0")
        } else {
            body.to_string()
        };
        let parsed = X87DoubleExtended::from_str_r(&text, Round::NearestTiesToEven).ok()?;
        let v = parsed.value;
        if v.is_nan() || (parsed.status.contains(Status::OVERFLOW) && v.is_infinite()) {
            return None;
        }
        if parsed.status.contains(Status::UNDERFLOW) && v.is_zero() {
            return None;
        }
        Some(LongDouble(if neg { -v } else { v }))
    }

    pub fn from_i64(n: i64) -> LongDouble {
        let neg = n < 0;
        let v = X87DoubleExtended::from_u128_r(n.unsigned_abs() as u128, Round::NearestTiesToEven)
            .value;
        LongDouble(if neg { -v } else { v })
    }

    pub fn is_finite(self) -> bool {
        self.0.is_finite()
    }

    /// `%.17Lf` with trailing zeros (and a trailing point) removed, and "-0" printed as
    /// "0": Redis's human-friendly long double format.
    pub fn to_human(self) -> String {
        let mut s = format_fixed17(self.0);
        if s.contains('.') {
            while s.ends_with('0') {
                s.pop();
            }
            if s.ends_with('.') {
                s.pop();
            }
        }
        if s == "-0" {
            s = "0".to_string();
        }
        s
    }
}

/// Whether all of `s` (sign already removed, lower case) is a number `strtold` reads
/// to the end: decimal digits with an optional point and exponent, or a hexadecimal
/// float with an optional binary exponent.
fn full_syntax(s: &[u8]) -> bool {
    let (hex, s) = match s.strip_prefix(b"0x") {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let is_digit = |c: u8| {
        if hex {
            c.is_ascii_hexdigit()
        } else {
            c.is_ascii_digit()
        }
    };
    let mut i = 0;
    let mut digits = 0;
    while i < s.len() && is_digit(s[i]) {
        i += 1;
        digits += 1;
    }
    if i < s.len() && s[i] == b'.' {
        i += 1;
        while i < s.len() && is_digit(s[i]) {
            i += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return false;
    }
    let exp_char = if hex { b'p' } else { b'e' };
    if i < s.len() && s[i] == exp_char {
        i += 1;
        if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
            i += 1;
        }
        let start = i;
        while i < s.len() && s[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    i == s.len()
}

/// Exact `%.17Lf` of a finite x87 value (round half to even, as glibc does).
fn format_fixed17(v: X87DoubleExtended) -> String {
    if v.is_infinite() {
        return if v.is_negative() {
            "-inf".into()
        } else {
            "inf".into()
        };
    }
    let bits = v.to_bits();
    let negative = (bits >> 79) & 1 == 1;
    let exp = ((bits >> 64) & 0x7fff) as i64;
    let mantissa = bits as u64;
    // value = mantissa * 2^shift
    let shift = if exp == 0 {
        1 - 16383 - 63
    } else {
        exp - 16383 - 63
    };
    const DIGITS: u32 = 17;
    let (int_part, frac_digits) = if shift >= 0 {
        (Big::from_u64(mantissa).shl(shift as u32), Big::zero())
    } else {
        let s = (-shift) as u32;
        let int_part = Big::from_u64(mantissa).shr(s);
        // frac = mantissa mod 2^s; digits = round(frac * 10^17 / 2^s)
        let frac = Big::from_u64(mantissa).low_bits(s);
        let scaled = frac.mul_small(10u64.pow(DIGITS));
        let mut q = scaled.shr(s);
        let r = scaled.low_bits(s);
        let half = if s == 0 {
            Big::zero()
        } else {
            Big::from_u64(1).shl(s - 1)
        };
        let round_up = match r.cmp(&half) {
            std::cmp::Ordering::Greater => s > 0,
            std::cmp::Ordering::Less => false,
            std::cmp::Ordering::Equal => s > 0 && q.is_odd(),
        };
        let mut int_part = int_part;
        if round_up {
            q = q.add_small(1);
            if q.cmp(&Big::from_u64(10u64.pow(DIGITS))) != std::cmp::Ordering::Less {
                q = Big::zero();
                int_part = int_part.add_small(1);
            }
        }
        (int_part, q)
    };
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    out.push_str(&int_part.to_decimal());
    out.push('.');
    let frac = frac_digits.to_decimal();
    for _ in frac.len()..DIGITS as usize {
        out.push('0');
    }
    out.push_str(&frac);
    out
}

/// A non-negative big integer, little-endian 32-bit limbs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn zero() -> Big {
        Big(Vec::new())
    }

    fn from_u64(n: u64) -> Big {
        Big(vec![n as u32, (n >> 32) as u32]).trimmed()
    }

    fn trimmed(mut self) -> Big {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
        self
    }

    fn shl(&self, bits: u32) -> Big {
        let (words, rem) = ((bits / 32) as usize, bits % 32);
        let mut out = vec![0u32; words];
        let mut carry = 0u32;
        for &w in &self.0 {
            if rem == 0 {
                out.push(w);
            } else {
                out.push((w << rem) | carry);
                carry = w >> (32 - rem);
            }
        }
        if carry != 0 {
            out.push(carry);
        }
        Big(out).trimmed()
    }

    fn shr(&self, bits: u32) -> Big {
        let (words, rem) = ((bits / 32) as usize, bits % 32);
        if words >= self.0.len() {
            return Big::zero();
        }
        let src = &self.0[words..];
        let mut out = Vec::with_capacity(src.len());
        for i in 0..src.len() {
            let lo = src[i] as u64;
            let hi = src.get(i + 1).copied().unwrap_or(0) as u64;
            out.push((((hi << 32) | lo) >> rem) as u32);
        }
        Big(out).trimmed()
    }

    /// The value modulo 2^bits.
    fn low_bits(&self, bits: u32) -> Big {
        let (words, rem) = ((bits / 32) as usize, bits % 32);
        let mut out: Vec<u32> = self.0.iter().take(words + 1).copied().collect();
        if out.len() > words {
            out[words] &= if rem == 0 { 0 } else { (1u32 << rem) - 1 };
        }
        Big(out).trimmed()
    }

    fn mul_small(&self, m: u64) -> Big {
        let mut out = Vec::with_capacity(self.0.len() + 3);
        let mut carry: u128 = 0;
        for &w in &self.0 {
            let v = w as u128 * m as u128 + carry;
            out.push(v as u32);
            carry = v >> 32;
        }
        while carry > 0 {
            out.push(carry as u32);
            carry >>= 32;
        }
        Big(out).trimmed()
    }

    fn add_small(&self, a: u32) -> Big {
        let mut out = self.0.clone();
        let mut carry = a as u64;
        for w in out.iter_mut() {
            let v = *w as u64 + carry;
            *w = v as u32;
            carry = v >> 32;
            if carry == 0 {
                break;
            }
        }
        if carry > 0 {
            out.push(carry as u32);
        }
        Big(out).trimmed()
    }

    fn is_odd(&self) -> bool {
        self.0.first().is_some_and(|w| w & 1 == 1)
    }

    fn cmp(&self, other: &Big) -> std::cmp::Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }

    /// Decimal digits ("0" for zero).
    fn to_decimal(&self) -> String {
        if self.0.is_empty() {
            return "0".into();
        }
        let mut limbs = self.0.clone();
        let mut chunks: Vec<u32> = Vec::new();
        const BASE: u64 = 1_000_000_000;
        while !limbs.is_empty() {
            let mut rem: u64 = 0;
            for w in limbs.iter_mut().rev() {
                let cur = (rem << 32) | *w as u64;
                *w = (cur / BASE) as u32;
                rem = cur % BASE;
            }
            chunks.push(rem as u32);
            while limbs.last() == Some(&0) {
                limbs.pop();
            }
        }
        let mut s = chunks.last().map(|c| c.to_string()).unwrap_or_default();
        for c in chunks.iter().rev().skip(1) {
            s.push_str(&format!("{c:09}"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incr(a: &str, b: &str) -> String {
        (LongDouble::parse(a.as_bytes()).unwrap() + LongDouble::parse(b.as_bytes()).unwrap())
            .to_human()
    }

    #[test]
    fn matches_redis_examples() {
        // Values checked against Redis 7.0 INCRBYFLOAT.
        assert_eq!(incr("10.50", "0.1"), "10.6");
        assert_eq!(incr("5.0e3", "2.0e2"), "5200");
        assert_eq!(incr("0", "1.1"), "1.1");
        assert_eq!(incr("1", "-1"), "0");
        assert_eq!(incr("-0.5", "0.5"), "0");
        assert_eq!(incr("3", "0.1"), "3.1");
        assert_eq!(incr("0", "0.000000000000000001"), "0");
        assert_eq!(incr("0", "1e20"), "100000000000000000000");
        assert_eq!(LongDouble::from_i64(-42).to_human(), "-42");
    }

    #[test]
    fn parse_rules() {
        for bad in [
            "", " 1", "1 ", "abc", "nan", "-nan", "1e", "1e99999", "--1", "1.2.3",
        ] {
            assert!(
                LongDouble::parse(bad.as_bytes()).is_none(),
                "{bad:?} should not parse"
            );
        }
        for good in ["1", "-1.5", "+2", ".5", "5.", "1e3", "inf", "-inf", "0x10"] {
            assert!(
                LongDouble::parse(good.as_bytes()).is_some(),
                "{good:?} should parse"
            );
        }
        assert!(!LongDouble::parse(b"inf").unwrap().is_finite());
    }

    #[test]
    fn big_integer_helpers() {
        let b = Big::from_u64(u64::MAX).shl(70);
        assert_eq!(b.shr(70), Big::from_u64(u64::MAX));
        assert_eq!(Big::from_u64(1234567890123).to_decimal(), "1234567890123");
        assert_eq!(Big::from_u64(0b1011).low_bits(2), Big::from_u64(0b11));
    }
}

#[cfg(test)]
mod redis_examples {
    use super::LongDouble;

    fn incr(a: &str, b: &str) -> String {
        (LongDouble::parse(a.as_bytes()).unwrap() + LongDouble::parse(b.as_bytes()).unwrap())
            .to_human()
    }

    #[test]
    fn more_values_checked_against_redis() {
        let big = "10000000000000000000089973240795591938705239442732907479382600823212656465961809357558491520837504971903503725086142748359035925561846729839130962605207486462873271356418436532940842551076";
        assert!(incr("0", "1e300").starts_with(big));
        assert_eq!(incr("1.5", "1e-20"), "1.5");
        assert_eq!(incr("-3", "0.0000001"), "-2.9999999");
        assert_eq!(incr("123456789012345678", "0.5"), "123456789012345678.5");
        assert_eq!(incr("0", "0x1p-3"), "0.125");
        assert_eq!(incr("7", "-7.000000000000000001"), "0");
        assert_eq!(incr("0", "3.0e-4950"), "0");
    }
}
