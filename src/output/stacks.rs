//! Stacks as text and JSON (docs/language.md, "Stacks").

use crate::stacks::{SourceLine, Stack};
use serde_json::{Value as Json, json};
use std::io::{self, Write};

/// Root first, `;` between frames, symbol names only: one flame graph line. A frame with
/// no symbol is its file and offset (`[libc.so.6]+0x2724a`) when the file is known, else
/// its address; a lost stack is `[lost]`.
pub fn write_stack(out: &mut impl Write, s: &Stack) -> io::Result<()> {
    if s.lost {
        return out.write_all(b"[lost]");
    }
    if s.frames.is_empty() {
        return out.write_all(b"[empty]");
    }
    for (i, f) in s.frames.iter().enumerate() {
        if i > 0 {
            out.write_all(b";")?;
        }
        match (&f.symbol, &f.module, f.file_offset) {
            (Some(name), _, _) => out.write_all(name.as_bytes())?,
            (None, Some(path), Some(off)) => {
                let file = path.rsplit('/').next().unwrap_or(path);
                write!(out, "[{file}]+0x{off:x}")?
            }
            _ => write!(out, "0x{:x}", f.addr)?,
        }
    }
    Ok(())
}

/// `write_stack` as a string (metric labels).
pub fn stack_text(s: &Stack) -> String {
    let mut out = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = write_stack(&mut out, s);
    String::from_utf8_lossy(&out).into_owned()
}

/// An array of frames, root first, each `{"address": "0x…", "symbol": …, "module": …}`
/// (`null` where unknown); a lost stack is `null`. A user frame whose file has DWARF adds
/// `"source"` and `"line"`, and `"inlined"`: the functions inlined at its address,
/// outermost first, each `{"symbol", "source", "line"}`.
pub fn stack_json(s: &Stack) -> Json {
    if s.lost {
        return Json::Null;
    }
    Json::Array(
        s.frames
            .iter()
            .map(|f| {
                let mut frame = json!({
                    "address": format!("0x{:x}", f.addr),
                    "symbol": f.symbol,
                    "module": f.module,
                });
                add_source(&mut frame, f.source.as_ref());
                if !f.inlined.is_empty() {
                    frame["inlined"] = f
                        .inlined
                        .iter()
                        .map(|i| {
                            let mut inlined = json!({ "symbol": i.symbol });
                            add_source(&mut inlined, i.source.as_ref());
                            inlined
                        })
                        .collect();
                }
                frame
            })
            .collect(),
    )
}

fn add_source(frame: &mut Json, source: Option<&SourceLine>) {
    if let Some(s) = source {
        frame["source"] = json!(s.file);
        frame["line"] = json!(s.line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::program::StackKind;
    use crate::stacks::{Frame, Inlined};

    fn stack() -> Stack {
        let f = |addr, symbol: Option<&str>, module: Option<&str>| Frame {
            addr,
            symbol: symbol.map(String::from),
            module: module.map(String::from),
            ..Frame::default()
        };
        Stack {
            kind: StackKind::User,
            frames: vec![
                f(0x401020, Some("_start"), Some("/usr/bin/app")),
                f(0x401234, Some("main"), Some("/usr/bin/app")),
                Frame {
                    file_offset: Some(0x2724a),
                    ..f(0x7f000002724a, None, Some("/usr/lib/libc.so.6"))
                },
                f(0x7f0000001000, None, None),
                Frame {
                    source: Some(SourceLine {
                        file: "/src/app.c".into(),
                        line: Some(12),
                    }),
                    inlined: vec![Inlined {
                        symbol: "pull".into(),
                        source: Some(SourceLine {
                            file: "/src/app.c".into(),
                            line: Some(5),
                        }),
                    }],
                    ..f(0x401300, Some("c_fn"), Some("/usr/bin/app"))
                },
            ],
            lost: false,
        }
    }

    #[test]
    fn text_is_root_first_joined_by_semicolons_with_addresses_for_unknown_frames() {
        let mut out = Vec::new();
        write_stack(&mut out, &stack()).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "_start;main;[libc.so.6]+0x2724a;0x7f0000001000;c_fn"
        );
    }

    #[test]
    fn json_is_an_array_of_frames_root_first_with_source_lines_where_known() {
        assert_eq!(
            stack_json(&stack()),
            json!([
                {"address": "0x401020", "symbol": "_start", "module": "/usr/bin/app"},
                {"address": "0x401234", "symbol": "main", "module": "/usr/bin/app"},
                {"address": "0x7f000002724a", "symbol": null, "module": "/usr/lib/libc.so.6"},
                {"address": "0x7f0000001000", "symbol": null, "module": null},
                {"address": "0x401300", "symbol": "c_fn", "module": "/usr/bin/app",
                 "source": "/src/app.c", "line": 12,
                 "inlined": [{"symbol": "pull", "source": "/src/app.c", "line": 5}]},
            ])
        );
    }

    #[test]
    fn a_lost_stack_says_so() {
        let lost = Stack {
            kind: StackKind::Kernel,
            frames: Vec::new(),
            lost: true,
        };
        let mut out = Vec::new();
        write_stack(&mut out, &lost).unwrap();
        assert_eq!(out, b"[lost]");
        assert_eq!(stack_json(&lost), Json::Null);
    }
}
