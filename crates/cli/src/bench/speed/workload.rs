//! The 16 tests of sqlite.org/speed.html as data: statements with parameters.
//!
//! Each statement is a template with `?N` placeholders plus its values. The default mode
//! renders the values into SQL text (integers as decimals, text as quoted literals), so
//! SQLite parses every statement, as the original Tcl-generated scripts did; `--prepared`
//! prepares each template once and binds the values. Both produce the same database.
//!
//! Random numbers come from a fixed-seed generator that is reseeded per test, so the
//! prologue that rebuilds the state of tests 1…N−1 regenerates exactly the same rows.

use crate::bench::common::rng::SplitMix64;

/// Seed of the whole workload; changing it changes every checksum.
const SEED: u64 = 0x5eed_0f59_117e_5f00;

/// Test numbers and titles, as speed.html names them.
pub const TESTS: [(u32, &str); 16] = [
    (1, "1000 INSERTs"),
    (2, "25000 INSERTs in a transaction"),
    (3, "25000 INSERTs into an indexed table"),
    (4, "100 SELECTs without an index"),
    (5, "100 SELECTs on a string comparison"),
    (6, "Creating an index"),
    (7, "5000 SELECTs with an index"),
    (8, "1000 UPDATEs without an index"),
    (9, "25000 UPDATEs with an index"),
    (10, "25000 text UPDATEs with an index"),
    (11, "INSERTs from a SELECT"),
    (12, "DELETE without an index"),
    (13, "DELETE with an index"),
    (14, "A big INSERT after a big DELETE"),
    (15, "A big DELETE followed by many small INSERTs"),
    (16, "DROP TABLE"),
];

/// Title of test `number` (1-based).
pub fn test_name(number: u32) -> &'static str {
    TESTS
        .iter()
        .find(|(n, _)| *n == number)
        .map_or("unknown test", |(_, name)| name)
}

/// One bound value.
#[derive(Clone, Debug, PartialEq)]
pub enum Param {
    Int(i64),
    Text(String),
}

/// One SQL statement of a test.
#[derive(Clone, Debug, PartialEq)]
pub struct Statement {
    /// SQL with `?1`, `?2`, … placeholders (or none).
    pub template: &'static str,
    pub params: Vec<Param>,
}

impl Statement {
    fn new(template: &'static str, params: Vec<Param>) -> Statement {
        Statement { template, params }
    }

    fn plain(template: &'static str) -> Statement {
        Statement::new(template, Vec::new())
    }

    /// Transaction control, which the prologue leaves out (it wraps everything in one).
    pub fn is_transaction_control(&self) -> bool {
        matches!(self.template, "BEGIN" | "COMMIT")
    }

    /// The statement as SQL text with its values written in, as speed.html ran it.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(self.template.len() + 48);
        let mut chars = self.template.char_indices().peekable();
        while let Some((_, ch)) = chars.next() {
            if ch != '?' {
                out.push(ch);
                continue;
            }
            let mut index = 0usize;
            while let Some(&(_, digit)) = chars.peek() {
                let Some(value) = digit.to_digit(10) else {
                    break;
                };
                index = index * 10 + value as usize;
                chars.next();
            }
            match self.params.get(index.wrapping_sub(1)) {
                Some(Param::Int(value)) => out.push_str(&value.to_string()),
                Some(Param::Text(text)) => {
                    out.push('\'');
                    out.push_str(&text.replace('\'', "''"));
                    out.push('\'');
                }
                // Templates are ours and tested; an unmatched placeholder stays visible.
                None => out.push('?'),
            }
        }
        out
    }
}

/// Row and statement counts of speed.html multiplied by `--scale` (at least 1 each).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sizes {
    pub scale: f64,
}

impl Sizes {
    pub fn n(&self, full: u32) -> i64 {
        ((full as f64 * self.scale).round() as i64).max(1)
    }
}

/// The rows' numbers: the benchmarks' one generator, seeded per test.
struct Rng(SplitMix64);

impl Rng {
    fn for_test(number: u32) -> Rng {
        Rng(SplitMix64::new(SEED ^ (u64::from(number) << 32)))
    }

    /// Uniform in `0..bound` (the modulo bias is irrelevant for a benchmark).
    fn below(&mut self, bound: u64) -> i64 {
        self.0.below(bound) as i64
    }
}

