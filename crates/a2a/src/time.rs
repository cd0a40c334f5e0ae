//! RFC 3339 timestamps in UTC, as both protocol versions write them
//! (`2025-10-28T10:30:00.000Z`), to and from Unix milliseconds. No clock is read here.

/// Unix milliseconds as `YYYY-MM-DDTHH:MM:SS.sssZ`. Years outside 0000–9999 are clamped to
/// that range, so the result is always a valid timestamp.
pub fn format_timestamp_millis(unix_millis: i64) -> String {
    const MIN: i64 = -62_167_219_200_000; // 0000-01-01T00:00:00.000Z
    const MAX: i64 = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z
    let millis = unix_millis.clamp(MIN, MAX);
    let days = millis.div_euclid(86_400_000);
    let in_day = millis.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

/// Reads an RFC 3339 date-time (`T` or space between date and time; `Z` or a `±HH:MM` offset;
/// any number of fractional digits, kept to the millisecond) into Unix milliseconds.
/// `None` when it is not one.
pub fn parse_timestamp_millis(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<i64> {
        let slice = bytes.get(range)?;
        if slice.is_empty() || !slice.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(slice).ok()?.parse().ok()
    };
    let year = digits(0..4)?;
    let month = digits(5..7)?;
    let day = digits(8..10)?;
    let hour = digits(11..13)?;
    let minute = digits(14..16)?;
    let second = digits(17..19)?;
    if bytes.get(4) != Some(&b'-')
        || bytes.get(7) != Some(&b'-')
        || !matches!(bytes.get(10), Some(b'T' | b't' | b' '))
        || bytes.get(13) != Some(&b':')
        || bytes.get(16) != Some(&b':')
    {
        return None;
    }
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &text[19..];
    let mut millis = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let count = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if count == 0 {
            return None;
        }
        let kept: String = fraction[..count]
            .chars()
            .chain("000".chars())
            .take(3)
            .collect();
        millis = kept.parse::<i64>().ok()?;
        rest = &fraction[count..];
    }
    let offset_minutes = match rest {
        "Z" | "z" => 0,
        _ => {
            let offset = rest.as_bytes();
            let sign = match offset.first() {
                Some(b'+') => 1,
                Some(b'-') => -1,
                _ => return None,
            };
            if offset.len() != 6
                || offset[3] != b':'
                || ![1, 2, 4, 5].iter().all(|&at| offset[at].is_ascii_digit())
            {
                return None;
            }
            let hours = i64::from(offset[1] - b'0') * 10 + i64::from(offset[2] - b'0');
            let minutes = i64::from(offset[4] - b'0') * 10 + i64::from(offset[5] - b'0');
            if hours > 23 || minutes > 59 {
                return None;
            }
            sign * (hours * 60 + minutes)
        }
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second.min(59) - offset_minutes * 60;
    Some(seconds * 1000 + millis)
}

/// Whether `text` is an RFC 3339 date-time.
pub fn is_timestamp(text: &str) -> bool {
    parse_timestamp_millis(text).is_some()
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Howard Hinnant's civil-calendar algorithms.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_timestamp_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_timestamp_millis(1_761_647_400_000),
            "2025-10-28T10:30:00.000Z"
        );
        assert_eq!(
            format_timestamp_millis(951_782_400_123),
            "2000-02-29T00:00:00.123Z"
        );
        assert_eq!(
            format_timestamp_millis(i64::MAX),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(
            format_timestamp_millis(i64::MIN),
            "0000-01-01T00:00:00.000Z"
        );
    }

    #[test]
    fn reads_the_forms_the_specs_show() {
        assert_eq!(
            parse_timestamp_millis("2025-10-28T10:30:00.000Z"),
            Some(1_761_647_400_000)
        );
        assert_eq!(
            parse_timestamp_millis("2025-10-28T10:30:00Z"),
            Some(1_761_647_400_000)
        );
        assert_eq!(
            parse_timestamp_millis("2025-04-17T17:47:09.680794Z"),
            Some(1_744_912_029_680)
        );
        assert_eq!(
            parse_timestamp_millis("2025-10-28T12:30:00+02:00"),
            Some(1_761_647_400_000)
        );
    }

    #[test]
    fn refuses_what_is_not_rfc3339() {
        for bad in [
            "",
            "yesterday",
            "2025-10-28",
            "2025-10-28T10:30:00",
            "2025-02-30T00:00:00Z",
            "2025-13-01T00:00:00Z",
            "2025-10-28T24:00:00Z",
            "2025-10-28T10:30:00.Z",
            "2025-10-28T10:30:00+0200",
            "2025-10-28T10:30:00ZZ",
            "+025-10-28T10:30:00Z",
        ] {
            assert_eq!(parse_timestamp_millis(bad), None, "{bad}");
        }
    }
}
