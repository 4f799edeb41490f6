//! `--flamegraph FILE.svg`: the stack counts of a run drawn by inferno (the port of
//! flamegraph.pl) as interactive SVGs, from the lines `-f folded` prints.

use super::folded::{lines, stack_count_aggregations, unit};
use super::interval::IntervalStamp;
use super::{AggResult, Summary, Writer};
use crate::check::program::{EventSchema, Program};
use crate::stacks::StackTable;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// One stack count's lines over the run.
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    pub session: String,
    /// The aggregation's name (unique in the program).
    pub name: String,
    /// The aggregation as the script wrote it (`count() by kstack`).
    pub title: String,
    /// What a count counts: `calls`, a profile's `samples`, or `us` of a sum of time.
    pub unit: &'static str,
    pub counts: BTreeMap<String, u64>,
}

/// The stack counts of a program, summed over what the run printed (with `-i`, its
/// intervals, which add up to the run).
#[derive(Debug, Clone, PartialEq)]
pub struct Flames {
    pub graphs: Vec<Graph>,
}

impl Flames {
    pub fn new(program: &Program) -> Self {
        let graphs = stack_count_aggregations(program)
            .map(|(s, a)| Graph {
                session: s.label.clone(),
                name: a.name.clone(),
                title: a.title.clone(),
                unit: unit(s, a),
                counts: BTreeMap::new(),
            })
            .collect();
        Flames { graphs }
    }

    pub fn add(&mut self, a: &AggResult) {
        let Some(g) = self
            .graphs
            .iter_mut()
            .find(|g| g.session == a.session && g.name == a.name)
        else {
            return;
        };
        for (line, n) in lines(a) {
            *g.counts.entry(line).or_insert(0) += n;
        }
    }

    /// Where each graph goes: `path` itself for one, else `path` with the aggregation's
    /// name before the extension (`flame.svg` → `flame.count_kstack.svg`).
    pub fn files(&self, path: &Path) -> Vec<PathBuf> {
        if self.graphs.len() == 1 {
            return vec![path.to_path_buf()];
        }
        let stem = path.file_stem().map_or_else(
            || "flamegraph".to_string(),
            |s| s.to_string_lossy().into_owned(),
        );
        let ext = path
            .extension()
            .map_or_else(|| "svg".to_string(), |e| e.to_string_lossy().into_owned());
        self.graphs
            .iter()
            .map(|g| path.with_file_name(format!("{stem}.{}.{ext}", g.name)))
            .collect()
    }
}

/// Draws `g`'s counts as an SVG into `out`, titled `title` over `subtitle`. Frames are
/// ordered by name, as flamegraph.pl does, so a run draws the same picture from the same
/// counts. Kernel frames marked `_[k]` (a graph of user and kernel stacks) are drawn in
/// orange, the others in flamegraph.pl's warm colours, and shown without the mark.
pub fn svg(g: &Graph, title: &str, subtitle: &str, out: impl Write) -> io::Result<()> {
    use inferno::flamegraph::color::{MultiPalette, Palette};
    let counts = &g.counts;
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.subtitle = Some(subtitle.to_string());
    opts.count_name = g.unit.to_string();
    if counts
        .keys()
        .any(|l| l.contains(super::folded::KERNEL_MARK))
    {
        // Perl's palette: `_[k]` orange, the rest red and yellow, as the default's.
        opts.colors = Palette::Multi(MultiPalette::Perl);
    }
    opts.deterministic = true;
    let text: Vec<String> = counts.iter().map(|(l, n)| format!("{l} {n}")).collect();
    inferno::flamegraph::from_lines(&mut opts, text.iter().map(String::as_str), out)
        .map_err(io::Error::other)
}

/// A writer that hands everything to `inner` and keeps the stack counts for `flames`.
pub struct WithFlames<'a> {
    pub inner: &'a mut dyn Writer,
    pub flames: &'a mut Flames,
}