const ONES: [&str; 20] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
const TENS: [&str; 10] = [
    "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];

/// A number spelled out as speed.html does: `13153` → "thirteen thousand one hundred
/// fifty three" (no "and", no hyphens). Defined for 0 ≤ n < 1 000 000.
pub fn number_name(n: i64) -> String {
    fn below_thousand(n: i64, out: &mut Vec<&'static str>) {
        if n >= 100 {
            out.push(ONES[(n / 100) as usize]);
            out.push("hundred");
        }
        let rest = n % 100;
        if rest >= 20 {
            out.push(TENS[(rest / 10) as usize]);
            if rest % 10 != 0 {
                out.push(ONES[(rest % 10) as usize]);
            }
        } else if rest > 0 {
            out.push(ONES[rest as usize]);
        }
    }
    if n == 0 {
        return "zero".to_string();
    }
    let mut words = Vec::new();
    if n >= 1000 {
        below_thousand(n / 1000, &mut words);
        words.push("thousand");
    }
    below_thousand(n % 1000, &mut words);
    words.join(" ")
}

fn insert_rows(
    rng: &mut Rng,
    template: &'static str,
    count: i64,
    bound: u64,
    out: &mut Vec<Statement>,
) {
    for a in 1..=count {
        let b = rng.below(bound);
        out.push(Statement::new(
            template,
            vec![Param::Int(a), Param::Int(b), Param::Text(number_name(b))],
        ));
    }
}

/// The statements of test `number` at `sizes`, in order.
pub fn statements(number: u32, sizes: Sizes) -> Vec<Statement> {
    let mut rng = Rng::for_test(number);
    let mut out = Vec::new();
    match number {
        1 => {
            out.push(Statement::plain(
                "CREATE TABLE t1(a INTEGER, b INTEGER, c VARCHAR(100))",
            ));
            // No BEGIN: each INSERT is its own transaction, the point of this test.
            insert_rows(
                &mut rng,
                "INSERT INTO t1 VALUES(?1,?2,?3)",
                sizes.n(1000),
                100_000,
                &mut out,
            );
        }
        2 => {
            out.push(Statement::plain("BEGIN"));
            out.push(Statement::plain(
                "CREATE TABLE t2(a INTEGER, b INTEGER, c VARCHAR(100))",
            ));
            insert_rows(
                &mut rng,
                "INSERT INTO t2 VALUES(?1,?2,?3)",
                sizes.n(25_000),
                100_000,
                &mut out,
            );
            out.push(Statement::plain("COMMIT"));
        }
        3 => {
            out.push(Statement::plain("BEGIN"));
            out.push(Statement::plain(
                "CREATE TABLE t3(a INTEGER, b INTEGER, c VARCHAR(100))",
            ));
            out.push(Statement::plain("CREATE INDEX i3 ON t3(c)"));
            insert_rows(
                &mut rng,
                "INSERT INTO t3 VALUES(?1,?2,?3)",
                sizes.n(25_000),
                100_000,
                &mut out,
            );
            out.push(Statement::plain("COMMIT"));
        }
        4 => {
            out.push(Statement::plain("BEGIN"));
            for i in 0..sizes.n(100) {
                out.push(Statement::new(
                    "SELECT count(*), avg(b) FROM t2 WHERE b>=?1 AND b<?2",
                    vec![Param::Int(i * 100), Param::Int(i * 100 + 1000)],
                ));
            }
            out.push(Statement::plain("COMMIT"));
        }
        5 => {
            out.push(Statement::plain("BEGIN"));
            for i in 1..=sizes.n(100) {
                out.push(Statement::new(
                    "SELECT count(*), avg(b) FROM t2 WHERE c LIKE ?1",
                    vec![Param::Text(format!("%{}%", number_name(i)))],
                ));
            }
            out.push(Statement::plain("COMMIT"));
        }
        6 => {
            out.push(Statement::plain("CREATE INDEX i2a ON t2(a)"));
            out.push(Statement::plain("CREATE INDEX i2b ON t2(b)"));
        }
        7 => {
            // No BEGIN: each SELECT is its own read transaction, as in speed.html.
            for i in 0..sizes.n(5000) {
                out.push(Statement::new(
                    "SELECT count(*), avg(b) FROM t2 WHERE b>=?1 AND b<?2",
                    vec![Param::Int(i * 100), Param::Int(i * 100 + 100)],
                ));
            }
        }
        8 => {
            out.push(Statement::plain("BEGIN"));
            for i in 0..sizes.n(1000) {
                out.push(Statement::new(
                    "UPDATE t1 SET b=b*2 WHERE a>=?1 AND a<?2",
                    vec![Param::Int(i * 10), Param::Int(i * 10 + 10)],
                ));
            }
            out.push(Statement::plain("COMMIT"));
        }
        9 => {
            out.push(Statement::plain("BEGIN"));
            for a in 1..=sizes.n(25_000) {
                let b = rng.below(500_000);
                out.push(Statement::new(
                    "UPDATE t2 SET b=?1 WHERE a=?2",
                    vec![Param::Int(b), Param::Int(a)],
                ));
            }
            out.push(Statement::plain("COMMIT"));
        }
        10 => {
            out.push(Statement::plain("BEGIN"));
            for a in 1..=sizes.n(25_000) {
                let value = rng.below(500_000);
                out.push(Statement::new(
                    "UPDATE t2 SET c=?1 WHERE a=?2",
                    vec![Param::Text(number_name(value)), Param::Int(a)],
                ));
            }
            out.push(Statement::plain("COMMIT"));
        }
        11 => {
            out.push(Statement::plain("BEGIN"));
            out.push(Statement::plain("INSERT INTO t1 SELECT b,a,c FROM t2"));
            out.push(Statement::plain("INSERT INTO t2 SELECT b,a,c FROM t1"));
            out.push(Statement::plain("COMMIT"));
        }
        12 => out.push(Statement::plain("DELETE FROM t2 WHERE c LIKE '%fifty%'")),
        13 => out.push(Statement::new(
            "DELETE FROM t2 WHERE a>10 AND a<?1",
            vec![Param::Int(sizes.n(20_000))],
        )),
        14 => out.push(Statement::plain("INSERT INTO t2 SELECT * FROM t1")),
        15 => {
            out.push(Statement::plain("BEGIN"));
            out.push(Statement::plain("DELETE FROM t1"));
            insert_rows(
                &mut rng,
                "INSERT INTO t1 VALUES(?1,?2,?3)",
                sizes.n(12_000),
                100_000,
                &mut out,
            );
            out.push(Statement::plain("COMMIT"));
        }
        16 => {
            out.push(Statement::plain("DROP TABLE t1"));
            out.push(Statement::plain("DROP TABLE t2"));
            out.push(Statement::plain("DROP TABLE t3"));
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_spelled_like_speed_html() {
        assert_eq!(
            number_name(13153),
            "thirteen thousand one hundred fifty three"
        );
        assert_eq!(
            number_name(88509),
            "eighty eight thousand five hundred nine"
        );
        assert_eq!(
            number_name(148382),
            "one hundred forty eight thousand three hundred eighty two"
        );
        assert_eq!(
            number_name(383099),
            "three hundred eighty three thousand ninety nine"
        );
        assert_eq!(number_name(0), "zero");
        assert_eq!(number_name(100), "one hundred");
        assert_eq!(number_name(99), "ninety nine");
        assert_eq!(number_name(20000), "twenty thousand");
    }

    #[test]
    fn statements_render_as_sql_text() {
        let s = Statement::new(
            "INSERT INTO t1 VALUES(?1,?2,?3)",
            vec![Param::Int(1), Param::Int(13153), Param::Text("it's".into())],
        );
        assert_eq!(s.render(), "INSERT INTO t1 VALUES(1,13153,'it''s')");
        assert_eq!(Statement::plain("BEGIN").render(), "BEGIN");
    }

    #[test]
    fn sizes_follow_speed_html_and_scale() {
        let full = Sizes { scale: 1.0 };
        assert_eq!(statements(1, full).len(), 1 + 1000);
        assert_eq!(statements(2, full).len(), 3 + 25_000);
        assert_eq!(statements(7, full).len(), 5000);
        assert_eq!(statements(15, full).len(), 3 + 12_000);
        let tiny = Sizes { scale: 0.01 };
        assert_eq!(statements(1, tiny).len(), 1 + 10);
        assert_eq!(statements(4, tiny).len(), 2 + 1);
        for (number, _) in TESTS {
            assert!(!statements(number, tiny).is_empty(), "test {number}");
        }
    }

    #[test]
    fn data_is_deterministic_per_test() {
        let sizes = Sizes { scale: 0.1 };
        assert_eq!(statements(9, sizes), statements(9, sizes));
        assert_ne!(statements(1, sizes)[1], statements(15, sizes)[3]);
    }
}
