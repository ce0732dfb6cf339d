//! Statistics with hyperfine's conventions.
//!
//! * σ is the *sample* standard deviation (n − 1); it is `None` for a single run rather
//!   than a misleading 0.
//! * The relative speed of a command against a baseline is `ratio = mean / mean_baseline`
//!   with `error = ratio · sqrt((σ/mean)² + (σ_baseline/mean_baseline)²)` (independent
//!   errors, propagated to first order, exactly as hyperfine prints `1.23 ± 0.04`).
//! * Outliers use the modified Z-score `(x − median) / (1.4826 · MAD)` with hyperfine's
//!   threshold of 14: robust to the outliers it looks for, unlike a mean/σ test.

use serde::{Deserialize, Serialize};

/// |modified Z-score| above which a sample is an outlier (hyperfine's value).
pub const OUTLIER_THRESHOLD: f64 = 14.0;

/// σ/mean above which the runs are too noisy to compare small differences.
pub const HIGH_VARIANCE_THRESHOLD: f64 = 0.10;

/// Scale that makes the MAD a consistent estimator of σ for normal data.
const MAD_TO_SIGMA: f64 = 1.4826;

/// Summary of the measured runs of one command, in the unit of the samples (seconds here).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub runs: usize,
    pub mean: f64,
    /// Sample standard deviation; `None` with fewer than two runs.
    pub stddev: Option<f64>,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Summary {
    /// Summarises `samples`; `None` when there are none or one is not finite (a clock bug
    /// must not become a plausible number).
    pub fn from_samples(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() || samples.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let runs = samples.len();
        let mean = samples.iter().sum::<f64>() / runs as f64;
        let stddev = (runs >= 2).then(|| {
            let squares: f64 = samples.iter().map(|x| (x - mean).powi(2)).sum();
            (squares / (runs - 1) as f64).sqrt()
        });
        Some(Summary {
            runs,
            mean,
            stddev,
            median: median(samples),
            min: samples.iter().copied().fold(f64::INFINITY, f64::min),
            max: samples.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }

    /// σ/mean, `None` with one run or a zero mean.
    pub fn coefficient_of_variation(&self) -> Option<f64> {
        let stddev = self.stddev?;
        (self.mean > 0.0).then(|| stddev / self.mean)
    }

    /// This summary relative to `baseline`, e.g. `1.85 ± 0.07` = 1.85 times slower.
    pub fn relative_to(&self, baseline: &Summary) -> Option<Relative> {
        Relative::of(self, baseline)
    }
}

/// `ratio ± error` of one mean against a baseline mean (> 1: slower than the baseline).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Relative {
    pub ratio: f64,
    /// Propagated one-σ error; `None` when either side has a single run.
    pub error: Option<f64>,
}

impl Relative {
    /// `None` when the baseline mean is 0 (nothing to divide by).
    pub fn of(summary: &Summary, baseline: &Summary) -> Option<Relative> {
        if baseline.mean <= 0.0 {
            return None;
        }
        let ratio = summary.mean / baseline.mean;
        let error = match (summary.stddev, baseline.stddev) {
            (Some(s), Some(b)) if summary.mean > 0.0 => {
                Some(ratio * ((s / summary.mean).powi(2) + (b / baseline.mean).powi(2)).sqrt())
            }
            (Some(_), Some(_)) => Some(0.0),
            _ => None,
        };
        Some(Relative { ratio, error })
    }

    /// `1.00`, `2.31 ± 0.12`: the form of hyperfine's "Relative" column. Ratios below 0.1
    /// get more decimals so that a much faster command does not read as `0.00`.
    pub fn display(&self) -> String {
        let decimals = ratio_decimals(self.ratio);
        match self.error {
            Some(error) => format!("{:.*} ± {:.*}", decimals, self.ratio, decimals, error),
            None => format!("{:.*}", decimals, self.ratio),
        }
    }
}

/// Decimals a ratio is shown with: 2, or two significant digits below 0.1 (0.042,
/// 0.0013, …, at most 6 decimals).
fn ratio_decimals(ratio: f64) -> usize {
    if ratio > 0.0 && ratio < 0.1 {
        ((-ratio.log10()).floor() as usize + 2).min(6)
    } else {
        2
    }
}

/// Confidence of [`PairedRatio::interval`].
pub const PAIRED_CONFIDENCE: f64 = 0.95;

/// The median of per-run ratios `time[i] ÷ baseline_time[i]`, where run `i` of both was
/// measured in the same round (so a drift of the machine hits both alike), with a
/// distribution-free confidence interval of that median.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairedRatio {
    pub median: f64,
    /// The interval between two order statistics of the ratios that holds the true
    /// median with probability ≥ [`PAIRED_CONFIDENCE`] whatever the distribution (the
    /// sign test's interval: only the number of ratios on each side of the median
    /// counts). `None` below 6 pairs: no such interval exists for fewer.
    pub interval: Option<(f64, f64)>,
    pub pairs: usize,
}

