//! One decoded value as text, shared by the text writer, `printf` and the folded stacks:
//! a leaf of `output`, so the formats that read it do not read each other.

use super::Value;
use std::fmt::Write as _;
use std::io::{self, Write};

/// How text shows a string that could not be read.
pub const UNREAD: &str = "<unread>";

/// A value as text. Durations are whole microseconds (`50160us`), or nanoseconds below
/// one microsecond (`850ns`); strings are bare when
/// they are made of letters, digits and `._-/:@+,`, quoted with C escapes otherwise.
pub fn format_value(v: &Value) -> String {
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = write_value(&mut out, v);
    String::from_utf8_lossy(&out).into_owned()
}

/// `format_value` straight into a writer: the event path allocates nothing.
pub fn write_value(out: &mut impl Write, v: &Value) -> io::Result<()> {
    match v {
        Value::Unsigned(n) => write_u64(out, *n),
        Value::Signed(n) if *n < 0 => {
            out.write_all(b"-")?;
            write_u64(out, n.unsigned_abs())
        }
        Value::Signed(n) => write_u64(out, *n as u64),
        Value::Bool(true) => out.write_all(b"true"),
        Value::Bool(false) => out.write_all(b"false"),
        // Whole microseconds, truncated; below 1us nanoseconds, so nothing reads `0us`.
        Value::Duration(ns) if *ns < 1000 => {
            write_u64(out, *ns)?;
            out.write_all(b"ns")
        }
        Value::Duration(ns) => {
            write_u64(out, ns / 1000)?;
            out.write_all(b"us")
        }
        Value::Ptr(p) => write!(out, "0x{p:x}"),
        Value::Formatted(n, radix) => out.write_all(radix.format(*n).as_bytes()),
        Value::Str(s) => write_string(out, s),
        // Never a string's text: that would be quoted (`"<unread>"`).
        Value::Unread => out.write_all(UNREAD.as_bytes()),
        Value::Stack(s) => super::stacks::write_stack(out, s),
    }
}

fn write_u64(out: &mut impl Write, mut n: u64) -> io::Result<()> {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.write_all(&buf[i..])
}

fn write_string(out: &mut impl Write, s: &[u8]) -> io::Result<()> {
    let bare = !s.is_empty()
        && s.iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"._-/:@+,".contains(&b));
    if bare {
        return out.write_all(s);
    }
    let mut text = String::from("\"");
    match std::str::from_utf8(s) {
        Ok(utf8) => {
            for c in utf8.chars() {
                push_escaped(&mut text, c, false);
            }
        }
        // Not UTF-8: every byte outside printable ASCII is escaped.
        Err(_) => {
            for &b in s {
                push_escaped(&mut text, b as char, true);
            }
        }
    }
    text.push('"');
    out.write_all(text.as_bytes())
}

fn push_escaped(out: &mut String, c: char, raw_bytes: bool) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x20 || c as u32 == 0x7f || (raw_bytes && c as u32 >= 0x80) => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => out.push(c),
    }
}
