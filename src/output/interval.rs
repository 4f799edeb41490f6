//! `-i`: which interval a print covers and when it was taken, in UTC.

use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntervalStamp {
    /// 1 for the first interval.
    pub index: u64,
    /// Wall-clock time of the print, nanoseconds since the Unix epoch.
    pub unix_ns: u64,
}

impl IntervalStamp {
    pub fn now(index: u64) -> Self {
        let unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        IntervalStamp { index, unix_ns }
    }

    /// RFC 3339 in UTC with milliseconds: `2026-12-01T08:15:02.123Z`.
    pub fn time(&self) -> String {
        let secs = self.unix_ns / 1_000_000_000;
        let ms = (self.unix_ns / 1_000_000) % 1000;
        let (y, m, d) = civil_from_days((secs / 86_400) as i64);
        let s = secs % 86_400;
        format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
            s / 3600,
            s / 60 % 60,
            s % 60
        )
    }
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc() {
        let cases = [
            (0, "1970-01-01T00:00:00.000Z"),
            (951_782_400_500_000_000, "2000-02-29T00:00:00.500Z"),
            (1_796_112_902_123_456_789, "2026-12-01T08:15:02.123Z"),
        ];
        for (ns, want) in cases {
            assert_eq!(
                IntervalStamp {
                    index: 1,
                    unix_ns: ns
                }
                .time(),
                want
            );
        }
    }
}
