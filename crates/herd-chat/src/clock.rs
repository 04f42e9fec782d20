//! The date and time `strftime_now` formats, and a `strftime` for the directives chat templates use.
//! The calendar and the formatting are chrono's; this module only says which directives a template
//! may use, so that any other is an error naming it rather than a date formatted by other rules
//! than Python's.

use std::time::{SystemTime, UNIX_EPOCH};

use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike};

/// A calendar date and wall-clock time (proleptic Gregorian, no time zone).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DateTime {
    pub year: i32,
    /// 1–12
    pub month: u32,
    /// 1–31
    pub day: u32,
    /// 0–23
    pub hour: u32,
    /// 0–59
    pub minute: u32,
    /// 0–60
    pub second: u32,
}

impl DateTime {
    /// The current time in UTC. (Python's `datetime.now()` is local time; herd's machines run in UTC.)
    #[must_use]
    pub fn now_utc() -> Self {
        let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Self::from_unix(i64::try_from(secs).unwrap_or(i64::MAX))
    }

    /// The UTC date and time `secs` seconds after 1970-01-01T00:00:00 (clamped to chrono's range,
    /// about ±262,000 years).
    #[must_use]
    pub fn from_unix(secs: i64) -> Self {
        let t = chrono::DateTime::from_timestamp(secs, 0).map(|t| t.naive_utc()).unwrap_or(if secs < 0 {
            NaiveDateTime::MIN
        } else {
            NaiveDateTime::MAX
        });
        Self { year: t.year(), month: t.month(), day: t.day(), hour: t.hour(), minute: t.minute(), second: t.second() }
    }

    /// The same instant as chrono's, `None` where it is no date (a 30 February, hour 24); second 60
    /// is a leap second.
    fn to_chrono(self) -> Option<NaiveDateTime> {
        let date = NaiveDate::from_ymd_opt(self.year, self.month, self.day)?;
        let time = if self.second == 60 {
            NaiveTime::from_hms_milli_opt(self.hour, self.minute, 59, 1_000)?
        } else {
            NaiveTime::from_hms_opt(self.hour, self.minute, self.second)?
        };
        Some(date.and_time(time))
    }
}

/// The directives a chat template may use: those whose output in Python's C locale (glibc) chrono
/// gives byte for byte (with the rewrites in [`strftime`]).
const DIRECTIVES: &str = "YymdeHIMSpbhBaAjwuFTDR%";
/// Those of [`DIRECTIVES`] that are numbers, which glibc's `-` flag (and chrono's) leaves unpadded.
const NUMERIC: &str = "YymdeHIMSjwu";

/// Python's `datetime.strftime` in the C locale (glibc), for the directives
/// `%Y %y %m %d %e %H %I %M %S %p %b %h %B %a %A %j %w %u %F %T %D %R %%`, with glibc's `-` flag
/// (no padding). Any other directive is an error naming it, rather than a silently wrong date.
pub(crate) fn strftime(t: &DateTime, format: &str) -> Result<String, String> {
    let Some(time) = t.to_chrono() else {
        return Err(format!("strftime_now: invalid date {t:?}"));
    };
    // chrono's spelling of the same format: glibc ignores `-` on a directive that is no number, where
    // chrono refuses it, and glibc's %Y is the year unpadded (999), chrono's zero-padded (0999).
    let mut chrono_format = String::with_capacity(format.len() + 4);
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        chrono_format.push(c);
        if c != '%' {
            continue;
        }
        let mut spec = chars.next().ok_or("strftime_now: format ends with a lone '%'")?;
        let no_pad = spec == '-';
        if no_pad {
            spec = chars.next().ok_or("strftime_now: format ends with '%-'")?;
        }
        if !DIRECTIVES.contains(spec) {
            return Err(format!("strftime_now: unsupported directive %{spec} in {format:?}"));
        }
        if (no_pad && NUMERIC.contains(spec)) || spec == 'Y' {
            chrono_format.push('-');
        }
        chrono_format.push(spec);
    }
    let mut out = String::new();
    std::fmt::Write::write_fmt(&mut out, format_args!("{}", time.format(&chrono_format)))
        .map_err(|_| format!("strftime_now: chrono cannot format {format:?}"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_to_civil() {
        // 2025-03-14T09:26:53Z
        let t = DateTime::from_unix(1_741_944_413);
        assert_eq!(t, DateTime { year: 2025, month: 3, day: 14, hour: 9, minute: 26, second: 53 });
        assert_eq!(strftime(&DateTime::from_unix(0), "%A %u").unwrap(), "Thursday 4");
        assert_eq!(
            DateTime::from_unix(951_782_400),
            DateTime { year: 2000, month: 2, day: 29, hour: 0, minute: 0, second: 0 }
        );
    }

    #[test]
    fn formats_like_glibc() {
        let t = DateTime { year: 2024, month: 7, day: 5, hour: 15, minute: 4, second: 9 };
        assert_eq!(strftime(&t, "%d %b %Y").unwrap(), "05 Jul 2024");
        assert_eq!(strftime(&t, "%B %-d, %Y %A %a").unwrap(), "July 5, 2024 Friday Fri");
        assert_eq!(strftime(&t, "%I:%M:%S %p %j %e|%w%u %%").unwrap(), "03:04:09 PM 187  5|55 %");
        assert!(strftime(&t, "%Q").unwrap_err().contains("%Q"));
        // glibc ignores `-` on names; its %Y is unpadded; %F %T %D %R are the composites.
        assert_eq!(strftime(&t, "%-p %-b|%F %T|%D %R").unwrap(), "PM Jul|2024-07-05 15:04:09|07/05/24 15:04");
        let early = DateTime { year: 999, month: 1, day: 2, hour: 0, minute: 0, second: 60 };
        assert_eq!(strftime(&early, "%Y %-j %-e %S").unwrap(), "999 2 2 60");
        let no_day = DateTime { year: 2023, month: 2, day: 29, hour: 0, minute: 0, second: 0 };
        assert!(strftime(&no_day, "%d").unwrap_err().contains("invalid date"));
    }
}
