//! The charts of BENCHMARKS.md: a bench's figures drawn as lines in SVG
//! (plotters' SVG backend), panels side by side, written beside the
//! section the bench writes (`docs/bench/NAME.svg`) and linked from it.
//!
//! A chart is drawn only from what the run measured: the bench passes its
//! own figures, one [`Line`] per subject (a driver, a kind of reader), each
//! point a size it ran at.

use std::ops::Range;

use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::prelude::*;

/// The colours of a panel's lines, in order (the same subject takes the
/// same place in every panel, so the same colour).
const COLOURS: [RGBColor; 5] = [
    RGBColor(0xd9, 0x48, 0x0f),
    RGBColor(0x18, 0x64, 0xab),
    RGBColor(0x2b, 0x8a, 0x3e),
    RGBColor(0x86, 0x2e, 0x9c),
    RGBColor(0x5c, 0x5f, 0x66),
];

/// One panel's axis.
#[derive(Clone, Debug)]
pub struct Axis {
    /// What it measures, with its unit.
    pub label: String,
    /// Logarithmic (sizes over decades) or linear from zero.
    pub log: bool,
}

impl Axis {
    /// A linear axis from zero.
    pub fn linear(label: impl Into<String>) -> Self {
        Self {
            label: label.into(),
            log: false,
        }
    }

    /// A logarithmic axis over whole decades.
    pub fn log(label: impl Into<String>) -> Self {
        Self {
            label: label.into(),
            log: true,
        }
    }

    /// The range shown for `values`.
    fn range(&self, values: impl Iterator<Item = f64>) -> Range<f64> {
        let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
        if !lo.is_finite() || !hi.is_finite() {
            return if self.log { 1.0..10.0 } else { 0.0..1.0 };
        }
        if self.log {
            let lo = lo.max(1e-3).log10().floor();
            let hi = hi.max(1e-3).log10().ceil().max(lo + 1.0);
            10f64.powf(lo)..10f64.powf(hi)
        } else {
            0.0..(hi * 1.1).max(1e-9)
        }
    }
}

/// One subject's figures: `(size, value)` points, joined in order.
#[derive(Clone, Debug)]
pub struct Line {
    /// Its name in the legend.
    pub name: String,
    /// Its points.
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed (a second setting of the same subject).
    pub dashed: bool,
    /// Its place in the palette.
    pub colour: usize,
}

/// One panel.
#[derive(Clone, Debug)]
pub struct Panel {
    /// Its title.
    pub title: String,
    /// The horizontal axis (the size).
    pub x: Axis,
    /// The vertical axis (the figure).
    pub y: Axis,
    /// Its lines; one with no point is left out.
    pub lines: Vec<Line>,
}

/// Panels side by side, each `width` by `height` pixels: the SVG document.
///
/// # Errors
/// What plotters could not draw.
pub fn svg(panels: &[Panel], (width, height): (u32, u32)) -> anyhow::Result<String> {
    let mut out = String::new();
    {
        let columns = u32::try_from(panels.len().max(1))?;
        let root = SVGBackend::with_string(&mut out, (width * columns, height)).into_drawing_area();
        root.fill(&WHITE).map_err(drawing)?;
        let areas = root.split_evenly((1, panels.len().max(1)));
        for (area, panel) in areas.iter().zip(panels) {
            draw_panel(area, panel)?;
        }
        root.present().map_err(drawing)?;
    }
    Ok(out)
}

/// Writes `panels` to `path` (relative to the workspace root).
///
/// # Errors
/// What could not be drawn or written.
pub fn write(path: &str, panels: &[Panel], size: (u32, u32)) -> anyhow::Result<()> {
    let file = crate::workspace_root().join(path);
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&file, svg(panels, size)?)?;
    eprintln!("wrote {}", file.display());
    Ok(())
}

