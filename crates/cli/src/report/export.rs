//! Result files: JSON, CSV and Markdown.
//!
//! Every error names the file and says what to do, because the usual causes (a missing
//! directory, a read-only location) are fixed by the user, not by the program.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

fn create(path: &Path, what: &str) -> Result<BufWriter<File>> {
    let file = File::create(path).with_context(|| {
        format!(
            "cannot create the {what} file {}: check that its directory exists and is \
             writable, or choose another path",
            path.display()
        )
    })?;
    Ok(BufWriter::new(file))
}

fn finish(mut writer: BufWriter<File>, path: &Path, what: &str) -> Result<()> {
    writer.flush().with_context(|| {
        format!(
            "cannot write the {what} file {} (disk full?); free space or choose another path",
            path.display()
        )
    })
}

/// Writes `records` as a pretty-printed JSON array.
pub fn export_json<T: Serialize>(path: &Path, records: &[T]) -> Result<()> {
    let mut writer = create(path, "JSON")?;
    serde_json::to_writer_pretty(&mut writer, records)
        .with_context(|| format!("cannot write the JSON file {}", path.display()))?;
    writeln!(writer).with_context(|| format!("cannot write the JSON file {}", path.display()))?;
    finish(writer, path, "JSON")
}

/// Writes `records` as CSV with a header row taken from the field names.
///
/// Records must be flat (no nested structs, maps or sequences): the csv crate cannot
/// give nested fields a column name. `Option::None` becomes an empty cell.
pub fn export_csv<T: Serialize>(path: &Path, records: &[T]) -> Result<()> {
    let writer = create(path, "CSV")?;
    let mut csv_writer = csv::Writer::from_writer(writer);
    for record in records {
        csv_writer.serialize(record).with_context(|| {
            format!(
                "cannot write a record to the CSV file {} (records must be flat structs)",
                path.display()
            )
        })?;
    }
    let writer = csv_writer
        .into_inner()
        .map_err(|error| anyhow::anyhow!("{}", error.error()))
        .with_context(|| format!("cannot write the CSV file {}", path.display()))?;
    finish(writer, path, "CSV")
}

/// A GitHub-flavoured Markdown table; `|` in cells is escaped and newlines become spaces,
/// so a cell can never break the table.
pub fn markdown_table<H: AsRef<str>, C: AsRef<str>>(headers: &[H], rows: &[Vec<C>]) -> String {
    fn cell(text: &str) -> String {
        text.replace('|', "\\|").replace(['\n', '\r'], " ")
    }
    let mut out = String::new();
    let head: Vec<String> = headers.iter().map(|h| cell(h.as_ref())).collect();
    out.push_str(&format!("| {} |\n", head.join(" | ")));
    out.push_str(&format!("|{}\n", "---|".repeat(headers.len())));
    for row in rows {
        let mut cells: Vec<String> = row.iter().map(|c| cell(c.as_ref())).collect();
        // A short row still renders as a full row.
        cells.resize(headers.len().max(cells.len()), String::new());
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

/// Writes a Markdown table (see [`markdown_table`]).
pub fn export_markdown<H: AsRef<str>, C: AsRef<str>>(
    path: &Path,
    headers: &[H],
    rows: &[Vec<C>],
) -> Result<()> {
    export_markdown_document(path, &markdown_table(headers, rows))
}

/// Writes prepared Markdown text (e.g. an environment header followed by several tables).
pub fn export_markdown_document(path: &Path, text: &str) -> Result<()> {
    let mut writer = create(path, "Markdown")?;
    writer
        .write_all(text.as_bytes())
        .with_context(|| format!("cannot write the Markdown file {}", path.display()))?;
    finish(writer, path, "Markdown")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Row {
        test: u32,
        name: String,
        mean_s: f64,
        stddev_s: Option<f64>,
    }

    fn rows() -> Vec<Row> {
        vec![
            Row {
                test: 1,
                name: "1000 INSERTs, \"quoted\"".into(),
                mean_s: 0.5,
                stddev_s: Some(0.01),
            },
            Row {
                test: 2,
                name: "comma, and | pipe".into(),
                mean_s: 1.25e-3,
                stddev_s: None,
            },
        ]
    }

    #[test]
    fn json_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        export_json(&path, &rows()).unwrap();
        let back: Vec<Row> = serde_json::from_reader(File::open(&path).unwrap()).unwrap();
        assert_eq!(back, rows());
    }

    #[test]
    fn csv_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.csv");
        export_csv(&path, &rows()).unwrap();
        let mut reader = csv::Reader::from_path(&path).unwrap();
        let headers: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
        assert_eq!(headers, ["test", "name", "mean_s", "stddev_s"]);
        let back: Vec<Row> = reader.deserialize().map(|r| r.unwrap()).collect();
        assert_eq!(back, rows());
    }

    #[test]
    fn markdown_escapes_pipes() {
        let table = markdown_table(&["Command", "Mean"], &[vec!["a|b", "1 ms"], vec!["c"]]);
        assert_eq!(
            table,
            "| Command | Mean |\n|---|---|\n| a\\|b | 1 ms |\n| c |  |\n"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.md");
        export_markdown(&path, &["Command", "Mean"], &[vec!["a|b", "1 ms"]]).unwrap();
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .starts_with("| Command |"));
    }

    #[test]
    fn errors_name_the_file_and_the_remedy() {
        let path = Path::new("/nonexistent-dir-sqlite-uring/out.json");
        let message = format!("{:#}", export_json(path, &rows()).unwrap_err());
        assert!(
            message.contains("/nonexistent-dir-sqlite-uring/out.json"),
            "{message}"
        );
        assert!(message.contains("directory exists"), "{message}");
    }
}