/// Where the interval of a paired comparison lies relative to 1, at
/// [`PAIRED_CONFIDENCE`]. For time ratios `Below` means faster; for rate ratios, slower.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The whole interval is below 1.
    Below,
    /// The whole interval is above 1.
    Above,
    /// The interval contains 1: no difference shown.
    Straddles,
}

impl PairedRatio {
    /// `None` without an interval (too few pairs to say).
    pub fn verdict(&self) -> Option<Verdict> {
        let (low, high) = self.interval?;
        Some(if high < 1.0 {
            Verdict::Below
        } else if low > 1.0 {
            Verdict::Above
        } else {
            Verdict::Straddles
        })
    }

    /// `0.97 [0.95, 0.99]`, or `0.97` without an interval; with as many decimals as
    /// [`Relative::display`] gives the median (a ratio below 0.1 keeps two significant
    /// digits: `0.0082 [0.0080, 0.0085]`).
    pub fn display(&self) -> String {
        let decimals = ratio_decimals(self.median);
        match self.interval {
            Some((low, high)) => format!(
                "{:.decimals$} [{low:.decimals$}, {high:.decimals$}]",
                self.median
            ),
            None => format!("{:.decimals$}", self.median),
        }
    }
}

/// P(B ≤ k) for B ~ Binomial(n, ½). The terms are summed from their logarithms: 2^-n
/// alone is below the smallest `f64` from n = 1075 runs on.
fn binomial_half_cdf(n: usize, k: usize) -> f64 {
    let mut log_term = -(n as f64) * std::f64::consts::LN_2; // ln(C(n, 0) / 2^n)
    let mut sum = log_term.exp();
    for i in 1..=k.min(n) {
        log_term += ((n + 1 - i) as f64 / i as f64).ln();
        sum += log_term.exp();
    }
    sum
}

/// Paired ratios of `samples` to `baseline` (same length, same round order); `None`
/// when there is no pair or a baseline time is not positive.
pub fn paired_ratio(samples: &[f64], baseline: &[f64]) -> Option<PairedRatio> {
    assert_eq!(
        samples.len(),
        baseline.len(),
        "pairs come from the same rounds"
    );
    if samples.is_empty() || baseline.iter().any(|b| *b <= 0.0 || !b.is_finite()) {
        return None;
    }
    let ratios: Vec<f64> = samples.iter().zip(baseline).map(|(s, b)| s / b).collect();
    let (median, interval) = median_with_interval(ratios);
    Some(PairedRatio {
        median,
        interval,
        pairs: samples.len(),
    })
}

/// The median of per-run differences `value[i] − baseline_value[i]` of runs measured in
/// the same round, with the same distribution-free interval as [`PairedRatio`]'s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairedDifference {
    pub median: f64,
    /// Holds the true median difference with probability ≥ [`PAIRED_CONFIDENCE`];
    /// `None` below 6 pairs.
    pub interval: Option<(f64, f64)>,
}

/// Paired differences of `samples` to `baseline` (same length, same round order); `None`
/// when there is no pair.
pub fn paired_difference(samples: &[f64], baseline: &[f64]) -> Option<PairedDifference> {
    assert_eq!(
        samples.len(),
        baseline.len(),
        "pairs come from the same rounds"
    );
    if samples.is_empty() {
        return None;
    }
    let differences = samples.iter().zip(baseline).map(|(s, b)| s - b).collect();
    let (median, interval) = median_with_interval(differences);
    Some(PairedDifference { median, interval })
}

