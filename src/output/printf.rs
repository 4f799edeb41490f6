//! The text of a `printf` event: its format (checked and parsed by the checker) applied
//! to the event's typed fields, as C's printf would print them.

use super::value::format_value;
use super::{Value, event_value};
use crate::check::program::{
    ConvSpec, EventSchema, ExprKind, FieldKind, Piece, Scalar, Ty, UserLine,
};
use crate::stacks::StackTable;

/// The formatted text of a record of `schema` (which has a format), exactly as printed:
/// no newline is added.
pub fn render(schema: &EventSchema, record: &[u8], stacks: Option<&StackTable>) -> Vec<u8> {
    let mut out = Vec::new();
    let Some(format) = &schema.format else {
        return out;
    };
    for piece in &format.pieces {
        match piece {
            Piece::Text(t) => out.extend_from_slice(t),
            Piece::Conv { spec, field } => {
                let f = &schema.fields[*field];
                let v = event_value(record, f, stacks);
                convert(&mut out, spec, &v, f.kind);
            }
        }
    }
    out
}

/// The text of an `on begin` / `on end` line: its format applied to its constants.
pub fn render_line(line: &UserLine) -> Vec<u8> {
    let mut out = Vec::new();
    let int = FieldKind::Int(Scalar {
        size: 8,
        signed: true,
    });
    for piece in &line.pieces {
        match piece {
            Piece::Text(t) => out.extend_from_slice(t),
            Piece::Conv { spec, field } => {
                let e = &line.values[*field];
                let v = match (&e.kind, &e.ty) {
                    (ExprKind::Int(n), Ty::Duration) => Value::Duration(*n as u64),
                    (ExprKind::Int(n), _) if *n < 0 => Value::Signed(*n as i64),
                    (ExprKind::Int(n), _) => Value::Unsigned(*n as u64),
                    (ExprKind::Str(s), _) => Value::Str(std::borrow::Cow::Borrowed(s)),
                    (ExprKind::Bool(b), _) => Value::Bool(*b),
                    _ => Value::Unsigned(0),
                };
                convert(&mut out, spec, &v, int);
            }
        }
    }
    out
}

/// One conversion of one value.
pub fn convert(out: &mut Vec<u8>, spec: &ConvSpec, v: &Value, kind: FieldKind) {
    match spec.conv {
        b's' => {
            let text: Vec<u8> = match v {
                Value::Str(s) => s.to_vec(),
                v => format_value(v).into_bytes(),
            };
            let cut = spec
                .precision
                .map_or(text.len(), |p| text.len().min(p as usize));
            pad(out, spec, &[], &text[..cut], false);
        }
        b'c' => {
            let c = integer(v) as u8;
            pad(out, spec, &[], &[c], false);
        }
        b'p' => {
            let digits = format!("{:x}", integer(v) as u64);
            pad(out, spec, b"0x", digits.as_bytes(), true);
        }
        conv => {
            let n = integer(v);
            let bits = match kind {
                FieldKind::Int(s) => u32::from(s.size) * 8,
                _ => 64,
            };
            // A negative value under an unsigned conversion shows its bits, as in C.
            let unsigned = if n < 0 && bits < 64 {
                (n as u64) & ((1u64 << bits) - 1)
            } else {
                n as u64
            };
            let (sign, digits): (&[u8], String) = match conv {
                b'd' | b'i' if n < 0 => (b"-", n.unsigned_abs().to_string()),
                b'd' | b'i' if spec.plus => (b"+", n.to_string()),
                b'd' | b'i' if spec.space => (b" ", n.to_string()),
                b'd' | b'i' => (b"", n.to_string()),
                b'x' => (b"", format!("{unsigned:x}")),
                b'X' => (b"", format!("{unsigned:X}")),
                b'o' => (b"", format!("{unsigned:o}")),
                _ => (b"", unsigned.to_string()),
            };
            let prefix: &[u8] = match conv {
                b'x' if spec.alt && unsigned != 0 => b"0x",
                b'X' if spec.alt && unsigned != 0 => b"0X",
                _ => b"",
            };
            let mut digits = digits.into_bytes();
            if let Some(p) = spec.precision {
                // C's precision for integers: at least this many digits; `%.0d` of 0 is empty.
                if p == 0 && n == 0 {
                    digits.clear();
                }
                while digits.len() < p as usize {
                    digits.insert(0, b'0');
                }
            }
            if conv == b'o' && spec.alt && digits.first() != Some(&b'0') {
                digits.insert(0, b'0');
            }
            let mut lead = sign.to_vec();
            lead.extend_from_slice(prefix);
            pad(out, spec, &lead, &digits, spec.precision.is_none());
        }
    }
}

