//! Byte sizes with units, as typed on the command line (`64B`, `300KB`, `2MB`, `4KiB`).
//!
//! Decimal prefixes (KB = 1000 B, MB = 10^6 B) because EZFS's sizes ("300 KB", "2 MB")
//! and the MB/s rates are decimal; binary prefixes (KiB, MiB, GiB) are accepted too.

use std::fmt;
use std::str::FromStr;

/// A size in bytes that prints and parses with a unit.
/// Crosses to a worker as its number of bytes.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub fn bytes(self) -> u64 {
        self.0
    }
}

const UNITS: &[(&str, u64)] = &[
    ("GIB", 1 << 30),
    ("MIB", 1 << 20),
    ("KIB", 1 << 10),
    ("GB", 1_000_000_000),
    ("MB", 1_000_000),
    ("KB", 1_000),
    ("B", 1),
];

impl FromStr for ByteSize {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let trimmed = text.trim();
        let upper = trimmed.to_ascii_uppercase();
        // A bare number would be ambiguous between bytes and KB: demand the unit.
        let (unit, factor) = UNITS
            .iter()
            .find(|(unit, _)| upper.ends_with(unit))
            .ok_or_else(|| {
                format!("size {trimmed:?} has no unit: write it as e.g. 64B, 300KB, 2MB or 4KiB")
            })?;
        let number = upper[..upper.len() - unit.len()].trim();
        let value: u64 = number
            .parse()
            .map_err(|_| format!("size {trimmed:?}: {number:?} is not a whole number"))?;
        value
            .checked_mul(*factor)
            .map(ByteSize)
            .ok_or_else(|| format!("size {trimmed:?} is too large"))
    }
}

impl fmt::Display for ByteSize {
    /// The shortest exact form: 64B, 300KB, 2MB, 4KiB.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let exact = [
            ("GB", 1_000_000_000),
            ("MB", 1_000_000),
            ("GiB", 1 << 30),
            ("MiB", 1 << 20),
            ("KB", 1_000),
            ("KiB", 1 << 10),
        ];
        for (unit, factor) in exact {
            if self.0 >= factor && self.0 / factor * factor == self.0 {
                return write!(f, "{}{unit}", self.0 / factor);
            }
        }
        write!(f, "{}B", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!("64B".parse::<ByteSize>().unwrap(), ByteSize(64));
        assert_eq!("300KB".parse::<ByteSize>().unwrap(), ByteSize(300_000));
        assert_eq!("2MB".parse::<ByteSize>().unwrap(), ByteSize(2_000_000));
        assert_eq!("4KiB".parse::<ByteSize>().unwrap(), ByteSize(4096));
        assert_eq!(" 1 mib ".parse::<ByteSize>().unwrap(), ByteSize(1 << 20));
    }

    #[test]
    fn rejects_bad_sizes() {
        assert!("64".parse::<ByteSize>().unwrap_err().contains("no unit"));
        assert!("x KB".parse::<ByteSize>().is_err());
        assert!("-1B".parse::<ByteSize>().is_err());
        assert!("99999999999999GB".parse::<ByteSize>().is_err());
    }

    #[test]
    fn displays_round_trip() {
        for text in ["64B", "300KB", "2MB", "4KiB", "1GB", "1000001B"] {
            assert_eq!(text.parse::<ByteSize>().unwrap().to_string(), text);
        }
    }
}
