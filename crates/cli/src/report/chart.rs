//! SVG charts: a grouped bar chart (one group of bars per category, one colour per
//! series) and a line chart on logarithmic axes (one line per series, e.g. throughput
//! against thread count). Both are [`SvgChart`]s, what the export manager writes.
//!
//! Kept to what reads at a glance: bars from zero, an optional dashed reference line
//! (e.g. 1.0 = as fast as the baseline), optional ±error whiskers, a legend, and category
//! labels under each group. Long category names should be shortened by the caller
//! (e.g. test numbers) and explained in the docs or the title.

use std::path::Path;

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

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

/// A chart the export manager can write to `--chart FILE.svg`.
pub trait SvgChart {
    /// Renders the chart as an SVG file; the error names the file.
    fn write_svg(&self, path: &Path) -> Result<()>;
}

impl SvgChart for BarChart {
    fn write_svg(&self, path: &Path) -> Result<()> {
        BarChart::write_svg(self, path)
    }
}

/// One line of a [`LineChart`]: points `(x, y)`, both positive (log axes).
#[derive(Clone, Debug)]
pub struct Line {
    pub name: String,
    /// Index into the palette: lines of one quantity share a colour.
    pub color: usize,
    /// Index of the marker shape (circle, triangle, cross, square): lines of one
    /// target share a marker.
    pub marker: usize,
    pub points: Vec<(f64, f64)>,
}

/// Lines on log-log axes, x labelled with the x values the lines have (thread counts).
#[derive(Clone, Debug)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub lines: Vec<Line>,
}

impl LineChart {
    /// The smallest and largest positive finite coordinate along `axis`, with room
    /// around them (and a decade when all are equal), or `None` when no point has one.
    fn range(&self, axis: fn(&(f64, f64)) -> f64, margin: f64) -> Option<(f64, f64)> {
        let values = self
            .lines
            .iter()
            .flat_map(|line| &line.points)
            .map(axis)
            .filter(|v| v.is_finite() && *v > 0.0);
        let (low, high) = values.fold(None, |range: Option<(f64, f64)>, v| {
            Some(range.map_or((v, v), |(low, high)| (low.min(v), high.max(v))))
        })?;
        Some((low / margin, high * margin))
    }

    fn draw(&self, path: &Path) -> Result<()> {
        let plot_error = |e: &dyn std::fmt::Display| anyhow!("{e}");
        let (x_low, x_high) = self
            .range(|p| p.0, 1.25)
            .ok_or_else(|| anyhow!("no point with positive coordinates to draw"))?;
        // Headroom at the top for the legend.
        let (y_low, y_high) = self.range(|p| p.1, 1.5).unwrap_or((0.1, 10.0));
        let y_high = y_high * (y_high / y_low).powf(0.6);
        let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot_error(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(&self.title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(72)
            .build_cartesian_2d((x_low..x_high).log_scale(), (y_low..y_high).log_scale())
            .map_err(|e| plot_error(&e))?;
        let mut ticks: Vec<f64> = self
            .lines
            .iter()
            .flat_map(|line| line.points.iter().map(|p| p.0))
            .collect();
        ticks.sort_by(f64::total_cmp);
        ticks.dedup();
        // The axis's own key points of a log range are not the x values; those are
        // written along the bottom edge instead.
        chart
            .configure_mesh()
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .disable_x_mesh()
            .x_label_formatter(&|_| String::new())
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(|e| plot_error(&e))?;
        let style = TextStyle::from(("sans-serif", 13).into_font())
            .pos(Pos::new(HPos::Center, VPos::Bottom));
        chart
            .draw_series(
                ticks
                    .iter()
                    .map(|&x| Text::new(format!("{x}"), (x, y_low), style.clone())),
            )
            .map_err(|e| plot_error(&e))?;
        for line in &self.lines {
            let color = COLORS[line.color % COLORS.len()];
            let points: Vec<(f64, f64)> = line
                .points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && *x > 0.0 && y.is_finite() && *y > 0.0)
                .collect();
            let marker = line.marker % 4;
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(|e| plot_error(&e))?
                .label(line.name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
            let shapes = points.into_iter().map(move |point| -> DynElement<_, _> {
                match marker {
                    0 => Circle::new(point, 4, color.filled()).into_dyn(),
                    1 => TriangleMarker::new(point, 5, color.filled()).into_dyn(),
                    2 => Cross::new(point, 5, color.stroke_width(2)).into_dyn(),
                    _ => Rectangle::new([point, point], color.stroke_width(6)).into_dyn(),
                }
            });
            chart.draw_series(shapes).map_err(|e| plot_error(&e))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(|e| plot_error(&e))?;
        root.present().map_err(|e| plot_error(&e))?;
        Ok(())
    }
}

impl SvgChart for LineChart {
    fn write_svg(&self, path: &Path) -> Result<()> {
        self.draw(path).with_context(|| {
            format!(
                "cannot write the chart {}: check that its directory exists and is writable",
                path.display()
            )
        })
    }
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
    fn writes_a_line_chart_with_every_line_and_the_x_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lines.svg");
        let line = |name: &str, color, marker, scale: f64| Line {
            name: name.into(),
            color,
            marker,
            points: [1.0, 2.0, 4.0, 64.0]
                .iter()
                .map(|&x| (x, x * scale))
                .collect(),
        };
        let chart = LineChart {
            title: "Throughput by threads".into(),
            x_label: "threads".into(),
            y_label: "operations/s".into(),
            lines: vec![
                line("reads/s unix", 0, 0, 1000.0),
                line("reads/s io_uring", 0, 1, 1100.0),
                line("commits/s unix", 1, 0, 3.0),
                line("commits/s io_uring", 1, 1, 3.3),
            ],
        };
        SvgChart::write_svg(&chart, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"));
        for text in [
            "Throughput by threads",
            "reads/s io_uring",
            "commits/s unix",
            "\n64\n",
            "\n4\n",
        ] {
            assert!(svg.contains(text), "missing {text:?}");
        }
        let empty = LineChart {
            lines: vec![],
            ..chart
        };
        let message = format!("{:#}", SvgChart::write_svg(&empty, &path).unwrap_err());
        assert!(
            message.contains("no point") && message.contains("lines.svg"),
            "{message}"
        );
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
