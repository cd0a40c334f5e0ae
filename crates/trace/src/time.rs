//! The trace's times (Unix milliseconds) as people read them.

/// `YYYY-MM-DD HH:MM:SS UTC` of Unix milliseconds (any value renders; none panics).
pub fn utc(unix_ms: u64) -> String {
    let seconds = unix_ms / 1000;
    let (year, month, day) = civil_from_days((seconds / 86_400) as i64);
    let time = seconds % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        time / 3600,
        time % 3600 / 60,
        time % 60
    )
}

/// The calendar date of a day counted from 1970-01-01. Years are counted from March, so the
/// leap day falls at the end of one, in 400-year cycles of 146 097 days.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // days from 0000-03-01
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = ((month_from_march + 2) % 12 + 1) as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_renders_civil_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_700_000_000_123), "2023-11-14 22:13:20 UTC");
        assert_eq!(utc(4_107_542_399_000), "2100-02-28 23:59:59 UTC");
        // Far out of range still renders, never panics.
        assert!(utc(u64::MAX).ends_with("UTC"));
    }
}
