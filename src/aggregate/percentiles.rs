//! `percentiles(x)`: count, p50, p90, p99, p99.9 and max, from a log-linear histogram per
//! key and a per-CPU map of each key's count, sum and exact max (fslat_pct.bpf.h).

use super::pct::Pct;
use super::values::{CStruct, PCT_HIST, PCT_MAX, PctHist, PctMax};
use super::{AggValue, Aggregate, CValue, Help, MetricKind, PointValue, Spec, Start, State};

pub struct Percentiles;

impl Aggregate for Percentiles {
    fn name(&self) -> &'static str {
        "percentiles"
    }

    fn help(&self) -> Help {
        Help {
            call: "percentiles(EXPR)",
            about: "count, p50, p90, p99, p99.9 and max (by KEY too)",
            example: Some("session vfs_fsync { percentiles(latency) }"),
        }
    }

    fn c_value(&self, _: &Spec) -> CValue {
        CValue {
            ty: "struct fslat_pct".into(),
            start: Start::Global("fslat_pct_zero".into()),
        }
    }

    fn c_add(&self, _: &Spec, value: &str, x: &str) -> String {
        format!("fslat_pct_add({value}, {x});")
    }

    /// This CPU's count, sum and max of the key, in the per-CPU map. A lost update is
    /// counted once, by whichever map missed first.
    fn c_after(&self, a: &Spec, key: &str, value: &str, x: &str) -> Vec<String> {
        let map = a.max_map.as_deref().expect("percentiles has a max map");
        vec![
            format!("struct fslat_pct_max *fslat_max = bpf_map_lookup_elem(&{map}, {key});"),
            "if (!fslat_max) {".into(),
            "\tstruct fslat_pct_max fslat_zero = {};".into(),
            format!("\tbpf_map_update_elem(&{map}, {key}, &fslat_zero, BPF_NOEXIST);"),
            format!("\tfslat_max = bpf_map_lookup_elem(&{map}, {key});"),
            "}".into(),
            "if (fslat_max)".into(),
            format!("\tfslat_pct_max_add(fslat_max, {x}, fslat_pct_tag());"),
            format!("else if ({value})"),
            format!("\t{}", a.count_lost),
        ]
    }

    fn c_structs(&self) -> &'static [CStruct] {
        &[PCT_HIST, PCT_MAX]
    }

    fn header(&self) -> Option<&'static str> {
        Some("fslat_pct.bpf.h")
    }

    fn per_cpu_max(&self) -> bool {
        true
    }

    /// The shared histogram, and the CPUs' counts, sums and maxima.
    fn decode(&self, _: &Spec, value: &[u8], cpus: &[Vec<u8>], tag: u64) -> State {
        let mut pct = Pct::empty();
        let (negative, slots) = PctHist::read(value);
        pct.negative = negative;
        for (slot, n) in pct.slots.iter_mut().zip(slots) {
            *slot = n;
        }
        let mut interval_max: Option<i64> = None;
        for m in cpus.iter().map(|v| PctMax::read(v)) {
            if m.count > 0 {
                pct.sum = pct.sum.wrapping_add(m.sum);
                pct.max = Some(pct.max.map_or(m.max, |x| x.max(m.max)));
            }
            if m.gen_ == tag {
                interval_max = Some(interval_max.map_or(m.gen_max, |x| x.max(m.gen_max)));
            }
        }
        State::Pct { pct, interval_max }
    }

    fn show(&self, s: &State) -> AggValue {
        match s {
            State::Pct { pct, .. } => AggValue::Percentiles(pct.clone()),
            _ => AggValue::Percentiles(Pct::empty()),
        }
    }

    fn json_type(&self) -> &'static str {
        "percentiles"
    }

    fn metric(&self) -> MetricKind {
        MetricKind::Histogram
    }

    fn point(&self, s: &State) -> PointValue {
        let pct = match s {
            State::Pct { pct, .. } => pct.clone(),
            _ => Pct::empty(),
        };
        PointValue::Pct {
            slots: pct.slots,
            negative: pct.negative,
            sum: pct.sum,
        }
    }
}
