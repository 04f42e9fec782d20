//! The date and time `strftime_now` formats, and a `strftime` for the directives chat templates use.

use std::time::{SystemTime, UNIX_EPOCH};

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

    /// The UTC date and time `secs` seconds after 1970-01-01T00:00:00.
    #[must_use]
    pub fn from_unix(secs: i64) -> Self {
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        // rem < 86 400, so these fit.
        let rem = u32::try_from(rem).unwrap_or(0);
        Self { year, month, day, hour: rem / 3600, minute: rem / 60 % 60, second: rem % 60 }
    }

    fn is_valid(&self) -> bool {
        (1..=12).contains(&self.month)
            && self.day >= 1
            && self.day <= days_in_month(self.year, self.month)
            && self.hour < 24
            && self.minute < 60
            && self.second <= 60
    }

    /// 0 = Monday … 6 = Sunday.
    fn weekday(&self) -> u32 {
        let days = days_from_civil(self.year, self.month, self.day);
        // 1970-01-01 was a Thursday (3).
        u32::try_from((days + 3).rem_euclid(7)).unwrap_or(0)
    }

    fn day_of_year(&self) -> u32 {
        let days = days_from_civil(self.year, self.month, self.day) - days_from_civil(self.year, 1, 1);
        u32::try_from(days).unwrap_or(0) + 1
    }
}

fn is_leap(y: i32) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i32, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(y) => 29,
        2 => 28,
        _ => 0,
    }
}

/// Days since 1970-01-01 (Howard Hinnant's algorithm).
fn days_from_civil(y: i32, m: u32, d: u32) -> i64 {
    let y = i64::from(y) - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i32, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    (i32::try_from(y).unwrap_or(i32::MAX), u32::try_from(m).unwrap_or(1), u32::try_from(d).unwrap_or(1))
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

/// Python's `datetime.strftime` in the C locale (glibc), for the directives
/// `%Y %y %m %d %e %H %I %M %S %p %b %h %B %a %A %j %w %u %F %T %D %R %%`, with glibc's `-` flag
/// (no padding). Any other directive is an error naming it, rather than a silently wrong date.
pub(crate) fn strftime(t: &DateTime, format: &str) -> Result<String, String> {
    if !t.is_valid() {
        return Err(format!("strftime_now: invalid date {t:?}"));
    }
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = chars.next().ok_or("strftime_now: format ends with a lone '%'")?;
        let no_pad = spec == '-';
        if no_pad {
            spec = chars.next().ok_or("strftime_now: format ends with '%-'")?;
        }
        let num = |v: u32, width: usize| {
            if no_pad { v.to_string() } else { format!("{v:0width$}") }
        };
        let month_name = MONTHS[(t.month - 1) as usize];
        let weekday_name = WEEKDAYS[t.weekday() as usize];
        let hour12 = if t.hour.is_multiple_of(12) { 12 } else { t.hour % 12 };
        let piece = match spec {
            'Y' => t.year.to_string(),
            'y' => num(u32::try_from(t.year.rem_euclid(100)).unwrap_or(0), 2),
            'm' => num(t.month, 2),
            'd' => num(t.day, 2),
            'e' => {
                if no_pad {
                    t.day.to_string()
                } else {
                    format!("{:>2}", t.day)
                }
            }
            'H' => num(t.hour, 2),
            'I' => num(hour12, 2),
            'M' => num(t.minute, 2),
            'S' => num(t.second, 2),
            'p' => if t.hour < 12 { "AM" } else { "PM" }.to_owned(),
            'b' | 'h' => month_name[..3].to_owned(),
            'B' => month_name.to_owned(),
            'a' => weekday_name[..3].to_owned(),
            'A' => weekday_name.to_owned(),
            'j' => num(t.day_of_year(), 3),
            'w' => ((t.weekday() + 1) % 7).to_string(),
            'u' => (t.weekday() + 1).to_string(),
            'F' => format!("{}-{:02}-{:02}", t.year, t.month, t.day),
            'T' => format!("{:02}:{:02}:{:02}", t.hour, t.minute, t.second),
            'R' => format!("{:02}:{:02}", t.hour, t.minute),
            'D' => format!("{:02}/{:02}/{:02}", t.month, t.day, t.year.rem_euclid(100)),
            '%' => "%".to_owned(),
            other => {
                return Err(format!("strftime_now: unsupported directive %{other} in {format:?}"));
            }
        };
        out.push_str(&piece);
    }
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
        assert_eq!(DateTime::from_unix(0).weekday(), 3);
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
    }
}
