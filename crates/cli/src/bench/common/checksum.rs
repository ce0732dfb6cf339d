//! One number for what a run returned and left behind, which must not depend on the
//! storage: every target of a comparison must end with the same checksum.

use rusqlite::types::ValueRef;

/// FNV-1a over a typed stream of values: every row of every SELECT, and the final
/// database contents, fold into one number that must not depend on the storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checksum(u64);

impl Default for Checksum {
    fn default() -> Self {
        Checksum(0xcbf2_9ce4_8422_2325)
    }
}

impl Checksum {
    fn bytes(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// Folds one value with a type tag and length, so `("ab","c")` ≠ `("a","bc")`.
    pub fn value(&mut self, value: ValueRef<'_>) {
        match value {
            ValueRef::Null => self.bytes(&[0]),
            ValueRef::Integer(i) => {
                self.bytes(&[1]);
                self.bytes(&i.to_le_bytes());
            }
            ValueRef::Real(r) => {
                self.bytes(&[2]);
                self.bytes(&r.to_bits().to_le_bytes());
            }
            ValueRef::Text(t) => {
                self.bytes(&[3]);
                self.bytes(&(t.len() as u64).to_le_bytes());
                self.bytes(t);
            }
            ValueRef::Blob(b) => {
                self.bytes(&[4]);
                self.bytes(&(b.len() as u64).to_le_bytes());
                self.bytes(b);
            }
        }
    }

    pub fn end_of_row(&mut self) {
        self.bytes(&[0xff]);
    }

    pub fn text(&mut self, text: &str) {
        self.value(ValueRef::Text(text.as_bytes()));
    }

    pub fn hex(&self) -> String {
        format!("{:016x}", self.0)
    }

    pub fn as_u64(self) -> u64 {
        self.0
    }

    pub fn from_u64(value: u64) -> Checksum {
        Checksum(value)
    }
}

/// The checksum of every run, listed (`unix (wal): 00ab…, …`), when they are not all the
/// same: then at least one storage layer is wrong, and no timing of the comparison can be
/// trusted. `None` when every run agrees.
pub fn mismatch(runs: impl IntoIterator<Item = (String, String)>) -> Option<String> {
    let all: Vec<(String, String)> = runs.into_iter().collect();
    let (_, first) = all.first()?;
    if all.iter().all(|(_, checksum)| checksum == first) {
        return None;
    }
    let listing: Vec<String> = all
        .iter()
        .map(|(label, checksum)| format!("{label}: {checksum}"))
        .collect();
    Some(listing.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_separates_values() {
        let mut a = Checksum::default();
        a.text("ab");
        a.text("c");
        let mut b = Checksum::default();
        b.text("a");
        b.text("bc");
        assert_ne!(a, b);
        let mut c = Checksum::default();
        c.value(ValueRef::Integer(1));
        let mut d = Checksum::default();
        d.value(ValueRef::Real(1.0));
        assert_ne!(c, d);
    }

    #[test]
    fn a_mismatch_lists_every_run() {
        let run = |label: &str, checksum: &str| (label.to_string(), checksum.to_string());
        assert_eq!(mismatch([run("a", "01"), run("b", "01")]), None);
        assert_eq!(mismatch([]), None);
        assert_eq!(
            mismatch([run("a", "01"), run("b", "02")]).as_deref(),
            Some("a: 01, b: 02")
        );
    }
}
