//! Names of aggregations (docs/language.md, "Names for aggregations"). A name is given
//! with `as NAME` or derived from the session and the action: the session's label and the
//! function, then the argument as written, each lowercased with every run of other
//! characters than `a-z0-9` turned into one `_` (`vfs_read_hist_latency`,
//! `vfs_read_2_count`). A derived name that is taken gets `_2`, `_3`, ... Every name is
//! a valid Prometheus metric-name suffix, so `fslat_NAME` is a metric name.

use super::program::Session;
use crate::syntax::ast::AggFunc;
use std::collections::HashSet;

/// The names given so far, and which aggregations still need one.
#[derive(Debug, Default)]
pub(super) struct Names {
    given: HashSet<String>,
    derived: HashSet<usize>,
}

impl Names {
    /// Records a name from `as NAME`; false if another aggregation already has it.
    pub(super) fn give(&mut self, name: &str) -> bool {
        self.given.insert(name.to_string())
    }

    /// Records that aggregation `id` takes a derived name; returns `base`, which `settle`
    /// makes unique once every given name is known.
    pub(super) fn derive(&mut self, id: usize, base: String) -> String {
        self.derived.insert(id);
        base
    }

    /// Makes derived names unique, in program order, around the given ones.
    pub(super) fn settle(self, sessions: &mut [Session]) {
        let mut taken = self.given;
        for a in sessions.iter_mut().flat_map(|s| &mut s.aggregations) {
            if !self.derived.contains(&a.id) {
                continue;
            }
            let mut name = a.name.clone();
            let mut n = 1;
            while taken.contains(&name) {
                n += 1;
                name = format!("{}_{n}", a.name);
            }
            taken.insert(name.clone());
            a.name = name;
        }
    }
}

/// `<label>_<func>[_<arg>]`, each part sanitised.
pub(super) fn derived(label: &str, func: AggFunc, arg: Option<&str>) -> String {
    // A user-space file is named by its file name: `/usr/lib/libc.so.6:malloc` as
    // `libc_so_6_malloc`.
    let label = match label.split_once(':') {
        Some((file, funcs)) => {
            let base = file.rsplit('/').next().unwrap_or(file);
            format!("{base}_{funcs}")
        }
        None => label.to_string(),
    };
    let mut name = sanitise(&label);
    if name.is_empty() {
        name.push_str("session");
    }
    name.push('_');
    name.push_str(func.name());
    if let Some(arg) = arg.map(sanitise).filter(|a| !a.is_empty()) {
        name.push('_');
        name.push_str(&arg);
    }
    name
}

/// Lowercase `[a-z0-9]` words joined by single `_`.
fn sanitise(text: &str) -> String {
    text.to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join("_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_names_are_sanitised_session_func_and_argument() {
        let cases = [
            (
                "vfs_read",
                AggFunc::named("hist").expect("hist"),
                Some("latency"),
                "vfs_read_hist_latency",
            ),
            (
                "vfs_read",
                AggFunc::named("count").expect("count"),
                None,
                "vfs_read_count",
            ),
            (
                "vfs_read#2",
                AggFunc::named("sum").expect("sum"),
                Some("ret"),
                "vfs_read_2_sum_ret",
            ),
            (
                "vfs_read,vfs_write",
                AggFunc::named("max").expect("max"),
                Some("file->f_pos + 1"),
                "vfs_read_vfs_write_max_file_f_pos_1",
            ),
            (
                "ext4_file_*",
                AggFunc::named("avg").expect("avg"),
                Some("Count"),
                "ext4_file_avg_count",
            ),
            (
                "*",
                AggFunc::named("count").expect("count"),
                None,
                "session_count",
            ),
        ];
        for (label, func, arg, want) in cases {
            assert_eq!(derived(label, func, arg), want, "{label} {func:?} {arg:?}");
        }
    }
}