/// The median of `values` and the sign test's interval of it at [`PAIRED_CONFIDENCE`]
/// (`None` below 6 values).
fn median_with_interval(mut values: Vec<f64>) -> (f64, Option<(f64, f64)>) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    // The largest k with P(B ≤ k − 1) ≤ α/2: then [v_(k), v_(n+1−k)] (1-based) covers
    // the median with probability 1 − 2·P(B ≤ k − 1) ≥ 1 − α.
    let k = interval_rank(n);
    let interval = (k >= 1).then(|| (values[k - 1], values[n - k]));
    (median(&values), interval)
}

/// The rank k of the sign test's interval over `n` values: the largest k with
/// P(B ≤ k − 1) ≤ α/2 for B ~ Binomial(n, ½) (0: no interval, below 6 values).
fn interval_rank(n: usize) -> usize {
    let tail = (1.0 - PAIRED_CONFIDENCE) / 2.0;
    let mut k = 0;
    while k < n / 2 && binomial_half_cdf(n, k) <= tail {
        k += 1;
    }
    k
}

/// How often the interval over `pairs` pairs lies wholly on one given side of the true
/// median by chance: P(B ≤ k − 1), at most α/2 = 1/40 and less for most counts, since the
/// order statistics' coverage comes in steps (1 in 93 at 10 pairs, 1 in 52 at 40);
/// `None` without an interval.
pub fn chance_per_side(pairs: usize) -> Option<f64> {
    let k = interval_rank(pairs);
    (k >= 1).then(|| binomial_half_cdf(pairs, k - 1))
}

/// Median of unsorted samples (mean of the two middle values for an even count).
pub fn median(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// Modified Z-score of every sample. When the MAD is 0 (most samples equal), any sample
/// off the median gets a huge score, as in hyperfine: it really is an outlier then.
pub fn modified_z_scores(samples: &[f64]) -> Vec<f64> {
    if samples.is_empty() {
        return Vec::new();
    }
    let center = median(samples);
    let deviations: Vec<f64> = samples.iter().map(|x| (x - center).abs()).collect();
    let mad = median(&deviations);
    let mad = if mad > 0.0 { mad } else { f64::EPSILON };
    samples
        .iter()
        .map(|x| (x - center) / (MAD_TO_SIGMA * mad))
        .collect()
}

/// Indices of the samples whose |modified Z-score| exceeds [`OUTLIER_THRESHOLD`].
pub fn outlier_indices(samples: &[f64]) -> Vec<usize> {
    // With fewer than 3 samples the median is not robust, so nothing is an outlier.
    if samples.len() < 3 {
        return Vec::new();
    }
    modified_z_scores(samples)
        .iter()
        .enumerate()
        .filter(|(_, z)| z.abs() > OUTLIER_THRESHOLD)
        .map(|(i, _)| i)
        .collect()
}

/// Something that makes a measurement less trustworthy, with what to do about it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Warning {
    /// The first run was an outlier on the slow side: caches were cold.
    ColdFirstRun,
    /// Some runs (not only the first) were statistical outliers.
    Outliers { count: usize },
    /// σ/mean above [`HIGH_VARIANCE_THRESHOLD`] (in percent, rounded).
    HighVariance { percent: u32 },
    /// Only one run: no σ, no error on the relative speed.
    SingleRun,
}

impl Warning {
    /// One line for the terminal: the problem and the remedy.
    pub fn message(&self) -> String {
        match self {
            Warning::ColdFirstRun => "the first run was much slower than the rest (cold caches); \
                 use --warmup 1 or more"
                .to_string(),
            Warning::Outliers { count } => format!(
                "{count} statistical outlier(s) (modified Z-score > {OUTLIER_THRESHOLD}); \
                 other programs or disk activity may have interfered: rerun on a quiet system"
            ),
            Warning::HighVariance { percent } => format!(
                "high variance: σ is {percent}% of the mean; differences smaller than that \
                 mean nothing: use more --runs or a quieter system"
            ),
            Warning::SingleRun => {
                "only one run: no σ and no error estimate; use --runs 3 or more".to_string()
            }
        }
    }
}

impl Warning {
    /// A few words for a table footnote; [`Warning::message`] has the remedy.
    pub fn short(&self) -> String {
        match self {
            Warning::ColdFirstRun => "first run slow (cold cache)".to_string(),
            Warning::Outliers { count } => format!("{count} outlier(s)"),
            Warning::HighVariance { percent } => format!("σ = {percent}% of mean"),
            Warning::SingleRun => "single run, no σ".to_string(),
        }
    }
}

