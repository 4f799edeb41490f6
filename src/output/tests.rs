use super::*;
use crate::btf::Fixture;
use crate::check::counters;
use crate::check::resources::Mode;

fn program(script: &str) -> Program {
    crate::compile(script, &Fixture::new(), Mode::Fsession)
        .expect("compiles")
        .0
}

/// A record as the kernel would write it for the default `emit` of vfs_read.
fn slow_read_record(p: &Program) -> Vec<u8> {
    let schema = p.sessions[0].events.first().expect("emits");
    let mut r = vec![0u8; schema.size as usize];
    for f in &schema.fields {
        let at = f.offset as usize;
        match f.name.as_str() {
            "comm" => r[at..at + 7].copy_from_slice(b"python3"),
            "tgid" | "pid" => r[at..at + 4].copy_from_slice(&1257u32.to_ne_bytes()),
            "count" => r[at..at + 8].copy_from_slice(&1u64.to_ne_bytes()),
            "ret" => r[at..at + 8].copy_from_slice(&(-9i64).to_ne_bytes()),
            "latency" => r[at..at + 8].copy_from_slice(&50_160_123u64.to_ne_bytes()),
            _ => {}
        }
    }
    r
}

#[test]
fn text_event_line_is_stable() {
    let p = program("session vfs_read");
    let rec = slow_read_record(&p);
    let decoder = Decoder::new(&p);
    let mut out = Vec::new();
    let mut w = TextWriter::new(&mut out);
    let schema = decoder.decode(&rec).expect("decodes");
    w.event(schema, &rec).expect("writes");
    w.flush().expect("flushes");
    assert_eq!(
        String::from_utf8(out).expect("utf-8"),
        "EVENT vfs_read comm=python3 tgid=1257 pid=1257 count=1 ret=-9 latency=50160us\n"
    );
}

#[test]
fn json_event_has_ns_durations_and_escaped_strings() {
    let p = program("session vfs_read");
    let mut rec = slow_read_record(&p);
    let comm = p.sessions[0].events.first().expect("emits").fields[0].offset as usize;
    rec[comm..comm + 4].copy_from_slice(b"a\"\n\x01");
    let decoder = Decoder::new(&p);
    let mut out = Vec::new();
    let mut w = JsonWriter::new(&mut out);
    w.event(decoder.decode(&rec).expect("decodes"), &rec)
        .expect("writes");
    let line = String::from_utf8(out).expect("utf-8");
    let v: serde_json::Value = serde_json::from_str(&line).expect("one JSON object");
    assert_eq!(v["type"], "event");
    assert_eq!(v["session"], "vfs_read");
    assert_eq!(v["fields"]["latency_ns"], 50_160_123);
    assert_eq!(v["fields"]["ret"], -9);
    assert_eq!(v["fields"]["comm"], "a\"\n\u{1}on3");
}

#[test]
fn a_string_the_program_could_not_read_is_unread_not_empty() {
    let p = program("session vfs_read { emit comm }");
    let schema = p.sessions[0].events.first().expect("emits");
    let at = schema.fields[0].offset as usize;
    let decoder = Decoder::new(&p);
    let line = |rec: &[u8], json: bool| {
        let mut out = Vec::new();
        let schema = decoder.decode(rec).expect("decodes");
        if json {
            JsonWriter::new(&mut out)
                .event(schema, rec)
                .expect("writes");
        } else {
            TextWriter::new(&mut out)
                .event(schema, rec)
                .expect("writes");
        }
        String::from_utf8(out).expect("utf-8")
    };
    // bpf-runtime/fslat_str.bpf.h: a failed read is "" then 0xff; an empty string, "" then 0.
    let mut rec = vec![0u8; schema.size as usize];
    rec[at + 1] = 0xff;
    assert_eq!(line(&rec, false), "EVENT vfs_read comm=<unread>\n");
    let v: serde_json::Value = serde_json::from_str(&line(&rec, true)).expect("JSON");
    assert_eq!(v["fields"]["comm"], serde_json::Value::Null);
    rec[at + 1] = 0;
    assert_eq!(line(&rec, false), "EVENT vfs_read comm=\"\"\n");
    let mut out = Vec::new();
    value::write_value(&mut out, &Value::Str((&b"<unread>"[..]).into())).expect("writes");
    assert_eq!(out, b"\"<unread>\"");
}

