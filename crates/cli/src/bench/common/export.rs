//! The one export manager of every benchmark, as hyperfine has one: it takes the export
//! flags once, refuses a path it could not write before the first run (with the flag,
//! the path and the remedy), and writes every requested format once the results exist.

use std::path::PathBuf;

use anyhow::Result;
use serde::Serialize;

use super::options::{check_output_path, ExportOptions};
use crate::report::chart::SvgChart;
use crate::report::export;

/// What a benchmark's results look like in each export format.
pub trait Exportable {
    /// One CSV row per result (flat records).
    type CsvRow: Serialize;
    /// One element of the JSON array.
    type JsonItem: Serialize;
    /// What `--chart` draws.
    type Chart: SvgChart;

    fn csv_rows(&self) -> &[Self::CsvRow];
    fn json_items(&self) -> &[Self::JsonItem];
    /// The whole report as a Markdown document.
    fn markdown(&self) -> String;
    /// The chart, or why these results have nothing to chart.
    fn chart(&self) -> Result<Self::Chart, String>;
}

/// One requested result file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Markdown,
    Csv,
    Json,
    Chart,
}

impl Format {
    fn flag(self) -> &'static str {
        match self {
            Format::Markdown => "--export-markdown",
            Format::Csv => "--export-csv",
            Format::Json => "--export-json",
            Format::Chart => "--chart",
        }
    }
}

/// The result files requested on the command line, checked before the run.
#[derive(Debug)]
pub struct ExportManager {
    files: Vec<(Format, PathBuf)>,
}

impl ExportManager {
    /// Takes the export flags and checks every path now, so that a typo costs nothing
    /// rather than the whole run.
    pub fn new(options: &ExportOptions) -> Result<ExportManager> {
        let requested = [
            (Format::Markdown, &options.export_markdown),
            (Format::Csv, &options.export_csv),
            (Format::Json, &options.export_json),
            (Format::Chart, &options.chart),
        ];
        let mut files = Vec::new();
        for (format, path) in requested {
            let Some(path) = path else { continue };
            check_output_path(format.flag(), path)?;
            if let Some((other, _)) = files.iter().find(|(_, p): &&(Format, PathBuf)| p == path) {
                anyhow::bail!(
                    "{} {} and {} {} name the same file; give each export its own path",
                    other.flag(),
                    path.display(),
                    format.flag(),
                    path.display()
                );
            }
            files.push((format, path.clone()));
        }
        Ok(ExportManager { files })
    }

    /// Writes every requested file. Returns the warnings to show (a chart with nothing to
    /// draw is not an error).
    pub fn write(&self, results: &impl Exportable) -> Result<Vec<String>> {
        let mut warnings = Vec::new();
        for (format, path) in &self.files {
            match format {
                Format::Markdown => export::export_markdown_document(path, &results.markdown())?,
                Format::Csv => export::export_csv(path, results.csv_rows())?,
                Format::Json => export::export_json(path, results.json_items())?,
                Format::Chart => match results.chart() {
                    Ok(chart) => chart.write_svg(path)?,
                    Err(why) => warnings.push(format!("--chart {}: {why}", path.display())),
                },
            }
        }
        Ok(warnings)
    }
}

/// Results whose CSV rows are also the items of the JSON array, with their Markdown
/// report and their chart, made once the run is over.
pub struct Report<R, C> {
    pub records: Vec<R>,
    pub markdown: String,
    /// What `--chart` draws, or why these results have nothing to chart.
    pub chart: Result<C, String>,
}

impl<R: Serialize, C: SvgChart + Clone> Exportable for Report<R, C> {
    type CsvRow = R;
    type JsonItem = R;
    type Chart = C;

    fn csv_rows(&self) -> &[R] {
        &self.records
    }

    fn json_items(&self) -> &[R] {
        &self.records
    }

    fn markdown(&self) -> String {
        self.markdown.clone()
    }

    fn chart(&self) -> Result<C, String> {
        self.chart.clone()
    }
}

/// Results written as CSV rows and as one JSON document (the settings, the runs and
/// their summaries), with their Markdown report and their chart.
pub struct Document<'a, R, J, C> {
    pub rows: &'a [R],
    pub json: J,
    pub markdown: String,
    /// What `--chart` draws, or why these results have nothing to chart.
    pub chart: Result<C, String>,
}

impl<R: Serialize, J: Serialize, C: SvgChart + Clone> Exportable for Document<'_, R, J, C> {
    type CsvRow = R;
    type JsonItem = J;
    type Chart = C;

    fn csv_rows(&self) -> &[R] {
        self.rows
    }

    fn json_items(&self) -> &[J] {
        std::slice::from_ref(&self.json)
    }

    fn markdown(&self) -> String {
        self.markdown.clone()
    }

    fn chart(&self) -> Result<C, String> {
        self.chart.clone()
    }
}

/// A benchmark's Markdown report, written in the order it reads: the title and the
/// header lines (environment, settings, cautions) as a list, then sections.
pub struct Markdown(String);

impl Markdown {
    /// `# title` and `header` as a list.
    pub fn new(title: &str, header: &[String]) -> Markdown {
        let mut text = format!("# {title}\n\n");
        for line in header {
            text.push_str(&format!("- {line}\n"));
        }
        Markdown(text)
    }

    /// `## heading` with `body` (a table, a paragraph) under it.
    pub fn section(&mut self, heading: &str, body: &str) {
        self.0.push_str(&format!("\n## {heading}\n\n{body}"));
    }

