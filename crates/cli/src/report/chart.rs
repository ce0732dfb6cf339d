//! SVG grouped bar chart: one group of bars per category, one colour per series.
//!
//! Kept to what reads at a glance: bars from zero, an optional dashed reference line
//! (e.g. 1.0 = as fast as the baseline), optional ±error whiskers, a legend, and category
//! labels under each group. Long category names should be shortened by the caller
//! (e.g. test numbers) and explained in the docs or the title.

use std::path::Path;

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;

/// One coloured series of bars.
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    /// One value per category; `None` leaves a gap (e.g. a target that did not run).
    pub values: Vec<Option<f64>>,
    /// Optional one-σ error per category, drawn as a whisker.
    pub errors: Vec<Option<f64>>,
}

/// Everything the chart shows.
#[derive(Clone, Debug)]
pub struct BarChart {
    pub title: String,
    pub y_label: String,
    pub categories: Vec<String>,
    pub series: Vec<Series>,
    /// Horizontal dashed line, e.g. `Some(1.0)` for "same as baseline".
    pub reference_line: Option<f64>,
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

impl BarChart {
    /// Largest value the y axis must show (bars, whiskers and the reference line).
    fn y_max(&self) -> f64 {
        let mut top = self.reference_line.unwrap_or(0.0);
        for series in &self.series {
            for (i, value) in series.values.iter().enumerate() {
                let error = series.errors.get(i).copied().flatten().unwrap_or(0.0);
                if let Some(value) = value.filter(|v| v.is_finite()) {
                    top = top.max(value + error.max(0.0));
                }
            }
        }
        // Headroom for the legend, which sits at the top.
        if top > 0.0 {
            top * 1.35
        } else {
            1.0
        }
    }

    /// Renders the chart as an SVG file.
    pub fn write_svg(&self, path: &Path) -> Result<()> {
        self.draw(path).with_context(|| {
            format!(
                "cannot write the chart {}: check that its directory exists and is writable",
                path.display()
            )
        })
    }

    fn draw(&self, path: &Path) -> Result<()> {
        let categories = self.categories.len().max(1);
        let width_px = (160 + categories as u32 * (30 + 14 * self.series.len() as u32)).max(640);
        let root = SVGBackend::new(path, (width_px, 480)).into_drawing_area();
        let plot_error = |e: &dyn std::fmt::Display| anyhow!("{e}");
        root.fill(&WHITE).map_err(|e| plot_error(&e))?;

        let x_range = -0.5..(categories as f64 - 0.5);
        let mut chart = ChartBuilder::on(&root)
            .caption(&self.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(x_range.clone(), 0.0..self.y_max())
            .map_err(|e| plot_error(&e))?;

        let labels = &self.categories;
        let label_at = |x: &f64| {
            let nearest = x.round();
            if (x - nearest).abs() < 1e-6 && nearest >= 0.0 {
                labels.get(nearest as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .y_max_light_lines(1)
            .x_labels(categories)
            .x_label_formatter(&label_at)
            .y_desc(&self.y_label)
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(|e| plot_error(&e))?;

        // Bars of one group share 80% of the category width, leaving a gap between groups.
        let bar_width = 0.8 / self.series.len().max(1) as f64;
        for (index, series) in self.series.iter().enumerate() {
            let color = COLORS[index % COLORS.len()];
            let left_of = |category: usize| category as f64 - 0.4 + index as f64 * bar_width;
            let bars = series
                .values
                .iter()
                .enumerate()
                .filter_map(|(category, value)| {
                    let value = value.filter(|v| v.is_finite())?;
                    let x0 = left_of(category);
                    Some(Rectangle::new(
                        [(x0, 0.0), (x0 + bar_width * 0.92, value)],
                        color.filled(),
                    ))
                });
            chart
                .draw_series(bars)
                .map_err(|e| plot_error(&e))?
                .label(series.name.as_str())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled())
                });

            let whiskers = series
                .values
                .iter()
                .enumerate()
                .filter_map(|(category, value)| {
                    let value = value.filter(|v| v.is_finite())?;
                    let error = series.errors.get(category).copied().flatten()?;
                    let x = left_of(category) + bar_width * 0.46;
                    Some(PathElement::new(
                        vec![(x, (value - error).max(0.0)), (x, value + error)],
                        BLACK.stroke_width(1),
                    ))
                });
            chart.draw_series(whiskers).map_err(|e| plot_error(&e))?;
        }

        if let Some(reference) = self.reference_line {
            let dashes = (0..categories * 4).map(|i| {
                let x0 = x_range.start + i as f64 * 0.25;
                PathElement::new(
                    vec![(x0, reference), (x0 + 0.15, reference)],
                    BLACK.stroke_width(1),
                )
            });
            chart.draw_series(dashes).map_err(|e| plot_error(&e))?;
        }

        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .draw()
            .map_err(|e| plot_error(&e))?;
        root.present().map_err(|e| plot_error(&e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_svg_with_labels_and_legend() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chart.svg");
        let chart = BarChart {
            title: "Relative time per test".into(),
            y_label: "time / unix time".into(),
            categories: (1..=16).map(|i| i.to_string()).collect(),
            series: vec![
                Series {
                    name: "unix".into(),
                    values: vec![Some(1.0); 16],
                    errors: vec![Some(0.05); 16],
                },
                Series {
                    name: "io_uring".into(),
                    values: (0..16)
                        .map(|i| (i != 3).then_some(0.5 + i as f64 * 0.1))
                        .collect(),
                    errors: vec![None; 16],
                },
            ],
            reference_line: Some(1.0),
        };
        chart.write_svg(&path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        // plotters writes each text on its own line between the tags.
        for text in [
            "Relative time per test",
            "io_uring",
            "unix",
            "\n16\n",
            "\n1\n",
        ] {
            assert!(svg.contains(text), "missing {text:?}");
        }
    }

    #[test]
    fn error_names_the_file() {
        let chart = BarChart {
            title: "t".into(),
            y_label: "y".into(),
            categories: vec!["a".into()],
            series: vec![],
            reference_line: None,
        };
        let message = format!(
            "{:#}",
            chart
                .write_svg(Path::new("/nonexistent-x/c.svg"))
                .unwrap_err()
        );
        assert!(message.contains("/nonexistent-x/c.svg"), "{message}");
    }
}