#[test]
fn text_strings_are_quoted_when_they_need_it() {
    let cases: &[(&[u8], &str)] = &[
        (b"python3", "python3"),
        (b"", "\"\""),
        (b"two words", "\"two words\""),
        (b"a\"b\\c\n\t\x01", "\"a\\\"b\\\\c\\n\\t\\x01\""),
        (b"caf\xc3\xa9", "\"caf\u{e9}\""),
        (b"bad\xff", "\"bad\\xff\""),
    ];
    for (bytes, want) in cases {
        let mut out = Vec::new();
        value::write_value(&mut out, &Value::Str((*bytes).into())).expect("writes");
        assert_eq!(String::from_utf8(out).expect("utf-8"), *want, "{bytes:?}");
    }
}

#[test]
fn a_record_of_the_wrong_size_is_refused() {
    let p = program("session vfs_read");
    let mut rec = slow_read_record(&p);
    rec.push(0);
    assert!(matches!(
        Decoder::new(&p).decode(&rec),
        Err(DecodeError::Size { .. })
    ));
    assert!(matches!(
        Decoder::new(&p).decode(&[1, 0]),
        Err(DecodeError::Short(2))
    ));
}

#[test]
fn durations_under_a_microsecond_print_in_nanoseconds() {
    let cases = [
        (850, "850ns"),
        (0, "0ns"),
        (999, "999ns"),
        (1000, "1us"),
        (50_160_123, "50160us"),
    ];
    for (ns, want) in cases {
        assert_eq!(value::format_value(&Value::Duration(ns)), want);
    }
}

fn hist_result(duration: bool, rows: Vec<(&str, Vec<(usize, u64)>)>) -> AggResult {
    AggResult {
        unset: None,
        session: "vfs_read".into(),
        name: "vfs_read_hist_latency".into(),
        title: "hist(latency) by comm".into(),
        func: crate::aggregate::AggFunc::named("hist").expect("hist"),
        duration,
        linear: None,
        key_names: vec!["comm".into()],
        rows: rows
            .into_iter()
            .map(|(comm, used)| {
                let mut slots = vec![0u64; 66];
                for (i, n) in used {
                    slots[i] = n;
                }
                AggRow {
                    keys: vec![Value::Str(comm.as_bytes().to_vec().into())],
                    value: AggValue::Hist(slots),
                }
            })
            .collect(),
        interval: None,
        missed: 0,
    }
}

#[test]
fn hist_labels_are_exact_and_counts_align_across_keys() {
    let a = hist_result(
        true,
        vec![
            ("sh", vec![(1, 3), (6, 5)]),
            ("python3", vec![(11, 123456789), (12, 1)]),
        ],
    );
    let mut out = Vec::new();
    TextWriter::new(&mut out).aggregation(&a).expect("writes");
    let text = String::from_utf8(out).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "vfs_read_hist_latency: vfs_read hist(latency) by comm"
    );
    assert_eq!(lines[1], "  comm=sh");
    assert_eq!(
        lines[2],
        format!("    [0, 1us)                 3 |{:<52}|", "@".repeat(32))
    );
    assert!(lines.contains(
        &"    [1us, 2us)               0 |                                                    |"
    ));
    assert!(
        text.contains("\n    [16us, 32us)             5 |@"),
        "{text}"
    );
    assert!(
        text.contains("\n    [512us, 1024us)  123456789 |@"),
        "{text}"
    );
    // Every bar starts in the same column, whatever the key.
    let bars: Vec<usize> = lines.iter().filter_map(|l| l.find('|')).collect();
    assert!(
        bars.len() >= 4 && bars.iter().all(|&b| b == bars[0]),
        "{text}"
    );

    let ints = hist_result(false, vec![("sh", vec![(1, 1), (11, 2), (12, 1)])]);
    let mut out = Vec::new();
    TextWriter::new(&mut out)
        .aggregation(&ints)
        .expect("writes");
    let text = String::from_utf8(out).expect("utf-8");
    for want in [
        "    [0]               1 |",
        "    [512, 1K)         2 |",
        "    [1K, 2K)          1 |",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(want)),
            "{want:?} in\n{text}"
        );
    }
}

#[test]
fn reported_durations_have_three_significant_digits() {
    let cases = [
        (850, "850ns"),
        (1_234, "1.23us"),
        (35_449, "35.4us"),
        (1_200_000, "1.2ms"),
        (9_999_000, "10ms"),
        (10_240_000, "10.2ms"),
        (123_456_789, "123ms"),
        (2_500_000_000, "2.5s"),
    ];
    for (ns, want) in cases {
        assert_eq!(text::human_duration(ns), want, "{ns}");
    }
}