    /// `### heading` with `body` under it, inside the last section.
    pub fn subsection(&mut self, heading: &str, body: &str) {
        self.0.push_str(&format!("\n### {heading}\n\n{body}"));
    }

    /// Notes under the last section, as a list (nothing when there are none).
    pub fn notes(&mut self, notes: &[String]) {
        if notes.is_empty() {
            return;
        }
        self.0.push('\n');
        for note in notes {
            self.0.push_str(&format!("- {note}\n"));
        }
    }

    /// `## heading` with `lines` in a fenced block (`info`: its language, or none).
    pub fn block(&mut self, heading: &str, info: &str, lines: &[String]) {
        self.0.push_str(&format!("\n## {heading}\n\n```{info}\n"));
        for line in lines {
            self.0.push_str(line);
            self.0.push('\n');
        }
        self.0.push_str("```\n");
    }

    pub fn finish(self) -> String {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::chart::BarChart;
    use std::path::Path;

    struct Fake {
        rows: Vec<(u32, f64)>,
        chartable: bool,
    }

    impl Exportable for Fake {
        type CsvRow = (u32, f64);
        type JsonItem = (u32, f64);
        type Chart = BarChart;

        fn csv_rows(&self) -> &[(u32, f64)] {
            &self.rows
        }

        fn json_items(&self) -> &[(u32, f64)] {
            &self.rows
        }

        fn markdown(&self) -> String {
            "# fake\n".into()
        }

        fn chart(&self) -> Result<BarChart, String> {
            if !self.chartable {
                return Err("nothing to chart".into());
            }
            Ok(BarChart {
                title: "fake".into(),
                y_label: "x".into(),
                categories: vec!["1".into()],
                series: vec![crate::report::chart::Series {
                    name: "a".into(),
                    values: vec![Some(1.0)],
                    errors: vec![None],
                }],
                reference_line: None,
            })
        }
    }

    fn all_formats(dir: &Path) -> ExportOptions {
        ExportOptions {
            export_markdown: Some(dir.join("r.md")),
            export_csv: Some(dir.join("r.csv")),
            export_json: Some(dir.join("r.json")),
            chart: Some(dir.join("r.svg")),
        }
    }

    #[test]
    fn every_bad_path_is_refused_before_the_run_naming_flag_path_and_remedy() {
        let dir = tempfile::tempdir().unwrap();
        for flag in [
            "--export-markdown",
            "--export-csv",
            "--export-json",
            "--chart",
        ] {
            let mut options = all_formats(dir.path());
            let missing = PathBuf::from("/nonexistent-sqlite-uring/out");
            match flag {
                "--export-markdown" => options.export_markdown = Some(missing.clone()),
                "--export-csv" => options.export_csv = Some(missing.clone()),
                "--export-json" => options.export_json = Some(missing.clone()),
                _ => options.chart = Some(missing.clone()),
            }
            let message = ExportManager::new(&options).unwrap_err().to_string();
            assert!(
                message.contains(&format!("{flag} /nonexistent-sqlite-uring/out"))
                    && message.contains("does not exist")
                    && message.contains("create it or choose another path"),
                "{message}"
            );
        }
        let mut options = all_formats(dir.path());
        options.export_json = Some(dir.path().to_path_buf());
        let message = ExportManager::new(&options).unwrap_err().to_string();
        assert!(
            message.contains("--export-json") && message.contains("is a directory"),
            "{message}"
        );
        let mut options = all_formats(dir.path());
        options.export_csv = options.export_json.clone();
        let message = ExportManager::new(&options).unwrap_err().to_string();
        assert!(message.contains("name the same file"), "{message}");
        // Nothing was written by the checks.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn writes_every_requested_format_once_the_results_exist() {
        let dir = tempfile::tempdir().unwrap();
        let manager = ExportManager::new(&all_formats(dir.path())).unwrap();
        let results = Fake {
            rows: vec![(1, 0.5), (2, 0.25)],
            chartable: true,
        };
        assert!(manager.write(&results).unwrap().is_empty());
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
        assert_eq!(read("r.md"), "# fake\n");
        let json: Vec<(u32, f64)> = serde_json::from_str(&read("r.json")).unwrap();
        assert_eq!(json, results.rows);
        assert_eq!(read("r.csv").lines().count(), 2);
        assert!(read("r.svg").contains("<svg"));

        let nothing = Fake {
            rows: vec![],
            chartable: false,
        };
        let warnings = manager.write(&nothing).unwrap();
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].starts_with("--chart ") && warnings[0].contains("nothing to chart"));
        let none = ExportManager::new(&ExportOptions::default()).unwrap();
        assert!(none.write(&results).unwrap().is_empty());
    }

    #[test]
    fn a_markdown_report_reads_in_order() {
        let mut report = Markdown::new("sqlite-uring bench x", &["kernel: 6".to_string()]);
        report.block("Verdict", "text", &["faster".to_string()]);
        report.section("Test 1", "| a |\n");
        report.notes(&["warning: noisy".to_string()]);
        report.section("Test 2", "| b |\n");
        report.notes(&[]);
        assert_eq!(
            report.finish(),
            "# sqlite-uring bench x\n\n- kernel: 6\n\n## Verdict\n\n```text\nfaster\n```\n\
             \n## Test 1\n\n| a |\n\n- warning: noisy\n\n## Test 2\n\n| b |\n"
        );
    }
}