fn drawing(error: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("drawing a chart: {error}")
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
) -> anyhow::Result<()> {
    let points = || panel.lines.iter().flat_map(|l| l.points.iter().copied());
    let x = panel.x.range(points().map(|(x, _)| x));
    let y = panel.y.range(points().map(|(_, y)| y));
    match (panel.x.log, panel.y.log) {
        (true, true) => draw(area, panel, x.log_scale(), y.log_scale()),
        (true, false) => draw(area, panel, x.log_scale(), y),
        (false, true) => draw(area, panel, x, y.log_scale()),
        (false, false) => draw(area, panel, x, y),
    }
}

fn draw<DB, X, Y>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
    x: X,
    y: Y,
) -> anyhow::Result<()>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(x, y)
        .map_err(drawing)?;
    chart
        .configure_mesh()
        .x_desc(&panel.x.label)
        .y_desc(&panel.y.label)
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
        .light_line_style(WHITE)
        .draw()
        .map_err(drawing)?;
    for line in panel.lines.iter().filter(|l| !l.points.is_empty()) {
        let colour = COLOURS[line.colour % COLOURS.len()];
        let style = colour.stroke_width(2);
        let points = line.points.iter().copied();
        let series = if line.dashed {
            chart
                .draw_series(DashedLineSeries::new(points, 6, 4, style))
                .map_err(drawing)?
        } else {
            chart
                .draw_series(LineSeries::new(points, style))
                .map_err(drawing)?
        };
        series.label(&line.name).legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
        });
        chart
            .draw_series(
                line.points
                    .iter()
                    .map(|&p| Circle::new(p, 3, colour.filled())),
            )
            .map_err(drawing)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK.mix(0.3))
        .draw()
        .map_err(drawing)?;
    Ok(())
}

/// A tick's label: whole numbers as they are (thousands as `k`), others
/// to two places at most.
fn tick(value: &f64) -> String {
    let v = *value;
    if v >= 1000.0 && (v / 1000.0).fract() == 0.0 {
        format!("{}k", v / 1000.0)
    } else if v.fract() == 0.0 {
        format!("{v}")
    } else {
        format!("{v:.2}").trim_end_matches('0').to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn panel(log: bool) -> Panel {
        Panel {
            title: "Time to converge".into(),
            x: Axis::log("MyApps"),
            y: if log {
                Axis::log("seconds")
            } else {
                Axis::linear("seconds")
            },
            lines: vec![
                Line {
                    name: "kubewasm".into(),
                    points: vec![(1000.0, 2.8), (10000.0, 31.2)],
                    dashed: false,
                    colour: 0,
                },
                Line {
                    name: "nothing measured".into(),
                    points: vec![],
                    dashed: true,
                    colour: 1,
                },
            ],
        }
    }

    #[test]
    fn a_chart_should_draw_each_measured_line_with_its_points_and_name() -> anyhow::Result<()> {
        let svg = svg(&[panel(true), panel(false)], (400, 300))?;
        assert!(svg.starts_with("<svg"), "{svg}");
        assert_eq!(svg.matches("Time to converge").count(), 2);
        assert_eq!(
            svg.matches("kubewasm").count(),
            2,
            "one legend entry a panel"
        );
        assert!(
            !svg.contains("nothing measured"),
            "a line without points is left out"
        );
        assert_eq!(svg.matches("<circle").count(), 4, "a point each");
        Ok(())
    }

    #[test]
    fn ticks_should_read_as_numbers_people_write() {
        let labels: Vec<_> = [1.0, 10.0, 1000.0, 10000.0, 2500.0, 0.5, 0.25, 1.5]
            .iter()
            .map(tick)
            .collect();
        assert_eq!(
            labels,
            ["1", "10", "1k", "10k", "2500", "0.5", "0.25", "1.5"]
        );
    }

    #[test]
    fn a_log_axis_should_span_whole_decades_and_a_linear_one_start_at_zero() {
        let log = Axis::log("x").range([2.8, 31.2].into_iter());
        assert!(
            (log.start - 1.0).abs() < 1e-9 && (log.end - 100.0).abs() < 1e-9,
            "{log:?}"
        );
        let linear = Axis::linear("x").range([2.0, 10.0].into_iter());
        assert!(
            linear.start == 0.0 && (linear.end - 11.0).abs() < 1e-9,
            "{linear:?}"
        );
    }
}
