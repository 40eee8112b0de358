//! How big a benchmark run is, and how every benchmark reports its figures: one table for the
//! reader, then one JSON line per figure for tools,
//! `{"bench", "name", "value", "unit", "ceiling", "ratio"}` (`ceiling` and `ratio` null where
//! the figure has none). `cargo xtask bench --smoke` reads those lines: a benchmark that prints
//! none has failed.

/// How big a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Size {
    /// The benchmark as its figures are recorded (`docs/benchmarks.md`).
    Full,
    /// `--smoke`: every part of the benchmark at a small size, to show that it runs and prints
    /// its figures; the figures themselves mean nothing.
    Smoke,
}

impl Size {
    /// The size `args` ask for (`--smoke` anywhere among them), and the other arguments.
    pub(crate) fn of(args: &[String]) -> (Size, Vec<String>) {
        let size = if args.iter().any(|arg| arg == "--smoke") { Size::Smoke } else { Size::Full };
        (size, args.iter().filter(|arg| *arg != "--smoke").cloned().collect())
    }

    /// `full` for a full run, `smoke` for a smoke run.
    pub(crate) fn pick<T>(self, full: T, smoke: T) -> T {
        match self {
            Size::Full => full,
            Size::Smoke => smoke,
        }
    }
}

/// The profile this binary was built in, which is the profile of the `kayra-controller` the
/// benchmarks run: the one built beside it.
pub(crate) fn profile() -> &'static str {
    if cfg!(debug_assertions) { "debug" } else { "release" }
}

/// One figure: what was measured, and the ceiling measured beside it in the same run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Figure {
    name: String,
    value: f64,
    unit: &'static str,
    ceiling: Option<f64>,
    ratio: Option<f64>,
}

impl Figure {
    /// The ceiling measured beside this figure, in the same unit; the ratio becomes
    /// value / ceiling.
    pub(crate) fn ceiling(&mut self, ceiling: f64) -> &mut Figure {
        self.ceiling = Some(ceiling);
        self.ratio = Some(self.value / ceiling);
        self
    }

    /// The ratio, where it is not value / ceiling (the median of several rounds' ratios).
    pub(crate) fn ratio(&mut self, ratio: f64) -> &mut Figure {
        self.ratio = Some(ratio);
        self
    }

    /// The figure's JSON line, its keys in the order the module's header gives.
    fn json(&self, bench: &str) -> String {
        use serde_json::Value;
        format!(
            r#"{{"bench":{},"name":{},"value":{},"unit":{},"ceiling":{},"ratio":{}}}"#,
            Value::from(bench),
            Value::from(self.name.as_str()),
            Value::from(self.value),
            Value::from(self.unit),
            Value::from(self.ceiling),
            Value::from(self.ratio),
        )
    }
}

/// The figures of one benchmark's run, printed by [`Report::print`].
#[derive(Debug)]
pub(crate) struct Report {
    bench: &'static str,
    size: Size,
    figures: Vec<Figure>,
}

impl Report {
    /// An empty report of benchmark `bench` (its `kayra-bench` subcommand).
    pub(crate) fn new(bench: &'static str, size: Size) -> Report {
        Report { bench, size, figures: Vec::new() }
    }

    /// Adds a figure without a ceiling; answers it, to give it one.
    pub(crate) fn figure(&mut self, name: impl Into<String>, value: f64, unit: &'static str) -> &mut Figure {
        self.figures.push(Figure { name: name.into(), value, unit, ceiling: None, ratio: None });
        self.figures.last_mut().expect("a figure was just pushed")
    }

    /// Prints the figures as a table, then one JSON line for each.
    pub(crate) fn print(&self) {
        let profile = profile();
        let size = self.size.pick("full size", "smoke size: the figures mean nothing");
        println!("\nkayra-bench {}: {} figures ({profile} build, {size})", self.bench, self.figures.len());
        let width = self.figures.iter().map(|figure| figure.name.chars().count()).max().unwrap_or(4).max(4);
        println!("  {:<width$}  {:>12} {:<8} {:>12} {:>7}", "name", "value", "unit", "ceiling", "ratio");
        for figure in &self.figures {
            println!(
                "  {:<width$}  {:>12} {:<8} {:>12} {:>7}",
                figure.name,
                number(figure.value),
                figure.unit,
                figure.ceiling.map(number).unwrap_or_default(),
                figure
                    .ratio
                    .map(|ratio| if ratio.is_finite() { format!("{ratio:.2}") } else { "-".to_owned() })
                    .unwrap_or_default(),
            );
        }
        for figure in &self.figures {
            println!("{}", figure.json(self.bench));
        }
    }
}

/// A figure as the table shows it: whole numbers as they are and from 100 up, then more
/// digits the smaller; `-` for what is not a number (a ratio to a ceiling of zero).
fn number(value: f64) -> String {
    match value.abs() {
        v if !v.is_finite() => "-".to_owned(),
        v if v >= 100.0 || value.fract() == 0.0 => format!("{value:.0}"),
        v if v >= 1.0 => format!("{value:.2}"),
        _ => format!("{value:.3}"),
    }
}

#[cfg(test)]
mod tests;