#[test]
fn percentiles_print_count_quantiles_and_max_on_one_line() {
    use crate::aggregate::buckets::pct_slot;
    let mut p = crate::aggregate::pct::Pct::empty();
    // 100 values: 20ms x50, 40ms x30, 80ms x19 and one 81.234567ms. A percentile is
    // its bucket's midpoint: 20ms is in [19.92ms, 20.45ms), 80ms and 81.2ms in
    // [79.69ms, 81.79ms).
    for (ns, n) in [
        (20_000_000u64, 50),
        (40_000_000, 30),
        (80_000_000, 19),
        (81_234_567, 1),
    ] {
        p.slots[pct_slot(ns)] += n;
    }
    p.max = Some(81_234_567);
    let a = AggResult {
        unset: None,
        session: "vfs_read".into(),
        name: "lat".into(),
        title: "percentiles(latency) by comm".into(),
        func: crate::aggregate::AggFunc::named("percentiles").expect("percentiles"),
        duration: true,
        linear: None,
        key_names: vec!["comm".into()],
        rows: vec![AggRow {
            keys: vec![Value::Str(b"bash".to_vec().into())],
            value: AggValue::Percentiles(p),
        }],
        interval: None,
        missed: 0,
    };
    let mut out = Vec::new();
    TextWriter::new(&mut out).aggregation(&a).expect("writes");
    assert_eq!(
        String::from_utf8(out).expect("utf-8"),
        "lat: vfs_read percentiles(latency) by comm\n  comm=bash count=100 p50=20.2ms p90=80.7ms p99=80.7ms p99.9=80.7ms max=81.2ms\n"
    );
    let mut out = Vec::new();
    JsonWriter::new(&mut out).aggregation(&a).expect("writes");
    let v: serde_json::Value = serde_json::from_slice(&out).expect("JSON");
    assert_eq!(v["type"], "percentiles");
    assert_eq!(v["rows"][0]["count"], 100);
    assert_eq!(v["rows"][0]["max_ns"], 81_234_567);
    assert_eq!(v["rows"][0]["p999_ns"], 80_740_352);
    assert!(v["rows"][0].get("p99.9_ns").is_none());
}

#[test]
fn lhist_rows_print_their_linear_bounds_in_text_and_json() {
    let l = crate::aggregate::Linear {
        min: 10,
        max: 40,
        step: 10,
    };
    let a = AggResult {
        unset: None,
        session: "vfs_write".into(),
        name: "sizes".into(),
        title: "lhist(count, 10, 40, 10)".into(),
        func: crate::aggregate::AggFunc::named("lhist").expect("lhist"),
        duration: false,
        linear: Some(l),
        key_names: vec![],
        rows: vec![AggRow {
            keys: vec![],
            value: AggValue::Hist(vec![1, 2, 0, 1, 3]),
        }],
        interval: None,
        missed: 0,
    };
    let mut out = Vec::new();
    TextWriter::new(&mut out).aggregation(&a).expect("writes");
    let text = String::from_utf8(out).expect("utf-8");
    let labels: Vec<&str> = text
        .lines()
        .skip(1)
        .map(|l| l.split("  ").find(|w| !w.is_empty()).unwrap_or(""))
        .collect();
    assert_eq!(
        labels,
        ["(..., 10)", "[10, 20)", "[20, 30)", "[30, 40)", "[40, ...)"],
        "{text}"
    );
    let mut out = Vec::new();
    JsonWriter::new(&mut out).aggregation(&a).expect("writes");
    let json: serde_json::Value = serde_json::from_slice(&out).expect("json");
    assert_eq!(json["type"], "hist");
    assert_eq!(json["function"], "lhist");
    assert_eq!(
        json["rows"][0]["buckets"],
        serde_json::json!([
            {"min": null, "max": 9, "count": 1},
            {"min": 10, "max": 19, "count": 2},
            {"min": 30, "max": 39, "count": 1},
            {"min": 40, "max": null, "count": 3},
        ])
    );
}