impl Writer for WithFlames<'_> {
    fn event(&mut self, schema: &EventSchema, record: &[u8]) -> io::Result<()> {
        self.inner.event(schema, record)
    }

    fn user_line(&mut self, text: &[u8]) -> io::Result<()> {
        self.inner.user_line(text)
    }

    fn summary(&mut self, s: &Summary) -> io::Result<()> {
        self.inner.summary(s)
    }

    fn aggregation(&mut self, a: &AggResult) -> io::Result<()> {
        self.flames.add(a);
        self.inner.aggregation(a)
    }

    fn interval(&mut self, stamp: &IntervalStamp) -> io::Result<()> {
        self.inner.interval(stamp)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }

    fn set_stacks(&mut self, stacks: Rc<StackTable>) {
        self.inner.set_stacks(stacks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(lines: &[(&str, u64)]) -> BTreeMap<String, u64> {
        lines.iter().map(|&(l, n)| (l.to_string(), n)).collect()
    }

    #[test]
    fn the_svg_holds_every_frame_with_its_count_and_the_titles() {
        let c = counts(&[
            ("main;outer_reader_fn;inner_reader_fn;read", 5),
            ("main;outer_reader_fn;write", 2),
            ("main;other_fn", 3),
        ]);
        let mut out = Vec::new();
        svg(
            &graph(c, "calls"),
            "vfs_read: count() by ustack",
            "run of 2026-12-02",
            &mut out,
        )
        .unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(svg.starts_with("<?xml"), "{}", &svg[..100.min(svg.len())]);
        // inferno titles each frame `NAME (N calls, P%)`; counts sum up the tree.
        for (frame, n, pct) in [
            ("all", 10, "100%"),
            ("main", 10, "100.00%"),
            ("outer_reader_fn", 7, "70.00%"),
            ("inner_reader_fn", 5, "50.00%"),
            ("read", 5, "50.00%"),
            ("write", 2, "20.00%"),
            ("other_fn", 3, "30.00%"),
        ] {
            let want = format!("<title>{frame} ({n} calls, {pct})</title>");
            assert!(svg.contains(&want), "no {want} in the SVG");
        }
        assert!(svg.contains("vfs_read: count() by ustack"));
        assert!(svg.contains("run of 2026-12-02"));
        // Interactive: the script that zooms and searches is in the file.
        assert!(svg.contains("<script"));
    }

    fn graph(counts: BTreeMap<String, u64>, unit: &'static str) -> Graph {
        Graph {
            session: "profile".into(),
            name: "profile_count".into(),
            title: String::new(),
            unit,
            counts,
        }
    }

    #[test]
    fn a_profile_of_user_and_kernel_frames_counts_samples_and_marks_the_kernel() {
        let c = counts(&[
            ("main;hot;asm_sysvec_apic_timer_interrupt_[k]", 3),
            ("main;warm", 1),
        ]);
        let mut out = Vec::new();
        svg(&graph(c, "samples"), "profile", "run", &mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        // The mark is not shown; the kernel frame is orange (Perl's palette), the user
        // frames red to yellow (green and blue low).
        let kernel = "<title>asm_sysvec_apic_timer_interrupt (3 samples, 75.00%)</title>";
        let at = svg.find(kernel).expect("the kernel frame, unmarked");
        let fill = &svg[at..][..svg[at..].find("/>").unwrap()];
        let rgb: Vec<u32> = fill
            .split("rgb(")
            .nth(1)
            .unwrap()
            .split(')')
            .next()
            .unwrap()
            .split(',')
            .map(|n| n.trim().parse().unwrap())
            .collect();
        assert!(rgb[0] > 180 && rgb[1] > 100 && rgb[2] < 80, "{fill}");
        assert!(svg.contains("<title>hot (3 samples, 75.00%)</title>"));
        assert!(svg.contains("<title>warm (1 samples, 25.00%)</title>"));
    }

    #[test]
    fn several_graphs_get_one_file_each_named_by_aggregation() {
        let g = |name: &str| Graph {
            session: "vfs_read".into(),
            name: name.into(),
            title: String::new(),
            unit: "calls",
            counts: BTreeMap::new(),
        };
        let one = Flames {
            graphs: vec![g("count_kstack")],
        };
        assert_eq!(
            one.files(Path::new("/tmp/f.svg")),
            [PathBuf::from("/tmp/f.svg")]
        );
        let two = Flames {
            graphs: vec![g("count_kstack"), g("count_ustack")],
        };
        assert_eq!(
            two.files(Path::new("/tmp/f.svg")),
            [
                PathBuf::from("/tmp/f.count_kstack.svg"),
                PathBuf::from("/tmp/f.count_ustack.svg")
            ]
        );
    }
}
