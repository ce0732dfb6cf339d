//! The filename SQLite passes to xOpen, decoded once at the FFI edge
//! (`SqliteApi::open_name`, called by `entry.rs`): its path and every URI parameter,
//! owned, so the code that opens the file (`file/open.rs`) holds no C pointer.

use crate::sys::FilePath;

/// What xOpen was asked to open.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct OpenName {
    /// The filename, with its NUL (the file keeps it); `None` for an anonymous
    /// temporary file (a null name).
    pub(crate) path: Option<FilePath>,
    /// The filename's URI parameters; a journal's or WAL's are its database's, as SQLite
    /// reads them (`sqlite3_uri_parameter`).
    pub(crate) uri: UriParameters,
}

/// URI parameters in the order SQLite lists them (`sqlite3_uri_key`), each key with the
/// value `sqlite3_uri_parameter` gives it: the first given for that key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct UriParameters(Vec<(String, String)>);

impl UriParameters {
    pub(crate) fn new(pairs: Vec<(String, String)>) -> UriParameters {
        UriParameters(pairs)
    }

    /// The parameters `pairs` give, in order (for tests).
    #[cfg(test)]
    pub(crate) fn from_pairs(pairs: &[(&str, &str)]) -> UriParameters {
        UriParameters(
            pairs
                .iter()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
        )
    }

    /// Whether the name has no parameter at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every key, in order (a key given twice is listed twice).
    pub(crate) fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(key, _)| key.as_str())
    }

    /// The value of `key`: the first given, as `sqlite3_uri_parameter` answers; `None`
    /// when the key is absent.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, value)| value.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_value_of_a_key_wins_and_every_key_is_listed() {
        let uri = UriParameters::from_pairs(&[("modeof", "/a"), ("psow", "0"), ("modeof", "/b")]);
        assert_eq!(uri.get("modeof"), Some("/a"));
        assert_eq!(uri.get("psow"), Some("0"));
        assert_eq!(uri.get("nolock"), None);
        assert_eq!(uri.keys().collect::<Vec<_>>(), ["modeof", "psow", "modeof"]);
    }

    #[test]
    fn an_empty_value_is_present() {
        let uri = UriParameters::from_pairs(&[("modeof", "")]);
        assert_eq!(uri.get("modeof"), Some(""));
    }
}