/// The warnings hyperfine would print for these samples (in run order).
pub fn warnings(samples: &[f64]) -> Vec<Warning> {
    let mut found = Vec::new();
    if samples.len() == 1 {
        found.push(Warning::SingleRun);
    }
    let outliers = outlier_indices(samples);
    let scores = modified_z_scores(samples);
    let cold_first = outliers.first() == Some(&0) && scores[0] > 0.0;
    if cold_first {
        found.push(Warning::ColdFirstRun);
    }
    let others = outliers.len() - usize::from(cold_first);
    if others > 0 {
        found.push(Warning::Outliers { count: others });
    }
    if let Some(cv) = Summary::from_samples(samples).and_then(|s| s.coefficient_of_variation()) {
        if cv > HIGH_VARIANCE_THRESHOLD {
            found.push(Warning::HighVariance {
                percent: (cv * 100.0).round() as u32,
            });
        }
    }
    found
}

/// Human form of a duration in seconds with a unit chosen for 3–4 significant digits.
pub fn format_seconds(seconds: f64) -> String {
    if !seconds.is_finite() {
        return "n/a".to_string();
    }
    let abs = seconds.abs();
    if abs >= 1.0 {
        format!("{seconds:.3} s")
    } else if abs >= 1e-3 {
        format!("{:.2} ms", seconds * 1e3)
    } else {
        format!("{:.1} µs", seconds * 1e6)
    }
}

/// Human form of a byte count in IEC units: `512 B`, `4.0 KiB`, `1.50 GiB`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{bytes} B"),
        _ if value >= 100.0 => format!("{value:.0} {}", UNITS[unit]),
        _ if value >= 10.0 => format!("{value:.1} {}", UNITS[unit]),
        _ => format!("{value:.2} {}", UNITS[unit]),
    }
}

