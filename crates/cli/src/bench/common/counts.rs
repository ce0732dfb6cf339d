//! The VFS counters of measured runs, in the VFS's own type ([`IoStats`]): their mean over
//! the runs, and their form on a worker's pipe.

use sqlite_uring::IoStats;

/// Per-run mean of the counters of the runs that have them (they are normally identical
/// run to run), each field rounded down; `None` when no run has counters.
pub fn mean(runs: impl IntoIterator<Item = Option<IoStats>>) -> Option<IoStats> {
    let counted: Vec<IoStats> = runs.into_iter().flatten().collect();
    if counted.is_empty() {
        return None;
    }
    let n = counted.len() as u64;
    let arrays: Vec<_> = counted.iter().map(IoStats::as_array).collect();
    Some(IoStats::from_array(std::array::from_fn(|field| {
        arrays.iter().map(|values| values[field]).sum::<u64>() / n
    })))
}

/// `Option<IoStats>` across a worker's pipe (`#[serde(with = "counts::wire")]`): the
/// counters in [`IoStats::as_array`]'s order, so that a worker of a build with other
/// counters is an error rather than a silent mix-up.
pub mod wire {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use sqlite_uring::IoStats;

    pub fn serialize<S: Serializer>(
        io: &Option<IoStats>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        io.map(|io| io.as_array().to_vec()).serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<IoStats>, D::Error> {
        let Some(values) = Option::<Vec<u64>>::deserialize(deserializer)? else {
            return Ok(None);
        };
        let count = values.len();
        let array = values.try_into().map_err(|_| {
            serde::de::Error::custom(format!(
                "worker sent {count} I/O counters; this binary has a different set"
            ))
        })?;
        Ok(Some(IoStats::from_array(array)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_is_per_field_over_the_counted_runs() {
        let one = IoStats {
            read_calls: 3,
            bytes_written: 10,
            kernel_entries: 5,
            ..IoStats::default()
        };
        let two = IoStats {
            read_calls: 4,
            bytes_written: 20,
            kernel_entries: 6,
            ..IoStats::default()
        };
        let mean = mean([Some(one), None, Some(two)]).unwrap();
        assert_eq!(
            (mean.read_calls, mean.bytes_written, mean.kernel_entries),
            (3, 15, 5)
        );
        assert_eq!(super::mean([None, None]), None);
    }

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Carried {
        #[serde(with = "wire")]
        io: Option<IoStats>,
    }

    #[test]
    fn counters_cross_the_pipe_unchanged_or_not_at_all() {
        let io = IoStats::from_array(std::array::from_fn(|i| (i as u64 + 1) << 33));
        for carried in [Carried { io: Some(io) }, Carried { io: None }] {
            let text = serde_json::to_string(&carried).unwrap();
            assert_eq!(serde_json::from_str::<Carried>(&text).unwrap(), carried);
        }
        let error = serde_json::from_str::<Carried>(r#"{"io":[1,2,3]}"#).unwrap_err();
        assert!(error.to_string().contains("3 I/O counters"), "{error}");
    }
}