#[test]
fn hex_and_oct_values_are_c_style_in_text_and_strings_in_json() {
    use crate::check::program::Radix;
    for (v, text) in [
        (Value::Formatted(0x88042, Radix::Hex), "0x88042"),
        (Value::Formatted(0, Radix::Hex), "0x0"),
        (Value::Formatted(0o644, Radix::Oct), "0644"),
        (Value::Formatted(0, Radix::Oct), "0"),
    ] {
        assert_eq!(super::value::format_value(&v), text);
        assert_eq!(super::json::json_value(&v), serde_json::json!(text));
    }
}

#[test]
fn calls_the_kernel_skipped_are_in_the_summary_only_when_there_are_some() {
    let summary = |missed| {
        let mut s = Summary {
            label: "vfs_read".into(),
            mode: "fsession",
            ..Summary::default()
        };
        s.set(&counters::CALLS, Some(10));
        s.set(&counters::MISSED, missed);
        s
    };
    for (missed, text, json) in [
        (Some(5), true, true),
        (Some(0), false, false),
        (None, false, false),
    ] {
        let mut out = Vec::new();
        TextWriter::new(&mut out).summary(&summary(missed)).unwrap();
        let line = String::from_utf8(out).unwrap();
        assert_eq!(line.contains(" missed=5\n"), text, "{line}");
        let mut out = Vec::new();
        JsonWriter::new(&mut out).summary(&summary(missed)).unwrap();
        let line = String::from_utf8(out).unwrap();
        assert_eq!(line.contains("\"missed\":5"), json, "{line}");
        assert_eq!(line.contains("missed"), json, "{line}");
    }
}

/// A session that ran at entry only cannot know `errors`: text says `errors=-` in its
/// place, JSON `null`, and the metrics, which read `Summary::get`, have no value.
#[test]
fn an_unknown_figure_is_a_dash_in_text_and_null_in_json_never_a_number() {
    let mut s = Summary {
        label: "vfs_read".into(),
        mode: "kprobe",
        ..Summary::default()
    };
    s.set(&counters::CALLS, Some(10));
    s.set(&counters::ERRORS, Some(0));
    s.set(&counters::MATCHED, Some(10));
    s.set_unknown(&counters::ERRORS);
    assert_eq!(s.get(&counters::ERRORS), None);
    let mut out = Vec::new();
    TextWriter::new(&mut out).summary(&s).unwrap();
    let line = String::from_utf8(out).unwrap();
    assert_eq!(
        line,
        "SUMMARY vfs_read mode=kprobe calls=10 matched=10 errors=-\n"
    );
    let mut out = Vec::new();
    JsonWriter::new(&mut out).summary(&s).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["errors"], serde_json::Value::Null, "{v}");
    assert!(v.as_object().unwrap().contains_key("errors"), "{v}");
    assert_eq!(v["calls"], 10, "{v}");
}

#[test]
fn an_aggregation_short_of_skipped_calls_is_marked_in_text_and_json() {
    for missed in [0, 7] {
        let a = AggResult {
            unset: None,
            missed,
            ..hist_result(false, vec![("bash", vec![(3, 2)])])
        };
        let mut out = Vec::new();
        TextWriter::new(&mut out).aggregation(&a).unwrap();
        let text = String::from_utf8(out).unwrap();
        let header = text.lines().next().unwrap();
        let marked =
            "vfs_read_hist_latency: vfs_read hist(latency) by comm (missed=7: low by up to 7)";
        match missed {
            0 => assert_eq!(
                header,
                "vfs_read_hist_latency: vfs_read hist(latency) by comm"
            ),
            _ => assert_eq!(header, marked),
        }
        let mut out = Vec::new();
        JsonWriter::new(&mut out).aggregation(&a).unwrap();
        let record: serde_json::Value = serde_json::from_slice(&out).unwrap();
        match missed {
            0 => assert!(record.get("missed").is_none(), "{record}"),
            _ => assert_eq!(record["missed"], 7),
        }
    }
}