/// Throughput in decimal units (1 MB = 10^6 bytes), as fio and dd print it and the MB/s
/// columns of every benchmark count: `2.1 GB/s`, `512.0 MB/s`; `n/a` for a rate that is
/// not a finite non-negative number.
pub fn format_rate(bytes_per_s: f64) -> String {
    if !(bytes_per_s.is_finite() && bytes_per_s >= 0.0) {
        return "n/a".to_string();
    }
    const UNITS: [(&str, f64); 4] = [("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3), ("B/s", 1.0)];
    for (unit, scale) in UNITS {
        if bytes_per_s >= scale {
            return format!("{:.1} {unit}", bytes_per_s / scale);
        }
    }
    format!("{bytes_per_s:.0} B/s")
}

/// `12.3 ms ± 0.4 ms`, or just the mean with a single run.
pub fn format_mean_stddev(summary: &Summary) -> String {
    match summary.stddev {
        Some(stddev) => format!(
            "{} ± {}",
            format_seconds(summary.mean),
            format_seconds(stddev)
        ),
        None => format_seconds(summary.mean),
    }
}

/// `12.30 ± 0.40 ms`: the mean and σ with one unit when they share it (the terminal
/// tables' narrow form of [`format_mean_stddev`]).
pub fn format_mean_stddev_compact(summary: &Summary) -> String {
    let mean = format_seconds(summary.mean);
    let Some(stddev) = summary.stddev else {
        return mean;
    };
    let stddev = format_seconds(stddev);
    match (mean.rsplit_once(' '), stddev.rsplit_once(' ')) {
        (Some((mean_value, unit)), Some((stddev_value, stddev_unit))) if unit == stddev_unit => {
            format!("{mean_value} ± {stddev_value} {unit}")
        }
        _ => format!("{mean} ± {stddev}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn binomial_tail_of_known_values() {
        assert!(close(binomial_half_cdf(5, 0), 1.0 / 32.0));
        assert!(close(binomial_half_cdf(10, 2), 56.0 / 1024.0));
        assert!(close(binomial_half_cdf(7, 7), 1.0));
    }

    /// The interval is the widest-k pair of order statistics whose exact coverage is
    /// still ≥ 95 %: k + 1 would fall short. Baseline 1.0 and times 1…n make ratio i the
    /// i-th order statistic, so the interval shows which k was chosen.
    #[test]
    fn paired_interval_is_the_tightest_with_95_percent_coverage() {
        for n in 1..=60usize {
            let samples: Vec<f64> = (1..=n).rev().map(|i| i as f64).collect();
            let paired = paired_ratio(&samples, &vec![1.0; n]).unwrap();
            assert_eq!(paired.pairs, n);
            assert!(close(paired.median, (n as f64 + 1.0) / 2.0));
            match paired.interval {
                None => assert!(n < 6, "n = {n} has a 95 % interval"),
                Some((low, high)) => {
                    let k = low as usize;
                    assert_eq!(high as usize, n + 1 - k, "symmetric order statistics");
                    let coverage = |k: usize| 1.0 - 2.0 * binomial_half_cdf(n, k - 1);
                    assert!(coverage(k) >= PAIRED_CONFIDENCE, "n = {n}, k = {k}");
                    assert!(
                        k + 1 > n / 2 || coverage(k + 1) < PAIRED_CONFIDENCE,
                        "n = {n}: k = {k} is not the tightest"
                    );
                }
            }
        }
        assert_eq!(
            paired_ratio(&[1.0; 10], &[1.0; 10]).unwrap().interval,
            Some((1.0, 1.0))
        );
    }

    /// 2^-n is below the smallest `f64` from n = 1075 on: the interval must not collapse
    /// to the middle pair there (the exact one for 2000 runs is about [x₉₅₆, x₁₀₄₅]).
    #[test]
    fn thousands_of_runs_keep_a_95_percent_interval() {
        assert!(close(binomial_half_cdf(2000, 2000), 1.0));
        let tail = binomial_half_cdf(2000, 955);
        assert!(tail > 0.01 && tail <= 0.025, "P(B ≤ 955) = {tail}");
        let samples: Vec<f64> = (1..=2000).rev().map(f64::from).collect();
        let (low, high) = paired_ratio(&samples, &vec![1.0; 2000])
            .unwrap()
            .interval
            .unwrap();
        assert!((940.0..970.0).contains(&low), "[{low}, {high}]");
        assert_eq!(high, 2001.0 - low);
    }

    /// The chance that an interval misses on one side is the exact tail of its rank.
    #[test]
    fn chance_per_side_is_the_exact_tail() {
        assert_eq!(chance_per_side(5), None);
        let ten = chance_per_side(10).unwrap();
        assert!(close(ten, 11.0 / 1024.0), "{ten}");
        let forty = chance_per_side(40).unwrap();
        assert!((0.019..0.0193).contains(&forty), "{forty}");
        for pairs in 6..300 {
            assert!(chance_per_side(pairs).unwrap() <= 0.025);
        }
    }

    /// A paired ratio far below 1 keeps two significant digits, as a relative time does.
    #[test]
    fn small_paired_ratios_keep_their_digits() {
        let small = PairedRatio {
            median: 0.0042,
            interval: Some((0.0040, 0.0045)),
            pairs: 10,
        };
        assert_eq!(small.display(), "0.0042 [0.0040, 0.0045]");
        let usual = PairedRatio {
            median: 0.974,
            interval: Some((0.951, 0.992)),
            pairs: 10,
        };
        assert_eq!(usual.display(), "0.97 [0.95, 0.99]");
    }

    /// Pairing removes what both members of a pair share: here every run's time drifts
    /// by 40 % over the rounds, which hides a constant 5 % difference from the unpaired
    /// comparison (the error bar of the mean ratio spans 1) but not from the paired one.
    #[test]
    fn pairing_sees_through_a_drift_both_sides_share() {
        let baseline: Vec<f64> = (0..12).map(|round| 1.0 + 0.04 * round as f64).collect();
        let slower: Vec<f64> = baseline.iter().map(|b| b * 1.05).collect();
        let unpaired = Summary::from_samples(&slower)
            .unwrap()
            .relative_to(&Summary::from_samples(&baseline).unwrap())
            .unwrap();
        assert!(unpaired.ratio - unpaired.error.unwrap() < 1.0);
        let paired = paired_ratio(&slower, &baseline).unwrap();
        assert!((paired.median - 1.05).abs() < 1e-9);
        assert_eq!(paired.verdict(), Some(Verdict::Above));
        let faster: Vec<f64> = baseline.iter().map(|b| b * 0.95).collect();
        assert_eq!(
            paired_ratio(&faster, &baseline).unwrap().verdict(),
            Some(Verdict::Below)
        );
        // Ratios on both sides of 1: no difference shown.
        let mixed: Vec<f64> = baseline
            .iter()
            .enumerate()
            .map(|(i, b)| if i % 2 == 0 { b * 1.05 } else { b * 0.95 })
            .collect();
        assert_eq!(
            paired_ratio(&mixed, &baseline).unwrap().verdict(),
            Some(Verdict::Straddles)
        );
        // Five pairs: no interval, so no verdict either way.
        assert_eq!(
            paired_ratio(&slower[..5], &baseline[..5])
                .unwrap()
                .verdict(),
            None
        );
        assert_eq!(paired_ratio(&[], &[]), None);
        assert_eq!(paired_ratio(&[1.0], &[0.0]), None);
    }

    /// Differences pair like ratios: a constant offset over a shared drift is found
    /// exactly, with an interval that excludes 0; below 6 pairs there is no interval.
    #[test]
    fn paired_differences_see_through_a_drift_both_sides_share() {
        let baseline: Vec<f64> = (0..12).map(|round| 1.0 + 0.04 * round as f64).collect();
        let later: Vec<f64> = baseline.iter().map(|b| b + 0.01).collect();
        let difference = paired_difference(&later, &baseline).unwrap();
        assert!((difference.median - 0.01).abs() < 1e-12);
        let (low, high) = difference.interval.unwrap();
        assert!(low > 0.0 && high < 0.010_000_001, "{low} {high}");
        // Offsets of ±0.01 alternating: the interval holds 0 (the sign test's own rank
        // bounds, as for ratios: 12 pairs give the 3rd and 10th values).
        let mixed: Vec<f64> = baseline
            .iter()
            .enumerate()
            .map(|(i, b)| if i % 2 == 0 { b + 0.01 } else { b - 0.01 })
            .collect();
        let (low, high) = paired_difference(&mixed, &baseline)
            .unwrap()
            .interval
            .unwrap();
        assert!(low < 0.0 && high > 0.0, "{low} {high}");
        assert_eq!(
            paired_difference(&later[..5], &baseline[..5])
                .unwrap()
                .interval,
            None
        );
        assert_eq!(paired_difference(&[], &[]), None);
        // The interval of ratios is the same order statistics as before.
        let ratios = paired_ratio(&mixed, &baseline).unwrap();
        assert_eq!(ratios.pairs, 12);
        assert!(ratios.interval.is_some());
    }

    #[test]
    fn summary_of_known_samples() {
        // mean 5, squared deviations 9+1+1+9+0 = 20 → sample variance 5.
        let s = Summary::from_samples(&[2.0, 4.0, 6.0, 8.0, 5.0]).unwrap();
        assert_eq!(s.runs, 5);
        assert!(close(s.mean, 5.0));
        assert!(close(s.stddev.unwrap(), 5f64.sqrt()));
        assert!(close(s.median, 5.0));
        assert!(close(s.min, 2.0));
        assert!(close(s.max, 8.0));
    }

    #[test]
    fn even_count_median_and_single_run() {
        assert!(close(median(&[4.0, 1.0, 3.0, 2.0]), 2.5));
        let s = Summary::from_samples(&[0.25]).unwrap();
        assert_eq!(s.stddev, None);
        assert_eq!(warnings(&[0.25]), vec![Warning::SingleRun]);
        assert!(Summary::from_samples(&[]).is_none());
        assert!(Summary::from_samples(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn relative_with_propagated_error() {
        let base = Summary::from_samples(&[1.0, 3.0]).unwrap(); // mean 2, σ √2
        let other = Summary::from_samples(&[3.0, 5.0]).unwrap(); // mean 4, σ √2
        let rel = other.relative_to(&base).unwrap();
        assert!(close(rel.ratio, 2.0));
        let expected = 2.0 * ((2f64.sqrt() / 4.0).powi(2) + (2f64.sqrt() / 2.0).powi(2)).sqrt();
        assert!(close(rel.error.unwrap(), expected));
        assert_eq!(rel.display(), format!("2.00 ± {expected:.2}"));
        let fast = Relative {
            ratio: 0.0042,
            error: Some(0.0001),
        };
        assert_eq!(fast.display(), "0.0042 ± 0.0001");
        let tenth = Relative {
            ratio: 0.07,
            error: None,
        };
        assert_eq!(tenth.display(), "0.070");
        let itself = base.relative_to(&base).unwrap();
        assert!(close(itself.ratio, 1.0));
    }

    #[test]
    fn relative_without_sigma_or_baseline() {
        let one = Summary::from_samples(&[2.0]).unwrap();
        let two = Summary::from_samples(&[1.0, 1.0]).unwrap();
        assert_eq!(one.relative_to(&two).unwrap().error, None);
        let zero = Summary::from_samples(&[0.0, 0.0]).unwrap();
        assert!(one.relative_to(&zero).is_none());
    }

    #[test]
    fn outliers_and_cold_first_run() {
        let steady = [1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01];
        assert!(outlier_indices(&steady).is_empty());
        assert!(warnings(&steady).is_empty());

        let mut cold = steady.to_vec();
        cold[0] = 5.0;
        assert_eq!(outlier_indices(&cold), vec![0]);
        let found = warnings(&cold);
        assert!(found.contains(&Warning::ColdFirstRun), "{found:?}");
        assert!(found
            .iter()
            .any(|w| matches!(w, Warning::HighVariance { .. })));

        let mut late = steady.to_vec();
        late[4] = 5.0;
        assert_eq!(outlier_indices(&late), vec![4]);
        assert!(warnings(&late).contains(&Warning::Outliers { count: 1 }));
        assert!(!warnings(&late).contains(&Warning::ColdFirstRun));
    }

    #[test]
    fn high_variance_without_outliers() {
        let noisy = [1.0, 1.5, 2.0, 1.2, 1.8];
        assert!(outlier_indices(&noisy).is_empty());
        assert!(matches!(
            warnings(&noisy)[..],
            [Warning::HighVariance { .. }]
        ));
    }

    #[test]
    fn seconds_are_formatted_with_units() {
        assert_eq!(format_seconds(1.5), "1.500 s");
        assert_eq!(format_seconds(0.0123), "12.30 ms");
        assert_eq!(format_seconds(0.0000123), "12.3 µs");
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(4096), "4.00 KiB");
        assert_eq!(format_bytes(15 << 20), "15.0 MiB");
        assert_eq!(format_bytes(3 << 30), "3.00 GiB");
        assert_eq!(format_rate(2_147_483_648.0), "2.1 GB/s");
        assert_eq!(format_rate(512e6), "512.0 MB/s");
        assert_eq!(format_rate(1500.0), "1.5 kB/s");
        assert_eq!(format_rate(0.0), "0 B/s");
        assert_eq!(format_rate(1.0 / 0.0), "n/a");
        assert_eq!(format_rate(f64::NAN), "n/a");
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;
        use proptest::test_runner::{Config, RngSeed};

        fn config() -> Config {
            // A fixed seed keeps the suite deterministic.
            Config {
                cases: 256,
                rng_seed: RngSeed::Fixed(0x5eed),
                failure_persistence: None,
                ..Config::default()
            }
        }

        proptest! {
            #![proptest_config(config())]

            #[test]
            fn summaries_are_ordered_and_self_relative_is_one(
                samples in prop::collection::vec(1e-6f64..1e3, 1..40)
            ) {
                let s = Summary::from_samples(&samples).unwrap();
                prop_assert!(s.min <= s.median && s.median <= s.max);
                prop_assert!(s.min <= s.mean * (1.0 + 1e-12) && s.mean <= s.max * (1.0 + 1e-12));
                prop_assert!(s.stddev.map_or(samples.len() == 1, |sd| sd >= 0.0));
                let itself = s.relative_to(&s).unwrap();
                prop_assert!((itself.ratio - 1.0).abs() < 1e-12);
                // Never panics, whatever the samples.
                let _ = warnings(&samples);
                prop_assert!(outlier_indices(&samples).len() <= samples.len());
            }
        }
    }

    #[test]
    fn mean_and_sigma_share_their_unit() {
        let same = Summary::from_samples(&[0.010, 0.014]).unwrap();
        assert_eq!(format_mean_stddev_compact(&same), "12.00 ± 2.83 ms");
        let mixed = Summary::from_samples(&[1.0, 1.004]).unwrap();
        assert_eq!(format_mean_stddev_compact(&mixed), "1.002 s ± 2.83 ms");
        let one = Summary::from_samples(&[0.5]).unwrap();
        assert_eq!(format_mean_stddev_compact(&one), "500.00 ms");
    }
}
