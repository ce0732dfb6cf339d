//! Terminal tables of every benchmark: they fit the terminal, and a table written to a
//! pipe or a file is at most [`PIPED_WIDTH_COLUMNS`] wide in plain ASCII, so that nothing
//! downstream (a pager, a log, a CI page) cuts its borders.

use std::io::IsTerminal;

use comfy_table::presets::{ASCII_FULL_CONDENSED, UTF8_FULL_CONDENSED};
use comfy_table::{Cell, CellAlignment, ContentArrangement, Table};

/// Width of a table that is not shown on a terminal.
pub const PIPED_WIDTH_COLUMNS: u16 = 100;

/// Where a table goes: a terminal (whose width comfy-table reads) or anything else.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    Terminal,
    Piped,
}

impl Output {
    /// Where stdout goes.
    pub fn stdout() -> Output {
        Output::of(std::io::stdout().is_terminal())
    }

    /// Where stderr goes.
    pub fn stderr() -> Output {
        Output::of(std::io::stderr().is_terminal())
    }

    fn of(terminal: bool) -> Output {
        if terminal {
            Output::Terminal
        } else {
            Output::Piped
        }
    }
}

/// A table with `headers` and `rows`, the first `left_columns` columns left-aligned and
/// the others right-aligned (numbers), laid out for `output`: cells wrap rather than the
/// table growing past the terminal's width, or past [`PIPED_WIDTH_COLUMNS`] when piped.
pub fn new<H: AsRef<str>>(
    headers: &[H],
    rows: &[Vec<String>],
    left_columns: usize,
    output: Output,
) -> Table {
    let mut table = Table::new();
    match output {
        Output::Terminal => {
            table.load_style(UTF8_FULL_CONDENSED);
        }
        Output::Piped => {
            table.load_style(ASCII_FULL_CONDENSED);
            table.set_width(PIPED_WIDTH_COLUMNS);
        }
    }
    table
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(headers.iter().map(|h| h.as_ref()));
    for row in rows {
        table.add_row(row.iter().enumerate().map(|(i, text)| {
            let cell = Cell::new(text);
            if i < left_columns {
                cell
            } else {
                cell.set_alignment(CellAlignment::Right)
            }
        }));
    }
    table
}

/// Every line of a piped table is exactly as wide as the others and at most 100
/// columns, with a border character at both ends and rules in plain ASCII: no border is
/// cut or pushed out.
#[cfg(test)]
pub fn assert_fits_piped(rendered: &str) {
    let widths: Vec<usize> = rendered.lines().map(|l| l.chars().count()).collect();
    assert!(
        widths
            .iter()
            .all(|&w| w == widths[0] && w <= PIPED_WIDTH_COLUMNS as usize),
        "widths {widths:?}:\n{rendered}"
    );
    for line in rendered.lines() {
        if line.starts_with('+') {
            assert!(line.is_ascii(), "rule not in plain ASCII: {line}");
        }
        let first = line.chars().next().unwrap();
        let last = line.chars().last().unwrap();
        assert!("+|".contains(first) && "+|".contains(last), "cut: {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wide_table_wraps_to_100_columns_when_piped() {
        let headers = [
            "Command",
            "A rather long header",
            "Another long one",
            "Third",
        ];
        let row = vec![
            "io_uring?uring_sync_plan=separate (wal)".to_string(),
            "123.45 ms ± 12.34 ms".to_string(),
            "0.97 [0.95, 0.99] and more words here".to_string(),
            "a very long cell with many words that must wrap somewhere".to_string(),
        ];
        let rows = vec![row.clone(), row];
        let rendered = new(&headers, &rows, 1, Output::Piped).to_string();
        assert_fits_piped(&rendered);
        // Unconstrained, the same table is wider than a piped one may be.
        let mut wide = new(&headers, &rows, 1, Output::Piped);
        wide.set_content_arrangement(ContentArrangement::Disabled);
        assert!(wide.to_string().lines().any(|l| l.chars().count() > 100));
    }
}