#[test]
fn stats_rows_print_count_average_and_total() {
    let func = crate::aggregate::AggFunc::named("stats").expect("stats");
    let stat = |count, sum| crate::aggregate::values::Stat {
        count,
        sum,
        min: 0,
        max: 0,
    };
    let result = |duration, rows: Vec<(&str, u64, i64)>| AggResult {
        unset: None,
        session: "vfs_write".into(),
        name: "w".into(),
        title: "stats(x) by comm".into(),
        func,
        duration,
        linear: None,
        key_names: vec!["comm".into()],
        rows: rows
            .into_iter()
            .map(|(comm, count, sum)| AggRow {
                keys: vec![Value::Str(comm.as_bytes().to_vec().into())],
                value: func.show(&crate::aggregate::State::Stat(stat(count, sum))),
            })
            .collect(),
        interval: None,
        missed: 0,
    };
    let text = |a: &AggResult| {
        let mut out = Vec::new();
        TextWriter::new(&mut out).aggregation(a).expect("writes");
        String::from_utf8(out).expect("utf-8")
    };
    assert_eq!(
        text(&result(false, vec![("dd", 3, 60), ("cat", 0, 0)])),
        "w: vfs_write stats(x) by comm\n  comm=dd count=3 average=20 total=60\n  comm=cat count=0 average=0 total=0\n"
    );
    let a = result(true, vec![("dd", 2, 3_000_000)]);
    assert_eq!(
        text(&a),
        "w: vfs_write stats(x) by comm\n  comm=dd count=2 average=1500us total=3000us\n"
    );
    let mut out = Vec::new();
    JsonWriter::new(&mut out).aggregation(&a).expect("writes");
    let v: serde_json::Value = serde_json::from_slice(&out).expect("JSON");
    assert_eq!(v["type"], "stats");
    assert_eq!(v["function"], "stats");
    assert_eq!(
        v["rows"][0],
        serde_json::json!({"keys": {"comm": "dd"}, "count": 2, "average_ns": 1_500_000, "total_ns": 3_000_000})
    );
}

fn user_stack(names: &[&str]) -> Value<'static> {
    use crate::check::program::StackKind;
    use crate::stacks::Frame;
    Value::Stack(Arc::new(Stack {
        kind: StackKind::User,
        frames: names
            .iter()
            .enumerate()
            .map(|(i, n)| Frame {
                addr: 0x1000 + i as u64,
                symbol: Some(n.to_string()),
                ..Frame::default()
            })
            .collect(),
        lost: false,
    }))
}

fn stack_count(name: &str, rows: Vec<(Vec<Value<'static>>, i64)>) -> AggResult {
    AggResult {
        unset: None,
        session: "vfs_read".into(),
        name: name.into(),
        title: "count() by comm, ustack".into(),
        func: crate::aggregate::AggFunc::named("count").expect("count"),
        duration: false,
        linear: None,
        key_names: vec!["comm".into(), "ustack".into()],
        rows: rows
            .into_iter()
            .map(|(keys, n)| AggRow {
                keys,
                value: AggValue::Number(n),
            })
            .collect(),
        interval: None,
        missed: 0,
    }
}

#[test]
fn folded_lines_are_root_first_with_other_keys_as_frames() {
    let comm = |s: &str| Value::Str(s.as_bytes().to_vec().into());
    let a = stack_count(
        "reads",
        vec![
            (
                vec![comm("reader"), user_stack(&["main", "outer", "inner"])],
                5,
            ),
            (vec![comm("my app;x"), user_stack(&["main", "load"])], 2),
        ],
    );
    let lines: Vec<(String, u64)> = folded::lines(&a).into_iter().collect();
    assert_eq!(
        lines,
        [
            // A space or `;` inside a key would split the line.
            ("\"my_app:x\";main;load".to_string(), 2),
            ("reader;main;outer;inner".to_string(), 5),
        ]
    );
    // Not a count: nothing.
    let hist = hist_result(true, vec![("bash", vec![(3, 1)])]);
    assert!(folded::lines(&hist).is_empty());
}

#[test]
fn folded_output_is_the_lines_only_with_the_name_as_root_when_several() {
    let one = program("session vfs_read { count() by ustack }");
    let two = program("session vfs_read { count() by ustack; count() by kstack as kernel }");
    let a = stack_count("reads", vec![(vec![user_stack(&["main", "f"])], 3)]);
    let written = |p: &Program| {
        let mut out = Vec::new();
        let mut w = FoldedWriter::new(&mut out, p);
        w.summary(&Summary::default()).unwrap();
        w.aggregation(&a).unwrap();
        w.flush().unwrap();
        String::from_utf8(out).unwrap()
    };
    assert_eq!(written(&one), "main;f 3\n");
    assert_eq!(written(&two), "reads;main;f 3\n");
    assert_eq!(stack_counts(&two).len(), 2);
    assert!(stack_counts(&program("session vfs_read { count() by comm }")).is_empty());
}