/// The value as C would pass it to an integer conversion.
fn integer(v: &Value) -> i128 {
    match v {
        Value::Unsigned(n) | Value::Duration(n) | Value::Ptr(n) | Value::Formatted(n, _) => {
            i128::from(*n)
        }
        Value::Signed(n) => i128::from(*n),
        Value::Bool(b) => i128::from(*b),
        Value::Str(_) | Value::Unread | Value::Stack(_) => 0,
    }
}

/// `lead` (a sign, `0x`) and `body` padded to the width: spaces on the left, on the right
/// with `-`, or zeros between `lead` and `body` with `0` where `zeros_allowed`.
fn pad(out: &mut Vec<u8>, spec: &ConvSpec, lead: &[u8], body: &[u8], zeros_allowed: bool) {
    let len = lead.len() + body.len();
    let fill = spec.width.map_or(0, |w| (w as usize).saturating_sub(len));
    if spec.left {
        out.extend_from_slice(lead);
        out.extend_from_slice(body);
        out.resize(out.len() + fill, b' ');
    } else if spec.zero && zeros_allowed && spec.conv != b's' && spec.conv != b'c' {
        out.extend_from_slice(lead);
        out.resize(out.len() + fill, b'0');
        out.extend_from_slice(body);
    } else {
        out.resize(out.len() + fill, b' ');
        out.extend_from_slice(lead);
        out.extend_from_slice(body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn spec(text: &str) -> ConvSpec {
        use crate::check::printf_format;
        match printf_format(text.as_bytes()).as_deref() {
            Some([crate::check::program::Piece::Conv { spec, .. }]) => *spec,
            other => panic!("{text}: {other:?}"),
        }
    }

    fn show(text: &str, v: Value, kind: FieldKind) -> String {
        let mut out = Vec::new();
        convert(&mut out, &spec(text), &v, kind);
        String::from_utf8(out).unwrap()
    }

    const S32: FieldKind = FieldKind::Int(Scalar {
        size: 4,
        signed: true,
    });
    const U64: FieldKind = FieldKind::Int(Scalar {
        size: 8,
        signed: false,
    });

    #[test]
    fn integers_print_as_c_prints_them() {
        let cases = [
            ("%d", Value::Signed(-42), S32, "-42"),
            ("%6d", Value::Signed(-42), S32, "   -42"),
            ("%-6d|", Value::Signed(42), S32, "42    |"),
            ("%06d", Value::Signed(-42), S32, "-00042"),
            ("%+d", Value::Signed(7), S32, "+7"),
            ("% d", Value::Signed(7), S32, " 7"),
            ("%.4d", Value::Signed(7), S32, "0007"),
            ("%u", Value::Signed(-1), S32, "4294967295"),
            ("%x", Value::Unsigned(255), U64, "ff"),
            ("%X", Value::Unsigned(255), U64, "FF"),
            ("%#x", Value::Unsigned(255), U64, "0xff"),
            ("%08x", Value::Unsigned(0xbeef), U64, "0000beef"),
            ("%o", Value::Unsigned(8), U64, "10"),
            ("%#o", Value::Unsigned(8), U64, "010"),
            (
                "%llu",
                Value::Unsigned(u64::MAX),
                U64,
                "18446744073709551615",
            ),
            (
                "%ld",
                Value::Unsigned(u64::MAX),
                U64,
                "18446744073709551615",
            ),
            ("%c", Value::Unsigned(65), U64, "A"),
            (
                "%p",
                Value::Ptr(0xffff_8880_1234_0000),
                FieldKind::Ptr,
                "0xffff888012340000",
            ),
            ("%d", Value::Bool(true), FieldKind::Bool, "1"),
        ];
        for (f, v, k, want) in cases {
            let f = f.trim_end_matches('|');
            let got = show(f, v, k);
            let want = want.trim_end_matches('|');
            assert_eq!(got, want, "{f}");
        }
    }

    #[test]
    fn strings_pad_to_the_width_and_cut_at_the_precision() {
        let s = || Value::Str(Cow::Borrowed(b"python3"));
        let k = FieldKind::Str { cap: 16 };
        assert_eq!(show("%s", s(), k), "python3");
        assert_eq!(show("%10s", s(), k), "   python3");
        assert_eq!(show("%-10s", s(), k), "python3   ");
        // Wider than the width: printed whole, as C does.
        assert_eq!(show("%3s", s(), k), "python3");
        assert_eq!(show("%.3s", s(), k), "pyt");
        assert_eq!(show("%-5.3s", s(), k), "pyt  ");
        assert_eq!(
            show("%s", Value::Duration(1_500_000), FieldKind::Duration),
            "1500us"
        );
    }
}
